"""One entry point over every placement method: ``solve(problem, method, options)``.

Every answer is scored by the trusted evaluator before it is returned, so the value a user sees
is the evaluator's, never a solver's own claim. Method "auto" always answers when a placement
exists (``solve``: the exact DP within its state space, else the contiguous max-load IP from a
coarsened DP; the IP for latency and non-contiguous splits). The IP is warm-started from every
heuristic start (``heuristic_starts``, inside its time limit); when it ends worse than the best
of them, or finds nothing, that start is returned instead with status "best start kept
(<method>): <why>" (its bound is the IP's when the start lies in the IP's search space, for
latency else the critical-path bound on every placement). Progress goes through a
``progress.Heartbeat``: a status line at least every 2 s.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from fpgaplace.place.solvers.evaluate import Evaluation, evaluation_of
from fpgaplace.place.solvers.ip.scip import DEFAULT_GAP
from fpgaplace.place.solvers.prefer import PREFER_SECONDS, placement_value, prefer_accelerators
from fpgaplace.place.solvers.problem import Placement, PlacementProblem
from fpgaplace.place.solvers.progress import Heartbeat, Progress
from fpgaplace.util.errors import FpgaplaceError

OBJECTIVES = ("throughput", "latency")
LOCAL_SEARCH_SHARE = 0.2  # of an IP's time limit spent on local search for its warm start
COARSE_DP_SHARE = 0.3  # of the time limit for the coarsened DP's start past the DP's state space
MIN_IP_SECONDS = 0.5  # the IP always gets at least this long after its warm start
IP_VARIABLES_PER_NODE_DEVICE = 3  # the contiguous max-load IP of a 20,000-op chain on 7 devices: 400,015
IP_ROWS_PER_EDGE_DEVICE = 4  # a 2,000-op DAG with 16,000 edges on 5 devices: 292,707 latency-IP constraints
IP_VARIABLES_PER_SECOND = 20_000  # SCIP models built through PySCIPOpt, variables or constraints (that
# 20,000-op chain: about 20 s on a 2-core machine; that DAG's 334,000: 16 s under load)
PREFER_SHARE = 0.05  # of the time limit, at most, for moving CPU ops onto accelerators after it
GREEDY_SECONDS_PER_OP = 1.5e-4  # greedy and its evaluation (a 20,000-op graph: about 3 s on a quiet machine)
METHODS = ("dp", "ip", "greedy", "local-search", "partitioner", "pipedream", "single", "cpu")


@dataclass
class SolveOptions:
    objective: str = "throughput"
    time_limit: float = 60.0
    gap: float = DEFAULT_GAP  # relative gap at which the IPs stop
    subgraphs_per_device: int = 1
    contiguous: bool = True
    progress: Progress | None = None


@dataclass
class Result:
    placement: Placement
    evaluation: Evaluation
    starts: list[Placement] = field(default_factory=list)
    # the IP's heuristic starts, each with ``value`` from the evaluator (empty for other methods)

    @property
    def value(self) -> float:
        if self.placement.objective == "latency":
            return self.evaluation.latency
        return self.evaluation.max_load


def _start_value(problem: PlacementProblem, placement: Placement, options: SolveOptions) -> float:
    """The evaluator's objective for a start; inf if infeasible (or not contiguous when asked)."""
    try:
        result = evaluation_of(problem, placement)
    except FpgaplaceError:  # a given subgraph order that deadlocks
        return math.inf
    if not result.feasible:
        return math.inf
    if options.objective == "latency":
        return float(result.latency)
    return float(result.max_load) if result.contiguous or not options.contiguous else math.inf


def _attempt(name: str, make: Callable[[], Placement], problem: PlacementProblem,
             options: SolveOptions) -> list[Placement]:
    """[make()] scored by the evaluator (``value``; inf if infeasible), or [] when it raises a
    user-level error (reported as progress). The progress status names ``name`` while it runs
    and takes in its value."""
    _report(options, method=name)
    try:
        start = make()
    except FpgaplaceError as error:
        if options.progress:
            options.progress(f"start: {error}")
        return []
    start.objective = options.objective
    start.value = _start_value(problem, start, options)
    _report(options, incumbent=start.value if math.isfinite(start.value) else None,
            bound=start.bound if math.isfinite(start.bound) else None, say=True)
    return [start]


def _report(options: SolveOptions, **status: object) -> None:
    """Pass numbers to the progress callback's ``update`` (a ``progress.Heartbeat``) if it has one."""
    update = getattr(options.progress, "update", None)
    if update is not None:
        update(**status)


