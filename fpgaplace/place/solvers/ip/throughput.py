"""The max-load (throughput) integer program: minimise the time per sample of a pipeline.

Source: Tarnawski et al., "Efficient Algorithms for Device Placement of DNN Graph Operators"
(NeurIPS 2020, Section 4 and Appendix: the max-load IP), in our own formulation, on the groups of
``reduce.contract`` (colour classes and zero nodes contracted).

Non-contiguous: binary x[g,d] (group g on device d); every group on one allowed device; memory
    per accelerator; t[tau,d] >= |x[g(tau),d] - x[h,d]| for each successor group h, so a
    transfer term is paid once per device it crosses; L >= load of each device; minimise L.
    Identical devices are ordered by their smallest group (``scip.order_by_smallest_group``).

Contiguous: the DP's search space exactly, a chain of ideals {} < I_0 < ... of the group graph,
    one device per difference (a split whose quotient graph is acyclic). Chain positions
    j = 0..P-1 (P = number of devices); binary k[j,t] = "position j runs on a device of kind t"
    (at most one kind per position, at most count_t positions per kind, unused positions last);
    binary x[g,j,t] <= k[j,t] = "group g is the set of position j, on kind t", each group in
    exactly one; y[g,j] = sum_{i<=j,t} x[g,i,t] (g lies in the ideal I_j) with y[a,j] >= y[b,j]
    on every group edge a->b (each I_j is closed under predecessors); a position with a kind is
    non-empty; memory sum size * x[.,j,t] <= M_t k[j,t]; transfer indicators
    t[tau,j] >= A[g,j] - S[h,j] and >= A[h,j] - S[g,j] (A: on position j on an accelerator kind,
    S: on position j at all). Devices are identified by chain position, so identical devices need
    no symmetry breaking (sets that do not depend on each other may still swap positions);
    position j with kind t becomes the next unused device of kind t.
    (A formulation that only asks each set to be convex also admits rings of sets that depend
    on each other, A -> B -> C -> A, which no chain contains and which can beat the DP.)

Valid bounds for both: L >= total minimal work / devices, L >= largest minimal group latency,
    L >= ``bounds.memory_load_bound``; L <= the warm start's value when the start lies in the
    searched space.

Sizes: non-contiguous G*D binaries and O(T*D) transfer columns, O((m+T)*D) rows (G groups, D
devices, T transfer terms, m edges); contiguous G*D*K binaries (K device kinds), G*D ideal and T*D
transfer columns, O((m+T)*D + G*D*K) rows. Solving is NP-hard in general; SCIP branch-and-bound
with a time and gap limit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from fpgaplace.place.solvers.baselines import check_feasible, pipedream
from fpgaplace.place.solvers.bounds import cheapest_latency, memory_load_bound, work_load_bound
from fpgaplace.place.solvers.evaluate import evaluate, topological_order
from fpgaplace.place.solvers.ip import scip
from fpgaplace.place.solvers.ip.reduce import Groups, ProjectedStart, allowed, contract, project_onto_groups
from fpgaplace.place.solvers.problem import Placement, PlacementProblem
from fpgaplace.place.solvers.progress import Progress
from fpgaplace.util.errors import FpgaplaceError

if TYPE_CHECKING:
    from pyscipopt import Model


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


def _load_variable(problem: PlacementProblem, groups: Groups, model: Model, upper: float) -> Any:
    floor = max(work_load_bound(problem, cheapest_latency(problem, groups.latency)), memory_load_bound(problem))
    return model.addVar("maxload", lb=min(floor, upper),
                        ub=upper if math.isfinite(upper) else None)


def _build_free_throughput(problem: PlacementProblem, groups: Groups, model: Model,
                           upper: float) -> _FreeModel:
    kinds = problem.device_kinds()
    devices = list(range(len(problem.devices())))
    x: dict[tuple[int, int], Any] = {}
    for g in range(groups.count):
        for d in devices:
            if allowed(problem, groups, g, kinds[d]):
                x[g, d] = model.addVar(f"x_{g}_{d}", vtype="B")
        model.addCons(scip.quicksum(x[g, d] for d in devices if (g, d) in x) == 1, name=f"one_{g}")
    load = _load_variable(problem, groups, model, upper)
    t: dict[tuple[int, int], Any] = {}
    for d in devices:
        kind = problem.kinds[kinds[d]]
        on_d = [g for g in range(groups.count) if (g, d) in x]
        if not kind.is_cpu and groups.size[on_d].sum() > kind.memory:
            model.addCons(scip.quicksum(groups.size[g] * x[g, d] for g in on_d) <= kind.memory,
                          name=f"mem_{d}")
        work = scip.quicksum(groups.latency[g, kinds[d]] * x[g, d] for g in on_d)
        moves: Any = 0.0
        if not kind.is_cpu:
            moves = scip.quicksum(cost * _transfer_indicator(model, x, t, i, g, others, d)
                                  for i, (cost, g, others) in enumerate(groups.terms) if cost > 0)
        model.addCons(load >= work + moves, name=f"load_{d}")
    scip.order_by_smallest_group(model, x, groups.count, scip.identical_runs(problem, devices))
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
    kinds = problem.available_kinds()
    accelerators = [k for k in kinds if not problem.kinds[k].is_cpu]
    positions = sum(problem.kinds[k].count for k in kinds)
    span = range(positions)
    kind_at = {(j, k): model.addVar(f"k_{j}_{k}", vtype="B") for j in span for k in kinds}
    for j in span:
        model.addCons(scip.quicksum(kind_at[j, k] for k in kinds) <= 1, name=f"kind_{j}")
        if j > 0:  # unused positions come last
            model.addCons(scip.quicksum(kind_at[j, k] for k in kinds)
                          <= scip.quicksum(kind_at[j - 1, k] for k in kinds), name=f"used_{j}")
    for k in kinds:
        model.addCons(scip.quicksum(kind_at[j, k] for j in span) <= problem.kinds[k].count,
                      name=f"count_{k}")
    x: dict[tuple[int, int, int], Any] = {}
    for g in range(groups.count):
        for k in kinds:
            if allowed(problem, groups, g, k):
                for j in span:
                    x[g, j, k] = model.addVar(f"x_{g}_{j}_{k}", vtype="B")
                    model.addCons(x[g, j, k] <= kind_at[j, k])
        model.addCons(scip.quicksum(x[g, j, k] for j in span for k in kinds if (g, j, k) in x) == 1,
                      name=f"one_{g}")

    def member(g: int, j: int, of_kinds: list[int]) -> Any:
        return scip.quicksum(x[g, j, k] for k in of_kinds if (g, j, k) in x)

    for j in span:
        for k in kinds:
            here = [g for g in range(groups.count) if (g, j, k) in x]
            # a position given a kind holds something: no empty devices inside the chain
            model.addCons(scip.quicksum(x[g, j, k] for g in here) >= kind_at[j, k])
            memory = problem.kinds[k].memory
            if not problem.kinds[k].is_cpu and groups.size[here].sum() > memory:
                model.addCons(scip.quicksum(groups.size[g] * x[g, j, k] for g in here)
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
        work = scip.quicksum(groups.latency[g, k] * x[g, j, k] for g in range(groups.count)
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


def _warm_start_chain(problem: PlacementProblem, groups: Groups, built: _ChainModel,
                      device_of_group: np.ndarray, progress: Progress | None) -> bool:
    """Give SCIP a chain split: its devices in chain order become positions 0, 1, ..."""
    order = chain_order(groups, device_of_group)
    assert order is not None  # the caller checked
    kinds = problem.device_kinds()
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
    scip.emit(progress, f"warm start {'stored' if accepted else 'not stored'}: {value:.6g}")
    return bool(accepted)


def _warm_start_free(problem: PlacementProblem, groups: Groups, built: _FreeModel,
                     device_of_group: np.ndarray, progress: Progress | None) -> bool:
    device_of_group = scip.canonical_devices(problem, groups, device_of_group, built.devices)
    model = built.model
    sol = model.createSol()
    for (g, d), var in built.x.items():
        model.setSolVal(sol, var, float(device_of_group[g] == d))
    for (term, d), var in built.t.items():
        _, g, others = groups.terms[term]
        crossing = any((device_of_group[g] == d) != (device_of_group[h] == d) for h in others)
        model.setSolVal(sol, var, float(crossing))
    scip.set_prefix_counts(model, sol, device_of_group)
    loads = evaluate(problem, Placement(device=device_of_group[groups.of])).loads
    model.setSolVal(sol, built.load, max(loads))
    accepted = model.addSol(sol, free=True)
    scip.emit(progress, f"warm start {'stored' if accepted else 'not stored'}: {max(loads):.6g}")
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
    projected = scip.projected_starts(
        candidates, lambda c: project_throughput_start(problem, groups, c, contiguous), progress)
    upper = projected[0].value * (1 + 1e-9) + 1e-12 if projected else math.inf
    label = "max-load IP" + (" (contiguous)" if contiguous else "")
    model = scip.new_model(label, time_limit - (time.perf_counter() - started), gap, progress)
    built: _ChainModel | _FreeModel
    if contiguous:
        built = _build_chain_throughput(problem, groups, model, upper)
    else:
        built = _build_free_throughput(problem, groups, model, upper)
    size = scip.model_size(model)
    scip.emit(progress, f"{label}: {groups.count} groups of {problem.n} nodes, "
                        f"{size['vars']} vars, {size['conss']} conss")
    warm = _warm_start_chain if contiguous else _warm_start_free
    scip.warm_starts(projected, lambda s: warm(problem, groups, built, s.device_of_group, progress),
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
            f"{time_limit:g} s ({scip.bounds_message(model)}); give a start placement or more time"
        )
    bound = max(float(model.getDualbound()), built.load.getLbOriginal())
    if model.getNSols() == 0:  # stopped before SCIP took in the warm start: return the start
        placement = scip.kept_start(projected[0], bound, scip.status_name(model))
    else:
        if isinstance(built, _ChainModel):
            device = _chain_solution(problem, groups, built, model)[groups.of]
        else:
            device = _free_solution(groups, built, model)[groups.of]
        placement = Placement(device=device, method="ip", objective="throughput",
                              contiguous=contiguous)
        placement.value = float(evaluate(problem, placement).max_load)
        placement.bound = bound
        placement.status = scip.status_name(model)
        if projected and placement.value > projected[0].value * (1 + 1e-9) + 1e-12:
            placement = scip.kept_start(projected[0], bound,
                                        f"IP ended at {placement.value:.6g} ({placement.status})")
    placement.seconds = time.perf_counter() - started
    scip.emit(progress, f"{label}: value {placement.value:.6g}, bound {placement.bound:.6g}, "
                        f"{placement.status}, {placement.seconds:.1f} s")
    return placement
