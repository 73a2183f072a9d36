"""The one trusted evaluator: max-load, latency and schedule of any placement.

Every solver's answer is checked by ``evaluate`` in the tests, so this module is kept plain and
independent of the solvers. Semantics follow Tarnawski et al., "Efficient Algorithms for Device
Placement of DNN Graph Operators" (NeurIPS 2020) and its public reference code.

Throughput (max-load, the time per sample of a pipeline)
    Device d holds the set S of nodes with ``device[v] == d``. An accelerator's load is
    sum a(v) over S plus c(u) for every node u that has an edge crossing S's boundary in either
    direction (u outside S with an edge into S, or u in S with an edge leaving S), each u counted
    once per set. A CPU's load is sum p(v) over S (CPUs pay no transfer). ``max_load`` is the
    largest load. Backward nodes count like any other node.
    With ``problem.links`` (a board's problem), c(u) on a device is the time over the costliest
    of the links joining it to the devices on u's other side (``PlacementProblem.charge``), in
    the latency schedule too; without, the paper's single c(u).

Contiguity
    Judged on the *class graph*, the forward graph with colour classes contracted, as in the
    paper: a forward node's class is its colour class (or itself if it has none); a backward
    node's class is the colour class of its forward mates, or, if the class has no forward node
    (an "orphan" backward class; a backward node without colour is its own orphan class), a class
    of its own whose edges mirror the backward edges that touch it (backward edge u->v gives class
    edge cls(v)->cls(u)). Other backward edges are ignored (they mirror forward edges). A device is
    contiguous when its set of classes is convex: no class path leaves it and comes back.
    Note that a split into convex sets need not be orderable as a chain of ideals (three devices
    can depend on each other in a ring); the DP searches chains, which are always convex.

Latency (one sample)
    Work runs in *units*: on an accelerator, a unit is one subgraph; each CPU op is a unit of its
    own. A unit starts when all its input tensors exist and, on an accelerator (or a CPU core in
    finite-cores mode), when the previous unit on the same device has finished. An accelerator
    unit takes sum a(v) + c(u) for each distinct tensor it reads from outside the unit or writes
    to outside it; a CPU op takes p(v). The latency is the time the last unit ends.
    Our extension: where the problem carries ``fills`` (one built from a graph), an accelerator
    unit's sum a(v) is replaced by its dataflow's single-sample latency (``unit_compute``: the
    stages overlap, each paced at that sum; never below it), the figure ``sim`` reads for a core.
    CPU ops overlap without limit when ``cpu_overlap_unlimited`` (the paper's convention);
    otherwise each CPU core runs its ops one at a time in a fixed topological order.

    Subgraphs: with ``placement.order`` given, an accelerator's subgraphs are its groups of equal
    ``order`` value, run in increasing order. With ``order`` None they are derived greedily: nodes
    are visited in topological order (smallest index first among ready nodes); a node joins the
    open subgraph of its device unless that would make the unit dependency graph cyclic (the
    subgraph can already reach one of the node's input units), in which case it opens the next
    subgraph of the device. Every derived subgraph is convex, the schedule never deadlocks, and a
    chain-of-ideals (contiguous) split gets exactly one subgraph per device. A given ``order``
    whose units depend on each other in a cycle (deadlock) raises ``FpgaplaceError``.

Complexity: loads, violations and contiguity are O(D (n + m)) for D devices; the latency is
O(n + m) with a given order and O(n (U + m)) when subgraphs are derived (U = number of units).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from fpgaplace.place.solvers.problem import Placement, PlacementProblem
from fpgaplace.util import graphs
from fpgaplace.util.errors import FpgaplaceError


@dataclass
class ScheduleEntry:
    """One unit of work: ``nodes`` (node indices) run on ``device`` from ``start`` to ``end``."""

    device: int
    nodes: list[int]
    start: float
    end: float


@dataclass
class Evaluation:
    """What a placement achieves; ``loads`` follows ``problem.devices()`` order."""

    max_load: float
    loads: list[float]
    latency: float
    schedule: list[ScheduleEntry] = field(default_factory=list)
    contiguous: bool = True
    violations: list[str] = field(default_factory=list)

    @property
    def feasible(self) -> bool:
        return not self.violations


def topological_order(n: int, edges: list[tuple[int, int]]) -> list[int]:
    """Smallest index first among ready nodes (deterministic); O((n+m) log n). A cycle is a
    ``FpgaplaceError``."""
    try:
        return graphs.topological_order(n, edges)
    except graphs.CycleError:
        raise FpgaplaceError("the graph has a cycle; expected a DAG") from None


def class_graph(problem: PlacementProblem) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Contiguity classes of the nodes and the class graph's edges (see the module docstring).

    Returns ``cls`` (int array, class index of each node, 0..C-1) and the distinct class edges
    (no self-loops). The class graph may have cycles when colour classes are contracted.
    """
    forward_colours = {int(c) for c, b in zip(problem.color, problem.backward, strict=True)
                       if c >= 0 and not b}
    keys: dict[tuple[str, int], int] = {}
    cls = np.empty(problem.n, dtype=np.int64)
    orphan = np.zeros(problem.n, dtype=bool)
    for v in range(problem.n):
        colour = int(problem.color[v])
        if colour >= 0 and (not problem.backward[v] or colour in forward_colours):
            key = ("colour", colour)
        elif problem.backward[v]:
            orphan[v] = True
            key = ("orphan colour", colour) if colour >= 0 else ("node", v)
        else:
            key = ("node", v)
        cls[v] = keys.setdefault(key, len(keys))
    class_edges: set[tuple[int, int]] = set()
    for u, v in problem.edges:
        if not problem.backward[u] and not problem.backward[v]:
            a, b = cls[u], cls[v]
        elif problem.backward[u] and problem.backward[v] and (orphan[u] or orphan[v]):
            a, b = cls[v], cls[u]
        else:
            continue
        if a != b:
            class_edges.add((int(a), int(b)))
    return cls, sorted(class_edges)