def heuristic_starts(problem: PlacementProblem, options: SolveOptions,
                     dp_too_large: bool = False) -> list[Placement]:
    """Every cheap placement that can warm-start an integer program, scored by the evaluator
    (``value``), infeasible ones dropped: for contiguous throughput the DP (exact, or over a
    coarsened graph past its state space or when ``dp_too_large``), greedy (skipped when a start
    exists and less time is left than ``GREEDY_SECONDS_PER_OP`` per op), PipeDream and,
    unless a DP answered (past the state space the IP, not local search, gets the time) or
    (latency) a start is already within the gap of the critical-path bound, a short local
    search from the best of them (``LOCAL_SEARCH_SHARE`` of the limit)."""
    from fpgaplace.place.solvers import baselines

    started = time.perf_counter()
    starts: list[Placement] = []
    if options.objective == "throughput" and options.contiguous:
        starts += _attempt("dp", lambda: _contiguous_dp_start(problem, options, dp_too_large), problem, options)
    done = bool(starts)
    if starts and options.time_limit - (time.perf_counter() - started) < GREEDY_SECONDS_PER_OP * problem.n:
        if options.progress:
            options.progress(f"start: greedy skipped: about {GREEDY_SECONDS_PER_OP * problem.n:.1f} s for "
                             f"{problem.n:,} ops, more than the time left")
    else:
        starts += _attempt("greedy", lambda: baselines.greedy_latency(problem, started + options.time_limit),
                           problem, options)
    left = max(MIN_IP_SECONDS, options.time_limit - (time.perf_counter() - started) - MIN_IP_SECONDS)
    starts += _attempt("pipedream", lambda: baselines.pipedream(problem, options.objective, left), problem, options)
    if options.objective == "latency" and starts:
        from fpgaplace.place.solvers.bounds import critical_path_bound

        bound = critical_path_bound(problem, options.subgraphs_per_device)
        _report(options, bound=bound)
        done = min(start.value for start in starts) <= bound * (1 + options.gap) + 1e-12
    left = options.time_limit - (time.perf_counter() - started) - MIN_IP_SECONDS
    if not done and left > 0:
        seconds = min(LOCAL_SEARCH_SHARE * options.time_limit, 10.0, left)
        feasible = [start for start in starts if math.isfinite(start.value)]
        starts += _attempt("local-search", lambda: baselines.local_search(
            problem, objective=options.objective, time_limit=seconds, starts=feasible), problem, options)
    return [start for start in starts if math.isfinite(start.value)]


def _contiguous_dp_start(problem: PlacementProblem, options: SolveOptions, too_large: bool) -> Placement:
    """The exact DP, or (past its state space) the DP over a coarsened graph, given
    ``COARSE_DP_SHARE`` of the time limit."""
    from fpgaplace.place.solvers.dp import solve_coarsened_dp
    from fpgaplace.place.solvers.dp_ideals import StateSpaceTooLarge

    if not too_large:
        try:
            return _dp(problem, options, scaled=True)
        except StateSpaceTooLarge as error:
            if options.progress:
                options.progress(f"start: {error}")
    _report(options, method="coarse dp")
    return solve_coarsened_dp(problem, time_limit=COARSE_DP_SHARE * options.time_limit,
                              progress=options.progress)


def _dp(problem: PlacementProblem, options: SolveOptions, scaled: bool = False) -> Placement:
    """The exact DP; ``scaled`` (method auto) caps its ideals by the time limit
    (``dp.IDEALS_PER_SECOND``, at most ``dp_ideals.MAX_IDEALS``)."""
    from fpgaplace.place.solvers.dp import IDEALS_PER_SECOND, solve_throughput_dp
    from fpgaplace.place.solvers.dp_ideals import MAX_IDEALS

    if options.objective != "throughput":
        raise FpgaplaceError("method dp: the DP solves the throughput objective; use method ip for latency")
    limit = MAX_IDEALS
    if scaled:
        limit = int(min(MAX_IDEALS, max(1_000, IDEALS_PER_SECOND * options.time_limit)))
    placement = solve_throughput_dp(problem, time_limit=options.time_limit, progress=options.progress,
                                    max_ideals=limit)
    placement.method = placement.method or "dp"
    return placement


