"""Exact contiguous throughput (max-load) optimum by dynamic programming over ideals.

Model and load function: see ``fpgaplace.place.solvers.evaluate`` (the paper's max-load objective).
Source: Tarnawski et al., "Efficient Algorithms for Device Placement of DNN Graph Operators",
NeurIPS 2020, Section 4 (DP over ideals); the implementation here is our own.

The search space (blocks, their ideals, the exact reduction) is ``dp_ideals``; the two hot loops
(steps 3 and 5, plain Python or numba) are ``dp_kernels``. This module runs the algorithm and
assembles its answer:

Algorithm
    1. Blocks and their ideals with down-links (``dp_ideals``). O(N * width) set operations.
    2. An upper bound U: the same DP restricted to the prefixes of a few topological orders
       (linear splits, a PipeDream-like heuristic), O(B^2) each; the orders after the first only
       while the time limit allows.
    3. A contiguity-aware relaxation for a cut x (``dp_kernels``, below/above tables):
       O(N * kinds * states * degree) per cut, no pairs. Bisection on x gives a lower bound L
       on the optimum (to 0.1 %), far tighter than total work / devices when CPUs are slow on
       some operators and fast on others (capacities can not see that a CPU takes one convex
       piece).
    4. The DP is run with cuts L(1 + 0.002 (2^k - 1)), k = 0..3 (then U): a run that finds no
       split proves the optimum is at least its cut; the first that finds one returns the
       optimum. A cut just above the optimum leaves few useful (ideal, state) pairs.
    5. The DP (``dp_kernels``): f[s][I] = least max-load placing ideal I on at most s devices
       (s counts devices per kind), by a depth-first walk over the sub-ideals of each ideal;
       states and sub-ideals the capacities and the relaxation rule out are skipped. Time
       O(P * (T + deg)) for P visited ideal pairs (P <= N^2, far fewer with the cut) and T
       device-count states; memory O(N * T). Back-links give the split, the evaluator its value.

Past ``dp_ideals.MAX_IDEALS``, ``solve_coarsened_dp`` runs the same DP over intervals of a
topological order (``coarsen_blocks``): a feasible split and a valid lower bound, not an optimum.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from fpgaplace.place.solvers.bounds import cheapest_latency, memory_load_bound, work_load_bound
from fpgaplace.place.solvers.chain import ChainInfeasible, chain_order, solve_chain
from fpgaplace.place.solvers.dp_ideals import (
    MAX_IDEALS,
    Blocks,
    IdealLattice,
    StateSpaceTooLarge,
    block_edges,
    build_blocks,
    chain_lattice,
    enumerate_ideals,
    reversed_lattice,
    topological_orders,
)
from fpgaplace.place.solvers.dp_kernels import Tables, build_tables, kernel
from fpgaplace.place.solvers.evaluate import device_loads
from fpgaplace.place.solvers.problem import Placement, PlacementProblem
from fpgaplace.place.solvers.progress import Progress
from fpgaplace.util.errors import FpgaplaceError

IDEALS_PER_SECOND = 2_500  # method auto gives the exact DP at most this many ideals per second of its limit
MAX_FIT_ENTRIES = 50_000_000  # ideals * kinds * states of the contiguity tables (8 bytes each)
RELAXED_PRECISION = 1e-3  # relative width the compute-only lower bound is bisected to
CUT_STEP = 2e-3  # the DP's cuts grow from the relaxed bound by 0, 0.2 %, 0.6 %, 1.4 %
CUT_STEPS = 4  # then the upper bound itself
CHUNK = 1024  # ideals per compiled call, between time-limit checks and progress reports
PROGRESS_SECONDS = 2.0  # least time between two progress reports of one DP run
BOUND_SLACK = 1e-9  # relative slack so the upper bound's own split stays inside the search

COARSE_IDEALS = 20_000  # ideal budget of the coarsened graph the DP solves past MAX_IDEALS
MIN_COARSE_IDEALS = 500  # however short the time limit, the coarsened graph may have this many ideals
COARSEN_FACTOR = 0.7  # each coarsening round keeps this share of the pieces

@dataclass
class _DpRun:
    value: float
    device: np.ndarray | None  # None when no split beats the bound
    pairs: int
    finished: bool


def _capacities(tables: Tables, counts: list[int], bound: float
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


def _ideal_cheapest(tables: Tables, lattice: IdealLattice) -> np.ndarray:
    out = np.zeros(lattice.count)
    first_link = lattice.down_ptr[:-1]
    for i in range(1, lattice.count):
        link = first_link[i]
        out[i] = out[lattice.down_to[link]] + tables.cheapest[lattice.down_block[link]]
    return out


def _contiguous_fits(tables: Tables, lattice: IdealLattice, bound: float, *,
                     above_too: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """below[I, s] and above[I, F] of ``dp_kernels._fits_below`` for the cut ``bound`` (all true
    when the bound is infinite or the tables would be too large). A block a kind cannot run costs
    the whole bound there. Relaxed sums carry a slack of 1e-9 of each kind's total, so rounding
    never makes a state look infeasible that a split below the bound reaches."""
    n_states, n_kinds = tables.digit.shape
    n = lattice.count
    if not math.isfinite(bound) or n * n_kinds * n_states > MAX_FIT_ENTRIES:
        everything = np.ones((n, n_states), dtype=np.bool_)
        return everything, everything
    relaxed = np.where(tables.unsupported > 0, bound, tables.compute)
    slack = 1e-9 * (relaxed.sum(axis=0) + 1.0)
    fits_below = kernel("_fits_below", n * n * n_states)
    below = fits_below(lattice.down_ptr, lattice.down_block, lattice.down_to, relaxed,
                        tables.digit, tables.stride, bound, slack)
    if not above_too:
        return below, below
    up_ptr, up_block, up_to = reversed_lattice(lattice)
    above = fits_below(up_ptr, up_block, up_to, relaxed, tables.digit, tables.stride, bound,
                        slack)[::-1]
    return below, np.ascontiguousarray(above)


def _run_dp(problem: PlacementProblem, blocks: Blocks, tables: Tables, lattice: IdealLattice,
            bound: float, deadline: float, progress: Progress | None) -> _DpRun:
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
    walk = kernel("_dp_ideals", n * n * n_states)
    pairs = 0
    reported = time.monotonic()
    for lo in range(0, n, CHUNK):
        hi = min(n, lo + CHUNK)
        pairs += walk(lo, hi, lattice.down_ptr, lattice.down_block, lattice.down_to,
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


def _backtrack(problem: PlacementProblem, blocks: Blocks, tables: Tables, lattice: IdealLattice,
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


def _lower_bound(problem: PlacementProblem, tables: Tables) -> float:
    """max(largest block's cheapest compute, total cheapest compute / devices)."""
    latency = np.where(tables.unsupported > 0, np.inf, tables.compute)
    return work_load_bound(problem, cheapest_latency(problem, latency))


def _relaxed_bounds(tables: Tables, lattice: IdealLattice, low: float, high: float
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


def _infeasible(problem: PlacementProblem, blocks: Blocks, tables: Tables) -> FpgaplaceError:
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
                        upper_bound: float | None = None, progress: Progress | None = None, *,
                        max_ideals: int = MAX_IDEALS) -> Placement:
    """The optimal contiguous split for max-load (module docstring); value = bound = optimum.

    ``upper_bound`` (e.g. from a heuristic) tightens the cut; the DP then only finds splits of
    max-load below it. On hitting ``time_limit`` the best linear split is returned with status
    "time limit" and a simple lower bound. Raises ``FpgaplaceError`` when no contiguous split
    fits, ``StateSpaceTooLarge`` when the graph has more than ``max_ideals`` ideals. A plain chain
    (``chain.chain_order``) is solved as a linear partition problem instead (``chain.solve_chain``,
    any length).
    """
    started = time.monotonic()
    deadline = started + (time_limit if time_limit is not None else math.inf)
    if problem.n == 0:
        return Placement(device=np.zeros(0, dtype=np.int64), method="dp", value=0.0, bound=0.0,
                         status="optimal", seconds=0.0)
    order = chain_order(problem)
    if order is not None:  # the linear partition problem: exact at any length
        try:
            placement = solve_chain(problem, order, None if time_limit is None else deadline - time.monotonic(),
                                    work_load_bound(problem, cheapest_latency(problem)))
        except ChainInfeasible:  # the DP's diagnosis names the op that fits no device, if one does not
            blocks = build_blocks(problem)
            raise _infeasible(problem, blocks, build_tables(problem, blocks)) from None
        placement.seconds = time.monotonic() - started
        return placement
    blocks = build_blocks(problem)
    lattice = enumerate_ideals(blocks.count, blocks.edges, limit=max_ideals,
                               source=problem.source)
    placement = _solve_on_blocks(problem, blocks, lattice, deadline, upper_bound, progress)
    placement.seconds = time.monotonic() - started
    return placement


def _solve_on_blocks(problem: PlacementProblem, blocks: Blocks, lattice: IdealLattice,
                     deadline: float, upper_bound: float | None, progress: Progress | None) -> Placement:
    """Steps 2-5 of the module docstring on given blocks and their ideals; ``bound`` is valid
    for splits of these blocks (the caller decides whether it holds for the problem)."""
    tables = build_tables(problem, blocks)
    if progress is not None:
        progress(f"DP: {blocks.count} blocks, {lattice.count:,} ideals")
    incumbent, best = None, math.inf
    for first, order in enumerate(topological_orders(blocks)):
        # O(B^2) each: the first order always ends (an incumbent), the others within the time limit
        run = _run_dp(problem, blocks, tables, chain_lattice(order), math.inf,
                      math.inf if first == 0 else deadline, None)
        if not run.finished:
            break
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
                   pieces: int, by_memory: bool = True, tables: Tables | None = None) -> Blocks:
    """Cut a topological ``order`` of the blocks into about ``pieces`` intervals of equal
    cheapest compute, each (where one block allows, and ``by_memory``) within the smallest
    accelerator memory.

    An interval of a topological order is convex (a path between two of its blocks only visits
    blocks ordered between them) and every edge between intervals goes forward, so each chain of
    ideals of the coarse graph is one of the blocks' graph: the coarse DP's split is feasible
    for the problem, its optimum an upper bound. O(B + m), plus ``build_tables`` unless the
    blocks' ``tables`` are given.
    """
    tables = tables if tables is not None else build_tables(problem, blocks)
    memory = min((problem.kinds[k].memory for k in problem.accelerator_kinds()
                  if problem.kinds[k].count > 0), default=math.inf) if by_memory else math.inf
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
                  edges=block_edges(interval, blocks.edges))