def is_convex(members: set[int], succ: list[list[int]]) -> bool:
    """True if no path leaves ``members`` and comes back (BFS outside the set, O(n+m))."""
    frontier = [w for u in members for w in succ[u] if w not in members]
    seen = set(frontier)
    while frontier:
        x = frontier.pop()
        for w in succ[x]:
            if w in members:
                return False
            if w not in seen:
                seen.add(w)
                frontier.append(w)
    return True


def device_loads(problem: PlacementProblem, device: np.ndarray) -> list[float]:
    """Per-device throughput load (module docstring); ``inf`` where a node is unsupported."""
    devices = problem.devices()
    compute = [0.0] * len(devices)
    for v in range(problem.n):
        kind = devices[device[v]][0]
        compute[device[v]] += float(problem.latency[v, kind])
    boundary: list[dict[int, set[int]]] = [{} for _ in devices]  # tensor -> devices on the other side
    for u, v in problem.edges:
        du, dv = int(device[u]), int(device[v])
        if du != dv:
            boundary[du].setdefault(u, set()).add(dv)
            boundary[dv].setdefault(u, set()).add(du)
    matrix = problem.link_matrix()
    loads = []
    for d, (kind, _) in enumerate(devices):
        transfer = 0.0
        if not problem.kinds[kind].is_cpu:
            transfer = float(sum(problem.charge(u, d, partners, matrix) for u, partners in boundary[d].items()))
        loads.append(compute[d] + transfer)
    return loads


def _violations(problem: PlacementProblem, device: np.ndarray) -> list[str]:
    devices = problem.devices()
    out: list[str] = []
    used = np.zeros(len(devices))
    for v in range(problem.n):
        kind = devices[device[v]][0]
        used[device[v]] += problem.size[v]
        if not np.isfinite(problem.latency[v, kind]):
            out.append(f"node {problem.ids[v]} ({problem.names[v]}) is not supported on "
                       f"{problem.device_name(int(device[v]))}")
    for d, (kind, _) in enumerate(devices):
        limit = problem.kinds[kind].memory
        if used[d] > limit * (1 + 1e-12):
            out.append(f"{problem.device_name(d)} holds {used[d]:.6g} bytes, "
                       f"more than its {limit:.6g}")
    colour_device: dict[int, int] = {}
    split: set[int] = set()
    for v in range(problem.n):
        colour = int(problem.color[v])
        if colour >= 0 and colour_device.setdefault(colour, int(device[v])) != device[v]:
            split.add(colour)
    for colour in sorted(split):
        out.append(f"colour class {colour} is split over several devices")
    return out


def is_contiguous(problem: PlacementProblem, device: np.ndarray) -> bool:
    """Whether every device's set of classes is convex in the class graph (module docstring).
    O(D (n + m))."""
    cls, class_edges = class_graph(problem)
    n_classes = int(cls.max()) + 1 if problem.n else 0
    succ: list[list[int]] = [[] for _ in range(n_classes)]
    for a, b in class_edges:
        succ[a].append(b)
    for d in np.unique(device):
        if not is_convex({int(c) for c in cls[device == d]}, succ):
            return False
    return True


@dataclass
class _Units:
    """Units of work, their device, members, and dependency edges (data + device order)."""

    device: list[int] = field(default_factory=list)
    members: list[list[int]] = field(default_factory=list)
    succ: list[set[int]] = field(default_factory=list)

    def new(self, device: int) -> int:
        self.device.append(device)
        self.members.append([])
        self.succ.append(set())
        return len(self.device) - 1

    def reaches(self, start: int, targets: set[int]) -> bool:
        stack, seen = [start], {start}
        while stack:
            x = stack.pop()
            if x in targets:
                return True
            for y in self.succ[x]:
                if y not in seen:
                    seen.add(y)
                    stack.append(y)
        return False


