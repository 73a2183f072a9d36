"""Run a split model as a pipeline of Ray actors, one actor per device of the split.

``run_cluster`` reads a split folder (``manifest.json`` and one ONNX file per submodel, see
``fpgaplace.flow.split``), starts one actor per device holding onnxruntime sessions of that device's
submodels (one intra-op thread each), and streams many samples through them. For every sample
the driver submits one actor call per submodel, in manifest order, passing the ObjectRefs of the
call's input tensors; Ray resolves them actor to actor through its object store, so tensors never
come back to the driver until they are graph outputs. Calls to one actor run one at a time in the
order submitted, so while the second stage works on sample i the first already runs sample i+1:
a pipeline whose throughput is bounded by its slowest stage (plus one hop of Ray overhead per
transfer). At most ``window`` samples are in flight, which bounds memory; the driver collects
outputs in sample order. Driver work per sample is O(submodels + tensors).

Faults: every wait has a timeout. An address nobody answers at fails within a few seconds by a
TCP probe before Ray is asked to join; a submodel onnxruntime cannot load is reported by its actor;
an actor that dies is restarted by Ray up to ``max_restarts`` times with its unfinished calls
retried (they are pure functions of their inputs), and past that the run stops with an error
naming the device and how many samples finished. ``InjectedFault`` lets tests kill an actor
mid-stream.

``run_whole`` is the baseline: the whole model in one onnxruntime session with the same thread
budget per session, the same inputs, one sample after another.

Ray is an optional dependency (``pip install fpgaplace[cluster]``); only ``run_cluster`` and
``start_local_ray`` import it.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from fpgaplace.project.layout import MANIFEST_FILE
from fpgaplace.project.manifest import Manifest, SubmodelInfo
from fpgaplace.util.errors import FpgaplaceError, first_line
from fpgaplace.util.onnxrt import random_inputs

Sample = dict[str, np.ndarray]
Progress = Callable[[int, int], None]  # (samples finished, samples in total)

PROBE_TIMEOUT_S = 3.0  # longest wait for a TCP answer from a cluster address
START_TIMEOUT_FLOOR_S = 30.0  # actors start worker processes and load sessions: allow this at least
MAX_START_STRETCH = 5.0  # on a loaded machine the actors' start wait grows by at most this factor
LOCAL_OBJECT_STORE_BYTES = 256 * 1024**2  # small: the pipeline keeps few samples in flight


@dataclass(frozen=True)
class InjectedFault:
    """Test hook: the actor of ``device`` fails when asked for a submodel run after completing
    ``after_runs`` runs in its current life: ``action`` "exit" ends its process (``os._exit``,
    like a crashed node), "hang" makes it sleep for an hour. Only in its first life unless
    ``every_life``, so Ray's restart recovers from a one-off crash but not from a repeating one."""

    device: str
    after_runs: int
    every_life: bool = False
    action: str = "exit"  # "exit" | "hang"


class _Timed:
    """Samples and samples per second of a run with ``outputs`` and ``wall_s``."""

    outputs: list[Sample]
    wall_s: float

    @property
    def samples(self) -> int:
        return len(self.outputs)

    @property
    def throughput(self) -> float:
        """Samples per second."""
        return self.samples / self.wall_s if self.wall_s > 0 else float("inf")


@dataclass
class ClusterRunResult(_Timed):
    """What a pipelined run produced and how long it took (Ray start-up and session loading
    excluded from ``wall_s``)."""

    outputs: list[Sample]  # graph outputs per sample, in input order
    devices: list[str]  # one actor each, in pipeline order
    wall_s: float
    stage_busy_s: dict[str, float]  # device -> seconds inside onnxruntime (last life only)
    restarts: dict[str, int]  # device -> times Ray restarted its actor
    address: str  # the Ray cluster that ran it


@dataclass
class WholeRunResult(_Timed):
    """The baseline: the whole model in one session, samples one after another."""

    outputs: list[Sample]
    wall_s: float
    threads: int


# --------------------------------------------------------------------------- sessions and inputs


