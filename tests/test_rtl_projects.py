"""Whole cores in RTL with the ops the first RTL library lacked: channel concatenation, an Add
of a constant (a per-channel offset after a conv, a bias after a MatMul) and a dense layer over
several vectors a sample. Compiled from small ONNX models for pynq-z2, every core simulated in
cocotb on Icarus with random backpressure: bit-exact against the integer reference, steady
cycles within 10% of the cycle model's interval."""

from __future__ import annotations

import onnx
import pytest
from onnx import helper
from test_const_add import _model as const_add_model
from test_const_add import _tensor as const_add_tensor

from fpgaplace.flow.design import Design
from fpgaplace.sim.rtl_project import simulate_project_rtl

CYCLE_TOLERANCE = 0.10


def _model(nodes, x_shape, out_shape, initializers) -> onnx.ModelProto:
    return const_add_model(nodes, x_shape, out_shape, initializers, name="rtl_ops")


def _tensor(name: str, shape: tuple[int, ...], seed: int) -> onnx.TensorProto:
    return const_add_tensor(name, shape, seed, scale=0.3)


def concat_offset_model() -> onnx.ModelProto:
    """Two conv branches of one input, concatenated on channels, then a per-channel offset."""
    nodes = [helper.make_node("Conv", ["x", "wa"], ["a"], name="conv_a", kernel_shape=[1, 1]),
             helper.make_node("Relu", ["a"], ["ra"], name="relu_a"),
             helper.make_node("Conv", ["x", "wb"], ["b"], name="conv_b", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["b"], ["rb"], name="relu_b"),
             helper.make_node("Concat", ["ra", "rb"], ["c"], name="concat", axis=1),
             helper.make_node("Add", ["c", "offset"], ["z"], name="offset_add")]
    return _model(nodes, [1, 4, 8, 8], [1, 10, 8, 8],
                  [_tensor("wa", (4, 4, 1, 1), 1), _tensor("wb", (6, 4, 3, 3), 2), _tensor("offset", (10, 1, 1), 3)])


def matmul_bias_model() -> onnx.ModelProto:
    """A MatMul over 4 vectors a sample (ROWS = 4) and its bias as an Add of a constant."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("Add", ["m", "bias"], ["y"], name="bias_add"),
             helper.make_node("Relu", ["y"], ["z"], name="relu")]
    return _model(nodes, [1, 4, 16], [1, 4, 8], [_tensor("w", (16, 8), 4), _tensor("bias", (8,), 5)])


@pytest.mark.parametrize(("make", "kernels"), [(concat_offset_model, {"concat", "add", "conv2d"}),
                                               (matmul_bias_model, {"dense", "add"})])
def test_cores_with_concat_and_constant_adds_are_bit_exact_in_rtl(tmp_path, make, kernels):
    result = Design(make(), "pynq-z2", profile_cpu=False).compile(tmp_path / "project", random_samples=4)
    used = {layer["kernel"] for core in result.design["cores"] for layer in core["layers"]}
    assert kernels <= used and result.cpu_ops == [], (used, result.cpu_ops)
    assert not list((tmp_path / "project" / "rtl").glob("*/README.txt")), "every core has RTL"
    rtl = simulate_project_rtl(tmp_path / "project", samples=2)
    assert rtl.ok and rtl.cores
    for core in rtl.cores:
        assert core.bit_exact, core
        assert abs(core.cycles_measured - core.cycles_model) <= CYCLE_TOLERANCE * core.cycles_model, core
