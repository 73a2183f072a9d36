"""Plain DAG algorithms: stable topological order, cycle witness, strongly connected components."""

from __future__ import annotations

import itertools
import random

import networkx as nx
import pytest

from fpgaplace.util.graphs import CycleError, node_on_cycle, strong_components, topological_order


def _random_dag(n: int, m: int, seed: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    pairs = list(itertools.combinations(range(n), 2))
    perm = list(range(n))
    rng.shuffle(perm)
    return [(perm[a], perm[b]) for a, b in rng.sample(pairs, min(m, len(pairs)))]


@pytest.mark.parametrize("seed", range(20))
def test_order_matches_networkx_lexicographic_sort(seed: int) -> None:
    edges = _random_dag(12, 20, seed)
    graph = nx.DiGraph(edges)
    graph.add_nodes_from(range(12))
    assert topological_order(12, edges) == list(nx.lexicographical_topological_sort(graph))
    key = [(7 * v) % 12 for v in range(12)]
    expected = list(nx.lexicographical_topological_sort(graph, key=lambda v: key[v]))
    assert topological_order(12, edges, key=lambda v: key[v]) == expected


def test_ties_in_key_fall_back_to_the_index() -> None:
    assert topological_order(4, [], key=lambda v: 0) == [0, 1, 2, 3]
    assert topological_order(4, [(3, 0)], key=lambda v: -v) == [3, 2, 1, 0]


def test_cycle_error_names_a_vertex_on_the_cycle() -> None:
    edges = [(0, 1), (1, 2), (2, 3), (3, 1), (3, 4)]
    with pytest.raises(CycleError) as info:
        topological_order(5, edges)
    assert info.value.node in {1, 2, 3}
    assert isinstance(info.value, ValueError)


def test_node_on_cycle() -> None:
    assert node_on_cycle(4, [(0, 1), (1, 2), (0, 3)]) is None
    assert node_on_cycle(5, [(4, 0), (0, 1), (1, 0), (1, 2)]) in {0, 1}
    assert node_on_cycle(2, [(1, 1)]) == 1


@pytest.mark.parametrize("seed", range(10))
def test_strong_components_match_networkx(seed: int) -> None:
    rng = random.Random(seed)
    edges = [(rng.randrange(10), rng.randrange(10)) for _ in range(15)]
    comp = strong_components(10, edges)
    graph = nx.DiGraph(edges)
    graph.add_nodes_from(range(10))
    expected = {frozenset(c) for c in nx.strongly_connected_components(graph)}
    found: dict[int, set[int]] = {}
    for v, c in enumerate(comp):
        found.setdefault(int(c), set()).add(v)
    assert {frozenset(c) for c in found.values()} == expected
    for u, v in edges:  # sinks first: an edge never goes to a later-closed component
        assert comp[u] >= comp[v]
