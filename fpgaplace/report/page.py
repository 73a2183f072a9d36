"""The project report: one self-contained HTML page made from a compiled project.

``write_report`` reads the project folder and nothing else -- ``design.json`` (placement, devices,
cores with their folding, cycles and resources, transfers), ``model.qdq.onnx`` (the graph),
``cores/*/layers.npz`` (weight sizes) and ``results/*.json`` when the C/RTL simulation or
synthesis stages left them -- and runs the event simulation of the project
(``fpgaplace.sim.event``), the one source of simulated latency and fps. Every figure is inline
SVG built here, the page is ``hls_templates/report/report.html.j2`` with inline CSS: nothing is
fetched from elsewhere when it is opened. It is written to a temporary file beside the target
and renamed into place.

Figures:

* the model graph: a layered drawing after Sugiyama, Tagawa and Toda (1981) -- quantize and
  dequantize nodes collapsed into the edges they sit on, layers by longest path from the inputs
  (O(V + E)), each layer ordered by one top-down barycenter sweep (O(V log V + E)); nodes are
  coloured by the device the placement gives them, and at most ``MAX_GRAPH_NODES`` ops are
  drawn (the first in topological order; the page says how many were left out);
* the Gantt chart: the event simulator's own run of ``GANTT_SAMPLES`` samples, each stage's
  start recorded as it happens (a subclass of the simulator's run that notes every start), one
  row per device or link; a bar is the time a sample occupies the server (a core's interval,
  since a dataflow core starts its next sample that much later).
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from markupsafe import Markup

from fpgaplace import __version__
from fpgaplace.board.model import BRAM36_BYTES, URAM_BYTES
from fpgaplace.model.ir import producer_index
from fpgaplace.project.arrays import weight_bytes
from fpgaplace.project.layout import RESULTS_DIR
from fpgaplace.project.record import Core, DesignRecord, PlacementInfo, load
from fpgaplace.util import graphs
from fpgaplace.util.errors import FpgaplaceError, first_line
from fpgaplace.util.files import write_file
from fpgaplace.util.templates import environment

REPORT_FILE = "report.html"
TEMPLATE = "report/report.html.j2"
SIM_SAMPLES = 256  # samples the event simulation streams for the page's latency and fps
GANTT_SAMPLES = 6  # samples drawn in the Gantt chart
MAX_GRAPH_NODES = 300  # ops drawn in the model graph at most
COLLAPSED_OPS = frozenset({"QuantizeLinear", "DequantizeLinear", "Constant"})
RESOURCE_KEYS = ("dsp", "bram36", "uram", "lut", "ff")
RESOURCE_LABELS = {"dsp": "DSP", "bram36": "BRAM36", "uram": "URAM", "lut": "LUT", "ff": "FF"}
RESULT_FILES = {"csim": "csim.json", "rtl": "rtl.json", "synthesis": "resources.json", "saved_sim": "sim.json"}
RESULT_TITLES = {"csim": "C simulation", "rtl": "RTL simulation", "synthesis": "Synthesis (yosys) beside the estimate",
                 "saved_sim": "Saved event simulation"}
# ColorBrewer "Set3" (light, distinct; dark text stays readable on every one)
PALETTE = ("#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5", "#bc80bd",
           "#ccebc5", "#ffed6f", "#d9d9d9")
UNPLACED_COLOUR = "#eeeeee"
LINK_COLOUR = "#b0b7c3"


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


# ---- units --------------------------------------------------------------------------------


def finite(value) -> float | None:
    """``value`` as a float when it is a finite number, else None."""
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def format_us(us) -> str:
    """Microseconds with milliseconds beside them: ``3.413 µs (0.003413 ms)``."""
    value = finite(us)
    return "–" if value is None else f"{value:.4g} µs ({value / 1e3:.4g} ms)"


def format_fps(fps) -> str:
    value = finite(fps)
    if value is None:
        return "–"
    return f"{value:,.0f} fps" if value >= 100 else f"{value:.4g} fps"


def format_bytes(count) -> str:
    """Bytes in B, KiB, MiB or GiB (binary prefixes)."""
    value = finite(count)
    if value is None:
        return "–"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(value) >= size:
            return f"{value / size:.4g} {unit}"
    return f"{value:.0f} B"


def format_share(used, available) -> str:
    """``used / available (percent)``; integers with thousands separators."""
    used_value, available_value = finite(used), finite(available)
    if used_value is None:
        return "–"
    text = f"{used_value:,.0f}" if used_value == int(used_value) else f"{used_value:,.4g}"
    if not available_value:
        return text
    return f"{text} / {available_value:,.0f} ({used_value / available_value:.1%})"


def format_gap(gap) -> str:
    value = finite(gap)
    return "none proven" if value is None else f"{value:.2%}"


def format_number(value) -> str:
    number = finite(value)
    if number is None:
        return "–" if value is None or isinstance(value, int | float) else str(value)
    return f"{number:,.0f}" if number == int(number) and abs(number) >= 1 else f"{number:.4g}"


# ---- SVG helpers ---------------------------------------------------------------------------


def _attr(value) -> str:
    return html.escape(str(value), quote=True)


def shorten(text: str, length: int) -> str:
    """``text`` cut to ``length`` characters, an ellipsis marking the cut."""
    return text if len(text) <= length else text[:length - 1] + "…"


def _svg(width: float, height: float, body: Iterable[str], label: str) -> Markup:
    return Markup(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
                  f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{_attr(label)}" '
                  f'font-family="sans-serif">' + "".join(body) + "</svg>")


def device_colours(document: DesignRecord) -> dict[str, str]:
    """A colour per device that runs ops, in design.json's device order (the palette cycles)."""
    names = [d.name for d in document.devices if d.ops]
    for name in document.placement.devices.values():
        if name not in names:
            names.append(name)
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}


