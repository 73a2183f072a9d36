"""``fpgaplace place`` and ``fpgaplace evaluate``: find a placement, or price a given one, of a
paper workload JSON or an ONNX model."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from fpgaplace.cli.options import JsonOption, ModelFlags, PlacementFlags, check_out_file, flag_groups
from fpgaplace.cli.output import err, out, print_json, print_results, progress, write_json_atomically

InputArgument = Annotated[
    Path, typer.Argument(metavar="INPUT", help="A paper workload JSON, or an ONNX model (with --board).")
]
OptionalBoardOption = Annotated[
    str | None, typer.Option("--board", "-b", help="Board for an ONNX model (default zcu104).")
]


def _load_input(input_path: Path, board_name: str | None, flags: ModelFlags):
    """(problem, None) for a workload JSON; (the model's design's problem, design) for a model."""
    from fpgaplace.flow.design import Design, load_input

    loaded = load_input(input_path, board_name, **flags.design_options())
    return (loaded.problem, loaded) if isinstance(loaded, Design) else (loaded, None)


@flag_groups
def place(
    input_path: InputArgument,
    board_name: OptionalBoardOption = None,
    placing: PlacementFlags = PlacementFlags(),
    flags: ModelFlags = ModelFlags(),
    out_file: Annotated[Path | None, typer.Option("--out", help="Write the placement JSON here.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Find a placement: every op on a core or a CPU, with a proven bound and gap.

    Examples:

      fpgaplace place workloads/throughput/layer-bert24_inference.json --method dp

      fpgaplace place model.onnx --board zcu104 --objective latency --method ip -q 2

      fpgaplace place model.onnx --board kv260 --method all --json
    """
    from fpgaplace.flow.design import place_problem, placement_json

    started = time.perf_counter()
    if out_file is not None:
        check_out_file(out_file)
    problem, design = _load_input(input_path, board_name, flags)
    placing = placing.counted_from(started)
    if design is None:
        results = place_problem(problem, placing.objective, placing.method, placing.time_limit,
                                **placing.solver_options(), progress=progress)
    else:
        results = placing.place(design)
    names = design.device_names() if design else None
    documents = [placement_json(problem, r, names) for r in results]
    document = documents if placing.method == "all" else documents[0]
    if out_file is not None:
        write_json_atomically(out_file, document)
    if as_json:
        print_json(document)
        return
    print_results(problem, results, placing.objective, names)


@flag_groups
def evaluate(
    input_path: InputArgument,
    split: Annotated[
        Path, typer.Option("--split", help="Placement file: the paper's split format or `place --out` output.")
    ],
    board_name: OptionalBoardOption = None,
    flags: ModelFlags = ModelFlags(),
    as_json: JsonOption = False,
) -> None:
    """Max-load and latency of a given split (the paper's expert splits included).

    For an ONNX model, give the same model flags as the `place` that wrote the split.

    Example: fpgaplace evaluate layer-bert24_inference.json --split bert24_inference_expert.json
    """
    from fpgaplace.place.solvers.evaluate import evaluate as evaluate_placement
    from fpgaplace.place.workload import load_split

    problem, design = _load_input(input_path, board_name, flags)
    placement = load_split(split, problem)
    result = evaluate_placement(problem, placement)
    names = design.device_names() if design else [problem.device_name(d) for d in range(len(problem.devices()))]
    document = {
        "maxLoad": result.max_load,
        "latency": result.latency,
        "contiguous": result.contiguous,
        "feasible": result.feasible,
        "violations": result.violations,
        "loads": {names[d]: load for d, load in enumerate(result.loads)},
    }
    if as_json:
        print_json(document)
        return
    out.print(f"max-load {result.max_load:.6g}   latency {result.latency:.6g}   contiguous {result.contiguous}")
    for violation in result.violations:
        err.print(f"[yellow]violation:[/] {escape(violation)}", highlight=False)
