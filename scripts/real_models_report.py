"""Print, for each real model structure of tests/real_models.py, our dot-product MACs beside an
independent count (onnx-tool; qonnx's inference_cost for QONNX), their relative difference, and
whether inspect, cost, place and split ran through the CLI with exit 0 and the shapes of an
onnxruntime run.

Usage: python scripts/real_models_report.py [--full] [--models yolo,bert,...] [--cpu-cost analytic|profile]

``--full`` builds the full sizes (YOLO at 320 x 320, BERT-base with 12 layers at 128 tokens, ...),
which takes minutes; the default sizes are the tests'.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import real_models  # noqa: E402 - the builders live with the tests

from fpgaplace.model.frontend.build import dot_product_macs
from fpgaplace.model.frontend.load import from_model


def report_row(name: str, full: bool, cpu_cost: str) -> tuple[list[str], bool]:
    """One table row (model, ops, our MACs, theirs, the tool, difference, commands, shapes, seconds)
    and whether the model passed: within 1 %, every command exit 0, every compared shape equal."""
    start = time.perf_counter()
    model, shapes = real_models.build(name, full)
    graph = from_model(model, input_shapes=shapes or None, source=f"{name}.onnx")
    ours = dot_product_macs(graph)
    theirs, tool = real_models.independent_macs(model, shapes)
    with tempfile.TemporaryDirectory(prefix="fpgaplace-real-") as tmp:
        folder = Path(tmp)
        path = folder / f"{name}.onnx"
        onnx.save(model, path)
        runs = real_models.run_commands(path, shapes, folder, cpu_cost)
    exits = " ".join(f"{run.command}={run.exit_code}" for run in runs)
    inspected = runs[0].document
    compared, wrong = real_models.shape_mismatches(model, shapes, inspected) if inspected else (0, ["no output"])
    difference = (ours - theirs) / theirs if theirs else float("nan")
    passed = abs(difference) <= 0.01 and all(run.exit_code == 0 for run in runs) and not wrong
    row = [name, str(len(graph.ops)), f"{ours:,}", f"{theirs:,.0f}", tool, f"{difference:+.3%}", exits,
           f"{compared - len(wrong)}/{compared} equal", f"{time.perf_counter() - start:.1f}"]
    return row, passed


def table(rows: list[list[str]]) -> str:
    header = ["model", "ops", "our MACs", "independent MACs", "counted by", "difference", "CLI exit codes",
              "op shapes vs onnxruntime", "seconds"]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [" | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) for row in [header, *rows]]
    lines.insert(1, "-+-".join("-" * width for width in widths))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="full-size models (minutes)")
    parser.add_argument("--models", default=",".join(real_models.REAL_MODELS), help="comma-separated model names")
    parser.add_argument("--cpu-cost", default="analytic", choices=("analytic", "profile"))
    args = parser.parse_args()
    names = [name.strip() for name in args.models.split(",") if name.strip()]
    unknown = [name for name in names if name not in real_models.REAL_MODELS]
    if unknown:
        parser.error(f"unknown models {unknown}; expected some of {', '.join(real_models.REAL_MODELS)}")
    results = [report_row(name, args.full, args.cpu_cost) for name in names]
    print(table([row for row, _ in results]))
    failed = [row[0] for row, passed in results if not passed]
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