def nice_step(span: float, ticks: int = 8) -> float:
    """A tick spacing of 1, 2 or 5 times a power of ten giving about ``ticks`` ticks over ``span``."""
    if span <= 0:
        return 1.0
    raw = span / ticks
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


# ---- the model graph -----------------------------------------------------------------------


@dataclass
class GraphNode:
    name: str
    op_type: str
    device: str | None  # None: a graph input or output, or an op the placement does not name
    role: str  # "op", "input" or "output"
    preds: list[int] = field(default_factory=list)


def model_graph(model, placement: dict[str, str], limit: int = MAX_GRAPH_NODES) -> tuple[list[GraphNode], int]:
    """The nodes to draw, in topological order, and how many ops the model has once its
    ``COLLAPSED_OPS`` are folded into the edges they sit on. At most ``limit`` ops are kept (the
    first in topological order, ``fpgaplace.util.graphs.topological_order``); edges to dropped ops are
    dropped. O((V + E) log V)."""
    graph = model.graph
    initializers = {t.name for t in graph.initializer}
    producer = producer_index(graph.node)
    inputs = [i.name for i in graph.input if i.name not in initializers]
    nodes: list[GraphNode] = [GraphNode(name, "input", None, "input") for name in inputs]
    terminal = {name: i for i, name in enumerate(inputs)}
    kept = [i for i, node in enumerate(graph.node) if node.op_type not in COLLAPSED_OPS]
    memo: dict[str, frozenset[int]] = {}

    def sources(tensor: str) -> frozenset[int]:
        """The kept onnx nodes (or inputs, as ``-1 - terminal``) whose value reaches ``tensor``."""
        if tensor in memo:
            return memo[tensor]
        memo[tensor] = frozenset()  # a cycle through collapsed nodes would otherwise recurse forever
        if tensor in terminal:
            found = frozenset({-1 - terminal[tensor]})
        elif tensor in producer:
            node = graph.node[producer[tensor]]
            found = (frozenset({producer[tensor]}) if node.op_type not in COLLAPSED_OPS
                     else frozenset().union(*(sources(t) for t in node.input if t)))
        else:
            found = frozenset()
        memo[tensor] = found
        return found

    preds = {i: sorted(set().union(*(sources(t) for t in graph.node[i].input if t))) for i in kept}
    position = {v: k for k, v in enumerate(kept)}
    edges = [(position[p], position[v]) for v in kept for p in preds[v] if p in position]
    try:
        order = [kept[k] for k in graphs.topological_order(len(kept), edges)]
    except graphs.CycleError:  # a damaged model: its ops in stored order
        order = kept
    drawn = order[:limit]
    index: dict[int, int] = {-1 - k: k for k in range(len(inputs))}
    for onnx_index in drawn:
        node = graph.node[onnx_index]
        name = node.name or (node.output[0] if node.output else f"node{onnx_index}")
        index[onnx_index] = len(nodes)
        nodes.append(GraphNode(name, node.op_type, placement.get(name), "op",
                               [index[p] for p in preds[onnx_index] if p in index]))
    for output in graph.output:
        reached = [index[s] for s in sorted(sources(output.name)) if s in index]
        if reached:
            nodes.append(GraphNode(output.name, "output", None, "output", reached))
    return nodes, len(order)


