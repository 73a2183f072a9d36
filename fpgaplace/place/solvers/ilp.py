"""Integer programs for placement on SCIP (pyscipopt): max-load and latency.

Both follow the integer programs of Tarnawski et al., "Efficient Algorithms for Device Placement
of DNN Graph Operators" (NeurIPS 2020, Sections 4-5 and Appendix), in our own formulation:

Shared reductions (before the model is built)
    * Colour classes are contracted into one *group* (the evaluator's contiguity classes), for
      max-load; the latency program keeps nodes apart and ties a colour class to one device.
    * A *zero node* (zero latency everywhere, zero size, zero transfer, no colour mates, forward)
      with a single predecessor joins that predecessor's group: moving it next to its only input
      never raises a load or a finish time and keeps every set convex (and a chain a chain). Likewise a source with
      zero latency whose only successor is a colour mate (a weight and its operator) joins that
      successor: it must share the device anyway, and sharing the subgraph saves its transfer.
      Neither is done for the latency program with finite CPU cores, where an op still waits
      for its core.
    * Transfer terms: nodes with the same group and the same set of successor groups share one
      indicator per device, with their costs summed.

Max-load (throughput), non-contiguous: binary x[g,d] (group g on device d); every group on
    one allowed device; memory per accelerator; t[tau,d] >= |x[g(tau),d] - x[h,d]| for each
    successor group h, so a transfer term is paid once per device it crosses; L >= load of each
    device; minimise L. Symmetry of identical devices is broken by ordering them by their
    smallest group index (prefix sums P[g,d]; x[g,d_j] <= P[g-1,d_{j-1}]).

Max-load, contiguous: the DP's search space exactly, a chain of ideals {} < I_0 < ... of the
    group graph, one device per difference (a split whose quotient graph is acyclic). Chain
    positions j = 0..P-1 (P = number of devices); binary k[j,t] = "position j runs on a device
    of kind t" (at most one kind per position, at most count_t positions per kind, unused
    positions last); binary x[g,j,t] <= k[j,t] = "group g is the set of position j, on kind t",
    each group in exactly one; y[g,j] = sum_{i<=j,t} x[g,i,t] (g lies in the ideal I_j) with
    y[a,j] >= y[b,j] on every group edge a->b (each I_j is closed under predecessors); a position
    with a kind is non-empty; memory sum size * x[.,j,t] <= M_t k[j,t]; transfer indicators
    t[tau,j] >= A[g,j] - S[h,j] and >= A[h,j] - S[g,j] (A: on position j on an accelerator kind,
    S: on position j at all). Devices are identified by chain position, so identical devices need
    no symmetry breaking (sets that do not depend on each other may still swap positions);
    position j with kind t becomes the next unused device of kind t.
    (A formulation that only asks each set to be convex also admits rings of sets that depend
    on each other, A -> B -> C -> A, which no chain contains and which can beat the DP.)
    Valid bounds for both: L >= total minimal work / devices, L >= largest minimal group
    latency, L >= ``bounds.memory_load_bound``; L <= the warm start's value when the start lies in the searched space.

Latency: each accelerator holds q slots (subgraphs) run in a fixed order; x[g,s] for slots and
    CPU machines, each slot convex; S_s, F_s start/finish of slot s; E[g] time g's output exists.
    F_s = S_s + work + transfers (in/out indicators per transfer term); S_s >= E[u] when u is an
    input of s (big-M on the in-indicator); E[g] >= F_s if g is in s; a CPU op ends p(g) after
    its inputs exist (and, with finite cores, after every earlier op of its core in the
    evaluator's fixed topological order: a core clock C[m,i] per position i); slots of one
    device run in order; empty slots come last. Minimise T >= E[g]. Big-M = an upper bound on
    the optimum (the best warm start, else the sum of all work and moves).

Warm starts: a heuristic start usually splits a group (zero nodes on another device than their
    input), so each start is first projected onto the groups: a group follows its root's device
    (and, for latency, its root's subgraph). This never raises a load or a finish time; the
    evaluator scores the projection anyway. Every projected start is given to SCIP, the best
    sets the cutoff, and it is returned when SCIP ends with nothing better.

Sizes: non-contiguous max-load has G*D binaries and O(T*D) transfer columns, O((m+T)*D) rows
(G groups, D devices, T transfer terms, m edges); contiguous max-load G*D*K binaries (K device
kinds), G*D ideal and T*D transfer columns, O((m+T)*D + G*D*K) rows; latency multiplies D by
q and adds O(G + n*l) time columns. Solving is NP-hard in general; SCIP branch-and-bound with a time and gap limit.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from fpgaplace.place.solvers.baselines import check_feasible, greedy_latency, pipedream
from fpgaplace.place.solvers.bounds import finish_lower_bounds, memory_load_bound, static_tails
from fpgaplace.place.solvers.evaluate import class_graph, evaluate, topological_order
from fpgaplace.place.solvers.problem import Placement, PlacementProblem
from fpgaplace.util.errors import FpgaplaceError

if TYPE_CHECKING:
    from pyscipopt import Model

Progress = Callable[[str], Any] | Any

DEFAULT_GAP = 0.01  # the entry point's relative gap (the paper's Gurobi runs stop at 1 %); functions here are exact
PROGRESS_SECONDS = 2.0  # most seconds between two reports of a running solve
STATUS_NAMES = {"optimal": "optimal", "timelimit": "time limit", "gaplimit": "gap limit"}


# --------------------------------------------------------------------------- contraction


@dataclass
class Groups:
    """Nodes contracted into groups that always share a device (and, here, a subgraph)."""

    of: np.ndarray  # node -> group
    members: list[list[int]]
    latency: np.ndarray  # (G, K) summed latency, inf if some member cannot run on the kind
    size: np.ndarray  # (G,)
    edges: list[tuple[int, int]]  # contiguity edges between distinct groups
    terms: list[tuple[float, int, tuple[int, ...]]] = field(default_factory=list)
    # (summed transfer cost, source group, successor groups): one indicator per device
    roots: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # group -> its root: the smallest member not merged in as a zero node or a weight source

    @property
    def count(self) -> int:
        return len(self.members)


class _UnionFind:
    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, a: int) -> int:
        while self.parent[a] != a:
            self.parent[a] = self.parent[self.parent[a]]
            a = self.parent[a]
        return a

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _zero_nodes(problem: PlacementProblem) -> np.ndarray:
    """Forward nodes without colour mates that cost nothing anywhere (see module docstring)."""
    colour_count: dict[int, int] = {}
    for c in problem.color:
        if c >= 0:
            colour_count[int(c)] = colour_count.get(int(c), 0) + 1
    zero = (
        np.all(problem.latency == 0, axis=1)
        & (problem.size == 0)
        & (problem.transfer == 0)
        & ~problem.backward
    )
    for v in np.flatnonzero(zero):
        if problem.color[v] >= 0 and colour_count[int(problem.color[v])] > 1:
            zero[v] = False
    return zero


def contract(problem: PlacementProblem, colours: bool = True, zero_nodes: bool = True) -> Groups:
    """Contract colour classes (optional) and zero nodes into groups. O((n + m) log n)."""
    union = _UnionFind(problem.n)
    merged_in = np.zeros(problem.n, dtype=bool)  # joined a neighbour's group (not a root)
    if colours:
        first: dict[int, int] = {}
        for v in range(problem.n):
            c = int(problem.color[v])
            if c >= 0:
                union.union(first.setdefault(c, v), v)
    if zero_nodes:
        preds, succ = problem.predecessors(), problem.successors()
        zero = _zero_nodes(problem)
        free = np.all(problem.latency == 0, axis=1)
        for v in topological_order(problem.n, problem.edges):
            if zero[v] and len(set(preds[v])) == 1:
                u = preds[v][0]
                if not problem.backward[u]:
                    union.union(u, v)
                    merged_in[v] = True
            elif free[v] and not preds[v] and len(set(succ[v])) == 1:
                w = succ[v][0]  # a free source (a weight) feeding only its colour mate
                if problem.color[v] >= 0 and problem.color[v] == problem.color[w]:
                    union.union(v, w)
                    merged_in[v] = True
    roots = sorted({union.find(v) for v in range(problem.n)})
    index = {r: g for g, r in enumerate(roots)}
    of = np.array([index[union.find(v)] for v in range(problem.n)], dtype=np.int64)
    members: list[list[int]] = [[] for _ in roots]
    for v in range(problem.n):
        members[of[v]].append(v)
    latency = np.array([problem.latency[m].sum(axis=0) for m in members]).reshape(
        len(members), len(problem.kinds)
    )
    size = np.array([problem.size[m].sum() for m in members])
    if colours:
        cls, class_edges = class_graph(problem)
        # every class lies inside one group (classes are colour classes or single nodes)
        class_group = np.zeros(int(cls.max()) + 1, dtype=np.int64)
        class_group[cls] = of
        pairs = {(int(class_group[a]), int(class_group[b])) for a, b in class_edges}
    else:
        pairs = {(int(of[u]), int(of[v])) for u, v in problem.edges}
    edges = sorted((a, b) for a, b in pairs if a != b)
    succ = problem.successors()
    costs: dict[tuple[int, tuple[int, ...]], float] = {}
    for u in range(problem.n):
        others = tuple(sorted({int(of[v]) for v in succ[u]} - {int(of[u])}))
        if others:
            key = (int(of[u]), others)
            costs[key] = costs.get(key, 0.0) + float(problem.transfer[u])
    terms = [(cost, g, others) for (g, others), cost in sorted(costs.items())]
    # a zero node joins an earlier node (its input), a weight its operator (never merged in
    # itself): following those links from any member ends at a member that was not merged in
    roots = np.array([next(v for v in m if not merged_in[v]) for m in members], dtype=np.int64)
    return Groups(of=of, members=members, latency=latency, size=size, edges=edges, terms=terms,
                  roots=roots)


def project_onto_groups(groups: Groups, device: np.ndarray) -> np.ndarray:
    """Device of each group for a placement that may split groups: a group follows its root.

    Moving a zero node next to its only input (or a weight next to its operator, which shares
    its device anyway) adds no work, memory or transfer to the input's subgraph and removes at
    most a read from the node's old one, so a start's load and latency never rise (the callers
    check this with the evaluator). O(G).
    """
    return np.asarray(device, dtype=np.int64)[groups.roots]


@dataclass
class ProjectedStart:
    """A start placement carried onto the program's groups (``project_onto_groups``).

    ``device_of_group`` (CPU cores folded to their kind's first core when CPUs overlap without
    limit) and ``slot`` (subgraph position on an accelerator) are what the program sees;
    ``placement`` is the projected start as the evaluator scores it, ``value`` that score and
    ``original`` the score of the start as given.
    """

    device_of_group: np.ndarray
    slot: np.ndarray
    placement: Placement
    value: float
    original: float
    method: str = ""


# --------------------------------------------------------------------------- SCIP plumbing


def _emit(progress: Progress | None, message: str) -> None:
    if progress is None:
        return
    console = getattr(progress, "console", None)
    if console is not None:
        console.log(message)
    elif callable(progress):
        progress(message)


def quicksum(terms: Any) -> Any:
    """pyscipopt's ``quicksum``; pyscipopt (SCIP) is imported when a first model is built, so
    importing this module (and every solve that needs no program) stays fast."""
    from pyscipopt import quicksum as scip_quicksum

    return scip_quicksum(terms)


@cache
def _progress_events_class() -> type:
    """The SCIP event handler class (defined on first use, see ``quicksum``)."""
    from pyscipopt import SCIP_EVENTTYPE, Eventhdlr

    class _ProgressEvents(Eventhdlr):
        """Reports incumbent, bound and gap on every new incumbent and at most every
        ``PROGRESS_SECONDS`` on node and LP events; numbers also go to ``progress.update`` when the
        callback has one (``progress.Heartbeat``, which fills the silences of a long LP)."""

        EVENTS = ("BESTSOLFOUND", "NODESOLVED", "LPSOLVED", "DUALBOUNDIMPROVED")

        def __init__(self, progress: Progress, label: str) -> None:
            super().__init__()
            self.progress, self.label, self.last = progress, label, 0.0

        def eventinit(self) -> None:
            for name in self.EVENTS:
                self.model.catchEvent(getattr(SCIP_EVENTTYPE, name), self)

        def eventexit(self) -> None:
            for name in self.EVENTS:
                self.model.dropEvent(getattr(SCIP_EVENTTYPE, name), self)

        def eventexec(self, event: Any) -> None:
            m = self.model
            primal, dual = m.getPrimalbound(), m.getDualbound()
            update = getattr(self.progress, "update", None)
            if update is not None:
                update(method=self.label, incumbent=primal if abs(primal) < 1e19 else None,
                       bound=dual if abs(dual) < 1e19 else None)
            now = time.perf_counter()
            if event.getType() != SCIP_EVENTTYPE.BESTSOLFOUND and now - self.last < PROGRESS_SECONDS:
                return
            self.last = now
            finite = abs(primal) < 1e19 and abs(dual) < 1e19
            gap = max(0.0, (primal - dual) / abs(primal)) if finite and primal != 0 else 0.0  # Placement.gap's
            _emit(self.progress, f"{self.label}: {m.getSolvingTime():.1f} s, incumbent {primal:.6g}, "
                                 f"bound {dual:.6g}, gap {100 * gap:.2f} %" if finite else
                                 f"{self.label}: {m.getSolvingTime():.1f} s, incumbent {primal:.6g}, bound {dual:.6g}")

    return _ProgressEvents


def _new_model(name: str, time_limit: float, gap: float, progress: Progress | None) -> Model:
    from pyscipopt import SCIP_PARAMSETTING, Model

    model = Model(name)
    model.hideOutput()
    model.setParam("limits/time", max(0.01, float(time_limit)))
    model.setParam("limits/gap", max(0.0, float(gap)))
    model.setParam("randomization/randomseedshift", 0)
    model.setHeuristics(SCIP_PARAMSETTING.AGGRESSIVE)  # closer to the paper's Gurobi run
    if progress is not None:
        model.includeEventhdlr(_progress_events_class()(progress, name), name + "-progress",
                               "reports primal and dual bounds")
    return model


def model_size(model: Model) -> dict[str, int]:
    """Columns and rows of a built model (before presolve)."""
    return {"vars": model.getNVars(), "conss": model.getNConss()}


def _status(model: Model) -> str:
    raw = model.getStatus()
    return STATUS_NAMES.get(raw, raw)


def _device_kind(problem: PlacementProblem) -> list[int]:
    return [k for k, _ in problem.devices()]


def _identical_runs(problem: PlacementProblem, devices: list[int]) -> list[list[int]]:
    """The given device indices grouped by kind (identical devices), runs of two or more."""
    kind = _device_kind(problem)
    runs: dict[int, list[int]] = {}
    for d in devices:
        runs.setdefault(kind[d], []).append(d)
    return [run for run in runs.values() if len(run) > 1]


def _order_by_smallest_group(
    model: Model, membership: dict[tuple[int, int], Any], groups: int, runs: list[list[int]]
) -> None:
    """x[g, d_j] <= sum_{g' < g} x[g', d_{j-1}] for identical devices d_0, d_1, ... (linear
    size through prefix sums): non-empty devices sorted by their smallest group, empty last."""
    for run in runs:
        for previous, current in zip(run, run[1:], strict=False):
            prefix: Any = 0.0
            for g in range(groups):
                here = membership.get((g, current))
                if here is not None:
                    model.addCons(here <= prefix, name=f"sym_{g}_{current}")
                before = membership.get((g, previous))
                if before is not None:
                    p = model.addVar(f"P_{g}_{previous}", lb=0.0, ub=None)
                    model.addCons(p == prefix + before)
                    prefix = p


def _canonical_devices(problem: PlacementProblem, groups: Groups, device_of_group: np.ndarray,
                       devices: list[int]) -> np.ndarray:
    """Relabel identical devices so the non-empty ones are sorted by smallest group."""
    out = device_of_group.copy()
    for ds in _identical_runs(problem, devices):
        smallest = {d: (np.flatnonzero(device_of_group == d).min()
                        if (device_of_group == d).any() else groups.count + d) for d in ds}
        for new, old in zip(ds, sorted(ds, key=smallest.get), strict=True):
            out[device_of_group == old] = new
    return out


def _group_devices(groups: Groups, device: np.ndarray) -> np.ndarray | None:
    """The device of each group, or None if some group's members disagree."""
    out = np.full(groups.count, -1, dtype=np.int64)
    for g, members in enumerate(groups.members):
        ds = set(device[members].tolist())
        if len(ds) != 1:
            return None
        out[g] = ds.pop()
    return out


