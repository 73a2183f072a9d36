"""Cost model: analytic FPGA latency, CPU profiling, footprints, and the PlacementProblem it builds."""

import math
import time

import numpy as np
import pytest

from fpgaplace.board import load_board
from fpgaplace.cost import (
    PRECISION_BYTES,
    CostOptions,
    OnChipPlan,
    build_problem,
    fpga_core_kinds,
    fpga_latency_us,
    op_costs,
    profile_cpu_us,
    weight_area,
)
from fpgaplace.errors import FpgaplaceError
from fpgaplace.frontend import from_model, load_onnx
from fpgaplace.models import cnn_residual, light_model_path, mlp


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
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])
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
    Streaming costs time: the same op is slower on the core than with its weights resident."""
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
    op = graph.ops[streamed[0].name]
    resident = fpga_latency_us(op, graph, core, zcu104, OnChipPlan(op.param_bytes, 0))
    assert streamed[0].latency_us[kind] > resident
    print(f"cost of resnet50 on zcu104: {seconds:.2f} s")


def test_resident_weights_fit_the_budget_smallest_first(zcu104):
    from fpgaplace.cost import RESIDENT_BUDGET, RESIDENT_LIMIT, kernel_weight_bytes, resident_ops

    graph = load_onnx(light_model_path("resnet50"))
    chosen = resident_ops(graph, zcu104, precision=1)
    weights = {name: kernel_weight_bytes(op, graph, 1) for name, op in graph.ops.items()}
    total_area = sum(weight_area(core.onchip_bytes) for core in zcu104.cores)
    assert 0 < sum(weights[n] for n in chosen) <= RESIDENT_BUDGET * total_area
    assert max(weights[n] for n in chosen) <= RESIDENT_LIMIT * weight_area(zcu104.cores[0].onchip_bytes)
    left_out = [weights[n] for n in graph.ops if n not in chosen]
    assert left_out and min(left_out) >= max(weights[n] for n in chosen)
    # every resident op fits on the cores together: an all-core placement exists memory-wise
    problem = build_problem(graph, zcu104, CostOptions(profile_cpu=False))
    accel = next(k for k in problem.kinds if not k.is_cpu)
    assert problem.size.sum() <= accel.memory * accel.count
