"""Cost model: analytic FPGA latency, CPU profiling, footprints, and the PlacementProblem it builds."""

import json
import math
import time
from pathlib import Path

import numpy as np
import pytest

from fpgaplace.board.load import load_board
from fpgaplace.hw.folding import streamed_cycles
from fpgaplace.hw.kernel import cycles_to_us
from fpgaplace.model.frontend.load import from_model, load_onnx
from fpgaplace.model.zoo import cnn_residual, light_model_path, mlp
from fpgaplace.place.cost.cpu import profile_cpu_us
from fpgaplace.place.cost.fpga import (
    PRECISION_BYTES,
    OnChipPlan,
    fpga_core_kinds,
    fpga_latency_us,
    on_chip_plan,
    weight_area,
)
from fpgaplace.place.cost.problem import CostOptions, build_problem, op_costs
from fpgaplace.util.errors import FpgaplaceError


@pytest.fixture(scope="module")
def cnn_graph():
    return from_model(cnn_residual(), source="cnn")


@pytest.fixture(scope="module")
def zcu104():
    return load_board("zcu104")


def test_problem_matches_graph_and_board(cnn_graph, zcu104):
    problem = build_problem(cnn_graph, zcu104, CostOptions(profile_cpu=False))
    assert problem.n == len(cnn_graph.ops)
    assert len(problem.edges) == cnn_graph.graph.number_of_edges()
    accel = [k for k in problem.kinds if not k.is_cpu]
    cpus = [k for k in problem.kinds if k.is_cpu]
    assert sum(k.count for k in accel) == len(zcu104.cores)
    assert sum(k.count for k in cpus) == len(zcu104.cpus)
    assert all(k.memory == weight_area(zcu104.cores[0].onchip_bytes) < zcu104.cores[0].onchip_bytes for k in accel)
    # edges follow the topological order the problem's nodes are in
    assert all(u < v for u, v in problem.edges)
    assert np.all(problem.size >= 0) and np.all(problem.transfer >= 0)


def test_fpga_latency_scales_with_dsps(cnn_graph, zcu104):
    """A core with more DSPs is never slower, and a big conv is compute-bound: time ~ MACs / DSPs."""
    costs = op_costs(cnn_graph, zcu104, CostOptions(profile_cpu=False))
    one_core = load_board("zcu104").cores[0]
    conv = max((c for c in costs if c.op_type == "Conv"), key=lambda c: cnn_graph.ops[c.name].macs)
    macs = cnn_graph.ops[conv.name].macs
    kind = fpga_core_kinds(zcu104)[0][0]
    ideal_us = macs / (one_core.dsp * one_core.macs_per_dsp) / one_core.clock_mhz
    assert conv.latency_us[kind] >= ideal_us
    assert conv.latency_us[kind] < ideal_us * 10 + 1.0


def test_unsupported_ops_are_cpu_only(zcu104):
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])  # TopK keeps k = 3 of the 8
    k = helper.make_tensor("k", TensorProto.INT64, [1], [3])
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("TopK", ["r", "k"], ["y", "idx"], name="topk"),
    ]
    graph = helper.make_graph(nodes, "g", [x], [y], initializer=[k])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    problem = build_problem(from_model(model), zcu104, CostOptions(profile_cpu=False))
    topk = problem.names.index("topk")
    for kind_index, kind in enumerate(problem.kinds):
        assert math.isfinite(problem.latency[topk, kind_index]) == kind.is_cpu
    relu = problem.names.index("relu")
    assert np.all(np.isfinite(problem.latency[relu]))


def test_cpu_profile_measures_every_op(cnn_graph):
    measured = profile_cpu_us(cnn_graph, runs=2)
    assert set(measured) == set(cnn_graph.ops)
    assert all(t >= 0 for t in measured.values())


def test_cpu_profile_orders_big_and_small_ops(zcu104):
    """The measured CPU time of the MLP's biggest MatMul exceeds its smallest elementwise op."""
    graph = from_model(mlp(batch=64), batch=64)
    costs = {c.name: c for c in op_costs(graph, zcu104)}
    cpu_kind = next(k for k in costs[next(iter(costs))].latency_us if k.startswith("cpu"))
    assert all(c.cpu_measured for c in costs.values())
    heavy = max(graph.ops.values(), key=lambda op: op.macs)
    light = min(graph.ops.values(), key=lambda op: op.macs)
    assert costs[heavy.name].latency_us[cpu_kind] > costs[light.name].latency_us[cpu_kind]