def _derive_units(problem: PlacementProblem, device: np.ndarray, topo: list[int],
                  cpu_unlimited: bool) -> tuple[_Units, np.ndarray]:
    devices = problem.devices()
    preds = problem.predecessors()
    units = _Units()
    unit_of = np.full(problem.n, -1, dtype=np.int64)
    open_unit: dict[int, int] = {}
    for v in topo:
        d = int(device[v])
        is_cpu = problem.kinds[devices[d][0]].is_cpu
        inputs = {int(unit_of[u]) for u in preds[v]}
        current = open_unit.get(d)
        if not is_cpu and current is not None and not units.reaches(current, inputs - {current}):
            unit = current
        else:
            unit = units.new(d)
            if current is not None and not (is_cpu and cpu_unlimited):
                units.succ[current].add(unit)
            open_unit[d] = unit
        units.members[unit].append(v)
        unit_of[v] = unit
        for x in inputs - {unit}:
            units.succ[x].add(unit)
    return units, unit_of


def _given_units(problem: PlacementProblem, device: np.ndarray, order: np.ndarray,
                 topo: list[int], cpu_unlimited: bool) -> tuple[_Units, np.ndarray]:
    devices = problem.devices()
    units = _Units()
    unit_of = np.full(problem.n, -1, dtype=np.int64)
    keyed: dict[tuple[int, float], int] = {}
    sequence: dict[int, list[tuple[float, int]]] = {}
    for position, v in enumerate(topo):
        d = int(device[v])
        if problem.kinds[devices[d][0]].is_cpu:
            key = (d, float(position))
        else:
            key = (d, float(order[v]))
        if key not in keyed:
            keyed[key] = units.new(d)
            sequence.setdefault(d, []).append((key[1], keyed[key]))
        unit_of[v] = keyed[key]
        units.members[keyed[key]].append(v)
    for d, seq in sequence.items():
        if problem.kinds[devices[d][0]].is_cpu and cpu_unlimited:
            continue
        seq.sort()
        for (_, a), (_, b) in zip(seq, seq[1:], strict=False):
            units.succ[a].add(b)
    for u, v in problem.edges:
        if unit_of[u] != unit_of[v]:
            units.succ[int(unit_of[u])].add(int(unit_of[v]))
    return units, unit_of


def _unit_order(problem: PlacementProblem, units: _Units) -> list[int]:
    edges = [(a, b) for a, succ in enumerate(units.succ) for b in succ]
    try:
        return topological_order(len(units.device), edges)
    except FpgaplaceError:
        raise FpgaplaceError(
            f"{problem.source or 'placement'}: the given subgraph order deadlocks: subgraphs "
            "wait on each other in a cycle (check placement.order)"
        ) from None


def unit_compute(problem: PlacementProblem, members: list[int], kind: int, preds: list[list[int]],
                 succ: list[list[int]]) -> float:
    """What a unit of ``members`` (in topological order) computes for on a device of ``kind``,
    transfers aside: the sum of their latencies on a CPU or without ``problem.fills``; on an
    accelerator with fills, the core's single-sample latency (``hw.kernel.dataflow_latency``,
    the definition ``sim`` reads): the members' stages, each paced at the unit's summed load
    (``hw.kernel.paced_fill``), overlapped from the unit's inputs (there at its start) to its
    last output (a member read outside the unit or by nobody), at least that load.
    O(members + their edges)."""
    load = float(sum(problem.latency[v, kind] for v in members))
    if problem.fills is None or problem.kinds[kind].is_cpu:
        return load
    from fpgaplace.hw.geometry import Fill  # the op library, only for a problem built from a graph
    from fpgaplace.hw.kernel import dataflow_latency, paced_fill

    inside = set(members)
    stages = []
    for v in members:
        planned = problem.fills[v][kind]
        fill = paced_fill(planned.fill, planned.serial, load) if planned is not None else Fill(
            reading=float(problem.latency[v, kind]), work=float(problem.latency[v, kind]))
        stages.append(([u for u in preds[v] if u in inside], v, fill))
    outputs = [v for v in members if not succ[v] or any(w not in inside for w in succ[v])]
    return dataflow_latency(stages, outputs, load)


