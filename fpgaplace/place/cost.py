"""Cost model: per-op latency on each device kind, on-chip footprint, transfer times.

Its output is the ``PlacementProblem`` the solvers read. Times are in microseconds.

FPGA core: what the hardware op library (``fpgaplace.hw``) says the op costs: its kernel's
  ``ideal_cycles`` (its share of the core's DSPs or LUT lanes, see ``fpgaplace.hw.kernel``),
  or the cycles to stream its weights from DRAM when they do not stay resident if those take
  longer (the stage reads its weights while it computes, as the folding's interval, the larger
  of compute and DRAM cycles, says), turned into microseconds by ``hw.cycles_to_us``. An op
  without a kernel, or whose line buffer does not fit the core's working area, cannot run on
  the core (infinite latency). ``codegen.refine`` corrects these costs where a folding
  measures otherwise (BRAM banks, coarse foldings).
On-chip memory of a core: a share ``WORKING_SHARE`` is the working area for streams and the
  rounding of memories into blocks; the rest holds what the ops keep on chip, which adds up over
  the ops on the core (all stages of a dataflow exist at once): an op's footprint m(v) is its
  kernel's line buffer and per-channel words, plus its weights when they stay resident. Which
  weights stay resident is decided here, once: smallest first, each at most ``RESIDENT_LIMIT``
  of the smallest core's weight area, until they fill ``RESIDENT_BUDGET`` of all cores' weight
  areas together (so the cores can hold every resident op with room to spare, and no op is
  pushed to a CPU only because memory ran out). The other weights are streamed from DRAM at
  every run.
CPU core: the op's time measured by profiling the whole model with onnxruntime on this host
  (median of ``profile_runs`` runs after a warm-up), scaled by (host GFLOP/s) / (board CPU
  GFLOP/s), the host rate measured around the profile; both are cached per model content and
  host (``CpuProfileCache``), so a second run reads the same figures. Where a node has no
  measurement, analytic ``2 * macs / GFLOP/s``.
Element widths: every tensor has its own bit width where a QONNX quantizer gives one
  (``TensorInfo.quant_bits``, carried through ops that only move values), else the precision asked
  for (``PRECISION_BITS``: binary, int2, int4, int8, int16, float16, float32); an op's kernel is
  costed at its operands' widths (``op_bits``, ``hw.kernel.with_precision``): weights stored and
  streamed at their width, line buffers at the input's, and the MACs a DSP takes at the lane's width
  (``hw.kernel.macs_per_dsp``: twice the int8 count at 4 and 2 bits, LUT lanes for binary).
Transfer c(u): bytes of u's outputs, each at its width (packed below 8 bits), over the link that joins the two
  devices (``Board.link_between``: the AXI stream between two cores of a board, DRAM or PCIe
  between a core and a CPU, the network between nodes; a tensor that leaves a core and returns
  to it goes through the core's DRAM), latency included. The problem carries one time per link
  (``PlacementProblem.links``), which the evaluator charges; its ``transfer`` is the costliest
  link's time, the upper bound the solvers' models use.
Fused ops (annotated by ``fpgaplace.model.passes.fuse``): a fused group shares one colour class so
  every solver keeps it on one device; on a core each member is a stage of the same dataflow.
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

from fpgaplace import hw
from fpgaplace.board.model import Board, CpuCore, FpgaCore, Link
from fpgaplace.hw.folding import streamed_cycles
from fpgaplace.hw.kernel import PRECISION_BITS as KERNEL_BITS
from fpgaplace.hw.kernel import bits_to_bytes, with_precision
from fpgaplace.model import ops
from fpgaplace.model.ir import Op, OpGraph
from fpgaplace.model.passes.fuse import fused_head
from fpgaplace.place.solvers.problem import DeviceKind, Links, PlacementProblem
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.files import write_file

PRECISION_BITS = {"binary": 1, "int2": 2, "int4": 4, "int8": 8, "int16": 16, "float16": 16, "float32": 32}
"""Bits of one element at each precision the cores may compute at (``CostOptions.precision``): the
default width of every tensor whose own width (``TensorInfo.quant_bits``, from a QONNX quantizer)
is not known."""
PRECISION_BYTES = {name: bits / 8 for name, bits in PRECISION_BITS.items()}
"""The same in bytes per element (fractional below 8 bits); the functions below that take a
``precision`` take these bytes per element."""
WORKING_SHARE = 0.5  # of a core's on-chip bytes: the working area (streams, block rounding)
RESIDENT_LIMIT = 0.5  # an op's weights may stay resident if they take at most this share of a weight area
RESIDENT_BUDGET = 0.5  # resident weights fill at most this share of all cores' weight areas together
CPU_CACHE_FORMAT = "fpgaplace-cpu-costs/1"  # in every profile cache key: a new format never reads old files
PROFILE_WARMUP_RUNS = 1  # untimed runs before a profile's timed ones
MAX_PROFILE_RUNS = 1000
MIN_PROFILE_SECONDS = 0.25  # timed runs go on (past profile_runs) until they took this long
HOST_RATE_SIZE = 256  # n of the n^3 MatMul that measures the host's GFLOP/s
HOST_RATE_SAMPLES = 24  # timed MatMuls per host-rate measurement (0.4 ms each on a 75 GFLOP/s core)
MAX_CACHE_FILE_BYTES = 64 << 20  # a bigger profile file is not read (no model has a million ops)


@dataclass(frozen=True)
class CostOptions:
    """How ``op_costs`` costs a graph.

    ``profile_cpu`` measures CPU op times with onnxruntime (else analytic only): one warm-up run
    and at least ``profile_runs`` timed runs (more while they take under ``MIN_PROFILE_SECONDS``
    in all), an op's time the median of its timed runs. ``cpu_cache`` keeps each profile, with
    the host rate measured beside it, in ``cpu_cache_dir`` (None: ``default_cpu_cache_dir()``),
    keyed by the model's content, the timing method and the host (``profile_key``), so the next
    run on the same model and host reads the same figures; without it every run measures again
    (and two runs on a loaded machine can differ by a factor of 2, see tests/test_cost.py).
    """

    precision: str = "int8"
    profile_cpu: bool = True
    profile_runs: int = 5
    cpu_cache: bool = True
    cpu_cache_dir: Path | None = None

    def profile_cache(self) -> CpuProfileCache | None:
        """The cache ``op_costs`` reads and writes CPU profiles in, or None when caching is off."""
        if not self.cpu_cache:
            return None
        return CpuProfileCache(Path(self.cpu_cache_dir) if self.cpu_cache_dir is not None else default_cpu_cache_dir())


@dataclass
class OpCost:
    """One op's costs: latency (us) per device kind, on-chip bytes, output transfer (us)."""

    name: str
    op_type: str
    latency_us: dict[str, float]  # device kind name -> us; inf where unsupported
    onchip_bytes: int  # resident weight bytes (the placement's m(v))
    streamed: bool  # weights or activations go through DRAM at every run
    transfer_us: float  # over the costliest link between the board's devices (the solvers' c(v))
    output_bytes: int  # what moving its outputs to another device transfers
    cpu_measured: bool