def test_precision_changes_footprint(cnn_graph, zcu104):
    int8 = op_costs(cnn_graph, zcu104, CostOptions(precision="int8", profile_cpu=False))
    fp32 = op_costs(cnn_graph, zcu104, CostOptions(precision="float32", profile_cpu=False))
    assert PRECISION_BYTES["float32"] == 4 * PRECISION_BYTES["int8"]
    for a, b in zip(int8, fp32, strict=True):
        assert b.onchip_bytes >= a.onchip_bytes
        assert b.transfer_us >= a.transfer_us
    assert sum(c.onchip_bytes for c in fp32) > sum(c.onchip_bytes for c in int8)


def test_bad_precision_is_one_line(cnn_graph, zcu104):
    with pytest.raises(FpgaplaceError, match="precision"):
        op_costs(cnn_graph, zcu104, CostOptions(precision="int3", profile_cpu=False))


def test_oversized_weights_stream_and_fit(zcu104):
    """ResNet-50's big layers do not fit a zcu104 core: they stream, and every footprint fits a core.
    A stage reads its streamed weights while it computes: a streamed op costs the larger of its
    share of the core and its weights' time over DRAM, so never less than with them resident, and
    more where the weights take longer (the classifier: 2 MB read for 2 M MACs)."""
    graph = load_onnx(light_model_path("resnet50"))
    start = time.perf_counter()
    problem = build_problem(graph, zcu104, CostOptions(precision="int8"))
    seconds = time.perf_counter() - start
    accel = next(k for k in problem.kinds if not k.is_cpu)
    assert np.all(problem.size <= accel.memory)
    costs = op_costs(graph, zcu104, CostOptions(profile_cpu=False))
    streamed = [c for c in costs if c.streamed and 0 < c.onchip_bytes < graph.ops[c.name].param_bytes]
    assert streamed, "expected ResNet-50 layers whose weights do not stay resident"
    kind = fpga_core_kinds(zcu104)[0][0]
    core = zcu104.cores[0]
    slower = 0
    for cost in streamed:
        op = graph.ops[cost.name]
        resident = fpga_latency_us(op, graph, core, zcu104, OnChipPlan(op.param_bytes, 0))
        weights = on_chip_plan(op, graph, PRECISION_BYTES["int8"], resident=False).streamed_bytes
        dram_us = cycles_to_us(streamed_cycles(weights, core, zcu104.dram), core)
        assert cost.latency_us[kind] == pytest.approx(max(resident, dram_us), rel=1e-9), cost.name
        slower += cost.latency_us[kind] > resident
    assert slower >= 1
    print(f"cost of resnet50 on zcu104: {seconds:.2f} s")


def test_resident_weights_fit_the_budget_smallest_first(zcu104):
    from fpgaplace.place.cost.fpga import (
        RESIDENT_BUDGET,
        RESIDENT_LIMIT,
        kernel_weight_bytes,
        resident_budget,
        resident_ops,
    )

    graph = load_onnx(light_model_path("resnet50"))
    chosen = resident_ops(graph, zcu104, precision=1)
    weights = {name: kernel_weight_bytes(op, graph, 1) for name, op in graph.ops.items()}
    total_area = sum(weight_area(core.onchip_bytes) for core in zcu104.cores)
    assert 0 < sum(weights[n] for n in chosen) <= resident_budget(graph, zcu104, 1) <= RESIDENT_BUDGET * total_area
    assert max(weights[n] for n in chosen) <= RESIDENT_LIMIT * weight_area(zcu104.cores[0].onchip_bytes)
    left_out = [weights[n] for n in graph.ops if n not in chosen]
    assert left_out and min(left_out) >= max(weights[n] for n in chosen)
    # every resident op fits on the cores together: an all-core placement exists memory-wise
    problem = build_problem(graph, zcu104, CostOptions(profile_cpu=False))
    accel = next(k for k in problem.kinds if not k.is_cpu)
    assert problem.size.sum() <= accel.memory * accel.count



