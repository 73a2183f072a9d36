"""Exact contiguous splits of a chain: the linear partition problem, with device kinds and memory.

A chain (every op has at most one input and one output op, one path through all of them) splits
contiguously only into intervals, one a device. Choosing the cut points to minimise the largest
load is the classic linear partition problem; here each interval also picks a device kind (the
devices of each kind are few), must fit the kind's memory and run only ops the kind supports,
and an accelerator's interval also pays the transfer of the tensor entering it and of the one
leaving it (``evaluate``'s loads for a chain).

Algorithm (our own; the bottleneck search over a greedy or DP feasibility test is the textbook
method for linear partition, e.g. Frederickson, "Optimal algorithms for tree partitioning", 1991)
    Feasibility of a bound B: reach[s][j] = "the first j ops split into intervals on the devices
    of state s (a count per kind, mixed radix) with every load <= B". States are filled in
    increasing order; from state s - e_k, an interval [i, j) on kind k is allowed when i is at
    least the memory and support window's left end L_k(j) (non-decreasing in j) and
    S_k(i) - t_in(i) >= S_k(j) + t_out(j) - B (S_k prefix sums of latency on kind k, t_in and
    t_out the boundary transfers, zero on a CPU). Transfer makes the load non-monotone in the
    interval, so the test is "the largest key S_k(i) - t_in(i) over reachable i in the window
    [L_k(j), j - 1]": a sliding-window maximum with a monotone deque, O(n) per (state, kind).
    One test is O(n * T * K) time and O(n * T) memory for T states and K kinds.
    Bisection on B between a lower bound and the best split found (each feasible test lowers
    the upper end to that split's actual max-load) to a relative width of ``PRECISION``: the
    split is optimal within it, and the last infeasible B is a lower bound on every split.

Latency on a chain is the sum of its units' times; ``solve_chain_latency`` runs the same windows
with a sliding-window minimum of f[s - e_k][i] - S_k(i) + t_in(i), CPU stretches uncounted
(exact for one subgraph on each accelerator).

Any DAG holds a chain: ``path_latency_bound`` splits a heaviest path the same way (with the
tensors of skip edges and of routes around the path, colour classes and memory counted) for a
lower bound on the latency of every placement of the DAG.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from fpgaplace.place.solvers.problem import Placement, PlacementProblem
from fpgaplace.util.errors import FpgaplaceError


class ChainInfeasible(FpgaplaceError):
    """No split of the chain fits the devices' memory and the ops they support."""


PRECISION = 1e-9  # relative width the bottleneck bisection stops at
PYTHON_OPS = 4_000  # below this many ops the kernel runs as plain Python (no numba import)
MAX_TABLE_CELLS = 100_000_000  # states x (ops + 1) of the back-link tables (two int32 each)


def chain_order(problem: PlacementProblem) -> np.ndarray | None:
    """The ops in chain order when the problem is a plain chain (one path through every op, no
    colour classes, no backward ops, no per-link transfers), else None. O(n + m)."""
    n = problem.n
    if n == 0 or len(problem.edges) != n - 1 or problem.links is not None:
        return None
    if np.any(np.asarray(problem.color) >= 0) or np.any(problem.backward):
        return None
    successor = np.full(n, -1, dtype=np.int64)
    has_input = np.zeros(n, dtype=bool)
    for u, v in problem.edges:
        if successor[u] >= 0 or has_input[v] or u == v:
            return None
        successor[u], has_input[v] = v, True
    sources = np.flatnonzero(~has_input)
    if len(sources) != 1:
        return None
    order = np.empty(n, dtype=np.int64)
    v = int(sources[0])
    for position in range(n):
        if v < 0:
            return None
        order[position] = v
        v = int(successor[v])
    return order


@dataclass
class _ChainTables:
    """Prefix sums and windows along the chain, per kind (rows) and cut position (columns 0..n)."""

    prefix: np.ndarray  # float64 (K, n+1): latency of the first j ops on kind k (unsupported: 0)
    t_in: np.ndarray  # float64 (K, n+1): transfer into an accelerator interval starting at i
    t_out: np.ndarray  # float64 (K, n+1): transfer out of one ending at j
    left: np.ndarray  # int64 (K, n+1): least start i of an interval ending at j (memory, support)
    digit: np.ndarray  # int64 (T, K): devices of each kind in state s
    stride: np.ndarray  # int64 (K,)