def _in_ip_space(problem: PlacementProblem, start: Placement, options: SolveOptions) -> bool:
    """Whether the IP's model contains ``start`` (so the IP's bound applies to it)."""
    from fpgaplace.place.solvers.ip import latency, throughput
    from fpgaplace.place.solvers.ip.reduce import contract

    if options.objective == "latency":
        groups = contract(problem, colours=False, zero_nodes=bool(problem.cpu_overlap_unlimited))
        return latency.project_latency_start(problem, groups, start, options.subgraphs_per_device) is not None
    return throughput.project_throughput_start(problem, contract(problem), start, options.contiguous) is not None


def _keep_best_start(problem: PlacementProblem, options: SolveOptions, answer: Placement | None,
                     starts: list[Placement], why: str) -> Placement:
    """The best start in place of an IP answer that is worse (or missing): status says so, the
    IP's bound is kept only when the start lies in the IP's space."""
    best = min(starts, key=lambda start: start.value)
    kept = copy.copy(best)
    kept.method = "ip"
    kept.status = f"best start kept ({best.method}): {why}"
    kept.bound = -math.inf
    if answer is not None and _in_ip_space(problem, best, options):
        kept.bound = min(answer.bound, best.value)
    elif options.objective == "latency":  # a bound on every placement, whatever its subgraphs
        from fpgaplace.place.solvers.bounds import critical_path_bound

        kept.bound = min(critical_path_bound(problem, problem.n), best.value)
    return kept


def _ip_with_starts(problem: PlacementProblem, options: SolveOptions,
                    dp_too_large: bool = False) -> tuple[Placement, list[Placement]]:
    """The IP warm-started from every heuristic start, all within the time limit, never worse
    than the best of them; and the starts."""
    started = time.perf_counter()
    exact = _chain_answer(problem, options)
    if exact is not None:
        return exact, []
    starts = heuristic_starts(problem, options, dp_too_large)
    remaining = max(MIN_IP_SECONDS, options.time_limit - (time.perf_counter() - started))
    return _ip_from(problem, options, starts, remaining), starts


def _chain_answer(problem: PlacementProblem, options: SolveOptions) -> Placement | None:
    """The IP's optimum without the IP when the problem is a plain chain (``chain.chain_order``):
    the linear partition for contiguous throughput, the least-latency interval split for
    latency with one subgraph a device; None otherwise. O(n T K) per test (``chain``)."""
    from fpgaplace.place.solvers.chain import chain_order, solve_chain, solve_chain_latency

    if options.objective == "latency" and options.subgraphs_per_device != 1:
        return None
    if options.objective == "throughput" and not options.contiguous:
        return None
    order = chain_order(problem)
    if order is None:
        return None
    _report(options, method="chain split", say=True)
    if options.objective == "latency":
        return solve_chain_latency(problem, order)
    answer = solve_chain(problem, order, options.time_limit)
    answer.method, answer.status = "ip", f"{answer.status} (chain split)"
    return answer


def _ip(problem: PlacementProblem, options: SolveOptions) -> Placement:
    return _ip_with_starts(problem, options)[0]


def _ip_too_large(problem: PlacementProblem, remaining: float) -> str | None:
    """Why the IP cannot even be built in ``remaining`` seconds, or None: about
    ``IP_VARIABLES_PER_NODE_DEVICE`` variables per node and device and ``IP_ROWS_PER_EDGE_DEVICE``
    constraints per edge and device, built at ``IP_VARIABLES_PER_SECOND`` of either. O(1)."""
    devices = len(problem.devices())
    variables = IP_VARIABLES_PER_NODE_DEVICE * problem.n * devices
    rows = IP_ROWS_PER_EDGE_DEVICE * len(problem.edges) * devices
    seconds = (variables + rows) / IP_VARIABLES_PER_SECOND
    if seconds <= remaining:
        return None
    return (f"IP skipped: its about {variables:,} variables and {rows:,} constraints take about "
            f"{seconds:.0f} s to build, more than the {remaining:.1f} s left")


def _ip_from(problem: PlacementProblem, options: SolveOptions, starts: list[Placement],
             remaining: float) -> Placement:
    from fpgaplace.place.solvers.ip import latency, throughput

    too_large = _ip_too_large(problem, remaining)
    if too_large and starts:
        if options.progress:
            options.progress(too_large)
        return _keep_best_start(problem, options, None, starts, too_large)
    _report(options, method="ip", say=True)
    limits = {"time_limit": remaining, "gap": options.gap, "starts": starts, "progress": options.progress}
    try:
        if options.objective == "latency":
            answer = latency.solve_latency_ip(problem, subgraphs_per_device=options.subgraphs_per_device, **limits)
        else:
            answer = throughput.solve_throughput_ip(problem, contiguous=options.contiguous, **limits)
    except FpgaplaceError as error:
        if not starts:
            raise
        return _keep_best_start(problem, options, None, starts, f"IP failed: {error}")
    value = _start_value(problem, answer, options)
    best = min((start.value for start in starts), default=math.inf)
    if value > best * (1 + 1e-9) + 1e-12:
        return _keep_best_start(problem, options, answer, starts,
                                f"IP ended at {value:.6g} ({answer.status})")
    return answer