def layered_layout(nodes: list[GraphNode]) -> tuple[list[int], list[float]]:
    """Layer (longest path from a source) and horizontal position (centred on 0, one unit per
    node) of every node; ``nodes`` are in topological order. Each layer is sorted by the mean
    position of its nodes' predecessors (the barycenter heuristic), ties by order."""
    layer = [0] * len(nodes)
    for i, node in enumerate(nodes):
        layer[i] = 1 + max((layer[p] for p in node.preds), default=-1)
    position = [0.0] * len(nodes)
    by_layer: dict[int, list[int]] = {}
    for i, number in enumerate(layer):
        by_layer.setdefault(number, []).append(i)
    for number in sorted(by_layer):
        members = by_layer[number]

        def barycenter(i: int) -> tuple[float, int]:
            ps = nodes[i].preds
            return (sum(position[p] for p in ps) / len(ps) if ps else 0.0), i

        members.sort(key=barycenter)
        for slot, i in enumerate(members):
            position[i] = slot - (len(members) - 1) / 2
    return layer, position


GRAPH_NODE_W, GRAPH_NODE_H, GRAPH_GAP_X, GRAPH_GAP_Y, GRAPH_MARGIN = 150, 34, 14, 30, 12
GRAPH_BOW_ROOM = 90  # beside the widest layer, for the curves of edges that skip layers


def graph_svg(nodes: list[GraphNode], colours: dict[str, str]) -> Markup:
    """The layered drawing of ``nodes``: boxes coloured by device, edges as curves (dashed and
    dark where they cross devices), graph inputs and outputs as rounded white boxes."""
    layer, position = layered_layout(nodes)
    widest = max((sum(1 for x in layer if x == n) for n in set(layer)), default=1)
    step_x, step_y = GRAPH_NODE_W + GRAPH_GAP_X, GRAPH_NODE_H + GRAPH_GAP_Y
    width = 2 * GRAPH_MARGIN + widest * step_x - GRAPH_GAP_X + 2 * GRAPH_BOW_ROOM
    height = 2 * GRAPH_MARGIN + (max(layer, default=0) + 1) * step_y - GRAPH_GAP_Y

    def left(i: int) -> float:
        return GRAPH_MARGIN + GRAPH_BOW_ROOM + (position[i] + (widest - 1) / 2) * step_x

    def top(i: int) -> float:
        return GRAPH_MARGIN + layer[i] * step_y

    body = ['<defs><marker id="arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="6" markerHeight="6" '
            'orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#666"/></marker></defs>']
    for i, node in enumerate(nodes):
        x2, y2 = left(i) + GRAPH_NODE_W / 2, top(i)
        for p in node.preds:
            x1, y1 = left(p) + GRAPH_NODE_W / 2, top(p) + GRAPH_NODE_H
            crossing = node.device and nodes[p].device and node.device != nodes[p].device
            style = 'stroke="#333" stroke-width="1.6" stroke-dasharray="5,3"' if crossing else 'stroke="#888"'
            body.append(f'<path d="{_edge_path(x1, y1, x2, y2, layer[i] - layer[p], i + p)}" fill="none" {style} '
                        'marker-end="url(#arrow)"/>')
    for i, node in enumerate(nodes):
        body.append(_graph_box(node, left(i), top(i), colours))
    return _svg(width, height, body, "model graph coloured by device")