def _tables(problem: PlacementProblem, order: np.ndarray) -> _ChainTables:
    """O(n K)."""
    n, kinds = problem.n, problem.kinds
    latency = problem.latency[order]
    size = np.concatenate([[0.0], np.cumsum(problem.size[order])])
    transfer = problem.transfer[order]
    t_in = np.concatenate([[0.0], transfer[:-1], [0.0]])  # interval [i, j) reads op i-1's output
    t_out = np.concatenate([[0.0], transfer[:-1], [0.0]])  # and writes op j-1's (j < n)
    rows = len(kinds)
    prefix = np.zeros((rows, n + 1))
    left = np.zeros((rows, n + 1), dtype=np.int64)
    positions = np.arange(n + 1)
    for k, kind in enumerate(kinds):
        supported = np.isfinite(latency[:, k])
        prefix[k, 1:] = np.cumsum(np.where(supported, latency[:, k], 0.0))
        last_bad = np.maximum.accumulate(np.where(supported, 0, np.arange(1, n + 1)))
        by_support = np.concatenate([[0], last_bad])  # i >= (index of the last unsupported op) + 1
        limit = kind.memory * (1 + 1e-12) if math.isfinite(kind.memory) else math.inf
        by_memory = np.searchsorted(size, size - limit, side="left") if math.isfinite(limit) else 0
        left[k] = np.maximum(by_support, by_memory)
        left[k] = np.minimum(left[k], positions)  # i <= j; i = j is the empty interval (unused)
    counts = [kind.count for kind in kinds]
    digit = np.array(np.meshgrid(*[np.arange(c + 1) for c in counts], indexing="ij")).reshape(rows, -1).T
    stride = np.array([int(np.prod([c + 1 for c in counts[k + 1:]])) for k in range(rows)], dtype=np.int64)
    transfer_rows = np.array([0.0 if kind.is_cpu else 1.0 for kind in kinds])[:, None]
    return _ChainTables(prefix, transfer_rows * t_in[None, :], transfer_rows * t_out[None, :],
                        left, np.ascontiguousarray(digit.astype(np.int64)), stride)


def _windows(bound, minimise, prefix, t_in, t_out, left, digit, stride, unlimited, value, back_i, back_k,
             deque):
    """One pass over every state and kind (module docstring). ``minimise`` False: the bottleneck
    test, value[s, j] = 0 where reachable (inf elsewhere) and loads must stay <= ``bound``;
    True: value[s, j] = least summed cost (latency). A kind with ``unlimited`` set takes any
    number of intervals without counting them (CPU ops in the latency model are units of their
    own): its intervals into state s start from s itself, after the other kinds'. Back-links
    into back_i / back_k. Returns the state reaching the full chain with the least value, or
    -1. O(n T K)."""
    n_states, n_kinds = digit.shape
    n = prefix.shape[1] - 1
    value[:, :] = np.inf
    value[0, 0] = 0.0
    for s in range(n_states):
        for k in range(n_kinds):
            if not unlimited[k] and digit[s, k] > 0:
                _window(s, k, s - stride[k], bound, minimise, prefix, t_in, t_out, left, value, back_i,
                        back_k, deque)
        for k in range(n_kinds):
            if unlimited[k]:
                _window(s, k, s, bound, minimise, prefix, t_in, t_out, left, value, back_i, back_k, deque)
    best, chosen = np.inf, -1
    for s in range(n_states):
        if value[s, n] < best:
            best, chosen = value[s, n], s
    return chosen