def _baseline(name: str) -> Callable[[PlacementProblem, SolveOptions], Placement]:
    def run(problem: PlacementProblem, options: SolveOptions) -> Placement:
        from fpgaplace.place.solvers import baselines

        if name == "greedy":
            return baselines.greedy_latency(problem, deadline=time.perf_counter() + options.time_limit)
        if name == "local-search":  # (a fifth of the limit left for its last scoring and the evaluator's)
            return baselines.local_search(
                problem, objective=options.objective, time_limit=min(0.8 * options.time_limit, 10.0)
            )
        if name == "partitioner":
            return baselines.partitioner(problem, objective=options.objective)
        if name == "pipedream":
            return baselines.pipedream(problem, options.objective, options.time_limit)
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
    """Run ``method`` on ``problem``; score it with ``evaluate``.

    "auto" always answers when a placement exists: the exact DP for contiguous throughput while
    its ideals stay within ``dp_ideals.MAX_IDEALS`` (and ``dp.IDEALS_PER_SECOND`` per second of the
    limit); past that, the contiguous max-load IP warm-started from the DP over a coarsened graph
    (and greedy, PipeDream), so the answer carries the IP's bound; the IP for every other objective.
    """
    if options.objective not in OBJECTIVES:
        raise FpgaplaceError(f"objective: expected one of {', '.join(OBJECTIVES)}, got {options.objective!r}")
    if method != "auto" and method not in SOLVERS:
        raise FpgaplaceError(f"method: expected auto, all or one of {', '.join(METHODS)}, got {method!r}")
    with Heartbeat(options.progress) as beat:
        return _solve(problem, method, replace(options, progress=beat if options.progress else None))


def _solve(problem: PlacementProblem, method: str, options: SolveOptions) -> Result:
    from fpgaplace.place.solvers.dp_ideals import StateSpaceTooLarge

    start = time.perf_counter()
    starts: list[Placement] = []
    chosen = exact_method(options) if method == "auto" else method
    _report(options, plan=chosen, method=chosen)
    exact = chosen in ("dp", "ip")
    # the solvers' view, one c(v): for the exact methods the cheapest link each node can cross
    # (a relaxation, so their bound holds), for the heuristics the costliest (an upper bound)
    model = problem.optimistic() if exact else problem if problem.links is None else replace(problem, links=None)
    if chosen == "ip":
        placement, starts = _ip_with_starts(model, options)
    elif method == "auto":
        try:
            placement = _dp(model, options, scaled=True)
        except StateSpaceTooLarge as error:
            if options.progress:
                options.progress(f"auto: {error}; the max-load IP from a coarsened DP instead")
            _report(options, plan="coarse dp + ip")
            remaining = replace(options, time_limit=max(MIN_IP_SECONDS,
                                                        options.time_limit - (time.perf_counter() - start)))
            placement, starts = _ip_with_starts(model, remaining, dp_too_large=True)
    else:
        placement = SOLVERS[chosen](model, options)
    placement.method = placement.method or chosen
    placement.objective = options.objective
    if problem.links is not None:
        placement = _over_links(problem, placement, options, starts, exact)
    placement = prefer_accelerators(problem, placement, options.objective, options.contiguous,
                                    seconds=min(PREFER_SECONDS, PREFER_SHARE * options.time_limit))
    placement.seconds = time.perf_counter() - start
    evaluation = evaluation_of(problem, placement)  # (once: a heuristic's own scoring is reused)
    placement.value = evaluation.latency if options.objective == "latency" else evaluation.max_load
    for scored in (placement, *starts):  # the Result holds the one evaluation kept (a schedule is n entries)
        scored.evaluated = None
    return Result(placement, evaluation, starts)


def _objective(problem: PlacementProblem, placement: Placement, objective: str, contiguous: bool = False) -> float:
    return _start_value(problem, placement, SolveOptions(objective=objective, contiguous=contiguous))


RELABEL_SECONDS = 2.0  # at most this long relabelling one answer's devices onto cheaper links


