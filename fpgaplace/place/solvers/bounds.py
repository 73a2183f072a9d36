"""Lower bounds on the single-sample latency of any placement (the evaluator's latency model).

``critical_path_bound`` is a dynamic program over the DAG that follows chains of latest
predecessors and covers them with accelerator segments (each within a device's memory, paying
its entry and exit transfers, at most ``subgraphs_per_device`` times the accelerator count of
them on any path) and CPU ops. It is never below ``static_path_bound``, the longest path at
cheapest latencies, and is usually far above it on transfer-heavy workloads. Our own
derivation of the bound the placement issue describes (Tarnawski et al., NeurIPS 2020, give
the latency model, not this bound).

Validity (the facts about every placement it rests on; ``evaluate`` module docstring):
    (F1) A unit (an accelerator subgraph, or one CPU op) starts after every input tensor it reads
         exists, and all its nodes' outputs exist when it ends. An accelerator unit lasts at
         least the work a_t of its nodes, plus c(x) for each tensor x it reads from outside, plus
         c(y) for each of its tensors y read outside it; a CPU op lasts p(v).
    (F2) Units are convex (a non-convex one would wait on itself: deadlock), so a path meets a
         unit in one run of consecutive nodes; a path that ends inside unit U meets U in a suffix.
    (F3) A unit's nodes sit on one device: their sizes sum to at most its memory M_t.
    (F4) A path that meets accelerator units in more than s runs is impossible when the
         accelerators run s subgraphs in all (each run is a distinct unit by F2).

    Let E(v) be the time v's output exists. For s = 0..S, with S = q * (accelerators), define
    lower bounds over placements in which every path ending at v meets accelerator units in at
    most s runs:
        Y(v, s) on E(v) when v's output is read by another unit (so an accelerator pays c(v)),
        Z(v, s) on E(v) itself.
    CPU op:  E(v) >= E(u) + p(v) for every predecessor u (F1), and u's output is read outside
        u's unit, so  Bcpu(v, s) = max_u Y(u, s) + p(v)  (p(v) if v has no predecessor).
    Accelerator unit U of kind t holding v: take any predecessor u and the chain
        v, u, w(u), w(w(u)), ...  where w(x) is a fixed predecessor of x (the one with the largest
        Y; a second chain follows the one with the largest static finish). The chain is a path
        ending in U, so U holds a suffix P_i..v of it (F2) whose sizes fit
        M_t (F3). If the suffix stops before the chain's start, x = P_(i-1) is an input of U
        outside it: U starts after E(x) and reads x (c(x)), and every path to x meets accelerators
        in at most s - 1 runs (a path to x that met U would leave U and re-enter it, against F2).
        So  E(v) >= min over suffixes of [Y(x, s - 1) + c(x)] + a_t(P_i..v), the bracket 0 when the
        suffix is the whole chain; minimised over kinds t this is A(v, s) (a bound on U's end
        before v's own write, which is added in Y). Every predecessor gives a valid bound, so
        the largest is taken; a chain followed for ``MAX_CHAIN`` nodes ends with the option
        "the suffix reaches further back", bounded below by its work so far (entry terms >= 0).
    Then  Z(v, s) = max(static(v), min(Bcpu, A))  and  Y(v, s) = max(static(v), min(Bcpu, A + c(v))),
    static(v) the longest path to v at cheapest latencies (itself a valid bound on E(v)). The
    latency is at least E(v) for every v, so  max_v Z(v, S)  bounds it (and static's maximum).
    The bounds hold with finite CPU cores too (cores can only delay ops).

Complexity: O(sum over nodes of in-degree * min(L, chain length) * (S + 1) * kinds), where the
walk length L is ``MAX_CHAIN``, shortened on large graphs so that 2 * edges * L stays within
``CHAIN_STEPS`` (at least ``MIN_CHAIN``: a shorter walk takes the "further back" option sooner,
a weaker bound but still one; a 2,000-op DAG with 8 inputs an op once walked 8 million steps).
Past ``MAX_FINISH_CELLS`` table cells or ``MAX_WALKED_NODES`` nodes
the static finish is the bound (a 20,000-op chain once spent 27 s in the walks).
"""

from __future__ import annotations

import math

import numpy as np

