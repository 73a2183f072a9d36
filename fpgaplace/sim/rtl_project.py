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
from pathlib import Path
from typing import Any

import numpy as np

from fpgaplace.hw import KERNELS
from fpgaplace.project.arrays import load_arrays, random_samples
from fpgaplace.project.layout import RESULTS_DIR, RTL_DIR, SIM_DIR, cell_name
from fpgaplace.project.record import Core, load
from fpgaplace.sim.rtl import run_cocotb, stream_phases
from fpgaplace.util.errors import FpgaplaceError

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

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "bit_exact": self.bit_exact, "cycles_measured": self.cycles_measured,
                "cycles_model": self.cycles_model, "latency_measured": self.latency_measured,
                "latency_model": self.latency_model}


@dataclass(frozen=True)
class RtlResult:
    cores: list[CoreResult]

    @property
    def ok(self) -> bool:
        return all(core.bit_exact for core in self.cores)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "cores": [core.to_json() for core in self.cores]}


def core_reference(record: Core, arrays: list[dict[str, np.ndarray]], inputs: list[np.ndarray]) -> list[np.ndarray]:
    """One sample through the integer reference of every layer (as ``csim``'s ``_Core.reference``)."""
    values = {t.name: x for t, x in zip(record.inputs, inputs, strict=True)}
    for layer, arrays_of_layer in zip(record.layers, arrays, strict=True):
        kernel = KERNELS[layer.kernel]
        values[layer.output] = kernel.reference(layer.config, arrays_of_layer,
                                                [values[t] for t in layer.inputs], rows=layer.rows).reshape(-1)
    return [values[record.aliases.get(t.name, t.name)].reshape(-1) for t in record.outputs]


def core_files(project: Path, record: Core, folder: Path) -> tuple[str, list[Path], dict[str, Any]]:
    """The core's top name, its Verilog sources copied (with their ROMs) into ``folder`` and its
    compiled job (ports); a one-line error where compile left no RTL for it."""
    name = cell_name(record.name)
    rtl_folder, job_file = project / RTL_DIR / name, project / SIM_DIR / name / "job.json"
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
    """Every core of ``project`` in RTL (``simulate_core``, on ``simulator``); writes ``results/rtl.json``."""
    project = Path(project)
    design = load(project)
    results = []
    with tempfile.TemporaryDirectory(prefix="fpgaplace-rtl-") as scratch:
        for core in design.cores:
            if progress is not None:
                progress(f"RTL simulation of {core.name} ({len(core.layers)} layers)")
            results.append(simulate_core(project, core, Path(scratch) / cell_name(core.name), samples, seed,
                                         simulator=simulator))
    result = RtlResult(results)
    (project / RESULTS_DIR).mkdir(exist_ok=True)
    (project / RESULTS_DIR / RTL_RESULTS).write_text(json.dumps(result.to_json(), indent=2) + "\n")
    return result
