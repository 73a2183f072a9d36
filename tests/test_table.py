"""Activation tables: elementwise islands of one int8 tensor (SiLU, HardSwish as exported, GELU,
Tanh, ...) found in QDQ models, run on a core as a 256-entry table, bit-exact in C simulation and
RTL simulation, and equal to onnxruntime's QDQ model."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_rtl_ops import assert_verilog_2005_clean, check_cycles, render_op, simulate_case

from fpgaplace.flow.design import Design
from fpgaplace.hw import plan_op
from fpgaplace.hw.elementwise import lane_geometry
from fpgaplace.hw.geometry import Folding
from fpgaplace.hw.islands import find_islands
from fpgaplace.hw.table import island_table
from fpgaplace.model.frontend.load import from_model
from fpgaplace.model.quantize import calibration_inputs, quantize_model
from fpgaplace.sim.csim import run_csim
from fpgaplace.util.onnxrt import run_model


def _const(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype=np.float32), name)


def _activation(kind: str, x: str) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto], str]:
    """The nodes of activation ``kind`` of ``x`` as exporters write them; their constants; the output."""
    n = helper.make_node
    if kind == "silu":
        return [n("Sigmoid", [x], ["s"]), n("Mul", [x, "s"], ["y"])], [], "y"
    if kind == "hardswish_exported":  # x * Clip(x + 3, 0, 6) / 6 (torch < 1.6, paddle)
        return ([n("Add", [x, "three"], ["a"]), n("Clip", ["a", "zero", "six"], ["c"]), n("Mul", [x, "c"], ["m"]),
                 n("Div", ["m", "six"], ["y"])], [_const("three", 3.0), _const("zero", 0.0), _const("six", 6.0)], "y")
    if kind == "gelu_erf":  # x * 0.5 * (1 + erf(x / sqrt 2))
        return ([n("Div", [x, "sqrt2"], ["d"]), n("Erf", ["d"], ["e"]), n("Add", ["e", "one"], ["p"]),
                 n("Mul", [x, "p"], ["m"]), n("Mul", ["m", "half"], ["y"])],
                [_const("sqrt2", math.sqrt(2.0)), _const("one", 1.0), _const("half", 0.5)], "y")
    if kind == "mish":  # x * tanh(softplus(x))
        return [n("Softplus", [x], ["sp"]), n("Tanh", ["sp"], ["t"]), n("Mul", [x, "t"], ["y"])], [], "y"
    if kind == "hardsigmoid":
        return [n("HardSigmoid", [x], ["y"], alpha=1 / 6, beta=0.5)], [], "y"
    return [n(kind, [x], ["y"])], [], "y"  # Tanh, Sigmoid, Elu, ...


def conv_act_conv(kind: str, seed: int = 0) -> onnx.ModelProto:
    """Conv -> activation -> Conv on a [1, 4, 8, 8] input."""
    rng = np.random.default_rng(seed)
    act_nodes, consts, out = _activation(kind, "c1")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]), *act_nodes,
             helper.make_node("Conv", [out, "w2"], ["z"], kernel_shape=[1, 1])]
    for i, node in enumerate(nodes):
        node.name = f"{node.op_type.lower()}_{i}"
    weights = [_const("w1", rng.normal(0, 0.4, (8, 4, 3, 3))), _const("w2", rng.normal(0, 0.4, (6, 8, 1, 1)))]
    graph = helper.make_graph(nodes, kind, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 6, 8, 8])],
                              weights + consts)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def quantized(model: onnx.ModelProto) -> onnx.ModelProto:
    return quantize_model(model, calibration_inputs(model, random_samples=8))


KINDS = ["silu", "hardswish_exported", "gelu_erf", "mish", "hardsigmoid", "Tanh", "Sigmoid", "Elu", "HardSwish"]


@pytest.mark.parametrize("kind", KINDS)
def test_an_island_is_found_and_its_table_equals_onnxruntime(kind):
    """The island's table, run through the source's values, equals the QDQ model between them."""
    model = quantized(conv_act_conv(kind))
    found = find_islands(model)
    assert len(found.islands) == 1, [i.exit_op for i in found.islands]
    island = found.islands[0]
    table = island_table(model, island, kind)
    # onnxruntime on the whole QDQ model, with the source and the island's output as outputs
    x = np.random.default_rng(1).normal(0, 1, (1, 4, 8, 8)).astype(np.float32)
    values = run_model(model, {"x": x}, [island.source, island.output])
    source, output = values[island.source], values[island.output]
    assert source.dtype == np.int8 and len(np.unique(source)) > 20
    np.testing.assert_array_equal(table[source.astype(np.int16) + 128], output)


@pytest.mark.parametrize("kind", ["silu", "hardswish_exported", "gelu_erf", "Tanh"])
def test_a_conv_activation_conv_runs_on_the_cores_bit_exact(kind, tmp_path):
    result = Design(conv_act_conv(kind, seed=len(kind)), "zcu104", profile_cpu=False).compile(
        tmp_path / "project", random_samples=8)
    kernels = [layer["kernel"] for core in result.design["cores"] for layer in core["layers"]]
    assert "table" in kernels and result.cpu_ops == [], (kernels, result.cpu_ops)
    check = run_csim(tmp_path / "project", samples=4)
    assert check.ok and all(c.bit_exact for c in check.cores)
    assert all(o.max_abs_diff_lsb is not None and o.max_abs_diff_lsb <= 1 for o in check.outputs)


def _two_readers_model() -> onnx.ModelProto:
    """Conv -> SiLU, where the sigmoid is also a second output branch's input (a Conv)."""
    model = conv_act_conv("silu")
    graph = model.graph
    graph.node.append(helper.make_node("Conv", ["s", "w3"], ["z2"], name="conv_side", kernel_shape=[1, 1]))
    graph.initializer.append(_const("w3", np.random.default_rng(5).normal(0, 0.4, (6, 8, 1, 1))))
    graph.output.append(helper.make_tensor_value_info("z2", TensorProto.FLOAT, [1, 6, 8, 8]))
    return model


