"""Integer programs on SCIP: exactness against brute force, latency semantics, limits, errors."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import WORKLOADS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_dp_vs_ip import is_chain

from fpgaplace.place.solvers.baselines import greedy_latency, pipedream
from fpgaplace.place.solvers.evaluate import evaluate
from fpgaplace.place.solvers.ip.latency import project_latency_start, solve_latency_ip
from fpgaplace.place.solvers.ip.reduce import Groups, contract, project_onto_groups
from fpgaplace.place.solvers.ip.throughput import project_throughput_start, solve_throughput_ip
from fpgaplace.place.solvers.problem import DeviceKind, Placement, PlacementProblem
from fpgaplace.place.workload import load_workload
from fpgaplace.util.errors import FpgaplaceError

REL = 1e-6


def make_problem(n: int, edges: list[tuple[int, int]], fpga: list[float], cpu: list[float],
                 size: list[float], transfer: list[float], memory: float = 10.0,
                 accelerators: int = 2, cpus: int = 1, unlimited: bool = True,
                 color: list[int] | None = None, backward: list[bool] | None = None
                 ) -> PlacementProblem:
    return PlacementProblem(
        names=[f"n{i}" for i in range(n)], ids=list(range(n)), edges=edges,
        kinds=[DeviceKind("fpga", accelerators, memory, False),
               DeviceKind("cpu", cpus, math.inf, True)],
        latency=np.column_stack([fpga, cpu]).astype(float), size=np.array(size, float),
        transfer=np.array(transfer, float),
        backward=np.array(backward if backward else [False] * n),
        color=np.array(color if color else [-1] * n, dtype=np.int64),
        cpu_overlap_unlimited=unlimited, source="test",
    )


@st.composite
def small_dags(draw: st.DrawFn, max_nodes: int = 8) -> PlacementProblem:
    n = draw(st.integers(2, max_nodes))
    pairs = [(u, v) for u in range(n) for v in range(u + 1, n)]
    edges = [e for e in pairs if draw(st.booleans())] if pairs else []
    edges = edges[: 2 * n]
    lat = st.integers(1, 20).map(float)
    fpga = [draw(lat) if draw(st.integers(0, 5)) else math.inf for _ in range(n)]
    cpu = [draw(lat) * 3 for _ in range(n)]
    size = [float(draw(st.integers(0, 6))) for _ in range(n)]
    transfer = [float(draw(st.integers(0, 5))) for _ in range(n)]
    return make_problem(n, edges, fpga, cpu, size, transfer)


def brute_force_max_load(problem: PlacementProblem, contiguous: bool) -> float:
    """Best max-load over every assignment (identical accelerators taken in one order);
    ``contiguous`` keeps chains of ideals (acyclic quotient graph), the DP's split space."""
    best = math.inf
    for assignment in itertools.product(range(3), repeat=problem.n):
        device = np.array(assignment)
        on = [np.flatnonzero(device == d) for d in (0, 1)]
        if len(on[1]) and (not len(on[0]) or on[1][0] < on[0][0]):
            continue  # the mirror image of a canonical assignment
        result = evaluate(problem, Placement(device=device))
        if result.feasible and (not contiguous or is_chain(problem, device)):
            best = min(best, result.max_load)
    return best


def assert_consistent(problem: PlacementProblem, placement: Placement, objective: str) -> None:
    """The answer passes the evaluator and its claimed value is what the evaluator says."""
    result = evaluate(problem, placement)
    assert result.feasible, result.violations
    measured = result.max_load if objective == "throughput" else result.latency
    assert placement.value == pytest.approx(measured, rel=REL, abs=1e-9)
    assert placement.bound <= placement.value * (1 + REL) + 1e-9
    if placement.status in ("optimal", "gap limit"):
        assert placement.bound == pytest.approx(placement.value, rel=1e-5, abs=1e-6)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_dags())
