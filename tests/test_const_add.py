"""Add with a constant operand (a bias after MatMul, a per-channel offset after Conv) runs on a core:
the constant is streamed once per pixel (fp::broadcast) into the two-input add, bit-exact in C."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from fpgaplace.flow.design import Design
from fpgaplace.hw import plan_op
from fpgaplace.hw.elementwise import per_channel_period
from fpgaplace.model.frontend.load import from_model
from fpgaplace.sim.csim import run_csim


def _model(nodes, x_shape, out_shape, initializers, name: str = "const_add") -> onnx.ModelProto:
    """A float model of ``nodes`` from input x to output z, checked by onnx."""
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, out_shape)],
                              initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _tensor(name: str, shape: tuple[int, ...], seed: int, scale: float = 0.2) -> onnx.TensorProto:
    values = (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)
    return numpy_helper.from_array(values, name)


def matmul_bias_model() -> onnx.ModelProto:
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("Add", ["m", "b"], ["y"], name="bias"), helper.make_node("Relu", ["y"], ["z"], name="r")]
    return _model(nodes, [1, 16, 64], [1, 16, 32], [_tensor("w", (64, 32), 1), _tensor("b", (32,), 2)])


def conv_offset_model() -> onnx.ModelProto:
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),  # keeps the optimizer from folding the add
             helper.make_node("Add", ["r", "offset"], ["z"], name="offset_add")]
    return _model(nodes, [1, 4, 8, 8], [1, 8, 8, 8], [_tensor("w", (8, 4, 3, 3), 3), _tensor("offset", (8, 1, 1), 4)])


@pytest.mark.parametrize("make", [matmul_bias_model, conv_offset_model])
def test_constant_add_runs_on_a_core_bit_exact(make, tmp_path):
    result = Design(make(), "pynq-z2", profile_cpu=False).compile(tmp_path / "project", random_samples=8)
    kernels = {layer["op"]: layer["kernel"] for core in result.design["cores"] for layer in core["layers"]}
    added = "bias" if "bias" in kernels else "offset_add"
    assert kernels[added] == "add" and result.cpu_ops == []
    top = next((tmp_path / "project" / "cores").glob("*/*_top.cpp")).read_text()
    assert "fp::broadcast<" in top
    check = run_csim(tmp_path / "project", samples=4)
    assert check.ok and all(c.bit_exact for c in check.cores)
    assert all(o.max_abs_diff_lsb is not None and o.max_abs_diff_lsb <= 1 for o in check.outputs)


def test_a_constant_broadcast_along_pixels_stays_on_cpus():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
             helper.make_node("Add", ["c", "row"], ["z"], name="row_add")]
    model = _model(nodes, [1, 4, 8, 8], [1, 8, 8, 8], [_tensor("w", (8, 4, 1, 1), 5), _tensor("row", (8,), 6)])
    graph = from_model(model)
    planned = plan_op(graph.ops["row_add"], graph)
    assert not planned and "per channel" in planned.reason


def test_broadcast_period_rule():
    assert per_channel_period((8, 1, 1), (1, 8, 4, 4)) == 8
    assert per_channel_period((1, 8, 1, 1), (1, 8, 4, 4)) == 8
    assert per_channel_period((4,), (1, 8, 4, 4)) is None  # along W in NCHW: not per channel
    assert per_channel_period((32,), (1, 16, 32)) == 32
    assert per_channel_period((1,), (1, 16, 32)) == 1
    assert per_channel_period((16, 1), (1, 16, 32)) is None