def fpga_core_kinds(board: Board) -> list[tuple[str, list[FpgaCore]]]:
    """Group identical cores (equal ``kind_key``) into named kinds, in board order."""
    groups: dict[tuple, list[FpgaCore]] = {}
    for core in board.cores:
        groups.setdefault(core.kind_key, []).append(core)
    if len(groups) == 1:
        return [("core", next(iter(groups.values())))]
    return [(f"core-{cores[0].name}", cores) for cores in groups.values()]


def cpu_kinds(board: Board) -> list[tuple[str, list[CpuCore]]]:
    groups: dict[tuple, list[CpuCore]] = {}
    for cpu in board.cpus:
        groups.setdefault((cpu.kind, cpu.gflops), []).append(cpu)
    if len(groups) == 1:
        return [("cpu", next(iter(groups.values())))]
    return [(f"cpu-{cpus[0].kind}", cpus) for cpus in groups.values()]


def precision_bits(precision: float) -> int:
    """Bits per element of ``precision`` bytes per element (a ``PRECISION_BYTES`` value)."""
    return max(1, round(precision * 8))


def tensor_bits(graph: OpGraph, tensor: str, default_bits: int) -> int:
    """Bits of one element of ``tensor``: its own width (a QONNX quantizer's ``quant_bits``), else
    ``default_bits``; rounded up to a width the op library counts (3 bits take 4, 12 take 16)."""
    info = graph.tensors.get(tensor)
    bits = info.quant_bits if info is not None and info.quant_bits else default_bits
    return next((width for width in KERNEL_BITS if width >= bits), KERNEL_BITS[-1])