def _edge_path(x1: float, y1: float, x2: float, y2: float, span: int, parity: int) -> str:
    """A cubic curve from a node's bottom to another's top; one that skips layers bows out to
    the left or right (by ``parity``) so that it passes beside the boxes between, not over them."""
    if span <= 1:
        middle = (y1 + y2) / 2
        return f"M{x1:.1f},{y1:.1f} C{x1:.1f},{middle:.1f} {x2:.1f},{middle:.1f} {x2:.1f},{y2:.1f}"
    side = 1 if parity % 2 else -1
    bow = side * (GRAPH_NODE_W * 0.7 + 8 * min(span, 6))
    drop = GRAPH_NODE_H + GRAPH_GAP_Y
    return (f"M{x1:.1f},{y1:.1f} C{x1 + bow:.1f},{y1 + drop:.1f} {x2 + bow:.1f},{y2 - drop:.1f} "
            f"{x2:.1f},{y2:.1f}")


def _graph_box(node: GraphNode, x: float, y: float, colours: dict[str, str]) -> str:
    terminal = node.role != "op"
    fill = "#ffffff" if terminal else colours.get(node.device or "", UNPLACED_COLOUR)
    where = node.device or ("not placed" if not terminal else node.role)
    label = shorten(node.name, 22)
    detail = node.role if terminal else f"{node.op_type} · {where}"
    return (f'<g class="node" data-device="{_attr(node.device or "")}"><title>{_attr(node.name)} ({_attr(detail)})'
            f'</title><rect x="{x:.1f}" y="{y:.1f}" width="{GRAPH_NODE_W}" height="{GRAPH_NODE_H}" '
            f'rx="{12 if terminal else 4}" fill="{fill}" stroke="#555"/>'
            f'<text x="{x + GRAPH_NODE_W / 2:.1f}" y="{y + 14:.1f}" font-size="11" text-anchor="middle">'
            f'{_attr(label)}</text><text x="{x + GRAPH_NODE_W / 2:.1f}" y="{y + 27:.1f}" font-size="9" '
            f'text-anchor="middle" fill="#333">{_attr(detail[:30])}</text></g>')


# ---- the simulated schedule ----------------------------------------------------------------


@dataclass
class Bar:
    """One sample on one server: ``stage`` started it at ``start`` and held the server to ``end``."""

    server: int
    stage: str
    sample: int
    start: float
    end: float


def traced_schedule(project: Path, samples: int) -> tuple[list[tuple[str, str]], list[Bar]]:
    """The servers (name, kind) of the project's pipeline and the bars of the event simulator's
    run of ``samples`` samples (``sim.event.trace_schedule``)."""
    from fpgaplace.sim.event import trace_schedule

    servers, trace = trace_schedule(project, samples)
    return servers, [Bar(b.server, b.stage, b.sample, b.start_us, b.end_us) for b in trace]


GANTT_LABEL_W, GANTT_CHART_W, GANTT_ROW_H, GANTT_AXIS_H = 190, 820, 24, 28