def _bounds_message(model: Model) -> str:
    return (f"primal {model.getPrimalbound():.6g}, dual {model.getDualbound():.6g}, "
            f"status {model.getStatus()}")


# --------------------------------------------------------------------------- max-load


@dataclass
class _FreeModel:
    """Non-contiguous max-load program: x[g, d] = group g on device d."""

    model: Model
    x: dict[tuple[int, int], Any]
    t: dict[tuple[int, int], Any]
    load: Any
    devices: list[int]


@dataclass
class _ChainModel:
    """Contiguous max-load program over chains of ideals (module docstring).

    ``x[g, j, t]``: group g is the set at chain position j, which runs on a device of kind t;
    ``kind_at[j, t]``: position j uses kind t; ``ideal[g, j]``: g lies in the ideal I_j
    (positions 0..P-2; I_(P-1) is everything); ``t[term, j]``: the term crosses position j.
    """

    model: Model
    x: dict[tuple[int, int, int], Any]
    kind_at: dict[tuple[int, int], Any]
    ideal: dict[tuple[int, int], Any]
    t: dict[tuple[int, int], Any]
    load: Any
    positions: int
    kinds: list[int]


def _lower_bound(problem: PlacementProblem, groups: Groups) -> float:
    usable = [k for k, kind in enumerate(problem.kinds) if kind.count > 0]
    cheapest = np.min(groups.latency[:, usable], axis=1)
    devices = sum(problem.kinds[k].count for k in usable)
    return max(float(cheapest.sum()) / max(devices, 1), float(cheapest.max(initial=0.0)))