def test_contiguous_throughput_ip_equals_brute_force(problem: PlacementProblem) -> None:
    contiguous = solve_throughput_ip(problem, contiguous=True, time_limit=30)
    assert contiguous.status in ("optimal", "gap limit")
    assert_consistent(problem, contiguous, "throughput")
    assert evaluate(problem, contiguous).contiguous
    assert contiguous.value == pytest.approx(brute_force_max_load(problem, True), rel=REL)
    free = solve_throughput_ip(problem, contiguous=False, time_limit=30)
    assert_consistent(problem, free, "throughput")
    assert free.value <= contiguous.value * (1 + REL)
    assert free.value == pytest.approx(brute_force_max_load(problem, False), rel=REL)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_dags(), st.booleans())
def test_latency_ip_never_worse_than_greedy(problem: PlacementProblem, unlimited: bool) -> None:
    problem.cpu_overlap_unlimited = unlimited
    greedy = greedy_latency(problem)
    used = subgraphs_used(problem, greedy)
    answers = {q: solve_latency_ip(problem, subgraphs_per_device=q, time_limit=30)
               for q in sorted({1, 2, used})}
    for q, answer in answers.items():
        assert answer.status.startswith(("optimal", "gap limit"))
        assert answer.order is not None
        assert_consistent(problem, answer, "latency")
        if q >= used:  # greedy's split is one of the IP's candidates
            assert answer.value <= greedy.value * (1 + REL) + 1e-9
    assert answers[2].value <= answers[1].value * (1 + REL) + 1e-9


def subgraphs_used(problem: PlacementProblem, placement: Placement) -> int:
    """Most subgraphs any accelerator runs in the evaluator's schedule of ``placement``."""
    per_device: dict[int, int] = {}
    for entry in evaluate(problem, placement).schedule:
        if not problem.kinds[problem.devices()[entry.device][0]].is_cpu:
            per_device[entry.device] = per_device.get(entry.device, 0) + 1
    return max(per_device.values(), default=1)


def test_latency_ip_uses_two_subgraphs_when_it_pays() -> None:
    # a -> b -> c with b slow on the accelerator and only c big: with q = 2 the accelerator
    # runs {a} and later {c}; b goes to the CPU in between.
    problem = make_problem(
        3, [(0, 1), (1, 2)], fpga=[1.0, 50.0, 1.0], cpu=[30.0, 5.0, 30.0],
        size=[0, 0, 0], transfer=[0.5, 0.5, 0.0], accelerators=1)
    one = solve_latency_ip(problem, subgraphs_per_device=1, time_limit=20)
    two = solve_latency_ip(problem, subgraphs_per_device=2, time_limit=20)
    assert_consistent(problem, two, "latency")
    assert two.value == pytest.approx(1 + 0.5 + 5 + 0.5 + 1)
    assert two.value < one.value
    assert two.device[0] == two.device[2] != two.device[1]
    assert two.order[0] < two.order[2]


def test_finite_cpu_cores_serialise_cpu_work() -> None:
    # two independent CPU-only ops: overlapping CPUs finish at 10, a single core at 20
    problem = make_problem(2, [], fpga=[math.inf, math.inf], cpu=[10.0, 10.0], size=[0, 0],
                           transfer=[0, 0], accelerators=1, cpus=1, unlimited=False)
    assert solve_latency_ip(problem, time_limit=10).value == pytest.approx(20.0)
    problem.cpu_overlap_unlimited = True
    assert solve_latency_ip(problem, time_limit=10).value == pytest.approx(10.0)


def test_colour_classes_and_zero_nodes_are_contracted() -> None:
    # node 1 is free and has one input; nodes 2 and 3 share a colour class
    problem = make_problem(
        4, [(0, 1), (1, 2), (2, 3)], fpga=[1, 0, 2, 2], cpu=[3, 0, 6, 6], size=[1, 0, 1, 1],
        transfer=[1, 0, 1, 0], color=[-1, -1, 7, 7], backward=[False, False, False, True])
    groups = contract(problem)
    assert groups.count == 2
    assert groups.of[0] == groups.of[1] and groups.of[2] == groups.of[3]
    answer = solve_throughput_ip(problem, time_limit=10)
    assert answer.device[2] == answer.device[3]
    assert_consistent(problem, answer, "throughput")