def gantt_svg(servers: list[tuple[str, str]], bars: list[Bar], colours: dict[str, str]) -> Markup:
    """A row per server, a bar per sample it served (the sample number inside when it fits), a
    time axis in µs below."""
    end = max((b.end for b in bars), default=0.0) or 1.0
    scale = GANTT_CHART_W / end
    height = len(servers) * GANTT_ROW_H + GANTT_AXIS_H + 8
    width = GANTT_LABEL_W + GANTT_CHART_W + 20
    body = []
    for row, (name, kind) in enumerate(servers):
        y = row * GANTT_ROW_H + 4
        body.append(f'<rect x="0" y="{y - 2}" width="{width}" height="{GANTT_ROW_H}" '
                    f'fill="{"#f7f7f7" if row % 2 else "#ffffff"}"/>'
                    f'<text x="{GANTT_LABEL_W - 8}" y="{y + 14}" font-size="11" text-anchor="end">'
                    f'{_attr(shorten(name, 30))}<title>{_attr(name)} ({kind})</title></text>')
    for bar in bars:
        x, y = GANTT_LABEL_W + bar.start * scale, bar.server * GANTT_ROW_H + 4
        w = max(1.0, (bar.end - bar.start) * scale)
        name, kind = servers[bar.server]
        fill = LINK_COLOUR if kind == "link" else colours.get(name, UNPLACED_COLOUR)
        body.append(f'<g class="bar"><title>{_attr(bar.stage)}, sample {bar.sample}: {bar.start:.4g}–{bar.end:.4g} µs'
                    f'</title><rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{GANTT_ROW_H - 6}" fill="{fill}" '
                    f'stroke="#444" stroke-width="0.6"/>')
        if w >= 14:
            body.append(f'<text x="{x + w / 2:.2f}" y="{y + 13}" font-size="10" text-anchor="middle">{bar.sample}'
                        '</text>')
        body.append("</g>")
    axis_y = len(servers) * GANTT_ROW_H + 4
    body.append(f'<line x1="{GANTT_LABEL_W}" y1="{axis_y}" x2="{GANTT_LABEL_W + GANTT_CHART_W}" y2="{axis_y}" '
                'stroke="#333"/>')
    step = nice_step(end)
    tick = 0.0
    while tick <= end * (1 + 1e-9):
        x = GANTT_LABEL_W + tick * scale
        body.append(f'<line x1="{x:.2f}" y1="{axis_y}" x2="{x:.2f}" y2="{axis_y + 5}" stroke="#333"/>'
                    f'<text x="{x:.2f}" y="{axis_y + 17}" font-size="10" text-anchor="middle">{tick:.4g}</text>')
        tick += step
    body.append(f'<text x="{GANTT_LABEL_W - 8}" y="{axis_y + 17}" font-size="10" text-anchor="end">time (µs)</text>')
    return _svg(width, height + 4, body, "Gantt chart of the simulated schedule")


# ---- sections ------------------------------------------------------------------------------


def _resource_rows(cores: list[Core]) -> list[dict]:
    """Per core, each resource as used / available and its share; then the total of the cores."""
    rows = []
    totals = {key: [0.0, 0.0] for key in RESOURCE_KEYS}
    for core in cores:
        used, budget = core.resources, core.budget
        cells = []
        for key in RESOURCE_KEYS:
            u, b = finite(used.get(key)), finite(budget.get(key))
            totals[key][0] += u or 0.0
            totals[key][1] += b or 0.0
            cells.append(_share_cell(key, u, b))
        rows.append({"name": core.name, "node": core.node, "total": False, "cells": cells})
    if len(cores) > 1:
        rows.append({"name": "all cores", "node": "", "total": True,
                     "cells": [_share_cell(key, *totals[key]) for key in RESOURCE_KEYS]})
    return rows


def _share_cell(key: str, used: float | None, available: float | None) -> dict:
    fraction = used / available if used is not None and available else None
    return {"key": key, "used": used, "available": available, "text": format_share(used, available),
            "percent": None if fraction is None else min(100.0, 100 * fraction),
            "over": fraction is not None and fraction > 1}