def _window(s, k, lower, bound, minimise, prefix, t_in, t_out, left, value, back_i, back_k, deque):
    """Intervals [i, j) on kind k from state ``lower`` into state s, for every j: the best start
    in the window [left[k, j], j - 1] by a monotone deque of starts (largest key first)."""
    n = prefix.shape[1] - 1
    head, tail = 0, 0
    for j in range(1, n + 1):
        i = j - 1  # offer start j - 1 (value[lower, j - 1] is final: lower <= s, and i < j)
        if value[lower, i] < np.inf:
            key = _key(minimise, value[lower, i], prefix[k, i], t_in[k, i])
            while tail > head and _key(minimise, value[lower, deque[tail - 1]], prefix[k, deque[tail - 1]],
                                       t_in[k, deque[tail - 1]]) <= key:
                tail -= 1
            deque[tail] = i
            tail += 1
        while tail > head and deque[head] < left[k, j]:
            head += 1
        if tail == head:
            continue
        i = deque[head]
        load = prefix[k, j] - prefix[k, i] + t_in[k, i] + t_out[k, j]
        if minimise:
            candidate = value[lower, i] + load
        elif load <= bound:
            candidate = 0.0
        else:
            continue
        if candidate < value[s, j]:
            value[s, j] = candidate
            back_i[s, j] = i
            back_k[s, j] = k


def _key(minimise, before, prefix, t_in):
    """What the deque keeps largest: the start's prefix minus its inbound transfer (bottleneck), or
    minus the cost so far too (summed cost)."""
    return prefix - t_in - before if minimise else prefix - t_in


_PYTHON_KERNELS = {f.__name__: f for f in (_key, _window, _windows)}
_compiled: list[Callable] = []


def _kernel(n: int) -> Callable:
    """``_windows`` as plain Python for short chains, else compiled with numba (cached on disk; its
    helpers first, so the compiled loop calls compiled helpers)."""
    if n < PYTHON_OPS and not _compiled:
        return _windows
    if not _compiled:
        import numba

        module = globals()
        for name in ("_key", "_window"):
            module[name] = numba.njit(cache=True)(_PYTHON_KERNELS[name])
        _compiled.append(numba.njit(cache=True)(_PYTHON_KERNELS["_windows"]))
    return _compiled[0]


class _Search:
    """The tables and work arrays of one chain, and splits read back from them."""

    def __init__(self, problem: PlacementProblem, order: np.ndarray):
        self.problem, self.order = problem, order
        self.tables = _tables(problem, order)
        n_states = self.tables.digit.shape[0]
        if n_states * (problem.n + 1) > MAX_TABLE_CELLS:
            raise FpgaplaceError(f"{problem.source or 'problem'}: {n_states} device-count states x "
                                 f"{problem.n:,} ops is more than the chain split's "
                                 f"{MAX_TABLE_CELLS:,} table cells")
        shape = (n_states, problem.n + 1)
        self.value = np.empty(shape)
        self.back_i = np.zeros(shape, dtype=np.int32)
        self.back_k = np.zeros(shape, dtype=np.int32)
        self.deque = np.zeros(problem.n + 1, dtype=np.int64)
        self.run = _kernel(problem.n)

    def split(self, bound: float, minimise: bool = False) -> np.ndarray | None:
        """The device of each op of a split whose loads are <= ``bound``, or None when there is
        none; ``minimise``: the split of least summed cost, CPU intervals not counted (all on
        the first core of their kind)."""
        t = self.tables
        unlimited = np.array([minimise and kind.is_cpu and kind.count > 0 for kind in self.problem.kinds])
        state = self.run(bound, minimise, t.prefix, t.t_in, t.t_out, t.left, t.digit, t.stride, unlimited,
                         self.value, self.back_i, self.back_k, self.deque)
        return None if state < 0 else self._devices(int(state), unlimited)

    def _devices(self, state: int, unlimited: np.ndarray) -> np.ndarray:
        first = np.cumsum([0] + [kind.count for kind in self.problem.kinds])
        used = [0] * len(self.problem.kinds)
        device = np.empty(self.problem.n, dtype=np.int64)
        j = self.problem.n
        while j > 0:
            i, k = int(self.back_i[state, j]), int(self.back_k[state, j])
            device[self.order[i:j]] = first[k] + used[k]
            if not unlimited[k]:
                used[k] += 1
                state -= int(self.tables.stride[k])
            j = i
        return device

    def max_load(self, device: np.ndarray) -> float:
        """The split's largest load from the prefix sums (the evaluator's loads, up to rounding)."""
        t, kinds = self.tables, self.problem.device_kinds()
        along = device[self.order]
        cuts = np.flatnonzero(np.diff(along)) + 1
        starts, ends = np.concatenate([[0], cuts]), np.concatenate([cuts, [self.problem.n]])
        kind = np.array(kinds)[along[starts]]
        loads = t.prefix[kind, ends] - t.prefix[kind, starts] + t.t_in[kind, starts] + t.t_out[kind, ends]
        return float(loads.max(initial=0.0))


