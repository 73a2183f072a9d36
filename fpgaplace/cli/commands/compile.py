"""``fpgaplace compile``: place an int8 model and write its HLS project (quantizing a float one)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fpgaplace.cli.options import (
    BoardOption,
    CalibOption,
    InputRangeOption,
    JsonOption,
    ModelArgument,
    ModelFlags,
    Only,
    PlacementFlags,
    RandomOption,
    calibration,
    check_out_parent,
    flag_groups,
)
from fpgaplace.cli.output import out, print_compile, print_json
from fpgaplace.util.errors import FpgaplaceError


@flag_groups
def compile_project(
    model: ModelArgument,
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for the project (design.json, one folder per core).")],
    board_name: BoardOption = "zcu104",
    placing: Annotated[
        PlacementFlags, Only("objective", "method", "subgraphs_per_device", "non_contiguous", "time_limit")
    ] = PlacementFlags(),
    calib: CalibOption = None,
    random: RandomOption = None,
    input_range: InputRangeOption = None,
    flags: Annotated[ModelFlags, Only("optimized", "input_shape", "batch", "cpu_cost", "profile",
                                      "precision", "lstm_cell_bits")] = ModelFlags(),
    fps: Annotated[float | None, typer.Option(
        "--fps", metavar="<samples/s>", help="Fold each core only as fast as this rate needs, on the least "
        "DSPs, LUTs and memory (FINN's target_fps): e.g. what the board's link can feed. The placement is "
        "chosen as without; a core that cannot keep up stays at its fastest. Default: as fast as each "
        "core's budget allows.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Place an int8 model and write its HLS project (one kernel per FPGA core, design.json).

    A QDQ model is taken as it is; a float model is quantized first (--calib or --random,
    default 32 random inputs; --precision int4 or int2 narrows its weights); a QONNX model is
    built at its quantizers' widths. Each layer's widths are printed. The CPU pieces are
    written as ONNX submodels.

    Example: fpgaplace compile model.onnx --board zcu104 --out project/ --random 64
    (and --fps 300 for a design no faster than 300 samples a second needs).
    """
    if out_dir.exists() and not out_dir.is_dir():
        raise FpgaplaceError(f"--out {out_dir}: is a file; expected a folder for the project")
    check_out_parent(out_dir)
    from fpgaplace.flow.compile import check_fps  # here: `place` and the other commands import this module light

    check_fps(fps)
    calibrated_on = calibration(calib, random, default_random=32, input_range=input_range)
    source = flags.design(model, board_name)
    design = source.quantized(**calibrated_on)
    placing.place(design)
    result = design.compile(out_dir, fps=fps)
    document = {**result.to_json(), "quantized_here": result.quantized_here}
    if as_json:
        print_json(document)
        return
    if source.is_qonnx:
        out.print(f"{model.name} is a QONNX model: its quantizers lowered to integer QDQ at their own widths")
    elif result.quantized_here:
        how = f"calibrated on {calib}" if calib else f"calibrated on {calibrated_on['random_samples']} random inputs"
        out.print(f"{model.name} is a float model: quantized to int8 QDQ ({how})")
    print_compile(document, design.board)