def open_session(model: bytes | str | Path, what: str, threads: int = 1) -> ort.InferenceSession:
    """An onnxruntime CPU session with ``threads`` intra-op threads and no inter-op pool."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    source = str(model) if isinstance(model, Path) else model
    try:
        return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises several unrelated types
        raise FpgaplaceError(f"{what}: onnxruntime cannot load it: {first_line(exc)}") from exc


def _manifest_random_sample(manifest: Manifest, seed: int) -> Sample:
    """Random graph inputs from the manifest's dtypes and shapes (unknown dims become 1), with
    the value rules of ``fpgaplace.flow.split.random_inputs``."""
    rng = np.random.default_rng(seed)
    sample = {}
    for entry in manifest.graph_inputs:
        shape = [d if isinstance(d, int) else 1 for d in entry.get("shape") or []]
        dtype = np.dtype(entry.get("dtype") or "float32")
        if np.issubdtype(dtype, np.floating):
            sample[entry["name"]] = rng.standard_normal(shape).astype(dtype)
        elif dtype == np.bool_:
            sample[entry["name"]] = rng.random(shape) < 0.5
        else:
            sample[entry["name"]] = rng.integers(0, 3, shape).astype(dtype)
    return sample


def _checked_samples(inputs: Iterable[Sample], names: list[str], where: str) -> list[Sample]:
    samples = []
    for index, sample in enumerate(inputs):
        missing = [name for name in names if name not in sample]
        if missing:
            raise FpgaplaceError(f"{where}: sample {index} lacks graph input '{missing[0]}'; expected {names}")
        samples.append({name: np.asarray(sample[name]) for name in names})
    return samples


def _check_files(manifest: Manifest, manifest_dir: Path) -> None:
    if not manifest.submodels:
        raise FpgaplaceError(f"{manifest_dir / MANIFEST_FILE}: field 'submodels' is empty; expected at least one")
    for sub in manifest.submodels:
        if not (manifest_dir / sub.file).is_file():
            raise FpgaplaceError(f"{manifest_dir / sub.file}: file of submodel '{sub.name}' on device "
                                 f"'{sub.device}' is missing")


def pipeline_devices(manifest: Manifest) -> list[str]:
    """Devices that run at least one submodel, in order of their first submodel."""
    return list(dict.fromkeys(sub.device for sub in manifest.submodels))


# --------------------------------------------------------------------------- baseline


def run_whole(model: onnx.ModelProto | Path, inputs: Iterable[Sample] | int, threads: int = 1,
              seed: int = 0) -> WholeRunResult:
    """Run the whole model in one onnxruntime session with ``threads`` intra-op threads, one
    sample after another. ``inputs`` is a list of samples or a count of random samples
    (``fpgaplace.flow.split.random_inputs`` with seeds ``seed``, ``seed + 1``, ...)."""
    proto = model if isinstance(model, onnx.ModelProto) else _load_model(Path(model))
    what = f"model '{proto.graph.name or 'model'}'"
    session = open_session(proto.SerializeToString(), what, threads)
    names = [i.name for i in session.get_inputs()]
    if isinstance(inputs, int):
        inputs = [random_inputs(proto, seed + i) for i in range(inputs)]
    samples = _checked_samples(inputs, names, what)
    output_names = [o.name for o in session.get_outputs()]
    outputs = []
    start = time.perf_counter()
    for index, sample in enumerate(samples):
        try:
            results = session.run(output_names, sample)
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises several types
            raise FpgaplaceError(f"{what}: onnxruntime failed on sample {index}: {first_line(exc)}") from exc
        outputs.append(dict(zip(output_names, results, strict=True)))
    return WholeRunResult(outputs, time.perf_counter() - start, threads)


def _load_model(path: Path) -> onnx.ModelProto:
    if not path.is_file():
        raise FpgaplaceError(f"{path}: no such model file")
    try:
        return onnx.load(str(path))
    except Exception as exc:  # noqa: BLE001 - protobuf decode errors have several types
        raise FpgaplaceError(f"{path}: not a readable ONNX model ({first_line(exc)})") from exc


# --------------------------------------------------------------------------- actors


class _StageWorker:
    """Body of one Ray actor: the onnxruntime sessions of one device's submodels."""

    def __init__(self, device: str, manifest_dir: str, submodels: list[tuple[str, str]], threads: int,
                 fault: InjectedFault | None, restart_log: str) -> None:
        import ray

        self.device = device
        self.busy_s = 0.0
        self.runs = 0
        self.sessions: dict[str, ort.InferenceSession] = {}
        self.input_names: dict[str, list[str]] = {}
        self.error: str | None = None
        reconstructed = ray.get_runtime_context().was_current_actor_reconstructed
        self.fault = fault if fault is not None and (fault.every_life or not reconstructed) else None
        ray.get(ray.get_actor(restart_log).record.remote(device), timeout=30)
        for name, file in submodels:
            path = Path(manifest_dir) / file
            try:
                session = open_session(path, f"submodel '{name}' on device '{device}' ({path})", threads)
            except FpgaplaceError as exc:
                self.error = str(exc)
                return
            self.sessions[name] = session
            self.input_names[name] = [i.name for i in session.get_inputs()]

    def ready(self) -> tuple[str, str | None]:
        """This actor's id and None when every session loaded, else the one-line reason."""
        import ray

        return ray.get_runtime_context().get_actor_id(), self.error

    def run(self, name: str, *tensors: np.ndarray) -> np.ndarray | tuple[np.ndarray, ...]:
        if self.fault is not None and self.runs >= self.fault.after_runs:
            if self.fault.action == "hang":
                time.sleep(3600)
            os._exit(1)  # test hook: die like a crashed node, without clean-up
        start = time.perf_counter()
        try:
            results = self.sessions[name].run(None, dict(zip(self.input_names[name], tensors, strict=True)))
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises several types
            raise FpgaplaceError(f"submodel '{name}' on device '{self.device}': onnxruntime failed: "
                                 f"{first_line(exc)}") from exc
        self.busy_s += time.perf_counter() - start
        self.runs += 1
        return results[0] if len(results) == 1 else tuple(results)

    def stats(self) -> dict[str, float]:
        return {"busy_s": self.busy_s, "runs": self.runs}


