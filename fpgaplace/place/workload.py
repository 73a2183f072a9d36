"""The paper's workload JSON <-> PlacementProblem, and its split format <-> Placement.

Format (Tarnawski et al., NeurIPS 2020, public workloads; see tests/workloads/README.md)::

    {"maxSizePerFPGA": bytes, "maxFPGAs": k, "maxCPUs": l,
     "nodes": [{"id", "supportedOnFpga", "cpuLatency", "fpgaLatency", "isBackwardNode",
                "colorClass"?, "size"?, "name"?, "layerId"?}, ...],
     "edges": [{"sourceId", "destId", "cost", "size"?}, ...]}

Booleans may be written as 0/1. ``cost`` is the time to move the source node's output between an
accelerator and DRAM; the format says it is the same on every out-edge of a node. When a file
breaks that rule the loader takes the largest cost of the node's out-edges (a safe over-estimate)
and records the node ids in ``problem.meta["mixed_edge_costs"]``.

The loaded problem has two device kinds: ``fpga`` (``maxFPGAs`` devices of ``maxSizePerFPGA``
bytes) and ``cpu`` (``maxCPUs`` devices, unlimited memory), and uses the paper's latency
convention (CPU work overlaps without limit).

All functions are linear in the size of the file.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from fpgaplace.place.solvers.problem import DeviceKind, Placement, PlacementProblem
from fpgaplace.util.errors import FpgaplaceError, first_line
from fpgaplace.util.graphs import node_on_cycle

MAX_NUMBER = 1e15
"""The largest latency, cost or size a workload may give (solvers such as SCIP take 1e20 as infinity)."""
MAX_DEVICES = 4096
"""The most accelerators (and, separately, CPUs) a workload may ask for."""
MAX_JSON_DEPTH = 64
"""The deepest nesting of JSON arrays and objects a workload or split may have (they are 3 deep)."""
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(r"[\[\]{}]")

NODE_FIELDS = ("id", "supportedOnFpga", "cpuLatency", "fpgaLatency", "isBackwardNode")
EDGE_FIELDS = ("sourceId", "destId", "cost")
TOP_FIELDS = ("maxSizePerFPGA", "maxFPGAs", "maxCPUs", "nodes", "edges")


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise FpgaplaceError(f"{path}: file not found")
    text = path.read_text(encoding="utf-8", errors="replace")
    if not text.strip():
        raise FpgaplaceError(f"{path}: file is empty, expected a JSON object")
    depth = _nesting_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise FpgaplaceError(f"{path}: JSON nested {depth} levels deep; expected at most {MAX_JSON_DEPTH}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise FpgaplaceError(
            f"{path}: not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})"
        ) from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts (4300)
        raise FpgaplaceError(f"{path}: unreadable JSON number ({first_line(exc)})") from None


def _nesting_depth(text: str) -> int:
    """The deepest nesting of brackets and braces outside strings, O(len(text)) (checked before
    ``json.loads``, which recurses once per level). Without a backslash (no escaped quotes) in
    numpy over the quotes and brackets alone: a 33 MB, 200,000-op workload in 0.2 s instead of
    3 s for the regular expressions."""
    if "\\" not in text:
        return _plain_nesting_depth(text)
    depth = deepest = 0
    for bracket in _BRACKETS.findall(_STRINGS.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def _plain_nesting_depth(text: str) -> int:
    """``_nesting_depth`` of a text without backslashes, where a string is simply the run between
    two quotes: a bracket is outside every string when an even number of quotes precede it (or,
    as for the regular expression, it follows an unmatched last quote)."""
    wanted = np.zeros(256, dtype=bool)
    wanted[list(b'"[]{}')] = True
    data = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    marks = data[wanted[data]]
    quotes = marks == ord('"')
    seen = np.cumsum(quotes)
    total = int(seen[-1]) if len(seen) else 0
    outside = ~quotes & ((seen % 2 == 0) | (seen == total) & (total % 2 == 1))
    steps = np.where((marks == ord("[")) | (marks == ord("{")), 1, -1)[outside]
    return int(max(0, np.cumsum(steps).max(initial=0)))


def _number(path: Path, where: str, value: Any, *, integer: bool = False, maximum: float = MAX_NUMBER) -> float:
    """A finite number in [0, ``maximum``] (bool excluded), else a one-line error naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FpgaplaceError(f"{path}: {where} is {_shown(value)}, expected a number")
    if isinstance(value, float) and math.isnan(value) or not 0 <= value <= maximum:
        raise FpgaplaceError(f"{path}: {where} is {_shown(value)}, expected a number in 0..{maximum:g}")
    if integer and value != int(value):
        raise FpgaplaceError(f"{path}: {where} is {value!r}, expected an integer")
    return float(value)


