"""The ``fpgaplace`` command: parses arguments, calls one stage, prints a table or JSON.

Errors a user can cause print as one line on stderr with exit code 1, never a traceback.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from fpgaplace.errors import FpgaplaceError

app = typer.Typer(
    name="fpgaplace",
    help=(
        "Place a neural network's operators on the cores of a multicore FPGA board and its CPUs.\n\n"
        "Typical flow:\n\n"
        "  fpgaplace inspect model.onnx            # what is in the model\n\n"
        "  fpgaplace boards                        # which boards ship with fpgaplace\n\n"
        "  fpgaplace cost model.onnx --board zcu104   # per-op cost on each device kind\n\n"
        "  fpgaplace place model.onnx --board zcu104  # optimal placement\n\n"
        "  fpgaplace demo                          # all of it on a built-in model"
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
out = Console()
err = Console(stderr=True)

JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout instead of a table.")]
BatchOption = Annotated[int, typer.Option("--batch", min=1, help="Value bound to symbolic batch dimensions.")]
BoardOption = Annotated[
    str, typer.Option("--board", "-b", help="Board name (see `fpgaplace boards`) or a board YAML file.")
]
PrecisionOption = Annotated[
    str, typer.Option("--precision", help="Bytes per weight/activation on the FPGA: int8, int16, float16 or float32.")
]


def user_errors(command):
    """Turn ``FpgaplaceError`` into one line on stderr and exit status 1."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except FpgaplaceError as error:
            err.print(f"[bold red]error:[/] {error}", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from None

    return wrapper


def print_json(data) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=_json_default) + "\n")


def _json_default(value):
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def human(value: float, unit: str = "") -> str:
    """1234567 -> '1.23 M'; keeps tables narrow."""
    if not math.isfinite(value):
        return "—"
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {suffix}{unit}"
    return f"{value:.3g} {unit}".rstrip()


# --------------------------------------------------------------------------- inspect


@app.command()
@user_errors
def inspect(
    model: Annotated[Path, typer.Argument(help="ONNX model file.")],
    batch: BatchOption = 1,
    as_json: JsonOption = False,
) -> None:
    """Show the model's ops: type, output shape, MACs, parameters, and where each may run.

    Example: fpgaplace inspect resnet50.onnx --batch 1
    """
    from fpgaplace.frontend import load_onnx

    graph = load_onnx(model, batch=batch)
    rows = [_op_row(graph, graph.ops[name]) for name in graph.topological_order()]
    totals = {
        "ops": len(rows),
        "macs": graph.total_macs,
        "param_bytes": graph.total_param_bytes,
        "fpga_ops": sum(r["fpga"] for r in rows),
        "cpu_only_ops": sum(not r["fpga"] for r in rows),
    }
    if as_json:
        print_json({"model": str(model), "batch": batch, "ops": rows, "totals": totals})
        return
    table = Table(title=f"{model.name} (batch {batch})")
    for column in ("op", "type", "output shape", "MACs", "params", "runs on"):
        table.add_column(column, justify="right" if column in ("MACs", "params") else "left")
    for r in rows:
        table.add_row(
            r["name"],
            r["type"],
            "x".join(map(str, r["output_shape"])) or "scalar",
            human(r["macs"]),
            human(r["param_bytes"], "B"),
            "FPGA or CPU" if r["fpga"] else "CPU only",
        )
    out.print(table)
    out.print(
        f"{totals['ops']} ops, {human(totals['macs'])} MACs, {human(totals['param_bytes'], 'B')} of parameters, "
        f"{totals['cpu_only_ops']} ops CPU-only"
    )


def _op_row(graph, op) -> dict:
    first = op.outputs[0] if op.outputs else ""
    shape = list(graph.tensors[first].shape) if first in graph.tensors else []
    return {
        "name": op.name,
        "type": op.op_type,
        "output_shape": shape,
        "macs": op.macs,
        "param_bytes": op.param_bytes,
        "fpga": op.fpga_supported,
    }


# --------------------------------------------------------------------------- boards


@app.command()
@user_errors
def boards(as_json: JsonOption = False) -> None:
    """List the boards that ship with fpgaplace.

    Example: fpgaplace boards --json
    """
    from fpgaplace.board import list_boards, load_board

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