class _RestartLog:
    """Body of a tiny actor counting how often each stage actor was (re)started."""

    def __init__(self) -> None:
        self.starts: Counter[str] = Counter()

    def record(self, device: str) -> None:
        self.starts[device] += 1

    def counts(self) -> dict[str, int]:
        return dict(self.starts)


@dataclass
class _Pipeline:
    """The running actors of one ``run_cluster`` call."""

    ray: Any
    workers: dict[str, Any]  # device -> actor handle
    restart_log: Any
    timeout_s: float
    start_timeout_s: float
    max_restarts: int
    device_of_actor: dict[str, str] = field(default_factory=dict)  # actor id (hex) -> device

    def kill(self) -> None:
        for handle in [*self.workers.values(), self.restart_log]:
            try:
                self.ray.kill(handle, no_restart=True)
            except Exception:  # noqa: BLE001, S110 - best effort: the actor may already be gone
                pass


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise FpgaplaceError("run-cluster: the 'ray' package is not installed; "
                             "install it with: pip install 'fpgaplace[cluster]'") from exc
    return ray


def start_local_ray(num_cpus: int | None = None) -> None:
    """Start a quiet local Ray instance in this process (no dashboard, no worker logs)."""
    ray = _import_ray()
    ray.init(num_cpus=num_cpus or os.cpu_count() or 1, include_dashboard=False, log_to_driver=False,
             object_store_memory=LOCAL_OBJECT_STORE_BYTES, logging_level=logging.ERROR)


def _probe_address(address: str, timeout_s: float) -> None:
    """Fail fast when nothing listens at ``address`` (HOST:PORT or ray://HOST:PORT)."""
    if address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[1] if "://" in address else address
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise FpgaplaceError(f"cluster address '{address}': expected HOST:PORT (or ray://HOST:PORT, auto)")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise FpgaplaceError(f"cluster address '{address}': cannot connect within {timeout_s:g} s ({reason}); "
                             "expected a running Ray head node (ray start --head)") from exc


def _connect(ray: Any, address: str | None, num_actors: int, timeout_s: float) -> bool:
    """Join ``address`` or start a local Ray; True when this call did it (and must undo it)."""
    if address is None:
        if ray.is_initialized():
            return False
        start_local_ray(max(os.cpu_count() or 1, num_actors))
        return True
    _probe_address(address, min(PROBE_TIMEOUT_S, timeout_s))
    if ray.is_initialized():
        raise FpgaplaceError(f"cluster address '{address}': this process is already connected to a Ray "
                             "cluster; run without --address or in a fresh process")
    try:
        ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
    except Exception as exc:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, ...
        raise FpgaplaceError(f"cluster address '{address}': cannot join the Ray cluster: {first_line(exc)}") from exc
    return True


def _start_pipeline(ray: Any, manifest: Manifest, manifest_dir: Path, threads: int, timeout_s: float,
                    start_timeout_s: float, max_restarts: int, fault: InjectedFault | None) -> _Pipeline:
    log_name = f"fpgaplace-restart-log-{uuid.uuid4().hex}"
    log_actor = ray.remote(_RestartLog).options(num_cpus=0, name=log_name).remote()
    worker_class = ray.remote(_StageWorker)
    workers = {}
    for device in pipeline_devices(manifest):
        files = [(sub.name, sub.file) for sub in manifest.submodels if sub.device == device]
        workers[device] = worker_class.options(
            num_cpus=1, max_restarts=max_restarts, max_task_retries=max_restarts, scheduling_strategy="SPREAD",
        ).remote(device, str(manifest_dir.resolve()), files, threads,
                 fault if fault is not None and fault.device == device else None, log_name)
    pipeline = _Pipeline(ray, workers, log_actor, timeout_s, start_timeout_s, max_restarts)
    try:
        _await_ready(pipeline)
    except BaseException:
        pipeline.kill()
        raise
    return pipeline


