"""Progress during a solve: a status line (method, elapsed, incumbent, bound, gap) at least every
two seconds, also while SCIP sits in one long LP."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from fpgaplace.place.solvers.progress import PERIOD, Heartbeat
from fpgaplace.place.solvers.run import SolveOptions, solve
from fpgaplace.place.workload import load_workload

WORKLOADS = Path(__file__).resolve().parent / "workloads"


def timed_messages() -> tuple[list[tuple[float, str]], callable]:
    seen: list[tuple[float, str]] = []
    return seen, lambda message: seen.append((time.perf_counter(), message))


def largest_silence(seen: list[tuple[float, str]], started: float, ended: float) -> float:
    times = [started] + [t for t, _ in seen] + [ended]
    return max(b - a for a, b in zip(times, times[1:], strict=False))


def test_heartbeat_fills_silences_with_the_status_line():
    seen, progress = timed_messages()
    started = time.perf_counter()
    with Heartbeat(progress, period=0.2) as beat:
        beat.update(method="work", incumbent=10.0, bound=8.0)
        beat.update(incumbent=12.0, bound=7.0)  # neither worse incumbent nor lower bound is taken
        time.sleep(1.0)
    ended = time.perf_counter()
    lines = [m for _, m in seen]
    assert len(lines) >= 3
    assert lines[-1].startswith("work: ") and "incumbent 10, bound 8, gap 20.00 %" in lines[-1]
    assert largest_silence(seen, started, ended) < 0.2 + 0.3
    count = len(seen)
    time.sleep(0.4)
    assert len(seen) == count  # the thread stopped with the context


def test_status_line_names_the_plan_and_the_stage_running():
    seen, progress = timed_messages()
    with Heartbeat(progress, period=60) as beat:
        beat.update(method="greedy", incumbent=5.0, bound=4.0, say=True)
        beat.update(plan="coarse dp + ip", say=True)
        beat.update(method="coarse dp + ip", say=True)
    lines = [m for _, m in seen]
    assert lines[0].startswith("greedy: ")  # no plan given: the stage alone, as before
    assert lines[1].startswith("coarse dp + ip (greedy): ") and "incumbent 5, bound 4, gap 20.00 %" in lines[1]
    assert lines[2].startswith("coarse dp + ip: ")  # the stage is the plan: named once
    assert beat.status.plan == beat.status.method == "coarse dp + ip"


@pytest.mark.parametrize("objective, name", [("latency", "op-resnet50_inference"),
                                             ("throughput", "op-resnet50_inference")])
def test_solve_reports_at_least_every_two_seconds(objective, name):
    problem = load_workload(WORKLOADS / objective / f"{name}.json")
    seen, progress = timed_messages()
    started = time.perf_counter()
    result = solve(problem, "ip", SolveOptions(objective=objective, time_limit=6, progress=progress))
    ended = time.perf_counter()
    assert result.evaluation.feasible
    assert largest_silence(seen, started, ended) <= PERIOD + 0.5
    lines = [m for _, m in seen]
    assert any("incumbent" in m and "bound" in m and "gap" in m for m in lines)
    assert any(m.startswith(("ip:", "ip (", "latency IP", "max-load IP")) and "incumbent" in m for m in lines)
