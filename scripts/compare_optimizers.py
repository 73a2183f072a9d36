"""Compare op counts after fpgaplace's graph optimizer with onnxsim and onnxoptimizer.

Set-up (both are optional, the script reports a tool that is missing):
    pip install onnxsim onnxoptimizer

Run:
    python scripts/compare_optimizers.py [--json]

For each model (the onnx package's light ResNet-50 and Inception-v2 structures, and the
residual CNN and BERT encoder layer of ``fpgaplace.model.zoo``) it prints the number of nodes and
of BatchNormalization nodes before and after each optimizer, and for ours also the number of
kernels once fused groups count as one. Every optimized model is run with onnxruntime on the
same random input as the original; the table shows the relative error of the outputs.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import onnx
from rich.console import Console
from rich.table import Table

from fpgaplace.model import zoo as models
from fpgaplace.model.passes import fused_groups, op_counts, optimize
from fpgaplace.util.compare import relative_error
from fpgaplace.util.onnxrt import random_inputs, run_model


def ours(model: onnx.ModelProto) -> onnx.ModelProto:
    return optimize(model)[0]


def with_onnxsim(model: onnx.ModelProto) -> onnx.ModelProto:
    import onnxsim

    simplified, ok = onnxsim.simplify(model)
    if not ok:
        raise RuntimeError("onnxsim's own check failed")
    return simplified


def with_onnxoptimizer(model: onnx.ModelProto) -> onnx.ModelProto:
    import onnxoptimizer

    return onnxoptimizer.optimize(model, onnxoptimizer.get_fuse_and_elimination_passes())


OPTIMIZERS: dict[str, Callable[[onnx.ModelProto], onnx.ModelProto]] = {
    "fpgaplace": ours, "onnxsim": with_onnxsim, "onnxoptimizer": with_onnxoptimizer,
}


def workloads() -> dict[str, onnx.ModelProto]:
    return {
        "resnet50 (light)": onnx.load(models.light_model_path("resnet50")),
        "inception_v2 (light)": onnx.load(models.light_model_path("inception_v2")),
        "cnn_residual": models.cnn_residual(batch=1),
        "bert_encoder_layer": models.bert_encoder_layer(batch=1),
    }


def measure(name: str, model: onnx.ModelProto) -> list[dict]:
    inputs = random_inputs(model, seed=0)
    expected = run_model(model, inputs)
    rows = [{"model": name, "optimizer": "(original)", "nodes": len(model.graph.node),
             "batchnorm": op_counts(model).get("BatchNormalization", 0), "kernels": None,
             "seconds": 0.0, "max_rel_error": 0.0, "error": None}]
    for label, run in OPTIMIZERS.items():
        row = {"model": name, "optimizer": label, "kernels": None}
        try:
            start = time.perf_counter()
            optimized = run(model)
            row["seconds"] = time.perf_counter() - start
        except Exception as exc:  # noqa: BLE001 - report the tool's failure in the table
            row.update(nodes=None, batchnorm=None, seconds=None, max_rel_error=None,
                       error=f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            rows.append(row)
            continue
        actual = run_model(optimized, inputs)
        row.update(nodes=len(optimized.graph.node),
                   batchnorm=op_counts(optimized).get("BatchNormalization", 0),
                   max_rel_error=max(relative_error(actual[k], v) for k, v in expected.items()),
                   error=None)
        if label == "fpgaplace":
            members = sum(len(m) for m in fused_groups(optimized).values())
            row["kernels"] = row["nodes"] - members
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    rows = [row for name, model in workloads().items() for row in measure(name, model)]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(title="op counts before/after graph optimizers")
    for column in ("model", "optimizer", "nodes", "BatchNorm", "kernels", "seconds",
                   "max rel. error", "note"):
        table.add_column(column, justify="left" if column in ("model", "optimizer", "note")
                         else "right")

    def show(value, fmt: str = "{}") -> str:
        return "-" if value is None else fmt.format(value)

    for row in rows:
        table.add_row(row["model"], row["optimizer"], show(row["nodes"]), show(row["batchnorm"]),
                      show(row["kernels"]), show(row["seconds"], "{:.2f}"),
                      show(row["max_rel_error"], "{:.1e}"), row["error"] or "")
    Console(width=140).print(table)


if __name__ == "__main__":
    main()
