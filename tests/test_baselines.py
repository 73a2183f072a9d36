"""Baselines: every answer is scored by the evaluator, respects memory, support and colours."""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import replace

import numpy as np
import pytest
from conftest import WORKLOADS
from hypothesis import given, settings
from hypothesis import strategies as st

from fpgaplace.place.solvers.baselines import (
    all_cpu,
    check_feasible,
    colour_blocks,
    from_split_file,
    greedy_latency,
    local_search,
    partitioner,
    pipedream,
    single_accelerator,
)
from fpgaplace.place.solvers.evaluate import evaluate
from fpgaplace.place.solvers.problem import DeviceKind, Placement, PlacementProblem
from fpgaplace.place.workload import load_workload
from fpgaplace.util.errors import FpgaplaceError


def chain(latency_fpga: list[float], latency_cpu: list[float], size: list[float],
          transfer: list[float], memory: float = 10.0, accelerators: int = 2, cpus: int = 1,
          color: list[int] | None = None) -> PlacementProblem:
    n = len(latency_fpga)
    return PlacementProblem(
        names=[f"n{i}" for i in range(n)], ids=[100 + i for i in range(n)],
        edges=[(i, i + 1) for i in range(n - 1)],
        kinds=[DeviceKind("fpga", accelerators, memory, False),
               DeviceKind("cpu", cpus, math.inf, True)],
        latency=np.column_stack([latency_fpga, latency_cpu]).astype(float),
        size=np.array(size, float), transfer=np.array(transfer, float),
        backward=np.zeros(n, dtype=bool),
        color=np.array(color if color else [-1] * n, dtype=np.int64), source="test",
    )


def check(problem: PlacementProblem, placement: Placement, objective: str) -> None:
    result = evaluate(problem, placement)
    assert result.feasible, result.violations
    measured = result.max_load if objective == "throughput" else result.latency
    assert placement.value == pytest.approx(measured, rel=1e-9)
    assert placement.bound == -math.inf and placement.status == "heuristic"
    assert placement.objective == objective


@st.composite
def chains(draw: st.DrawFn) -> PlacementProblem:
    n = draw(st.integers(1, 7))
    lat = st.integers(1, 20).map(float)
    fpga = [draw(lat) if draw(st.integers(0, 4)) else math.inf for _ in range(n)]
    return chain(fpga, [draw(lat) * 4 for _ in range(n)],
                 [float(draw(st.integers(0, 6))) for _ in range(n)],
                 [float(draw(st.integers(0, 4))) for _ in range(n)])


def best_linear_split(problem: PlacementProblem) -> float:
    """Brute force over every split of a chain into runs on distinct devices."""
    best = math.inf
    n = problem.n
    for cuts in itertools.product([False, True], repeat=n - 1):
        runs: list[list[int]] = [[0]]
        for v in range(1, n):
            if cuts[v - 1]:
                runs.append([])
            runs[-1].append(v)
        for targets in itertools.permutations(range(len(problem.devices())), len(runs)):
            device = np.zeros(n, dtype=np.int64)
            for run, d in zip(runs, targets, strict=True):
                device[run] = d
            result = evaluate(problem, Placement(device=device))
            if result.feasible:
                best = min(best, result.max_load)
    return best


@settings(max_examples=25, deadline=None)
@given(chains())
def test_pipedream_is_optimal_on_chains(problem: PlacementProblem) -> None:
    answer = pipedream(problem)
    check(problem, answer, "throughput")
    assert answer.contiguous
    assert answer.value == pytest.approx(best_linear_split(problem), rel=1e-9)


@settings(max_examples=25, deadline=None)
@given(chains())
def test_every_baseline_is_scored_and_feasible(problem: PlacementProblem) -> None:
    check(problem, greedy_latency(problem), "latency")
    for objective in ("throughput", "latency"):
        check(problem, partitioner(problem, objective), objective)
        check(problem, all_cpu(problem, objective), objective)
        searched = local_search(problem, objective, restarts=2, time_limit=1.0)
        check(problem, searched, objective)
        assert searched.value <= pipedream(problem, objective).value + 1e-9


def test_greedy_fills_accelerators_in_order_while_memory_fits() -> None:
    problem = chain([1, 1, 1, 1, 1], [9, 9, 9, 9, 9], size=[4, 4, 4, 4, 4],
                    transfer=[0, 0, 0, 0, 0], memory=10.0, accelerators=2)
    answer = greedy_latency(problem)
    assert answer.device.tolist() == [0, 0, 1, 1, 2]
    check(problem, answer, "latency")
    assert answer.value == pytest.approx(1 + 1 + 1 + 1 + 9)


def test_greedy_past_its_deadline_keeps_its_cut_order_unscored_against_the_derived_one() -> None:
    # node 1 (CPU only) cuts the accelerator's run between 0 and 2, which one derived subgraph
    # joins: the cut order pays tensor 0's transfer twice (latency 4 + 4), the derived none (2)
    problem = replace(chain([1, math.inf, 1], [1, 1, 1], size=[1, 1, 1], transfer=[3, 0, 0],
                            accelerators=1), edges=[(0, 2)])
    unhurried = greedy_latency(problem)
    hurried = greedy_latency(problem, deadline=time.perf_counter())
    assert unhurried.order is None and unhurried.value == pytest.approx(2)
    assert hurried.order is not None and hurried.value == pytest.approx(8)
    check(problem, unhurried, "latency")
    check(problem, hurried, "latency")


