"""RTL simulation of a compiled project (``fpgaplace sim PROJECT --rtl``).

Compile writes every core's Verilog top with its layers and ROMs into ``rtl/<core>/`` and its
cocotb job (ports and a first sample) into ``sim/<core>/job.json``
(``fpgaplace.codegen.rtl_project``). ``simulate_project_rtl`` runs each core's top from those
files on random samples (with random gaps and backpressure, then back to back), compares every
output bit-exactly with the integer reference of its layers (``Kernel.reference``) and measures
the steady-state cycles per sample beside the core's interval from the cycle model, writing
``results/rtl.json``; beside them the first sample's latency (its last output beat's cycle,
samples back to back from reset) and the model's (design.json's ``latency_cycles``). A simulation
costs O(cycles x lanes) simulator steps.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from fpgaplace.hw import KERNELS
from fpgaplace.project.arrays import load_arrays, random_samples
from fpgaplace.project.layout import JOB_FILE, RESULTS_DIR, RTL_DIR, SIM_DIR, STAGES_FILE, cell_name
from fpgaplace.project.record import Core, Layer, load
from fpgaplace.sim.rtl import SPEEDS, phase_result, resolve, run_cocotb, stream_phases
from fpgaplace.sim.rtl import simulator as configured_simulator
from fpgaplace.sim.stages import Cut, Module, StageRef, cached, content_key, layer_modules, module_key, select
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.files import write_file
from fpgaplace.util.tools import default_jobs, interruptible, run_parallel

RTL_RESULTS = "rtl.json"
FIRST_CUT_ROWS = 3  # output rows of the first band a frame is timed on (``cut_heights``)
BAND_STEADY = 2  # a band's back-to-back samples: its interval is the second's end less the first's
CUT_COST = (4, 2)  # sample-times of each band's run: random phase and back to back, then back to back only
CUT_WORTH = 0.7  # the bands are simulated where they cost less than this share of the whole frame


@dataclass(frozen=True)
class CoreResult:
    name: str
    bit_exact: bool
    cycles_measured: float
    cycles_model: int
    latency_measured: int | None = None  # reset release to the first sample's last output, back to back
    latency_model: int | None = None  # design.json's latency_cycles (the kernels' fills overlapped)
    seconds: float = field(default=0.0, compare=False)
    stages: list[StageResult] | None = None  # checked stage by stage: each layer alone
    simulators: tuple[str, ...] = ()  # the RTL simulators its runs used

    def to_json(self) -> dict[str, Any]:
        document = {"name": self.name, "bit_exact": self.bit_exact, "cycles_measured": self.cycles_measured,
                    "cycles_model": self.cycles_model, "latency_measured": self.latency_measured,
                    "latency_model": self.latency_model, "simulators": list(self.simulators)}
        return document | ({"stages": [stage.to_json() for stage in self.stages]} if self.stages is not None else {})


@dataclass(frozen=True)
class StageResult:
    """One layer's module simulated alone: bit-exact against its integer reference, its steady
    cycles per sample beside the op library's, and whether the result came from the cache."""

    name: str
    kernel: str
    bit_exact: bool
    cycles_measured: float
    cycles_model: int
    cached: bool = field(default=False, compare=False)
    cut: FrameCut | None = None  # timed on two bands of the frame and extrapolated (``extrapolate``)
    simulators: tuple[str, ...] = ()  # the RTL simulators its runs used

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kernel": self.kernel, "bit_exact": self.bit_exact,
                "cycles_measured": self.cycles_measured, "cycles_model": self.cycles_model,
                "simulators": list(self.simulators)} | (
                    {"cut": self.cut.to_json()} if self.cut is not None else {})


