"""``fpgaplace quantize``: a float model to int8 QDQ (weights at int4 or int2 with ``--precision``),
and its drift from the float model."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from fpgaplace.cli.options import (
    CalibOption,
    InputRangeOption,
    JsonOption,
    ModelArgument,
    ModelFlags,
    Only,
    RandomOption,
    SeedOption,
    calibration,
    check_out_file,
    flag_groups,
)
from fpgaplace.cli.output import out, print_json


@flag_groups
def quantize(
    model: ModelArgument,
    out_file: Annotated[Path, typer.Option("--out", help="Where to write the int8 QDQ model (.onnx).")],
    calib: CalibOption = None,
    random: RandomOption = None,
    input_range: InputRangeOption = None,
    seed: SeedOption = 0,
    flags: Annotated[ModelFlags, Only("input_shape", "batch", "precision", "lstm_cell_bits")] = ModelFlags(),
    as_json: JsonOption = False,
) -> None:
    """Quantize a float model to int8 QDQ and print its drift from the float model.

    onnxruntime static quantization: QDQ, per-channel symmetric int8 weights; with --precision int4
    (or int2) the weights of every Conv, Gemm and MatMul are then requantized to 4 (2) bits, stored
    in int8, with int8 activations.

    The model's input dims are bound first (--input-shape, --batch), as every command does.

    Example: fpgaplace quantize model.onnx --out model.int8.onnx --random 64
    """
    check_out_file(out_file)
    calibrated_on = calibration(calib, random, input_range=input_range)
    design = dataclasses.replace(flags, optimized=False).design(model)
    drift, path = design.quantize_file(out_file, seed=seed, **calibrated_on)
    document = {"model": str(model), "out": str(path), "drift": drift.to_json()}
    if as_json:
        print_json(document)
        return
    out.print(f"wrote {path}")
    table = Table(title=f"drift from {model.name} over {document['drift']['samples']} calibration samples")
    for column in ("output", "max abs error", "relative error", "top-1 agreement"):
        table.add_column(column, justify="left" if column == "output" else "right")
    for entry in document["drift"]["outputs"]:
        agreement = entry.get("top1_agreement")
        table.add_row(entry["name"], f"{entry['max_abs_error']:.4g}", f"{entry['max_relative_error']:.2%}",
                      "—" if agreement is None else f"{agreement:.1%}")
    out.print(table)
