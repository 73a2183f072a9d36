"""Baseline placements, each scored by the one trusted evaluator.

These are the comparison points of Tarnawski et al. (NeurIPS 2020, Section 6) plus two
trivial ones; none of them proves anything, so every result carries ``bound = -inf`` and
``status = "heuristic"``.

- ``greedy_latency``: fill the accelerators one after another in topological order while
  memory fits, the rest on a CPU. O(n + m).
- ``local_search``: first-improvement moves and swaps of nodes between devices with random
  restarts, every candidate scored by ``evaluate``. O(restarts * sweeps * n * D * (n + m)),
  cut by a time limit.
- ``partitioner``: METIS (pymetis) k-way partition of the undirected graph weighted by
  latency and transfer cost, then memory repair and unsupported nodes to a CPU.
- ``pipedream``: PipeDream's linearized dynamic program (Narayanan et al., SOSP 2019): cut one
  topological order into consecutive stages, one per device. O(n^2 * S) for S device-count
  states.
- ``single_accelerator``, ``all_cpu``, ``from_split_file``.

``check_feasible`` rejects, before any solver runs, instances where some node fits no device.
"""

from __future__ import annotations

import itertools
import math
import random
import time
from collections.abc import Sequence

import numpy as np

from fpgaplace.errors import FpgaplaceError
from fpgaplace.solvers.problem import Placement, PlacementProblem

Objective = str  # "throughput" | "latency"


# --------------------------------------------------------------------------- shared helpers


def check_feasible(problem: PlacementProblem) -> None:
    """Raise FpgaplaceError if some node (or colour class) fits on no device.

    A node fits a CPU kind when its latency there is finite; it fits an accelerator kind when
    its latency there is finite and its size (with its whole colour class) is at most that
    kind's memory. Also checks that the nodes that cannot run on any CPU fit in the total
    accelerator memory. O(n * K).
    """
    where = f"{problem.source}: " if problem.source else ""
    usable = [k for k, kind in enumerate(problem.kinds) if kind.count > 0]
    class_size: dict[int, float] = {}
    for v in range(problem.n):
        c = int(problem.color[v])
        if c >= 0:
            class_size[c] = class_size.get(c, 0.0) + float(problem.size[v])
    cpu_only_bytes = 0.0
    for v in range(problem.n):
        c = int(problem.color[v])
        need = class_size[c] if c >= 0 else float(problem.size[v])
        if any(problem.kinds[k].is_cpu and math.isfinite(problem.latency[v, k]) for k in usable):
            continue
        accel = [
            k for k in usable
            if not problem.kinds[k].is_cpu and math.isfinite(problem.latency[v, k])
        ]
        label = f"node {problem.names[v]!r} (id {problem.ids[v]})"
        if not accel:
            raise FpgaplaceError(
                f"{where}{label} can run on no available device "
                "(unsupported on every accelerator and no CPU can run it)"
            )
        largest = max(problem.kinds[k].memory for k in accel)
        if need > largest:
            what = "its colour class needs" if c >= 0 and need > problem.size[v] else "needs"
            raise FpgaplaceError(
                f"{where}{label} {what} {need:.0f} bytes but the largest accelerator it can run "
                f"on holds {largest:.0f} bytes (short by {need - largest:.0f} bytes) and no CPU "
                "can run it"
            )
        cpu_only_bytes += float(problem.size[v])
    total = sum(
        problem.kinds[k].memory * problem.kinds[k].count
        for k in usable
        if not problem.kinds[k].is_cpu
    )
    if cpu_only_bytes > total:
        raise FpgaplaceError(
            f"{where}the nodes no CPU can run need {cpu_only_bytes:.0f} bytes but all "
            f"accelerators together hold {total:.0f} bytes (short by "
            f"{cpu_only_bytes - total:.0f} bytes)"
        )


