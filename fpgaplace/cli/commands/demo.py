"""``fpgaplace demo``: the whole flow on a small built-in CNN, from import to C simulation."""

from __future__ import annotations

from pathlib import Path

import typer

from fpgaplace.cli.options import BoardOption, JsonOption, ModelFlags, TimeLimitOption
from fpgaplace.cli.output import human, out, print_compile, print_csim, print_json, print_results


def demo(
    board_name: BoardOption = "zcu104",
    time_limit: TimeLimitOption = 60.0,
    as_json: JsonOption = False,
) -> None:
    """Run the whole flow on a small built-in CNN, from import to C simulation.

    Import, optimize, quantize to int8, cost, place (optimal DP), compile and C-simulate in a
    temporary folder. Exit 1 when the C simulation is not exact.

    Example: fpgaplace demo --board kv260
    """
    from fpgaplace.model.zoo import demo_model

    design = ModelFlags().design(demo_model(), board_name, source="demo-cnn").quantized()
    result = design.place("throughput", "dp", time_limit)
    built = compile_and_csim(design)
    if as_json:
        print_json({**design.placement_json(result), **built})
    else:
        graph, board = design.graph, design.board
        out.print(
            f"[bold]demo[/]: {len(graph.ops)} ops (int8 QDQ), {human(graph.total_macs)} MACs on {board.name} "
            f"({len(board.cores)} FPGA cores, {len(board.cpus)} CPUs)"
        )
        print_results(design.problem, [result], "throughput", design.device_names())
        print_compile(built["compile"], board)
        print_csim(built["csim"])
    if not built["csim"].get("ok"):
        raise typer.Exit(1)


def compile_and_csim(design) -> dict[str, dict]:
    """Compile the placed ``design`` into a temporary project (removed afterwards) and
    C-simulate it; the two results' JSON under "compile" and "csim"."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="fpgaplace-demo-") as tmp:
        project = Path(tmp) / "project"
        compiled = design.compile(project)
        simulated = design.csim(project)
        return {"compile": compiled.to_json(), "csim": simulated.to_json()}
