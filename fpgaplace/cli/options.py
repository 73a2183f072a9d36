"""The options the commands share, declared once: typer ``Annotated`` aliases for single flags,
and two flag groups, ``ModelFlags`` (how a model is read: the same graph for every command) and
``PlacementFlags`` (objective, method, time limit, gap, ...). A command takes a group as one
parameter typed with it; ``flag_groups`` spreads the group into its flags where that parameter
stands, so ``--help`` lists them in place, and gathers them back into the group for the body.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import re
import time
import typing
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fpgaplace.cli.output import progress
from fpgaplace.util.errors import FpgaplaceError

if TYPE_CHECKING:
    from fpgaplace.flow.design import Design

# ---- single flags ------------------------------------------------------------------------

JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout instead of a table.")]
ModelArgument = Annotated[Path, typer.Argument(help="ONNX model file.")]
ProjectArgument = Annotated[Path, typer.Argument(help="A project folder written by `fpgaplace compile`.")]
BatchOption = Annotated[int, typer.Option("--batch", min=1, help="Value bound to symbolic batch dimensions.")]
BoardOption = Annotated[
    str, typer.Option("--board", "-b", help="Board name (see `fpgaplace boards`) or a board YAML file.")
]
PrecisionOption = Annotated[
    str, typer.Option("--precision", help="What the FPGA cores compute: int8 (default), int16, float16, float32, "
                      "int4, int2 or binary (XNOR-popcount); compile and quantize build int8, or int4/int2 weights "
                      "(int8 activations) of a float model; a QONNX model compiles at its own widths.")
]
LstmCellBitsOption = Annotated[
    int | None, typer.Option("--lstm-cell-bits", min=8, max=16, help=(
        "An LSTM's cell state, 8 or 16 bits (default: what the model's metadata says, else 8). int8 is "
        "onnxruntime's QDQ model exactly (within 1 LSB); int16 holds the state wider, so it drifts less "
        "over long sequences (lower RMS error against the float LSTM) but sits further from the QDQ "
        "model (tens of LSB after 32 steps). Written into the model (metadata fpgaplace.lstm_cell_bits); "
        "compile's overrides the model's."))
]
OptimizeOption = Annotated[
    bool, typer.Option("--optimize/--no-optimize", help=(
        "Run the graph optimizer first (on a QDQ model only dead code, whole-plane pools made global pools, "
        "and fusion)."))
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
InputRangeOption = Annotated[
    list[str] | None,
    typer.Option("--input-range", metavar="NAME=LO,HI",
                 help="Values of an input's --random inputs, e.g. ids=0,255 (integers: LO to HI included; floats: "
                 "uniform). Default: an integer input read by a Gather takes its indices (0 to rows-1), another "
                 "0 or 1; a float input a standard normal. Repeat for several inputs."),
]


# ---- flag groups -------------------------------------------------------------------------

@dataclass(frozen=True)
class ModelFlags:
    """How every model command reads its model (board aside), so they all see the same graph."""

    optimized: OptimizeOption = True
    input_shape: InputShapeOption = None
    batch: BatchOption = 1
    precision: PrecisionOption = "int8"
    cpu_cost: CpuCostOption = "profile"
    profile: ProfileOption = None
    lstm_cell_bits: LstmCellBitsOption = None

    def input_shapes(self) -> dict[str, tuple[int, ...]] | None:
        return parse_input_shapes(self.input_shape)

    def profile_cpu(self) -> bool:
        return profile_cpu(self.cpu_cost, self.profile)

    def design_options(self, source: str | None = None) -> dict[str, Any]:
        """The ``Design`` keywords these flags set."""
        return {"input_shapes": self.input_shapes(), "batch": self.batch, "optimize": self.optimized,
                "precision": self.precision, "profile_cpu": self.profile_cpu(), "progress": progress,
                "source": source, "lstm_cell_bits": self.lstm_cell_bits}

    def design(self, model, board_name: str = "zcu104", source: str | None = None) -> Design:
        """The ``Design`` a model command works on."""
        from fpgaplace.flow.design import Design

        return Design(model, board_name, **self.design_options(source))


@dataclass(frozen=True)
class PlacementFlags:
    """How a placement is searched: objective, method, time limit and the solvers' knobs."""

    objective: ObjectiveOption = "throughput"
    method: MethodOption = "auto"
    subgraphs_per_device: SubgraphsOption = 1
    non_contiguous: NonContiguousOption = False
    time_limit: TimeLimitOption = 60.0
    gap: GapOption = 0.01

    def solver_options(self) -> dict[str, Any]:
        """The keywords ``place``, ``place_all`` and ``place_problem`` take beside objective,
        method and time limit."""
        return {"subgraphs_per_device": self.subgraphs_per_device, "contiguous": not self.non_contiguous,
                "gap": self.gap}

    def counted_from(self, started: float) -> PlacementFlags:
        """These flags with the seconds since ``started`` (a ``time.perf_counter()`` value, the
        command's start: reading the input counts against the limit) taken off the time limit,
        keeping at least a tenth of it for the solver."""
        spent = time.perf_counter() - started
        return replace(self, time_limit=max(0.1 * self.time_limit, self.time_limit - spent))

    def place(self, design: Design) -> list:
        """``design.place`` (one result) or, for ``--method all``, ``design.place_all``."""
        if self.method == "all":
            return design.place_all(self.objective, self.time_limit, **self.solver_options())
        return [design.place(self.objective, self.method, self.time_limit, **self.solver_options())]


