"""The project report: one self-contained HTML page made from a compiled project.

``write_report`` reads the project folder and nothing else -- ``design.json`` (placement, devices,
cores with their folding, cycles and resources, transfers), ``model.qdq.onnx`` (the graph),
``cores/*/layers.npz`` (weight sizes) and ``results/*.json`` when the C/RTL simulation or
synthesis stages left them -- and runs the event simulation of the project
(``fpgaplace.sim.event``), the one source of simulated latency and fps. Every figure is inline
SVG built here, the page is ``hls_templates/report/report.html.j2`` with inline CSS: nothing is
fetched from elsewhere when it is opened. It is written to a temporary file beside the target
and renamed into place.

The page's figures are ``fpgaplace.report.figures``, its tables ``fpgaplace.report.sections``, the
numbers in them are written by ``fpgaplace.report.units``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fpgaplace import __version__
from fpgaplace.project.record import DesignRecord, load
from fpgaplace.report.figures import MAX_GRAPH_NODES, device_colours, gantt_svg, graph_svg, model_graph, traced_schedule
from fpgaplace.report.sections import (
    RESOURCE_KEYS,
    RESOURCE_LABELS,
    device_rows,
    in_unit,
    layer_rows,
    memory_rows,
    resource_rows,
    results,
    simulation_figures,
    solver_rows,
    transfer_rows,
)
from fpgaplace.report.units import finite, format_fps, format_number, format_us
from fpgaplace.util.errors import FpgaplaceError, first_line
from fpgaplace.util.files import write_file
from fpgaplace.util.templates import environment

REPORT_FILE = "report.html"


TEMPLATE = "report/report.html.j2"


SIM_SAMPLES = 256  # samples the event simulation streams for the page's latency and fps


GANTT_SAMPLES = 6  # samples drawn in the Gantt chart


@dataclass
class ReportResult:
    report: Path
    project: Path
    sections: list[str]
    notes: list[str] = field(default_factory=list)
    graph_nodes: int = 0  # ops drawn
    graph_ops: int = 0  # ops in the model (Q/DQ collapsed)
    sim: dict | None = None

    def to_json(self) -> dict:
        return {"report": str(self.report), "project": str(self.project), "sections": self.sections,
                "bytes": self.report.stat().st_size, "notes": self.notes,
                "graph": {"drawn": self.graph_nodes, "ops": self.graph_ops}, "sim": self.sim}


def _say(progress: Callable[[str], None] | None, message: str) -> None:
    if progress is not None:
        progress(message)


def _graph_section(project: Path, document: DesignRecord, colours: dict[str, str], notes: list[str]) -> dict:
    import onnx

    path = project / document.model.file
    if not path.is_file():
        notes.append(f"{path}: missing; the model graph is left out")
        return {"svg": None, "drawn": 0, "ops": 0}
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as error:  # onnx raises DecodeError and others for a file that is not a model
        raise FpgaplaceError(f"{path}: not an ONNX model ({first_line(error)})") from None
    nodes, total = model_graph(model, document.placement.devices, MAX_GRAPH_NODES)
    drawn = sum(1 for n in nodes if n.role == "op")
    if drawn < total:
        notes.append(f"model graph: {drawn} of {total} ops drawn (the first in topological order)")
    return {"svg": graph_svg(nodes, colours), "drawn": drawn, "ops": total}


def _schedule_section(project: Path, colours: dict[str, str], samples: int, notes: list[str]) -> dict | None:
    try:
        simulation = simulation_figures(project, samples)
        servers, bars = traced_schedule(project, min(GANTT_SAMPLES, samples))
    except FpgaplaceError as error:
        notes.append(f"event simulation: {first_line(error)}; the schedule is left out")
        return None
    simulation["gantt"] = gantt_svg(servers, bars, colours)
    simulation["gantt_samples"] = min(GANTT_SAMPLES, samples)
    return simulation


def build_context(project: Path, document: DesignRecord, samples: int, progress=None) -> tuple[dict, list[str]]:
    """Everything the template shows, formatted, and the notes on what was left out."""
    notes: list[str] = []
    colours = device_colours(document)
    cores = document.cores
    _say(progress, "drawing the model graph")
    graph = _graph_section(project, document, colours, notes)
    _say(progress, f"simulating {samples} samples")
    schedule = _schedule_section(project, colours, samples, notes)
    _say(progress, "reading the cores and results")
    board, placement = document.board, document.placement
    context = {
        "version": __version__, "project": str(project), "document": document,
        "model": document.model.name or "?", "board": board.name,
        "part": board.part or "?", "clock": format_number(board.clock_mhz),
        "implementation": (f"{document.implementation.tool}: {document.implementation.clock_text()}; simulated at "
                           f"{format_number(document.implementation.clock_mhz)} MHz"
                           if document.implementation else None),
        "precision": document.precision, "batch": document.model.batch,
        "interval": format_us(document.interval_us), "fps": format_fps(document.fps),
        "placement": placement, "legend": _legend(document, colours),
        "placement_value": in_unit(finite(placement.value), placement.unit),
        "graph": graph, "schedule": schedule,
        "resource_labels": [RESOURCE_LABELS[k] for k in RESOURCE_KEYS],
        "resources": resource_rows(cores), "cores": [{"name": c.name, "layers": layer_rows(c),
                                                       "interval": format_us(c.interval_us),
                                                       "planned": format_us(c.planned_load_us)}
                                                      for c in cores],
        "memory": memory_rows(project, cores), "solvers": solver_rows(placement),
        "devices": device_rows(document, colours), "transfers": transfer_rows(document),
        "cpu_ops": document.cpu_ops, "results": results(project, notes), "notes": notes,
    }
    return context, notes


def _legend(document: DesignRecord, colours: dict[str, str]) -> list[dict]:
    kinds = {d.name: (d.kind, d.node or "") for d in document.devices}
    return [{"name": name, "colour": colour, "kind": kinds.get(name, ("", ""))[0], "node": kinds.get(name, ("", ""))[1]}
            for name, colour in colours.items()]


def sections_of(context: dict) -> list[str]:
    """The ids of the page's sections, in page order (those with nothing to show are left out)."""
    sections = ["summary"]
    if context["graph"]["svg"] is not None:
        sections.append("graph")
    if context["schedule"] is not None:
        sections.append("schedule")
    sections += ["placement", "resources", "memory"]
    if context["transfers"]:
        sections.append("transfers")
    sections += [r["key"] for r in context["results"]]
    return sections


def write_report(project: Path, out: Path | None = None, progress: Callable[[str], None] | None = None,
                 samples: int = SIM_SAMPLES) -> ReportResult:
    """Write the report of ``project`` to ``out`` (default ``PROJECT/report.html``), atomically."""
    project = Path(project)
    if not project.is_dir():
        raise FpgaplaceError(f"{project}: not a folder; expected a project written by `fpgaplace compile`")
    document = load(project)
    target = Path(out) if out is not None else project / REPORT_FILE
    if target.is_dir():
        raise FpgaplaceError(f"{target}: is a folder; expected the path of an .html file")
    if not target.parent.is_dir():
        raise FpgaplaceError(f"{target}: folder {target.parent} does not exist")
    context, notes = build_context(project, document, samples, progress)
    sections = sections_of(context)
    context["sections"] = sections
    _say(progress, f"writing {target}")
    page = environment(html=True).get_template(TEMPLATE).render(**context)
    write_file(target, page)
    schedule = context["schedule"]
    return ReportResult(target, project, sections, notes, context["graph"]["drawn"], context["graph"]["ops"],
                        schedule["raw"] if schedule else None)