def load_stretch() -> float:
    """How much slower than on an idle machine worker processes start now: the one-minute load
    average per CPU of this machine, at least 1 and at most ``MAX_START_STRETCH``."""
    try:
        per_cpu = os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:  # no load average on this platform
        return 1.0
    return min(MAX_START_STRETCH, max(1.0, per_cpu))


def _await_ready(pipeline: _Pipeline) -> None:
    """Wait for every actor to start and load its sessions. Actors the cluster has CPUs for are
    only slow, so their wait is stretched by the machine's load (``load_stretch``: on a loaded
    machine a worker's start and imports take longer); more actors than CPUs wait the given time."""
    ray = pipeline.ray
    checks = {device: handle.ready.remote() for device, handle in pipeline.workers.items()}
    cpus = ray.cluster_resources().get("CPU", 0)
    wait = pipeline.start_timeout_s * (load_stretch() if len(checks) <= cpus else 1.0)
    ready, _ = ray.wait(list(checks.values()), num_returns=len(checks), timeout=wait)
    late = [device for device, ref in checks.items() if ref not in ready]
    if late:
        raise FpgaplaceError(f"cluster: the actors of devices {late} did not start within "
                             f"{wait:.3g} s (each needs 1 CPU; the cluster has {cpus:g})")
    for device, ref in checks.items():
        try:
            actor_id, error = ray.get(ref, timeout=pipeline.timeout_s)
        except ray.exceptions.RayActorError as exc:
            raise FpgaplaceError(f"cluster: the actor of device '{device}' died while starting: "
                                 f"{first_line(exc)}") from exc
        if error is not None:
            raise FpgaplaceError(error)
        pipeline.device_of_actor[actor_id] = device


# --------------------------------------------------------------------------- streaming


@dataclass
class _InFlight:
    index: int
    refs: dict[str, Any]  # tensor name -> ObjectRef (graph inputs and every submodel output)
    outputs: list[str]


def _submit(pipeline: _Pipeline, submodels: list[SubmodelInfo], outputs: list[str], index: int,
            sample: Sample) -> _InFlight:
    """One actor call per submodel, in manifest order; inputs travel as ObjectRefs."""
    refs = {name: pipeline.ray.put(value) for name, value in sample.items()}
    for sub in submodels:
        call = pipeline.workers[sub.device].run.options(num_returns=len(sub.outputs))
        produced = call.remote(sub.name, *[refs[tensor] for tensor in sub.inputs])
        refs.update(zip(sub.outputs, produced if len(sub.outputs) > 1 else [produced], strict=True))
    return _InFlight(index, refs, outputs)


def _collect(pipeline: _Pipeline, submodels: list[SubmodelInfo], flight: _InFlight, finished: int,
             total: int) -> Sample:
    ray = pipeline.ray
    counts = f"{finished} of {total} samples finished"
    try:
        values = ray.get([flight.refs[name] for name in flight.outputs], timeout=pipeline.timeout_s)
    except ray.exceptions.GetTimeoutError as exc:
        stalled = _first_unfinished(ray, submodels, flight)
        raise FpgaplaceError(f"cluster: sample {flight.index} waited {pipeline.timeout_s:g} s for {stalled}; "
                             f"{counts}") from exc
    except ray.exceptions.RayActorError as exc:
        device = pipeline.device_of_actor.get(str(getattr(exc, "actor_id", "") or ""), None) or _dead_device(pipeline)
        raise FpgaplaceError(f"cluster: the actor of device '{device}' died and was not restarted (limit "
                             f"max_restarts={pipeline.max_restarts}); {counts}") from exc
    except ray.exceptions.RayTaskError as exc:
        cause = exc.cause if getattr(exc, "cause", None) is not None else exc
        raise FpgaplaceError(f"cluster: {first_line(cause)}; {counts}") from exc
    return dict(zip(flight.outputs, values, strict=True))


def _first_unfinished(ray: Any, submodels: list[SubmodelInfo], flight: _InFlight) -> str:
    for sub in submodels:
        ready, _ = ray.wait([flight.refs[t] for t in sub.outputs], num_returns=len(sub.outputs), timeout=0)
        if len(ready) < len(sub.outputs):
            return f"submodel '{sub.name}' on device '{sub.device}'"
    return "its outputs"


