"""The one solver entry point: every answer re-scored by the evaluator, warm starts that never lose."""


import pytest
from conftest import WORKLOADS

from fpgaplace.place.solvers.evaluate import evaluate
from fpgaplace.place.solvers.run import SolveOptions, exact_method, solve, solve_all
from fpgaplace.place.workload import load_workload
from fpgaplace.util.errors import FpgaplaceError


def test_latency_ip_never_worse_than_its_heuristics():
    problem = load_workload(WORKLOADS / "latency" / "layer-bert24_inference.json")
    options = SolveOptions(objective="latency", time_limit=5)
    ip = solve(problem, "ip", options)
    for method in ("greedy", "pipedream"):
        assert ip.value <= solve(problem, method, options).value * (1 + 1e-9)
    assert ip.value == pytest.approx(evaluate(problem, ip.placement).latency, rel=1e-12)
    assert ip.placement.bound <= ip.value * (1 + 1e-9)


def test_auto_is_the_dp_for_throughput_and_the_ip_agrees():
    problem = load_workload(WORKLOADS / "throughput" / "layer-bert24_inference.json")
    assert exact_method(SolveOptions(objective="throughput")) == "dp"
    assert exact_method(SolveOptions(objective="latency")) == "ip"
    auto = solve(problem, "auto", SolveOptions(time_limit=30))
    ip = solve(problem, "ip", SolveOptions(time_limit=30))
    assert auto.placement.method == "dp"
    assert auto.value == pytest.approx(ip.value, rel=1e-6)
    assert auto.value == pytest.approx(17.78990625, rel=1e-6)  # published optimum


def test_all_methods_are_scored_by_the_evaluator():
    problem = load_workload(WORKLOADS / "throughput" / "layer-resnet50_inference.json")
    results = solve_all(problem, SolveOptions(time_limit=10))
    assert {r.placement.method for r in results} >= {"dp", "ip", "greedy", "pipedream", "all-cpu"}
    optimum = next(r.value for r in results if r.placement.method == "dp")
    for r in results:
        assert r.value == evaluate(problem, r.placement).max_load
        if r.evaluation.feasible and r.evaluation.contiguous:
            assert r.value >= optimum * (1 - 1e-9) or not r.placement.contiguous


def test_bad_method_and_objective_name_the_parameter():
    problem = load_workload(WORKLOADS / "throughput" / "layer-bert24_inference.json")
    with pytest.raises(FpgaplaceError, match="^method: expected"):
        solve(problem, "magic", SolveOptions())
    with pytest.raises(FpgaplaceError, match="^objective: expected"):
        solve(problem, "dp", SolveOptions(objective="speed"))
    with pytest.raises(FpgaplaceError, match="method ip"):
        solve(problem, "dp", SolveOptions(objective="latency"))



LATENCY_WORKLOADS = sorted((WORKLOADS / "latency").glob("*.json"))


def test_every_public_latency_workload_is_swept():
    assert len(LATENCY_WORKLOADS) >= 4  # the public latency files of the paper


@pytest.mark.slow
@pytest.mark.parametrize("path", LATENCY_WORKLOADS, ids=lambda p: p.stem)
def test_latency_ip_never_worse_than_its_best_start(path):
    problem = load_workload(path)
    options = SolveOptions(objective="latency", time_limit=8)
    result = solve(problem, "ip", options)
    from fpgaplace.place.solvers.bounds import critical_path_bound

    proven = min(s.value for s in result.starts) <= critical_path_bound(problem) * (1 + options.gap)
    # local search runs unless a quick start is already within the gap of the critical-path bound
    assert {s.method for s in result.starts} >= {"greedy", "pipedream"} | (set() if proven else {"local-search"})
    for start in result.starts:  # the values compared are the trusted evaluator's
        assert start.value == pytest.approx(evaluate(problem, start).latency, rel=1e-12)
    best = min(s.value for s in result.starts)
    assert result.value == pytest.approx(evaluate(problem, result.placement).latency, rel=1e-12)
    assert result.value <= best * (1 + 1e-9)
    assert result.placement.bound <= result.value * (1 + 1e-9)
    for method in ("greedy", "pipedream"):  # deterministic heuristics, run on their own
        assert result.value <= solve(problem, method, options).value * (1 + 1e-9)