def test_a_tensor_read_outside_stays_an_island_boundary():
    """The sigmoid's int8 output is read by another conv too: the sigmoid is an island of its own
    and the Mul (of two different int8 tensors) is not a table."""
    model = quantized(_two_readers_model())
    found = find_islands(model)
    exits = {model.graph.node[[n.name for n in model.graph.node].index(i.exit_op)].op_type for i in found.islands}
    assert exits == {"Sigmoid"}
    graph = from_model(model)
    assert plan_op(graph.ops["sigmoid_1"], graph)[0].name == "table"
    mul = plan_op(graph.ops["mul_2"], graph)
    assert not mul or mul[0].name != "table"


def test_relu_alone_and_per_channel_constants_are_not_islands():
    relu = quantized(conv_act_conv("Relu"))
    assert find_islands(relu).islands == ()
    model = conv_act_conv("silu")
    model.graph.node[2].input[1] = "gate"  # Mul by a per-channel constant instead of the sigmoid
    model.graph.initializer.append(_const("gate", np.linspace(0.5, 1.5, 8).reshape(8, 1, 1)))
    del model.graph.node[1]
    assert find_islands(quantized(model)).islands == ()


@pytest.mark.parametrize(("shape", "folding"), [((8, 6, 6), Folding(2, 1, 1)), ((4, 5, 5), Folding(4, 1, 5))])
def test_table_rtl_bit_exact_and_cycles(tmp_path, shape, folding):
    rng = np.random.default_rng(sum(shape))
    size = int(np.prod(shape))
    config = {"SIZE": size, "PIXELS": size // shape[0], "CHANNELS": [shape[0]]}
    arrays = {"table": rng.permutation(np.arange(-128, 128)).astype(np.int8)}
    inputs = [rng.integers(-128, 128, (3, size), dtype=np.int8)]
    geometry = lane_geometry("table", (1, *shape), shape[0], {})
    result = simulate_case("table", (config, arrays, inputs, folding), tmp_path, geometry=geometry)
    check_cycles(result, f"table {shape}")
    assert_verilog_2005_clean(render_op("table", config, arrays, folding, 100), tmp_path)


def test_islands_that_share_their_constants_are_each_found():
    """Two HardSwish as exported (x * Clip(x + 3, 0, 6) / 6) reading the same constants 3, 0 and 6:
    each is an island (the constants' DequantizeLinears belong to neither), both on the cores."""
    rng = np.random.default_rng(3)
    n = helper.make_node
    nodes, x = [], "x"
    for i in range(2):
        nodes += [n("Conv", [x, f"w{i}"], [f"c{i}"], name=f"conv{i}", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                  n("Add", [f"c{i}", "three"], [f"a{i}"], name=f"add{i}"),
                  n("Clip", [f"a{i}", "zero", "six"], [f"k{i}"], name=f"clip{i}"),
                  n("Mul", [f"c{i}", f"k{i}"], [f"m{i}"], name=f"mul{i}"),
                  n("Div", [f"m{i}", "six"], [f"h{i}"], name=f"div{i}")]
        x = f"h{i}"
    nodes.append(n("Conv", [x, "w2"], ["z"], name="conv_out", kernel_shape=[1, 1]))
    weights = [_const("w0", rng.normal(0, 0.4, (8, 4, 3, 3))), _const("w1", rng.normal(0, 0.3, (8, 8, 3, 3))),
               _const("w2", rng.normal(0, 0.4, (6, 8, 1, 1))), _const("three", 3.0), _const("zero", 0.0),
               _const("six", 6.0)]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])]
    graph = helper.make_graph(nodes, "two_hardswish", inputs,
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 6, 8, 8])], weights)
    model = quantized(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    exits = sorted(island.exit_op for island in find_islands(model).islands)
    assert exits == ["div0", "div1"], exits
