"""Softmax on a core: rows contiguous in stream order, an exponential table and one division a
row; within 1 LSB of a float softmax, bit-exact in C simulation, and on the cores in a classifier."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from fpgaplace.flow.design import Design
from fpgaplace.hw.geometry import Folding, Geometry, Unsupported
from fpgaplace.hw.lowering import multipliers
from fpgaplace.hw.quant import dequantize, quantize_float
from fpgaplace.hw.softmax import exp_table, softmax_rows, softmax_rows_int8
from fpgaplace.sim.csim import run_csim


def test_rows_follow_the_stream_order():
    assert softmax_rows((1, 1000), -1, 13) == (1, 1000)
    assert softmax_rows((1, 4, 16, 8), 1, 13) == (128, 4)  # NCHW over channels: per pixel
    assert softmax_rows((2, 6, 10), 2, 13) == (12, 10)
    assert softmax_rows((1, 1000, 1, 1), 1, 11) == (1, 1000)  # opset 11 flattens from the axis on
    assert softmax_rows((1, 8, 4, 4), 1, 11) == (1, 128)  # the whole sample: any order of it
    assert isinstance(softmax_rows((1, 4, 16, 8), 3, 13), Unsupported)
    assert isinstance(softmax_rows((1, 4, 16, 8), 2, 11), Unsupported)
    assert isinstance(softmax_rows((1, 10), 2, 13), Unsupported)


@pytest.mark.parametrize(("n", "sx"), [(10, 0.1), (1000, 0.3), (16, 0.4), (4, 0.01)])
def test_integer_softmax_is_within_one_step_of_the_float_one(n, sx):
    rng = np.random.default_rng(n)
    x = rng.integers(-128, 128, (50, n), dtype=np.int8)
    sy, zy = 1 / 256, -128
    (my,), (s,) = multipliers(np.array([1 / sy]), "test")
    got = softmax_rows_int8(x, exp_table(sx), n=n, my=int(my), sy=int(s), zy=zy).reshape(50, n)
    real = dequantize(x, sx, 0).astype(np.float64)
    p = np.exp(real - real.max(axis=1, keepdims=True))
    want = quantize_float((p / p.sum(axis=1, keepdims=True)).astype(np.float32), sy, zy)
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 1
    assert len(np.unique(got)) > 5


def classifier(opset: int = 17, axis: int = -1) -> onnx.ModelProto:
    """Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm -> Softmax on a [1, 3, 8, 8] image."""
    rng = np.random.default_rng(opset)

    def const(name: str, value) -> onnx.TensorProto:
        return numpy_helper.from_array(np.asarray(value, np.float32), name)

    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "w2", "b2"], ["z"], transB=1, name="fc"),
             helper.make_node("Softmax", ["z"], ["y"], axis=axis, name="softmax")]
    weights = [const("w1", rng.normal(0, 0.5, (16, 3, 3, 3))), const("w2", rng.normal(0, 0.5, (10, 16))),
               const("b2", rng.normal(0, 0.5, 10))]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])
    graph = helper.make_graph(nodes, "classifier", [x], [y], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize(("opset", "axis"), [(17, -1), (11, 1)])
def test_a_classifier_with_its_softmax_runs_on_the_cores(opset, axis, tmp_path):
    result = Design(classifier(opset, axis), "zcu104", profile_cpu=False).compile(tmp_path / "p", random_samples=8)
    kernels = [layer["kernel"] for core in result.design["cores"] for layer in core["layers"]]
    assert kernels[-1] == "softmax" and result.cpu_ops == [], (kernels, result.cpu_ops)
    check = run_csim(tmp_path / "p", samples=6)
    assert check.ok and all(c.bit_exact for c in check.cores)
    assert all(o.max_abs_diff_lsb is not None and o.max_abs_diff_lsb <= 1 for o in check.outputs)


@pytest.mark.parametrize(("rows", "n", "lanes"), [(1, 40, 4), (3, 16, 1), (2, 64, 8)])
def test_softmax_rtl_bit_exact_and_cycles(tmp_path, rows, n, lanes):
    from test_rtl_ops import assert_verilog_2005_clean, check_cycles, render_op, simulate_case

    rng = np.random.default_rng(n)
    (my,), (s,) = multipliers(np.array([256.0]), "test")
    config = {"SIZE": rows * n, "N": n, "MY": int(my), "SY": int(s), "ZY": -128, "LO": -128, "HI": 127}
    arrays = {"exp": exp_table(0.08)}
    inputs = [rng.integers(-128, 128, (3, rows * n), dtype=np.int8)]
    geometry = Geometry("softmax", rows, n, 1, stream_elements=rows * n, row=1, linebuffer_bytes=n,
                        shape={"SIZE": rows * n, "N": n, "ROWS": rows})
    result = simulate_case("softmax", (config, arrays, inputs, Folding(lanes, 1, 1)), tmp_path, geometry=geometry)
    check_cycles(result, f"softmax {rows}x{n}")
    assert_verilog_2005_clean(render_op("softmax", config, arrays, Folding(lanes, 1, 1), 100), tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize(("board", "family"), [("pynq-z2", "xc7"), ("zcu104", "xcup")])
def test_softmax_dsps_equal_yosys(tmp_path, board, family):
    """Each lane's e * r product (17 x 31 bits, unsigned) takes the DSPs the op library counts."""
    from fpgaplace.board.load import load_board
    from fpgaplace.codegen import rtl
    from fpgaplace.hw import KERNELS
    from fpgaplace.sim import yosys

    core = load_board(board).cores[0]
    (my,), (s,) = multipliers(np.array([256.0]), "test")
    config = {"SIZE": 32, "N": 16, "MY": int(my), "SY": int(s), "ZY": -128, "LO": -128, "HI": 127}
    folding = Folding(2, 1, 1)
    op = rtl.render_op("softmax", config, {"exp": exp_table(0.1)}, folding, 100)
    got = yosys.synthesize(rtl.RtlModule(op.module.top, {**rtl.library(), **op.module.files}), tmp_path, family,
                           dsp_only=True)
    geometry = Geometry("softmax", 2, 16, 1, stream_elements=32, row=1, linebuffer_bytes=16,
                        shape={"SIZE": 32, "N": 16, "ROWS": 2})
    assert got.dsp == KERNELS["softmax"].resources(geometry, folding, core).dsp > 0, got