def solve_chain(problem: PlacementProblem, order: np.ndarray, time_limit: float | None = None,
                lower: float = 0.0) -> Placement:
    """The contiguous split of least max-load of a chain (``chain_order``), within ``PRECISION``
    (status "optimal"), or the best found when ``time_limit`` ends the bisection first (status
    "time limit"); ``bound`` a lower bound on every contiguous split. ``lower``, a known lower
    bound (e.g. ``bounds.work_load_bound``), shortens the bisection. Raises ``FpgaplaceError``
    when no split fits the devices' memory and support. O(n T K log(1 / PRECISION))."""
    started = time.monotonic()
    deadline = started + (time_limit if time_limit is not None else math.inf)
    search = _Search(problem, order)
    device = search.split(math.inf)
    if device is None:
        raise ChainInfeasible(f"{problem.source or 'problem'}: no contiguous split of the chain fits the "
                              "devices' memory and supported ops; add devices or allow non-contiguous splits")
    high = search.max_load(device)
    low = min(lower if math.isfinite(lower) else 0.0, high)
    status = "optimal"
    while high > low * (1 + PRECISION) + 1e-300:
        if time.monotonic() > deadline:
            status = "time limit"
            break
        middle = math.sqrt(low * high) if low > 0 and high > 4 * low else 0.5 * (low + high)
        found = search.split(middle)
        if found is None:
            low = middle
        else:
            device, high = found, min(middle, search.max_load(found))
    return Placement(device=device, method="dp", value=high, bound=min(low, high), status=status,
                     contiguous=True, seconds=time.monotonic() - started)


def solve_chain_latency(problem: PlacementProblem, order: np.ndarray) -> Placement:
    """The placement of least latency of a chain with one subgraph on each accelerator (an
    interval) and CPU ops anywhere (each a unit of its own, so a CPU stretch is one interval of
    any number): the same windows minimising the summed interval times, which on a chain is the
    latency (every unit waits for the one before). Exact: value = bound. O(n T K)."""
    started = time.monotonic()
    search = _Search(problem, order)
    device = search.split(math.inf, minimise=True)
    if device is None:
        raise ChainInfeasible(f"{problem.source or 'problem'}: no placement of the chain fits the "
                              "devices' memory and supported ops")
    value = float(search.value[:, problem.n].min())
    return Placement(device=device, method="ip", value=value, bound=value, status="optimal (chain split)",
                     seconds=time.monotonic() - started)


PATH_MATRIX_OPS = 2_000  # a longer path's bound drops its skip edges (the crossing table is ops^2 floats)
PATH_BOUND_CELLS = 20_000_000  # states x path ops^2 of the skip-edge bound; past it, the chain-only bound
PATH_CHAIN_CELLS = 5_000_000  # states x path ops of the chain-only bound; past it, no bound (0)


def path_latency_bound(problem: PlacementProblem, subgraphs_per_device: int, weight: np.ndarray) -> float:
    """A lower bound on the latency of every placement with at most ``subgraphs_per_device``
    subgraphs on each accelerator: the least latency of a heaviest path Q by ``weight`` (the
    cheapest latencies, ``bounds.cheapest_latency``) kept alone with the edges among its ops.

    Why it holds: removing ops (and so edges) from a placement never lengthens its schedule (a
    unit loses work and tensors, nothing waits longer), and keeps units convex. Along Q a convex
    unit holds consecutive ops, so Q's units are intervals of Q, each waiting for the one before:
    the latency is at least the sum of their times, an accelerator interval's time its compute
    plus every distinct tensor crossing its boundary (``_crossings``; the skip edges between Q's
    ops included), a CPU op's its own. Memory counts only Q's ops, and each accelerator kind
    takes at most ``subgraphs_per_device`` x count intervals. The least such sum is a DP over
    (intervals used per kind, position): O(T |Q|^2 K) numpy work with the skip edges (while
    ``PATH_BOUND_CELLS`` and ``PATH_MATRIX_OPS`` allow), else the chain's own
    (``solve_chain_latency``, consecutive edges only, a weaker bound; none past
    ``PATH_CHAIN_CELLS``). 0 without a path or a placement of it, or past that size."""
    if problem.n == 0:
        return 0.0
    path = _longest_path(problem, weight)
    sub = _path_problem(problem, path, subgraphs_per_device)
    span = _colour_spans(problem, path) if subgraphs_per_device == 1 else None
    n_states = int(np.prod([kind.count + 1 for kind in sub.kinds]))
    if n_states * (sub.n + 1) > PATH_CHAIN_CELLS:
        return 0.0
    tables = _tables(sub, np.arange(sub.n))
    try:
        if sub.n > PATH_MATRIX_OPS or n_states * sub.n**2 > PATH_BOUND_CELLS:
            return solve_chain_latency(replace(sub, edges=[(i, i + 1) for i in range(sub.n - 1)]),
                                       np.arange(sub.n)).value
    except FpgaplaceError:
        return 0.0
    value = _interval_latency(sub, tables, _crossings(sub) + _branch_costs(sub.n, sub.meta["branches"]), span)
    return value if math.isfinite(value) else 0.0


