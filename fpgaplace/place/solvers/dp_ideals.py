"""The contiguous DP's search space: nodes grouped into blocks, and the lattice of ideals of the
block graph, whose chains are the contiguous splits.

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

Enumeration
    Ideals are enumerated breadth-first by size, as bitsets with a hash map, recording for each
    ideal its *down-links* (ideal minus one maximal block). O(N * width * degree) set operations
    for N ideals; past ``MAX_IDEALS`` it raises ``StateSpaceTooLarge``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fpgaplace.place.solvers.evaluate import class_graph
from fpgaplace.place.solvers.problem import PlacementProblem
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.graphs import strong_components, topological_order

MAX_IDEALS = 150_000


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


def block_edges(of_class: np.ndarray, class_edges: list[tuple[int, int]]) -> list[tuple[int, int]]:
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
    return Blocks(of_node=block, count=count, edges=block_edges(class_block, class_edges))


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


def chain_lattice(order: list[int]) -> IdealLattice:
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


def topological_orders(blocks: Blocks) -> list[list[int]]:
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


def reversed_lattice(lattice: IdealLattice) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Up-links as the down-links of the reversed lattice (ideal I becomes n - 1 - I)."""
    n = lattice.count
    upper = np.repeat(np.arange(n), np.diff(lattice.down_ptr))
    lower = lattice.down_to
    order = np.argsort(n - 1 - lower, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    ptr[1:] = np.cumsum(np.bincount(n - 1 - lower, minlength=n))
    return ptr, lattice.down_block[order].astype(np.int64), (n - 1 - upper[order]).astype(np.int64)