def test_local_search_out_of_time_returns_its_start_scored() -> None:
    problem = chain([1, 2, 3, 4], [9, 9, 9, 9], size=[1, 1, 1, 1], transfer=[1, 1, 1, 1])
    start = greedy_latency(problem)
    for objective in ("throughput", "latency"):
        answer = local_search(problem, objective, time_limit=0.0, starts=[start])
        assert answer.device.tolist() == start.device.tolist() and answer.method == "local-search"
        check(problem, answer, objective)


def test_greedy_splits_an_accelerator_around_a_cpu_node() -> None:
    problem = chain([1, math.inf, 1], [5, 5, 5], size=[1, 1, 1], transfer=[1, 1, 1],
                    accelerators=1)
    answer = greedy_latency(problem)
    assert answer.device.tolist() == [0, 1, 0]
    assert answer.order[0] < answer.order[2]
    check(problem, answer, "latency")
    assert answer.value == pytest.approx((1 + 1) + 5 + (1 + 1))


def test_colour_classes_move_as_one_block() -> None:
    # node 0 (a weight) is coloured with node 3: every baseline keeps them together
    problem = chain([0, 1, 1, 1], [0, 4, 4, 4], size=[6, 1, 1, 1], transfer=[1, 1, 1, 1],
                    memory=8.0, color=[5, -1, -1, 5])
    problem.edges = [(1, 2), (2, 3), (0, 3)]
    blocks = colour_blocks(problem)
    assert sorted(map(sorted, blocks.members)) == [[0, 3], [1], [2]]
    for answer in (greedy_latency(problem), pipedream(problem), partitioner(problem),
                   local_search(problem, time_limit=1.0), single_accelerator(problem)):
        assert answer.device[0] == answer.device[3], answer.method


def test_partitioner_sends_unsupported_nodes_to_cpu() -> None:
    problem = chain([1, math.inf, 1, 1], [4, 4, 4, 4], size=[1, 1, 1, 1], transfer=[1] * 4)
    answer = partitioner(problem)
    assert answer.device[1] == 2
    check(problem, answer, "throughput")


def test_single_accelerator_that_overflows_is_infeasible() -> None:
    problem = chain([1, 1], [4, 4], size=[6, 6], transfer=[1, 1], memory=10.0)
    answer = single_accelerator(problem)
    assert answer.status == "infeasible" and answer.value == math.inf


def test_check_feasible_names_the_node_and_shortfall() -> None:
    problem = chain([1, 1], [math.inf, 1], size=[12.5, 1], transfer=[0, 0], memory=10.0)
    with pytest.raises(FpgaplaceError, match=r"'n0' \(id 100\).*short by 2 bytes"):
        check_feasible(problem)
    problem = chain([math.inf], [math.inf], size=[1], transfer=[0])
    with pytest.raises(FpgaplaceError, match=r"'n0'.*no available device"):
        greedy_latency(problem)
    check_feasible(chain([1], [1], size=[99], transfer=[0]))  # a CPU can take it


def test_memory_of_cpu_only_nodes_must_fit_in_total() -> None:
    problem = chain([1, 1, 1], [math.inf] * 3, size=[8, 8, 8], transfer=[0] * 3,
                    memory=10.0, accelerators=2)
    with pytest.raises(FpgaplaceError, match="short by 4 bytes"):
        check_feasible(problem)


def test_expert_split_on_bert24_is_no_better_than_the_optimum() -> None:
    problem = load_workload(WORKLOADS / "throughput/layer-bert24_inference.json")
    answer = from_split_file(WORKLOADS / "expert-splits/bert24_inference_expert.json", problem)
    check(problem, answer, "throughput")
    assert answer.value >= 17.78990625 * (1 - 1e-9)


def test_pipedream_reaches_bert24_optimum_and_baselines_run_on_workloads() -> None:
    problem = load_workload(WORKLOADS / "throughput/layer-bert24_inference.json")
    answer = pipedream(problem)
    check(problem, answer, "throughput")
    assert answer.value >= 17.78990625 * (1 - 1e-9)  # never below the published optimum
    training = load_workload(WORKLOADS / "throughput/op-bert_l-3_training.json")
    for placement in (pipedream(training), partitioner(training), greedy_latency(training)):
        assert evaluate(training, placement).feasible


@pytest.mark.parametrize("seed", range(6))
def test_pipedreams_stage_transfers_are_the_tensors_crossing_each_stage(seed):
    """cost[i, j] of ``_stage_transfer_costs`` against its definition: every op with an edge
    crossing the boundary of the stage flat[i:j], counted once (random 12-op DAGs)."""
    from fpgaplace.place.solvers.baselines import _stage_transfer_costs, colour_blocks

    rng = np.random.default_rng(seed)
    n = 12
    edges = sorted({(int(a), int(b)) for a, b in rng.integers(0, n, (3 * n, 2)) if a < b})
    problem = PlacementProblem(
        names=[f"v{i}" for i in range(n)], ids=list(range(n)), edges=edges,
        kinds=[DeviceKind("fpga", 2, 10.0, False), DeviceKind("cpu", 1, math.inf, True)],
        latency=np.ones((n, 2)), size=np.ones(n), transfer=rng.uniform(0, 5, n), backward=np.zeros(n, bool),
        color=np.full(n, -1))
    flat = colour_blocks(problem).flat
    cost = _stage_transfer_costs(problem, flat)
    for i, j in itertools.combinations(range(n + 1), 2):
        stage = set(flat[i:j])
        crossing = {u for u, v in edges if (u in stage) != (v in stage)}
        assert cost[i, j] == pytest.approx(sum(problem.transfer[u] for u in crossing), abs=1e-12)