def test_fixed_bytes_leave_room_for_every_op_on_the_cores():
    """A dense block (tests/real_models.py ``densenet``) on ultra96-v2: its 3x3 convs' line buffers
    and its batch norms' per-channel words take more than half of the cores' weight areas, which
    hold them wherever the weights are. The resident weights get half of what those bytes leave, so
    every op still fits the cores together and the DP's slowest device is a core; when the resident
    weights took half of the whole areas beside those bytes, the ops outgrew the cores and a CPU
    running the tail set the interval (DenseNet-121 on zcu104: 84 ops on the CPUs, 39 fps)."""
    from real_models import densenet

    from fpgaplace import Design
    from fpgaplace.place.cost.fpga import RESIDENT_BUDGET, kernel_bytes, resident_budget, resident_ops

    design = Design(densenet(), "ultra96-v2", profile_cpu=False)
    graph, board, problem = design.graph, design.board, design.problem
    areas = sum(weight_area(core.onchip_bytes) for core in board.cores)
    sizes = np.array([kernel_bytes(op, graph, 1) for op in graph.ops.values()])
    weights, fixed = (int(total) for total in sizes.sum(axis=0))
    assert fixed > areas / 2 and weights > areas  # the case: many fixed bytes, weights that must stream
    resident = sum(kernel_bytes(graph.ops[name], graph, 1)[0] for name in resident_ops(graph, board, 1))
    assert 0 < resident <= resident_budget(graph, board, 1) == pytest.approx(RESIDENT_BUDGET * (areas - fixed))
    accel = next(k for k in problem.kinds if not k.is_cpu)
    assert problem.size.sum() == pytest.approx(fixed + resident)
    assert problem.size.sum() <= accel.memory * accel.count
    loads = design.place().evaluation.loads
    assert int(np.argmax(loads)) < accel.count, loads  # a core, not a CPU, sets the interval

# ---- reproducible CPU costs: median profiles cached per model and host ------------------------------


def cpu_figures(costs) -> dict[str, float]:
    """Each op's latency (us) on the board's first CPU kind."""
    kind = next(k for k in costs[0].latency_us if k.startswith("cpu"))
    return {c.name: c.latency_us[kind] for c in costs}


def test_two_runs_in_a_row_give_the_same_cpu_figures_from_the_cache(tmp_path, monkeypatch, cnn_graph, zcu104):
    """The first run measures and stores the profile; the second reads it: figures exactly equal
    (so within 5%), and no profiling happens the second time."""
    from fpgaplace.place.cost import cpu as cost

    options = CostOptions(cpu_cache_dir=tmp_path / "cache")
    first = cpu_figures(op_costs(cnn_graph, zcu104, options))
    assert len(list((tmp_path / "cache").glob("*.json"))) == 1

    def no_profiling(*args, **kwargs):
        raise AssertionError("the second run profiled again instead of reading the cache")

    monkeypatch.setattr(cost, "_profile_model", no_profiling)
    monkeypatch.setattr(cost, "_host_rate_samples", no_profiling)
    second = cpu_figures(op_costs(cnn_graph, zcu104, options))
    assert second == first
    assert all(abs(second[n] - first[n]) <= 0.05 * first[n] for n in first)
    assert all(math.isfinite(us) and us > 0 for us in first.values())


def count_measurements(monkeypatch) -> list[int]:
    """Wrap the profiler so a test can count how often the model was really measured."""
    from fpgaplace.place.cost import cpu as cost

    calls: list[int] = []
    measure = cost._profile_model

    def counted(*args, **kwargs):
        calls.append(1)
        return measure(*args, **kwargs)

    monkeypatch.setattr(cost, "_profile_model", counted)
    return calls


