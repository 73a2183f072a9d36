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
from fpgaplace.project.record import Core, load
from fpgaplace.sim.rtl import phase_result, run_cocotb, stream_phases
from fpgaplace.sim.stages import Module, StageRef, cached, layer_modules, module_key, select
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.files import write_file
from fpgaplace.util.tools import default_jobs, interruptible, run_parallel

RTL_RESULTS = "rtl.json"


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

    def to_json(self) -> dict[str, Any]:
        document = {"name": self.name, "bit_exact": self.bit_exact, "cycles_measured": self.cycles_measured,
                    "cycles_model": self.cycles_model, "latency_measured": self.latency_measured,
                    "latency_model": self.latency_model}
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

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kernel": self.kernel, "bit_exact": self.bit_exact,
                "cycles_measured": self.cycles_measured, "cycles_model": self.cycles_model}


@dataclass(frozen=True)
class RtlResult:
    cores: list[CoreResult]

    @property
    def ok(self) -> bool:
        return all(core.bit_exact for core in self.cores)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "cores": [core.to_json() for core in self.cores]}


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
    results = run_cocotb(top, sources, folder, job, seed, simulator)
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
                      time.perf_counter() - started)


def simulate_project_rtl(project: Path, samples: int = 1, seed: int = 0,
                         progress: Callable[[str], None] | None = None, simulator: str | None = None) -> RtlResult:
    """Every core of ``project`` in RTL as one top each (``simulate_core``, on ``simulator``; slow for
    wide cores, ``simulate_project_stages`` checks each layer alone); writes ``results/rtl.json``."""
    project = Path(project)
    design = load(project)
    results = []
    with tempfile.TemporaryDirectory(prefix="fpgaplace-rtl-") as scratch, interruptible():
        for core in design.cores:
            if progress is not None:
                progress(f"RTL simulation of {core.name} ({len(core.layers)} layers)")
            results.append(simulate_core(project, core, Path(scratch) / cell_name(core.name), samples, seed,
                                         simulator=simulator))
    result = RtlResult(results)
    (project / RESULTS_DIR).mkdir(exist_ok=True)
    write_file(project / RESULTS_DIR / RTL_RESULTS, json.dumps(result.to_json(), indent=2) + "\n")
    return result


def simulate_project_stages(project: Path, samples: int = 1, seed: int = 0, steady: int = 3,
                            progress: Callable[[str], None] | None = None, simulator: str | None = None,
                            jobs: int | None = None, stages: str | None = None) -> RtlResult:
    """Every layer of ``project`` (or those ``stages`` picks, ``fpgaplace.sim.stages.select``) in RTL
    alone, at its folding: its module (``rtl/<core>/``) on its inputs from the integer reference of
    ``samples`` random core inputs (with random gaps and backpressure, then ``steady`` back to
    back), every output compared bit-exactly, its steady cycles per sample beside the op
    library's. ``jobs`` simulations go side by side (default: this machine's cores), each result
    cached by the module and its stimuli; an interrupt ends the simulators and writes nothing. A
    core's result gathers its stages: bit-exact if all are, cycles the slowest stage's (its
    interval), model cycles the slowest layer's. Writes ``results/rtl.json`` atomically.
    O(sum over stages of cycles x lanes) simulator steps, the stages side by side."""
    project = Path(project)
    design = load(project)
    refs = select(design, stages)
    cores = {ref.core.name: ref.core for ref in refs}
    inputs = {name: _stage_stimuli(project, core, samples, seed) for name, core in cores.items()}
    ports = {name: _stage_ports(project, core) for name, core in cores.items()}
    modules = {name: layer_modules(project, core) for name, core in cores.items()}
    jobs = jobs or default_jobs()
    if progress is not None:
        progress(f"RTL simulation: {len(refs)} stages alone, {jobs} at a time")
    with tempfile.TemporaryDirectory(prefix="fpgaplace-rtl-") as scratch, interruptible():
        tasks = [(f"RTL {ref.name} ({ref.layer.kernel})", partial(
            _simulate_stage, project, ref, modules[ref.core.name][ref.index], ports[ref.core.name][ref.index],
            inputs[ref.core.name], Path(scratch) / f"{cell_name(ref.core.name)}_{ref.index}", seed, steady, simulator))
            for ref in refs]
        results = run_parallel(tasks, jobs, progress)
    gathered = []
    for name, core in cores.items():
        mine = [result for ref, result in zip(refs, results, strict=True) if ref.core.name == name]
        gathered.append(CoreResult(name, all(r.bit_exact for r in mine), max(r.cycles_measured for r in mine),
                                   max(r.cycles_model for r in mine), None, core.latency_cycles, stages=mine))
    result = RtlResult(gathered)
    (project / RESULTS_DIR).mkdir(exist_ok=True)
    write_file(project / RESULTS_DIR / RTL_RESULTS, json.dumps(result.to_json(), indent=2) + "\n")
    return result


def _stage_stimuli(project: Path, core: Core, samples: int, seed: int) -> list[dict[str, np.ndarray]]:
    """Every tensor of ``samples`` random inputs of ``core`` through its integer reference."""
    arrays = load_arrays(project, core)
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


def _simulate_stage(project: Path, ref: StageRef, module: Module, ports: dict[str, Any],
                    samples: list[dict[str, np.ndarray]], folder: Path, seed: int, steady: int,
                    simulator: str | None, warmup: int = 1) -> StageResult:
    """One layer's module alone on its reference inputs (``simulate_project_stages``), or its
    cached result."""
    layer = ref.layer
    per_port = [np.stack([values[t].astype(np.int8) for values in samples]) for t in layer.inputs]
    expected = np.stack([values[layer.output] for values in samples]).astype(np.int64)
    job = {"inputs": ports["inputs"], "outputs": ports["outputs"],
           "cycle_limit": 64 * max(1, layer.cycles) * (len(samples) + steady) + 5000,
           "phases": stream_phases(per_port, steady)}
    want = {"random": expected, "steady": np.resize(expected, (steady, expected.shape[1]))}

    def run() -> dict[str, Any]:
        results = run_cocotb(module.top, _write_module(module, folder), folder, job, seed, simulator)
        phases = [phase_result(phase["name"], result, want[phase["name"]], warmup)
                  for phase, result in zip(job["phases"], results, strict=True)]
        return {"bit_exact": all(phase.bit_exact for phase in phases), "cycles": phases[1].cycles_per_vector}

    key = module_key(module, "rtl", simulator or "default", job)
    value, hit = cached(project, "rtl", key, run)
    return StageResult(ref.name, layer.kernel, value["bit_exact"], value["cycles"], layer.cycles, hit)


def _write_module(module: Module, folder: Path) -> list[Path]:
    """The module's files written into ``folder``; its Verilog sources."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in module.files.items():
        (folder / name).write_text(text)
    return [folder / name for name in module.files if name.endswith(".v")]
