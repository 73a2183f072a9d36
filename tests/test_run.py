"""The one solver entry point: every answer re-scored by the evaluator, warm starts that never lose."""

from pathlib import Path

import pytest

from fpgaplace.errors import FpgaplaceError
from fpgaplace.solvers.evaluate import evaluate
from fpgaplace.solvers.run import SolveOptions, exact_method, solve, solve_all
from fpgaplace.workload import load_workload

WORKLOADS = Path(__file__).resolve().parents[2] / "shared" / "workloads"


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


def test_bad_method_and_objective_name_the_flag():
    problem = load_workload(WORKLOADS / "throughput" / "layer-bert24_inference.json")
    with pytest.raises(FpgaplaceError, match="--method"):
        solve(problem, "magic", SolveOptions())
    with pytest.raises(FpgaplaceError, match="--objective"):
        solve(problem, "dp", SolveOptions(objective="speed"))
    with pytest.raises(FpgaplaceError, match="--method ip"):
        solve(problem, "dp", SolveOptions(objective="latency"))
