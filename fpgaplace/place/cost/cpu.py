"""What an op costs on a CPU core: its time measured by profiling the whole model with onnxruntime
on this host (median of runs after a warm-up), scaled from this host's measured GFLOP/s to the
board CPU's rated ones, with both cached per model content and host on disk
(``CpuProfileCache``); analytic ``2 * MACs / GFLOP/s`` where a node has no measurement.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from fpgaplace.board.model import Board, CpuCore
from fpgaplace.model.ir import Op, OpGraph
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.files import write_file

CPU_CACHE_FORMAT = "fpgaplace-cpu-costs/1"  # in every profile cache key: a new format never reads old files


PROFILE_WARMUP_RUNS = 1  # untimed runs before a profile's timed ones


MAX_PROFILE_RUNS = 1000


MIN_PROFILE_SECONDS = 0.25  # timed runs go on (past profile_runs) until they took this long


HOST_RATE_SIZE = 256  # n of the n^3 MatMul that measures the host's GFLOP/s


HOST_RATE_SAMPLES = 24  # timed MatMuls per host-rate measurement (0.4 ms each on a 75 GFLOP/s core)


MAX_CACHE_FILE_BYTES = 64 << 20  # a bigger profile file is not read (no model has a million ops)


def cpu_kinds(board: Board) -> list[tuple[str, list[CpuCore]]]:
    groups: dict[tuple, list[CpuCore]] = {}
    for cpu in board.cpus:
        groups.setdefault((cpu.kind, cpu.gflops), []).append(cpu)
    if len(groups) == 1:
        return [("cpu", next(iter(groups.values())))]
    return [(f"cpu-{cpus[0].kind}", cpus) for cpus in groups.values()]


def _host_rate_samples(samples: int, n: int = HOST_RATE_SIZE) -> list[float]:
    """``samples`` single-thread float32 GFLOP/s figures of this host: an n^3 MatMul in onnxruntime
    with one thread, the engine and thread budget the per-op profile uses (after one warm-up)."""
    from onnx import TensorProto, helper

    from fpgaplace.util import onnxrt

    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [n, n])
    c = helper.make_tensor_value_info("c", TensorProto.FLOAT, [n, n])
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "a"], ["c"])], "gflops", [a], [c])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    session = onnxrt.session(model, "host rate MatMul", threads=1)
    feed = {"a": np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)}
    session.run(None, feed)
    rates = []
    for _ in range(samples):
        start = time.perf_counter()
        session.run(None, feed)
        rates.append(2 * n**3 / (time.perf_counter() - start) / 1e9)
    return rates


def host_gflops(samples: int = HOST_RATE_SAMPLES, n: int = HOST_RATE_SIZE) -> float:
    """Single-thread float32 GFLOP/s of this host: the median of ``samples`` timed n^3 MatMuls."""
    return statistics.median(_host_rate_samples(samples, n))


@dataclass(frozen=True)
class CpuProfile:
    """One profile of a model on this host: per-op median time (us) and the host's GFLOP/s
    measured around it (half its samples just before the profile, half just after, median of all),
    so load on a shared machine slows both alike and their product, the board figure, moves less."""

    op_us: dict[str, float]
    host_gflops: float

    def to_dict(self) -> dict:
        return {"op_us": self.op_us, "host_gflops": self.host_gflops}

    @staticmethod
    def from_dict(data: dict) -> CpuProfile:
        """The profile in ``data``; ValueError unless every time is finite and >= 0 and the rate > 0."""
        op_us = {str(name): float(us) for name, us in dict(data["op_us"]).items()}
        rate = float(data["host_gflops"])
        if not all(math.isfinite(us) and us >= 0 for us in op_us.values()) or not (math.isfinite(rate) and rate > 0):
            raise ValueError("a CPU time is negative or not finite, or the host rate is not positive")
        return CpuProfile(op_us, rate)


def default_cpu_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/fpgaplace/cpu-costs`` (``~/.cache`` when it is unset or not absolute)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(base) if os.path.isabs(base) else Path.home() / ".cache"
    return root / "fpgaplace" / "cpu-costs"


def _cpu_model_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def host_identity() -> dict[str, str | int]:
    """What a CPU measurement depends on besides the model: host name, machine, CPU model, core
    count and the onnxruntime version that ran it."""
    import onnxruntime as ort

    return {
        "host": platform.node(),
        "machine": platform.machine(),
        "cpu": _cpu_model_name(),
        "cores": os.cpu_count() or 0,
        "onnxruntime": ort.__version__,
    }


def model_digest(model: onnx.ModelProto) -> str:
    """SHA-256 of the model's deterministic serialization with the graph name cleared (a name is
    not content: the same model under two names shares its profile)."""
    name = model.graph.name
    model.graph.name = ""
    try:
        data = model.SerializeToString(deterministic=True)
    finally:
        model.graph.name = name
    return hashlib.sha256(data).hexdigest()


def profile_key(model: onnx.ModelProto, runs: int) -> dict:
    """The cache key of a profile of ``model``: format, model digest, least timed runs and host. The
    board is not in it: the cache holds host figures, which the board's CPU rating only scales."""
    method = {"runs": runs, "min_seconds": MIN_PROFILE_SECONDS, "rate_samples": HOST_RATE_SAMPLES}
    return {"format": CPU_CACHE_FORMAT, "model": model_digest(model), **method, **host_identity()}


