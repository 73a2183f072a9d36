"""The ``fpgaplace`` command: the typer app, every command registered on it, and ``main``.

The commands live in ``fpgaplace.cli.commands`` (one module per command), their shared options
in ``fpgaplace.cli.options`` and what they print in ``fpgaplace.cli.output``; this module only
imports them (downward) and registers each, in the order ``fpgaplace --help`` lists them. Every
command runs inside ``user_errors``: an error a user can cause is one line on stderr with exit
code 1, never a traceback.
"""

from __future__ import annotations

import copy
import sys
from typing import Annotated, Any

import typer

from fpgaplace.cli.commands import (
    boards,
    cluster,
    compile,
    cost,
    csim,
    demo,
    flash,
    inspect,
    place,
    quantize,
    report,
    search,
    sim,
    split,
)
from fpgaplace.cli.output import OneLineErrorGroup, out, user_errors

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


COMMANDS = (
    (inspect.inspect, None),
    (boards.boards, None),
    (boards.board, None),
    (cost.cost, None),
    (place.place, None),
    (place.evaluate, None),
    (split.split, None),
    (search.search, None),
    (quantize.quantize, None),
    (compile.compile_project, "compile"),
    (csim.csim, None),
    (sim.sim, None),
    (cluster.run_cluster, "run-cluster"),
    (demo.demo, None),
    (flash.flash, None),
    (report.report, None),
)
"""Every command's function and its name when that is not the function's (in ``--help`` order)."""

for _function, _name in COMMANDS:
    app.command(_name)(user_errors(_function))


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
    main()
