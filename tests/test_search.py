"""The search's candidates report the method that really produced their answer (what auto ran),
not the exact method their setting would suggest."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_solvers_scale import wide_problem

from fpgaplace.flow.search import Candidate, method_used, search
from fpgaplace.model import zoo as models
from fpgaplace.place.solvers import baselines
from fpgaplace.place.solvers.evaluate import evaluate
from fpgaplace.place.solvers.run import SolveOptions, solve
from fpgaplace.place.workload import load_workload

WORKLOADS = Path(__file__).resolve().parent / "workloads"


def test_the_exact_dp_is_named_dp():
    problem = load_workload(WORKLOADS / "throughput" / "layer-bert24_inference.json")
    result = solve(problem, "auto", SolveOptions())
    assert result.placement.status == "optimal"
    assert method_used(result) == "dp"


@pytest.mark.slow  # numba's import and the IP build: about 15 s on a loaded machine
def test_past_the_state_space_auto_is_the_coarse_dp_and_the_ip():
    problem = wide_problem()
    result = solve(problem, "auto", SolveOptions(time_limit=4))
    coarse = [start for start in result.starts if start.status.startswith("heuristic (DP over")]
    assert coarse, "auto starts the max-load IP from the coarsened DP past the state space"
    used = method_used(result)
    best_start = min(start.value for start in result.starts)
    if used == "coarse dp + ip":  # the IP's own placement, no start
        assert not any(np.array_equal(start.device, result.placement.device) for start in result.starts)
        assert result.value <= best_start * (1 + 1e-9)
    else:  # a start returned as it was
        assert any(np.array_equal(start.device, result.placement.device) and start.value == result.value
                   for start in result.starts)
        assert used in {"coarse dp", "greedy", "pipedream", "local-search"}


def test_a_start_proven_by_the_critical_path_bound_is_named():
    problem = load_workload(WORKLOADS / "latency" / "layer-bert24_inference.json")
    result = solve(problem, "ip", SolveOptions(objective="latency", time_limit=10))
    greedy = baselines.greedy_latency(problem)
    assert result.placement.gap == 0  # proven optimal without SCIP
    assert result.value == pytest.approx(evaluate(problem, greedy).latency, rel=1e-12)
    assert method_used(result) == "greedy"


def test_search_candidates_carry_the_method_used():
    ranked = search(models.cnn_residual(batch=1), "zcu104", optimizer=(True,), time_limit=6, profile_cpu=False)
    assert ranked
    for scored in ranked:
        assert scored.candidate.method == method_used(scored.result) != "auto"
        asked = Candidate(**{**scored.candidate.__dict__, "method": "auto"})
        assert scored.candidate.label() == asked.label()
    contiguous_throughput = [s for s in ranked if s.candidate.objective == "throughput" and s.candidate.contiguous]
    assert all(s.candidate.method == "dp" for s in contiguous_throughput)  # a small model: the exact DP
