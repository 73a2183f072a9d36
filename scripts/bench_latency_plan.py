"""The placement's single-sample latency beside ``fpgaplace sim``'s, and the old sum.

    python scripts/bench_latency_plan.py [--models cnn_residual,resnet50] [--board zcu104]

For each model: compile for the board (int8, random calibration), then one row: the latency the
placement's evaluator gives the compiled placement (each core's stages overlapped by their fills,
paced at the core's load: ``hw.kernel.dataflow_latency``, ``place.solvers.evaluate.unit_compute``),
the same placement with a core's ops summed (the objective before issue 21), and ``sim``'s
latency of one sample (the folded stages' fills, ``hw.registry.core_latency``), in us, with the
plan's and the sum's error against sim. Issue 21: the placement's latency objective reads the
same figure for a core as ``sim``.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import onnx

from fpgaplace import Design
from fpgaplace.model import zoo
from fpgaplace.place.solvers.evaluate import evaluate
from fpgaplace.sim.event import simulate

MODELS = {
    "cnn_residual": lambda: zoo.cnn_residual(batch=1),
    "cnn_residual_16": lambda: zoo.cnn_residual(batch=1, image=16),
    "resnet50": lambda: onnx.load(str(zoo.light_model_path("resnet50"))),
}
SAMPLES = 2  # random calibration samples


def row(name: str, board: str, folder: Path) -> str:
    """One table row: compile ``name`` for ``board`` into ``folder`` and set the figures side by side."""
    design = Design(MODELS[name](), board, profile_cpu=False)
    design.compile(folder, random_samples=SAMPLES)
    placed = design.quantized(random_samples=SAMPLES)
    plan = placed.placement.evaluation.latency
    summed = evaluate(placed.problem.additive(), placed.placement.placement).latency
    sim = simulate(folder, 1).latency_us
    return (f"| {name} | {board} | {sim:,.1f} | {plan:,.1f} | {plan / sim - 1:+.1%} | {summed:,.1f} | "
            f"{summed / sim - 1:+.1%} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="cnn_residual,resnet50", help=f"of {', '.join(MODELS)}")
    parser.add_argument("--board", default="zcu104")
    args = parser.parse_args()
    header = ("model", "board", "sim us", "placement us", "vs sim", "old sum us", "vs sim")
    print("| " + " | ".join(header) + " |\n|---|---|" + "---:|" * (len(header) - 2))
    with tempfile.TemporaryDirectory(prefix="bench-latency-") as scratch:
        for name in args.models.split(","):
            print(row(name, args.board, Path(scratch) / name), flush=True)

if __name__ == "__main__":
    main()
