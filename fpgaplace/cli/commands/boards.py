"""``fpgaplace boards`` and ``fpgaplace board``: the boards that ship, and one board in detail."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from fpgaplace.cli.options import JsonOption
from fpgaplace.cli.output import human, out, print_json


def boards(as_json: JsonOption = False) -> None:
    """List the boards that ship with fpgaplace.

    Example: fpgaplace boards --json
    """
    from fpgaplace.board.load import list_boards, load_board

    summaries = [load_board(name).summary() for name in list_boards()]
    if as_json:
        print_json(summaries)
        return
    table = Table(title="boards")
    for column in ("name", "part", "FPGA cores", "DSP", "on-chip", "CPUs"):
        table.add_column(column)
    for s in summaries:
        table.add_row(
            s["name"],
            s["part"],
            str(len(s["cores"])),
            str(sum(c["dsp"] for c in s["cores"])),
            human(sum(c["onchip_bytes"] for c in s["cores"]), "B"),
            str(len(s["cpus"])),
        )
    out.print(table)


def board(
    name: Annotated[str, typer.Argument(help="Board name (see `fpgaplace boards`) or a board YAML file.")],
    as_json: JsonOption = False,
) -> None:
    """Show one board: its part, cores, CPUs and links.

    Example: fpgaplace board zcu104
    """
    from fpgaplace.board.load import load_board

    summary = load_board(name).summary()
    if as_json:
        print_json(summary)
        return
    out.print(f"[bold]{summary['name']}[/]  part {summary['part']}")
    table = Table(title="FPGA cores")
    for column in ("core", "DSP", "BRAM36", "URAM", "LUT", "on-chip", "MHz", "SLR"):
        table.add_column(column)
    for c in summary["cores"]:
        table.add_row(
            c["name"],
            str(c["dsp"]),
            str(c["bram36"]),
            str(c["uram"]),
            str(c["lut"]),
            human(c["onchip_bytes"], "B"),
            f"{c['clock_mhz']:g}",
            str(c["region"]),
        )
    out.print(table)
    cpus = summary["cpus"]
    if cpus:
        out.print(f"CPUs: {len(cpus)} x {cpus[0]['kind']} ({cpus[0]['gflops']:g} GFLOP/s each)")
    for key in ("dram", "stream", "network"):
        link = summary.get(key)
        if link:
            out.print(f"{key} link: {link['gbps']:g} GB/s, {link['latency_us']:g} us")
