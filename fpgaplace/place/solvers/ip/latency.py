"""The single-sample latency integer program: minimise the time from input to last output.

Source: Tarnawski et al., "Efficient Algorithms for Device Placement of DNN Graph Operators"
(NeurIPS 2020, Section 5 and Appendix: the latency IP with q subgraphs per device), in our own
formulation, on the groups of ``reduce.contract`` (nodes kept apart; zero nodes merged only when
CPUs overlap without limit).

Each accelerator holds q slots (subgraphs) run in a fixed order; x[g,s] for slots and CPU
    machines, each slot convex; S_s, F_s start/finish of slot s; E[g] time g's output exists.
    F_s = S_s + work + transfers (in/out indicators per transfer term); S_s >= E[u] when u is an
    input of s (big-M on the in-indicator); E[g] >= F_s if g is in s; a CPU op ends p(g) after
    its inputs exist (and, with finite cores, after every earlier op of its core in the
    evaluator's fixed topological order: a core clock C[m,i] per position i); slots of one
    device run in order; empty slots come last. Minimise T >= E[g]. Big-M = an upper bound on
    the optimum (the best warm start, else the sum of all work and moves).

Convexity of a slot's set {g : x[g,s] = 1}: z[g,s] >= x[g,s], z[b,s] <= z[a,s] and
    z[b,s] <= 1 + x[b,s] - x[a,s] on every group edge a->b (z marks the groups that reach the set).

Warm starts keep their subgraphs: each group takes its root's device and its root's subgraph
    position in the evaluator's schedule of the start (``project_latency_start``).

A problem built from a graph carries its stages' fills (``PlacementProblem.fills``): the evaluator
    then takes a slot's work as its core's dataflow latency, which is never below the sum of its
    latencies that this program counts. The program (and its warm starts' times) stays additive,
    so its dual bound and the critical-path bound remain lower bounds; the placement it returns
    is scored by the evaluator (``value``), and "optimal" is the additive program's.

Sizes: the non-contiguous max-load program's with D multiplied by q, plus O(G + n*l) time columns
(l finite CPU cores). Solving is NP-hard in general; SCIP branch-and-bound with a time and gap limit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from fpgaplace.place.solvers.baselines import check_feasible, greedy_latency, pipedream
from fpgaplace.place.solvers.bounds import cheapest_latency, critical_path_bound, finish_lower_bounds, static_tails
from fpgaplace.place.solvers.evaluate import evaluate, topological_order
from fpgaplace.place.solvers.ip import scip
from fpgaplace.place.solvers.ip.reduce import Groups, ProjectedStart, allowed, contract, project_onto_groups
from fpgaplace.place.solvers.problem import Placement, PlacementProblem
from fpgaplace.place.solvers.progress import Progress
from fpgaplace.util.errors import FpgaplaceError

if TYPE_CHECKING:
    from pyscipopt import Model


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
    kinds = problem.device_kinds()
    devices = problem.devices()
    accels = [d for d in range(len(devices)) if not problem.kinds[kinds[d]].is_cpu]
    cpus = [d for d in range(len(devices)) if problem.kinds[kinds[d]].is_cpu]
    if cpu_unlimited:  # one machine per CPU kind: its first core
        cpus = [d for d in cpus if devices[d][1] == 0]
    slots = [(d, j) for d in accels for j in range(q)]
    x: dict[tuple[int, Any], Any] = {}
    for g in range(groups.count):
        for d, j in slots:
            if allowed(problem, groups, g, kinds[d]):
                x[g, (d, j)] = model.addVar(f"x_{g}_{d}_{j}", vtype="B")
        for d in cpus:
            if allowed(problem, groups, g, kinds[d]):
                x[g, d] = model.addVar(f"x_{g}_{d}", vtype="B")
        model.addCons(scip.quicksum(v for (h, _), v in x.items() if h == g) == 1, name=f"one_{g}")
    machines_of = _machines_by_group(x, groups.count)
    # memory and colour colocation per accelerator device
    for d in accels:
        memory = problem.kinds[kinds[d]].memory
        here = [(g, var) for g in range(groups.count) for (h, m), var in machines_of[g]
                if isinstance(m, tuple) and m[0] == d]
        if sum(groups.size[g] for g, _ in here) > memory:
            model.addCons(scip.quicksum(groups.size[g] * var for g, var in here) <= memory)
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
        work = scip.quicksum(groups.latency[g, kinds[d]] * x[g, s] for g in members)
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
                device_membership[g, d] = vars_[0] if len(vars_) == 1 else scip.quicksum(vars_)
    for d in cpus:
        for g in range(groups.count):
            if (g, d) in x:
                device_membership[g, d] = x[g, d]
    scip.order_by_smallest_group(model, device_membership, groups.count,
                                 scip.identical_runs(problem, accels + cpus))
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
    cheapest = cheapest_latency(problem, groups.latency)
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
                on_a = scip.quicksum(x[a, (d, j)] for j in range(q) if (a, (d, j)) in x)
                on_b = scip.quicksum(x[b, (d, j)] for j in range(q) if (b, (d, j)) in x)
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
        cpu_time = scip.quicksum(groups.latency[g, kinds[d]] * x[g, d] for d in cpus if (g, d) in x)
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
    kinds = problem.device_kinds()
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
    accelerator = np.array([not problem.kinds[k].is_cpu for k in problem.device_kinds()])
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
    kinds = problem.device_kinds()
    device_of_group = scip.canonical_devices(problem, groups, device_of_group,
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
    scip.set_prefix_counts(model, sol, device_of_group)
    order = np.array([slot[g] for g in groups.of])
    placement = Placement(device=device_of_group[groups.of], order=order)
    schedule = evaluate(problem.additive(), placement).schedule  # the program adds the latencies up
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
    scip.emit(progress, f"warm start {'stored' if accepted else 'not stored'}: "
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
    projected = scip.projected_starts(candidates, lambda c: project_latency_start(problem, groups, c, q),
                                      progress)
    accel_count = sum(kind.count for kind in problem.kinds if not kind.is_cpu)
    big_m = _latency_upper_bound(problem, accel_count * q)
    if projected:
        big_m = min(big_m, projected[0].value * (1 + 1e-9) + 1e-9)
    label = f"latency IP (q={q})"
    finish = finish_lower_bounds(problem, q)
    path_bound = critical_path_bound(problem, q)  # the finish bound's largest, or the path's
    scip.emit(progress, f"{label}: critical-path bound {path_bound:.6g}")
    if projected and projected[0].value <= path_bound * (1 + gap) + 1e-12:
        placement = scip.kept_start(projected[0], path_bound, "")
        proven = projected[0].value <= path_bound * (1 + 1e-9) + 1e-12
        placement.status = (f"{'optimal' if proven else 'gap limit'} (critical-path bound; "
                            f"start {projected[0].method or 'given'})")
        placement.seconds = time.perf_counter() - started
        return placement
    model = scip.new_model(label, time_limit, gap, progress)
    built = _build_latency(problem, groups, q, model, big_m, cpu_unlimited, finish)
    size = scip.model_size(model)
    scip.emit(progress, f"{label}: {groups.count} groups of {problem.n} nodes, "
                        f"{size['vars']} vars, {size['conss']} conss, big-M {big_m:.6g}")
    scip.warm_starts(projected, lambda s: _warm_start_latency(problem, groups, built, s.device_of_group,
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
            f"{time_limit:g} s ({scip.bounds_message(model)}); give a start placement or more time")
    floor = built.total.getLbOriginal()
    if model.getNSols() == 0:
        # Either SCIP stopped before taking in the warm start, or it proved that nothing beats
        # the start's latency (the start's value is the model's cutoff, so "infeasible" means
        # "no better placement" up to SCIP's tolerances): return the evaluated start.
        dual = floor if infeasible else max(float(model.getDualbound()), floor)
        placement = scip.kept_start(projected[0], dual, "no better placement" if infeasible
                                    else scip.status_name(model))
    else:
        placement = _extract_latency(problem, groups, built, model)
        if projected and placement.value > projected[0].value * (1 + 1e-9) + 1e-12:
            placement = scip.kept_start(projected[0], placement.bound,
                                        f"IP ended at {placement.value:.6g} ({placement.status})")
    placement.bound = min(max(placement.bound, path_bound), placement.value)
    placement.seconds = time.perf_counter() - started
    scip.emit(progress, f"{label}: value {placement.value:.6g}, bound {placement.bound:.6g}, "
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
    placement.status = scip.status_name(model)
    return placement


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