def test_cache_key_follows_model_content_runs_and_host(tmp_path, monkeypatch, cnn_graph):
    from fpgaplace.place.cost import cpu as cost
    from fpgaplace.place.cost.cpu import CpuProfileCache, cpu_profile, profile_key

    cache = CpuProfileCache(tmp_path)
    calls = count_measurements(monkeypatch)
    cpu_profile(cnn_graph, 2, cache)
    renamed = from_model(cnn_residual(), source="another-name")
    assert profile_key(renamed.to_onnx(), 2) == profile_key(cnn_graph.to_onnx(), 2)  # a name is not content
    cpu_profile(renamed, 2, cache)
    assert len(calls) == 1
    cpu_profile(cnn_graph, 3, cache)  # another run count: another measurement
    cpu_profile(from_model(cnn_residual(seed=2), source="cnn"), 2, cache)  # other weights
    assert len(calls) == 3
    identity = cost.host_identity()
    monkeypatch.setattr(cost, "host_identity", lambda: {**identity, "onnxruntime": "0.0.0-other"})
    cpu_profile(cnn_graph, 2, cache)
    monkeypatch.setattr(cost, "host_identity", lambda: {**identity, "host": "another-host"})
    cpu_profile(cnn_graph, 2, cache)
    assert len(calls) == 5
    assert len(list(tmp_path.glob("*.json"))) == 5


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", "", '{"key": "wrong"}', "NEGATIVE", "NAN_RATE"])
def test_a_corrupt_cache_file_is_measured_again_and_replaced(tmp_path, monkeypatch, cnn_graph, content):
    from fpgaplace.place.cost.cpu import CpuProfileCache, cpu_profile, profile_key

    cache = CpuProfileCache(tmp_path)
    calls = count_measurements(monkeypatch)
    good = cpu_profile(cnn_graph, 2, cache)
    path = cache.path(profile_key(cnn_graph.to_onnx(), 2))
    record = json.loads(path.read_text())
    if content == "NEGATIVE":
        record["op_us"][next(iter(record["op_us"]))] = -1.0
        content = json.dumps(record)
    elif content == "NAN_RATE":
        content = json.dumps({**record, "host_gflops": float("nan")})
    path.write_text(content)
    again = cpu_profile(cnn_graph, 2, cache)
    assert len(calls) == 2
    assert set(again.op_us) == set(good.op_us)
    assert json.loads(path.read_text())["op_us"] == again.op_us  # the bad file was replaced
    assert cpu_profile(cnn_graph, 2, cache) == again and len(calls) == 2


def test_an_unwritable_cache_folder_only_means_nothing_is_kept(tmp_path, cnn_graph, zcu104):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would go")
    costs = op_costs(cnn_graph, zcu104, CostOptions(cpu_cache_dir=blocker / "cpu-costs"))
    assert all(c.cpu_measured for c in costs)
    assert blocker.read_text() == "a file where the cache folder would go"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not-a-folder"]


def test_cache_store_is_atomic_and_leaves_no_temporary_files(tmp_path, cnn_graph):
    from fpgaplace.place.cost.cpu import CpuProfile, CpuProfileCache

    cache = CpuProfileCache(tmp_path / "deep" / "folder")
    key = {"format": "test", "model": "abc"}
    assert cache.store(key, CpuProfile({"a": 1.5}, 70.0))
    assert cache.store(key, CpuProfile({"a": 2.5}, 71.0))  # replaces in one rename
    assert [p.name for p in cache.folder.iterdir()] == [cache.path(key).name]
    assert cache.load(key) == CpuProfile({"a": 2.5}, 71.0)
    assert cache.load({**key, "model": "abd"}) is None


def test_default_cache_folder_follows_xdg_cache_home(tmp_path, monkeypatch):
    from fpgaplace.place.cost.cpu import default_cpu_cache_dir

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cpu_cache_dir() == tmp_path / "fpgaplace" / "cpu-costs"
    assert CostOptions().profile_cache().folder == tmp_path / "fpgaplace" / "cpu-costs"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # not absolute: ignored, as the XDG spec says
    assert default_cpu_cache_dir() == Path.home() / ".cache" / "fpgaplace" / "cpu-costs"
    assert CostOptions(cpu_cache=False).profile_cache() is None


def test_node_times_are_the_median_of_the_timed_runs_after_the_warm_up():
    from fpgaplace.place.cost.cpu import _node_times_us

    def event(name, dur):
        return {"cat": "Node", "name": f"{name}_kernel_time", "dur": dur}

    durations = {"conv": [900, 10, 12, 11, 500, 13], "relu": [50, 2, 3, 2, 2, 100]}  # first run: warm-up
    events = [event(n, d) for i in range(6) for n, d in ((n, durations[n][i]) for n in durations)]
    events.append({"cat": "Session", "name": "model_run", "dur": 5000})
    assert _node_times_us(events, runs=5) == {"conv": 12.0, "relu": 2.0}


@pytest.mark.parametrize("runs", [0, -1, 2.5, True, 10**6])
def test_bad_profile_runs_is_one_line(cnn_graph, zcu104, runs, tmp_path):
    with pytest.raises(FpgaplaceError, match="profile_runs"):
        op_costs(cnn_graph, zcu104, CostOptions(profile_runs=runs, cpu_cache_dir=tmp_path))