def _dead_device(pipeline: _Pipeline) -> str:
    """Ask every actor for its stats (short timeout); the first that cannot answer is dead."""
    for device, handle in pipeline.workers.items():
        try:
            pipeline.ray.get(handle.stats.remote(), timeout=min(5.0, pipeline.timeout_s))
        except Exception:  # noqa: BLE001 - any failure to answer counts as dead
            return device
    return "unknown"


def _stream(pipeline: _Pipeline, manifest: Manifest, samples: list[Sample], window: int,
            progress: Progress | None) -> list[Sample]:
    outputs_names = [entry["name"] for entry in manifest.graph_outputs]
    in_flight: deque[_InFlight] = deque()
    results: list[Sample] = []

    def collect_oldest() -> None:
        results.append(_collect(pipeline, manifest.submodels, in_flight.popleft(), len(results), len(samples)))
        if progress is not None:
            progress(len(results), len(samples))

    for index, sample in enumerate(samples):
        if len(in_flight) >= window:
            collect_oldest()
        in_flight.append(_submit(pipeline, manifest.submodels, outputs_names, index, sample))
    while in_flight:
        collect_oldest()
    return results


def _final_stats(pipeline: _Pipeline) -> tuple[dict[str, float], dict[str, int]]:
    ray = pipeline.ray
    devices = list(pipeline.workers)
    stats = ray.get([pipeline.workers[d].stats.remote() for d in devices], timeout=pipeline.timeout_s)
    starts = ray.get(pipeline.restart_log.counts.remote(), timeout=pipeline.timeout_s)
    busy = {d: float(s["busy_s"]) for d, s in zip(devices, stats, strict=True)}
    return busy, {d: max(0, starts.get(d, 1) - 1) for d in devices}


def run_cluster(manifest_dir: Path, inputs: Iterable[Sample] | int, address: str | None = None,
                timeout_s: float = 60, max_restarts: int = 1, progress: Progress | None = None, *,
                threads_per_actor: int = 1, window: int | None = None, seed: int = 0,
                start_timeout_s: float | None = None, fault: InjectedFault | None = None) -> ClusterRunResult:
    """Stream ``inputs`` through the split in ``manifest_dir`` on Ray actors, one per device.

    ``inputs`` is a list of samples (graph input name -> array) or a count of random samples
    drawn from the manifest's input types (seeds ``seed``, ``seed + 1``, ...). Without
    ``address`` a local Ray is started (or the one already running in this process is used);
    with it, the cluster there is joined. ``timeout_s`` bounds every wait for a sample;
    ``start_timeout_s`` (default ``max(timeout_s, 30)``) the wait for the actors to start and
    load their sessions; ``max_restarts`` is how often Ray may restart each actor. ``window`` bounds the
    samples in flight (default twice the number of submodels). ``progress(done, total)`` is
    called after each sample. Raises ``FpgaplaceError`` on every failure, never hangs.
    """
    manifest_dir = Path(manifest_dir)
    manifest = Manifest.load(manifest_dir)
    _check_files(manifest, manifest_dir)
    input_names = [entry["name"] for entry in manifest.graph_inputs]
    if isinstance(inputs, int):
        inputs = [_manifest_random_sample(manifest, seed + i) for i in range(inputs)]
    samples = _checked_samples(inputs, input_names, str(manifest_dir / MANIFEST_FILE))
    if timeout_s <= 0 or max_restarts < 0:
        raise FpgaplaceError(f"run_cluster: timeout_s={timeout_s:g} and max_restarts={max_restarts} "
                             "must be > 0 and >= 0")
    ray = _import_ray()
    devices = pipeline_devices(manifest)
    started = _connect(ray, address, len(devices), timeout_s)
    try:
        start_wait = start_timeout_s if start_timeout_s is not None else max(timeout_s, START_TIMEOUT_FLOOR_S)
        pipeline = _start_pipeline(ray, manifest, manifest_dir, threads_per_actor, timeout_s, start_wait,
                                   max_restarts, fault)
        try:
            start = time.perf_counter()
            outputs = _stream(pipeline, manifest, samples, window or 2 * len(manifest.submodels), progress)
            wall_s = time.perf_counter() - start
            busy, restarts = _final_stats(pipeline)
        finally:
            pipeline.kill()
        where = address or ray.get_runtime_context().gcs_address
        return ClusterRunResult(outputs, devices, wall_s, busy, restarts, where)
    finally:
        if started:
            ray.shutdown()


__all__ = ["ClusterRunResult", "InjectedFault", "WholeRunResult", "open_session", "pipeline_devices",
           "run_cluster", "run_whole", "start_local_ray"]