def _allowed(problem: PlacementProblem, groups: Groups, g: int, kind: int) -> bool:
    if not math.isfinite(groups.latency[g, kind]):
        return False
    return problem.kinds[kind].is_cpu or groups.size[g] <= problem.kinds[kind].memory


def _load_variable(problem: PlacementProblem, groups: Groups, model: Model, upper: float) -> Any:
    floor = max(_lower_bound(problem, groups), memory_load_bound(problem))
    return model.addVar("maxload", lb=min(floor, upper),
                        ub=upper if math.isfinite(upper) else None)


def _build_free_throughput(problem: PlacementProblem, groups: Groups, model: Model,
                           upper: float) -> _FreeModel:
    kinds = _device_kind(problem)
    devices = list(range(len(problem.devices())))
    x: dict[tuple[int, int], Any] = {}
    for g in range(groups.count):
        for d in devices:
            if _allowed(problem, groups, g, kinds[d]):
                x[g, d] = model.addVar(f"x_{g}_{d}", vtype="B")
        model.addCons(quicksum(x[g, d] for d in devices if (g, d) in x) == 1, name=f"one_{g}")
    load = _load_variable(problem, groups, model, upper)
    t: dict[tuple[int, int], Any] = {}
    for d in devices:
        kind = problem.kinds[kinds[d]]
        on_d = [g for g in range(groups.count) if (g, d) in x]
        if not kind.is_cpu and groups.size[on_d].sum() > kind.memory:
            model.addCons(quicksum(groups.size[g] * x[g, d] for g in on_d) <= kind.memory,
                          name=f"mem_{d}")
        work = quicksum(groups.latency[g, kinds[d]] * x[g, d] for g in on_d)
        moves: Any = 0.0
        if not kind.is_cpu:
            moves = quicksum(cost * _transfer_indicator(model, x, t, i, g, others, d)
                             for i, (cost, g, others) in enumerate(groups.terms) if cost > 0)
        model.addCons(load >= work + moves, name=f"load_{d}")
    _order_by_smallest_group(model, x, groups.count, _identical_runs(problem, devices))
    model.setObjective(load, "minimize")
    return _FreeModel(model=model, x=x, t=t, load=load, devices=devices)


def _transfer_indicator(model: Model, x: dict, t: dict, term: int, g: int,
                        others: tuple[int, ...], d: int) -> Any:
    """t >= |x[g,d] - x[h,d]| for each successor group h (missing x = 0)."""
    own = x.get((g, d), 0.0)
    theirs = [x[h, d] for h in others if (h, d) in x]
    if isinstance(own, float) and not theirs:
        return 0.0
    var = model.addVar(f"t_{term}_{d}", lb=0.0, ub=1.0)
    t[term, d] = var
    for h in others:
        other = x.get((h, d), 0.0)
        if isinstance(own, float) and isinstance(other, float):
            continue
        model.addCons(var >= own - other)
        model.addCons(var >= other - own)
    return var


def _build_chain_throughput(problem: PlacementProblem, groups: Groups, model: Model,
                            upper: float) -> _ChainModel:
    """The chain-of-ideals program (module docstring, "Max-load, contiguous")."""
    kinds = [k for k, kind in enumerate(problem.kinds) if kind.count > 0]
    accelerators = [k for k in kinds if not problem.kinds[k].is_cpu]
    positions = sum(problem.kinds[k].count for k in kinds)
    span = range(positions)
    kind_at = {(j, k): model.addVar(f"k_{j}_{k}", vtype="B") for j in span for k in kinds}
    for j in span:
        model.addCons(quicksum(kind_at[j, k] for k in kinds) <= 1, name=f"kind_{j}")
        if j > 0:  # unused positions come last
            model.addCons(quicksum(kind_at[j, k] for k in kinds)
                          <= quicksum(kind_at[j - 1, k] for k in kinds), name=f"used_{j}")
    for k in kinds:
        model.addCons(quicksum(kind_at[j, k] for j in span) <= problem.kinds[k].count,
                      name=f"count_{k}")
    x: dict[tuple[int, int, int], Any] = {}
    for g in range(groups.count):
        for k in kinds:
            if _allowed(problem, groups, g, k):
                for j in span:
                    x[g, j, k] = model.addVar(f"x_{g}_{j}_{k}", vtype="B")
                    model.addCons(x[g, j, k] <= kind_at[j, k])
        model.addCons(quicksum(x[g, j, k] for j in span for k in kinds if (g, j, k) in x) == 1,
                      name=f"one_{g}")

    def member(g: int, j: int, of_kinds: list[int]) -> Any:
        return quicksum(x[g, j, k] for k in of_kinds if (g, j, k) in x)

    for j in span:
        for k in kinds:
            here = [g for g in range(groups.count) if (g, j, k) in x]
            # a position given a kind holds something: no empty devices inside the chain
            model.addCons(quicksum(x[g, j, k] for g in here) >= kind_at[j, k])
            memory = problem.kinds[k].memory
            if not problem.kinds[k].is_cpu and groups.size[here].sum() > memory:
                model.addCons(quicksum(groups.size[g] * x[g, j, k] for g in here)
                              <= memory * kind_at[j, k], name=f"mem_{j}_{k}")
    ideal: dict[tuple[int, int], Any] = {}
    for g in range(groups.count):
        for j in range(positions - 1):
            ideal[g, j] = model.addVar(f"y_{g}_{j}", lb=0.0, ub=1.0)
            before = ideal[g, j - 1] if j > 0 else 0.0
            model.addCons(ideal[g, j] == before + member(g, j, kinds))
    for a, b in groups.edges:  # every I_j is closed under predecessors
        for j in range(positions - 1):
            model.addCons(ideal[a, j] >= ideal[b, j])
    load = _load_variable(problem, groups, model, upper)
    t: dict[tuple[int, int], Any] = {}
    for j in span:
        work = quicksum(groups.latency[g, k] * x[g, j, k] for g in range(groups.count)
                        for k in kinds if (g, j, k) in x)
        moves: Any = 0.0
        if accelerators:
            for i, (cost, g, others) in enumerate(groups.terms):
                if cost > 0:
                    moves += cost * _chain_transfer(model, t, i, j, g, others, member,
                                                    accelerators, kinds)
        model.addCons(load >= work + moves, name=f"load_{j}")
    model.setObjective(load, "minimize")
    return _ChainModel(model=model, x=x, kind_at=kind_at, ideal=ideal, t=t, load=load,
                       positions=positions, kinds=kinds)


