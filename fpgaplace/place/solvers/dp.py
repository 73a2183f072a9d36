"""Exact contiguous throughput (max-load) optimum by dynamic programming over ideals.

Model and load function: see ``fpgaplace.place.solvers.evaluate`` (the paper's max-load objective).
Source: Tarnawski et al., "Efficient Algorithms for Device Placement of DNN Graph Operators",
NeurIPS 2020, Section 4 (DP over ideals); the implementation here is our own.

Search space
    Nodes are grouped into *blocks*: the strongly connected components of the class graph
    (forward graph with colour classes contracted, backward nodes riding with their forward
    colour class; ``evaluate.class_graph``). An *ideal* is a set of blocks closed under
    predecessors. A contiguous split is a chain of ideals  {} = I0 < I1 < ... < Ir = all;
    each difference I_j minus I_(j-1) goes to one device. Every such set is convex, and these
    are the splits the paper's DP (and its published optima) optimise over.

Exact reduction
    A block whose nodes all cost 0 on every device kind, and that touches exactly one other
    block (through any original edge), is merged into that block when its size is 0 or memory
    cannot bind (total size <= the smallest accelerator memory). Moving such a leaf next to its
    only neighbour never raises a load, keeps every set convex and keeps the chain order, so the
    optimum is unchanged. Repeated until nothing changes. (The paper's code does a similar merge;
    on GNMT it cuts the ideal count from over a million to 17,914.)

Algorithm
    1. Ideals are enumerated breadth-first by size, as bitsets with a hash map, recording for
       each ideal its *down-links* (ideal minus one maximal block). O(N * width) set operations.
    2. An upper bound U: the same DP restricted to the prefixes of a few topological orders
       (linear splits, a PipeDream-like heuristic), O(B^2) each.
    3. A contiguity-aware relaxation for a cut x: below[I][s] = "ideal I splits into a chain over
       the devices of state s with every device's *compute* below x" (transfer and memory
       dropped, so it over-approximates the real feasibility), and above[I][F] the same for the
       complement of I over F devices. Compute is additive over ideals, so for each state the
       best sub-ideal is a running max over down-links (a min over the subset lattice):
       O(N * kinds * states * degree) per cut, no pairs. Bisection on x gives a lower bound L
       on the optimum (to 0.1 %), far tighter than total work / devices when CPUs are slow on
       some operators and fast on others (capacities can not see that a CPU takes one convex
       piece).
    4. The DP is run with cuts L(1 + 0.002 (2^k - 1)), k = 0..3 (then U): a run that finds no
       split proves the optimum is at least its cut; the first that finds one returns the
       optimum. A cut just above the optimum leaves few useful (ideal, state) pairs.
    5. The DP: f[s][I] = least max-load placing ideal I on at most s devices, where s counts
       devices per kind (accelerator kinds and CPU kinds, mixed radix). For each ideal I (by
       size) a depth-first walk visits the sub-ideals J of I through down-links, each once, and
       keeps the set S = I \\ J with its compute load per kind, its size and its transfer cost
       updated incrementally as blocks join S (transfer via per-node counters of successors in
       S). Compute load and size only grow as J shrinks, so the walk stops descending when S's
       compute load reaches the bound on every kind (or memory is exceeded there); transfer cost
       is not monotone and is never used to cut. State s of I is skipped unless below[I][s] and
       above[I][full - s]; the walk relaxes and descends into J only if above[J][full - s + e_t]
       for a useful s of I and a kind t (false stays false as J shrinks). Relaxation:
           f[s][I] = min over J, kind t of  max(f[s - e_t][J], load_t(I \\ J)),
       plus "leave a device unused": f[s][I] <= f[s - e_t][I]. Back-links give the split.
       Time O(P * (T + deg)) for P visited ideal pairs (P <= N^2, far fewer with the cut) and
       T device-count states; memory O(N * T). The hot loop is compiled with numba (plain
       Python on small lattices, ``PYTHON_WORK``, to spare numba's start-up).

The reference C++ stores every ideal pair with its scores; this walk stores none.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fpgaplace.place.solvers.evaluate import class_graph, device_loads
from fpgaplace.place.solvers.problem import Placement, PlacementProblem
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.graphs import strong_components, topological_order

MAX_IDEALS = 150_000
IDEALS_PER_SECOND = 2_500  # method auto gives the exact DP at most this many ideals per second of its limit
MAX_FIT_ENTRIES = 50_000_000  # ideals * kinds * states of the contiguity tables (8 bytes each)
RELAXED_PRECISION = 1e-3  # relative width the compute-only lower bound is bisected to
CUT_STEP = 2e-3  # the DP's cuts grow from the relaxed bound by 0, 0.2 %, 0.6 %, 1.4 %
CUT_STEPS = 4  # then the upper bound itself
CHUNK = 1024  # ideals per compiled call, between time-limit checks and progress reports
PROGRESS_SECONDS = 2.0  # least time between two progress reports of one DP run
PYTHON_WORK = 60_000  # ideals^2 x states up to which the DP's kernels run as plain Python
BOUND_SLACK = 1e-9  # relative slack so the upper bound's own split stays inside the search

COARSE_IDEALS = 20_000  # ideal budget of the coarsened graph the DP solves past MAX_IDEALS
COARSEN_FACTOR = 0.7  # each coarsening round keeps this share of the pieces

Progress = Callable[[str], None] | None


class StateSpaceTooLarge(FpgaplaceError):
    """The block graph has more ideals than the DP may enumerate (``solve_coarsened_dp`` scales)."""


@dataclass
class Blocks:
    """Nodes grouped into blocks that always share a device, and the DAG between blocks."""

    of_node: np.ndarray  # int64 (n,), block index of each node
    count: int
    edges: list[tuple[int, int]]  # distinct block-DAG edges


@dataclass
class IdealLattice:
    """All ideals of a block DAG, by size; ideal 0 is empty and the last one is everything."""

    masks: list[int]  # ideal id -> bitset of blocks (Python int)
    down_ptr: np.ndarray  # CSR: down-links of ideal i are down_ptr[i]:down_ptr[i+1]
    down_block: np.ndarray  # the maximal block removed
    down_to: np.ndarray  # id of the ideal without it

    @property
    def count(self) -> int:
        return len(self.masks)


def _renumber(labels: np.ndarray) -> tuple[np.ndarray, int]:
    unique, inverse = np.unique(labels, return_inverse=True)
    return inverse.astype(np.int64), len(unique)


def _block_edges(of_class: np.ndarray, class_edges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    return sorted({(int(of_class[a]), int(of_class[b])) for a, b in class_edges
                   if of_class[a] != of_class[b]})


def build_blocks(problem: PlacementProblem) -> Blocks:
    """Blocks: SCCs of the class graph, then zero-cost leaf blocks merged (module docstring)."""
    cls, class_edges = class_graph(problem)
    n_classes = int(cls.max()) + 1 if problem.n else 0
    comp = strong_components(n_classes, class_edges)
    block = comp[cls] if problem.n else np.zeros(0, dtype=np.int64)
    block = _merge_free_leaves(problem, block)
    block, count = _renumber(block)
    # class edges mapped to blocks: class c's block is the block of any node of class c
    class_block = np.zeros(n_classes, dtype=np.int64)
    class_block[cls] = block
    return Blocks(of_node=block, count=count, edges=_block_edges(class_block, class_edges))


def _merge_free_leaves(problem: PlacementProblem, block: np.ndarray) -> np.ndarray:
    accelerator_memory = [problem.kinds[k].memory for k in problem.accelerator_kinds()]
    memory_never_binds = float(problem.size.sum()) <= min(accelerator_memory, default=math.inf)
    free_node = np.all(problem.latency == 0, axis=1)
    if not memory_never_binds:
        free_node &= problem.size == 0
    block = block.copy()
    while True:
        neighbours: dict[int, set[int]] = {}
        for u, v in problem.edges:
            bu, bv = int(block[u]), int(block[v])
            if bu != bv:
                neighbours.setdefault(bu, set()).add(bv)
                neighbours.setdefault(bv, set()).add(bu)
        free_block = {int(b) for b in np.unique(block)}
        free_block -= {int(b) for b in block[~free_node]}
        merges = {x: next(iter(ns)) for x, ns in neighbours.items()
                  if len(ns) == 1 and x in free_block}
        if not merges:
            return block
        # merge one leaf per neighbour pair at a time (two free leaves may face each other)
        done: set[int] = set()
        for x, m in merges.items():
            if x in done or m in done:
                continue
            block[block == x] = m
            done.update((x, m))


def enumerate_ideals(n_blocks: int, edges: list[tuple[int, int]],
                     limit: int = MAX_IDEALS, source: str = "") -> IdealLattice:
    """Breadth-first enumeration of all ideals with their down-links; O(N * width * degree)."""
    pred_mask = [0] * n_blocks
    succ: list[list[int]] = [[] for _ in range(n_blocks)]
    for a, b in edges:
        pred_mask[b] |= 1 << a
        succ[a].append(b)
    ids: dict[int, int] = {0: 0}
    masks = [0]
    addable = [[v for v in range(n_blocks) if pred_mask[v] == 0]]
    downs: list[list[tuple[int, int]]] = [[]]
    i = 0
    while i < len(masks):
        mask, can_add = masks[i], addable[i]
        for v in can_add:
            bigger = mask | (1 << v)
            j = ids.get(bigger)
            if j is None:
                j = len(masks)
                if j >= limit:
                    raise StateSpaceTooLarge(
                        f"{source or 'problem'}: the contiguous DP needs more than {limit:,} "
                        f"ideals of the {n_blocks}-block graph (method auto coarsens it)"
                    )
                ids[bigger] = j
                masks.append(bigger)
                addable.append([w for w in can_add if w != v]
                               + [w for w in succ[v] if pred_mask[w] & ~bigger == 0])
                downs.append([])
            downs[j].append((v, i))
        addable[i] = []
        i += 1
    ptr = np.zeros(len(masks) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(d) for d in downs])
    flat = [link for d in downs for link in d]
    return IdealLattice(
        masks=masks,
        down_ptr=ptr,
        down_block=np.array([b for b, _ in flat], dtype=np.int64),
        down_to=np.array([t for _, t in flat], dtype=np.int64),
    )


def _chain_lattice(order: list[int]) -> IdealLattice:
    """The prefixes of one topological order of the blocks, as a (thin) ideal lattice."""
    masks = [0]
    for b in order:
        masks.append(masks[-1] | (1 << b))
    n = len(order)
    return IdealLattice(
        masks=masks,
        down_ptr=np.concatenate([[0], np.arange(n + 1)]).astype(np.int64),
        down_block=np.array(order, dtype=np.int64),
        down_to=np.arange(n, dtype=np.int64),
    )


@dataclass
class _Tables:
    """Flat arrays the compiled kernel reads."""

    block_ptr: np.ndarray
    block_nodes: np.ndarray
    compute: np.ndarray  # (blocks, kinds), 0 where unsupported
    unsupported: np.ndarray  # (blocks, kinds) int, nodes of the block a kind cannot run
    available: np.ndarray  # (kinds,) bool, the kind has at least one device
    block_size: np.ndarray
    memory: np.ndarray  # (kinds,)
    is_cpu: np.ndarray  # (kinds,) bool
    transfer: np.ndarray  # (n,)
    pred_ptr: np.ndarray
    preds: np.ndarray  # distinct predecessors, CSR
    out_degree: np.ndarray  # distinct successors
    stride: np.ndarray  # (kinds,) mixed-radix stride of each kind in the state index
    digit: np.ndarray  # (states, kinds)
    cheapest: np.ndarray  # (blocks,) least compute of the block on a kind that can hold it
    ratio: np.ndarray  # (kinds,) max over blocks of cheapest / compute on the kind (<= 1)


def _tables(problem: PlacementProblem, blocks: Blocks) -> _Tables:
    n, k = problem.n, len(problem.kinds)
    order = np.argsort(blocks.of_node, kind="stable")
    block_ptr = np.zeros(blocks.count + 1, dtype=np.int64)
    block_ptr[1:] = np.cumsum(np.bincount(blocks.of_node, minlength=blocks.count))
    supported = np.isfinite(problem.latency)
    compute = np.zeros((blocks.count, k))
    np.add.at(compute, blocks.of_node, np.where(supported, problem.latency, 0.0))
    unsupported = np.zeros((blocks.count, k), dtype=np.int64)
    np.add.at(unsupported, blocks.of_node, (~supported).astype(np.int64))
    block_size = np.bincount(blocks.of_node, weights=problem.size, minlength=blocks.count)
    counts = [kind.count for kind in problem.kinds]
    memory = np.array([kind.memory for kind in problem.kinds], dtype=np.float64)
    available = np.array([c > 0 for c in counts], dtype=np.bool_)
    fits = (unsupported == 0) & (block_size[:, None] <= memory[None, :]) & available[None, :]
    placeable = np.where(fits, compute, np.inf)
    cheapest = placeable.min(axis=1, initial=np.inf)
    cheapest = np.where(np.isfinite(cheapest), cheapest, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(fits & (cheapest[:, None] > 0), cheapest[:, None] / placeable, 0.0)
    ratio = share.max(axis=0, initial=0.0)
    distinct = sorted(set(problem.edges))
    pred_lists: list[list[int]] = [[] for _ in range(n)]
    out_degree = np.zeros(n, dtype=np.int64)
    for u, v in distinct:
        pred_lists[v].append(u)
        out_degree[u] += 1
    pred_ptr = np.zeros(n + 1, dtype=np.int64)
    pred_ptr[1:] = np.cumsum([len(p) for p in pred_lists])
    stride = np.ones(k, dtype=np.int64)
    for t in range(1, k):
        stride[t] = stride[t - 1] * (counts[t - 1] + 1)
    n_states = int(np.prod([c + 1 for c in counts]))
    digit = np.array([[(s // stride[t]) % (counts[t] + 1) for t in range(k)]
                      for s in range(n_states)], dtype=np.int64).reshape(n_states, k)
    return _Tables(
        block_ptr=block_ptr, block_nodes=order.astype(np.int64), compute=compute,
        unsupported=unsupported, available=available,
        block_size=block_size.astype(np.float64), memory=memory,
        is_cpu=np.array([kind.is_cpu for kind in problem.kinds], dtype=np.bool_),
        transfer=problem.transfer.astype(np.float64), pred_ptr=pred_ptr,
        preds=np.array([p for ps in pred_lists for p in ps], dtype=np.int64),
        out_degree=out_degree, stride=stride, digit=digit, cheapest=cheapest, ratio=ratio,
    )


def _crossing(x, in_set, succ_in_set, out_degree):  # pragma: no cover - compiled
    if in_set[x]:
        return succ_in_set[x] < out_degree[x]
    return succ_in_set[x] > 0


def _toggle_block(b, sign, block_ptr, block_nodes, transfer, pred_ptr, preds, out_degree,
                  in_set, succ_in_set):  # pragma: no cover - compiled
    """Add (sign=1) or remove (sign=-1) block b from S; return the change of transfer cost."""
    delta = 0.0
    for q in range(block_ptr[b], block_ptr[b + 1]):
        x = block_nodes[q]
        before = _crossing(x, in_set, succ_in_set, out_degree)
        in_set[x] = sign > 0
        after = _crossing(x, in_set, succ_in_set, out_degree)
        delta += transfer[x] * (int(after) - int(before))
        for r in range(pred_ptr[x], pred_ptr[x + 1]):
            p = preds[r]
            before = _crossing(p, in_set, succ_in_set, out_degree)
            succ_in_set[p] += sign
            after = _crossing(p, in_set, succ_in_set, out_degree)
            delta += transfer[p] * (int(after) - int(before))
    return delta


def _fits_below(down_ptr, down_block, down_to, relaxed, digit, stride, cut,
                slack):  # pragma: no cover - compiled
    """below[I, s]: ideal I splits into a chain over the devices of state s with every device's
    compute (transfer and memory ignored) below ``cut``. Ideals by size, so sub-ideals come first.

    best[I, t, s] = max over sub-ideals J of I with below[J, s] of prefix_t(J); then
    below[I, s] = OR over kinds t of s: prefix_t(I) - best[I, t, s - e_t] < cut.
    O(N * kinds * states * degree).
    """
    n = down_ptr.shape[0] - 1
    n_states, n_kinds = digit.shape
    prefix = np.zeros((n, n_kinds))
    best = np.full((n, n_kinds, n_states), -np.inf)
    below = np.zeros((n, n_states), dtype=np.bool_)
    below[0, :] = True
    best[0, :, :] = 0.0
    for ideal in range(1, n):
        first = down_ptr[ideal]
        for t in range(n_kinds):
            prefix[ideal, t] = prefix[down_to[first], t] + relaxed[down_block[first], t]
            for s in range(n_states):
                m = -np.inf
                for link in range(first, down_ptr[ideal + 1]):
                    m = max(m, best[down_to[link], t, s])
                best[ideal, t, s] = m
        for s in range(1, n_states):
            for t in range(n_kinds):
                if digit[s, t] == 0:
                    continue
                r = s - stride[t]
                m = prefix[ideal, t] if below[ideal, r] else best[ideal, t, r]
                if prefix[ideal, t] - m < cut + slack[t]:
                    below[ideal, s] = True
                    break
            if below[ideal, s]:
                for t in range(n_kinds):
                    best[ideal, t, s] = prefix[ideal, t]
    return below


def _dp_ideals(lo, hi, down_ptr, down_block, down_to, block_ptr, block_nodes, compute,
               unsupported, available, block_size, memory, is_cpu, transfer, pred_ptr, preds,
               out_degree, stride, digit, cheapest, ideal_cheapest, total_cheapest, used_capacity,
               free_capacity, kind_capacity, below, above, bound, f, back_ideal, back_kind,
               visited):  # pragma: no cover - compiled
    """Fill f[I, :] for ideals lo <= I < hi; returns the number of ideal pairs visited.

    State s of ideal I is *useful* only if the devices s can hold I's cheapest compute and the
    devices left can hold the rest (capacities in cheapest-compute units, see ``_capacities``);
    other states stay infinite, an ideal without useful states is skipped, and the walk stops
    once the devices left could no longer hold what lies outside the lower ideal.
    ``below``/``above`` (``_fits_below``) sharpen both tests with contiguity: state s of I is
    useful only if below[I, s] and above[I, full - s]; a lower ideal J is relaxed and descended
    only if above[J, full - s + e_t] for some useful s and kind t of s (monotone: false for J
    stays false for every sub-ideal of J, as J's complement only grows).
    """
    n_states, n_kinds = digit.shape
    n_nodes = out_degree.shape[0]
    in_set = np.zeros(n_nodes, dtype=np.bool_)
    succ_in_set = np.zeros(n_nodes, dtype=np.int64)
    depth_max = block_ptr.shape[0] + 1
    stack_ideal = np.empty(depth_max, dtype=np.int64)
    stack_next = np.empty(depth_max, dtype=np.int64)
    stack_block = np.empty(depth_max, dtype=np.int64)
    load_compute = np.zeros(n_kinds)
    bad = np.zeros(n_kinds, dtype=np.int64)
    useful = np.zeros(n_states, dtype=np.bool_)
    need = np.empty(n_states, dtype=np.int64)  # complement states a lower ideal may need
    needed = np.zeros(n_states, dtype=np.bool_)
    full = n_states - 1
    slack = 1e-9 * (total_cheapest + 1.0)
    pairs = 0
    for ideal in range(lo, hi):
        for s in range(n_states):
            f[ideal, s] = 0.0 if ideal == 0 else np.inf
            back_ideal[ideal, s] = -1
            back_kind[ideal, s] = -1
        if ideal == 0:
            continue
        inside = ideal_cheapest[ideal]
        outside = total_cheapest - inside
        reach = -np.inf  # most that the lower ideal's complement may hold
        for s in range(n_states):
            useful[s] = (inside <= used_capacity[s] + slack
                         and outside <= free_capacity[s] + slack
                         and below[ideal, s] and above[ideal, full - s])
            if useful[s]:
                for t in range(n_kinds):
                    if digit[s, t] > 0:
                        reach = max(reach, free_capacity[s] + kind_capacity[t])
                        needed[full - s + stride[t]] = True
        if reach == -np.inf:
            continue
        n_need = 0
        for s in range(n_states):
            if needed[s]:
                need[n_need] = s
                n_need += 1
                needed[s] = False
        load_compute[:] = 0.0
        bad[:] = 0
        size = 0.0
        cheap = 0.0
        transfer_cost = 0.0
        depth = 0
        stack_ideal[0] = ideal
        stack_next[0] = down_ptr[ideal]
        visited[ideal] = ideal
        while depth >= 0:
            current = stack_ideal[depth]
            link = stack_next[depth]
            if link == down_ptr[current + 1]:
                if depth > 0:
                    b = stack_block[depth]
                    for t in range(n_kinds):
                        load_compute[t] -= compute[b, t]
                        bad[t] -= unsupported[b, t]
                    size -= block_size[b]
                    cheap -= cheapest[b]
                    transfer_cost += _toggle_block(b, -1, block_ptr, block_nodes, transfer,
                                                   pred_ptr, preds, out_degree, in_set,
                                                   succ_in_set)
                depth -= 1
                continue
            stack_next[depth] = link + 1
            lower = down_to[link]
            if visited[lower] == ideal:
                continue
            visited[lower] = ideal
            pairs += 1
            b = down_block[link]
            for t in range(n_kinds):
                load_compute[t] += compute[b, t]
                bad[t] += unsupported[b, t]
            size += block_size[b]
            cheap += cheapest[b]
            transfer_cost += _toggle_block(b, 1, block_ptr, block_nodes, transfer, pred_ptr,
                                           preds, out_degree, in_set, succ_in_set)
            descend = False
            fits = False
            for q in range(n_need):
                if above[lower, need[q]]:
                    fits = True
                    break
            if fits and outside + cheap <= reach + slack:
                for t in range(n_kinds):
                    if not (available[t] and bad[t] == 0 and load_compute[t] < bound
                            and size <= memory[t]):
                        continue
                    descend = True
                    load = load_compute[t] if is_cpu[t] else load_compute[t] + transfer_cost
                    if load >= bound:
                        continue
                    for s in range(n_states):
                        if digit[s, t] == 0 or not useful[s]:
                            continue
                        candidate = max(f[lower, s - stride[t]], load)
                        if candidate < f[ideal, s]:
                            f[ideal, s] = candidate
                            back_ideal[ideal, s] = lower
                            back_kind[ideal, s] = t
            if descend:
                depth += 1
                stack_ideal[depth] = lower
                stack_next[depth] = down_ptr[lower]
                stack_block[depth] = b
            else:
                for t in range(n_kinds):
                    load_compute[t] -= compute[b, t]
                    bad[t] -= unsupported[b, t]
                size -= block_size[b]
                cheap -= cheapest[b]
                transfer_cost += _toggle_block(b, -1, block_ptr, block_nodes, transfer,
                                               pred_ptr, preds, out_degree, in_set, succ_in_set)
        for s in range(n_states):  # leave one device of kind t unused
            for t in range(n_kinds):
                if digit[s, t] > 0 and f[ideal, s - stride[t]] < f[ideal, s]:
                    f[ideal, s] = f[ideal, s - stride[t]]
                    back_ideal[ideal, s] = ideal
                    back_kind[ideal, s] = t
    return pairs


_PYTHON_KERNELS = {f.__name__: f for f in (_crossing, _toggle_block, _fits_below, _dp_ideals)}
_compiled: dict[str, Callable] = {}


def _kernel(name: str, work: float) -> Callable:
    """Kernel ``name`` as plain Python when ``work`` (ideals^2 x states, a bound on the walk) is
    at most PYTHON_WORK and nothing was compiled yet, else compiled with numba (imported, and
    every kernel jitted, on the first large problem; the machine code is cached on disk). Small
    problems so skip numba's import and cache load, most of the start-up of a small solve."""
    if work <= PYTHON_WORK and not _compiled:
        return _PYTHON_KERNELS[name]
    if not _compiled:
        import numba

        module = globals()
        for helper, options in (("_crossing", {"inline": "always"}), ("_toggle_block", {})):
            module[helper] = numba.njit(cache=True, **options)(_PYTHON_KERNELS[helper])
        for main in ("_fits_below", "_dp_ideals"):  # compiled against the jitted helpers above
            _compiled[main] = numba.njit(cache=True)(_PYTHON_KERNELS[main])
    return _compiled[name]


@dataclass
class _DpRun:
    value: float
    device: np.ndarray | None  # None when no split beats the bound
    pairs: int
    finished: bool


def _capacities(tables: _Tables, counts: list[int], bound: float
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cheapest-compute capacity of one device per kind, of the devices in each state, and of
    the devices a state leaves free.

    A device of kind t with load below ``bound`` holds blocks whose cheapest compute sums to at
    most ratio_t * bound (ratio_t = max over blocks of cheapest / compute on t), since loads are
    at least compute. With no finite bound every capacity is infinite (no pruning).
    """
    if not math.isfinite(bound):
        n_states = tables.digit.shape[0]
        return (np.full(len(counts), np.inf), np.full(n_states, np.inf),
                np.full(n_states, np.inf))
    kind = tables.ratio * bound
    used = tables.digit @ kind
    free = (np.array(counts)[None, :] - tables.digit) @ kind
    return kind, used, free


def _ideal_cheapest(tables: _Tables, lattice: IdealLattice) -> np.ndarray:
    out = np.zeros(lattice.count)
    first_link = lattice.down_ptr[:-1]
    for i in range(1, lattice.count):
        link = first_link[i]
        out[i] = out[lattice.down_to[link]] + tables.cheapest[lattice.down_block[link]]
    return out


def _reversed_lattice(lattice: IdealLattice) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Up-links as the down-links of the reversed lattice (ideal I becomes n - 1 - I)."""
    n = lattice.count
    upper = np.repeat(np.arange(n), np.diff(lattice.down_ptr))
    lower = lattice.down_to
    order = np.argsort(n - 1 - lower, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    ptr[1:] = np.cumsum(np.bincount(n - 1 - lower, minlength=n))
    return ptr, lattice.down_block[order].astype(np.int64), (n - 1 - upper[order]).astype(np.int64)


def _contiguous_fits(tables: _Tables, lattice: IdealLattice, bound: float, *,
                     above_too: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """below[I, s] and above[I, F] of ``_fits_below`` for the cut ``bound`` (all true when the
    bound is infinite or the tables would be too large). A block a kind cannot run costs the
    whole bound there. Relaxed sums carry a slack of 1e-9 of each kind's total, so rounding
    never makes a state look infeasible that a split below the bound reaches."""
    n_states, n_kinds = tables.digit.shape
    n = lattice.count
    if not math.isfinite(bound) or n * n_kinds * n_states > MAX_FIT_ENTRIES:
        everything = np.ones((n, n_states), dtype=np.bool_)
        return everything, everything
    relaxed = np.where(tables.unsupported > 0, bound, tables.compute)
    slack = 1e-9 * (relaxed.sum(axis=0) + 1.0)
    fits_below = _kernel("_fits_below", n * n * n_states)
    below = fits_below(lattice.down_ptr, lattice.down_block, lattice.down_to, relaxed,
                        tables.digit, tables.stride, bound, slack)
    if not above_too:
        return below, below
    up_ptr, up_block, up_to = _reversed_lattice(lattice)
    above = fits_below(up_ptr, up_block, up_to, relaxed, tables.digit, tables.stride, bound,
                        slack)[::-1]
    return below, np.ascontiguousarray(above)


def _run_dp(problem: PlacementProblem, blocks: Blocks, tables: _Tables, lattice: IdealLattice,
            bound: float, deadline: float, progress: Progress) -> _DpRun:
    n_states = tables.digit.shape[0]
    n = lattice.count
    f = np.empty((n, n_states))
    back_ideal = np.empty((n, n_states), dtype=np.int64)
    back_kind = np.empty((n, n_states), dtype=np.int64)
    visited = np.full(n, -1, dtype=np.int64)
    kind_capacity, used_capacity, free_capacity = _capacities(
        tables, [kind.count for kind in problem.kinds], bound)
    ideal_cheapest = _ideal_cheapest(tables, lattice)
    total_cheapest = float(tables.cheapest.sum())
    below, above = _contiguous_fits(tables, lattice, bound)
    dp_ideals = _kernel("_dp_ideals", n * n * n_states)
    pairs = 0
    reported = time.monotonic()
    for lo in range(0, n, CHUNK):
        hi = min(n, lo + CHUNK)
        pairs += dp_ideals(lo, hi, lattice.down_ptr, lattice.down_block, lattice.down_to,
                            tables.block_ptr, tables.block_nodes, tables.compute,
                            tables.unsupported, tables.available, tables.block_size,
                            tables.memory, tables.is_cpu, tables.transfer,
                            tables.pred_ptr, tables.preds, tables.out_degree, tables.stride,
                            tables.digit, tables.cheapest, ideal_cheapest, total_cheapest,
                            used_capacity, free_capacity, kind_capacity, below, above, bound,
                            f, back_ideal, back_kind, visited)
        if progress is not None and time.monotonic() > reported + PROGRESS_SECONDS:
            progress(f"DP: {hi:,} of {n:,} ideals, {pairs:,} ideal pairs")
            reported = time.monotonic()
        if time.monotonic() > deadline and hi < n:
            return _DpRun(math.inf, None, pairs, finished=False)
    full_state = n_states - 1
    value = float(f[n - 1, full_state])
    if not math.isfinite(value):
        return _DpRun(math.inf, None, pairs, finished=True)
    device = _backtrack(problem, blocks, tables, lattice, back_ideal, back_kind, full_state)
    return _DpRun(value, device, pairs, finished=True)


def _backtrack(problem: PlacementProblem, blocks: Blocks, tables: _Tables, lattice: IdealLattice,
               back_ideal: np.ndarray, back_kind: np.ndarray, state: int) -> np.ndarray:
    first_device = np.cumsum([0] + [kind.count for kind in problem.kinds])
    used = [0] * len(problem.kinds)
    block_device = np.full(blocks.count, -1, dtype=np.int64)
    ideal = lattice.count - 1
    while ideal != 0:
        lower, kind = int(back_ideal[ideal, state]), int(back_kind[ideal, state])
        if lower != ideal:
            members = lattice.masks[ideal] & ~lattice.masks[lower]
            chosen = [b for b in range(blocks.count) if members >> b & 1]
            block_device[chosen] = first_device[kind] + used[kind]
            used[kind] += 1
            ideal = lower
        state -= int(tables.stride[kind])
    return block_device[blocks.of_node]


def _topological_orders(blocks: Blocks) -> list[list[int]]:
    """A few topological orders of the blocks: smallest-first, largest-first, depth-first."""
    n = blocks.count
    forward = topological_order(n, blocks.edges)
    largest_first = topological_order(n, blocks.edges, key=lambda v: -v)
    succ: list[list[int]] = [[] for _ in range(n)]
    indegree = [0] * n
    for a, b in blocks.edges:
        succ[a].append(b)
        indegree[b] += 1
    depth_first: list[int] = []
    stack = [v for v in reversed(range(n)) if indegree[v] == 0]
    while stack:  # a ready node's newly ready successors are visited next
        v = stack.pop()
        depth_first.append(v)
        for w in reversed(succ[v]):
            indegree[w] -= 1
            if indegree[w] == 0:
                stack.append(w)
    return [forward, largest_first, depth_first]


def _lower_bound(problem: PlacementProblem, tables: _Tables) -> float:
    """max(largest block's cheapest compute, total cheapest compute / devices)."""
    usable = np.where(tables.unsupported > 0, np.inf, tables.compute)[:, tables.available]
    cheapest = usable.min(axis=1) if usable.size else np.zeros(0)
    devices = sum(kind.count for kind in problem.kinds)
    if not devices or not np.all(np.isfinite(cheapest)):
        return math.inf
    return float(max(cheapest.max(initial=0.0), cheapest.sum() / devices))


def _relaxed_bounds(tables: _Tables, lattice: IdealLattice, low: float, high: float
                    ) -> tuple[float, float]:
    """Bisection (to RELAXED_PRECISION) on the compute-only contiguous relaxation: no chain split
    has every device's compute below ``low`` (so the optimum is at least ``low``), one has at
    ``high``. Each step is one ``_contiguous_fits``, O(N * kinds * states * degree)."""
    if not (math.isfinite(high) and high > 0):
        return low, high
    low = min(low, high)
    for _ in range(40):
        if high <= low * (1 + RELAXED_PRECISION):
            break
        middle = 0.5 * (low + high)
        below, _ = _contiguous_fits(tables, lattice, middle, above_too=False)
        if below[-1, -1]:
            high = middle
        else:
            low = middle
    return low, high


def _cut_schedule(start: float, cap: float) -> list[float]:
    """Cuts start * (1 + CUT_STEP * (2^k - 1)), k < CUT_STEPS, below ``cap``: the DP with a cut
    just above the optimum prunes the most, and a cut that finds nothing proves the optimum is at
    least it. Few steps: where transfer dominates, the compute-only bound is far below the
    optimum and the linear-split bound ``cap`` is the better cut."""
    if not (math.isfinite(start) and start > 0):
        return []
    cuts = []
    for k in range(CUT_STEPS):
        cut = start * (1 + CUT_STEP * (2**k - 1))
        if cut >= cap:
            break
        cuts.append(cut)
    return cuts


def _infeasible(problem: PlacementProblem, blocks: Blocks, tables: _Tables) -> FpgaplaceError:
    for b in range(blocks.count):
        fits = [t for t in range(len(problem.kinds)) if tables.available[t]
                and tables.unsupported[b, t] == 0 and tables.block_size[b] <= tables.memory[t]]
        if not fits:
            v = int(np.flatnonzero(blocks.of_node == b)[0])
            memory = max((problem.kinds[t].memory for t in range(len(problem.kinds))
                          if problem.kinds[t].count > 0), default=0.0)
            return FpgaplaceError(
                f"{problem.source or 'problem'}: node {problem.ids[v]} ({problem.names[v]}) fits "
                f"no device: its group needs {tables.block_size[b]:.6g} bytes (largest device "
                f"memory {memory:.6g}) or runs on no available device kind"
            )
    return FpgaplaceError(
        f"{problem.source or 'problem'}: no contiguous split onto the available devices fits "
        "their memory; add devices or allow non-contiguous splits (contiguous=False)"
    )


def solve_throughput_dp(problem: PlacementProblem, time_limit: float | None = None,
                        upper_bound: float | None = None, progress: Progress = None, *,
                        max_ideals: int = MAX_IDEALS) -> Placement:
    """The optimal contiguous split for max-load (module docstring); value = bound = optimum.

    ``upper_bound`` (e.g. from a heuristic) tightens the cut; the DP then only finds splits of
    max-load below it. On hitting ``time_limit`` the best linear split is returned with status
    "time limit" and a simple lower bound. Raises ``FpgaplaceError`` when no contiguous split
    fits, ``StateSpaceTooLarge`` when the graph has more than ``max_ideals`` ideals.
    """
    started = time.monotonic()
    deadline = started + (time_limit if time_limit is not None else math.inf)
    if problem.n == 0:
        return Placement(device=np.zeros(0, dtype=np.int64), method="dp", value=0.0, bound=0.0,
                         status="optimal", seconds=0.0)
    blocks = build_blocks(problem)
    lattice = enumerate_ideals(blocks.count, blocks.edges, limit=max_ideals,
                               source=problem.source)
    placement = _solve_on_blocks(problem, blocks, lattice, deadline, upper_bound, progress)
    placement.seconds = time.monotonic() - started
    return placement


def _solve_on_blocks(problem: PlacementProblem, blocks: Blocks, lattice: IdealLattice,
                     deadline: float, upper_bound: float | None, progress: Progress) -> Placement:
    """Steps 2-5 of the module docstring on given blocks and their ideals; ``bound`` is valid
    for splits of these blocks (the caller decides whether it holds for the problem)."""
    tables = _tables(problem, blocks)
    if progress is not None:
        progress(f"DP: {blocks.count} blocks, {lattice.count:,} ideals")
    incumbent, best = None, math.inf
    for order in _topological_orders(blocks):
        run = _run_dp(problem, blocks, tables, _chain_lattice(order), math.inf, math.inf, None)
        if run.device is not None:
            value = max(device_loads(problem, run.device))
            if value < best:
                incumbent, best = run.device, value
    lower = _lower_bound(problem, tables)
    cap = best if upper_bound is None else min(best, upper_bound)
    relaxed_low, relaxed_high = _relaxed_bounds(tables, lattice, lower, cap)
    lower = max(lower, relaxed_low)
    cuts = _cut_schedule(relaxed_high, cap) + sorted({cap, best})
    for bound in cuts:
        if progress is not None:
            progress(f"DP: splits with max-load below {bound:.10g} (lower bound {lower:.10g})")
        cut = math.nextafter(bound * (1 + BOUND_SLACK), math.inf)  # loads must be < cut
        run = _run_dp(problem, blocks, tables, lattice, cut, deadline, progress)
        if run.device is not None or not run.finished:
            break
        lower = max(lower, bound)  # no split has every load below this bound
    if not run.finished:
        if incumbent is None:
            raise FpgaplaceError(f"{problem.source or 'problem'}: the DP hit its time limit "
                                 "before finding any split; raise the time limit")
        return Placement(device=incumbent, method="dp", value=best, bound=min(lower, best),
                         status=f"time limit ({lattice.count:,} ideals)")
    if run.device is None:  # nothing below an infinite cut: no contiguous split fits
        raise _infeasible(problem, blocks, tables)
    value = max(device_loads(problem, run.device))  # the evaluator's sum, not the DP's
    return Placement(device=run.device, method="dp", value=value, bound=min(value, run.value),
                     status="optimal", contiguous=True)


def coarsen_blocks(problem: PlacementProblem, blocks: Blocks, order: list[int],
                   pieces: int) -> Blocks:
    """Cut a topological ``order`` of the blocks into about ``pieces`` intervals of equal
    cheapest compute, each (where one block allows) within the smallest accelerator memory.

    An interval of a topological order is convex (a path between two of its blocks only visits
    blocks ordered between them) and every edge between intervals goes forward, so each chain of
    ideals of the coarse graph is one of the blocks' graph: the coarse DP's split is feasible
    for the problem, its optimum an upper bound. O(B + m).
    """
    tables = _tables(problem, blocks)
    memory = min((problem.kinds[k].memory for k in problem.accelerator_kinds()
                  if problem.kinds[k].count > 0), default=math.inf)
    share = float(tables.cheapest.sum()) / max(pieces, 1)
    interval = np.zeros(blocks.count, dtype=np.int64)
    current, work, size = 0, 0.0, 0.0
    for b in order:
        weight, bytes_ = float(tables.cheapest[b]), float(tables.block_size[b])
        if (work > 0 or size > 0) and (work + weight > share or size + bytes_ > memory):
            current, work, size = current + 1, 0.0, 0.0
        interval[b] = current
        work, size = work + weight, size + bytes_
    return Blocks(of_node=interval[blocks.of_node], count=current + 1,
                  edges=_block_edges(interval, blocks.edges))


def solve_coarsened_dp(problem: PlacementProblem, time_limit: float | None = None,
                       progress: Progress = None, *, max_ideals: int = COARSE_IDEALS) -> Placement:
    """A contiguous split for graphs past the DP's state space: the exact DP over the finest
    coarsening (``coarsen_blocks`` of a depth-first topological order, pieces shrunk by
    ``COARSEN_FACTOR`` per round) whose ideal count stays within ``max_ideals``.

    Returns the split with ``value`` its evaluated max-load and ``bound`` a lower bound on every
    split (total cheapest work / devices, largest block, ``bounds.memory_load_bound``); the coarse DP's
    own optimum bounds only the coarse splits. Each round costs one enumeration of at most
    ``max_ideals`` ideals; the DP then costs what the module docstring says for the coarse graph.
    """
    started = time.monotonic()
    deadline = started + (time_limit if time_limit is not None else math.inf)
    blocks = build_blocks(problem)
    lower = _lower_bound(problem, _tables(problem, blocks))
    order = _topological_orders(blocks)[2]
    pieces = blocks.count
    while True:
        coarse = coarsen_blocks(problem, blocks, order, pieces)
        try:
            lattice = enumerate_ideals(coarse.count, coarse.edges, limit=max_ideals,
                                       source=problem.source)
            break
        except StateSpaceTooLarge:
            pieces = max(1, int(min(pieces, coarse.count) * COARSEN_FACTOR))
    if progress is not None:
        progress(f"DP: {blocks.count} blocks coarsened to {coarse.count} intervals "
                 f"({lattice.count:,} ideals)")
    placement = _solve_on_blocks(problem, coarse, lattice, deadline, None, progress)
    placement.value = max(device_loads(problem, placement.device))
    from fpgaplace.place.solvers.bounds import memory_load_bound

    placement.bound = min(max(lower, memory_load_bound(problem)), placement.value)
    placement.status = f"heuristic (DP over {coarse.count} intervals of {blocks.count} blocks: " \
                       f"{placement.status})"
    placement.method = "dp"
    placement.seconds = time.monotonic() - started
    return placement