FLAG_GROUPS = (ModelFlags, PlacementFlags)


class Only:
    """``Annotated[ModelFlags, Only("input_shape", "batch")]``: the command takes only these flags
    of the group (in the group's order); the others keep their defaults."""

    def __init__(self, *names: str) -> None:
        self.names = names


def flag_groups(command):
    """``command`` with each parameter typed as a flag group (``ModelFlags``, ``PlacementFlags``,
    or one of them in ``Annotated[..., Only(...)]``) spread into the group's flags where it
    stands, for typer to read; the wrapper gathers the flags back into the group's value.

    Cost: one ``inspect.signature`` of ``command`` (its annotations evaluated) at import."""
    signature = inspect.signature(command, eval_str=True)
    parameters: list[inspect.Parameter] = []
    groups: dict[str, tuple[type, tuple[str, ...]]] = {}
    for parameter in signature.parameters.values():
        group, names = _group_of(parameter.annotation)
        if group is None:
            parameters.append(parameter)
            continue
        groups[parameter.name] = (group, names)
        fields = _fields(group)
        parameters += [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=fields[name][1],
                                         annotation=fields[name][0]) for name in names]
    spread = signature.replace(parameters=parameters)  # a flag named like another parameter is a ValueError

    @functools.wraps(command)
    def wrapper(**flags: Any):
        for name, (group, names) in groups.items():
            flags[name] = group(**{flag: flags.pop(flag) for flag in names if flag in flags})
        return command(**flags)

    wrapper.__signature__ = spread
    wrapper.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": signature.return_annotation}
    return wrapper


def _group_of(annotation: Any) -> tuple[type | None, tuple[str, ...]]:
    """(the flag group, the names of the flags taken) for a parameter's annotation; (None, ())
    for any other annotation."""
    only: tuple[str, ...] | None = None
    if typing.get_origin(annotation) is Annotated:
        marks = [mark for mark in annotation.__metadata__ if isinstance(mark, Only)]
        only = marks[0].names if marks else None
        annotation = annotation.__origin__
    if annotation not in FLAG_GROUPS:
        return None, ()
    names = tuple(_fields(annotation))
    if only is not None:
        unknown = set(only) - set(names)
        if unknown:
            raise TypeError(f"Only{only}: {annotation.__name__} has no flag {', '.join(sorted(unknown))}")
        names = tuple(name for name in names if name in only)
    return annotation, names


@functools.cache
def _fields(group: type) -> dict[str, tuple[Any, Any]]:
    """``{flag: (its Annotated type, its default)}`` of a flag group, in declaration order."""
    hints = typing.get_type_hints(group, include_extras=True)
    return {field.name: (hints[field.name], field.default) for field in dataclasses.fields(group)}


# ---- parsing and checking flag values ----------------------------------------------------

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


def parse_input_ranges(texts: list[str] | None) -> dict[str, tuple[float, float]]:
    """``["ids=0,255", "x=-1.5,1.5"]`` -> ``{"ids": (0.0, 255.0), "x": (-1.5, 1.5)}``. Only the
    syntax is checked here (two finite numbers, LO <= HI, a name once); the quantizer checks the
    names and the values against the model's inputs."""
    ranges: dict[str, tuple[float, float]] = {}
    for text in texts or []:
        name, equals, values = (part.strip() for part in text.partition("="))
        parts = [part.strip() for part in values.split(",")]
        try:
            low, high = (float(part) for part in parts) if len(parts) == 2 else (math.nan, math.nan)
        except ValueError:
            low = high = math.nan
        if not equals or not name or not (math.isfinite(low) and math.isfinite(high) and low <= high):
            raise FpgaplaceError(f"--input-range {text!r}: expected NAME=LO,HI with numbers LO <= HI, e.g. ids=0,255")
        if name in ranges:
            raise FpgaplaceError(f"--input-range {text!r}: input {name!r} is given twice; expected once")
        ranges[name] = (low, high)
    return ranges


def calibration(calib: Path | None, random: int | None, default_random: int | None = None,
                input_range: list[str] | None = None) -> dict[str, Any]:
    """``calib_dir``/``random_samples`` (and ``input_ranges``) keywords from --calib / --random
    (exactly one of them, unless ``default_random`` stands in for both missing) and
    --input-range (random inputs only)."""
    if calib is not None and random is not None:
        raise FpgaplaceError("--calib and --random: expected one of them, got both")
    ranges = parse_input_ranges(input_range)
    if calib is not None:
        if ranges:
            raise FpgaplaceError("--input-range: sets the values of --random inputs; --calib gives the inputs "
                                 "themselves, expected one of the two")
        if not calib.is_dir():
            raise FpgaplaceError(f"--calib {calib}: not a folder; expected a folder of .npy calibration inputs")
        return {"calib_dir": calib}
    if random is None and default_random is None:
        raise FpgaplaceError("--calib DIR or --random N: expected one of them to calibrate the quantization")
    return {"random_samples": random if random is not None else default_random,
            **({"input_ranges": ranges} if ranges else {})}


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