@app.command()
@user_errors
def board(
    name: Annotated[str, typer.Argument(help="Board name (see `fpgaplace boards`) or a board YAML file.")],
    as_json: JsonOption = False,
) -> None:
    """Show one board: its part, cores, CPUs and links.

    Example: fpgaplace board zcu104
    """
    from fpgaplace.board import load_board

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


# --------------------------------------------------------------------------- cost


@app.command()
@user_errors
def cost(
    model: Annotated[Path, typer.Argument(help="ONNX model file.")],
    board_name: BoardOption = "zcu104",
    batch: BatchOption = 1,
    precision: PrecisionOption = "int8",
    profile: Annotated[bool, typer.Option(help="Measure CPU op times with onnxruntime (else analytic).")] = True,
    as_json: JsonOption = False,
) -> None:
    """Per-op cost on each device kind of a board: latency (us), on-chip bytes, transfer time.

    Example: fpgaplace cost resnet50.onnx --board zcu104 --precision int8
    """
    from fpgaplace.board import load_board
    from fpgaplace.cost import CostOptions, op_costs
    from fpgaplace.frontend import load_onnx

    graph = load_onnx(model, batch=batch)
    chosen = load_board(board_name)
    with err.status("profiling and costing ops..."):
        costs = op_costs(graph, chosen, CostOptions(precision=precision, profile_cpu=profile))
    if as_json:
        print_json(
            {
                "model": str(model),
                "board": chosen.name,
                "precision": precision,
                "unit": "us",
                "ops": [
                    {
                        "name": c.name,
                        "type": c.op_type,
                        "latency_us": {k: _finite(v) for k, v in c.latency_us.items()},
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
    table = Table(title=f"{model.name} on {chosen.name} ({precision}, times in us)")
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


# --------------------------------------------------------------------------- place / evaluate


ObjectiveOption = Annotated[
    str,
    typer.Option("--objective", "-o", help="throughput (minimise the pipeline's max load) or latency (one sample)."),
]


@app.command()
@user_errors
def place(
    input_path: Annotated[
        Path, typer.Argument(metavar="INPUT", help="A paper workload JSON, or an ONNX model (with --board).")
    ],
    board_name: Annotated[
        str | None, typer.Option("--board", "-b", help="Board for an ONNX model (default zcu104).")
    ] = None,
    objective: ObjectiveOption = "throughput",
    method: Annotated[
        str,
        typer.Option(
            "--method",
            "-m",
            help="auto (dp for contiguous throughput, else ip) | dp | ip | greedy | local-search | partitioner | "
            "pipedream | single | cpu | all",
        ),
    ] = "auto",
    subgraphs_per_device: Annotated[
        int,
        typer.Option("--subgraphs-per-device", "-q", min=1, help="Latency IP: subgraphs each core may run in turn."),
    ] = 1,
    non_contiguous: Annotated[
        bool, typer.Option("--non-contiguous", help="Throughput IP: allow non-convex device sets.")
    ] = False,
    time_limit: Annotated[float, typer.Option("--time-limit", min=0.1, help="Seconds per solver.")] = 60.0,
    batch: BatchOption = 1,
    precision: PrecisionOption = "int8",
    out_file: Annotated[Path | None, typer.Option("--out", help="Write the placement JSON here.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Find a placement: every op on a core or a CPU, with a proven bound and gap.

    Examples:

      fpgaplace place workloads/throughput/layer-bert24_inference.json --method dp

      fpgaplace place model.onnx --board zcu104 --objective latency --method ip -q 2

      fpgaplace place model.onnx --board kv260 --method all --json
    """
    from fpgaplace.inputs import load_problem
    from fpgaplace.solvers.run import SolveOptions, solve, solve_all
    from fpgaplace.workload import placement_to_json

    if out_file is not None and not out_file.parent.is_dir():
        raise FpgaplaceError(f"--out {out_file}: folder {out_file.parent} does not exist")
    with err.status(f"loading {input_path.name}..."):
        loaded = load_problem(input_path, board=board_name, batch=batch, precision=precision)
    options = SolveOptions(
        objective=objective,
        time_limit=time_limit,
        subgraphs_per_device=subgraphs_per_device,
        contiguous=not non_contiguous,
        progress=lambda message: err.print(f"[dim]{message}[/]", highlight=False),
    )
    problem = loaded.problem
    with err.status(f"solving ({method}, {objective})..."):
        results = solve_all(problem, options) if method == "all" else [solve(problem, method, options)]
    documents = [_with_names(problem, placement_to_json(problem, r.placement, r.evaluation)) for r in results]
    if out_file is not None:
        _write_json_atomically(out_file, documents if method == "all" else documents[0])
    if as_json:
        print_json(documents if method == "all" else documents[0])
        return
    _print_results(problem, results, objective)


def _with_names(problem, document: dict) -> dict:
    """Add node names beside ids where ids are positions (ONNX input)."""
    if problem.meta.get("board"):
        document["nodeNames"] = {str(i): name for i, name in zip(problem.ids, problem.names, strict=True)}
    return document


def _write_json_atomically(path: Path, data) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(json.dumps(data, indent=2, default=_json_default) + "\n")
        tmp.replace(path)
    except OSError as error:
        tmp.unlink(missing_ok=True)
        raise FpgaplaceError(f"{path}: cannot write the placement: {error.strerror}") from None


def _print_results(problem, results, objective: str) -> None:
    unit = problem.meta.get("unit", "")
    table = Table(title=f"{problem.source}: {objective}" + (f" ({unit})" if unit else ""))
    for column in ("method", "value", "bound", "gap", "status", "seconds", "feasible"):
        table.add_column(column, justify="left" if column in ("method", "status") else "right")
    for r in results:
        p = r.placement
        table.add_row(
            p.method,
            f"{r.value:.6g}",
            f"{p.bound:.6g}" if math.isfinite(p.bound) else "—",
            f"{p.gap:.2%}" if math.isfinite(p.gap) else "—",
            p.status,
            f"{p.seconds:.2f}",
            "yes" if r.evaluation.feasible else "; ".join(r.evaluation.violations)[:60],
        )
    out.print(table)
    if len(results) == 1:
        _print_devices(problem, results[0])


def _print_devices(problem, result) -> None:
    table = Table(title="placement")
    for column in ("device", "load", "ops"):
        table.add_column(column)
    for device, load in enumerate(result.evaluation.loads):
        members = [problem.names[v] for v in range(problem.n) if result.placement.device[v] == device]
        if members:
            shown = ", ".join(members[:6]) + (f", … ({len(members)} ops)" if len(members) > 6 else "")
            table.add_row(problem.device_name(device), f"{load:.6g}", shown)
    out.print(table)


@app.command()
@user_errors
def evaluate(
    input_path: Annotated[
        Path, typer.Argument(metavar="INPUT", help="A paper workload JSON, or an ONNX model (with --board).")
    ],
    split: Annotated[
        Path, typer.Option("--split", help="Placement file: the paper's split format or `place --out` output.")
    ],
    board_name: Annotated[str | None, typer.Option("--board", "-b", help="Board for an ONNX model.")] = None,
    batch: BatchOption = 1,
    as_json: JsonOption = False,
) -> None:
    """Max-load and latency of a given split (the paper's expert splits included).

    Example: fpgaplace evaluate layer-bert24_inference.json --split bert24_inference_expert.json
    """
    from fpgaplace.inputs import load_problem
    from fpgaplace.solvers.evaluate import evaluate as evaluate_placement
    from fpgaplace.workload import load_split

    problem = load_problem(input_path, board=board_name, batch=batch).problem
    placement = load_split(split, problem)
    result = evaluate_placement(problem, placement)
    document = {
        "maxLoad": result.max_load,
        "latency": result.latency,
        "contiguous": result.contiguous,
        "feasible": result.feasible,
        "violations": result.violations,
        "loads": {problem.device_name(d): load for d, load in enumerate(result.loads)},
    }
    if as_json:
        print_json(document)
        return
    out.print(f"max-load {result.max_load:.6g}   latency {result.latency:.6g}   contiguous {result.contiguous}")
    for violation in result.violations:
        err.print(f"[yellow]violation:[/] {violation}", highlight=False)


# --------------------------------------------------------------------------- split / search

OutDirOption = Annotated[Path, typer.Option("--out", help="Folder for the per-device ONNX models and manifest.json.")]
OptimizeOption = Annotated[bool, typer.Option("--optimize/--no-optimize", help="Run the graph optimizer first.")]


@app.command()
@user_errors
def split(
    model: Annotated[Path, typer.Argument(help="ONNX model file.")],
    out_dir: OutDirOption,
    board_name: BoardOption = "zcu104",
    objective: ObjectiveOption = "throughput",
    method: Annotated[str, typer.Option("--method", "-m", help="Placement method (see `place --help`).")] = "auto",
    optimized: OptimizeOption = True,
    time_limit: Annotated[float, typer.Option("--time-limit", min=0.1, help="Seconds for the solver.")] = 60.0,
    batch: BatchOption = 1,
    as_json: JsonOption = False,
) -> None:
    """Place a model and write one ONNX model per device, checked against the whole model.

    Example: fpgaplace split resnet50.onnx --board zcu104 --out split/
    """
    from fpgaplace.flow import prepare, split_placement
    from fpgaplace.solvers.run import SolveOptions, solve
    from fpgaplace.split import check_out_dir

    check_out_dir(out_dir)
    with err.status(f"importing and costing {model.name}..."):
        prepared = prepare(model, board_name, batch=batch, optimized=optimized)
    with err.status(f"placing ({method}, {objective})..."):
        result = solve(prepared.problem, method, SolveOptions(objective=objective, time_limit=time_limit))
    with err.status("splitting and checking against the whole model..."):
        manifest, errors = split_placement(prepared, result.placement, out_dir)
    document = {
        "out": str(out_dir),
        "value": result.value,
        "objective": objective,
        "submodels": [{"name": s.name, "device": s.device, "ops": len(s.nodes)} for s in manifest.submodels],
        "transfers": manifest.stats.get("transfers_after"),
        "max_relative_error": max(errors.values(), default=0.0),
    }
    if as_json:
        print_json(document)
        return
    table = Table(title=f"{model.name} split into {out_dir}")
    for column in ("submodel", "device", "ops"):
        table.add_column(column)
    for s in document["submodels"]:
        table.add_row(s["name"], s["device"], str(s["ops"]))
    out.print(table)
    out.print(f"outputs equal the whole model's (max relative error {document['max_relative_error']:.2g})")


@app.command()
@user_errors
def search(
    model: Annotated[Path, typer.Argument(help="ONNX model file.")],
    board_name: BoardOption = "zcu104",
    target: Annotated[
        str, typer.Option("--target", help="Rank by throughput (time per sample) or latency.")
    ] = "throughput",
    batches: Annotated[str, typer.Option("--batch", help="Batch sizes to try, comma-separated (e.g. 1,4).")] = "1",
    time_limit: Annotated[float, typer.Option("--time-limit", min=1.0, help="Seconds for the whole search.")] = 120.0,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Write the best placement and its split here.")] = None,
    top: Annotated[int, typer.Option("--top", min=1, help="Rows of the ranked table to print.")] = 15,
    as_json: JsonOption = False,
) -> None:
    """Search optimizer on/off, objective, cores used, (non-)contiguous splits and batch sizes.

    Example: fpgaplace search model.onnx --board zcu102 --batch 1,4 --time-limit 60 --out best/
    """
    from fpgaplace.flow import split_placement
    from fpgaplace.search import search as run_search
    from fpgaplace.split import check_out_dir
    from fpgaplace.workload import placement_to_json

    sizes = _parse_batches(batches)
    if out_dir is not None and out_dir.exists() and not out_dir.is_dir():
        raise FpgaplaceError(f"--out {out_dir}: is a file; expected a folder")
    if out_dir is not None:
        check_out_dir(out_dir / "split")
    with err.status("searching placements..."):
        ranked = run_search(
            model,
            board_name,
            target=target,
            batches=sizes,
            time_limit=time_limit,
            progress=lambda message: err.print(f"[dim]{message}[/]", highlight=False),
        )
    best = ranked[0]
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        split_placement(best.prepared, best.result.placement, out_dir / "split")
        document = placement_to_json(best.prepared.problem, best.result.placement, best.result.evaluation)
        _write_json_atomically(out_dir / "placement.json", _with_names(best.prepared.problem, document))
    rows = [
        {
            "rank": rank,
            **dataclasses.asdict(s.candidate),
            "method": s.candidate.method,
            "us_per_sample_pipelined": s.per_sample_throughput,
            "us_per_sample_latency": s.per_sample_latency,
            "gap": _finite(s.result.placement.gap),
        }
        for rank, s in enumerate(ranked, start=1)
    ]
    if as_json:
        print_json({"target": target, "ranked": rows, "out": str(out_dir) if out_dir else None})
        return
    table = Table(title=f"{model.name} on {board_name}: ranked by {target} (us per sample)")
    for column in ("#", "optimizer", "objective", "cores", "sets", "batch", "pipelined", "latency", "gap"):
        table.add_column(column)
    for r in rows[:top]:
        table.add_row(
            str(r["rank"]),
            "on" if r["optimized"] else "off",
            r["objective"],
            str(r["cores"]),
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


@app.command("run-cluster")
@user_errors
def run_cluster(
    split_dir: Annotated[Path, typer.Argument(help="A split folder written by `fpgaplace split` (has manifest.json).")],
    samples: Annotated[int, typer.Option("--samples", "-n", min=1, help="Random inputs to stream through.")] = 32,
    address: Annotated[
        str | None, typer.Option("--address", help="Join this Ray cluster (host:port); default: start a local one.")
    ] = None,
    timeout: Annotated[float, typer.Option("--timeout", min=0.1, help="Seconds to wait for any one sample.")] = 60.0,
    max_restarts: Annotated[int, typer.Option("--max-restarts", min=0, help="Restarts allowed per actor.")] = 1,
    whole_model: Annotated[
        Path | None, typer.Option("--compare", help="The unsplit ONNX model: also time it in one session.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Run a split model as a pipeline of Ray actors (one per device) and measure its throughput.

    Example: fpgaplace split model.onnx --board cluster-2x-zcu104 --out split/
             && fpgaplace run-cluster split/ -n 64 --compare model.onnx
    """
    from fpgaplace.deploy.cluster import run_cluster as run_pipeline
    from fpgaplace.deploy.cluster import run_whole

    with err.status(f"streaming {samples} samples through Ray actors..."):
        result = run_pipeline(split_dir, samples, address=address, timeout_s=timeout, max_restarts=max_restarts)
    document = {
        "samples": result.samples,
        "devices": result.devices,
        "wall_s": result.wall_s,
        "samples_per_s": result.throughput,
        "stage_busy_s": result.stage_busy_s,
        "restarts": result.restarts,
        "address": result.address,
    }
    if whole_model is not None:
        whole = run_whole(whole_model, samples)
        document["whole_samples_per_s"] = whole.throughput
        document["speedup"] = result.throughput / whole.throughput if whole.throughput else None
    if as_json:
        print_json(document)
        return
    out.print(
        f"{result.samples} samples through {len(result.devices)} actors ({', '.join(result.devices)}): "
        f"{result.throughput:.1f} samples/s"
        + (f", restarts {result.restarts}" if any(result.restarts.values()) else "")
    )
    if whole_model is not None:
        out.print(
            f"whole model, one session: {document['whole_samples_per_s']:.1f} samples/s "
            f"(speed-up {document['speedup']:.2f}x)"
        )


# --------------------------------------------------------------------------- demo


@app.command()
@user_errors
def demo(
    board_name: BoardOption = "zcu104",
    as_json: JsonOption = False,
) -> None:
    """Run the whole flow on a small built-in CNN: import, cost, place (optimal DP), print.

    Example: fpgaplace demo --board kv260
    """
    from fpgaplace.board import load_board
    from fpgaplace.cost import CostOptions, build_problem
    from fpgaplace.frontend import from_model
    from fpgaplace.models import demo_model
    from fpgaplace.solvers.run import SolveOptions, solve
    from fpgaplace.workload import placement_to_json

    chosen = load_board(board_name)
    with err.status("importing the demo model..."):
        graph = from_model(demo_model(), source="demo-cnn")
    with err.status(f"costing {len(graph.ops)} ops on {chosen.name}..."):
        problem = build_problem(graph, chosen, CostOptions())
    with err.status("placing (exact throughput DP)..."):
        result = solve(problem, "dp", SolveOptions(objective="throughput", time_limit=60))
    if as_json:
        print_json(_with_names(problem, placement_to_json(problem, result.placement, result.evaluation)))
        return
    out.print(
        f"[bold]demo[/]: {len(graph.ops)} ops, {human(graph.total_macs)} MACs on {chosen.name} "
        f"({len(chosen.cores)} FPGA cores, {len(chosen.cpus)} CPUs)"
    )
    _print_results(problem, [result], "throughput")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