def _chain_transfer(model: Model, t: dict, term: int, j: int, g: int, others: tuple[int, ...],
                    member: Callable[[int, int, list[int]], Any], accelerators: list[int],
                    kinds: list[int]) -> Any:
    """t >= [one end on an accelerator at j] - [the other end at j], both ways, for each h."""
    var = model.addVar(f"t_{term}_{j}", lb=0.0, ub=1.0)
    t[term, j] = var
    for h in others:
        model.addCons(var >= member(g, j, accelerators) - member(h, j, kinds))
        model.addCons(var >= member(h, j, accelerators) - member(g, j, kinds))
    return var


def _add_contiguity(model: Model, groups: Groups, x: dict, z: dict, key: Any, label: str) -> None:
    """Convexity of the set {g : x[g,key] = 1} on the group graph (module docstring)."""
    for g in range(groups.count):
        z[g, key] = model.addVar(f"z_{g}_{label}", lb=0.0, ub=1.0)
        if (g, key) in x:
            model.addCons(z[g, key] >= x[g, key])
    for a, b in groups.edges:
        model.addCons(z[b, key] <= z[a, key])
        xa, xb = x.get((a, key)), x.get((b, key))
        if xa is not None:
            model.addCons(z[b, key] <= 1 + (xb if xb is not None else 0.0) - xa)


def _downsets(groups: Groups, chosen: np.ndarray) -> np.ndarray:
    """For the warm start: z = 1 on every group that reaches a chosen group (ancestors)."""
    preds: list[list[int]] = [[] for _ in range(groups.count)]
    for a, b in groups.edges:
        preds[b].append(a)
    out = chosen.copy()
    stack = list(np.flatnonzero(chosen))
    while stack:
        g = stack.pop()
        for a in preds[g]:
            if not out[a]:
                out[a] = True
                stack.append(a)
    return out


def chain_order(groups: Groups, device_of_group: np.ndarray) -> list[int] | None:
    """The used devices in an order where every group edge goes forward, or None (a ring).

    A split is a chain of ideals exactly when its quotient graph is acyclic. O(G + m log G).
    """
    used = sorted({int(d) for d in device_of_group})
    index = {d: i for i, d in enumerate(used)}
    edges = sorted({(index[int(device_of_group[a])], index[int(device_of_group[b])])
                    for a, b in groups.edges if device_of_group[a] != device_of_group[b]})
    try:
        return [used[i] for i in topological_order(len(used), edges)]
    except FpgaplaceError:
        return None


def _devices_of_positions(problem: PlacementProblem, kind_of_position: list[int]) -> list[int]:
    """Position j with kind t gets the next unused device of kind t (``problem.devices()``)."""
    taken: dict[int, int] = {}
    first = {k: next(d for d, (kd, _) in enumerate(problem.devices()) if kd == k)
             for k in set(kind_of_position)}
    out = []
    for k in kind_of_position:
        out.append(first[k] + taken.get(k, 0))
        taken[k] = taken.get(k, 0) + 1
    return out


def _set_prefix_counts(model: Model, sol: Any, device_of_group: np.ndarray) -> None:
    """Symmetry-breaking prefix sums P_g_d = number of groups 0..g on device d. O(vars + G D)."""
    prefix: dict[int, np.ndarray] = {}
    for var in model.getVars():
        if var.name.startswith("P_"):
            _, g, d = var.name.split("_")
            counts = prefix.setdefault(int(d), np.cumsum(device_of_group == int(d)))
            model.setSolVal(sol, var, float(counts[int(g)]))


def _warm_start_chain(problem: PlacementProblem, groups: Groups, built: _ChainModel,
                      device_of_group: np.ndarray, progress: Progress | None) -> bool:
    """Give SCIP a chain split: its devices in chain order become positions 0, 1, ..."""
    order = chain_order(groups, device_of_group)
    assert order is not None  # the caller checked
    kinds = _device_kind(problem)
    position_of = np.array([order.index(int(d)) for d in device_of_group])
    kind_of = np.array([kinds[int(d)] for d in device_of_group])
    model = built.model
    sol = model.createSol()
    for (g, j, k), var in built.x.items():
        model.setSolVal(sol, var, float(position_of[g] == j and kind_of[g] == k))
    for (j, k), var in built.kind_at.items():
        model.setSolVal(sol, var, float(j < len(order) and kinds[order[j]] == k))
    for (g, j), var in built.ideal.items():
        model.setSolVal(sol, var, float(position_of[g] <= j))
    accelerator = np.array([not problem.kinds[k].is_cpu for k in kind_of])
    for (term, j), var in built.t.items():
        _, g, others = groups.terms[term]
        ends = [g, *others]
        crossing = any(position_of[a] == j and accelerator[a] and position_of[b] != j
                       for a in ends for b in ends)
        model.setSolVal(sol, var, float(crossing))
    device = np.array(_devices_of_positions(problem, [kinds[d] for d in order]))[position_of]
    value = max(evaluate(problem, Placement(device=device[groups.of])).loads)
    model.setSolVal(sol, built.load, value)
    accepted = model.addSol(sol, free=True)
    _emit(progress, f"warm start {'stored' if accepted else 'not stored'}: {value:.6g}")
    return bool(accepted)


def _warm_start_free(problem: PlacementProblem, groups: Groups, built: _FreeModel,
                     device_of_group: np.ndarray, progress: Progress | None) -> bool:
    device_of_group = _canonical_devices(problem, groups, device_of_group, built.devices)
    model = built.model
    sol = model.createSol()
    for (g, d), var in built.x.items():
        model.setSolVal(sol, var, float(device_of_group[g] == d))
    for (term, d), var in built.t.items():
        _, g, others = groups.terms[term]
        crossing = any((device_of_group[g] == d) != (device_of_group[h] == d) for h in others)
        model.setSolVal(sol, var, float(crossing))
    _set_prefix_counts(model, sol, device_of_group)
    loads = evaluate(problem, Placement(device=device_of_group[groups.of])).loads
    model.setSolVal(sol, built.load, max(loads))
    accepted = model.addSol(sol, free=True)
    _emit(progress, f"warm start {'stored' if accepted else 'not stored'}: {max(loads):.6g}")
    return bool(accepted)


def _chain_solution(problem: PlacementProblem, groups: Groups, built: _ChainModel,
                    model: Model) -> np.ndarray:
    """Device of each group in SCIP's best chain solution."""
    best = model.getBestSol()
    position = np.full(groups.count, -1, dtype=np.int64)
    kind_of_position: dict[int, int] = {}
    for (g, j, k), var in built.x.items():
        if model.getSolVal(best, var) > 0.5:
            position[g] = j
            kind_of_position[j] = k
    used = sorted(kind_of_position)
    devices = _devices_of_positions(problem, [kind_of_position[j] for j in used])
    device_of_position = dict(zip(used, devices, strict=True))
    return np.array([device_of_position[int(j)] for j in position], dtype=np.int64)