from fpgaplace.place.solvers.problem import PlacementProblem
from fpgaplace.util.graphs import topological_order

MAX_FINISH_CELLS = 4_000_000  # nodes x (runs + 1) of the finish tables (two float64 tables: 64 MB)
MAX_CHAIN = 256  # chain nodes one suffix walk may visit before the "further back" option
CHAIN_STEPS = 150_000  # walks (2 per edge) x walk length of one bound, at most (numpy steps: ~2 s)
MIN_CHAIN = 8  # the shortest walk however large the graph
MAX_WALKED_NODES = 5_000  # past this many nodes the static finish is the bound (the walks: ~1 s a 1,000 nodes)


def static_path_bound(problem: PlacementProblem) -> float:
    """The longest path at each node's cheapest latency on an available kind. O(n + m)."""
    return float(_static_finish(problem).max(initial=0.0))


def cheapest_latency(problem: PlacementProblem, latency: np.ndarray | None = None) -> np.ndarray:
    """Each row's least latency on a kind with devices (inf where there is none), for the nodes
    (``latency`` None: ``problem.latency``) or for groups of them (their summed latencies, inf
    where a member cannot run on the kind). O(rows * kinds)."""
    latency = problem.latency if latency is None else latency
    usable = problem.available_kinds()
    if not usable:
        return np.full(latency.shape[0], np.inf)
    return np.min(latency[:, usable], axis=1)


def work_load_bound(problem: PlacementProblem, cheapest: np.ndarray) -> float:
    """A lower bound on the max-load of every placement of units (nodes, or groups that always
    share a device) with cheapest latencies ``cheapest`` (``cheapest_latency``): the largest of
    them, and their total over all devices, since loads are at least compute. inf when there is
    no device or some unit runs on none. O(rows)."""
    devices = sum(kind.count for kind in problem.kinds)
    if not devices or not np.all(np.isfinite(cheapest)):
        return math.inf
    return float(max(cheapest.max(initial=0.0), cheapest.sum() / devices))


def _static_finish(problem: PlacementProblem) -> np.ndarray:
    cheapest = cheapest_latency(problem)
    preds = problem.predecessors()
    finish = np.zeros(problem.n)
    for v in topological_order(problem.n, problem.edges):
        finish[v] = max((finish[u] for u in preds[v]), default=0.0) + cheapest[v]
    return finish


def critical_path_bound(problem: PlacementProblem, subgraphs_per_device: int = 1) -> float:
    """A lower bound on the latency of every placement with at most ``subgraphs_per_device``
    subgraphs per accelerator: the larger of the finish bound (module docstring; at least
    ``static_path_bound``) and ``chain.path_latency_bound`` (a longest path split into
    intervals, memory and the tensors crossing between them counted: ResNet-50's layer graph
    755 -> 997). Pass ``problem.n`` (or more) for a bound on every placement."""
    if problem.n == 0:
        return 0.0
    key = ("path_latency_bound", int(subgraphs_per_device), _fingerprint(problem))
    if key not in problem.meta:
        from fpgaplace.place.solvers.chain import path_latency_bound

        problem.meta[key] = path_latency_bound(problem, subgraphs_per_device, cheapest_latency(problem))
    return max(float(finish_lower_bounds(problem, subgraphs_per_device).max()), problem.meta[key])


def finish_lower_bounds(problem: PlacementProblem, subgraphs_per_device: int = 1) -> np.ndarray:
    """Z(v, S) of the module docstring for every node v: a lower bound on the time v's output
    exists in any placement with at most ``subgraphs_per_device`` subgraphs per accelerator.
    Kept in ``problem.meta`` under a fingerprint of the data it reads (one solve asks twice)."""
    key = ("finish_lower_bounds", int(subgraphs_per_device), _fingerprint(problem))
    if key not in problem.meta:
        problem.meta[key] = _finish_lower_bounds(problem, subgraphs_per_device)
    return problem.meta[key].copy()


def _fingerprint(problem: PlacementProblem) -> int:
    kinds = tuple((kind.count, kind.memory, kind.is_cpu) for kind in problem.kinds)
    arrays = (problem.latency, problem.size, problem.transfer)
    return hash((kinds, tuple(problem.edges), *(np.ascontiguousarray(a).tobytes() for a in arrays)))


