"""The report's figures, inline SVG built here (nothing is fetched when the page is opened).

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
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from markupsafe import Markup

from fpgaplace.model.ir import producer_index
from fpgaplace.project.record import DesignRecord
from fpgaplace.util import graphs

MAX_GRAPH_NODES = 300  # ops drawn in the model graph at most


COLLAPSED_OPS = frozenset({"QuantizeLinear", "DequantizeLinear", "Constant"})


# ColorBrewer "Set3" (light, distinct; dark text stays readable on every one)
PALETTE = ("#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5", "#bc80bd",
           "#ccebc5", "#ffed6f", "#d9d9d9")


UNPLACED_COLOUR = "#eeeeee"


LINK_COLOUR = "#b0b7c3"


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