def topological_order(problem: PlacementProblem) -> list[int]:
    """Kahn's algorithm, smallest index first among ready nodes (deterministic). O(m log n)."""
    import heapq

    indegree = [0] * problem.n
    for _, v in problem.edges:
        indegree[v] += 1
    succ = problem.successors()
    ready = [v for v in range(problem.n) if indegree[v] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        u = heapq.heappop(ready)
        order.append(u)
        for v in succ[u]:
            indegree[v] -= 1
            if indegree[v] == 0:
                heapq.heappush(ready, v)
    if len(order) != problem.n:
        raise FpgaplaceError(f"{problem.source or 'graph'}: the graph has a cycle")
    return order


def _device_lists(problem: PlacementProblem) -> tuple[list[int], list[int]]:
    """Indices into problem.devices() of the accelerators and of the CPU cores."""
    accels, cpus = [], []
    for d, (k, _) in enumerate(problem.devices()):
        (cpus if problem.kinds[k].is_cpu else accels).append(d)
    return accels, cpus


def _kind_of(problem: PlacementProblem) -> list[int]:
    return [k for k, _ in problem.devices()]


def _score(
    problem: PlacementProblem,
    device: np.ndarray,
    method: str,
    objective: Objective,
    started: float,
    order: np.ndarray | None = None,
    contiguous: bool = True,
) -> Placement:
    """Wrap an assignment as a Placement whose value the evaluator computed."""
    from fpgaplace.solvers.evaluate import evaluate

    placement = Placement(
        device=np.asarray(device, dtype=np.int64),
        order=order,
        method=method,
        objective=objective,
        status="heuristic",
        contiguous=contiguous,
    )
    result = evaluate(problem, placement)
    placement.contiguous = bool(result.contiguous)
    if result.feasible:
        placement.value = float(result.max_load if objective == "throughput" else result.latency)
    else:
        placement.value = math.inf
        placement.status = "infeasible"
    placement.seconds = time.perf_counter() - started
    return placement


def _objective_value(problem: PlacementProblem, placement: Placement, objective: Objective) -> float:
    from fpgaplace.solvers.evaluate import evaluate

    result = evaluate(problem, placement)
    if not result.feasible:
        return math.inf
    if objective == "throughput":
        return float(result.max_load)
    return float(result.latency)


def _check_objective(objective: Objective) -> None:
    if objective not in ("throughput", "latency"):
        raise FpgaplaceError(f"objective {objective!r}: expected 'throughput' or 'latency'")


def _cpu_for(problem: PlacementProblem, v: int, cpus: Sequence[int], load: dict[int, float]) -> int:
    """The least-loaded CPU core that can run v (-1 if none)."""
    kind = _kind_of(problem)
    allowed = [d for d in cpus if math.isfinite(problem.latency[v, kind[d]])]
    if not allowed:
        return -1
    best = min(allowed, key=lambda d: (load[d], d))
    load[best] += float(problem.latency[v, kind[best]])
    return best


# --------------------------------------------------------------------------- baselines


def greedy_latency(problem: PlacementProblem) -> Placement:
    """Fill accelerators one after another in topological order while memory fits.

    A node that does not fit the current accelerator closes it and opens the next one; a node
    an accelerator cannot run, and everything after the last accelerator is full, goes to the
    least-loaded CPU core. Each accelerator's nodes are cut into subgraphs at every CPU node
    that interrupts them, so every subgraph is a run of the topological order (hence convex)
    and the order of subgraphs follows the topological order. O(n + m).
    """
    started = time.perf_counter()
    check_feasible(problem)
    accels, cpus = _device_lists(problem)
    kind = _kind_of(problem)
    device = np.full(problem.n, -1, dtype=np.int64)
    order = np.zeros(problem.n, dtype=np.int64)
    cpu_load = {d: 0.0 for d in cpus}
    current, used = 0, 0.0
    subgraph = {d: 0 for d in accels}
    interrupted = False
    for v in topological_order(problem):
        placed = False
        while current < len(accels):
            d = accels[current]
            if not math.isfinite(problem.latency[v, kind[d]]):
                break
            if used + problem.size[v] <= problem.kinds[kind[d]].memory:
                if interrupted:
                    subgraph[d] += 1
                    interrupted = False
                device[v], order[v] = d, subgraph[d]
                used += float(problem.size[v])
                placed = True
                break
            current, used, interrupted = current + 1, 0.0, False
        if placed:
            continue
        d = _cpu_for(problem, v, cpus, cpu_load)
        if d < 0:
            raise FpgaplaceError(
                f"{problem.source or 'problem'}: greedy placement found no room for node "
                f"{problem.names[v]!r} (id {problem.ids[v]}); the accelerators are full and no "
                "CPU can run it"
            )
        device[v] = d
        interrupted = True
    return _score(problem, device, "greedy", "latency", started, order=order)


def single_accelerator(problem: PlacementProblem, objective: Objective = "throughput") -> Placement:
    """Everything on the first accelerator, nodes it cannot run on the least-loaded CPU core.

    Infeasible (value inf, status "infeasible") when the model does not fit its memory.
    """
    started = time.perf_counter()
    _check_objective(objective)
    accels, cpus = _device_lists(problem)
    kind = _kind_of(problem)
    cpu_load = {d: 0.0 for d in cpus}
    device = np.full(problem.n, -1, dtype=np.int64)
    for v in topological_order(problem):
        if accels and math.isfinite(problem.latency[v, kind[accels[0]]]):
            device[v] = accels[0]
        else:
            device[v] = _cpu_for(problem, v, cpus, cpu_load)
    if (device < 0).any():
        v = int(np.flatnonzero(device < 0)[0])
        raise FpgaplaceError(
            f"{problem.source or 'problem'}: node {problem.names[v]!r} (id {problem.ids[v]}) "
            "cannot run on the first accelerator and no CPU can run it"
        )
    return _score(problem, device, "single", objective, started)


def all_cpu(problem: PlacementProblem, objective: Objective = "throughput") -> Placement:
    """Everything on the first CPU core (a single-CPU baseline)."""
    started = time.perf_counter()
    _check_objective(objective)
    _, cpus = _device_lists(problem)
    if not cpus:
        raise FpgaplaceError(f"{problem.source or 'problem'}: maxCPUs is 0, expected a CPU core")
    kind = _kind_of(problem)
    bad = np.flatnonzero(~np.isfinite(problem.latency[:, kind[cpus[0]]]))
    if len(bad):
        v = int(bad[0])
        raise FpgaplaceError(
            f"{problem.source or 'problem'}: node {problem.names[v]!r} (id {problem.ids[v]}) "
            "cannot run on a CPU"
        )
    return _score(problem, np.full(problem.n, cpus[0]), "all-cpu", objective, started)


def from_split_file(path: str, problem: PlacementProblem, objective: Objective = "throughput"
                    ) -> Placement:
    """A given split (the paper's expert-split format), scored by the evaluator."""
    from fpgaplace.workload import load_split

    started = time.perf_counter()
    _check_objective(objective)
    given = load_split(path, problem)
    placement = _score(problem, given.device, "split-file", objective, started, order=given.order)
    return placement


# --------------------------------------------------------------------------- PipeDream DP


def _stage_transfer_costs(problem: PlacementProblem, topo: list[int]) -> np.ndarray:
    """cost[i, j] = transfer of the stage topo[i:j] (j > i): every node with an edge crossing
    the stage boundary, counted once. Built incrementally for each i in O(n * m) total."""
    n = problem.n
    position = np.empty(n, dtype=np.int64)
    position[topo] = np.arange(n)
    succ = problem.successors()
    pred = problem.predecessors()
    cost = np.zeros((n + 1, n + 1))
    c = problem.transfer
    outdegree = np.array([len(s) for s in succ], dtype=np.int64)
    for i in range(n):
        # Stage [i, j): u pays if (u inside and some successor outside) or (u outside and some
        # successor inside). Adding topo[j-1] changes only that node and its predecessors.
        inside_succ = np.zeros(n, dtype=np.int64)
        paying = np.zeros(n, dtype=bool)
        total = 0.0
        for j in range(i + 1, n + 1):
            v = topo[j - 1]
            for u in pred[v]:
                inside_succ[u] += 1
            for u in {v, *pred[v]}:
                in_stage = i <= position[u] < j
                pays = (outdegree[u] > inside_succ[u]) if in_stage else inside_succ[u] > 0
                if pays != paying[u]:
                    total += c[u] if pays else -c[u]
                    paying[u] = pays
            cost[i, j] = total
    return cost


def pipedream(problem: PlacementProblem, objective: Objective = "throughput") -> Placement:
    """PipeDream-style linearized DP over prefixes of one topological order.

    Stages are consecutive runs of the order; each goes to a distinct device (accelerators pay
    their stage's boundary transfers and need its memory to fit). For throughput the DP
    minimises the largest stage load, for latency the sum of stage times (a chain). State: the
    prefix length and how many devices of each kind are used. O(n^2 * S * K), S = number of
    device-count states, K = device kinds.
    """
    started = time.perf_counter()
    _check_objective(objective)
    check_feasible(problem)
    topo = topological_order(problem)
    n = problem.n
    kinds = [k for k, kind in enumerate(problem.kinds) if kind.count > 0]
    transfer = _stage_transfer_costs(problem, topo)
    lat = problem.latency[topo][:, kinds]  # (n, K)
    prefix_lat = np.vstack([np.zeros(len(kinds)), np.cumsum(np.where(np.isfinite(lat), lat, 0), 0)])
    unsupported = np.vstack([np.zeros(len(kinds)), np.cumsum(~np.isfinite(lat), 0)])
    prefix_size = np.concatenate([[0.0], np.cumsum(problem.size[topo])])
    states = list(itertools.product(*[range(problem.kinds[k].count + 1) for k in kinds]))
    state_index = {s: i for i, s in enumerate(states)}
    best = np.full((n + 1, len(states)), math.inf)
    back_stage = np.full((n + 1, len(states)), -1, dtype=np.int64)
    back_state = np.full((n + 1, len(states)), -1, dtype=np.int64)
    back_kind = np.full((n + 1, len(states)), -1, dtype=np.int64)
    best[0, state_index[tuple(0 for _ in kinds)]] = 0.0
    for j in range(1, n + 1):
        for slot, k in enumerate(kinds):
            # stage topo[i:j] on a device of kind k, for every i < j at once
            stage = prefix_lat[j, slot] - prefix_lat[:j, slot]
            allowed = unsupported[j, slot] - unsupported[:j, slot] == 0
            if not problem.kinds[k].is_cpu:
                stage = stage + transfer[:j, j]
                allowed &= prefix_size[j] - prefix_size[:j] <= problem.kinds[k].memory
            stage = np.where(allowed, stage, math.inf)
            for s_index, state in enumerate(states):
                if state[slot] >= problem.kinds[k].count:
                    continue
                before = best[:j, s_index]
                if objective == "throughput":
                    value = np.maximum(before, stage)
                else:
                    value = before + stage
                i = int(np.argmin(value))
                nxt = list(state)
                nxt[slot] += 1
                t = state_index[tuple(nxt)]
                if value[i] < best[j, t]:
                    best[j, t] = value[i]
                    back_stage[j, t], back_state[j, t], back_kind[j, t] = i, s_index, k
    end = int(np.argmin(best[n]))
    if not math.isfinite(best[n, end]):
        raise FpgaplaceError(
            f"{problem.source or 'problem'}: no split of the topological order into stages fits "
            "the devices' memory"
        )
    device = np.full(n, -1, dtype=np.int64)
    next_ordinal = {k: 0 for k in kinds}
    first_device = {}
    for d, (k, ordinal) in enumerate(problem.devices()):
        if ordinal == 0:
            first_device[k] = d
    j, s = n, end
    while j > 0:
        i, s_prev, k = int(back_stage[j, s]), int(back_state[j, s]), int(back_kind[j, s])
        device[[topo[p] for p in range(i, j)]] = first_device[k] + next_ordinal[k]
        next_ordinal[k] += 1
        j, s = i, s_prev
    return _score(problem, device, "pipedream", objective, started)


# --------------------------------------------------------------------------- partitioner


def _repair(problem: PlacementProblem, device: np.ndarray) -> np.ndarray:
    """Move nodes off accelerators that cannot run them or whose memory overflows.

    Unsupported nodes go to the least-loaded CPU core; on an overflowing accelerator the nodes
    latest in topological order move to another accelerator with room, else to a CPU.
    """
    accels, cpus = _device_lists(problem)
    kind = _kind_of(problem)
    device = device.copy()
    cpu_load = {d: 0.0 for d in cpus}
    for v in range(problem.n):
        if device[v] in cpu_load:
            cpu_load[device[v]] += float(problem.latency[v, kind[device[v]]])
    used = {d: 0.0 for d in accels}
    for v in topological_order(problem):
        d = int(device[v])
        if d in used:
            memory = problem.kinds[kind[d]].memory
            if math.isfinite(problem.latency[v, kind[d]]) and used[d] + problem.size[v] <= memory:
                used[d] += float(problem.size[v])
                continue
            spare = [
                a for a in accels
                if math.isfinite(problem.latency[v, kind[a]])
                and used[a] + problem.size[v] <= problem.kinds[kind[a]].memory
            ]
            target = _cpu_for(problem, v, cpus, cpu_load)
            if target < 0 and spare:
                target = spare[0]
                used[target] += float(problem.size[v])
            if target < 0:
                raise FpgaplaceError(
                    f"{problem.source or 'problem'}: no room for node {problem.names[v]!r} "
                    f"(id {problem.ids[v]}) on any device"
                )
            device[v] = target
        elif not math.isfinite(problem.latency[v, kind[d]]):
            moved = _cpu_for(problem, v, cpus, cpu_load)
            device[v] = moved if moved >= 0 else device[v]
    return device


def partitioner(problem: PlacementProblem, objective: Objective = "throughput") -> Placement:
    """METIS k-way partition (pymetis) into one part per accelerator, then repaired.

    Vertex weight: the node's accelerator latency; edge weight: the source's transfer cost
    (both scaled to integers). Parts are accelerators; unsupported nodes and memory overflow
    go to CPUs (see ``_repair``). METIS is multilevel, roughly O(m log k).
    """
    import pymetis

    started = time.perf_counter()
    _check_objective(objective)
    check_feasible(problem)
    accels, cpus = _device_lists(problem)
    kind = _kind_of(problem)
    n = problem.n
    if not accels:
        device = np.array([cpus[0]] * n)
        return _score(problem, device, "partitioner", objective, started)
    lat = problem.latency[:, kind[accels[0]]]
    finite = np.where(np.isfinite(lat), lat, np.nan)
    scale = 1000.0 / max(np.nanmax(finite) if np.isfinite(finite).any() else 1.0, 1e-12)
    vweights = [max(1, int(round(x * scale))) if np.isfinite(x) else 1 for x in finite]
    neighbours: list[dict[int, float]] = [dict() for _ in range(n)]
    cmax = max(float(problem.transfer.max()) if n else 0.0, 1e-12)
    for u, v in problem.edges:
        w = float(problem.transfer[u]) / cmax
        neighbours[u][v] = neighbours[u].get(v, 0.0) + w
        neighbours[v][u] = neighbours[v].get(u, 0.0) + w
    xadj, adjncy, eweights = [0], [], []
    for u in range(n):
        for v, w in sorted(neighbours[u].items()):
            adjncy.append(v)
            eweights.append(max(1, int(round(w * 1000))))
        xadj.append(len(adjncy))
    parts = len(accels)
    if parts == 1 or n <= parts:
        membership = [min(v, parts - 1) for v in range(n)]
    else:
        _, membership = pymetis.part_graph(
            parts, xadj=xadj, adjncy=adjncy, vweights=vweights, eweights=eweights
        )
    device = np.array([accels[p] for p in membership], dtype=np.int64)
    device = _repair(problem, device)
    return _score(problem, device, "partitioner", objective, started, contiguous=False)


# --------------------------------------------------------------------------- local search


def _is_contiguous_set(members: set[int], succ: list[list[int]]) -> bool:
    """True if no path leaves ``members`` and comes back (convex set). O(n + m)."""
    frontier = [w for u in members for w in succ[u] if w not in members]
    seen = set(frontier)
    while frontier:
        u = frontier.pop()
        for w in succ[u]:
            if w in members:
                return False
            if w not in seen:
                seen.add(w)
                frontier.append(w)
    return True


def local_search(
    problem: PlacementProblem,
    objective: Objective = "throughput",
    restarts: int = 8,
    seed: int = 0,
    time_limit: float = 10.0,
    contiguous: bool = True,
) -> Placement:
    """First-improvement local search over single-node moves and pair swaps, with restarts.

    Start: the better of greedy and PipeDream; each restart perturbs the best placement by
    moving a few random nodes. A candidate is accepted if the evaluator scores it strictly
    better (and, with ``contiguous``, every device's set stays convex). Stops at
    ``time_limit`` seconds. Each sweep costs O(n * D) evaluations of O(n + m) each.
    """
    started = time.perf_counter()
    _check_objective(objective)
    check_feasible(problem)
    rng = random.Random(seed)
    succ = problem.successors()
    kind = _kind_of(problem)
    devices = list(range(len(problem.devices())))
    starts = [greedy_latency(problem)]
    try:
        starts.append(pipedream(problem, objective))
    except FpgaplaceError:
        pass

    def value_of(device: np.ndarray) -> float:
        if contiguous and not all(
            _is_contiguous_set(set(np.flatnonzero(device == d).tolist()), succ)
            for d in set(device.tolist())
        ):
            return math.inf
        return _objective_value(problem, Placement(device=device, objective=objective), objective)

    best_device = min(starts, key=lambda p: value_of(p.device)).device.copy()
    best_value = value_of(best_device)
    deadline = started + time_limit

    def improve(device: np.ndarray, value: float) -> tuple[np.ndarray, float]:
        improved = True
        while improved and time.perf_counter() < deadline:
            improved = False
            nodes = list(range(problem.n))
            rng.shuffle(nodes)
            for v in nodes:
                if time.perf_counter() >= deadline:
                    break
                for d in rng.sample(devices, len(devices)):
                    if d == device[v] or not math.isfinite(problem.latency[v, kind[d]]):
                        continue
                    candidate = device.copy()
                    candidate[v] = d
                    others = np.flatnonzero(device == d)
                    if len(others) and rng.random() < 0.5:
                        w = int(others[rng.randrange(len(others))])
                        if math.isfinite(problem.latency[w, kind[device[v]]]):
                            candidate[w] = device[v]
                    score = value_of(candidate)
                    if score < value - 1e-12:
                        device, value, improved = candidate, score, True
                        break
        return device, value

    best_device, best_value = improve(best_device, best_value)
    for _ in range(max(0, restarts - 1)):
        if time.perf_counter() >= deadline:
            break
        device = best_device.copy()
        for v in rng.sample(range(problem.n), min(problem.n, 3)):
            allowed = [d for d in devices if math.isfinite(problem.latency[v, kind[d]])]
            device[v] = rng.choice(allowed)
        device, value = improve(device, value_of(device))
        if value < best_value:
            best_device, best_value = device, value
    return _score(problem, best_device, "local-search", objective, started, contiguous=contiguous)