def solve_coarsened_dp(problem: PlacementProblem, time_limit: float | None = None,
                       progress: Progress | None = None, *, max_ideals: int | None = None) -> Placement:
    """A contiguous split for graphs past the DP's state space: the exact DP over the finest
    coarsening (``coarsen_blocks`` of a depth-first topological order, pieces shrunk by
    ``COARSEN_FACTOR`` per round) whose ideal count stays within ``max_ideals``.

    Returns the split with ``value`` its evaluated max-load and ``bound`` a lower bound on every
    split (total cheapest work / devices, largest block, ``bounds.memory_load_bound``); the coarse DP's
    own optimum bounds only the coarse splits. ``max_ideals`` defaults to ``COARSE_IDEALS``, and
    to ``IDEALS_PER_SECOND`` per second of a ``time_limit`` where that is fewer (at least
    ``MIN_COARSE_IDEALS``): the DP's pairs grow with the square of the ideals. Rounds end: the
    pieces shrink to one, and a round at one piece that still has too many ideals (memory cuts)
    is followed by one without memory cuts. Each round costs one enumeration of at most
    ``max_ideals`` ideals; the DP then costs what the module docstring says for the coarse graph.
    """
    started = time.monotonic()
    deadline = started + (time_limit if time_limit is not None else math.inf)
    if max_ideals is None:
        max_ideals = COARSE_IDEALS if time_limit is None else \
            int(min(COARSE_IDEALS, max(MIN_COARSE_IDEALS, IDEALS_PER_SECOND * time_limit)))
    blocks = build_blocks(problem)
    tables = build_tables(problem, blocks)
    lower = _lower_bound(problem, tables)
    order = topological_orders(blocks)[2]
    pieces, by_memory = min(blocks.count, max_ideals), True  # n pieces give at least n + 1 ideals
    while True:
        coarse = coarsen_blocks(problem, blocks, order, pieces, by_memory, tables)
        try:
            lattice = enumerate_ideals(coarse.count, coarse.edges, limit=max_ideals,
                                       source=problem.source)
            break
        except StateSpaceTooLarge:
            # at one piece only the memory cuts remain (a tiny memory cuts at every block):
            # drop them, so the last round is one interval and the loop ends
            by_memory = by_memory and pieces > 1
            pieces = max(1, int(min(pieces, coarse.count) * COARSEN_FACTOR))
    if progress is not None:
        progress(f"DP: {blocks.count} blocks coarsened to {coarse.count} intervals "
                 f"({lattice.count:,} ideals)")
    placement = _solve_on_blocks(problem, coarse, lattice, deadline, None, progress)
    placement.value = max(device_loads(problem, placement.device))
    placement.bound = min(max(lower, memory_load_bound(problem)), placement.value)
    placement.status = f"heuristic (DP over {coarse.count} intervals of {blocks.count} blocks: " \
                       f"{placement.status})"
    placement.method = "dp"
    placement.seconds = time.monotonic() - started
    return placement