def _finish_lower_bounds(problem: PlacementProblem, subgraphs_per_device: int) -> np.ndarray:
    n = problem.n
    accelerators = [k for k, kind in enumerate(problem.kinds) if kind.count > 0 and not kind.is_cpu]
    cpus = [k for k, kind in enumerate(problem.kinds) if kind.count > 0 and kind.is_cpu]
    per_device = min(max(1, int(subgraphs_per_device)), max(n, 1))  # a path meets at most n units
    runs = min(per_device * sum(problem.kinds[k].count for k in accelerators), max(n, 1))
    static = _static_finish(problem)
    walks = 2 * max(len(problem.edges), n)  # two chains followed from each predecessor
    if n * (runs + 1) > MAX_FINISH_CELLS or n > MAX_WALKED_NODES or walks * MIN_CHAIN > CHAIN_STEPS:
        return static  # the static finish is a bound too
    cpu_time = np.min(problem.latency[:, cpus], axis=1) if cpus else np.full(n, np.inf)
    walk = max(MIN_CHAIN, min(MAX_CHAIN, CHAIN_STEPS // walks))
    preds = [sorted(set(p)) for p in problem.predecessors()]
    transfer = problem.transfer
    y = np.zeros((n, runs + 1))  # Y(v, s)
    z = np.zeros((n, runs + 1))  # Z(v, s)
    latest = np.full(n, -1, dtype=np.int64)  # w(v): the predecessor with the largest Y(., S)
    heaviest = np.full(n, -1, dtype=np.int64)  # w'(v): the one with the largest static finish
    for v in topological_order(n, problem.edges):
        ready = np.max([y[u] for u in preds[v]], axis=0) if preds[v] else np.zeros(runs + 1)
        on_cpu = ready + cpu_time[v]
        on_accelerator = np.full(runs + 1, np.inf)
        for k in accelerators:
            on_accelerator = np.minimum(on_accelerator, _accelerator_finish(problem, k, v, preds[v],
                                                                             (latest, heaviest), y, runs, walk))
        z[v] = np.maximum(static[v], np.minimum(on_cpu, on_accelerator))
        y[v] = np.maximum(static[v], np.minimum(on_cpu, on_accelerator + transfer[v]))
        if preds[v]:
            latest[v] = max(preds[v], key=lambda u: y[u, runs])
            heaviest[v] = max(preds[v], key=lambda u: static[u])
    return z[:, runs]


def static_tails(problem: PlacementProblem) -> np.ndarray:
    """Work that must still run after each node's output exists, in any placement: the longest
    path after it at cheapest latencies, counting a successor w only where w is surely another
    unit than v (v or w can run on no accelerator, so one of them is a CPU op, a unit of its own;
    a successor sharing v's accelerator unit finishes with it and adds nothing). A node's output
    exists at the latest ``latency - tail`` in a schedule that ends by ``latency``. O(n + m)."""
    cheapest = cheapest_latency(problem)
    accelerators = [k for k, kind in enumerate(problem.kinds) if kind.count > 0 and not kind.is_cpu]
    cpu_only = ~np.any(np.isfinite(problem.latency[:, accelerators]), axis=1) if accelerators \
        else np.ones(problem.n, dtype=bool)
    succ = problem.successors()
    tail = np.zeros(problem.n)
    for v in reversed(topological_order(problem.n, problem.edges)):
        tail[v] = max((tail[w] + (cheapest[w] if cpu_only[v] or cpu_only[w] else 0.0) for w in succ[v]),
                      default=0.0)
    return tail


def _accelerator_finish(problem: PlacementProblem, kind: int, v: int, preds: list[int],
                        pointers: tuple[np.ndarray, ...], y: np.ndarray, runs: int, walk: int) -> np.ndarray:
    """A(v, s) on one accelerator kind: the largest over predecessors u of the least, over
    suffixes of the chain v, u, w(u), ..., of entry time plus the suffix's work (docstring)."""
    work, size = problem.latency[v, kind], problem.size[v]
    memory = problem.kinds[kind].memory
    out = np.full(runs + 1, np.inf)
    if not math.isfinite(work) or size > memory:
        return out
    if not preds:
        out[1:] = work
        return out
    best = np.full(runs + 1, -np.inf)
    for u in preds:
        for latest in pointers:
            best = np.maximum(best, _chain_minimum(problem, kind, u, latest, y, runs, work, size, memory, walk))
    out[1:] = best[1:]
    return out


def _chain_minimum(problem: PlacementProblem, kind: int, first: int, latest: np.ndarray, y: np.ndarray,
                   runs: int, work: float, size: float, memory: float, walk: int) -> np.ndarray:
    """min over suffixes of the chain first, w(first), ... (after v, whose work and size are
    given) of Y(x, s - 1) + c(x) + suffix work, for s = 1..S (index 0 unused)."""
    least = np.full(runs + 1, np.inf)
    x = first
    for _ in range(walk):
        # the suffix ends just after x: x is U's input outside it
        least[1:] = np.minimum(least[1:], y[x, :-1] + problem.transfer[x] + work)
        next_work, next_size = problem.latency[x, kind], problem.size[x]
        if not math.isfinite(next_work) or size + next_size > memory:
            return least  # x cannot join the suffix: no longer suffix exists
        work, size = work + next_work, size + next_size
        if latest[x] < 0:  # the chain starts at x: the whole chain in U, no input to wait for
            least[1:] = np.minimum(least[1:], work)
            return least
        x = int(latest[x])
    least[1:] = np.minimum(least[1:], work)  # the suffix reaches further back: at least this work
    return least


MEMORY_BOUND_MAX_OPS = 5_000  # the memory LP is built for graphs of at most this many nodes


def memory_load_bound(problem: PlacementProblem) -> float:
    """A lower bound on the max-load of every placement (contiguous or not): the least L of the
    linear program  sum_k x[v,k] = 1,  sum_v p_k(v) x[v,k] <= count_k L  (a kind's devices carry
    at least its compute),  sum_v size(v) x[v,k] <= count_k M_k  (their memory),  x[v,k] = 0
    where v cannot run on or fit into a device of kind k, and  L >= the least latency of each
    node on a kind it fits. Any placement's assignment is a feasible x with L its max-load
    (loads are at least compute), so the optimum is below it. Solved with SCIP as a plain LP:
    n * kinds columns, n + 2 kinds rows. Memory is what this sees and total work / devices does
    not: work that fits no accelerator's share of memory must run on the (slower) CPUs.
    Building the LP costs about 0.1 ms per column in Python: past ``MEMORY_BOUND_MAX_OPS`` nodes
    only the single-node floor is returned (still a bound), so large graphs keep their time limit.
    """
    from pyscipopt import Model, quicksum

    usable = problem.available_kinds()
    fits = {(v, k) for v in range(problem.n) for k in usable
            if math.isfinite(problem.latency[v, k])
            and (problem.kinds[k].is_cpu or problem.size[v] <= problem.kinds[k].memory)}
    single = [min((problem.latency[v, k] for k in usable if (v, k) in fits), default=math.inf)
              for v in range(problem.n)]
    floor = max(single, default=0.0)
    if not math.isfinite(floor) or problem.n == 0 or problem.n > MEMORY_BOUND_MAX_OPS:
        return floor if problem.n else 0.0
    model = Model("memory-load bound")
    model.hideOutput()
    load = model.addVar("L", lb=floor)
    x = {(v, k): model.addVar(f"x_{v}_{k}", lb=0.0, ub=1.0) for v, k in sorted(fits)}
    for v in range(problem.n):
        model.addCons(quicksum(x[v, k] for k in usable if (v, k) in x) == 1)
    for k in usable:
        kind = problem.kinds[k]
        on_k = [v for v in range(problem.n) if (v, k) in x]
        model.addCons(quicksum(float(problem.latency[v, k]) * x[v, k] for v in on_k) <= kind.count * load)
        if not kind.is_cpu and math.isfinite(kind.memory):
            model.addCons(quicksum(float(problem.size[v]) * x[v, k] for v in on_k) <= kind.count * kind.memory)
    model.setObjective(load, "minimize")
    model.optimize()
    if model.getStatus() != "optimal":
        return floor
    return float(model.getObjVal()) * (1 - 1e-9)  # the LP's tolerance, never above the optimum
