"""How long the stage-by-stage checks of ``fpgaplace sim`` take, and the latency before and after.

    python scripts/bench_stage_checks.py [--models cnn_residual,resnet50] [--board zcu104]
                                         [--checks dsp,resources,rtl] [--jobs N] [--timeout S]
                                         [--stages PATTERNS]

For each model: compile for the board (int8, random calibration), then one row per check, each
``fpgaplace sim PROJECT --samples 1`` in a subprocess with a wall-clock limit (``--timeout``):
``dsp`` (``--resources --dsp-only``: each layer's DSP probe through yosys), ``resources``
(``--resources``: each layer whole), ``rtl`` (``--rtl``: each layer alone in Icarus). A row gives
the wall time and the CPU time of the check and its tools (user + system, what a machine
shared with other jobs still measures fairly: the wall time of an idle machine is about the CPU
time over ``min(jobs, cores)``), the stages checked, how many agree with the op library (DSPs equal; cycles within
10 %) and the sim latency in cycles beside the old estimate (the sum of every layer's cycles).
Goals (issue 21): the small CNN's resources and RTL within 5 minutes each; ResNet-50's DSPs and
RTL cycles within 30 minutes. The results cache of a project is cleared before each check, so
every row is a cold run. ``--stages`` checks a representative subset (``fpgaplace sim --stages``)
and adds the whole design's CPU seconds extrapolated from it (the subset's CPU seconds a stage
times the design's stages; said so in the row: ``extrapolated``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onnx

from fpgaplace import Design
from fpgaplace.model import zoo
from fpgaplace.project.layout import RESULTS_DIR
from fpgaplace.project.record import load

MODELS = {
    "cnn_residual": lambda: zoo.cnn_residual(batch=1),
    "resnet50": lambda: zoo.with_random_weights(onnx.load(str(zoo.light_model_path("resnet50")))),
}
CHECKS = {"dsp": ["--resources", "--dsp-only"], "resources": ["--resources"], "rtl": ["--rtl"]}
CYCLE_TOLERANCE = 0.10


def agreement(check: str, document: dict) -> tuple[int, int]:
    """(stages agreeing with the op library, stages checked) of one check's JSON."""
    if check == "rtl":
        stages = [s for core in document["rtl"]["cores"] for s in core.get("stages", [])]
        good = [s for s in stages if s["bit_exact"]
                and abs(s["cycles_measured"] - s["cycles_model"]) <= CYCLE_TOLERANCE * s["cycles_model"]]
        return len(good), len(stages)
    layers = [layer for core in document["resources"]["cores"] for layer in core["layers"]]
    return sum(layer["dsp_equal"] for layer in layers), len(layers)


def run_check(project: Path, check: str, jobs: int | None, timeout: float, stages: str | None = None) -> dict:
    """One ``fpgaplace sim`` run of ``check`` (on ``stages`` if given) from a cold cache: wall time
    and what it found."""
    shutil.rmtree(project / RESULTS_DIR, ignore_errors=True)
    command = [sys.executable, "-m", "fpgaplace.cli.app", "sim", str(project), "--samples", "1", "--json",
               *CHECKS[check], *(["--jobs", str(jobs)] if jobs else []), *(["--stages", stages] if stages else [])]
    started, cpu = time.perf_counter(), children_cpu_s()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:  # SIGTERM: sim ends its yosys or simulators itself
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
        return {"check": check, "seconds": timeout, "cpu": children_cpu_s() - cpu, "status": f"over {timeout:.0f} s"}
    seconds, cpu = time.perf_counter() - started, children_cpu_s() - cpu
    if process.returncode != 0:
        return {"check": check, "seconds": seconds, "cpu": cpu,
                "status": (stderr.strip().splitlines() or ["failed"])[-1][:80]}
    document = json.loads(stdout)
    good, total = agreement(check, document)
    return {"check": check, "seconds": seconds, "cpu": cpu, "status": "ok", "agree": f"{good}/{total}",
            "latency_cycles": document["latency_cycles"], "checked": total}


def children_cpu_s() -> float:
    """User + system seconds of this process's ended children and their ended descendants (a
    check's ``sim`` waits for its yosys and simulators, so their time is in it once it ends)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="cnn_residual")
    parser.add_argument("--board", default="zcu104")
    parser.add_argument("--checks", default="dsp,resources,rtl")
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--stages", default=None, help="check only these stages (sim --stages) and extrapolate")
    args = parser.parse_args()
    print(f"load before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print("| model | check | wall s | cpu s | status | agree | latency cycles | sum of cycles (old) | load after | "
          "whole design cpu s |")
    print("|---|---|---:|---:|---|---|---:|---:|---|---:|")
    with tempfile.TemporaryDirectory(prefix="bench-stages-") as scratch:
        for name in args.models.split(","):
            project = Path(scratch) / name
            Design(MODELS[name](), args.board, profile_cpu=False).compile(project, random_samples=2)
            design = load(project)
            total = sum(layer.cycles for core in design.cores for layer in core.layers)
            stages = sum(len(core.layers) for core in design.cores)
            for check in args.checks.split(","):
                row = run_check(project, check, args.jobs, args.timeout, args.stages)
                whole = (f"{row['cpu'] * stages / row['checked']:.0f} (extrapolated from {row['checked']} of {stages})"
                         if args.stages and row.get("checked") else f"{row['cpu']:.0f}")
                print(f"| {name} | {check} | {row['seconds']:.0f} | {row['cpu']:.0f} | {row['status']} | "
                      f"{row.get('agree', '—')} | {row.get('latency_cycles', float('nan')):,.0f} | {total:,} | "
                      f"{os.getloadavg()[0]:.1f} | {whole} |", flush=True)


if __name__ == "__main__":
    main()