def _longest_path(problem: PlacementProblem, weight: np.ndarray) -> np.ndarray:
    """The ops of a heaviest path by ``weight`` (inf counted as 0), in order. O(n + m)."""
    from fpgaplace.place.solvers.evaluate import topological_order

    weight = np.where(np.isfinite(weight), weight, 0.0)
    preds = problem.predecessors()
    best, back = np.zeros(problem.n), np.full(problem.n, -1, dtype=np.int64)
    for v in topological_order(problem.n, problem.edges):
        if preds[v]:
            u = max(preds[v], key=lambda u: best[u])
            best[v], back[v] = best[u] + weight[v], u
        else:
            best[v] = weight[v]
    path, v = [], int(np.argmax(best))
    while v >= 0:
        path.append(v)
        v = int(back[v])
    return np.array(path[::-1], dtype=np.int64)


def _path_problem(problem: PlacementProblem, path: np.ndarray, subgraphs_per_device: int) -> PlacementProblem:
    """The ops of ``path`` alone (numbered along it) with the edges among them; each accelerator
    kind with ``subgraphs_per_device`` x its devices, each CPU kind with at most one (CPU ops
    are not counted in the latency DP, only its states would grow)."""
    where = np.full(problem.n, -1, dtype=np.int64)
    where[path] = np.arange(len(path))
    size = problem.size[path].copy()  # and each colour class's bytes off the path, on the device of its path ops
    on_path = {int(problem.color[v]): i for i, v in enumerate(path) if problem.color[v] >= 0}
    for v in np.flatnonzero((where < 0) & (np.asarray(problem.color) >= 0)):
        if int(problem.color[v]) in on_path:
            size[on_path[int(problem.color[v])]] += problem.size[v]
    branches = _branch_edges(problem, path, where, subgraphs_per_device == 1)
    edges = sorted({(int(where[u]), int(where[v])) for u, v in problem.edges if where[u] >= 0 and where[v] >= 0}
                   | branches.tensor_edges)
    q = max(1, int(subgraphs_per_device))
    kinds = [replace(kind, count=min(kind.count, 1) if kind.is_cpu else min(kind.count * q, len(path)))
             for kind in problem.kinds]
    k = len(path)
    return PlacementProblem(names=[problem.names[v] for v in path], ids=list(range(k)), edges=edges, kinds=kinds,
                            latency=problem.latency[path], size=size, transfer=problem.transfer[path],
                            backward=np.zeros(k, dtype=bool), color=np.full(k, -1, dtype=np.int64),
                            source=problem.source, meta={"branches": branches})


BRANCH_STEPS = 2_000_000  # off-path nodes visited while looking for branches, at most


@dataclass
class _Branches:
    """What off-path routes between two path positions (a, b) add to the path bound."""

    tensor_edges: set[tuple[int, int]]  # a -> b carrying a's own tensor
    enclosed: dict[tuple[int, int], float]  # paid by an interval holding both a and b
    read: dict[tuple[int, int], float]  # paid by an interval holding b that starts past a + 1


