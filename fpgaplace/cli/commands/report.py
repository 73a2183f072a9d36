"""``fpgaplace report``: one self-contained HTML page about a compiled project."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from fpgaplace.cli.options import JsonOption, ProjectArgument
from fpgaplace.cli.output import err, out, print_json, progress
from fpgaplace.util.errors import FpgaplaceError


def report(
    project: ProjectArgument,
    out_file: Annotated[
        Path | None, typer.Option("--out", help="The HTML file to write (default PROJECT/report.html).")
    ] = None,
    samples: Annotated[int, typer.Option("--samples", "-n", help="Samples the event simulation streams.")] = 256,
    as_json: JsonOption = False,
) -> None:
    """Write a self-contained HTML report of a project: the model graph by device, a Gantt chart
    of the simulated schedule, resources and memory per core, the solvers' bound and gap, and
    the C/RTL simulation and synthesis results the project holds.

    Everything is drawn inline (SVG and CSS): the page opens offline and fetches nothing.

    Example: fpgaplace report project/ --out project.html
    """
    from fpgaplace.report.page import write_report

    if samples < 1:
        raise FpgaplaceError(f"--samples: expected a positive number of samples, got {samples}")
    result = write_report(project, out_file, progress=None if as_json else progress, samples=samples)
    for note in result.notes:
        err.print(f"note: {escape(note)}", highlight=False, soft_wrap=True)
    if as_json:
        print_json(result.to_json())
        return
    out.print(f"wrote {escape(str(result.report))}: {', '.join(result.sections)}", highlight=False, soft_wrap=True)