@dataclass(frozen=True)
class FrameCut:
    """A stage timed on its frame's first ``rows[0]`` and ``rows[1]`` output rows (steady cycles a
    sample ``cycles``) instead of its ``frame_rows``: ``per_row`` and ``per_frame`` of the line
    through the two, the frame's cycles ``per_frame + frame_rows * per_row`` (``extrapolate``)."""

    rows: tuple[int, int]
    cycles: tuple[float, float]
    frame_rows: int

    @property
    def per_row(self) -> float:
        return (self.cycles[1] - self.cycles[0]) / (self.rows[1] - self.rows[0])

    @property
    def per_frame(self) -> float:
        return self.cycles[0] - self.rows[0] * self.per_row

    @property
    def frame_cycles(self) -> float:
        return extrapolate(self.rows, self.cycles, self.frame_rows)

    def to_json(self) -> dict[str, Any]:
        return {"rows": list(self.rows), "cycles": list(self.cycles), "frame_rows": self.frame_rows,
                "per_row": self.per_row, "per_frame": self.per_frame}


@dataclass(frozen=True)
class RtlResult:
    cores: list[CoreResult]

    @property
    def ok(self) -> bool:
        return all(core.bit_exact for core in self.cores)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "cores": [core.to_json() for core in self.cores]}


def extrapolate(rows: tuple[int, int], cycles: tuple[float, float], frame_rows: int) -> float:
    """Steady cycles a sample of a frame of ``frame_rows`` output rows from those measured on two
    bands of it (``rows``, ``cycles``): the line through the two points, ``c1 + (R - r1) * (c2 -
    c1) / (r2 - r1)``. Exact where every row past the first band costs the same (a line-buffered
    window unit: the rows inside the frame are alike, the top and bottom edges are in both
    bands); ``test_frame_cuts`` checks it against whole frames. O(1)."""
    per_row = (cycles[1] - cycles[0]) / (rows[1] - rows[0])
    return cycles[0] + (frame_rows - rows[0]) * per_row


