"""Plain DAG algorithms over vertices ``0..n-1`` and a list of directed edges ``(u, v)``.

Every stage that orders or contracts a graph (the ONNX front end, the IR, the graph passes,
the workload reader, the evaluator and the solvers) uses these, so each algorithm is written
once. Vertices are plain ints; callers map their own names or nodes to positions.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

import numpy as np


class CycleError(ValueError):
    """The graph has a directed cycle; ``node`` is one vertex on it."""

    def __init__(self, node: int) -> None:
        super().__init__(f"graph has a cycle through vertex {node}")
        self.node = node


def successor_lists(n: int, edges: list[tuple[int, int]]) -> list[list[int]]:
    """Adjacency lists, each in edge order. O(n + m)."""
    succ: list[list[int]] = [[] for _ in range(n)]
    for u, v in edges:
        succ[u].append(v)
    return succ


def topological_order(n: int, edges: list[tuple[int, int]],
                      key: Callable[[int], Any] | None = None) -> list[int]:
    """A topological order that takes the ready vertex of smallest ``(key(v), v)`` first
    (``key`` None: smallest index first), so the order is deterministic and, with ``key`` a
    vertex's stored position, as close to the stored order as the edges allow.

    Kahn's algorithm with a min-heap (Kahn 1962), O((n + m) log n). Raises ``CycleError``
    naming a vertex on a cycle when there is one.
    """
    indegree = [0] * n
    succ = successor_lists(n, edges)
    for _, v in edges:
        indegree[v] += 1
    entry = (lambda v: (v,)) if key is None else (lambda v: (key(v), v))
    ready = [entry(v) for v in range(n) if indegree[v] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        u = heapq.heappop(ready)[-1]
        order.append(u)
        for v in succ[u]:
            indegree[v] -= 1
            if indegree[v] == 0:
                heapq.heappush(ready, entry(v))
    if len(order) != n:
        raise CycleError(_vertex_on_cycle(n, edges, indegree))
    return order


def node_on_cycle(n: int, edges: list[tuple[int, int]]) -> int | None:
    """A vertex on a directed cycle, or None if the graph is acyclic. O(n + m) (Kahn's
    algorithm with a stack, then a walk back along predecessors)."""
    indegree = [0] * n
    succ = successor_lists(n, edges)
    for _, v in edges:
        indegree[v] += 1
    stack = [v for v in range(n) if indegree[v] == 0]
    seen = 0
    while stack:
        u = stack.pop()
        seen += 1
        for v in succ[u]:
            indegree[v] -= 1
            if indegree[v] == 0:
                stack.append(v)
    return None if seen == n else _vertex_on_cycle(n, edges, indegree)


def _vertex_on_cycle(n: int, edges: list[tuple[int, int]], indegree: list[int]) -> int:
    """After Kahn's algorithm stopped early (``indegree`` > 0 for the vertices left), a vertex
    on a cycle: every vertex left has a predecessor left, so walking predecessors must revisit
    a vertex, and the first revisited one lies on a cycle. O(n + m)."""
    pred = [-1] * n
    for u, v in edges:
        if indegree[u] > 0 and indegree[v] > 0:
            pred[v] = u
    v = next(i for i in range(n) if indegree[i] > 0)
    visited: set[int] = set()
    while v not in visited:
        visited.add(v)
        v = pred[v]
    return v


def strong_components(n: int, edges: list[tuple[int, int]]) -> np.ndarray:
    """Component index of each vertex (int64 array); components are numbered in the order
    Tarjan's algorithm closes them, i.e. sinks first (Tarjan 1972, iterative, O(n + m))."""
    succ = successor_lists(n, edges)
    index = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    stack: list[int] = []
    comp = np.full(n, -1, dtype=np.int64)
    counter = 0
    n_comp = 0
    for root in range(n):
        if index[root] >= 0:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack[v] = True
            if i < len(succ[v]):
                work.append((v, i + 1))
                w = succ[v][i]
                if index[w] < 0:
                    work.append((w, 0))
                elif on_stack[w]:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    comp[w] = n_comp
                    if w == v:
                        break
                n_comp += 1
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return comp