def op_bits(op: Op, graph: OpGraph, default_bits: int) -> tuple[int, int]:
    """(weight bits, activation bits) of ``op``'s operands, each by ``tensor_bits``: its first
    input's width, and a dot product's second input's (its weights, or the other activation of an
    attention MatMul); an op without that operand has no weights and gets the activation width."""
    activation = tensor_bits(graph, op.inputs[0], default_bits) if op.inputs and op.inputs[0] else default_bits
    if len(op.inputs) > 1 and op.inputs[1] and ops.is_dot_product(op.op_type, op.domain):
        return tensor_bits(graph, op.inputs[1], default_bits), activation
    return activation, activation


def _element_bytes(graph: OpGraph, tensors: list[str], precision: float) -> int:
    """Bytes of ``tensors``, each element at its own width or ``precision`` bytes (packed below 8 bits)."""
    default = precision_bits(precision)
    return sum(bits_to_bytes(graph.tensors[t].numel, tensor_bits(graph, t, default))
               for t in tensors if t in graph.tensors)


@dataclass(frozen=True)
class OnChipPlan:
    """How one op uses a core's memory: bytes it keeps resident and bytes it streams per run."""

    resident_bytes: int
    streamed_bytes: int


def weight_area(core_bytes: int) -> int:
    return int(core_bytes * (1 - WORKING_SHARE))


def plan_at_precision(op: Op, graph: OpGraph, precision: float) -> tuple[hw.Kernel, hw.Geometry] | None:
    """``op``'s kernel and geometry with the element widths of its operands (``op_bits``; the
    geometry's weights and activations at those bits, so its bytes and MACs per DSP follow), or
    None when no core runs it."""
    planned = hw.plan_op(op, graph)
    if not planned:
        return None
    kernel, geometry = planned
    return kernel, with_precision(geometry, *op_bits(op, graph, precision_bits(precision)))


def kernel_weight_bytes(op: Op, graph: OpGraph, precision: float) -> int:
    """On-chip weight bytes of ``op``'s kernel at its weights' width (0 for ops no core runs)."""
    planned = plan_at_precision(op, graph, precision)
    return planned[0].weight_bytes(planned[1], bits=planned[1].weight_bits) if planned else 0


def resident_ops(graph: OpGraph, board: Board, precision: float) -> set[str]:
    """Ops whose weights stay on chip: smallest first, within ``RESIDENT_LIMIT`` of the smallest
    core's weight area each and ``RESIDENT_BUDGET`` of all weight areas together. O(n log n)."""
    if not board.cores:
        return set()
    per_op_limit = RESIDENT_LIMIT * weight_area(min(core.onchip_bytes for core in board.cores))
    budget = RESIDENT_BUDGET * sum(weight_area(core.onchip_bytes) for core in board.cores)
    sizes = sorted((kernel_weight_bytes(op, graph, precision), name) for name, op in graph.ops.items())
    chosen, used = set(), 0
    for size, name in sizes:
        if size > per_op_limit or used + size > budget:
            break
        chosen.add(name)
        used += size
    return chosen


