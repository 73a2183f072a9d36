"""Icarus Verilog against Verilator on a project's stage runs: each run's size and cycles, the
seconds ``fpgaplace.sim.rtl.SPEEDS`` predicts for each simulator, the seconds each took (build and
run, a cold result cache), and which one ``auto`` picks. The table is what ``SPEEDS`` is fitted to.

Usage: .venv/bin/python scripts/bench_rtl_simulators.py PROJECT [--stages PATTERNS] [--only icarus|verilator]
       [--json out.json]
  PROJECT    a compiled project (fpgaplace compile ...)
  --stages   the stages to time (``fpgaplace sim --stages`` patterns; default every stage: slow on Icarus)
Each run is the first run ``fpgaplace sim --rtl`` makes of the stage (its first band, with the
random phase, where the frame is cut). The project is copied to a temporary folder, so its own
result cache is neither read nor written.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from fpgaplace.flow.checks import frame_cuts
from fpgaplace.hw import KERNELS
from fpgaplace.project.record import load
from fpgaplace.sim import rtl_project
from fpgaplace.sim.rtl import SIMULATORS, SPEEDS, fastest
from fpgaplace.sim.stages import layer_modules, select


def first_run(project: Path, ref, cut) -> tuple[rtl_project.StageRun, float]:
    """The first run ``simulate_project_stages`` makes of ``ref`` and the cycles it simulates."""
    layer = ref.layer
    frame = KERNELS[layer.kernel].frame_rows(layer.config)
    heights = rtl_project.cut_heights(frame, layer.config)
    band = cut(ref, heights[0]) if heights else None
    if band is not None:
        run = rtl_project.StageRun(band.module, band.ports, band)
    else:
        ports = rtl_project._stage_ports(project, ref.core)[ref.index]
        run = rtl_project.StageRun(layer_modules(project, ref.core)[ref.index], ports, None)
    return run, rtl_project.run_cost(layer, run, 0, 1, 3, frame)


def time_run(project: Path, ref, run, simulator: str, scratch: Path) -> tuple[float, bool]:
    """Seconds of one uncached run of ``run`` on ``simulator`` and whether it was bit-exact."""
    shutil.rmtree(project / "results" / "cache" / "rtl", ignore_errors=True)
    arrays = rtl_project.load_arrays(project, ref.core)
    samples = rtl_project._stage_stimuli(ref.core, arrays, 1, 0)
    started = time.perf_counter()
    value, _ = rtl_project._simulate_run(project, ref, run, 0, arrays[ref.index], samples,
                                         scratch / f"{ref.index}_{simulator}", 0, 3, simulator)
    return time.perf_counter() - started, value["bit_exact"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("project", type=Path)
    parser.add_argument("--stages", default=None)
    parser.add_argument("--only", choices=SIMULATORS, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    simulators = [args.only] if args.only else list(SIMULATORS)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-rtl-sim-") as scratch:
        project = Path(scratch) / "project"
        shutil.copytree(args.project, project, ignore=shutil.ignore_patterns("cache"))
        cut = frame_cuts(project)
        print("| stage | kernel | size | cycles | auto | " + " | ".join(
            f"{name} predicted s | {name} s" for name in simulators) + " | bit-exact |")
        print("|---|---|---|---|---|" + "---|---|" * len(simulators) + "---|")
        for ref in select(load(project), args.stages):
            run, cycles = first_run(project, ref, cut)
            size = rtl_project.stage_size(ref.layer)
            row = {"stage": ref.name, "kernel": ref.layer.kernel, "size": size, "cycles": cycles,
                   "auto": fastest(size, cycles)}
            exact = True
            for name in simulators:
                seconds, bit_exact = time_run(project, ref, run, name, Path(scratch))
                row[name] = {"predicted_s": SPEEDS[name].seconds(size, cycles), "measured_s": seconds}
                exact &= bit_exact
            row["bit_exact"] = exact
            rows.append(row)
            print(f"| {ref.name} | {ref.layer.kernel} | {size:,} | {cycles:,.0f} | {row['auto']} | " + " | ".join(
                f"{row[n]['predicted_s']:.1f} | {row[n]['measured_s']:.1f}" for n in simulators)
                + f" | {'yes' if exact else 'NO'} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if all(row["bit_exact"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