def _branch_edges(problem: PlacementProblem, path: np.ndarray, where: np.ndarray,
                  colours_bind: bool) -> _Branches:
    """Routes from path op a through off-path ops to the first path op b they reach, with
    ``least`` the cheapest route tensor that may cross between units (``_may_cross``).

    When a and b sit in different units the route leaves a's unit and enters b's, each at a
    cost of at least min(c(a), least). If least >= c(a) an edge a -> b charges a's own tensor
    (counted once with a's other crossings). Otherwise, when a's only path reader is a + 1, an
    interval holding b and starting past a + 1 pays ``least`` (the tensor entering it is a's,
    which no path edge brings there, or a route tensor). An interval holding both a and b pays
    the route's work on the cheapest accelerator kind (all inside) or ``least`` (a crossing
    into it), whichever is less. ResNet's downsample branches: without them the path bound cut
    inside the block for free. O(off-path nodes reached from the path), at most ``BRANCH_STEPS``."""
    succ, preds = problem.successors(), problem.predecessors()
    off = where < 0
    found = _Branches(set(), {}, {})
    steps = 0
    for a_pos, a in enumerate(path):
        reached = {w for w in succ[a] if off[w]}
        stack = list(reached)
        while stack and steps < BRANCH_STEPS:
            x = stack.pop()
            steps += 1
            for y in succ[x]:
                if off[y] and y not in reached:
                    reached.add(y)
                    stack.append(y)
        exits = [int(where[y]) for x in reached for y in succ[x] if not off[y]]
        if not exits or steps >= BRANCH_STEPS:
            continue
        b_pos = min(exits)
        b = int(path[b_pos])
        route = {x for x in preds[b] if x in reached}
        stack = list(route)
        while stack:
            x = stack.pop()
            for u in preds[x]:
                if u in reached and u not in route:
                    route.add(u)
                    stack.append(u)
        targets = route | {b}
        least = min((float(problem.transfer[x]) for x in route
                     if _may_cross(problem, succ[x], x, targets, colours_bind)), default=math.inf)
        work = min((float(problem.latency[list(route), k].sum()) for k in problem.accelerator_kinds()
                    if problem.kinds[k].count > 0), default=math.inf)
        key = (a_pos, b_pos)
        if least >= problem.transfer[a]:
            found.tensor_edges.add(key)
        elif all(where[w] <= a_pos + 1 for w in succ[a] if not off[w]) and a_pos + 1 < b_pos:
            found.read[key] = max(found.read.get(key, 0.0), least)
        else:
            continue
        found.enclosed[key] = max(found.enclosed.get(key, 0.0), min(work, least))
    return found


def _may_cross(problem: PlacementProblem, successors: list[int], x: int, route: set[int],
               colours_bind: bool) -> bool:
    """Whether x's tensor may cross between units on its way along ``route``: not when every
    route successor shares x's colour class and ``colours_bind`` (one subgraph a device: a
    class is one unit). O(out-degree)."""
    colour = int(problem.color[x])
    return not colours_bind or colour < 0 or any(
        int(problem.color[y]) != colour for y in successors if y in route)


def _branch_costs(n: int, branches: _Branches) -> np.ndarray:
    """E[i, j]: what the interval [i, j) pays at least for the routes around the path
    (``_branch_edges``): ``enclosed`` where i <= a and b < j, ``read`` where a + 1 < i <= b < j.
    Rectangles summed by a 2-D difference array: O(n^2)."""
    diff = np.zeros((n + 2, n + 2))

    def add(rows: tuple[int, int], columns: tuple[int, int], value: float) -> None:
        if math.isfinite(value) and value > 0:
            diff[rows[0], columns[0]] += value
            diff[rows[0], columns[1]] -= value
            diff[rows[1], columns[0]] -= value
            diff[rows[1], columns[1]] += value

    for (a, b), value in branches.enclosed.items():
        add((0, a + 1), (b + 1, n + 1), value)
    for (a, b), value in branches.read.items():
        add((a + 2, b + 1), (b + 1, n + 1), value)
    return np.cumsum(np.cumsum(diff, axis=0), axis=1)[: n + 1, : n + 1]


def _colour_spans(problem: PlacementProblem, path: np.ndarray) -> np.ndarray:
    """(2, |Q|): the first and last position on the path of each op's colour class (the op's
    own position without one). A class shares one device, so with one subgraph a device an
    accelerator interval holding one of its path ops holds all of them. O(n)."""
    k = len(path)
    first, last = np.arange(k), np.arange(k)
    seen: dict[int, list[int]] = {}
    for i, v in enumerate(path):
        if problem.color[v] >= 0:
            seen.setdefault(int(problem.color[v]), []).append(i)
    for members in seen.values():
        first[members], last[members] = members[0], members[-1]
    return np.vstack([first, last])