def _shown(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters (a huge integer by its size)."""
    if isinstance(value, int) and value.bit_length() > 200:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _flag(path: Path, where: str, value: Any) -> bool:
    if isinstance(value, bool) or value in (0, 1):
        return bool(value)
    raise FpgaplaceError(f"{path}: {where} is {value!r}, expected true/false or 0/1")


def _require(path: Path, obj: Any, fields: Iterable[str], what: str) -> None:
    if not isinstance(obj, dict):
        raise FpgaplaceError(f"{path}: {what} is {type(obj).__name__}, expected a JSON object")
    for name in fields:
        if name not in obj:
            raise FpgaplaceError(f"{path}: {what} has no field '{name}'")


def load_workload(path: str | Path) -> PlacementProblem:
    """Read a paper workload JSON into a ``PlacementProblem``; errors name the file and field."""
    path = Path(path)
    data = _read_json(path)
    _require(path, data, TOP_FIELDS, "the top-level object")
    memory = _number(path, "maxSizePerFPGA", data["maxSizePerFPGA"])
    fpgas = int(_number(path, "maxFPGAs", data["maxFPGAs"], integer=True, maximum=MAX_DEVICES))
    cpus = int(_number(path, "maxCPUs", data["maxCPUs"], integer=True, maximum=MAX_DEVICES))
    nodes, edges_json = data["nodes"], data["edges"]
    if not isinstance(nodes, list) or not nodes:
        raise FpgaplaceError(f"{path}: 'nodes' must be a non-empty list")
    if not isinstance(edges_json, list):
        raise FpgaplaceError(f"{path}: 'edges' must be a list")

    nodes_read = _fast_nodes(nodes) or _checked_nodes(path, nodes)
    ids, names, latency, size, backward, color = nodes_read
    index = {node_id: i for i, node_id in enumerate(ids)}
    n = len(ids)
    edges, transfer, mixed = _fast_edges(edges_json, index) or _checked_edges(path, edges_json, index)

    on_cycle = node_on_cycle(n, edges)
    if on_cycle is not None:
        raise FpgaplaceError(f"{path}: the graph has a cycle through node {ids[on_cycle]}")

    kinds = [DeviceKind("fpga", fpgas, memory, False), DeviceKind("cpu", cpus, math.inf, True)]
    meta: dict = {}
    if mixed:
        meta["mixed_edge_costs"] = sorted(mixed)
    return PlacementProblem(
        names=names, ids=ids, edges=edges, kinds=kinds, latency=latency, size=size,
        transfer=transfer, backward=backward, color=color, cpu_overlap_unlimited=True,
        source=str(path), meta=meta,
    )


Nodes = tuple[list[int], list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""ids, names, latency (n x [fpga, cpu]), size, backward, colour (-1: none) of a workload's nodes."""
Edges = tuple[list[tuple[int, int]], np.ndarray, set]
"""edges (node indices), each node's transfer cost, and the ids of nodes with mixed out-edge costs."""


def _checked_nodes(path: Path, nodes: list) -> Nodes:
    """The nodes, each field checked in turn: the first bad one is a one-line error. O(n)."""
    n = len(nodes)
    ids: list[int] = []
    names: list[str] = []
    latency = np.zeros((n, 2))
    size = np.zeros(n)
    backward = np.zeros(n, dtype=bool)
    color = np.full(n, -1, dtype=np.int64)
    index: set[int] = set()
    for i, node in enumerate(nodes):
        _require(path, node, NODE_FIELDS, f"node #{i}")
        node_id = node["id"]
        if isinstance(node_id, bool) or not isinstance(node_id, int):
            raise FpgaplaceError(f"{path}: node #{i} has id {node_id!r}, expected an integer")
        if node_id in index:
            raise FpgaplaceError(f"{path}: duplicate node id {node_id}")
        index.add(node_id)
        ids.append(node_id)
        names.append(str(node.get("name", f"node{node_id}")))
        where = f"node {node_id}"
        supported = _flag(path, f"{where} field 'supportedOnFpga'", node["supportedOnFpga"])
        fpga_latency = _number(path, f"{where} field 'fpgaLatency'", node["fpgaLatency"])
        latency[i, 0] = fpga_latency if supported else np.inf
        latency[i, 1] = _number(path, f"{where} field 'cpuLatency'", node["cpuLatency"])
        size[i] = _number(path, f"{where} field 'size'", node.get("size", 0.0))
        backward[i] = _flag(path, f"{where} field 'isBackwardNode'", node["isBackwardNode"])
        if "colorClass" in node:
            color[i] = int(_number(path, f"{where} field 'colorClass'", node["colorClass"],
                                   integer=True))
    return ids, names, latency, size, backward, color


def _fast_nodes(nodes: list) -> Nodes | None:
    """``_checked_nodes``'s answer, column by column (a 200,000-op workload in 0.5 s instead of
    1.5 s), or None when some node breaks a rule: ``_checked_nodes`` then names the first."""
    if not all(type(node) is dict and _NODE_KEYS <= node.keys() for node in nodes):
        return None
    ids = [node["id"] for node in nodes]
    if not all(type(node_id) is int for node_id in ids) or len(set(ids)) != len(ids):
        return None
    supported, backward = (_fast_flags([node[key] for node in nodes]) for key in ("supportedOnFpga", "isBackwardNode"))
    fpga, cpu = (_fast_numbers([node[key] for node in nodes]) for key in ("fpgaLatency", "cpuLatency"))
    size = _fast_numbers([node.get("size", 0.0) for node in nodes])
    coloured = [i for i, node in enumerate(nodes) if "colorClass" in node]
    colours = _fast_numbers([nodes[i]["colorClass"] for i in coloured])
    if any(column is None for column in (supported, backward, fpga, cpu, size, colours)) \
            or not np.array_equal(colours, np.floor(colours)):
        return None
    color = np.full(len(nodes), -1, dtype=np.int64)
    color[coloured] = colours.astype(np.int64)
    names = [str(node.get("name", f"node{node_id}")) for node, node_id in zip(nodes, ids, strict=True)]
    latency = np.column_stack([np.where(supported, fpga, np.inf), cpu])
    return ids, names, latency, size, backward, color


_NODE_KEYS = frozenset(NODE_FIELDS)
_EDGE_KEYS = frozenset(EDGE_FIELDS)


def _fast_numbers(values: list) -> np.ndarray | None:
    """``values`` as floats when every one is what ``_number`` accepts (a number, not a bool, in
    0..``MAX_NUMBER``), else None."""
    if not {type(value) for value in values} <= {int, float}:
        return None
    try:
        column = np.array(values, dtype=float)
    except OverflowError:  # an integer past the floats
        return None
    return column if bool(np.all((column >= 0) & (column <= MAX_NUMBER))) else None


def _fast_flags(values: list) -> np.ndarray | None:
    """``values`` as booleans when every one is what ``_flag`` accepts (a bool, 0 or 1), else None."""
    try:
        if not set(values) <= {0, 1}:
            return None
    except TypeError:  # an unhashable value (a list or an object)
        return None
    return np.array(values, dtype=bool)


def _checked_edges(path: Path, edges_json: list, index: dict[int, int]) -> Edges:
    """The edges, each checked in turn: the first bad one is a one-line error. O(m)."""
    transfer = np.zeros(len(index))
    has_cost = np.zeros(len(index), dtype=bool)
    mixed: set[int] = set()
    edges: list[tuple[int, int]] = []
    for j, edge in enumerate(edges_json):
        _require(path, edge, EDGE_FIELDS, f"edge #{j}")
        source, dest = edge["sourceId"], edge["destId"]
        for end in (source, dest):
            if isinstance(end, (list, dict)):
                raise FpgaplaceError(f"{path}: edge #{j}: node id {json.dumps(end)[:60]}; expected an integer id")
            if end not in index:
                raise FpgaplaceError(
                    f"{path}: dangling edge #{j} {source}->{dest}: node id {end!r} does not exist"
                )
        u, v = index[source], index[dest]
        if u == v:
            raise FpgaplaceError(f"{path}: edge #{j} is a self-loop on node {source}")
        cost = _number(path, f"edge #{j} ({source}->{dest}) field 'cost'", edge["cost"])
        if has_cost[u] and cost != transfer[u]:
            mixed.add(source)
        transfer[u] = max(transfer[u], cost) if has_cost[u] else cost
        has_cost[u] = True
        edges.append((u, v))
    return edges, transfer, mixed


def _fast_edges(edges_json: list, index: dict[int, int]) -> Edges | None:
    """``_checked_edges``'s answer in a few passes, or None when some edge breaks a rule (then
    ``_checked_edges`` names the first)."""
    if not all(type(edge) is dict and _EDGE_KEYS <= edge.keys() for edge in edges_json):
        return None
    try:
        tails = [index[edge["sourceId"]] for edge in edges_json]
        heads = [index[edge["destId"]] for edge in edges_json]
    except (KeyError, TypeError):  # a dangling or unhashable end
        return None
    costs = _fast_numbers([edge["cost"] for edge in edges_json])
    tail, head = np.array(tails, dtype=np.int64), np.array(heads, dtype=np.int64)
    if costs is None or bool(np.any(tail == head)):
        return None
    transfer = np.full(len(index), -np.inf)
    lowest = np.full(len(index), np.inf)
    np.maximum.at(transfer, tail, costs)
    np.minimum.at(lowest, tail, costs)
    ids = list(index)
    mixed = {ids[u] for u in np.flatnonzero(lowest < transfer).tolist()}
    return list(zip(tails, heads, strict=True)), np.where(np.isfinite(transfer), transfer, 0.0), mixed


def _single_accelerator_kind(problem: PlacementProblem, what: str) -> tuple[int, int]:
    """(accelerator kind, cpu kind) of a problem the paper's formats can express."""
    acc, cpu = problem.accelerator_kinds(), problem.cpu_kinds()
    if len(acc) > 1 or len(cpu) > 1:
        raise FpgaplaceError(
            f"{problem.source or 'problem'}: {what} holds one accelerator kind and one CPU kind; "
            f"this problem has {len(acc)} accelerator kinds and {len(cpu)} CPU kinds"
        )
    return (acc[0] if acc else -1), (cpu[0] if cpu else -1)


def _as_json_number(x: float) -> float | int:
    return int(x) if float(x).is_integer() and abs(x) < 2**53 else float(x)


def save_workload(problem: PlacementProblem, path: str | Path) -> None:
    """Write ``problem`` in the paper's workload format.

    The format holds one accelerator kind and one CPU kind; a problem with several accelerator
    kinds (a heterogeneous board) is refused with an ``FpgaplaceError``. A node that cannot run on
    the accelerator is written with ``supportedOnFpga: 0`` and ``fpgaLatency: 0``; a missing CPU
    kind is written as ``maxCPUs: 0``. Every out-edge of u carries ``transfer[u]``.
    """
    acc, cpu = _single_accelerator_kind(problem, "the paper's workload format")
    nodes = []
    for v in range(problem.n):
        fpga_latency = problem.latency[v, acc] if acc >= 0 else math.inf
        supported = bool(np.isfinite(fpga_latency))
        node: dict[str, Any] = {
            "name": problem.names[v],
            "id": problem.ids[v],
            "supportedOnFpga": int(supported),
            "cpuLatency": float(problem.latency[v, cpu]) if cpu >= 0 else 0.0,
            "fpgaLatency": float(fpga_latency) if supported else 0.0,
            "isBackwardNode": int(problem.backward[v]),
            "size": _as_json_number(float(problem.size[v])),
        }
        if problem.color[v] >= 0:
            node["colorClass"] = int(problem.color[v])
        nodes.append(node)
    edges = [
        {"sourceId": problem.ids[u], "destId": problem.ids[v], "cost": float(problem.transfer[u])}
        for u, v in problem.edges
    ]
    data = {
        "maxSizePerFPGA": float(problem.kinds[acc].memory) if acc >= 0 else 0.0,
        "maxFPGAs": problem.kinds[acc].count if acc >= 0 else 0,
        "maxCPUs": problem.kinds[cpu].count if cpu >= 0 else 0,
        "nodes": nodes,
        "edges": edges,
    }
    Path(path).write_text(json.dumps(data, indent=1), encoding="utf-8")


def _split_groups(path: Path, data: Any, key: str) -> list[list[int]]:
    groups = data.get(key, [])
    if not isinstance(groups, list):
        raise FpgaplaceError(f"{path}: '{key}' must be a list of {{\"nodes\": [...]}} objects")
    out = []
    for g, group in enumerate(groups):
        _require(path, group, ("nodes",), f"{key}[{g}]")
        if not isinstance(group["nodes"], list):
            raise FpgaplaceError(f"{path}: {key}[{g}].nodes must be a list of node ids")
        out.append(group["nodes"])
    return out


def load_split(path: str | Path, problem: PlacementProblem) -> Placement:
    """Read a split in the paper's output format into a ``Placement`` of ``problem``.

    ``fpgas[i]`` goes to the i-th accelerator (in ``problem.devices()`` order) and ``cpus[j]``
    to the j-th CPU. Nodes the file does not list are placed as follows: a node whose colour
    class has listed members goes where they went (this is how a training workload uses an
    inference split: each backward node follows its forward colour class); any other unlisted
    node is an error naming it. A node listed twice, an unknown id, more groups than devices, or
    a colour class whose listed members disagree on the device for an unlisted mate are errors.
    The returned placement has ``method="split"``; its value is left for ``evaluate``.
    """
    path = Path(path)
    data = _read_json(path)
    if not isinstance(data, dict) or ("fpgas" not in data and "cpus" not in data):
        raise FpgaplaceError(f"{path}: expected an object with 'fpgas' and/or 'cpus' lists")
    acc, cpu = _single_accelerator_kind(problem, "the paper's split format")
    devices = problem.devices()
    acc_devices = [d for d, (k, _) in enumerate(devices) if k == acc]
    cpu_devices = [d for d, (k, _) in enumerate(devices) if k == cpu]
    index = problem.index_of()
    device = np.full(problem.n, -1, dtype=np.int64)
    for key, targets in (("fpgas", acc_devices), ("cpus", cpu_devices)):
        groups = _split_groups(path, data, key)
        nonempty = [g for g in range(len(groups)) if groups[g]]
        if len(groups) > len(targets):
            raise FpgaplaceError(
                f"{path}: '{key}' has {len(groups)} groups ({len(nonempty)} non-empty) but the problem has "
                f"only {len(targets)} such devices; expected at most one group per device"
            )
        for g in nonempty:
            for node_id in groups[g]:
                if node_id not in index:
                    raise FpgaplaceError(f"{path}: {key}[{g}] lists node {node_id!r}, "
                                         f"which {problem.source or 'the problem'} does not have")
                v = index[node_id]
                if device[v] >= 0:
                    raise FpgaplaceError(f"{path}: node {node_id} is listed twice")
                device[v] = targets[g]
    _place_unlisted_by_colour(path, problem, device)
    return Placement(device=device, method="split", status="given")


def _place_unlisted_by_colour(path: Path, problem: PlacementProblem, device: np.ndarray) -> None:
    class_device: dict[int, set[int]] = {}
    for v in range(problem.n):
        if device[v] >= 0 and problem.color[v] >= 0:
            class_device.setdefault(int(problem.color[v]), set()).add(int(device[v]))
    missing = []
    for v in range(problem.n):
        if device[v] >= 0:
            continue
        where = class_device.get(int(problem.color[v]), set()) if problem.color[v] >= 0 else set()
        if len(where) > 1:
            raise FpgaplaceError(
                f"{path}: node {problem.ids[v]} is not listed and its colour class "
                f"{int(problem.color[v])} is split over devices {sorted(where)}"
            )
        if where:
            device[v] = next(iter(where))
        else:
            missing.append(problem.ids[v])
    if missing:
        shown = ", ".join(str(i) for i in missing[:10]) + (" ..." if len(missing) > 10 else "")
        raise FpgaplaceError(
            f"{path}: {len(missing)} nodes are not listed and have no listed colour-class mate: "
            f"{shown}"
        )


def placement_to_json(problem: PlacementProblem, placement: Placement, evaluation: Any) -> dict:
    """The result as a superset of the paper's output format.

    ``maxLoad``, ``fpgas: [{nodes, load}]``, ``cpus: [{nodes, load}]`` (node ids as in the
    input), plus ``latency``, ``bound``, ``gap``, ``method``, ``seconds``, ``status``.
    ``evaluation`` is the ``Evaluation`` of ``placement`` (from ``solvers.evaluate``). ``fpgas``
    lists every non-CPU device and ``cpus`` every CPU device, in ``problem.devices()`` order;
    with more than one accelerator kind, ``devices: [{name, kind, nodes, load}]`` is added.
    Non-finite numbers are written as null.
    """

    def num(x: float) -> float | None:
        return float(x) if math.isfinite(x) else None

    devices = problem.devices()
    groups: list[dict[str, Any]] = []
    for d, (kind, _) in enumerate(devices):
        nodes = sorted(problem.ids[v] for v in np.flatnonzero(placement.device == d))
        groups.append({"name": problem.device_name(d), "kind": problem.kinds[kind].name,
                       "nodes": nodes, "load": num(evaluation.loads[d])})
    out: dict[str, Any] = {
        "maxLoad": num(evaluation.max_load),
        "fpgas": [{"nodes": g["nodes"], "load": g["load"]}
                  for g, (k, _) in zip(groups, devices, strict=True)
                  if not problem.kinds[k].is_cpu],
        "cpus": [{"nodes": g["nodes"], "load": g["load"]}
                 for g, (k, _) in zip(groups, devices, strict=True) if problem.kinds[k].is_cpu],
        "latency": num(evaluation.latency),
        "bound": num(placement.bound),
        "gap": num(placement.gap),
        "method": placement.method,
        "objective": placement.objective,
        "seconds": placement.seconds,
        "status": placement.status,
        "feasible": bool(evaluation.feasible),
        "contiguous": bool(evaluation.contiguous),
    }
    if len(problem.accelerator_kinds()) > 1:
        out["devices"] = groups
    return out