def test_weight_source_joins_its_colour_mate_in_both_programs() -> None:
    # node 0 is a weight (free source) coloured with operator 2; node 1 is the data input
    problem = make_problem(
        3, [(0, 2), (1, 2)], fpga=[0, 1, 2], cpu=[0, 3, 6], size=[4, 1, 1],
        transfer=[3, 1, 0], color=[9, -1, 9], accelerators=1)
    for groups in (contract(problem), contract(problem, colours=False)):
        assert groups.of[0] == groups.of[2] != groups.of[1]
    answer = solve_latency_ip(problem, subgraphs_per_device=2, time_limit=10)
    assert_consistent(problem, answer, "latency")
    assert answer.device[0] == answer.device[2]
    assert answer.value == pytest.approx(1 + 2)  # all on the FPGA, no weight transfer


def test_bert24_throughput_reaches_published_optimum() -> None:
    problem = load_workload(WORKLOADS / "throughput/layer-bert24_inference.json")
    answer = solve_throughput_ip(problem, contiguous=True, time_limit=60)
    assert answer.status == "optimal"
    assert answer.value == pytest.approx(17.78990625, rel=REL)
    assert_consistent(problem, answer, "throughput")


def test_time_limit_returns_incumbent_with_gap() -> None:
    problem = load_workload(WORKLOADS / "throughput/op-resnet50_inference.json")
    messages: list[str] = []
    answer = solve_throughput_ip(problem, time_limit=0.5, progress=messages.append)
    assert answer.status == "time limit"
    assert math.isfinite(answer.value) and answer.gap >= 0
    assert_consistent(problem, answer, "throughput")
    assert any("vars" in m for m in messages)


def test_latency_time_limit_returns_incumbent() -> None:
    problem = load_workload(WORKLOADS / "latency/op-bert_l-3_inference.json")
    answer = solve_latency_ip(problem, time_limit=0.5)
    assert answer.status == "time limit"
    assert math.isfinite(answer.value) and answer.gap >= 0
    assert_consistent(problem, answer, "latency")


def test_node_too_big_for_every_device_is_rejected_by_name() -> None:
    problem = make_problem(2, [(0, 1)], fpga=[1, 1], cpu=[math.inf, 1], size=[25, 1],
                           transfer=[1, 1], memory=10.0)
    for solve in (solve_throughput_ip, solve_latency_ip):
        with pytest.raises(FpgaplaceError, match=r"'n0'.*short by 15 bytes"):
            solve(problem, time_limit=5)


def zero_group_problem() -> PlacementProblem:
    """Node 4 is a free source read by the zero nodes 0 and 1; ops 2 and 3 read 0 and 1 and
    only one fits an accelerator: contraction makes {0, 1, 4} one group rooted at 4."""
    return make_problem(5, [(4, 0), (4, 1), (0, 2), (1, 3)], fpga=[0, 0, 3, 3, 0],
                        cpu=[0, 0, 30, 30, 0], size=[0, 0, 4, 4, 0], transfer=[0, 0, 1, 1, 0],
                        memory=5, accelerators=2)


def splits_a_group(groups: Groups, device: np.ndarray) -> bool:
    return any(len(set(device[m].tolist())) > 1 for m in groups.members)


def test_start_splitting_a_zero_group_is_projected_onto_its_root() -> None:
    problem = zero_group_problem()
    groups = contract(problem, colours=False)
    assert groups.count == 3 and groups.members[groups.of[4]] == [0, 1, 4]
    assert groups.roots[groups.of[4]] == 4  # not the smallest member: the node the others joined
    # each zero node rides with its reader, the source sits on the CPU (device 2)
    start = Placement(device=np.array([0, 1, 0, 1, 2]), method="hand")
    assert splits_a_group(groups, start.device)
    latency = evaluate(problem, start).latency
    assert latency == pytest.approx(3.0)
    device_of_group = project_onto_groups(groups, start.device)
    assert device_of_group[groups.of[4]] == 2 and device_of_group[groups.of[2]] == 0
    projected = project_latency_start(problem, groups, start, q=1)
    assert projected is not None and not splits_a_group(groups, projected.placement.device)
    assert projected.value == pytest.approx(latency) == projected.original
    assert projected.value == pytest.approx(evaluate(problem, projected.placement).latency)
    messages: list[str] = []
    answer = solve_latency_ip(problem, start=start, time_limit=10, progress=messages.append)
    # SCIP takes the projected start, unless the critical-path bound proves it optimal first
    assert (any("1 of 1 starts given to SCIP" in m for m in messages)
            or answer.status == "optimal (critical-path bound; start hand)")
    assert_consistent(problem, answer, "latency")
    assert answer.value <= latency * (1 + REL)
    throughput = project_throughput_start(problem, contract(problem), start, contiguous=True)
    assert throughput is not None and not splits_a_group(contract(problem), throughput.placement.device)
    assert throughput.value <= evaluate(problem, start).max_load * (1 + REL)