def _layer_rows(core: Core) -> list[dict]:
    rows = []
    for layer in core.layers:
        resources = layer.resources
        rows.append({"op": layer.op, "kernel": layer.kernel,
                     "folding": f"{layer.pe} / {layer.simd} / {layer.mmv}",
                     "cycles": format_number(layer.cycles), "macs": format_number(layer.macs),
                     "resources": [format_number(resources.get(key)) for key in RESOURCE_KEYS],
                     "resident": "on chip" if layer.resident else "streamed"})
    return rows


def _memory_rows(project: Path, cores: list[Core]) -> list[dict]:
    rows = []
    for core in cores:
        used, budget = core.resources, core.budget
        ram_used = (finite(used.get("bram36")) or 0) * BRAM36_BYTES + (finite(used.get("uram")) or 0) * URAM_BYTES
        ram_budget = (finite(budget.get("bram36")) or 0) * BRAM36_BYTES + (finite(budget.get("uram")) or 0) * URAM_BYTES
        weights = weight_bytes(project, core)
        rows.append({
            "name": core.name,
            "onchip_weights": format_bytes(weights[0]) if weights else "–",
            "streamed_weights": format_bytes(weights[1]) if weights else "–",
            "streamed_per_sample": format_bytes(core.streamed_weight_bytes),
            "ram": f"{format_bytes(ram_used)} / {format_bytes(ram_budget)}"
                   + (f" ({ram_used / ram_budget:.1%})" if ram_budget else ""),
            "percent": min(100.0, 100 * ram_used / ram_budget) if ram_budget else None,
        })
    return rows


def _solver_rows(placement: PlacementInfo) -> list[dict]:
    """``placement.compared`` (every method tried) when design.json has it, else the chosen one."""
    entries = placement.compared or [placement.to_json()]
    unit = placement.unit
    rows = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        value, bound = finite(entry.get("value")), finite(entry.get("bound"))
        rows.append({"method": str(entry.get("method", "?")), "value": _in_unit(value, unit),
                     "bound": _in_unit(bound, unit) if bound is not None else "none proven",
                     "gap": format_gap(entry.get("gap")), "status": str(entry.get("status", "")),
                     "seconds": format_number(entry.get("seconds")) if "seconds" in entry else "–",
                     "chosen": entry.get("method") == placement.method})
    return rows


def _in_unit(value: float | None, unit: str) -> str:
    return format_us(value) if unit == "us" else ("–" if value is None else f"{value:.4g} {unit}")


def _device_rows(document: DesignRecord, colours: dict[str, str]) -> list[dict]:
    devices = document.devices
    heaviest = max((d.load_us or 0.0 for d in devices), default=0.0) or 1.0
    return [{"name": d.name, "kind": d.kind, "node": d.node or "", "ops": len(d.ops),
             "load": format_us(d.load_us), "compute": format_us(d.compute_us),
             "percent": 100 * (d.load_us or 0.0) / heaviest,
             "colour": colours.get(d.name, UNPLACED_COLOUR)} for d in devices]


def _transfer_rows(document: DesignRecord) -> list[dict]:
    return [{"tensor": t.tensor, "from": t.from_device, "to": t.to_device,
             "link": f"{t.link or '?'} ({t.link_type})" if t.link_type else (t.link or "?"),
             "bytes": format_bytes(t.bytes), "time": format_us(t.us)}
            for t in document.transfers]


def _simulation(project: Path, samples: int) -> dict:
    from fpgaplace.sim.event import simulate

    result = simulate(project, samples).to_json()
    return {
        "samples": result["samples"], "latency": format_us(result["latency_us"]),
        "interval": format_us(result["interval_us"]), "fps": format_fps(result["fps"]),
        "bottleneck": result["bottleneck"],
        "roofline": (f"{format_fps(result['roofline_fps'])} ({result['roofline_fraction']:.1%} reached)"
                     if result.get("roofline_fps") else "–"),
        "dram": (f"{format_fps(result['dram_bound_fps'])} ({result['dram_fraction']:.1%} reached)"
                 if result.get("dram_bound_fps") else "–"),
        "devices": [{"name": d["name"], "kind": d["kind"], "per_sample": format_us(d["per_sample_us"]),
                     "utilisation": f"{d['utilisation']:.1%}", "blocked": format_us(d["blocked_us"]),
                     "starved": format_us(d["starved_us"])} for d in result["devices"]],
        "raw": {k: result[k] for k in ("samples", "latency_us", "interval_us", "fps", "bottleneck")},
    }


