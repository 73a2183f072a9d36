"""The contiguous DP's two hot loops, over flat arrays (``Tables``): the contiguity relaxation
(``_fits_below``) and the DP walk (``_dp_ideals``), run as plain Python on small lattices and
compiled with numba otherwise (``kernel``; the machine code is cached beside this file).

Source: Tarnawski et al., "Efficient Algorithms for Device Placement of DNN Graph Operators",
NeurIPS 2020, Section 4 (DP over ideals); the walk and the relaxation are our own.

Relaxation (step 3 of ``dp``)
    below[I][s] = "ideal I splits into a chain over the devices of state s with every device's
    *compute* below a cut x" (transfer and memory dropped, so it over-approximates the real
    feasibility), and above[I][F] the same for the complement of I over F devices (the reversed
    lattice). Compute is additive over ideals, so for each state the best sub-ideal is a running
    max over down-links (a min over the subset lattice): O(N * kinds * states * degree), no pairs.

DP walk (step 5 of ``dp``)
    f[s][I] = least max-load placing ideal I on at most s devices, where s counts devices per
    kind (accelerator kinds and CPU kinds, mixed radix). For each ideal I (by size) a depth-first
    walk visits the sub-ideals J of I through down-links, each once, and keeps the set S = I \\ J
    with its compute load per kind, its size and its transfer cost updated incrementally as
    blocks join S (transfer via per-node counters of successors in S). Compute load and size only
    grow as J shrinks, so the walk stops descending when S's compute load reaches the bound on
    every kind (or memory is exceeded there); transfer cost is not monotone and is never used to
    cut. State s of I is skipped unless below[I][s] and above[I][full - s]; the walk relaxes and
    descends into J only if above[J][full - s + e_t] for a useful s of I and a kind t (false
    stays false as J shrinks). Relaxation:
        f[s][I] = min over J, kind t of  max(f[s - e_t][J], load_t(I \\ J)),
    plus "leave a device unused": f[s][I] <= f[s - e_t][I]. Back-links give the split.
    Time O(P * (T + deg)) for P visited ideal pairs (P <= N^2, far fewer with the cut) and
    T device-count states; memory O(N * T). The reference C++ stores every ideal pair with its
    scores; this walk stores none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fpgaplace.place.solvers.dp_ideals import Blocks
from fpgaplace.place.solvers.problem import PlacementProblem

PYTHON_WORK = 60_000  # ideals^2 x states up to which the DP's kernels run as plain Python


@dataclass
class Tables:
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


def build_tables(problem: PlacementProblem, blocks: Blocks) -> Tables:
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
    return Tables(
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
    devices left can hold the rest (capacities in cheapest-compute units, see ``dp._capacities``);
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
            depth += 1  # a frame with no links left (no descent) only takes b out again
            stack_ideal[depth] = lower
            stack_next[depth] = down_ptr[lower] if descend else down_ptr[lower + 1]
            stack_block[depth] = b
        for s in range(n_states):  # leave one device of kind t unused
            for t in range(n_kinds):
                if digit[s, t] > 0 and f[ideal, s - stride[t]] < f[ideal, s]:
                    f[ideal, s] = f[ideal, s - stride[t]]
                    back_ideal[ideal, s] = ideal
                    back_kind[ideal, s] = t
    return pairs


_PYTHON_KERNELS = {f.__name__: f for f in (_crossing, _toggle_block, _fits_below, _dp_ideals)}
_compiled: dict[str, Callable] = {}


def kernel(name: str, work: float) -> Callable:
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
