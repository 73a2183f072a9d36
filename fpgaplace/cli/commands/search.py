"""``fpgaplace search``: rank placements over optimizer on/off, objective, cores, splits and batch."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from fpgaplace.cli.options import (
    BoardOption,
    JsonOption,
    ModelArgument,
    ModelFlags,
    Only,
    check_out_folder,
    check_time_limit,
    flag_groups,
)
from fpgaplace.cli.output import finite, out, print_json, progress, write_json_atomically
from fpgaplace.util.errors import FpgaplaceError


@flag_groups
def search(
    model: ModelArgument,
    board_name: BoardOption = "zcu104",
    target: Annotated[
        str, typer.Option("--target", help="Rank by throughput (time per sample) or latency.")
    ] = "throughput",
    batches: Annotated[str, typer.Option("--batch", help="Batch sizes to try, comma-separated (e.g. 1,4).")] = "1",
    optimized: Annotated[
        bool | None,
        typer.Option("--optimize/--no-optimize", help="Only with (or only without) the graph optimizer; default both."),
    ] = None,
    flags: Annotated[ModelFlags, Only("input_shape", "precision", "cpu_cost", "profile")] = ModelFlags(),
    time_limit: Annotated[
        float, typer.Option("--time-limit", min=1.0, callback=check_time_limit,
                            help="Total seconds the whole search may take."),
    ] = 120.0,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Write the best placement and its split here.")] = None,
    top: Annotated[int, typer.Option("--top", min=1, help="Rows of the ranked table to print.")] = 15,
    as_json: JsonOption = False,
) -> None:
    """Search optimizer on/off, objective, cores used, (non-)contiguous splits and batch sizes.

    Example: fpgaplace search model.onnx --board zcu102 --batch 1,4 --time-limit 60 --out best/
    """
    from fpgaplace.flow.search import search as run_search
    from fpgaplace.flow.split import check_out_dir
    from fpgaplace.project.layout import SPLIT_DIR

    sizes = _parse_batches(batches)
    if out_dir is not None:
        check_out_folder(out_dir, "placement.json")
        check_out_dir(out_dir / SPLIT_DIR)
    ranked = run_search(
        model,
        board_name,
        target=target,
        batches=sizes,
        optimizer=(False, True) if optimized is None else (optimized,),
        time_limit=time_limit,
        progress=progress,
        input_shapes=flags.input_shapes(),
        precision=flags.precision,
        profile_cpu=flags.profile_cpu(),
    )
    best = ranked[0]
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        best.design.split(out_dir / SPLIT_DIR)
        write_json_atomically(out_dir / "placement.json", best.design.placement_json())
    rows = [
        {
            "rank": rank,
            **dataclasses.asdict(s.candidate),
            "method": s.candidate.method,
            "us_per_sample_pipelined": s.per_sample_throughput,
            "us_per_sample_latency": s.per_sample_latency,
            "gap": finite(s.result.placement.gap),
        }
        for rank, s in enumerate(ranked, start=1)
    ]
    if as_json:
        print_json({"target": target, "ranked": rows, "out": str(out_dir) if out_dir else None})
        return
    table = Table(title=f"{model.name} on {best.design.board.name}: ranked by {target} (us per sample)")
    for column in ("#", "optimizer", "objective", "cores", "sets", "batch", "pipelined", "latency", "gap"):
        table.add_column(column)
    for r in rows[:top]:
        table.add_row(
            str(r["rank"]),
            "on" if r["optimized"] else "off",
            r["objective"],
            f"{r['cores']} (cut)" if r["cut"] else str(r["cores"]),
            "contiguous" if r["contiguous"] else "non-contig.",
            str(r["batch"]),
            f"{r['us_per_sample_pipelined']:.4g}",
            f"{r['us_per_sample_latency']:.4g}",
            f"{r['gap']:.1%}" if r["gap"] is not None else "—",
        )
    out.print(table)
    if out_dir is not None:
        out.print(f"best placement and its split written to {out_dir}")


def _parse_batches(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 1:
        raise FpgaplaceError(f"--batch: expected positive integers separated by commas, got {text!r}")
    return sizes
