"""The reduction of a placement problem before an integer program is built, and the projection of
a start placement onto its result.

Source: Tarnawski et al., "Efficient Algorithms for Device Placement of DNN Graph Operators"
(NeurIPS 2020, Sections 4-5 and Appendix: the nodes of a colour class share a device); the
zero-node merges and the shared transfer terms are our own exact reductions.

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

Warm starts: a heuristic start usually splits a group (zero nodes on another device than their
    input), so each start is first projected onto the groups: a group follows its root's device
    (and, for latency, its root's subgraph). This never raises a load or a finish time; the
    evaluator scores the projection anyway.

Complexity: ``contract`` O((n + m) log n) with a union-find; ``project_onto_groups`` O(G).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from fpgaplace.place.solvers.evaluate import class_graph, topological_order
from fpgaplace.place.solvers.problem import Placement, PlacementProblem


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


def allowed(problem: PlacementProblem, groups: Groups, g: int, kind: int) -> bool:
    """Whether group g may sit on a device of ``kind``: every member runs there and, on an
    accelerator, the group fits its memory."""
    if not math.isfinite(groups.latency[g, kind]):
        return False
    return problem.kinds[kind].is_cpu or groups.size[g] <= problem.kinds[kind].memory