def assign_devices(problem: PlacementProblem, placement: Placement, objective: str,
                   seconds: float = RELABEL_SECONDS) -> Placement:
    """The placement with its devices of each kind relabelled onto cheaper links: the solvers
    see one transfer time per node, so which core of a kind gets which part (on a cluster: on
    which node) is theirs to choose. Hill climbing over swaps of two devices of one kind whose
    links differ (swapping two cores of one board changes nothing and is not tried), each swap
    scored by the evaluator's loads or schedule (a relabelling keeps memory, support and
    contiguity); O(rounds * D^2) evaluations, at most ``len(devices)`` rounds and ``seconds``."""
    matrix = problem.link_matrix()
    if matrix is None:
        return placement
    deadline = time.perf_counter() + seconds
    devices = problem.devices()
    pairs = [(a, b) for a in range(len(devices)) for b in range(a + 1, len(devices))
             if devices[a][0] == devices[b][0] and not _interchangeable(matrix, a, b)]
    best, value = placement, _relabelled_value(problem, placement, objective)
    for _ in range(len(devices)):
        improved = False
        used = set(np.unique(best.device).tolist())
        for a, b in pairs:
            if (a not in used and b not in used) or time.perf_counter() > deadline:
                continue
            swapped = copy.copy(best)
            swapped.device = np.where(best.device == a, b, np.where(best.device == b, a, best.device))
            candidate = _relabelled_value(problem, swapped, objective)
            if candidate < value * (1 - 1e-12):
                best, value, improved = swapped, candidate, True
                used = set(np.unique(best.device).tolist())
        if not improved:
            break
    return best


def _relabelled_value(problem: PlacementProblem, placement: Placement, objective: str) -> float:
    return placement_value(problem, np.asarray(placement.device, dtype=np.int64), objective, placement.order)


def _interchangeable(matrix: np.ndarray, a: int, b: int) -> bool:
    order = np.arange(len(matrix))
    order[a], order[b] = b, a
    return bool(np.array_equal(matrix[np.ix_(order, order)], matrix))


def _over_links(problem: PlacementProblem, placement: Placement, options: SolveOptions,
                starts: list[Placement], exact: bool) -> Placement:
    """The answer on a problem whose transfers cost by link (``PlacementProblem.links``).

    The exact methods (``exact``) solved ``problem.optimistic()``, every node's transfer at the
    cheapest link it can cross: a relaxation, so their bound holds for every placement; the
    same method's heuristics at the costliest links (``problem.transfer``, an upper bound on
    every charge) add candidates: the DP run again there, or greedy for the IP.
    The heuristics solved at the costliest links, where a bound is ``link_ratio()`` times
    theirs. Every candidate (and the IP's best start) has its devices relabelled onto cheaper
    links (``assign_devices``); the best by the evaluator is kept. The bound is also at least
    the memory LP bound (throughput) or the critical-path bound at the cheapest links (latency).
    """
    from fpgaplace.place.solvers import baselines, bounds

    costliest = replace(problem, links=None)
    extra: list[Callable[[], Placement]] = []
    if exact and placement.method == "dp":
        extra.append(lambda: _dp(costliest, options, scaled=True))
    elif exact:
        extra.append(lambda: baselines.greedy_latency(costliest))  # (PipeDream's stages are O(n^2) here)
    found = [placement, *sorted(starts, key=lambda start: start.value)[:1]]  # the best start, by the model
    for make in extra:
        try:
            found.append(make())
        except FpgaplaceError:  # a heuristic with nothing to offer here
            pass
    candidates = [assign_devices(problem, found_one, options.objective) for found_one in found]
    if exact:
        bound = placement.bound
    else:
        bound = problem.link_ratio() * placement.bound if math.isfinite(placement.bound) else -math.inf
    optimistic = problem.optimistic()
    if options.objective == "latency":
        bound = max(bound, bounds.critical_path_bound(optimistic, options.subgraphs_per_device
                                                      if options.contiguous else problem.n))
    elif not (exact and placement.status == "optimal"):
        bound = max(bound, bounds.memory_load_bound(problem))
    values = [_objective(problem, c, options.objective, options.contiguous) for c in candidates]
    best = copy.copy(candidates[int(np.argmin(values))])
    if best.method != placement.method:
        best.status = f"best start kept ({best.method}) with transfers by link"
        best.method = placement.method
    best.value = min(values)
    best.bound = min(bound, best.value)
    if best.bound < best.value * (1 - 1e-9) and not best.status.startswith("best start"):
        best.status = f"{best.status or 'feasible'} at {'cheapest' if exact else 'costliest'} links"
    return best


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