def _crossings(chain: PlacementProblem) -> np.ndarray:
    """``crossing_table`` of a problem numbered in topological order."""
    tail = np.array([u for u, _ in chain.edges], dtype=np.int64)
    head = np.array([v for _, v in chain.edges], dtype=np.int64)
    return crossing_table(chain.n, tail, head, chain.transfer)


def crossing_table(n: int, tail: np.ndarray, head: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """X[i, j]: the transfer of every distinct tensor crossing the boundary of the interval [i, j)
    of n ops in a topological order (edges ``tail`` -> ``head`` as positions, ``cost`` the
    tensor of the op at each position): made inside and read at or past j, or made before i and
    read inside. Row by row with difference arrays: O(n (n + m)) numpy work, O(n^2) memory."""
    last = np.full(n, -1, dtype=np.int64)
    np.maximum.at(last, tail, head)
    read_later = np.flatnonzero(last > np.arange(n))
    crossing = np.zeros((n + 1, n + 1))
    for i in range(n):
        diff = np.zeros(n + 2)
        inside = read_later[read_later >= i]  # made at p >= i: crosses for p < j <= last[p]
        np.add.at(diff, inside + 1, cost[inside])
        np.add.at(diff, last[inside] + 1, -cost[inside])
        into = (tail < i) & (head >= i)  # made before i: crosses once j passes its first reader >= i
        first = np.full(n, n + 1, dtype=np.int64)
        np.minimum.at(first, tail[into], head[into])
        made = np.flatnonzero(first <= n)
        np.add.at(diff, first[made] + 1, cost[made])
        crossing[i] = np.cumsum(diff)[: n + 1]
    return crossing


def _interval_latency(chain: PlacementProblem, tables: _ChainTables, crossing: np.ndarray,
                      span: np.ndarray | None) -> float:
    """The least sum of interval times (``path_latency_bound``): f[s, j] over accelerator
    states s and prefixes j, CPU stretches at the cheapest CPU kind, uncounted; with ``span``
    (``_colour_spans``) an accelerator interval holds every colour class it touches. O(T n^2 K)."""
    n = chain.n
    accelerators = [k for k, kind in enumerate(chain.kinds) if not kind.is_cpu and kind.count > 0]
    cpus = [k for k, kind in enumerate(chain.kinds) if kind.is_cpu and kind.count > 0]
    cpu_time = np.min(chain.latency[:, cpus], axis=1) if cpus else np.full(n, np.inf)
    cpu_ok = np.isfinite(cpu_time)
    cpu_prefix = np.concatenate([[0.0], np.cumsum(np.where(cpu_ok, cpu_time, 0.0))])
    cpu_left = np.concatenate([[0], np.maximum.accumulate(np.where(cpu_ok, 0, np.arange(1, n + 1)))])
    digit, stride = tables.digit, tables.stride
    f = np.full((digit.shape[0], n + 1), np.inf)
    f[0, 0] = 0.0
    for j in range(1, n + 1):
        whole = np.ones(j, dtype=bool)  # [i, j) cuts no colour class
        if span is not None:
            whole = (np.minimum.accumulate(span[0, :j][::-1])[::-1] >= np.arange(j)) & \
                    (np.maximum.accumulate(span[1, :j][::-1])[::-1] < j)
        for s in range(digit.shape[0]):
            best = np.inf
            for k in accelerators:
                lo = tables.left[k, j]
                if digit[s, k] == 0 or lo >= j:
                    continue
                starts = np.arange(lo, j)
                times = f[s - stride[k], lo:j] + tables.prefix[k, j] - tables.prefix[k, starts] + crossing[lo:j, j]
                times = np.where(whole[lo:j], times, np.inf)
                best = min(best, float(times.min()))
            if cpus and cpu_left[j] < j:
                lo = cpu_left[j]
                best = min(best, float((f[s, lo:j] + cpu_prefix[j] - cpu_prefix[lo:j]).min()))
            f[s, j] = best
    return float(f[:, n].min())