def _free_solution(groups: Groups, built: _FreeModel, model: Model) -> np.ndarray:
    best = model.getBestSol()
    device_of_group = np.full(groups.count, -1, dtype=np.int64)
    for (g, d), var in built.x.items():
        if model.getSolVal(best, var) > 0.5:
            device_of_group[g] = d
    return device_of_group


def _default_throughput_start(problem: PlacementProblem) -> Placement | None:
    """A contiguous start from PipeDream's linearized DP, or None if it finds nothing."""
    try:
        candidate = pipedream(problem, "throughput")
    except FpgaplaceError:
        return None
    return candidate if math.isfinite(candidate.value) else None


def _max_load_or_inf(problem: PlacementProblem, placement: Placement, contiguous: bool) -> float:
    result = evaluate(problem, placement)
    if not result.feasible or (contiguous and not result.contiguous):
        return math.inf
    return float(result.max_load)


def project_throughput_start(problem: PlacementProblem, groups: Groups, start: Placement,
                             contiguous: bool) -> ProjectedStart | None:
    """``start`` on the max-load program's groups (each follows its root's device), or None if
    it is infeasible (or, when ``contiguous``, not a chain of ideals). O(D (n + m))."""
    original = _max_load_or_inf(problem, start, contiguous)
    if not math.isfinite(original):
        return None
    device_of_group = project_onto_groups(groups, start.device)
    if contiguous and chain_order(groups, device_of_group) is None:
        return None
    placement = Placement(device=device_of_group[groups.of], method=start.method,
                          objective="throughput", contiguous=contiguous)
    value = _max_load_or_inf(problem, placement, contiguous)
    if not math.isfinite(value):
        return None
    placement.value = value
    return ProjectedStart(device_of_group=device_of_group,
                          slot=np.zeros(groups.count, dtype=np.int64), placement=placement,
                          value=value, original=original, method=start.method)


def solve_throughput_ip(
    problem: PlacementProblem,
    contiguous: bool = True,
    time_limit: float = 60,
    gap: float = 1e-6,
    start: Placement | None = None,
    progress: Progress | None = None,
    starts: Sequence[Placement] = (),
) -> Placement:
    """Minimise the max-load (time per sample of a pipeline) with SCIP.

    ``contiguous`` searches chains of ideals, the DP's space (module docstring); otherwise any
    split. Returns the best placement found with ``value`` its evaluated max-load, ``bound``
    SCIP's dual bound, ``status`` "optimal" | "time limit" | "gap limit" | "start kept (...): ...".
    ``start`` and ``starts`` (e.g. the DP's answer; default PipeDream's split) are projected
    onto the groups (``project_throughput_start``) and all given to SCIP; the best caps the
    objective and is returned when SCIP ends with nothing better. Raises FpgaplaceError if no
    placement exists.
    """
    started = time.perf_counter()
    check_feasible(problem)
    groups = contract(problem, colours=True, zero_nodes=True)
    candidates = [start, *starts] if start is not None or starts else [_default_throughput_start(problem)]
    projected = _projected_starts(
        candidates, lambda c: project_throughput_start(problem, groups, c, contiguous), progress)
    upper = projected[0].value * (1 + 1e-9) + 1e-12 if projected else math.inf
    label = "max-load IP" + (" (contiguous)" if contiguous else "")
    model = _new_model(label, time_limit - (time.perf_counter() - started), gap, progress)
    built: _ChainModel | _FreeModel
    if contiguous:
        built = _build_chain_throughput(problem, groups, model, upper)
    else:
        built = _build_free_throughput(problem, groups, model, upper)
    size = model_size(model)
    _emit(progress, f"{label}: {groups.count} groups of {problem.n} nodes, "
                    f"{size['vars']} vars, {size['conss']} conss")
    warm = _warm_start_chain if contiguous else _warm_start_free
    _warm_starts(projected, lambda s: warm(problem, groups, built, s.device_of_group, progress),
                 upper, progress, label)
    model.setParam("limits/time", max(0.01, time_limit - (time.perf_counter() - started)))
    model.optimizeNogil()  # lets a progress thread run during long LPs
    if model.getNSols() == 0 and (not projected or model.getStatus() == "infeasible"):
        if model.getStatus() == "infeasible":
            raise FpgaplaceError(
                f"{problem.source or 'problem'}: no "
                f"{'contiguous ' if contiguous else ''}placement fits the devices' memory"
            )
        raise FpgaplaceError(
            f"{problem.source or 'problem'}: the max-load IP found no placement within "
            f"{time_limit:g} s ({_bounds_message(model)}); give a start placement or more time"
        )
    bound = max(float(model.getDualbound()), built.load.getLbOriginal())
    if model.getNSols() == 0:  # stopped before SCIP took in the warm start: return the start
        placement = _kept_start(projected[0], bound, _status(model))
    else:
        if isinstance(built, _ChainModel):
            device = _chain_solution(problem, groups, built, model)[groups.of]
        else:
            device = _free_solution(groups, built, model)[groups.of]
        placement = Placement(device=device, method="ip", objective="throughput",
                              contiguous=contiguous)
        placement.value = float(evaluate(problem, placement).max_load)
        placement.bound = bound
        placement.status = _status(model)
        if projected and placement.value > projected[0].value * (1 + 1e-9) + 1e-12:
            placement = _kept_start(projected[0], bound,
                                    f"IP ended at {placement.value:.6g} ({placement.status})")
    placement.seconds = time.perf_counter() - started
    _emit(progress, f"{label}: value {placement.value:.6g}, bound {placement.bound:.6g}, "
                    f"{placement.status}, {placement.seconds:.1f} s")
    return placement


# --------------------------------------------------------------------------- latency


@dataclass
class _LatencyModel:
    model: Model
    x: dict[tuple[int, Any], Any]  # (group, machine) -> var; machine = ("slot", d, j) | ("cpu", d)
    slots: list[tuple[int, int]]
    cpu_machines: list[int]
    finish: dict[tuple[int, int], Any]
    start: dict[tuple[int, int], Any]
    exists: list[Any]
    in_: dict[tuple[int, tuple[int, int]], Any]
    out: dict[tuple[int, tuple[int, int]], Any]
    z: dict[tuple[int, Any], Any]
    used: dict[tuple[int, int], Any]
    clocks: dict[tuple[int, int], Any]
    total: Any
    big_m: float


def _latency_upper_bound(problem: PlacementProblem, slots: int) -> float:
    """Any placement's latency is at most all its work plus every possible move."""
    finite = np.where(np.isfinite(problem.latency), problem.latency, 0.0)
    return float(finite.max(axis=1).sum() + problem.transfer.sum() * max(slots, 1) * 2) + 1.0