def _schedule(problem: PlacementProblem, device: np.ndarray, units: _Units,
              unit_of: np.ndarray) -> list[ScheduleEntry]:
    devices = problem.devices()
    succ, preds = problem.successors(), problem.predecessors()
    ready_at = [0.0] * len(units.device)  # latest end among the units a unit waits on
    entries: dict[int, ScheduleEntry] = {}
    matrix = problem.link_matrix()
    for unit in _unit_order(problem, units):
        d = units.device[unit]
        kind = devices[d][0]
        members = units.members[unit]
        duration = unit_compute(problem, members, kind, preds, succ)
        if not problem.kinds[kind].is_cpu:
            moved: dict[int, set[int]] = {}  # tensor read or written across the unit -> devices beyond
            for v in members:
                for u in preds[v]:
                    if unit_of[u] != unit:
                        moved.setdefault(u, set()).add(units.device[unit_of[u]])
                for w in succ[v]:
                    if unit_of[w] != unit:
                        moved.setdefault(v, set()).add(units.device[unit_of[w]])
            duration += float(sum(problem.charge(u, d, partners, matrix) for u, partners in moved.items()))
        start = ready_at[unit]
        entries[unit] = ScheduleEntry(device=d, nodes=sorted(members), start=start,
                                      end=start + duration)
        for nxt in units.succ[unit]:
            ready_at[nxt] = max(ready_at[nxt], start + duration)
    return sorted(entries.values(), key=lambda e: (e.start, e.device, e.nodes))


def latency_schedule(problem: PlacementProblem, device: np.ndarray, order: np.ndarray | None,
                     cpu_overlap_unlimited: bool) -> list[ScheduleEntry]:
    """The single-sample schedule of a placement (module docstring); raises on deadlock."""
    topo = topological_order(problem.n, problem.edges)
    if order is None:
        units, unit_of = _derive_units(problem, device, topo, cpu_overlap_unlimited)
    else:
        units, unit_of = _given_units(problem, device, np.asarray(order), topo,
                                      cpu_overlap_unlimited)
    return _schedule(problem, device, units, unit_of)


def evaluate(problem: PlacementProblem, placement: Placement,
             cpu_overlap_unlimited: bool | None = None) -> Evaluation:
    """Max-load, latency, schedule, contiguity and violations of ``placement``.

    ``cpu_overlap_unlimited`` None means ``problem.cpu_overlap_unlimited``. A placement whose
    device array has the wrong length or an index outside ``problem.devices()`` is reported as a
    violation with infinite max-load and latency.
    """
    if cpu_overlap_unlimited is None:
        cpu_overlap_unlimited = problem.cpu_overlap_unlimited
    n_devices = len(problem.devices())
    device = np.asarray(placement.device)
    bad = _bad_devices(problem, device, n_devices)
    if placement.order is not None and np.shape(placement.order) != (problem.n,):
        bad.append(f"placement has {np.size(placement.order)} order entries, expected {problem.n}")
    if bad:
        return Evaluation(max_load=math.inf, loads=[math.inf] * n_devices, latency=math.inf,
                          contiguous=False, violations=bad)
    device = device.astype(np.int64)
    loads = device_loads(problem, device)
    schedule = latency_schedule(problem, device, placement.order, cpu_overlap_unlimited)
    return Evaluation(
        max_load=max(loads, default=0.0),
        loads=loads,
        latency=max((e.end for e in schedule), default=0.0),
        schedule=schedule,
        contiguous=is_contiguous(problem, device),
        violations=_violations(problem, device),
    )


def evaluation_of(problem: PlacementProblem, placement: Placement, *known: Placement) -> Evaluation:
    """``evaluate(problem, placement)``, or the evaluation this function stored on ``placement`` or
    on one of ``known`` when it was of the same problem object, device and order: an O(n)
    comparison instead of a second O(n (U + m)) evaluation (2.5 s at 200,000 ops). The result
    is stored on ``placement`` (with copies of its arrays, so a later change is noticed)."""
    for other in (placement, *known):
        if other.evaluated is not None:
            problem_then, device, order, result = other.evaluated
            if problem_then is problem and _same_array(device, placement.device) \
                    and _same_array(order, placement.order):
                placement.evaluated = other.evaluated
                return result
    result = evaluate(problem, placement)
    placement.evaluated = (problem, _copy(placement.device), _copy(placement.order), result)
    return result


def _same_array(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return bool(np.array_equal(a, b))


def _copy(values: np.ndarray | None) -> np.ndarray | None:
    return None if values is None else np.array(values, copy=True)


def _bad_devices(problem: PlacementProblem, device: np.ndarray, n_devices: int) -> list[str]:
    if device.shape != (problem.n,):
        return [f"placement has {device.size} device entries, expected {problem.n}"]
    if not np.issubdtype(device.dtype, np.integer):
        return [f"placement device array has dtype {device.dtype}, expected integers"]
    out = []
    for v in np.flatnonzero((device < 0) | (device >= n_devices))[:10]:
        out.append(f"node {problem.ids[v]} has device index {int(device[v])}, "
                   f"expected 0..{n_devices - 1}")
    return out
