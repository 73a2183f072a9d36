"""Ties between placements broken towards the accelerators (place.solvers.prefer)."""

from __future__ import annotations

import math

import numpy as np

from fpgaplace.place.solvers.evaluate import evaluate
from fpgaplace.place.solvers.prefer import placement_value, prefer_accelerators
from fpgaplace.place.solvers.problem import DeviceKind, Placement, PlacementProblem
from fpgaplace.place.solvers.run import SolveOptions, solve


def chain(acc, cpu, transfer, *, memory=math.inf, size=None, color=None, fpgas=2, skips=()) -> PlacementProblem:
    """A chain 0 -> 1 -> ... (and the edges ``skips``) on ``fpgas`` accelerators and one CPU."""
    n = len(acc)
    return PlacementProblem(
        names=[f"n{v}" for v in range(n)], ids=list(range(n)),
        edges=[(v, v + 1) for v in range(n - 1)] + list(skips),
        kinds=[DeviceKind("fpga", fpgas, memory, False), DeviceKind("cpu", 1, math.inf, True)],
        latency=np.column_stack([np.asarray(acc, float), np.asarray(cpu, float)]),
        size=np.zeros(n) if size is None else np.asarray(size, float),
        transfer=np.asarray(transfer, float), backward=np.zeros(n, bool),
        color=np.full(n, -1) if color is None else np.asarray(color))


# a classifier's shape: a heavy body, then a light head the CPU also runs within the interval
HEAD = dict(acc=[10, 5, 1], cpu=[100, 100, 5], transfer=[0.1, 0.1, 0.1])


def test_a_light_tail_on_the_cpu_moves_onto_the_core_before_it() -> None:
    problem = chain(**HEAD)
    found = Placement(device=np.array([0, 1, 2]))  # the head on the CPU: max-load 10.1 either way
    preferred = prefer_accelerators(problem, found, "throughput")
    assert preferred.device.tolist() == [0, 1, 1]
    before, after = evaluate(problem, found), evaluate(problem, preferred)
    assert after.max_load <= before.max_load and after.contiguous and after.feasible


def test_a_move_that_raises_the_value_is_not_made() -> None:
    problem = chain(acc=[10, 10, 5], cpu=[100, 100, 5], transfer=[0.1, 0.1, 0.1])
    found = Placement(device=np.array([0, 1, 2]))  # the head on fpga1 would make its load 15.1
    assert prefer_accelerators(problem, found, "throughput") is found


def test_memory_support_and_colour_classes_are_kept() -> None:
    full = chain(**HEAD, memory=1.0, size=[0, 1, 1])  # fpga1 holds node 1: no room for node 2
    found = Placement(device=np.array([0, 1, 2]))
    assert prefer_accelerators(full, found, "throughput") is found
    unsupported = chain(acc=[10, 10, math.inf], cpu=[100, 100, 5], transfer=[0.1, 0.1, 0.1])
    assert prefer_accelerators(unsupported, found, "throughput") is found
    # nodes 2 and 3 are one colour class: they move together or not at all
    coloured = chain(acc=[10, 5, 1, 1], cpu=[100, 100, 2, 2], transfer=[0.1] * 4, color=[-1, -1, 7, 7])
    moved = prefer_accelerators(coloured, Placement(device=np.array([0, 1, 2, 2])), "throughput")
    assert moved.device.tolist() == [0, 1, 1, 1]
    assert evaluate(coloured, moved).feasible


def test_contiguity_is_kept_when_asked() -> None:
    # 0 -> 1 -> 2 -> 3 and 0 -> 3; node 2 runs on the CPU only. Node 3 next to fpga0 (through the
    # skip) would make fpga0 = {0, 3}, which the path through 1 and 2 leaves and re-enters
    problem = chain(acc=[1, 1, math.inf, 1], cpu=[1, 1, 1, 1], transfer=[0.0] * 4, skips=[(0, 3)])
    found = Placement(device=np.array([0, 1, 2, 2]))
    assert prefer_accelerators(problem, found, "throughput") is found
    loose = prefer_accelerators(problem, found, "throughput", contiguous=False)
    assert loose.device.tolist() == [0, 1, 2, 0] and not evaluate(problem, loose).contiguous


def test_latency_objective_uses_the_schedule() -> None:
    problem = chain(**HEAD)
    found = Placement(device=np.array([0, 0, 2]))
    preferred = prefer_accelerators(problem, found, "latency")
    assert preferred.device.tolist() == [0, 0, 0]
    assert placement_value(problem, preferred.device, "latency") <= placement_value(problem, found.device,
                                                                                    "latency")


def test_solve_returns_the_optimum_with_its_head_on_a_core() -> None:
    problem = chain(**HEAD)
    result = solve(problem, "dp", SolveOptions())
    splits = [evaluate(problem, Placement(device=np.array(d))) for d in ([0, 1, 2], [0, 1, 1], [0, 0, 1], [0, 1, 0])]
    assert result.evaluation.max_load == min(split.max_load for split in splits if split.contiguous)
    assert 2 not in result.placement.device.tolist()
