"""``fpgaplace split``: place a model and write one ONNX model per device, checked against it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from fpgaplace.cli.options import (
    BoardOption,
    JsonOption,
    ModelArgument,
    ModelFlags,
    PlacementFlags,
    check_out_parent,
    flag_groups,
)
from fpgaplace.cli.output import out, print_json

OutDirOption = Annotated[Path, typer.Option("--out", help="Folder for the per-device ONNX models and manifest.json.")]


@flag_groups
def split(
    model: ModelArgument,
    out_dir: OutDirOption,
    board_name: BoardOption = "zcu104",
    placing: PlacementFlags = PlacementFlags(),
    flags: ModelFlags = ModelFlags(),
    as_json: JsonOption = False,
) -> None:
    """Place a model and write one ONNX model per device, checked against the whole model.

    Example: fpgaplace split resnet50.onnx --board zcu104 --out split/
    """
    from fpgaplace.flow.split import check_out_dir

    check_out_dir(out_dir)
    check_out_parent(out_dir)
    design = flags.design(model, board_name)
    placing.place(design)
    manifest, errors = design.split(out_dir)
    result = design.placement
    document = {
        "out": str(out_dir),
        "value": result.value,
        "objective": placing.objective,
        "method": result.placement.method,
        "submodels": [{"name": s.name, "device": s.device, "ops": len(s.nodes)} for s in manifest.submodels],
        "transfers": manifest.stats.get("transfers_after"),
        "max_relative_error": max(errors.values(), default=0.0),
    }
    if as_json:
        print_json(document)
        return
    table = Table(title=f"{model.name} split into {out_dir} ({placing.objective} {result.value:.6g} us)")
    for column in ("submodel", "device", "ops"):
        table.add_column(column)
    for s in document["submodels"]:
        table.add_row(s["name"], s["device"], str(s["ops"]))
    out.print(table)
    out.print(f"outputs equal the whole model's (max relative error {document['max_relative_error']:.2g})")