def on_chip_plan(op: Op, graph: OpGraph, precision: float, resident: bool) -> OnChipPlan:
    """m(v): the kernel's fixed on-chip bytes (line buffer at the input's width, per-channel words)
    plus its weights at their width when they stay resident; weights that do not cross the DRAM
    link at every run."""
    planned = plan_at_precision(op, graph, precision)
    if not planned:
        return OnChipPlan(0, 0)
    kernel, geometry = planned
    weights, fixed = kernel.weight_bytes(geometry, bits=geometry.weight_bits), kernel.fixed_bytes(geometry)
    return OnChipPlan(fixed + weights, 0) if resident else OnChipPlan(fixed, weights)


def fpga_latency_us(op: Op, graph: OpGraph, core: FpgaCore, board: Board, plan: OnChipPlan,
                    precision: float = 1) -> float:
    """Latency (us) of ``op`` on ``core``: its kernel's share of the core at its operands' widths
    (the MACs a DSP takes at that width, or LUT lanes for binary ones) or, when longer, its streamed
    weights over the DRAM link (read while it computes), both from the op library; infinite where no
    kernel runs it."""
    planned = plan_at_precision(op, graph, precision)
    if not planned:
        return math.inf
    kernel, geometry = planned
    if kernel.fixed_bytes(geometry) > weight_area(core.onchip_bytes):
        return math.inf
    cycles = max(kernel.ideal_cycles(geometry, core), streamed_cycles(plan.streamed_bytes, core, board.dram))
    return hw.cycles_to_us(cycles, core)


def board_links(board: Board) -> tuple[list[Link], np.ndarray]:
    """The distinct links between the board's devices (cores, then CPUs, in board order) and
    ``column[a, b]``, the index of the link a tensor takes from device a to device b: as
    ``Board.link_between`` says for two devices, the node's DRAM for a core to itself. O(B^2)."""
    devices: list = [*board.cores, *board.cpus]
    links: list[Link] = []
    column = np.zeros((len(devices), len(devices)), dtype=np.int64)
    for a, source in enumerate(devices):
        for b, target in enumerate(devices):
            link = board.node_board(source.node).dram if a == b else board.link_between(source, target)
            if link not in links:
                links.append(link)
            column[a, b] = links.index(link)
    return links, column


def output_bytes(op: Op, graph: OpGraph, precision: float) -> int:
    """Bytes of ``op``'s outputs, each at its own width or ``precision`` bytes per element (packed
    below 8 bits): what a transfer moves."""
    return _element_bytes(graph, op.outputs, precision)


def _transfer_times(nbytes: int, links: list[Link]) -> list[float]:
    return [link.transfer_us(nbytes) if nbytes else 0.0 for link in links]


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


def op_costs(graph: OpGraph, board: Board, options: CostOptions = CostOptions()) -> list[OpCost]:
    """Every op's costs on every device kind of ``board``, in topological order.

    Complexity: O(ops * kinds) plus, when profiling and the cache has no profile of the model,
    ``1 + options.profile_runs`` profiled onnxruntime runs of it.
    """
    if options.precision not in PRECISION_BYTES:
        raise FpgaplaceError(f"precision: expected one of {', '.join(PRECISION_BYTES)}, got {options.precision!r}")
    precision = PRECISION_BYTES[options.precision]
    core_kinds = fpga_core_kinds(board)
    resident = resident_ops(graph, board, precision)
    profiled = options.profile_cpu and board.cpus
    profile = cpu_profile(graph, options.profile_runs, options.profile_cache()) if profiled else None
    measured = profile.op_us if profile else {}
    rate = profile.host_gflops if profile else 1.0
    links = board_links(board)[0]
    costs = []
    for name in graph.topological_order():
        op = graph.ops[name]
        plan = on_chip_plan(op, graph, precision, name in resident)
        nbytes = output_bytes(op, graph, precision)
        latency = {kind: fpga_latency_us(op, graph, cores[0], board, plan, precision) for kind, cores in core_kinds}
        for kind, cpus in cpu_kinds(board):
            latency[kind] = cpu_latency_us(op, cpus[0], measured.get(name), rate)
        costs.append(
            OpCost(
                name=name,
                op_type=op.op_type,
                latency_us=latency,
                onchip_bytes=plan.resident_bytes,
                streamed=plan.streamed_bytes > 0,
                transfer_us=max(_transfer_times(nbytes, links), default=0.0),
                output_bytes=nbytes,
                cpu_measured=name in measured,
            )
        )
    return costs