def _build_latency(problem: PlacementProblem, groups: Groups, q: int, model: Model,
                   big_m: float, cpu_unlimited: bool, finish: np.ndarray) -> _LatencyModel:
    """The latency program (module docstring). Existence times carry the critical-path floors
    (``bounds.finish_lower_bounds``) and ceilings big-M minus their static tails, and each big-M
    row uses the gap between its two times' bounds instead of big-M itself."""
    kinds = _device_kind(problem)
    devices = problem.devices()
    accels = [d for d in range(len(devices)) if not problem.kinds[kinds[d]].is_cpu]
    cpus = [d for d in range(len(devices)) if problem.kinds[kinds[d]].is_cpu]
    if cpu_unlimited:  # one machine per CPU kind: its first core
        cpus = [d for d in cpus if devices[d][1] == 0]
    slots = [(d, j) for d in accels for j in range(q)]
    x: dict[tuple[int, Any], Any] = {}
    for g in range(groups.count):
        for d, j in slots:
            if _allowed(problem, groups, g, kinds[d]):
                x[g, (d, j)] = model.addVar(f"x_{g}_{d}_{j}", vtype="B")
        for d in cpus:
            if _allowed(problem, groups, g, kinds[d]):
                x[g, d] = model.addVar(f"x_{g}_{d}", vtype="B")
        model.addCons(quicksum(v for (h, _), v in x.items() if h == g) == 1, name=f"one_{g}")
    machines_of = _machines_by_group(x, groups.count)
    # memory and colour colocation per accelerator device
    for d in accels:
        memory = problem.kinds[kinds[d]].memory
        here = [(g, var) for g in range(groups.count) for (h, m), var in machines_of[g]
                if isinstance(m, tuple) and m[0] == d]
        if sum(groups.size[g] for g, _ in here) > memory:
            model.addCons(quicksum(groups.size[g] * var for g, var in here) <= memory)
    _colocate_colours(problem, groups, model, x, accels, cpus, q)
    earliest = _earliest_existence(problem, groups)
    floor, ceiling = _existence_window(problem, groups, finish, big_m, earliest)
    exists = [model.addVar(f"E_{g}", lb=floor[g], ub=ceiling[g]) for g in range(groups.count)]
    start: dict[tuple[int, int], Any] = {}
    finish: dict[tuple[int, int], Any] = {}
    in_: dict[tuple[int, tuple[int, int]], Any] = {}
    out: dict[tuple[int, tuple[int, int]], Any] = {}
    z: dict[tuple[int, Any], Any] = {}
    used: dict[tuple[int, int], Any] = {}
    for s in slots:
        d, j = s
        start[s] = model.addVar(f"S_{d}_{j}", lb=0.0, ub=big_m)
        finish[s] = model.addVar(f"F_{d}_{j}", lb=0.0, ub=big_m)
        members = [g for g in range(groups.count) if (g, s) in x]
        work = quicksum(groups.latency[g, kinds[d]] * x[g, s] for g in members)
        moves: Any = 0.0
        for i, (cost, g, others) in enumerate(groups.terms):
            own = x.get((g, s))
            theirs = [x[h, s] for h in others if (h, s) in x]
            if own is None and not theirs:
                continue
            if theirs:  # g outside, a successor group inside: g's tensor is an input
                in_[i, s] = model.addVar(f"in_{i}_{d}_{j}", lb=0.0, ub=1.0)
                for var in theirs:
                    model.addCons(in_[i, s] >= var - (own if own is not None else 0.0))
                model.addCons(start[s] >= exists[g] - ceiling[g] * (1 - in_[i, s]))
                moves += cost * in_[i, s]
            if own is not None and cost > 0:  # g inside, a successor group outside
                out[i, s] = model.addVar(f"out_{i}_{d}_{j}", lb=0.0, ub=1.0)
                for h in others:
                    model.addCons(out[i, s] >= own - x.get((h, s), 0.0))
                moves += cost * out[i, s]
        model.addCons(finish[s] == start[s] + work + moves, name=f"finish_{d}_{j}")
        for g in members:
            model.addCons(exists[g] >= finish[s] - (big_m - floor[g]) * (1 - x[g, s]))
        _add_contiguity(model, groups, x, z, s, f"{d}_{j}")
        used[s] = model.addVar(f"used_{d}_{j}", vtype="B")
        for g in members:
            model.addCons(used[s] >= x[g, s])
        if j > 0:
            model.addCons(start[s] >= finish[d, j - 1])
            model.addCons(used[s] <= used[d, j - 1])
    _cpu_timing(problem, groups, model, x, exists, cpus, kinds)
    clocks = {} if cpu_unlimited else _core_clocks(problem, groups, model, x, exists, cpus,
                                                   kinds, big_m)
    device_membership: dict[tuple[int, int], Any] = {}
    for d in accels:
        for g in range(groups.count):
            vars_ = [x[g, (d, j)] for j in range(q) if (g, (d, j)) in x]
            if vars_:
                device_membership[g, d] = vars_[0] if len(vars_) == 1 else quicksum(vars_)
    for d in cpus:
        for g in range(groups.count):
            if (g, d) in x:
                device_membership[g, d] = x[g, d]
    _order_by_smallest_group(model, device_membership, groups.count,
                             _identical_runs(problem, accels + cpus))
    total = model.addVar("latency", lb=float(floor.max(initial=0.0)), ub=big_m)
    has_succ = {a for a, _ in _group_data_edges(problem, groups)}
    for g in range(groups.count):
        if g not in has_succ:
            model.addCons(total >= exists[g])
    for s in slots:
        model.addCons(total >= finish[s])
    model.setObjective(total, "minimize")
    return _LatencyModel(model=model, x=x, slots=slots, cpu_machines=cpus, finish=finish,
                         start=start, exists=exists, in_=in_, out=out, z=z, used=used,
                         clocks=clocks, total=total, big_m=big_m)