@dataclass(frozen=True)
class CpuProfileCache:
    """A folder of CPU profiles, one JSON file per key (named by the key's SHA-256). Files are
    written atomically (a temporary file renamed into place); a file that is unreadable, is not
    valid JSON, holds another key or invalid figures is ignored (the model is measured again and
    the file replaced); a folder that cannot be written only means nothing is kept."""

    folder: Path

    def path(self, key: dict) -> Path:
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
        return self.folder / f"{digest[:40]}.json"

    def load(self, key: dict) -> CpuProfile | None:
        path = self.path(key)
        try:
            if path.stat().st_size > MAX_CACHE_FILE_BYTES:
                return None
            record = json.loads(path.read_text())
            if not isinstance(record, dict) or record.get("key") != key:
                return None
            return CpuProfile.from_dict(record)
        except (OSError, ValueError, TypeError, KeyError, RecursionError):
            return None

    def store(self, key: dict, profile: CpuProfile) -> bool:
        """Write ``profile`` under ``key``; False (and nothing left behind) if the folder is not writable."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            write_file(self.path(key), json.dumps({"key": key, **profile.to_dict()}))
            return True
        except OSError:
            return False


def _check_runs(runs: int) -> None:
    if isinstance(runs, bool) or not isinstance(runs, int) or not 1 <= runs <= MAX_PROFILE_RUNS:
        raise FpgaplaceError(f"profile_runs: expected an integer from 1 to {MAX_PROFILE_RUNS}, got {runs!r}")


def cpu_profile(graph: OpGraph, runs: int = 5, cache: CpuProfileCache | None = None) -> CpuProfile:
    """``graph``'s CPU profile on this host: from ``cache`` when it holds one for this model, run
    count and host, else measured (``measure_cpu_profile``) and stored there."""
    _check_runs(runs)
    model = graph.to_onnx()
    key = profile_key(model, runs) if cache is not None else None
    if cache is not None:
        cached = cache.load(key)
        if cached is not None:
            return cached
    profile = measure_cpu_profile(model, runs, graph.name)
    if cache is not None:
        cache.store(key, profile)
    return profile


def measure_cpu_profile(model: onnx.ModelProto, runs: int, name: str) -> CpuProfile:
    """Profile ``model`` (``_profile_model``) between two halves of the host-rate samples."""
    before = _host_rate_samples(HOST_RATE_SAMPLES // 2)
    op_us = _profile_model(model, runs, name)
    after = _host_rate_samples(HOST_RATE_SAMPLES - HOST_RATE_SAMPLES // 2)
    return CpuProfile(op_us, statistics.median(before + after))


def profile_cpu_us(graph: OpGraph, runs: int = 5, cache: CpuProfileCache | None = None) -> dict[str, float]:
    """Per-op time (us, median of at least ``runs`` after a warm-up) of ``graph`` on this host's CPU."""
    return cpu_profile(graph, runs, cache).op_us


def _profile_model(model: onnx.ModelProto, runs: int, name: str) -> dict[str, float]:
    """Per-op time (us) of ``model`` by onnxruntime's profiler: ``PROFILE_WARMUP_RUNS`` untimed
    runs, then at least ``runs`` timed ones (``_run_for_profile``); each node's time is the
    median of its timed runs.

    The model runs single-threaded with graph optimizations off so each ONNX node keeps its
    own kernel and its own entry in the profile. Inputs are seeded random values, so the same
    model always runs on the same data.
    """
    import onnxruntime as ort

    from fpgaplace.util import onnxrt
    from fpgaplace.util.onnxrt import random_inputs

    with tempfile.TemporaryDirectory(prefix="fpgaplace-profile-") as tmp:
        options = ort.SessionOptions()
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(tmp, "profile")
        session = onnxrt.session(model, f"{name} (CPU profiling)", optimized=False, threads=1, options=options)
        feeds = random_inputs(model, integer_high=2)  # integers 0/1: in range of small index tables
        timed = _run_for_profile(session, feeds, runs)
        profile_path = session.end_profiling()
        events = json.loads(Path(profile_path).read_text())
    return _node_times_us(events, timed)


def _run_for_profile(session, feeds: dict[str, np.ndarray], runs: int) -> int:
    """Run ``PROFILE_WARMUP_RUNS`` untimed, then at least ``runs`` timed and more until they took
    ``MIN_PROFILE_SECONDS`` (at most ``MAX_PROFILE_RUNS``): a model whose runs are short gets
    enough of them that a burst of other work on the machine stays a minority. Returns the timed count."""
    for _ in range(PROFILE_WARMUP_RUNS):
        session.run(None, feeds)
    start, timed = time.perf_counter(), 0
    while timed < runs or (timed < MAX_PROFILE_RUNS and time.perf_counter() - start < MIN_PROFILE_SECONDS):
        session.run(None, feeds)
        timed += 1
    return timed


def _node_times_us(events: list[dict], runs: int) -> dict[str, float]:
    """Median kernel time per node name over its last ``runs`` runs in an onnxruntime profile
    (earlier entries are the warm-up). The median, unlike the minimum or the mean, moves little
    when a few runs are slowed by other work on the machine or one run is lucky."""
    per_node: dict[str, list[float]] = {}
    for event in events:
        if event.get("cat") != "Node" or not event.get("name", "").endswith("_kernel_time"):
            continue
        name = event["name"][: -len("_kernel_time")]
        per_node.setdefault(name, []).append(float(event["dur"]))
    return {name: float(statistics.median(times[-runs:])) for name, times in per_node.items()}


def cpu_latency_us(op: Op, cpu: CpuCore, measured_us: float | None, host_rate: float) -> float:
    """CPU time (us) of ``op`` on ``cpu``: the host measurement scaled by rated speed, else analytic."""
    if measured_us is not None:
        return measured_us * host_rate / cpu.gflops
    return max(2 * op.macs, op.output_bytes) / (cpu.gflops * 1e3)