def all_cpu_answer(problem, **_):
    """A stand-in IP that ends at a poor placement (everything on the first CPU core)."""
    from fpgaplace.place.solvers.baselines import all_cpu

    answer = all_cpu(problem, "latency")
    answer.method, answer.status, answer.bound = "ip", "time limit", 1.0
    return answer


def failing_ip(problem, **_):
    raise FpgaplaceError("the latency IP found no placement within 1 s")


@pytest.mark.parametrize("stand_in", [all_cpu_answer, failing_ip], ids=["worse", "failed"])
def test_entry_point_returns_the_best_start_when_the_ip_ends_worse(monkeypatch, stand_in):
    from fpgaplace.place.solvers.ip import latency

    problem = load_workload(WORKLOADS / "latency" / "layer-bert24_inference.json")
    monkeypatch.setattr(latency, "solve_latency_ip", stand_in)
    result = solve(problem, "ip", SolveOptions(objective="latency", time_limit=2))
    best = min(result.starts, key=lambda s: s.value)
    assert result.value == pytest.approx(best.value, rel=1e-12)
    assert result.value == pytest.approx(evaluate(problem, result.placement).latency, rel=1e-12)
    assert result.value < evaluate(problem, all_cpu_answer(problem)).latency
    assert result.placement.method == "ip"
    assert result.placement.status.startswith(f"best start kept ({best.method})")
    assert ("IP failed" in result.placement.status) == (stand_in is failing_ip)
    assert result.placement.bound <= result.value


# ---- problems whose transfers cost by link (built from a board) --------------------------------
@pytest.fixture(scope="module", params=["zcu104", "cluster-2x-zcu104"])
def board_problem(request):
    from conftest import FAST_CLUSTER

    from fpgaplace import Design
    from fpgaplace.model import zoo as models

    board = {"cluster-2x-zcu104": FAST_CLUSTER}.get(request.param, request.param)
    return Design(models.cnn_residual(batch=1), board, profile_cpu=False).problem


@pytest.mark.parametrize("objective", ["throughput", "latency"])
def test_per_link_bound_holds_for_every_method(board_problem, objective):
    assert board_problem.links is not None
    options = SolveOptions(objective=objective, time_limit=4)
    best = solve(board_problem, "auto", options)
    assert best.value == pytest.approx(evaluate(board_problem, best.placement).max_load if objective == "throughput"
                                       else evaluate(board_problem, best.placement).latency, rel=1e-12)
    assert 0 < best.placement.bound <= best.value * (1 + 1e-9)
    for result in solve_all(board_problem, options):
        if result.evaluation.feasible and (objective == "latency" or result.evaluation.contiguous):
            assert best.placement.bound <= result.value * (1 + 1e-9), result.placement.method


def test_relabelling_devices_onto_cheaper_links_never_loses(board_problem):
    import numpy as np

    from fpgaplace.place.solvers.problem import Placement
    from fpgaplace.place.solvers.run import assign_devices

    devices = board_problem.devices()
    cores = [d for d, (kind, _) in enumerate(devices) if not board_problem.kinds[kind].is_cpu]
    rng = np.random.default_rng(3)
    for _ in range(5):  # the ops spread at random over the first two cores
        placement = Placement(device=rng.choice(cores[:2], size=board_problem.n))
        before = evaluate(board_problem, placement)
        after = evaluate(board_problem, assign_devices(board_problem, placement, "throughput"))
        assert after.max_load <= before.max_load * (1 + 1e-12)
        assert sorted(np.bincount(placement.device, minlength=len(devices))) == \
            sorted(np.bincount(assign_devices(board_problem, placement, "throughput").device, minlength=len(devices)))