# ---- results of the C/RTL simulation and synthesis stages ----------------------------------


def _flatten(record: dict, prefix: str = "") -> dict[str, object]:
    """Nested dicts as dotted keys (``yosys.lut``); lists shown by their length."""
    flat: dict[str, object] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{name}."))
        elif isinstance(value, list):
            flat[name] = f"{len(value)} items"
        else:
            flat[name] = value
    return flat


def _with_ratio(row: dict[str, object]) -> dict[str, object]:
    """A row holding measured and modelled cycles gains their ratio (the estimate beside the
    measurement, as one number)."""
    measured, model = finite(row.get("cycles_measured")), finite(row.get("cycles_model"))
    if measured is not None and model:
        return {**row, "measured / model": f"{measured / model:.3f}"}
    return row


def _cell(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "NO"
    return format_number(value) if isinstance(value, int | float) else str(value)


def results_section(key: str, document: object) -> dict:
    """A results file as facts (its top-level scalars) and tables (its lists of records, nested
    records flattened into dotted columns); any shape the stages write is shown, none is assumed."""
    if not isinstance(document, dict):
        document = {"value": document}
    facts = [(name, _cell(value)) for name, value in document.items() if not isinstance(value, dict | list)]
    tables = []
    for name, value in document.items():
        if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            value = [{"name": k, **v} for k, v in value.items()]  # {core: {...}} as rows
        elif isinstance(value, dict):
            facts += [(f"{name}.{k}", _cell(v)) for k, v in _flatten(value).items()]
            continue
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            rows = [_with_ratio(_flatten(v)) for v in value]
            columns = list(dict.fromkeys(c for row in rows for c in row))
            tables.append({"name": name, "columns": columns,
                           "rows": [[_cell(row.get(c, "")) for c in columns] for row in rows]})
        elif isinstance(value, list):
            facts.append((name, ", ".join(_cell(v) for v in value)))
    ok = document.get("ok")
    return {"key": key, "title": RESULT_TITLES[key], "file": f"{RESULTS_DIR}/{RESULT_FILES[key]}",
            "status": None if not isinstance(ok, bool) else ("passed" if ok else "FAILED"), "facts": facts,
            "tables": tables}


def _results(project: Path, notes: list[str]) -> list[dict]:
    sections = []
    for key, name in RESULT_FILES.items():
        path = project / RESULTS_DIR / name
        if not path.is_file():
            continue
        try:
            document = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            notes.append(f"{path}: not readable JSON ({first_line(error)}); left out")
            continue
        sections.append(results_section(key, document))
    return sections


# ---- the page ------------------------------------------------------------------------------


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
        simulation = _simulation(project, samples)
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
        "precision": document.precision, "batch": document.model.batch,
        "interval": format_us(document.interval_us), "fps": format_fps(document.fps),
        "placement": placement, "legend": _legend(document, colours),
        "placement_value": _in_unit(finite(placement.value), placement.unit),
        "graph": graph, "schedule": schedule,
        "resource_labels": [RESOURCE_LABELS[k] for k in RESOURCE_KEYS],
        "resources": _resource_rows(cores), "cores": [{"name": c.name, "layers": _layer_rows(c),
                                                       "interval": format_us(c.interval_us),
                                                       "planned": format_us(c.planned_load_us)}
                                                      for c in cores],
        "memory": _memory_rows(project, cores), "solvers": _solver_rows(placement),
        "devices": _device_rows(document, colours), "transfers": _transfer_rows(document),
        "cpu_ops": document.cpu_ops, "results": _results(project, notes), "notes": notes,
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
