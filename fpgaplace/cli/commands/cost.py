"""``fpgaplace cost``: each op's latency on every device kind of a board, on-chip bytes, transfers."""

from __future__ import annotations

import math

from rich.table import Table

from fpgaplace.cli.options import BoardOption, JsonOption, ModelArgument, ModelFlags, flag_groups
from fpgaplace.cli.output import finite, human, out, print_json


@flag_groups
def cost(
    model: ModelArgument,
    board_name: BoardOption = "zcu104",
    flags: ModelFlags = ModelFlags(),
    as_json: JsonOption = False,
) -> None:
    """Per-op cost on each device kind of a board: latency (us), on-chip bytes, transfer time.

    Example: fpgaplace cost resnet50.onnx --board zcu104 --precision int8
    """
    design = flags.design(model, board_name)
    costs = design.costs
    board = design.board
    if as_json:
        print_json(
            {
                "model": str(model),
                "board": board.name,
                "precision": flags.precision,
                "optimized": flags.optimized,
                "unit": "us",
                "ops": [
                    {
                        "name": c.name,
                        "type": c.op_type,
                        "latency_us": {k: finite(v) for k, v in c.latency_us.items()},
                        "onchip_bytes": c.onchip_bytes,
                        "streamed": c.streamed,
                        "transfer_us": c.transfer_us,
                        "cpu_measured": c.cpu_measured,
                    }
                    for c in costs
                ],
            }
        )
        return
    kinds = list(costs[0].latency_us) if costs else []
    table = Table(title=f"{model.name} on {board.name} ({flags.precision}, times in us)")
    for column in ["op", "type", *kinds, "on-chip", "transfer"]:
        table.add_column(column, justify="left" if column in ("op", "type") else "right")
    for c in costs:
        table.add_row(
            c.name,
            c.op_type,
            *[_us(c.latency_us[k]) for k in kinds],
            human(c.onchip_bytes, "B") + (" (streamed)" if c.streamed else ""),
            _us(c.transfer_us),
        )
    out.print(table)
    for k in kinds:
        total = sum(c.latency_us[k] for c in costs if math.isfinite(c.latency_us[k]))
        out.print(f"{k}: {total:,.1f} us over the ops it supports")


def _us(value: float) -> str:
    return f"{value:,.2f}" if math.isfinite(value) else "—"
