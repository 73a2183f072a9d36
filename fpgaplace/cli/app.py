"""The ``fpgaplace`` command: parses arguments, calls ``fpgaplace.flow.design``, prints a table or JSON.

Every command that reads a model builds one ``Design`` from the same options (board, graph
optimizer, input shapes, batch, precision, CPU profiling), so they all see the same graph; no
stage is chained here. Errors a user can cause print as one line on stderr with exit code 1,
never a traceback; library errors name parameters (``time_limit``), and this module names the
flag instead (``--time-limit``).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import math
import re
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from typer.core import TyperGroup

from fpgaplace.util.errors import FpgaplaceError, first_line

out = Console()
err = Console(stderr=True)


def print_error(message: str) -> None:
    """``error: message`` as one line on stderr (the message's whitespace collapsed)."""
    err.print(f"[bold red]error:[/] {escape(' '.join(message.split()))}", highlight=False, soft_wrap=True)


class OneLineErrorGroup(TyperGroup):
    """The command group with click's usage errors (a bad value, an unknown option, a missing
    argument) printed as one ``error:`` line, like every other error, instead of a boxed panel."""

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except typer.Abort:
            print_error("aborted")
            sys.exit(1)
        except typer.TyperException as error:  # typer's (vendored click's) usage errors
            if type(error).__name__ == "NoArgsIsHelpError":  # no arguments: the help, as click prints it
                error.show()
            else:
                print_error(error.format_message() + _help_hint(error))
            sys.exit(getattr(error, "exit_code", 2))
        sys.exit(code if isinstance(code, int) else 0)


def _help_hint(error: Exception) -> str:
    context = getattr(error, "ctx", None)
    return f" (see `{context.command_path} --help`)" if context is not None else ""


app = typer.Typer(
    cls=OneLineErrorGroup,
    name="fpgaplace",
    help=(
        "Place a neural network's operators on the cores of a multicore FPGA board and its CPUs,\n"
        "and build the project that runs it.\n\n"
        "Typical flow:\n\n"
        "  fpgaplace inspect model.onnx            # what is in the model\n\n"
        "  fpgaplace boards                        # which boards ship with fpgaplace\n\n"
        "  fpgaplace cost model.onnx --board zcu104   # per-op cost on each device kind\n\n"
        "  fpgaplace place model.onnx --board zcu104  # optimal placement\n\n"
        "  fpgaplace compile model.onnx --out proj/   # the int8 HLS project\n\n"
        "  fpgaplace csim proj/                    # C simulation, bit-exact check\n\n"
        "  fpgaplace sim proj/                     # event simulation: latency, fps, stalls\n\n"
        "  fpgaplace demo                          # all of it on a built-in model"
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _print_version(value: bool) -> None:
    if value:
        from fpgaplace import __version__

        out.print(f"fpgaplace {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Place a model on a multicore FPGA board and build the project that runs it."""

# ---- options shared by every command that reads a model -----------------------------------

JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout instead of a table.")]
ModelArgument = Annotated[Path, typer.Argument(help="ONNX model file.")]
BatchOption = Annotated[int, typer.Option("--batch", min=1, help="Value bound to symbolic batch dimensions.")]
BoardOption = Annotated[
    str, typer.Option("--board", "-b", help="Board name (see `fpgaplace boards`) or a board YAML file.")
]
PrecisionOption = Annotated[
    str, typer.Option("--precision", help="What the FPGA cores compute: int8 (default), int16, float16, float32, "
                      "or for costing and placing only int4, int2 or binary (XNOR-popcount); compile builds int8.")
]
OptimizeOption = Annotated[
    bool, typer.Option("--optimize/--no-optimize", help="Run the graph optimizer first (on a QDQ model: fusion only).")
]
InputShapeOption = Annotated[
    list[str] | None,
    typer.Option(
        "--input-shape",
        metavar="NAME=DIMS",
        help="Fix a graph input's shape, e.g. image=1x3x224x224 or image=1,3,224,224 (repeat for several inputs).",
    ),
]
CPU_COSTS = ("profile", "analytic")
CpuCostOption = Annotated[
    str,
    typer.Option("--cpu-cost", metavar="profile|analytic",
                 help="CPU op times: profile (median of onnxruntime runs on this host, cached per model, board and "
                 "host) or analytic (the op's MACs at the board's CPU GFLOP/s)."),
]
ProfileOption = Annotated[
    bool | None,
    typer.Option("--profile/--no-profile", hidden=True, help="Old spelling of --cpu-cost profile|analytic."),
]
MAX_TIME_LIMIT = 10**6
"""The longest --time-limit, in seconds (11.6 days): a larger or non-finite one is surely a typo."""


def check_time_limit(value: float) -> float:
    """A ``--time-limit`` callback: a finite number of seconds up to ``MAX_TIME_LIMIT``."""
    if not math.isfinite(value) or value > MAX_TIME_LIMIT:
        raise typer.BadParameter(f"{value} is not a finite number of seconds up to {MAX_TIME_LIMIT}")
    return value


TIME_LIMIT_HELP = "Total seconds the placement may take (for --method all: all methods together)."
TimeLimitOption = Annotated[
    float, typer.Option("--time-limit", min=0.1, callback=check_time_limit, help=TIME_LIMIT_HELP)
]
GapOption = Annotated[
    float,
    typer.Option("--gap", min=0.0, max=0.99,
                 help="Relative gap at which the integer programs stop (0.01 = 1 %; 0 asks for proven optimality)."),
]
ObjectiveOption = Annotated[
    str,
    typer.Option("--objective", "-o", help="throughput (minimise the pipeline's max load) or latency (one sample)."),
]
MethodOption = Annotated[
    str,
    typer.Option(
        "--method",
        "-m",
        help="auto (dp for contiguous throughput, else ip) | dp | ip | greedy | local-search | partitioner | "
        "pipedream | single | cpu | all (every method; the best one is used)",
    ),
]
SubgraphsOption = Annotated[
    int,
    typer.Option("--subgraphs-per-device", "-q", min=1, help="Latency IP: subgraphs each core may run in turn."),
]
NonContiguousOption = Annotated[
    bool, typer.Option("--non-contiguous", help="Throughput IP: allow non-convex device sets.")
]
CalibOption = Annotated[
    Path | None, typer.Option("--calib", help="Folder of .npy calibration inputs (one file per input and sample).")
]
RandomOption = Annotated[
    int | None, typer.Option("--random", help="Calibrate on this many random inputs instead of --calib.")
]
SeedOption = Annotated[int, typer.Option("--seed", help="Seed of the random inputs.")]

# Library errors name a parameter; the user typed a flag.
PARAMETER_FLAGS = {
    "input_shapes": "--input-shape",
    "time_limit": "--time-limit",
    "random_samples": "--random",
    "calib_dir": "--calib",
    "subgraphs_per_device": "--subgraphs-per-device",
    "out_dir": "--out",
}
LEADING_PARAMETERS = ("precision", "target", "objective", "method", "samples", "board", "batch")  # flag = --name


def flag_message(message: str) -> str:
    """``message`` with the parameter names it uses replaced by the flags that set them: the
    ``PARAMETER_FLAGS`` anywhere, the ``LEADING_PARAMETERS`` where they lead the message or
    follow the name of the file it is about ("model.onnx: batch must be ..."); an example value
    ``input_shapes={'x': (1, 3, h, w)}`` becomes ``--input-shape x=1x3x<h>x<w>``."""
    message = re.sub(r"input_shapes=\{'([^']*)': \(([^)]*)\)\}", _input_shape_flag, message)
    for parameter, flag in PARAMETER_FLAGS.items():
        message = re.sub(rf"(?<![\w-]){parameter}\b", flag, message)
    return re.sub(rf"(^|: )({'|'.join(LEADING_PARAMETERS)})(?=[: ])", r"\1--\2", message)


def _input_shape_flag(match: re.Match) -> str:
    """``input_shapes={'x': (1, 3, h, w)}`` (groups: name, dims) as ``--input-shape x=1x3x<h>x<w>``."""
    dims = [dim.strip() for dim in match[2].split(",") if dim.strip()]
    return f"--input-shape {match[1]}=" + "x".join(dim if dim.isdigit() else f"<{dim}>" for dim in dims)


def user_errors(command):
    """Turn ``FpgaplaceError`` into one line on stderr and exit status 1."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except FpgaplaceError as error:
            print_error(flag_message(str(error)))
            raise typer.Exit(1) from None
        except OSError as error:  # the system refused a read or write: name the file and the reason
            where = f"{error.filename}: " if error.filename else ""
            print_error(f"{where}{error.strerror or first_line(error)}")
            raise typer.Exit(1) from None

    return wrapper


def progress(message: str) -> None:
    """One dim line on stderr per stage or solver report."""
    err.print(f"[dim]{escape(message)}[/]", highlight=False, soft_wrap=True)


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


def parse_input_shapes(texts: list[str] | None) -> dict[str, tuple[int, ...]] | None:
    """``["image=1x3x224x224", ...]`` (or ``image=1,3,224,224``) -> ``{"image": (1, 3, 224, 224)}``;
    None when none given.

    Only the syntax is checked here; the front end checks the names and dims against the model.
    """
    if not texts:
        return None
    shapes: dict[str, tuple[int, ...]] = {}
    for text in texts:
        name, equals, dims = text.partition("=")
        expected = "expected NAME=D1xD2x... with positive integer dims, e.g. image=1x3x224x224"
        if not equals or not name.strip() or not dims.strip():
            raise FpgaplaceError(f"--input-shape {text!r}: {expected}")
        parts = [part.strip() for part in re.split(r"[x,]", dims.lower())]
        if not all(part.isascii() and part.isdigit() and int(part) > 0 for part in parts):
            raise FpgaplaceError(f"--input-shape {text!r}: every dim must be a positive integer; {expected}")
        if name.strip() in shapes:
            raise FpgaplaceError(f"--input-shape {text!r}: input {name.strip()!r} is given twice; expected once")
        shapes[name.strip()] = tuple(int(part) for part in parts)
    return shapes


def profile_cpu(cpu_cost: str = "profile", profile: bool | None = None) -> bool:
    """Whether ``--cpu-cost`` (or its old spelling ``--profile/--no-profile``) asks for measured CPU
    op times; an unknown value, or the two flags disagreeing, is a one-line error."""
    if cpu_cost not in CPU_COSTS:
        raise FpgaplaceError(f"--cpu-cost {cpu_cost!r}: expected one of {', '.join(CPU_COSTS)}")
    if profile and cpu_cost == "analytic":
        raise FpgaplaceError("--profile contradicts --cpu-cost analytic; expected one of the two")
    return cpu_cost == "profile" if profile is None else profile


def design_options(*, optimized: bool = True, input_shape: list[str] | None = None, batch: int = 1,
                   precision: str = "int8", cpu_cost: str = "profile", profile: bool | None = None,
                   source: str | None = None) -> dict[str, Any]:
    """The ``Design`` keywords of the model flags every model command shares."""
    return {"input_shapes": parse_input_shapes(input_shape), "batch": batch, "optimize": optimized,
            "precision": precision, "profile_cpu": profile_cpu(cpu_cost, profile), "progress": progress,
            "source": source}


def make_design(model, board_name: str = "zcu104", **flags: Any):
    """The ``Design`` a model command works on, from its flags (see ``design_options``)."""
    from fpgaplace.flow.design import Design

    return Design(model, board_name, **design_options(**flags))


def place_design(design, objective: str, method: str, time_limit: float, subgraphs_per_device: int = 1,
                 non_contiguous: bool = False, gap: float = 0.01) -> list:
    """``design.place`` (one result) or, for ``--method all``, ``design.place_all``."""
    arguments = {"subgraphs_per_device": subgraphs_per_device, "contiguous": not non_contiguous, "gap": gap}
    if method == "all":
        return design.place_all(objective, time_limit, **arguments)
    return [design.place(objective, method, time_limit, **arguments)]


def check_out_file(path: Path) -> None:
    """An ``--out`` file path: not a folder, in a folder that exists."""
    if path.is_dir():
        raise FpgaplaceError(f"--out {path}: is a folder; expected the path of a file to write")
    if not path.parent.is_dir():
        raise FpgaplaceError(f"--out {path}: folder {path.parent} does not exist")


def check_out_folder(path: Path, marker: str) -> None:
    """An ``--out`` folder: a new one, an empty one, or one an earlier run wrote (it has ``marker``),
    in a folder that exists."""
    if path.exists() and not path.is_dir():
        raise FpgaplaceError(f"--out {path}: is a file; expected a folder")
    if path.is_dir() and any(path.iterdir()) and not (path / marker).exists():
        raise FpgaplaceError(f"--out {path}: exists and holds other files (no {marker}); "
                             "expected a new or empty folder, or one an earlier run wrote")
    check_out_parent(path)


def check_out_parent(path: Path) -> None:
    """An ``--out`` folder that does not exist yet must be in a folder that does."""
    if not path.is_dir() and not path.parent.is_dir():
        raise FpgaplaceError(f"--out {path}: folder {path.parent} does not exist")


def _write_json_atomically(path: Path, data) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(json.dumps(data, indent=2, default=_json_default) + "\n")
        tmp.replace(path)
    except OSError as error:
        tmp.unlink(missing_ok=True)
        raise FpgaplaceError(f"{path}: cannot write the placement: {error.strerror}") from None


# --------------------------------------------------------------------------- inspect


@app.command()
@user_errors
def inspect(
    model: ModelArgument,
    optimized: OptimizeOption = True,
    input_shape: InputShapeOption = None,
    batch: BatchOption = 1,
    as_json: JsonOption = False,
) -> None:
    """Show the model's ops: type, output shape, MACs, parameters, and where each may run.

    The graph is the one every other command uses: after the graph optimizer unless --no-optimize.

    Example: fpgaplace inspect resnet50.onnx --input-shape data=1x3x224x224
    """
    design = make_design(model, optimized=optimized, input_shape=input_shape, batch=batch)
    graph = design.graph
    rows = [_op_row(graph, graph.ops[name]) for name in graph.topological_order()]
    totals = {
        "ops": len(rows),
        "macs": graph.total_macs,
        "param_bytes": graph.total_param_bytes,
        "fpga_ops": sum(r["fpga"] for r in rows),
        "cpu_only_ops": sum(not r["fpga"] for r in rows),
    }
    report = design.optimize_report
    inputs = {name: list(graph.tensors[name].shape) for name in graph.inputs if name in graph.tensors}
    if as_json:
        print_json({"model": str(model), "batch": batch, "optimized": optimized, "inputs": inputs,
                    "notes": graph.notes, "optimizer": report.to_dict() if report else None, "ops": rows,
                    "totals": totals})
        return
    table = Table(title=f"{model.name} (batch {batch}{', optimized' if optimized else ''})")
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
    out.print("inputs: " + ", ".join(f"{name} {'x'.join(map(str, shape)) or 'scalar'}"
                                     for name, shape in inputs.items()))
    if report:
        out.print(f"graph optimizer: {report.nodes_before} -> {report.nodes_after} nodes")
    out.print(
        f"{totals['ops']} ops, {human(totals['macs'])} MACs, {human(totals['param_bytes'], 'B')} of parameters, "
        f"{totals['cpu_only_ops']} ops CPU-only"
    )


def _op_row(graph, op) -> dict:
    from fpgaplace.hw import plan_op

    first = op.outputs[0] if op.outputs else ""
    shape = list(graph.tensors[first].shape) if first in graph.tensors else []
    planned = plan_op(op, graph)
    return {
        "name": op.name,
        "type": op.op_type,
        "output_shape": shape,
        "macs": op.macs,
        "param_bytes": op.param_bytes,
        "fpga": op.fpga_supported,
        "kernel": planned[0].name if planned else None,
        "cpu_reason": None if planned else planned.reason,
    }


# --------------------------------------------------------------------------- boards


@app.command()
@user_errors
def boards(as_json: JsonOption = False) -> None:
    """List the boards that ship with fpgaplace.

    Example: fpgaplace boards --json
    """
    from fpgaplace.board.model import list_boards, load_board

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
    from fpgaplace.board.model import load_board

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
    model: ModelArgument,
    board_name: BoardOption = "zcu104",
    optimized: OptimizeOption = True,
    input_shape: InputShapeOption = None,
    batch: BatchOption = 1,
    precision: PrecisionOption = "int8",
    cpu_cost: CpuCostOption = "profile",
    profile: ProfileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Per-op cost on each device kind of a board: latency (us), on-chip bytes, transfer time.

    Example: fpgaplace cost resnet50.onnx --board zcu104 --precision int8
    """
    design = make_design(model, board_name, optimized=optimized, input_shape=input_shape, batch=batch,
                         precision=precision, cpu_cost=cpu_cost, profile=profile)
    costs = design.costs
    board = design.board
    if as_json:
        print_json(
            {
                "model": str(model),
                "board": board.name,
                "precision": precision,
                "optimized": optimized,
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
    table = Table(title=f"{model.name} on {board.name} ({precision}, times in us)")
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

InputArgument = Annotated[
    Path, typer.Argument(metavar="INPUT", help="A paper workload JSON, or an ONNX model (with --board).")
]
OptionalBoardOption = Annotated[
    str | None, typer.Option("--board", "-b", help="Board for an ONNX model (default zcu104).")
]


def _load_input(input_path: Path, board_name: str | None, **flags: Any):
    """(problem, None) for a workload JSON; (the model's design's problem, design) for a model."""
    from fpgaplace.flow.design import Design, load_input

    loaded = load_input(input_path, board_name, **design_options(**flags))
    return (loaded.problem, loaded) if isinstance(loaded, Design) else (loaded, None)


@app.command()
@user_errors
def place(
    input_path: InputArgument,
    board_name: OptionalBoardOption = None,
    objective: ObjectiveOption = "throughput",
    method: MethodOption = "auto",
    subgraphs_per_device: SubgraphsOption = 1,
    non_contiguous: NonContiguousOption = False,
    time_limit: TimeLimitOption = 60.0,
    gap: GapOption = 0.01,
    optimized: OptimizeOption = True,
    input_shape: InputShapeOption = None,
    batch: BatchOption = 1,
    precision: PrecisionOption = "int8",
    cpu_cost: CpuCostOption = "profile",
    profile: ProfileOption = None,
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

    if out_file is not None:
        check_out_file(out_file)
    problem, design = _load_input(input_path, board_name, optimized=optimized, input_shape=input_shape,
                                  batch=batch, precision=precision, cpu_cost=cpu_cost, profile=profile)
    if design is None:
        results = place_problem(problem, objective, method, time_limit, subgraphs_per_device=subgraphs_per_device,
                                contiguous=not non_contiguous, gap=gap, progress=progress)
    else:
        results = place_design(design, objective, method, time_limit, subgraphs_per_device, non_contiguous, gap)
    names = design.device_names() if design else None
    documents = [placement_json(problem, r, names) for r in results]
    document = documents if method == "all" else documents[0]
    if out_file is not None:
        _write_json_atomically(out_file, document)
    if as_json:
        print_json(document)
        return
    _print_results(problem, results, objective, names)


def _print_results(problem, results, objective: str, names: list[str] | None = None) -> None:
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
        _print_devices(problem, results[0], names)


def _print_devices(problem, result, names: list[str] | None) -> None:
    names = names or [problem.device_name(d) for d in range(len(problem.devices()))]
    table = Table(title="placement")
    for column in ("device", "load", "ops"):
        table.add_column(column)
    for device, load in enumerate(result.evaluation.loads):
        members = [problem.names[v] for v in range(problem.n) if result.placement.device[v] == device]
        if members:
            shown = ", ".join(members[:6]) + (f", … ({len(members)} ops)" if len(members) > 6 else "")
            table.add_row(names[device], f"{load:.6g}", shown)
    out.print(table)


@app.command()
@user_errors
def evaluate(
    input_path: InputArgument,
    split: Annotated[
        Path, typer.Option("--split", help="Placement file: the paper's split format or `place --out` output.")
    ],
    board_name: OptionalBoardOption = None,
    optimized: OptimizeOption = True,
    input_shape: InputShapeOption = None,
    batch: BatchOption = 1,
    precision: PrecisionOption = "int8",
    cpu_cost: CpuCostOption = "profile",
    profile: ProfileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Max-load and latency of a given split (the paper's expert splits included).

    For an ONNX model, give the same model flags as the `place` that wrote the split.

    Example: fpgaplace evaluate layer-bert24_inference.json --split bert24_inference_expert.json
    """
    from fpgaplace.place.solvers.evaluate import evaluate as evaluate_placement
    from fpgaplace.place.workload import load_split

    problem, design = _load_input(input_path, board_name, optimized=optimized, input_shape=input_shape,
                                  batch=batch, precision=precision, cpu_cost=cpu_cost, profile=profile)
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


# --------------------------------------------------------------------------- split / search

OutDirOption = Annotated[Path, typer.Option("--out", help="Folder for the per-device ONNX models and manifest.json.")]


@app.command()
@user_errors
def split(
    model: ModelArgument,
    out_dir: OutDirOption,
    board_name: BoardOption = "zcu104",
    objective: ObjectiveOption = "throughput",
    method: MethodOption = "auto",
    subgraphs_per_device: SubgraphsOption = 1,
    non_contiguous: NonContiguousOption = False,
    time_limit: TimeLimitOption = 60.0,
    gap: GapOption = 0.01,
    optimized: OptimizeOption = True,
    input_shape: InputShapeOption = None,
    batch: BatchOption = 1,
    precision: PrecisionOption = "int8",
    cpu_cost: CpuCostOption = "profile",
    profile: ProfileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Place a model and write one ONNX model per device, checked against the whole model.

    Example: fpgaplace split resnet50.onnx --board zcu104 --out split/
    """
    from fpgaplace.flow.split import check_out_dir

    check_out_dir(out_dir)
    check_out_parent(out_dir)
    design = make_design(model, board_name, optimized=optimized, input_shape=input_shape, batch=batch,
                         precision=precision, cpu_cost=cpu_cost, profile=profile)
    place_design(design, objective, method, time_limit, subgraphs_per_device, non_contiguous, gap)
    manifest, errors = design.split(out_dir)
    result = design.placement
    document = {
        "out": str(out_dir),
        "value": result.value,
        "objective": objective,
        "method": result.placement.method,
        "submodels": [{"name": s.name, "device": s.device, "ops": len(s.nodes)} for s in manifest.submodels],
        "transfers": manifest.stats.get("transfers_after"),
        "max_relative_error": max(errors.values(), default=0.0),
    }
    if as_json:
        print_json(document)
        return
    table = Table(title=f"{model.name} split into {out_dir} ({objective} {result.value:.6g} us)")
    for column in ("submodel", "device", "ops"):
        table.add_column(column)
    for s in document["submodels"]:
        table.add_row(s["name"], s["device"], str(s["ops"]))
    out.print(table)
    out.print(f"outputs equal the whole model's (max relative error {document['max_relative_error']:.2g})")


@app.command()
@user_errors
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
    input_shape: InputShapeOption = None,
    precision: PrecisionOption = "int8",
    cpu_cost: CpuCostOption = "profile",
    profile: ProfileOption = None,
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

    sizes = _parse_batches(batches)
    if out_dir is not None:
        check_out_folder(out_dir, "placement.json")
        check_out_dir(out_dir / "split")
    ranked = run_search(
        model,
        board_name,
        target=target,
        batches=sizes,
        optimizer=(False, True) if optimized is None else (optimized,),
        time_limit=time_limit,
        progress=progress,
        input_shapes=parse_input_shapes(input_shape),
        precision=precision,
        profile_cpu=profile_cpu(cpu_cost, profile),
    )
    best = ranked[0]
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        best.design.split(out_dir / "split")
        _write_json_atomically(out_dir / "placement.json", best.design.placement_json())
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
    table = Table(title=f"{model.name} on {best.design.board.name}: ranked by {target} (us per sample)")
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


# --------------------------------------------------------------------------- quantize / compile / csim


def _calibration(calib: Path | None, random: int | None, default_random: int | None = None) -> dict[str, Any]:
    """``calib_dir``/``random_samples`` keywords from --calib / --random (exactly one of them,
    unless ``default_random`` stands in for both missing)."""
    if calib is not None and random is not None:
        raise FpgaplaceError("--calib and --random: expected one of them, got both")
    if calib is not None:
        if not calib.is_dir():
            raise FpgaplaceError(f"--calib {calib}: not a folder; expected a folder of .npy calibration inputs")
        return {"calib_dir": calib}
    if random is None and default_random is None:
        raise FpgaplaceError("--calib DIR or --random N: expected one of them to calibrate the quantization")
    return {"random_samples": random if random is not None else default_random}


@app.command()
@user_errors
def quantize(
    model: ModelArgument,
    out_file: Annotated[Path, typer.Option("--out", help="Where to write the int8 QDQ model (.onnx).")],
    calib: CalibOption = None,
    random: RandomOption = None,
    seed: SeedOption = 0,
    input_shape: InputShapeOption = None,
    batch: BatchOption = 1,
    as_json: JsonOption = False,
) -> None:
    """Quantize a float model to int8 QDQ and print its drift from the float model.

    onnxruntime static quantization: QDQ, per-channel symmetric int8 weights.

    The model's input dims are bound first (--input-shape, --batch), as every command does.

    Example: fpgaplace quantize model.onnx --out model.int8.onnx --random 64
    """
    check_out_file(out_file)
    calibration = _calibration(calib, random)
    design = make_design(model, optimized=False, input_shape=input_shape, batch=batch)
    drift, path = design.quantize_file(out_file, seed=seed, **calibration)
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


@app.command("compile")
@user_errors
def compile_project(
    model: ModelArgument,
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for the project (design.json, one folder per core).")],
    board_name: BoardOption = "zcu104",
    objective: ObjectiveOption = "throughput",
    method: MethodOption = "auto",
    subgraphs_per_device: SubgraphsOption = 1,
    non_contiguous: NonContiguousOption = False,
    time_limit: TimeLimitOption = 60.0,
    calib: CalibOption = None,
    random: RandomOption = None,
    optimized: OptimizeOption = True,
    input_shape: InputShapeOption = None,
    batch: BatchOption = 1,
    cpu_cost: CpuCostOption = "profile",
    profile: ProfileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Place an int8 model and write its HLS project (one kernel per FPGA core, design.json).

    A QDQ model is taken as it is; a float model is quantized first (--calib or --random,
    default 32 random inputs). The CPU pieces are written as ONNX submodels.

    Example: fpgaplace compile model.onnx --board zcu104 --out project/ --random 64
    """
    if out_dir.exists() and not out_dir.is_dir():
        raise FpgaplaceError(f"--out {out_dir}: is a file; expected a folder for the project")
    check_out_parent(out_dir)
    calibration = _calibration(calib, random, default_random=32)
    design = make_design(model, board_name, optimized=optimized, input_shape=input_shape, batch=batch,
                         cpu_cost=cpu_cost, profile=profile).quantized(**calibration)
    place_design(design, objective, method, time_limit, subgraphs_per_device, non_contiguous)
    result = design.compile(out_dir)
    document = {**result.to_json(), "quantized_here": result.quantized_here}
    if as_json:
        print_json(document)
        return
    if result.quantized_here:
        how = f"calibrated on {calib}" if calib else f"calibrated on {calibration['random_samples']} random inputs"
        out.print(f"{model.name} is a float model: quantized to int8 QDQ ({how})")
    print_compile(document, design.board)


def print_compile(document: dict, board) -> None:
    """Per-core table (core, ops, DSP, BRAM36, URAM, LUT, cycles, fps), each core's folded
    interval against the placement's plan and what binds it, and the CPU ops."""
    table = Table(title=f"project {document.get('project', '')} on {board.name}")
    for column in ("core", "ops", "DSP", "BRAM36", "URAM", "LUT", "cycles", "fps"):
        table.add_column(column, justify="left" if column == "core" else "right")
    for core in document.get("cores", []):
        ops = core.get("ops", [])
        cycles, fps = core.get("cycles"), core.get("fps")
        table.add_row(core["name"], str(len(ops) if isinstance(ops, list) else ops),
                      *[str(core.get(key, "—")) for key in ("dsp", "bram36", "uram", "lut")],
                      f"{cycles:,}" if isinstance(cycles, int) else str(cycles),
                      human(fps) if isinstance(fps, int | float) else "—")
    out.print(table)
    for core in document.get("cores", []):
        interval, plan = core.get("interval_us"), core.get("planned_compute_us")
        if isinstance(interval, int | float) and plan:
            binding = ", ".join(core.get("binding", [])) or "nothing (every stage at its fastest folding)"
            out.print(f"{core['name']}: folded interval {interval:.4g} us, {interval / plan - 1:+.0%} against the "
                      f"plan; bound by {binding}")
    cpu_ops = [op if isinstance(op, str) else op.get("name", str(op)) for op in document.get("cpu_ops", [])]
    out.print(f"CPU ops ({len(cpu_ops)}): {', '.join(cpu_ops) if cpu_ops else 'none'}")
    if isinstance(document.get("fps"), int | float):
        out.print(f"pipeline: {document['interval_us']:.4g} us per batch, {document['fps']:.4g} samples/s")


@app.command()
@user_errors
def csim(
    project: Annotated[Path, typer.Argument(help="A project folder written by `fpgaplace compile`.")],
    samples: Annotated[int, typer.Option("--samples", "-n", help="Random inputs to simulate.")] = 1,
    seed: SeedOption = 0,
    inputs_file: Annotated[
        Path | None,
        typer.Option("--inputs", help="A .npy of samples for the model's one input, shape (N, *input shape "
                     "without its batch of 1); replaces --samples random inputs."),
    ] = None,
    save_outputs: Annotated[
        Path | None, typer.Option("--save-outputs", help="Write the outputs of every sample to this .npz file.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """C-simulate a project: every core bit-exact, outputs within 1 LSB. Exit 1 when not.

    Each core is built with g++ and checked bit-exactly against its integer reference; the
    model's outputs are compared with onnxruntime running the QDQ model.

    Example: fpgaplace csim project/ --samples 8
    """
    from fpgaplace.sim.csim import run_csim

    if samples < 1:
        raise FpgaplaceError(f"--samples: expected a positive number of inputs, got {samples}")
    if not project.is_dir():
        raise FpgaplaceError(f"{project}: not a folder; expected a project written by `fpgaplace compile`")
    given = _load_samples(inputs_file) if inputs_file is not None else None
    if save_outputs is not None and not save_outputs.parent.is_dir():
        raise FpgaplaceError(f"--save-outputs {save_outputs}: folder {save_outputs.parent} does not exist")
    result = run_csim(project, samples=samples, seed=seed, progress=progress, inputs=given)
    if save_outputs is not None:
        _write_npz_atomically(save_outputs, result.values)
    document = result.to_json()
    if as_json:
        print_json(document)
    else:
        print_csim(document)
    if not document.get("ok"):
        raise typer.Exit(1)


def _load_samples(path: Path):
    """The samples of ``--inputs``: a numeric .npy array with a leading sample axis."""
    import numpy as np

    try:
        samples = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as error:
        raise FpgaplaceError(f"--inputs {path}: not a readable .npy array ({first_line(error)})") from None
    if samples.ndim < 1 or samples.dtype.kind not in "fiub":
        raise FpgaplaceError(f"--inputs {path}: expected a numeric array of shape (N, ...), got {samples.dtype} "
                             f"{list(samples.shape)}")
    return samples


def _write_npz_atomically(path: Path, arrays: dict) -> None:
    import numpy as np

    tmp = path.with_name(f".{path.name}.tmp.npz")
    try:
        np.savez(tmp, **arrays)
        tmp.replace(path)
    except OSError as error:
        tmp.unlink(missing_ok=True)
        raise FpgaplaceError(f"--save-outputs {path}: cannot write ({error.strerror})") from None


def print_csim(document: dict) -> None:
    """Cores bit-exact yes/no, outputs' max difference in LSB, build and run seconds."""
    table = Table(title="C simulation")
    table.add_column("core")
    table.add_column("bit-exact")
    for core in document.get("cores", []):
        first = f" ({core['first_mismatch']})" if core.get("first_mismatch") else ""
        table.add_row(core["name"], "yes" if core.get("bit_exact") else f"[red]no[/]{escape(first)}")
    out.print(table)
    outputs = Table(title="model outputs against onnxruntime (QDQ model)")
    outputs.add_column("output")
    outputs.add_column("max diff (LSB)", justify="right")
    for entry in document.get("outputs", []):
        lsb = entry.get("max_abs_diff_lsb")
        outputs.add_row(entry["name"], f"{lsb:g}" if lsb is not None else f"— (float {entry['max_abs_diff']:.3g})")
    out.print(outputs)
    out.print(f"built in {document.get('build_seconds', 0):.1f} s, ran in {document.get('run_seconds', 0):.1f} s: "
              + ("[green]ok[/]" if document.get("ok") else "[red]not exact[/]"))


@app.command()
@user_errors
def sim(
    project: Annotated[Path, typer.Argument(help="A project folder written by `fpgaplace compile`.")],
    samples: Annotated[int, typer.Option("--samples", "-n", help="Samples to stream through (1 to 1000000).")] = 256,
    rtl: Annotated[bool, typer.Option(
        "--rtl", help="Also simulate every core's RTL (cocotb on Icarus Verilog): bit-exact check, measured cycles.")
    ] = False,
    resources: Annotated[bool, typer.Option(
        "--resources", help="Also synthesize every layer with yosys synth_xilinx: LUT/FF/DSP/BRAM beside the estimate.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Event-simulate a project: latency, steady interval, fps, each device's utilisation and stalls.

    Samples stream through the cores (dataflow pipelines), CPUs and links of design.json with one
    sample of buffering per edge; beside the result, the board's DSP roofline and DRAM bound.
    --rtl and --resources add the RTL simulation and yosys counts (slow: minutes per large core)
    and save them in the project's results/ for the report.

    Example: fpgaplace sim project/ --samples 1000 --rtl
    """
    from fpgaplace.sim.event import simulate

    document = simulate(project, samples).to_json()
    if rtl:
        from fpgaplace.sim.rtl_project import simulate_project_rtl

        document["rtl"] = simulate_project_rtl(project, progress=progress).to_json()
    if resources:
        from fpgaplace.sim.yosys import project_resources

        document["resources"] = project_resources(project, progress=progress).to_json()
    if as_json:
        print_json(document)
        return
    print_sim(document)
    if rtl:
        print_rtl(document["rtl"])
    if resources:
        print_resources(document["resources"])


def print_rtl(document: dict) -> None:
    """Each core's RTL check: bit-exact, measured cycles beside the model's."""
    table = Table(title="RTL simulation (cocotb, Icarus Verilog)")
    for column in ("core", "bit-exact", "cycles measured", "cycles model", "error"):
        table.add_column(column, justify="left" if column in ("core", "bit-exact") else "right")
    for core in document["cores"]:
        measured, model = core.get("cycles_measured"), core.get("cycles_model")
        error = f"{measured / model - 1:+.1%}" if measured and model else "—"
        table.add_row(escape(core["name"]), "[green]yes[/]" if core["bit_exact"] else "[red]no[/]",
                      f"{measured:,.0f}" if measured else "—", f"{model:,.0f}" if model else "—", error)
    out.print(table)


def print_resources(document: dict) -> None:
    """yosys counts beside the op library's estimate, per core."""
    table = Table(title="yosys synth_xilinx against the estimate")
    for column in ("core", "LUT", "FF", "DSP", "BRAM36", "DSP estimate"):
        table.add_column(column, justify="left" if column == "core" else "right")
    for core in document.get("cores", []):
        total, estimate = core.get("yosys_layers_total") or {}, core.get("estimate_total") or {}
        counts = [str(total.get(key, "—")) for key in ("lut", "ff", "dsp", "bram36")]
        table.add_row(escape(str(core.get("name"))), *counts, str(estimate.get("dsp", "—")))
    out.print(table)


def print_sim(document: dict) -> None:
    """Per-device table (per-sample time, utilisation, blocked and starved time), then latency,
    interval, fps, bottleneck and the bounds with the share of them reached."""
    table = Table(title=f"event simulation of {document['samples']} samples")
    for column in ("device", "kind", "us/sample", "utilisation", "blocked us", "starved us"):
        table.add_column(column, justify="left" if column in ("device", "kind") else "right")
    for device in document["devices"]:
        name = escape(device["name"])
        if device["name"] == document["bottleneck"]:
            name = f"[bold]{name}[/]"
        table.add_row(name, device["kind"], f"{device['per_sample_us']:.4g}", f"{device['utilisation']:.1%}",
                      f"{device['blocked_us']:.4g}", f"{device['starved_us']:.4g}")
    out.print(table)
    out.print(f"latency {document['latency_us']:.4g} us ({document['latency_cycles']:,.0f} cycles); interval "
              f"{document['interval_us']:.4g} us ({document['interval_cycles']:,.0f} cycles): "
              f"{document['fps']:.4g} fps; bottleneck {escape(document['bottleneck'])}")
    for label, key, fraction in (("DSP roofline", "roofline_fps", "roofline_fraction"),
                                 ("DRAM bound", "dram_bound_fps", "dram_fraction")):
        if document.get(key):
            out.print(f"{label}: {document[key]:.4g} fps ({document[fraction]:.1%} reached)")
    if document.get("cpu_ops"):
        out.print(f"[dim]the roofline counts the MACs on FPGA cores; {document['cpu_ops']} ops run on CPUs[/]")


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
    time_limit: TimeLimitOption = 60.0,
    as_json: JsonOption = False,
) -> None:
    """Run the whole flow on a small built-in CNN, from import to C simulation.

    Import, optimize, quantize to int8, cost, place (optimal DP), compile and C-simulate in a
    temporary folder. Exit 1 when the C simulation is not exact.

    Example: fpgaplace demo --board kv260
    """
    from fpgaplace.model.zoo import demo_model

    design = make_design(demo_model(), board_name, source="demo-cnn").quantized()
    result = design.place("throughput", "dp", time_limit)
    built = demo_compile_and_csim(design)
    if as_json:
        print_json({**design.placement_json(result), **built})
    else:
        graph, board = design.graph, design.board
        out.print(
            f"[bold]demo[/]: {len(graph.ops)} ops (int8 QDQ), {human(graph.total_macs)} MACs on {board.name} "
            f"({len(board.cores)} FPGA cores, {len(board.cpus)} CPUs)"
        )
        _print_results(design.problem, [result], "throughput", design.device_names())
        print_compile(built["compile"], board)
        print_csim(built["csim"])
    if not built["csim"].get("ok"):
        raise typer.Exit(1)


def demo_compile_and_csim(design) -> dict[str, dict]:
    """Compile the placed ``design`` into a temporary project (removed afterwards) and
    C-simulate it; the two results' JSON under "compile" and "csim"."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="fpgaplace-demo-") as tmp:
        project = Path(tmp) / "project"
        compiled = design.compile(project)
        simulated = design.csim(project)
        return {"compile": compiled.to_json(), "csim": simulated.to_json()}


def _register_command_modules() -> None:
    """Import every module of ``fpgaplace.cli.commands``: each adds its commands to ``app``."""
    import importlib
    import pkgutil

    import fpgaplace.cli.commands as package

    for module in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        importlib.import_module(f"{package.__name__}.{module.name}")


_register_command_modules()


def _invoked_command_only(argv: list[str]) -> typer.Typer:
    """``app`` restricted to the command ``argv`` starts with, when it names one; else ``app``.

    typer builds the parameters of every registered command before it parses anything (it
    evaluates each command's annotations: about 30 ms for all of them, most of it for commands
    that do not run); the invoked command alone gives the same parsing, help and errors. The
    group's own options (``--help``, ``--version``), no arguments and an unknown command see
    every command, so the listing and click's "No such command" suggestions are unchanged."""
    if not argv or argv[0].startswith("-"):
        return app
    chosen = [info for info in app.registered_commands if _command_name(info) == argv[0]]
    if len(chosen) != 1:
        return app
    restricted = copy.copy(app)
    restricted.registered_commands = chosen
    return restricted


def _command_name(info: Any) -> str:
    """The name typer gives a registered command (``run_cluster`` -> ``run-cluster``)."""
    return info.name or info.callback.__name__.lower().replace("_", "-")


def main() -> None:
    _invoked_command_only(sys.argv[1:])()


if __name__ == "__main__":
    # `python -m fpgaplace.cli.app` runs this file as __main__: the command modules register on the
    # imported fpgaplace.cli.app's app, so run that one
    from fpgaplace.cli.app import main as imported_main

    imported_main()
