"""Tests for the trusted evaluator, on hand-made graphs with hand-computed answers."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from fpgaplace.hw.geometry import Fill
from fpgaplace.place.solvers.evaluate import class_graph, evaluate, evaluation_of
from fpgaplace.place.solvers.problem import DeviceKind, Placement, PlacementProblem, StageFill
from fpgaplace.util.errors import FpgaplaceError


def make(edges, acc, cpu, transfer, *, fpgas=2, cpus=1, memory=math.inf, size=None,
         backward=None, color=None, unlimited=True) -> PlacementProblem:
    n = len(acc)
    return PlacementProblem(
        names=[f"n{v}" for v in range(n)], ids=[100 + v for v in range(n)], edges=list(edges),
        kinds=[DeviceKind("fpga", fpgas, memory, False), DeviceKind("cpu", cpus, math.inf, True)],
        latency=np.column_stack([np.asarray(acc, float), np.asarray(cpu, float)]),
        size=np.zeros(n) if size is None else np.asarray(size, float),
        transfer=np.asarray(transfer, float),
        backward=np.zeros(n, bool) if backward is None else np.asarray(backward, bool),
        color=np.full(n, -1) if color is None else np.asarray(color),
        cpu_overlap_unlimited=unlimited)


def place(*devices, order=None) -> Placement:
    return Placement(device=np.array(devices), order=None if order is None else np.array(order))


CHAIN = dict(edges=[(0, 1), (1, 2)], acc=[1, 2, 4], cpu=[10, 20, 40], transfer=[0.5, 0.25, 9])


def test_chain_split_in_two() -> None:
    p = make(**CHAIN)
    r = evaluate(p, place(0, 0, 1))
    # fpga0: 1 + 2 + c(1) ; fpga1: 4 + c(1)
    assert r.loads == [3.25, 4.25, 0.0] and r.max_load == 4.25
    assert r.contiguous and r.feasible
    # latency: fpga0 runs {0,1} in 3 + 0.25 (writes tensor 1), then fpga1 reads it: 4 + 0.25
    assert r.latency == pytest.approx(3.25 + 4.25)
    assert [(e.device, e.nodes) for e in r.schedule] == [(0, [0, 1]), (1, [2])]


def test_an_evaluation_is_reused_only_for_the_same_problem_device_and_order() -> None:
    p = make(**CHAIN)
    placement = place(0, 0, 1)
    first = evaluation_of(p, placement)
    assert evaluation_of(p, placement) is first
    assert evaluation_of(p, place(0, 0, 1), placement) is first  # a known placement's
    assert evaluation_of(make(**CHAIN), placement) is not first  # another problem object
    placement.device[2] = 0  # changed in place: evaluated again
    again = evaluation_of(p, placement)
    assert again is not first and again.max_load == evaluate(p, place(0, 0, 0)).max_load == 7.0
    ordered = place(0, 0, 0, order=[0, 0, 0])
    assert evaluation_of(p, ordered, placement) is not again


def test_cpu_pays_no_transfer_and_accelerator_pays_for_cpu_neighbours() -> None:
    p = make(**CHAIN)
    r = evaluate(p, place(2, 0, 2))
    assert r.loads == [2 + 0.5 + 0.25, 0.0, 50.0]
    assert r.latency == pytest.approx(10 + 2.75 + 40)


def test_node_counted_once_per_set() -> None:
    # 0 feeds 1 and 2, both on fpga1: c(0) is paid once by fpga1 and once by fpga0
    p = make([(0, 1), (0, 2)], [1, 1, 1], [1, 1, 1], [3, 0, 0])
    r = evaluate(p, place(0, 1, 1))
    assert r.loads[:2] == [4.0, 5.0]


def test_non_convex_set_and_derived_subgraphs() -> None:
    p = make(**CHAIN)
    r = evaluate(p, place(0, 1, 0))
    assert not r.contiguous and r.feasible
    assert r.loads[:2] == [1 + 4 + 0.5 + 0.25, 2 + 0.5 + 0.25]
    # fpga0 runs {0} (1 + 0.5), fpga1 {1} (2 + 0.5 + 0.25), fpga0 {2} (4 + 0.25)
    assert [(e.device, e.nodes) for e in r.schedule] == [(0, [0]), (1, [1]), (0, [2])]
    assert r.latency == pytest.approx(1.5 + 2.75 + 4.25)


def test_given_order_deadlock_raises() -> None:
    p = make(**CHAIN)
    with pytest.raises(FpgaplaceError, match="deadlock"):
        evaluate(p, place(0, 1, 0, order=[0, 0, 0]))
    ok = evaluate(p, place(0, 1, 0, order=[0, 0, 1]))
    assert ok.latency == pytest.approx(1.5 + 2.75 + 4.25)
    with pytest.raises(FpgaplaceError, match="deadlock"):
        evaluate(p, place(0, 1, 0, order=[1, 0, 0]))  # {2} before {0} on fpga0


def test_ring_of_convex_sets_is_contiguous_and_scheduled_without_deadlock() -> None:
    # a1->b1, b2->c1, c2->a2: every set is convex yet no chain of ideals exists
    edges = [(0, 2), (3, 4), (5, 1)]
    p = make(edges, [1] * 6, [1] * 6, [0] * 6, fpgas=3, cpus=0)
    r = evaluate(p, place(0, 0, 1, 1, 2, 2))
    assert r.contiguous
    assert math.isfinite(r.latency) and len(r.schedule) >= 4


def test_cpu_overlap_modes() -> None:
    p = make([(0, 1), (0, 2)], [1, 1, 1], [1, 5, 7], [0, 0, 0], unlimited=True)
    placement = place(2, 2, 2)
    assert evaluate(p, placement).latency == pytest.approx(1 + 7)
    assert evaluate(p, placement, cpu_overlap_unlimited=False).latency == pytest.approx(1 + 5 + 7)
    two_cores = make([(0, 1), (0, 2)], [1, 1, 1], [1, 5, 7], [0, 0, 0], cpus=2, unlimited=False)
    assert evaluate(two_cores, place(2, 2, 3)).latency == pytest.approx(8)


def test_parallel_branches_on_one_accelerator_run_as_one_subgraph() -> None:
    p = make([(0, 1), (0, 2), (1, 3), (2, 3)], [1, 2, 3, 4], [9] * 4, [1, 1, 1, 1])
    r = evaluate(p, place(0, 1, 1, 0))
    assert len(r.schedule) == 3
    # fpga0 {0} 1+1 ; fpga1 {1,2}: 5 + in c0 + out c1, c2 = 8 ; fpga0 {3}: 4 + 2
    assert r.latency == pytest.approx(2 + 8 + 6)


def test_violations() -> None:
    p = make(**CHAIN, memory=5, size=[3, 3, 1], color=[7, -1, 7])
    p.latency[1, 0] = np.inf
    r = evaluate(p, place(0, 0, 1))
    assert not r.feasible
    text = " | ".join(r.violations)
    assert "node 101 (n1) is not supported on fpga0" in text
    assert "fpga0 holds 6 bytes" in text
    assert "colour class 7" in text
    assert math.isinf(r.max_load)


def test_bad_device_index() -> None:
    p = make(**CHAIN)
    r = evaluate(p, place(0, 5, 0))
    assert not r.feasible and "node 101 has device index 5" in r.violations[0]
    assert evaluate(p, place(0, 1)).violations[0].startswith("placement has 2")
    assert "order entries" in evaluate(p, place(0, 0, 1, order=[0])).violations[0]


def test_training_contiguity_is_judged_on_forward_graph() -> None:
    # forward 0->1->2, backward 5->4->3 (mirror), colours tie i with i+3
    edges = [(0, 1), (1, 2), (2, 5), (5, 4), (4, 3)]
    p = make(edges, [1] * 6, [1] * 6, [0] * 6, backward=[0, 0, 0, 1, 1, 1],
             color=[0, 1, 2, 0, 1, 2])
    good = evaluate(p, place(0, 1, 1, 0, 1, 1))
    assert good.contiguous and good.feasible
    bad = evaluate(p, place(0, 1, 0, 0, 1, 0))
    assert not bad.contiguous


def test_orphan_backward_class_gets_mirrored_edges() -> None:
    # forward 0->1 ; backward 2 (colour of 1) -> 3 (no colour: orphan)
    p = make([(0, 1), (1, 2), (2, 3)], [1] * 4, [1] * 4, [0] * 4, backward=[0, 0, 1, 1],
             color=[-1, 5, 5, -1])
    cls, edges = class_graph(p)
    assert cls[1] == cls[2] and len(set(cls.tolist())) == 3
    assert sorted(edges) == sorted([(int(cls[0]), int(cls[1])), (int(cls[3]), int(cls[2]))])


# ---- transfers charged on the link between the two devices -----------------------------------
STREAM, DRAM, NETWORK = 0, 1, 2


def with_links(problem: PlacementProblem, times, column, device_ids) -> PlacementProblem:
    """``problem`` whose transfers cost by link: ``times[v][l]``, ``column[a][b]`` per device."""
    from dataclasses import replace

    from fpgaplace.place.solvers.problem import Links

    times = np.asarray(times, float)
    return replace(problem, transfer=times.max(axis=1), links=Links(
        names=("stream", "dram", "network"), times=times,
        device_ids=tuple(tuple(ids) for ids in device_ids), column=np.asarray(column)))


def three_device_links(problem: PlacementProblem, times) -> PlacementProblem:
    # fpga0 and fpga1 joined by a stream, each to itself and to the CPU by DRAM
    column = [[DRAM, STREAM, DRAM], [STREAM, DRAM, DRAM], [DRAM, DRAM, DRAM]]
    return with_links(problem, times, column, [[0, 1], [2]])


LINK_TIMES = [[0.5, 1.5, 9.0], [0.25, 2.0, 9.0], [1.0, 3.0, 9.0]]  # per node: stream, dram, network


def test_a_tensor_between_two_cores_pays_the_stream_and_to_a_cpu_the_dram() -> None:
    p = three_device_links(make(**CHAIN), LINK_TIMES)
    r = evaluate(p, place(0, 1, 2))
    # fpga0: a(0) + stream(0); fpga1: a(1) + stream(0) read + dram(1) written to the CPU
    assert r.loads == [1 + 0.5, 2 + 0.5 + 2.0, 40.0]
    # latency: 1.5 on fpga0, then fpga1 for 4.5, then the CPU op for 40
    assert r.latency == pytest.approx(1.5 + 4.5 + 40)
    # the same placement without links pays c(v) = the costliest link everywhere
    plain = evaluate(make(**{**CHAIN, "transfer": [9.0, 9.0, 9.0]}), place(0, 1, 2))
    assert all(a <= b for a, b in zip(r.loads, plain.loads, strict=True)) and r.latency < plain.latency


def test_a_tensor_read_by_devices_on_several_links_pays_the_costliest() -> None:
    # 0 feeds 1 (on the other core, by stream) and 2 (on the CPU, by DRAM): fpga0 pays DRAM once
    p = three_device_links(make([(0, 1), (0, 2)], [1, 1, 1], [1, 1, 1], [0, 0, 0]), LINK_TIMES)
    r = evaluate(p, place(0, 1, 2))
    assert r.loads[0] == 1 + 1.5 and r.loads[1] == 1 + 0.5


def test_a_tensor_leaving_a_core_and_coming_back_pays_its_dram() -> None:
    # 0 and 2 on fpga0 in two subgraphs, 1 on the CPU between them; 2 also reads 0 itself
    p = three_device_links(make(**{**CHAIN, "edges": [(0, 1), (1, 2), (0, 2)]}), LINK_TIMES)
    r = evaluate(p, place(0, 2, 0))
    first, _, last = r.schedule
    assert (first.device, last.device) == (0, 0)
    assert first.end - first.start == pytest.approx(1 + 1.5)  # writes 0 to DRAM, once
    assert last.end - last.start == pytest.approx(4 + 2.0 + 1.5)  # reads 1 and its own 0 back
    # with a stream (not DRAM) from a core to itself, the second read would be cheaper
    column = [[STREAM, STREAM, DRAM], [STREAM, DRAM, DRAM], [DRAM, DRAM, DRAM]]
    looped = with_links(p, LINK_TIMES, column, [[0, 1], [2]])
    assert evaluate(looped, place(0, 2, 0)).schedule[-1].end < r.schedule[-1].end


def test_links_follow_devices_when_a_kind_has_fewer_devices() -> None:
    # the problem restricted to one core keeps (kind, ordinal) -> board device; the CPU is id 2
    from dataclasses import replace

    p = three_device_links(make(**CHAIN), LINK_TIMES)
    one = replace(p, kinds=[replace(p.kinds[0], count=1), p.kinds[1]])
    assert one.link_matrix().tolist() == [[DRAM, DRAM], [DRAM, DRAM]]
    assert evaluate(one, place(0, 0, 1)).loads == [1 + 2 + 2.0, 40.0]


def test_optimistic_problem_charges_the_cheapest_link_and_bounds_every_placement() -> None:
    p = three_device_links(make(**CHAIN), LINK_TIMES)
    cheap = p.optimistic()
    # each node at its cheapest link (the stream); node 2 feeds nothing, so it is never charged
    assert cheap.links is None and cheap.transfer.tolist() == [0.5, 0.25, 0.0]
    # a node that runs only on the CPU is reached, and reaches others, over DRAM only
    cpu_only = three_device_links(make(**{**CHAIN, "acc": [1, math.inf, 4]}), LINK_TIMES)
    assert cpu_only.optimistic().transfer.tolist() == [1.5, 2.0, 0.0]
    for devices in [(0, 1, 2), (0, 0, 1), (2, 0, 1), (1, 2, 0)]:
        exact, low = evaluate(p, place(*devices)), evaluate(cheap, place(*devices))
        assert low.max_load <= exact.max_load and low.latency <= exact.latency
        assert p.link_ratio() * evaluate(replace_links(p), place(*devices)).max_load <= exact.max_load


def replace_links(problem: PlacementProblem) -> PlacementProblem:
    from dataclasses import replace

    return replace(problem, links=None)


def with_fills(problem: PlacementProblem, fills: list[StageFill]) -> PlacementProblem:
    """``problem`` with one stage a node on the accelerator kind (none on the CPU)."""
    return dataclasses.replace(problem, fills=[[fill, None] for fill in fills])


def lane_stage(serial: float) -> StageFill:
    return StageFill(Fill(reading=serial, work=serial), serial)


def test_a_core_s_latency_is_its_dataflow_s_not_the_sum_of_its_shares() -> None:
    """Three stages on one core (shares 1, 2, 4: load 7), each paced at the load: two lane stages
    pass the stream on (the second's serial pace, 2, is already faster than 7, so it keeps it),
    and a dense stage (``needs`` its whole input) starts when its input's last beat is in, at
    7, and works 7 more: 14, where the sum of the shares says 7."""
    p = make(**CHAIN)
    dense = StageFill(Fill(needs=1, reading=100, work=100), 100)
    filled = with_fills(p, [lane_stage(100), lane_stage(2), dense])
    assert evaluate(p, place(0, 0, 0)).latency == pytest.approx(7)
    assert evaluate(filled, place(0, 0, 0)).latency == pytest.approx(14)
    assert evaluate(filled.additive(), place(0, 0, 0)).latency == pytest.approx(7)
    lanes = with_fills(p, [lane_stage(100), lane_stage(2), lane_stage(100)])
    assert evaluate(lanes, place(0, 0, 0)).latency == pytest.approx(7)  # the stream passes through once


def test_a_one_stage_unit_takes_its_own_latency() -> None:
    """Split over two cores, the dense stage is alone on fpga1: its input is there when it starts,
    so it takes its share, as without fills (3.25 + 4.25, test_chain_split_in_two)."""
    dense = StageFill(Fill(needs=1, reading=100, work=100), 100)
    filled = with_fills(make(**CHAIN), [lane_stage(100), lane_stage(100), dense])
    assert evaluate(filled, place(0, 0, 1)).latency == pytest.approx(3.25 + 4.25)
