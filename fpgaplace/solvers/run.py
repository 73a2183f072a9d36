"""One entry point over every placement method: ``solve(problem, objective, method, ...)``.

Every answer is scored by the trusted evaluator before it is returned, so the value a user sees
is the evaluator's, never a solver's own claim.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from fpgaplace.errors import FpgaplaceError
from fpgaplace.solvers.evaluate import Evaluation, evaluate
from fpgaplace.solvers.problem import Placement, PlacementProblem

OBJECTIVES = ("throughput", "latency")
LOCAL_SEARCH_SHARE = 0.2  # of an IP's time limit spent on local search for its warm start
MIN_IP_SECONDS = 0.5  # the IP always gets at least this long after its warm start
METHODS = ("dp", "ip", "greedy", "local-search", "partitioner", "pipedream", "single", "cpu")


@dataclass
class SolveOptions:
    objective: str = "throughput"
    time_limit: float = 60.0
    gap: float = 1e-6
    subgraphs_per_device: int = 1
    contiguous: bool = True
    progress: Callable[[str], None] | None = None


@dataclass
class Result:
    placement: Placement
    evaluation: Evaluation

    @property
    def value(self) -> float:
        if self.placement.objective == "latency":
            return self.evaluation.latency
        return self.evaluation.max_load


def _heuristic_start(problem: PlacementProblem, options: SolveOptions) -> Placement | None:
    """Best cheap placement to warm-start an integer program: the DP for contiguous throughput,
    else the best of greedy, PipeDream and a short local search (so the IP never returns worse)."""
    from fpgaplace.solvers import baselines

    if options.objective == "throughput" and options.contiguous:
        try:
            return _dp(problem, options)
        except FpgaplaceError:
            pass
    candidates = [
        baselines.greedy_latency(problem),
        baselines.pipedream(problem),
        baselines.local_search(
            problem, objective=options.objective, time_limit=min(LOCAL_SEARCH_SHARE * options.time_limit, 10.0)
        ),
    ]
    key = "latency" if options.objective == "latency" else "max_load"
    scored = [(getattr(evaluate(problem, p), key), i) for i, p in enumerate(candidates)]
    feasible = [(v, i) for v, i in scored if math.isfinite(v)]
    return candidates[min(feasible)[1]] if feasible else None


def _dp(problem: PlacementProblem, options: SolveOptions) -> Placement:
    from fpgaplace.solvers.dp import solve_throughput_dp

    if options.objective != "throughput":
        raise FpgaplaceError("--method dp: the DP solves the throughput objective; use --method ip for latency")
    return solve_throughput_dp(problem, time_limit=options.time_limit, progress=options.progress)


def _ip(problem: PlacementProblem, options: SolveOptions) -> Placement:
    from fpgaplace.solvers import ilp

    started = time.perf_counter()
    start = _heuristic_start(problem, options)
    remaining = max(MIN_IP_SECONDS, options.time_limit - (time.perf_counter() - started))
    limits = {"time_limit": remaining, "gap": options.gap, "start": start, "progress": options.progress}
    if options.objective == "latency":
        return ilp.solve_latency_ip(problem, subgraphs_per_device=options.subgraphs_per_device,
                                    **limits)
    return ilp.solve_throughput_ip(problem, contiguous=options.contiguous, **limits)


def _baseline(name: str) -> Callable[[PlacementProblem, SolveOptions], Placement]:
    def run(problem: PlacementProblem, options: SolveOptions) -> Placement:
        from fpgaplace.solvers import baselines

        if name == "greedy":
            return baselines.greedy_latency(problem)
        if name == "local-search":
            return baselines.local_search(
                problem, objective=options.objective, time_limit=min(options.time_limit, 10.0)
            )
        if name == "partitioner":
            return baselines.partitioner(problem, objective=options.objective)
        if name == "pipedream":
            return baselines.pipedream(problem)
        if name == "single":
            return baselines.single_accelerator(problem)
        return baselines.all_cpu(problem)

    return run


SOLVERS: dict[str, Callable[[PlacementProblem, SolveOptions], Placement]] = {
    "dp": _dp,
    "ip": _ip,
    **{name: _baseline(name) for name in METHODS if name not in ("dp", "ip")},
}


def exact_method(options: SolveOptions) -> str:
    """The exact method for the options: the DP for contiguous throughput, else the IP."""
    return "dp" if options.objective == "throughput" and options.contiguous else "ip"


def solve(problem: PlacementProblem, method: str, options: SolveOptions) -> Result:
    """Run ``method`` (or "auto": ``exact_method``) on ``problem``; score it with ``evaluate``."""
    if options.objective not in OBJECTIVES:
        raise FpgaplaceError(f"--objective: expected one of {', '.join(OBJECTIVES)}, got {options.objective!r}")
    if method == "auto":
        method = exact_method(options)
    if method not in SOLVERS:
        raise FpgaplaceError(f"--method: expected auto, all or one of {', '.join(METHODS)}, got {method!r}")
    start = time.perf_counter()
    placement = SOLVERS[method](problem, options)
    placement.seconds = time.perf_counter() - start
    placement.method = placement.method or method
    placement.objective = options.objective
    evaluation = evaluate(problem, placement)
    placement.value = evaluation.latency if options.objective == "latency" else evaluation.max_load
    return Result(placement, evaluation)


def solve_all(problem: PlacementProblem, options: SolveOptions) -> list[Result]:
    """Every method that applies to the objective, for one comparison table."""
    methods = [m for m in METHODS if not (m == "dp" and options.objective == "latency")]
    results = []
    for method in methods:
        try:
            results.append(solve(problem, method, options))
        except FpgaplaceError as error:
            if options.progress:
                options.progress(f"{method}: {error}")
    return results