def cut_heights(frame_rows: int | None, config: dict[str, Any] | None = None) -> tuple[int, int] | None:
    """The two bands (output rows) a stage of ``frame_rows`` rows is timed on: ``FIRST_CUT_ROWS``
    and one more, or as many rows as the window spans in strides where that is more (so the first
    band has a row clear of the top edge's padding); None where simulating the whole frame costs
    less: two bands cost about ``CUT_COST`` sample-times of their rows against five of the
    frame's (a random phase of about two, three back to back; a band runs two)."""
    if frame_rows is None:
        return None
    span = 0 if config is None else -(-(config.get("DH", 1) * (config["KH"] - 1) + 1) // config["SH"])
    rows = (max(FIRST_CUT_ROWS, span), max(FIRST_CUT_ROWS, span) + 1)
    cheaper = CUT_COST[0] * rows[0] + CUT_COST[1] * rows[1] < CUT_WORTH * 5 * frame_rows
    return rows if rows[1] < frame_rows and cheaper else None


def core_values(record: Core, arrays: list[dict[str, np.ndarray]], inputs: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Every tensor of one sample through the integer reference of every layer (as ``csim``'s
    ``_Core.reference``), by name."""
    values = {t.name: x for t, x in zip(record.inputs, inputs, strict=True)}
    for layer, arrays_of_layer in zip(record.layers, arrays, strict=True):
        kernel = KERNELS[layer.kernel]
        values[layer.output] = kernel.reference(layer.config, arrays_of_layer,
                                                [values[t] for t in layer.inputs], rows=layer.rows).reshape(-1)
    return values


def core_reference(record: Core, arrays: list[dict[str, np.ndarray]], inputs: list[np.ndarray]) -> list[np.ndarray]:
    """One sample's outputs through the integer reference of every layer (``core_values``)."""
    values = core_values(record, arrays, inputs)
    return [values[record.aliases.get(t.name, t.name)].reshape(-1) for t in record.outputs]


def core_files(project: Path, record: Core, folder: Path) -> tuple[str, list[Path], dict[str, Any]]:
    """The core's top name, its Verilog sources copied (with their ROMs) into ``folder`` and its
    compiled job (ports); a one-line error where compile left no RTL for it."""
    name = cell_name(record.name)
    rtl_folder, job_file = project / RTL_DIR / name, project / SIM_DIR / name / JOB_FILE
    if (rtl_folder / "README.txt").is_file():
        raise FpgaplaceError(f"{rtl_folder}: no RTL for core {record.name}: "
                             f"{(rtl_folder / 'README.txt').read_text().strip()}")
    top = f"{name}_rtl"
    if not (rtl_folder / f"{top}.v").is_file() or not job_file.is_file():
        raise FpgaplaceError(f"{rtl_folder}: missing {top}.v or {job_file.name}; expected the core's RTL "
                             "(compile writes it)")
    shutil.copytree(rtl_folder, folder, dirs_exist_ok=True)
    job = json.loads(job_file.read_text())
    return top, sorted(folder.glob("*.v")), job


def simulate_core(project: Path, core: Core, folder: Path, samples: int = 1, seed: int = 0,
                  steady: int = 3, warmup: int = 1, simulator: str | None = None) -> CoreResult:
    """Simulate one core's RTL top on random samples (``samples`` with random gaps and
    backpressure, ``steady`` back to back): bit-exact against ``core_reference`` on every output
    port, and the steady cycles per sample after ``warmup`` samples. ``simulator``: ``icarus``
    or ``verilator`` (``fpgaplace.sim.rtl.simulator``; default ``$FPGAPLACE_RTL_SIMULATOR`` or Icarus)."""
    started = time.perf_counter()
    arrays = load_arrays(project, core)
    top, sources, compiled = core_files(project, core, folder)
    inputs = random_samples(core, samples, seed)
    per_port = [np.stack([sample[k] for sample in inputs]) for k in range(len(core.inputs))]
    expected_cycles = core.interval_cycles
    job = {"inputs": compiled["inputs"], "outputs": compiled["outputs"],
           "cycle_limit": 64 * max(1, expected_cycles) * (len(inputs) + steady) + 20000,
           "phases": stream_phases(per_port, steady)}
    chosen = configured_simulator(simulator)
    results = run_cocotb(top, sources, folder, job, seed, chosen)
    bit_exact = True
    for phase, result in zip(job["phases"], results, strict=True):
        count = len(phase["inputs"][0])
        vectors = [[np.asarray(port[v], dtype=np.int8) for port in phase["inputs"]] for v in range(count)]
        want = [core_reference(core, arrays, sample) for sample in vectors]
        for k, got in enumerate(result["outputs"]):
            expected = np.concatenate([w[k] for w in want]).astype(np.int64)
            bit_exact &= len(got) == len(expected) and bool(np.array_equal(np.asarray(got), expected))
    done = results[1]["done_cycles"]
    measured = (done[-1] - done[warmup]) / (len(done) - 1 - warmup) if len(done) > warmup + 1 else float("nan")
    first = done[0] if done else None
    return CoreResult(core.name, bit_exact, measured, expected_cycles, first, core.latency_cycles,
                      time.perf_counter() - started, simulators=(chosen,))


def simulate_project_rtl(project: Path, samples: int = 1, seed: int = 0,
                         progress: Callable[[str], None] | None = None, simulator: str | None = None) -> RtlResult:
    """Every core of ``project`` in RTL as one top each (``simulate_core``, on ``simulator``: ``icarus``,
    ``verilator`` or ``auto``, the default, the faster for the core, ``fpgaplace.sim.rtl.resolve``;
    slow for wide cores, ``simulate_project_stages`` checks each layer alone); writes
    ``results/rtl.json``."""
    project = Path(project)
    design = load(project)
    results = []
    with tempfile.TemporaryDirectory(prefix="fpgaplace-rtl-") as scratch, interruptible():
        for core in design.cores:
            if progress is not None:
                progress(f"RTL simulation of {core.name} ({len(core.layers)} layers)")
            size = sum(stage_size(layer) for layer in core.layers)
            name = resolve(simulator, size, core.interval_cycles * (2 * samples + 3))
            results.append(simulate_core(project, core, Path(scratch) / cell_name(core.name), samples, seed,
                                         simulator=name))
    result = RtlResult(results)
    (project / RESULTS_DIR).mkdir(exist_ok=True)
    write_file(project / RESULTS_DIR / RTL_RESULTS, json.dumps(result.to_json(), indent=2) + "\n")
    return result


def simulate_project_stages(project: Path, samples: int = 1, seed: int = 0, steady: int = 3,
                            progress: Callable[[str], None] | None = None, simulator: str | None = None,
                            jobs: int | None = None, stages: str | None = None,
                            cut: Callable[[StageRef, int], Cut | None] | None = None) -> RtlResult:
    """Every layer of ``project`` (or those ``stages`` picks, ``fpgaplace.sim.stages.select``) in RTL
    alone, at its folding: its module (``rtl/<core>/``) on its inputs from the integer reference of
    ``samples`` random core inputs (with random gaps and backpressure, then ``steady`` back to
    back), every output compared bit-exactly, its steady cycles per sample beside the op
    library's. With ``cut`` (a stage cut to a band of output rows, ``fpgaplace.flow.checks.frame_cuts``)
    a stage that streams a frame of rows is simulated on two bands of it instead (``cut_heights``;
    the inputs' first rows, every output checked against the cut layer's reference) and its
    frame's cycles extrapolated (``extrapolate``). Every run (a whole layer, or each band) is a
    task of its own, on ``simulator`` (``icarus``, ``verilator``, or ``auto``, the default: per run
    the one predicted to finish first, build included, ``fpgaplace.sim.rtl.resolve``), ``jobs``
    side by side (default: this machine's cores), the longest first (the predicted seconds: a
    stage's two bands need not wait on each other), each result cached by the module, its stimuli
    and its simulator; an interrupt ends the
    simulators and writes nothing. A core's result gathers its stages: bit-exact if all are,
    cycles the slowest stage's (its interval), model cycles the slowest layer's. Writes
    ``results/rtl.json`` atomically. O(sum over stages of cycles x lanes) simulator steps, the
    stages side by side."""
    project = Path(project)
    design = load(project)
    refs = select(design, stages)
    cores = {ref.core.name: ref.core for ref in refs}
    arrays = {name: load_arrays(project, core) for name, core in cores.items()}
    inputs = {name: _stage_stimuli(core, arrays[name], samples, seed) for name, core in cores.items()}
    ports = {name: _stage_ports(project, core) for name, core in cores.items()}
    modules = {name: layer_modules(project, core) for name, core in cores.items()}
    jobs = jobs or default_jobs()
    with tempfile.TemporaryDirectory(prefix="fpgaplace-rtl-") as scratch, interruptible():
        stage_runs, tasks, costs, chosen, verilog = [], [], [], [], set()
        for ref in refs:
            folder = Path(scratch) / f"{cell_name(ref.core.name)}_{ref.index}"
            whole = StageRun(modules[ref.core.name][ref.index], ports[ref.core.name][ref.index], None)
            frame = KERNELS[ref.layer.kernel].frame_rows(ref.layer.config)
            heights = cut_heights(frame, ref.layer.config) if cut else None
            bands = [cut(ref, rows) for rows in heights] if cut and heights else []
            runs = ([StageRun(band.module, band.ports, band) for band in bands] if bands and all(bands)
                    else [whole])
            stage_runs.append(runs)
            for k, run in enumerate(runs):
                size, cycles = stage_size(ref.layer), run_cost(ref.layer, run, k, samples, steady, frame)
                name = resolve(simulator, size, cycles)
                rows = f", rows {run.cut.rows}" if run.cut else ""
                tasks.append((f"RTL {ref.name} ({ref.layer.kernel}{rows}, {name})",
                              partial(_simulate_run, project, ref, run, k, arrays[ref.core.name][ref.index],
                                      inputs[ref.core.name], folder / f"run{k}", seed, steady, name)))
                source = verilog_key(run.module)
                costs.append(SPEEDS[name].seconds(size, cycles, built=name == "verilator" and source in verilog))
                verilog.add(source)
                chosen.append(name)
        if progress is not None:
            progress(f"RTL simulation: {len(refs)} stages alone in {len(tasks)} runs (a frame's two bands are two; "
                     f"{chosen.count('verilator')} on Verilator, {chosen.count('icarus')} on Icarus), {jobs} at a "
                     f"time, the longest first: about {duration(sum(costs) / jobs)}")
        values, names = iter(run_parallel(tasks, jobs, progress, costs)), iter(chosen)
        results = [_stage_result(ref, runs, [next(values) for _ in runs], [next(names) for _ in runs])
                   for ref, runs in zip(refs, stage_runs, strict=True)]
    gathered = []
    for name, core in cores.items():
        mine = [result for ref, result in zip(refs, results, strict=True) if ref.core.name == name]
        gathered.append(CoreResult(name, all(r.bit_exact for r in mine), max(r.cycles_measured for r in mine),
                                   max(r.cycles_model for r in mine), None, core.latency_cycles, stages=mine,
                                   simulators=tuple(dict.fromkeys(n for r in mine for n in r.simulators))))
    result = RtlResult(gathered)
    (project / RESULTS_DIR).mkdir(exist_ok=True)
    write_file(project / RESULTS_DIR / RTL_RESULTS, json.dumps(result.to_json(), indent=2) + "\n")
    return result


@dataclass(frozen=True)
class StageRun:
    """One simulation of a stage: its module and ports, the whole layer's or a band's (``cut``)."""

    module: Module
    ports: dict[str, Any]
    cut: Cut | None


def _stage_stimuli(core: Core, arrays: list[dict[str, np.ndarray]], samples: int,
                   seed: int) -> list[dict[str, np.ndarray]]:
    """Every tensor of ``samples`` random inputs of ``core`` through its integer reference."""
    return [core_values(core, arrays, sample) for sample in random_samples(core, samples, seed)]


def _stage_ports(project: Path, core: Core) -> list[dict[str, Any]]:
    """Each layer's module name and stream ports as compile wrote them (``sim/<core>/stages.json``);
    a one-line error for a project compiled before they were written."""
    path = project / SIM_DIR / cell_name(core.name) / STAGES_FILE
    if not path.is_file():
        raise FpgaplaceError(f"{path}: missing; expected each layer's ports (compile writes them: compile again)")
    ports = json.loads(path.read_text())
    if len(ports) != len(core.layers):
        raise FpgaplaceError(f"{path}: {len(ports)} layers, design.json's core {core.name} has {len(core.layers)}")
    return ports


def duration(seconds: float) -> str:
    """``seconds`` as a person reads a forecast: seconds under a minute and a half, else minutes."""
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def stage_size(layer: Layer) -> int:
    """The netlist a simulator evaluates a cycle, in the op library's units: LUTs and FFs, plus one."""
    return 1 + layer.resources.get("lut", 0) + layer.resources.get("ff", 0)


def run_cost(layer: Layer, run: StageRun, k: int, samples: int, steady: int, frame_rows: int | None) -> float:
    """The cycles one run simulates (``fpgaplace.sim.rtl.SimulatorSpeed``): its samples (the random
    phase counted twice, for its gaps) of the layer's cycles, a band's share of the frame's rows.
    O(1)."""
    if run.cut is None:
        return max(1, layer.cycles) * (2 * samples + steady)
    share = run.cut.rows / frame_rows if frame_rows else 1.0
    return max(1, layer.cycles) * ((2 * samples if k == 0 else 0) + BAND_STEADY) * share


def _simulate_run(project: Path, ref: StageRef, run: StageRun, k: int, arrays: dict[str, np.ndarray],
                  samples: list[dict[str, np.ndarray]], folder: Path, seed: int, steady: int,
                  simulator: str | None) -> tuple[dict[str, Any], bool]:
    """Run ``k`` of a layer's module alone on its reference inputs (``simulate_project_stages``):
    the whole frame, or a band of it (on the inputs' first rows, checked against the cut layer's
    reference; the first band also with random gaps and backpressure; ``BAND_STEADY`` samples
    back to back, the interval between the first two ends). Cached (``_stage_run``)."""
    layer = ref.layer
    per_port = [np.stack([v[t].astype(np.int8)[:port["length"]] for v in samples])
                for t, port in zip(layer.inputs, run.ports["inputs"], strict=True)]
    if run.cut is None:
        expected = np.stack([v[layer.output] for v in samples]).astype(np.int64)
    else:
        kernel = KERNELS[layer.kernel]
        expected = np.stack([kernel.reference(run.cut.config, arrays, list(vectors), rows=layer.rows).reshape(-1)
                             for vectors in zip(*per_port, strict=True)]).astype(np.int64)
    band_steady = (BAND_STEADY, 0) if run.cut else (steady, 1)
    return _stage_run(project, run, per_port, expected, folder, seed, band_steady[0], simulator,
                      random_phase=k == 0, model_cycles=layer.cycles, warmup=band_steady[1])


def _stage_result(ref: StageRef, runs: list[StageRun], values: list[tuple[dict[str, Any], bool]],
                  simulators: list[str]) -> StageResult:
    """A layer's result from its runs (``_simulate_run``, on ``simulators``): the whole frame's, or
    the frame's cycles extrapolated from two bands' (``extrapolate``)."""
    layer = ref.layer
    bit_exact = all(value["bit_exact"] for value, _ in values)
    hit = all(cached_ for _, cached_ in values)
    used = tuple(dict.fromkeys(simulators))
    if runs[0].cut is None:
        return StageResult(ref.name, layer.kernel, bit_exact, values[0][0]["cycles"], layer.cycles, hit,
                           simulators=used)
    frame = FrameCut((runs[0].cut.rows, runs[1].cut.rows), (values[0][0]["cycles"], values[1][0]["cycles"]),
                     KERNELS[layer.kernel].frame_rows(layer.config))
    return StageResult(ref.name, layer.kernel, bit_exact, frame.frame_cycles, layer.cycles, hit, frame, used)


def _stage_run(project: Path, run: StageRun, per_port: list[np.ndarray], expected: np.ndarray, folder: Path,
               seed: int, steady: int, simulator: str | None, random_phase: bool, model_cycles: int,
               warmup: int = 1) -> tuple[dict[str, Any], bool]:
    """One simulation of a stage's module (``run``) on ``per_port`` (the random phase only where
    ``random_phase``), its outputs against ``expected``: ``{"bit_exact", "cycles"}`` (steady cycles
    a sample), cached by the module and the job; and whether it came from the cache."""
    phases = stream_phases(per_port, steady)
    phases = phases if random_phase else phases[1:]
    job = {"inputs": run.ports["inputs"], "outputs": run.ports["outputs"],
           "cycle_limit": 64 * max(1, model_cycles) * (len(expected) + steady) + 5000, "phases": phases}
    want = {"random": expected, "steady": np.resize(expected, (steady, expected.shape[1]))}

    def simulate() -> dict[str, Any]:
        results = run_cocotb(STAGE_TOP, _write_module(run.module, folder), folder, job, seed, simulator)
        checked = [phase_result(phase["name"], result, want[phase["name"]], warmup)
                   for phase, result in zip(job["phases"], results, strict=True)]
        return {"bit_exact": all(phase.bit_exact for phase in checked), "cycles": checked[-1].cycles_per_vector}

    return cached(project, "rtl", module_key(run.module, "rtl", simulator, job), simulate)


STAGE_TOP = "stage_dut"
"""The name a stage's module is simulated under (``_write_module``): two stages of one
configuration (ResNet-50 repeats its blocks) are then the same Verilog but for their weight
files, so Verilator writes the same C++ and ccache serves the second build."""


def verilog_key(module: Module) -> str:
    """What a stage's build depends on: its Verilog under ``STAGE_TOP`` (not its ROM files). Runs
    of one key after the first cost no build (ccache), so they are ordered after it, not beside it."""
    return content_key(*sorted((name.replace(module.top, STAGE_TOP), text.replace(module.top, STAGE_TOP))
                               for name, text in module.files.items() if name.endswith(".v")))


def _write_module(module: Module, folder: Path) -> list[Path]:
    """The module's files written into ``folder``, its top renamed ``STAGE_TOP`` in every file's
    name and text (its ROM files are named after it); its Verilog sources."""
    folder.mkdir(parents=True, exist_ok=True)
    names = {name: name.replace(module.top, STAGE_TOP) for name in module.files}
    for name, text in module.files.items():
        (folder / names[name]).write_text(text.replace(module.top, STAGE_TOP))
    return [folder / names[name] for name in module.files if name.endswith(".v")]