def _existence_window(problem: PlacementProblem, groups: Groups, finish: np.ndarray, big_m: float,
                      earliest: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bounds on E[g] valid for every placement with latency at most big-M: at least ``finish``
    of each member (``bounds.finish_lower_bounds`` for the program's q) and the static longest
    path, at most big-M minus the shortest static tail of a member (the work still to come after
    its output exists). O(n + m)."""
    tails = static_tails(problem)
    floor = np.array([max(earliest[g], float(finish[m].max())) for g, m in enumerate(groups.members)])
    ceiling = np.array([big_m - float(tails[m].min()) for m in groups.members])
    ceiling = np.maximum(ceiling, floor)  # big-M below a floor: no better placement; let SCIP say so
    return np.minimum(floor, big_m), np.maximum(ceiling, 0.0)


def _earliest_existence(problem: PlacementProblem, groups: Groups) -> np.ndarray:
    """Valid lower bound on E[g]: the longest path to g, each group at its cheapest kind.

    Path nodes sharing a subgraph run one after another inside it, the others wait for their
    inputs, so a path's cheapest latencies add up in any placement. O(G + m).
    """
    usable = [k for k, kind in enumerate(problem.kinds) if kind.count > 0]
    cheapest = np.min(groups.latency[:, usable], axis=1)
    preds: list[list[int]] = [[] for _ in range(groups.count)]
    for a, b in _group_data_edges(problem, groups):
        preds[b].append(a)
    order = topological_order(groups.count, _group_data_edges(problem, groups))
    earliest = np.zeros(groups.count)
    for g in order:
        earliest[g] = max((earliest[h] for h in preds[g]), default=0.0) + cheapest[g]
    return earliest


def _machines_by_group(x: dict, count: int) -> list[list[tuple[tuple[int, Any], Any]]]:
    out: list[list[tuple[tuple[int, Any], Any]]] = [[] for _ in range(count)]
    for key, var in x.items():
        out[key[0]].append((key, var))
    return out


def _group_data_edges(problem: PlacementProblem, groups: Groups) -> list[tuple[int, int]]:
    return sorted({(int(groups.of[u]), int(groups.of[v])) for u, v in problem.edges
                   if groups.of[u] != groups.of[v]})


def _colocate_colours(problem: PlacementProblem, groups: Groups, model: Model, x: dict,
                      accels: list[int], cpus: list[int], q: int) -> None:
    """Groups sharing a colour class sit on one device (any of its slots)."""
    by_colour: dict[int, list[int]] = {}
    for g, members in enumerate(groups.members):
        colours = {int(problem.color[v]) for v in members if problem.color[v] >= 0}
        for c in colours:
            by_colour.setdefault(c, []).append(g)
    for mates in by_colour.values():
        for a, b in zip(mates, mates[1:], strict=False):
            for d in accels:
                on_a = quicksum(x[a, (d, j)] for j in range(q) if (a, (d, j)) in x)
                on_b = quicksum(x[b, (d, j)] for j in range(q) if (b, (d, j)) in x)
                model.addCons(on_a == on_b)
            for d in cpus:
                model.addCons(x.get((a, d), 0.0) == x.get((b, d), 0.0))


def _cpu_timing(problem: PlacementProblem, groups: Groups, model: Model, x: dict,
                exists: list, cpus: list[int], kinds: list[int]) -> None:
    """E[g] >= E[h] + p(g) * on_cpu(g) for every data predecessor h; E[g] >= p(g) * on_cpu."""
    preds: list[set[int]] = [set() for _ in range(groups.count)]
    for a, b in _group_data_edges(problem, groups):
        preds[b].add(a)
    for g in range(groups.count):
        cpu_time = quicksum(groups.latency[g, kinds[d]] * x[g, d] for d in cpus if (g, d) in x)
        model.addCons(exists[g] >= cpu_time)
        for h in preds[g]:
            model.addCons(exists[g] >= exists[h] + cpu_time)


def _core_clocks(problem: PlacementProblem, groups: Groups, model: Model, x: dict,
                 exists: list, cpus: list[int], kinds: list[int], big_m: float) -> dict:
    """Finite cores: a core runs its ops one at a time in the evaluator's topological order.

    C[m,i] >= C[m,i-1]; C[m,i] >= E[v_i] if v_i is on m; E[v_i] >= C[m,i-1] + p(v_i) if v_i
    is on m. Groups are single nodes here (no zero-node merging). O(n * cores) rows.
    """
    clocks: dict[tuple[int, int], Any] = {}
    topo = topological_order(problem.n, problem.edges)
    for m in cpus:
        previous: Any = 0.0
        for i, v in enumerate(topo):
            g = int(groups.of[v])
            if (g, m) not in x:
                continue
            clock = model.addVar(f"C_{m}_{i}", lb=0.0, ub=big_m)
            clocks[m, i] = clock
            work = groups.latency[g, kinds[m]]
            model.addCons(clock >= previous)
            model.addCons(clock >= exists[g] - big_m * (1 - x[g, m]))
            model.addCons(exists[g] >= previous + work - (big_m + work) * (1 - x[g, m]))
            previous = clock
    return clocks


def _unit_ranks(problem: PlacementProblem, placement: Placement) -> np.ndarray:
    """Position of each accelerator node's subgraph among its device's subgraphs (by start time)
    in the evaluator's schedule; 0 for CPU nodes. O(n + m) plus one evaluation."""
    schedule = evaluate(problem, placement).schedule
    kinds = _device_kind(problem)
    rank = np.zeros(problem.n, dtype=np.int64)
    by_device: dict[int, list[int]] = {}
    for position, entry in enumerate(schedule):
        if entry.nodes and not problem.kinds[kinds[entry.device]].is_cpu:
            by_device.setdefault(entry.device, []).append(position)
    for positions in by_device.values():
        for j, position in enumerate(sorted(positions, key=lambda u: schedule[u].start)):
            rank[schedule[position].nodes] = j
    return rank


def _compact_slots(device_of_group: np.ndarray, slot: np.ndarray) -> np.ndarray:
    """Renumber each device's slots 0, 1, ... keeping their order (projection may empty one)."""
    out = slot.copy()
    for d in set(device_of_group.tolist()):
        on = device_of_group == d
        ranks = {r: j for j, r in enumerate(sorted(set(slot[on].tolist())))}
        out[on] = [ranks[r] for r in slot[on].tolist()]
    return out


def project_latency_start(problem: PlacementProblem, groups: Groups, start: Placement, q: int
                          ) -> ProjectedStart | None:
    """``start`` on the latency program's groups, or None if it is infeasible or needs more
    than ``q`` subgraphs on some accelerator.

    Each group takes its root's device and its root's subgraph position in the evaluator's
    schedule of ``start``; the projected placement is scored again by the evaluator (a group
    split by the start, e.g. zero nodes away from their input, is otherwise never accepted by
    the program). O(n + m) plus two evaluations.
    """
    original = _latency_or_inf(problem, start)
    if not math.isfinite(original):
        return None
    device_of_group = project_onto_groups(groups, start.device)
    accelerator = np.array([not problem.kinds[k].is_cpu for k in _device_kind(problem)])
    on_accelerator = accelerator[device_of_group]
    slot = np.where(on_accelerator, _unit_ranks(problem, start)[groups.roots], 0)
    slot[on_accelerator] = _compact_slots(device_of_group[on_accelerator], slot[on_accelerator])
    if slot.max(initial=0) >= q:
        return None
    placement = Placement(device=device_of_group[groups.of], order=slot[groups.of],
                          method=start.method, objective="latency", contiguous=start.contiguous)
    value = _latency_or_inf(problem, placement)
    if not math.isfinite(value):
        return None
    placement.value = value
    if problem.cpu_overlap_unlimited:
        devices = problem.devices()
        first = {k: d for d, (k, o) in enumerate(devices) if o == 0}
        device_of_group = np.array([d if accelerator[d] else first[devices[d][0]]
                                    for d in device_of_group.tolist()], dtype=np.int64)
    return ProjectedStart(device_of_group=device_of_group, slot=slot, placement=placement,
                          value=value, original=original, method=start.method)


def _warm_start_latency(problem: PlacementProblem, groups: Groups, built: _LatencyModel,
                        device_of_group: np.ndarray, slot: np.ndarray,
                        progress: Progress | None) -> bool:
    """Give SCIP the start with its earliest schedule (times from the IP's own recurrences)."""
    model = built.model
    kinds = _device_kind(problem)
    device_of_group = _canonical_devices(problem, groups, device_of_group,
                                         sorted({d for d, _ in built.slots}) + built.cpu_machines)
    sol = model.createSol()

    def machine(g: int) -> Any:
        d = int(device_of_group[g])
        return (d, int(slot[g])) if not problem.kinds[kinds[d]].is_cpu else d

    for (g, m), var in built.x.items():
        model.setSolVal(sol, var, float(machine(g) == m))
    for s in built.slots:
        chosen = np.array([machine(g) == s for g in range(groups.count)])
        model.setSolVal(sol, built.used[s], float(chosen.any()))
        reach = _downsets(groups, chosen)
        for g in range(groups.count):
            model.setSolVal(sol, built.z[g, s], float(reach[g]))
    _set_prefix_counts(model, sol, device_of_group)
    order = np.array([slot[g] for g in groups.of])
    placement = Placement(device=device_of_group[groups.of], order=order)
    schedule = evaluate(problem, placement).schedule
    exists = np.zeros(groups.count)
    for entry in schedule:
        for v in entry.nodes:
            g = int(groups.of[v])
            exists[g] = max(exists[g], entry.end)
    for g in range(groups.count):
        model.setSolVal(sol, built.exists[g], float(exists[g]))
    for s in built.slots:
        entries = [e for e in schedule if e.device == s[0] and e.nodes
                   and int(slot[groups.of[e.nodes[0]]]) == s[1]]
        begin = entries[0].start if entries else 0.0
        end = entries[0].end if entries else 0.0
        if not entries and s[1] > 0:
            begin = end = model.getSolVal(sol, built.finish[s[0], s[1] - 1])
        model.setSolVal(sol, built.start[s], begin)
        model.setSolVal(sol, built.finish[s], end)
    for (i, s), var in built.in_.items():
        _, g, others = groups.terms[i]
        model.setSolVal(sol, var, float(machine(g) != s and any(machine(h) == s for h in others)))
    for (i, s), var in built.out.items():
        _, g, others = groups.terms[i]
        model.setSolVal(sol, var, float(machine(g) == s and any(machine(h) != s for h in others)))
    topo = topological_order(problem.n, problem.edges)
    for m in built.cpu_machines:
        clock = 0.0
        for i, v in enumerate(topo):
            if (m, i) in built.clocks:
                if machine(int(groups.of[v])) == m:
                    clock = max(clock, exists[groups.of[v]])
                model.setSolVal(sol, built.clocks[m, i], clock)
    model.setSolVal(sol, built.total, float(exists.max(initial=0.0)))
    accepted = model.addSol(sol, free=True)
    _emit(progress, f"warm start {'stored' if accepted else 'not stored'}: "
                    f"{float(exists.max(initial=0.0)):.6g}")
    return bool(accepted)


def _latency_or_inf(problem: PlacementProblem, placement: Placement) -> float:
    try:
        result = evaluate(problem, placement)
    except FpgaplaceError:  # a given order that deadlocks
        return math.inf
    return float(result.latency) if result.feasible else math.inf


def _default_latency_starts(problem: PlacementProblem) -> list[Placement]:
    """Greedy and PipeDream's latency split (whichever are feasible), to seed SCIP."""
    out = []
    for make in (greedy_latency, lambda p: pipedream(p, "latency")):
        try:
            candidate = make(problem)
        except FpgaplaceError:
            continue
        if math.isfinite(candidate.value):
            out.append(candidate)
    return out


def _projected_starts(candidates: Sequence[Placement | None],
                      project: Callable[[Placement], ProjectedStart | None],
                      progress: Progress | None) -> list[ProjectedStart]:
    """Every candidate that projects onto the groups, best projected value first; a projection
    that scores worse than its start is reported (it never should, ``project_onto_groups``)."""
    out = []
    for candidate in candidates:
        if candidate is None:
            continue
        projected = project(candidate)
        if projected is None:
            _emit(progress, f"start {candidate.method or '?'}: infeasible for this program, skipped")
            continue
        if projected.value > projected.original * (1 + 1e-9) + 1e-12:
            _emit(progress, f"start {projected.method or '?'}: {projected.original:.6g} becomes "
                            f"{projected.value:.6g} on the program's groups")
        out.append(projected)
    return sorted(out, key=lambda p: p.value)


def _kept_start(best: ProjectedStart, bound: float, reason: str) -> Placement:
    """The best projected start as the program's answer (SCIP ended with nothing better);
    status "start kept (<its method>): <reason>"."""
    placement = copy.copy(best.placement)
    placement.method = "ip"
    placement.value = best.value
    placement.bound = min(bound, best.value)
    placement.status = f"start kept ({best.method or 'given'}): {reason}"
    return placement


def _warm_starts(starts: list[ProjectedStart], give: Callable[[ProjectedStart], bool], cutoff: float,
                 progress: Progress | None, label: str) -> None:
    """Hand SCIP every projected start within the cutoff (the best start's value; a worse one
    violates the objective's bound), each distinct assignment once."""
    seen: set[tuple[bytes, bytes]] = set()
    given: list[str] = []
    for start in starts:
        key = (start.device_of_group.tobytes(), start.slot.tobytes())
        if start.value > cutoff or key in seen:
            continue
        seen.add(key)
        if give(start):
            given.append(start.method or "?")
    _emit(progress, f"{label}: {len(given)} of {len(starts)} starts given to SCIP "
                    f"({', '.join(given) or 'none'}); the rest repeat one or exceed the cutoff "
                    f"{cutoff:.6g}")


def solve_latency_ip(
    problem: PlacementProblem,
    subgraphs_per_device: int = 1,
    time_limit: float = 60,
    gap: float = 1e-6,
    start: Placement | None = None,
    progress: Progress | None = None,
    starts: Sequence[Placement] = (),
) -> Placement:
    """Minimise single-sample latency with q = ``subgraphs_per_device`` subgraphs per accelerator.

    CPU semantics follow ``problem.cpu_overlap_unlimited``. Returns a placement whose ``order``
    gives each accelerator node its subgraph's position, ``value`` its evaluated latency,
    ``bound`` SCIP's dual bound. ``start`` and ``starts`` (default: greedy and PipeDream) are
    projected onto the program's groups (``project_latency_start``) and all given to SCIP; the
    best projected one sets the big-M constants and is returned (status "start kept (...): ...") when
    SCIP ends with nothing better. Raises FpgaplaceError if no placement exists.
    """
    started = time.perf_counter()
    if subgraphs_per_device < 1:
        raise FpgaplaceError(
            f"subgraphs_per_device is {subgraphs_per_device}, expected an integer >= 1")
    check_feasible(problem)
    cpu_unlimited = bool(problem.cpu_overlap_unlimited)
    q = int(subgraphs_per_device)
    groups = contract(problem, colours=False, zero_nodes=cpu_unlimited)
    candidates = [start, *starts] if start is not None or starts else _default_latency_starts(problem)
    projected = _projected_starts(candidates, lambda c: project_latency_start(problem, groups, c, q),
                                  progress)
    accel_count = sum(kind.count for kind in problem.kinds if not kind.is_cpu)
    big_m = _latency_upper_bound(problem, accel_count * q)
    if projected:
        big_m = min(big_m, projected[0].value * (1 + 1e-9) + 1e-9)
    label = f"latency IP (q={q})"
    finish = finish_lower_bounds(problem, q)
    path_bound = float(finish.max(initial=0.0))
    _emit(progress, f"{label}: critical-path bound {path_bound:.6g}")
    if projected and projected[0].value <= path_bound * (1 + gap) + 1e-12:
        placement = _kept_start(projected[0], path_bound, "")
        proven = projected[0].value <= path_bound * (1 + 1e-9) + 1e-12
        placement.status = (f"{'optimal' if proven else 'gap limit'} (critical-path bound; "
                            f"start {projected[0].method or 'given'})")
        placement.seconds = time.perf_counter() - started
        return placement
    model = _new_model(label, time_limit, gap, progress)
    built = _build_latency(problem, groups, q, model, big_m, cpu_unlimited, finish)
    size = model_size(model)
    _emit(progress, f"{label}: {groups.count} groups of {problem.n} nodes, "
                    f"{size['vars']} vars, {size['conss']} conss, big-M {big_m:.6g}")
    _warm_starts(projected, lambda s: _warm_start_latency(problem, groups, built, s.device_of_group,
                                                          s.slot, progress), big_m, progress, label)
    model.setParam("limits/time", max(0.01, time_limit - (time.perf_counter() - started)))
    model.optimizeNogil()  # lets a progress thread run during long LPs
    infeasible = model.getStatus() == "infeasible"
    if model.getNSols() == 0 and not projected:
        if infeasible:
            raise FpgaplaceError(
                f"{problem.source or 'problem'}: no placement with {q} contiguous subgraphs per "
                "accelerator fits the devices' memory")
        raise FpgaplaceError(
            f"{problem.source or 'problem'}: the latency IP found no placement within "
            f"{time_limit:g} s ({_bounds_message(model)}); give a start placement or more time")
    floor = built.total.getLbOriginal()
    if model.getNSols() == 0:
        # Either SCIP stopped before taking in the warm start, or it proved that nothing beats
        # the start's latency (the start's value is the model's cutoff, so "infeasible" means
        # "no better placement" up to SCIP's tolerances): return the evaluated start.
        dual = floor if infeasible else max(float(model.getDualbound()), floor)
        placement = _kept_start(projected[0], dual, "no better placement" if infeasible
                                else _status(model))
    else:
        placement = _extract_latency(problem, groups, built, model)
        if projected and placement.value > projected[0].value * (1 + 1e-9) + 1e-12:
            placement = _kept_start(projected[0], placement.bound,
                                    f"IP ended at {placement.value:.6g} ({placement.status})")
    placement.seconds = time.perf_counter() - started
    _emit(progress, f"{label}: value {placement.value:.6g}, bound {placement.bound:.6g}, "
                    f"{placement.status}, {placement.seconds:.1f} s")
    return placement


def _extract_latency(problem: PlacementProblem, groups: Groups, built: _LatencyModel,
                     model: Model) -> Placement:
    best = model.getBestSol()
    device = np.full(problem.n, -1, dtype=np.int64)
    order = np.zeros(problem.n, dtype=np.int64)
    for (g, m), var in built.x.items():
        if model.getSolVal(best, var) > 0.5:
            members = groups.members[g]
            if isinstance(m, tuple):
                device[members], order[members] = m[0], m[1]
            else:
                device[members] = m
    placement = Placement(device=device, order=order, method="ip", objective="latency",
                          contiguous=True)
    try:
        value = float(evaluate(problem, placement).latency)
    except FpgaplaceError:  # zero-length subgraphs waiting on each other: let the evaluator
        placement.order = None  # derive the subgraphs instead
        value = float(evaluate(problem, placement).latency)
    placement.value = value
    placement.bound = max(float(model.getDualbound()), built.total.getLbOriginal())
    placement.status = _status(model)
    return placement
