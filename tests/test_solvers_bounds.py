"""The critical-path latency bound: never above any placement's evaluated latency (brute force
on small random graphs, every solver on the public latency workloads), never below the static
longest path."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from fpgaplace.place.solvers.bounds import critical_path_bound, static_path_bound
from fpgaplace.place.solvers.evaluate import evaluate
from fpgaplace.place.solvers.problem import DeviceKind, Placement, PlacementProblem
from fpgaplace.place.solvers.run import SolveOptions, solve
from fpgaplace.place.workload import load_workload

LATENCY_WORKLOADS = sorted((Path(__file__).resolve().parent / "workloads" / "latency").glob("*.json"))


def random_problem(seed: int, n: int = 6) -> PlacementProblem:
    """A random DAG on two memory-limited accelerators and one CPU, with transfer-heavy nodes."""
    rng = np.random.default_rng(seed)
    edges = sorted({(int(a), int(b)) for a, b in rng.integers(0, n, (2 * n, 2)) if a < b})
    kinds = [DeviceKind("fpga", 2, 5.0, False), DeviceKind("cpu", 1, math.inf, True)]
    fpga = rng.integers(0, 4, n).astype(float)
    fpga[rng.random(n) < 0.1] = np.inf
    return PlacementProblem(
        names=[f"v{i}" for i in range(n)], ids=list(range(n)), edges=edges, kinds=kinds,
        latency=np.column_stack([fpga, rng.integers(1, 12, n).astype(float)]),
        size=rng.integers(0, 4, n).astype(float), transfer=rng.integers(0, 5, n).astype(float),
        backward=np.zeros(n, bool), color=np.full(n, -1), source=f"random-{seed}")


def subgraphs_per_accelerator(problem: PlacementProblem, placement: Placement) -> int:
    schedule = evaluate(problem, placement).schedule
    counts: dict[int, int] = {}
    for entry in schedule:
        if entry.nodes and not problem.kinds[problem.devices()[entry.device][0]].is_cpu:
            counts[entry.device] = counts.get(entry.device, 0) + 1
    return max(counts.values(), default=0)


@pytest.mark.parametrize("seed", range(12))
def test_bound_never_above_the_brute_force_optimum(seed):
    problem = random_problem(seed)
    best = {1: math.inf, problem.n: math.inf}  # least latency with one / any number of subgraphs
    for assignment in itertools.product(range(len(problem.devices())), repeat=problem.n):
        placement = Placement(device=np.array(assignment), objective="latency")
        evaluation = evaluate(problem, placement)
        if not evaluation.feasible:
            continue
        for q in best:
            if subgraphs_per_accelerator(problem, placement) <= q:
                best[q] = min(best[q], evaluation.latency)
    for q, optimum in best.items():
        bound = critical_path_bound(problem, subgraphs_per_device=q)
        assert static_path_bound(problem) <= bound <= optimum * (1 + 1e-12)


def test_bound_rises_above_the_static_path_when_transfers_bind():
    # a chain a -> b -> c: each fits an accelerator alone, any two together do not, CPUs are slow;
    # every split pays two transfers in and out of accelerator segments
    kinds = [DeviceKind("fpga", 3, 1.0, False), DeviceKind("cpu", 1, math.inf, True)]
    problem = PlacementProblem(
        names=["a", "b", "c"], ids=[0, 1, 2], edges=[(0, 1), (1, 2)], kinds=kinds,
        latency=np.array([[1.0, 100.0]] * 3), size=np.ones(3), transfer=np.full(3, 2.0),
        backward=np.zeros(3, bool), color=np.full(3, -1))
    assert static_path_bound(problem) == 3.0
    # a (1) + write (2), read (2) + b (1) + write (2), read (2) + c (1): the optimum itself
    assert critical_path_bound(problem) == 11.0
    placement = Placement(device=np.array([0, 1, 2]), objective="latency")
    assert evaluate(problem, placement).latency == 11.0


@pytest.mark.slow
@pytest.mark.parametrize("path", LATENCY_WORKLOADS, ids=lambda p: p.stem)
def test_bound_below_every_solver_on_the_public_latency_workloads(path):
    problem = load_workload(path)
    bound = critical_path_bound(problem)
    assert bound >= static_path_bound(problem)
    options = SolveOptions(objective="latency", time_limit=4)
    for method in ("greedy", "pipedream", "local-search", "ip", "partitioner", "single", "cpu"):
        result = solve(problem, method, options)
        if result.evaluation.feasible:
            assert bound <= evaluate(problem, result.placement).latency * (1 + 1e-12), method


@pytest.mark.parametrize("seed", range(6))
def test_outputs_exist_a_tail_before_the_end(seed):
    from fpgaplace.place.solvers.bounds import finish_lower_bounds, static_tails

    problem = random_problem(seed, n=8)
    problem.latency[:3, 0] = np.inf  # some CPU-only nodes, whose successors must wait for them
    problem.kinds[0] = DeviceKind("fpga", 2, 12.0, False)  # most random placements fit
    tails, floors = static_tails(problem), finish_lower_bounds(problem, problem.n)
    rng = np.random.default_rng(seed)
    checked = 0
    for _ in range(600):
        placement = Placement(device=rng.integers(0, len(problem.devices()), problem.n), objective="latency")
        evaluation = evaluate(problem, placement)
        if not evaluation.feasible:
            continue
        checked += 1
        exists = np.zeros(problem.n)
        for entry in evaluation.schedule:
            exists[entry.nodes] = entry.end
        assert np.all(exists + tails <= evaluation.latency + 1e-9)
        assert np.all(floors <= exists + 1e-9)
    assert checked >= 5


@pytest.mark.parametrize("path", sorted((LATENCY_WORKLOADS[0].parents[1] / "throughput").glob("*.json")),
                         ids=lambda p: p.stem)
def test_memory_load_bound_below_the_dp_optimum(path):
    from fpgaplace.place.solvers.bounds import memory_load_bound
    from fpgaplace.place.solvers.dp import solve_throughput_dp

    problem = load_workload(path)
    optimum = solve_throughput_dp(problem)
    assert 0 < memory_load_bound(problem) <= optimum.value


@pytest.mark.parametrize("seed", range(6))
def test_memory_load_bound_below_the_brute_force_max_load(seed):
    from fpgaplace.place.solvers.bounds import memory_load_bound

    problem = random_problem(seed)
    best = math.inf
    for assignment in itertools.product(range(len(problem.devices())), repeat=problem.n):
        evaluation = evaluate(problem, Placement(device=np.array(assignment)))
        if evaluation.feasible:
            best = min(best, evaluation.max_load)
    assert memory_load_bound(problem) <= best


def test_the_path_bound_never_above_the_brute_force_optimum_and_sometimes_above_the_finish_bound():
    """``chain.path_latency_bound`` (a heaviest path split into intervals, skip edges' tensors
    counted, colour classes and routes around the path too) against every placement of 12
    random 7-op DAGs (half with two colour classes), one and any number of subgraphs."""
    from fpgaplace.place.solvers.bounds import cheapest_latency, finish_lower_bounds
    from fpgaplace.place.solvers.chain import path_latency_bound

    above = 0
    for seed in [*range(108, 118), 207, 247]:  # 207, 247: routes around the path that add to the bound
        problem = random_problem(seed, n=7)
        if seed % 2:  # colour classes: two pairs of ops that must share a device
            rng = np.random.default_rng(seed)
            pairs = rng.permutation(problem.n)[:4]
            problem.color = np.full(problem.n, -1)
            problem.color[pairs[:2]], problem.color[pairs[2:]] = 0, 1
        best = {1: math.inf, problem.n: math.inf}
        for assignment in itertools.product(range(len(problem.devices())), repeat=problem.n):
            placement = Placement(device=np.array(assignment), objective="latency")
            evaluation = evaluate(problem, placement)
            if evaluation.feasible:
                for q in best:
                    if subgraphs_per_accelerator(problem, placement) <= q:
                        best[q] = min(best[q], evaluation.latency)
        for q, optimum in best.items():
            bound = path_latency_bound(problem, q, cheapest_latency(problem))
            assert bound <= optimum * (1 + 1e-12), (seed, q)
            above += bound > finish_lower_bounds(problem, q).max() * (1 + 1e-9)
    assert above >= 1