def test_projection_refuses_a_start_with_too_many_subgraphs() -> None:
    # a -> b -> c with a and c on the accelerator, b on the CPU: two subgraphs on fpga0
    problem = make_problem(3, [(0, 1), (1, 2)], fpga=[1.0, 50.0, 1.0], cpu=[30.0, 5.0, 30.0],
                           size=[0, 0, 0], transfer=[0.5, 0.5, 0.0], accelerators=1)
    start = Placement(device=np.array([0, 1, 0]), order=np.array([0, 0, 1]), method="hand")
    groups = contract(problem, colours=False)
    assert project_latency_start(problem, groups, start, q=1) is None
    two = project_latency_start(problem, groups, start, q=2)
    assert two is not None and two.value == pytest.approx(evaluate(problem, start).latency)
    assert list(two.slot[groups.of]) == [0, 0, 1]


def gnmt_with_small_accelerators(tmp_path: Path) -> PlacementProblem:
    """The public GNMT layer graph with 600 MiB accelerators (4) and 8 CPUs: every heuristic
    start splits the zero-node groups the latency program merges (the issue-11 failure)."""
    data = json.loads((WORKLOADS / "throughput/layer-gnmt_inference.json").read_text())
    data.update(maxSizePerFPGA=629145600.0, maxFPGAs=4, maxCPUs=8)
    path = tmp_path / "gnmt-600MiB.json"
    path.write_text(json.dumps(data))
    return load_workload(path)


def test_latency_ip_keeps_group_splitting_starts_on_gnmt(tmp_path: Path) -> None:
    problem = gnmt_with_small_accelerators(tmp_path)
    groups = contract(problem, colours=False)
    starts = [greedy_latency(problem), pipedream(problem, "latency")]
    assert all(splits_a_group(groups, s.device) for s in starts)
    for s in starts:
        projected = project_latency_start(problem, groups, s, q=1)
        assert projected is not None
        assert projected.value <= evaluate(problem, s).latency * (1 + REL)
    best = min(evaluate(problem, s).latency for s in starts)
    messages: list[str] = []
    answer = solve_latency_ip(problem, starts=starts, time_limit=5, progress=messages.append)
    big_m = [float(m.rsplit("big-M ", 1)[1]) for m in messages if "big-M " in m]
    assert big_m and big_m[0] <= best * (1 + 1e-5)  # the cutoff comes from the starts
    assert_consistent(problem, answer, "latency")
    assert answer.value <= best * (1 + REL)


def test_throughput_ip_keeps_a_group_splitting_start_on_gnmt() -> None:
    problem = load_workload(WORKLOADS / "throughput/layer-gnmt_inference.json")
    groups = contract(problem)
    start = pipedream(problem, "throughput")
    assert splits_a_group(groups, start.device)
    projected = project_throughput_start(problem, groups, start, contiguous=True)
    assert projected is not None and evaluate(problem, projected.placement).contiguous
    assert projected.value <= evaluate(problem, start).max_load * (1 + REL)
    messages: list[str] = []
    answer = solve_throughput_ip(problem, start=start, time_limit=3, progress=messages.append)
    assert any("1 of 1 starts given to SCIP" in m for m in messages)
    assert_consistent(problem, answer, "throughput")
    assert answer.value <= projected.value * (1 + REL)