def _fused_into(op: Op, graph: OpGraph) -> str | None:
    """The head op of ``op``'s fused group, if a fusion pass annotated it and the head exists."""
    node = getattr(op, "node", None)
    head = fused_head(node) if node is not None else None
    return head if head in graph.ops and head != op.name else None


def fused_colours(graph: OpGraph, names: list[str]) -> np.ndarray:
    """Colour class per op: a fused group shares its head's index; other ops get -1."""
    index = {name: i for i, name in enumerate(names)}
    colour = np.full(len(names), -1, dtype=np.int64)
    for name in names:
        head = _fused_into(graph.ops[name], graph)
        if head is not None:
            colour[index[name]] = colour[index[head]] = index[head]
    return colour


def problem_links(board: Board, costs: list[OpCost]) -> Links:
    """The per-link transfer times of ``costs`` on ``board``; devices in the order of
    ``fpga_core_kinds`` then ``cpu_kinds`` (the problem's kinds). O(ops * links + B^2)."""
    links, column = board_links(board)
    position = {id(device): b for b, device in enumerate([*board.cores, *board.cpus])}
    groups = [cores for _, cores in fpga_core_kinds(board)] + [cpus for _, cpus in cpu_kinds(board)]
    times = np.array([_transfer_times(cost.output_bytes, links) for cost in costs], dtype=np.float64)
    return Links(
        names=tuple(f"{link.kind}:{link.type}" if link.type else link.kind for link in links),
        times=times.reshape(len(costs), len(links)),
        device_ids=tuple(tuple(position[id(device)] for device in group) for group in groups),
        column=column,
    )


def build_problem(
    graph: OpGraph, board: Board, options: CostOptions = CostOptions(), costs: list[OpCost] | None = None
) -> PlacementProblem:
    """The ``PlacementProblem`` of placing ``graph`` on ``board`` (finite-CPU latency convention)."""
    costs = costs if costs is not None else op_costs(graph, board, options)
    kinds = [
        DeviceKind(name, len(cores), float(weight_area(cores[0].onchip_bytes)), False)
        for name, cores in fpga_core_kinds(board)
    ]
    kinds += [DeviceKind(name, len(cpus), math.inf, True) for name, cpus in cpu_kinds(board)]
    index = {cost.name: i for i, cost in enumerate(costs)}
    edges = sorted({(index[u], index[v]) for u, v in graph.graph.edges if u in index and v in index})
    latency = np.array([[cost.latency_us[kind.name] for kind in kinds] for cost in costs], dtype=np.float64)
    return PlacementProblem(
        names=[cost.name for cost in costs],
        ids=list(range(len(costs))),
        edges=edges,
        kinds=kinds,
        latency=latency.reshape(len(costs), len(kinds)),
        size=np.array([cost.onchip_bytes for cost in costs], dtype=np.float64),
        transfer=np.array([cost.transfer_us for cost in costs], dtype=np.float64),
        links=problem_links(board, costs),
        backward=np.zeros(len(costs), dtype=bool),
        color=fused_colours(graph, [cost.name for cost in costs]),
        cpu_overlap_unlimited=False,
        source=graph.name,
        meta={"board": board.name, "precision": options.precision, "unit": "us"},
    )