UNCACHED_SPREAD_BOUND = 3.0  # max/min of a figure over two uncached profiles in a row (see the test)


def test_uncached_profiles_agree_within_the_documented_bound(tmp_path, monkeypatch, zcu104):
    """Without the cache each run measures again, and on this project's loaded 2-core machines
    two profiles in a row differ far more than 5%. Measured on a 2-core VM at load 1.7-2.6
    (other test suites running), 30 pairs of profiles of this model: max/min per op of 50 us
    or more up to 1.9 (median 1.05, 90th percentile 1.43), model total up to 1.9; before
    profiles ran for at least ``MIN_PROFILE_SECONDS``, up to 2.6. The bound asserted, 3.0 for
    those ops and for the total, catches a broken median or host scaling and holds on such a
    machine; 5% holds only from the cache (the test above)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    graph = from_model(mlp(batch=32, sizes=(256, 512, 512, 256)), batch=32)
    options = CostOptions(cpu_cache=False)
    runs = [cpu_figures(op_costs(graph, zcu104, options)) for _ in range(2)]
    assert list(tmp_path.iterdir()) == []  # nothing cached
    measured = profile_cpu_us(graph, 5)
    heavy = [n for n, us in measured.items() if us >= 50]
    assert heavy, "the test model should have ops of 50 us or more"
    ratios = {n: max(runs[0][n], runs[1][n]) / min(runs[0][n], runs[1][n]) for n in heavy}
    totals = [sum(r.values()) for r in runs]
    print(f"uncached spread: per-op {max(ratios.values()):.3f}, total {max(totals) / min(totals):.3f}")
    assert max(ratios.values()) <= UNCACHED_SPREAD_BOUND
    assert max(totals) / min(totals) <= UNCACHED_SPREAD_BOUND


def _device_of(problem, board):
    """(kind, ordinal) of each problem device -> the board's core or CPU."""
    everything = [*board.cores, *board.cpus]
    return [everything[problem.links.device_ids[kind][ordinal]] for kind, ordinal in problem.devices()]


@pytest.mark.parametrize("board_name", ["zcu104", "cluster-2x-zcu104", "alveo-u280"])
def test_transfers_cost_by_the_link_between_the_two_devices(cnn_graph, board_name):
    board = load_board(board_name)
    problem = build_problem(cnn_graph, board, CostOptions(profile_cpu=False))
    matrix, devices = problem.link_matrix(), _device_of(problem, board)
    nbytes = [c.output_bytes for c in op_costs(cnn_graph, board, CostOptions(profile_cpu=False))]
    v = int(np.argmax(nbytes))
    for d, source in enumerate(devices):
        for e, target in enumerate(devices):
            link = board.node_board(source.node).dram if d == e else board.link_between(source, target)
            assert problem.links.times[v, matrix[d, e]] == pytest.approx(link.transfer_us(nbytes[v]))
    # the solvers' single c(v) is the costliest link's, so it bounds every per-link charge
    assert np.allclose(problem.transfer, problem.links.times.max(axis=1))
    cheapest, feeds = problem.optimistic().transfer, np.isin(np.arange(problem.n), [u for u, _ in problem.edges])
    assert np.all(cheapest[feeds] >= problem.links.times.min(axis=1)[feeds] - 1e-12)
    assert np.all(cheapest <= problem.transfer) and np.all(cheapest[~feeds] == 0)  # a sink is never charged


def test_two_cores_of_a_board_talk_by_stream_and_of_two_boards_by_network(cnn_graph):
    board = load_board("cluster-2x-zcu104")
    problem = build_problem(cnn_graph, board, CostOptions(profile_cpu=False))
    matrix, devices = problem.link_matrix(), _device_of(problem, board)
    names = problem.links.names
    kinds = {(devices[d].node == devices[e].node, d == e): names[matrix[d, e]]
             for d in range(len(devices)) for e in range(len(devices))
             if not problem.kinds[problem.devices()[d][0]].is_cpu and not problem.kinds[problem.devices()[e][0]].is_cpu}
    assert kinds == {(True, True): "dram:ddr4", (True, False): "stream:axi-stream-128b",
                     (False, False): "network:1gbe"}
