"""ConvTranspose (a DB text detector's upsampling head, an FPN's) as the conv kernel behind a
zero-inserting front: Conv -> ConvTranspose -> Conv on the cores, bit-exact in C simulation and
within 1 LSB of onnxruntime's QDQ model; the weight transform checked against onnxruntime's
float ConvTranspose."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from rtl_cases import conv_case
from test_rtl_ops import assert_verilog_2005_clean, check_cycles, simulate_case

from fpgaplace.codegen.rtl import render_op
from fpgaplace.flow.design import Design
from fpgaplace.hw import KERNELS, Folding, plan_op
from fpgaplace.hw.conv import conv_weights, transposed_window
from fpgaplace.hw.kernel import probe
from fpgaplace.model.frontend.load import from_model
from fpgaplace.model.quantize import calibration_inputs, quantize_model
from fpgaplace.sim.csim import run_csim
from fpgaplace.util.onnxrt import run_model

H, W = 5, 6


def conv_up_conv(seed: int = 0, kernel: int = 2, stride: int = 2, pads=(0, 0, 0, 0), groups: int = 1,
                 output_padding=(0, 0)) -> onnx.ModelProto:
    """Conv 3x3 (8 channels) -> ConvTranspose(kernel, stride, pads) to 6 channels -> Conv 1x1."""
    rng = np.random.default_rng(seed)
    n = helper.make_node
    ho = (H - 1) * stride + output_padding[0] + kernel - pads[0] - pads[2]
    wo = (W - 1) * stride + output_padding[1] + kernel - pads[1] - pads[3]
    nodes = [n("Conv", ["x", "w1"], ["c"], name="conv_in", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("ConvTranspose", ["c", "wt", "bt"], ["u"], name="up", kernel_shape=[kernel, kernel],
               strides=[stride, stride], pads=list(pads), group=groups, output_padding=list(output_padding)),
             n("Conv", ["u", "w2"], ["z"], name="conv_out", kernel_shape=[1, 1])]
    inits = [numpy_helper.from_array(rng.normal(0, 0.4, shape).astype(np.float32), name) for name, shape in
             (("w1", (8, 3, 3, 3)), ("wt", (8, 6 // groups, kernel, kernel)), ("bt", (6,)), ("w2", (4, 6, 1, 1)))]
    graph = helper.make_graph(nodes, "up", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, H, W])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 4, ho, wo])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize(("kernel", "stride", "pads", "groups", "output_padding"), [
    (2, 2, (0, 0, 0, 0), 1, (0, 0)), (3, 2, (1, 1, 1, 1), 2, (1, 1)), (4, 2, (1, 1, 1, 1), 1, (0, 0))])
def test_the_conv_over_zero_inserted_input_equals_conv_transpose(kernel, stride, pads, groups, output_padding):
    """The flipped, transposed weights slid (stride 1, pads k - 1 - p) over the input with s - 1 zeros
    between pixels equal onnxruntime's float ConvTranspose."""
    model = conv_up_conv(1, kernel, stride, pads, groups, output_padding)
    graph = from_model(model)
    up = graph.ops["up"]
    x = np.random.default_rng(2).normal(0, 1, (1, 8, H, W)).astype(np.float32)
    wt = numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == "wt"))
    bt = numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == "bt"))
    single = helper.make_model(helper.make_graph(
        [helper.make_node("ConvTranspose", ["c", "wt", "bt"], ["u"], **up.attrs)], "t",
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("u", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(wt, "wt"), numpy_helper.from_array(bt, "bt")]),
        opset_imports=[helper.make_opsetid("", 17)])
    expected = run_model(single, {"c": x}, ["u"])["u"]
    window, _, _ = transposed_window(up, x.shape, wt.shape, expected.shape)
    inserted = np.zeros((1, 8, window["H"], window["W"]), np.float32)
    inserted[:, :, ::stride, ::stride] = x
    conv = helper.make_model(helper.make_graph(
        [helper.make_node("Conv", ["i", "wc", "bt"], ["u"], group=groups, kernel_shape=[kernel, kernel],
                          pads=[window[p] for p in ("PT", "PL", "PB", "PR")])], "c",
        [helper.make_tensor_value_info("i", TensorProto.FLOAT, list(inserted.shape))],
        [helper.make_tensor_value_info("u", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(conv_weights(wt, groups), "wc"), numpy_helper.from_array(bt, "bt")]),
        opset_imports=[helper.make_opsetid("", 17)])
    np.testing.assert_allclose(run_model(conv, {"i": inserted}, ["u"])["u"], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("kernel", "stride", "pads", "groups", "output_padding"), [
    (2, 2, (0, 0, 0, 0), 1, (0, 0)), (4, 2, (1, 1, 1, 1), 1, (0, 0)), (3, 2, (1, 1, 1, 1), 1, (1, 1))])
def test_conv_transpose_runs_on_the_cores_bit_exact(tmp_path, kernel, stride, pads, groups, output_padding):
    model = conv_up_conv(kernel, kernel, stride, pads, groups, output_padding)
    result = Design(model, "zcu104", profile_cpu=False).compile(tmp_path / "project", random_samples=8)
    layers = [layer for core in result.design["cores"] for layer in core["layers"]]
    assert result.cpu_ops == [] and sum(layer["op"] == "up" for layer in layers) == 1, result.cpu_ops
    check = run_csim(tmp_path / "project", samples=4)
    assert check.ok and all(c.bit_exact for c in check.cores)
    assert all(o.max_abs_diff_lsb is not None and o.max_abs_diff_lsb <= 1 for o in check.outputs)


def test_a_conv_transpose_is_costed_on_its_zero_inserted_input():
    """The conv kernel's geometry on the zero-inserted input: its MACs count the zeros (the
    hardware multiplies them), its line buffer holds rows of the inserted input."""
    graph = from_model(quantize_model(conv_up_conv(), calibration_inputs(conv_up_conv(), random_samples=2)))
    kernel, g = plan_op(graph.ops["up"], graph)
    assert kernel is KERNELS["conv2d"]
    assert (g.shape["H"], g.shape["W"], g.shape["HO"], g.shape["WO"]) == (2 * H - 1, 2 * W - 1, 2 * H, 2 * W)
    assert g.macs == (2 * H) * (2 * W) * 6 * 2 * 2 * 8 and g.weights == 8 * 6 * 4


def test_a_conv_transpose_the_front_cannot_take_is_refused_with_its_reason():
    """Pads beyond kernel - 1 crop more than the zero-inserted conv's pads can (they would be negative)."""
    graph = from_model(conv_up_conv(kernel=2, stride=2, pads=(2, 2, 2, 2)))
    assert "exceed kernel - 1" in plan_op(graph.ops["up"], graph).reason


def transposed_case(xh: int, xw: int, cin: int, cout: int, k: int, s: int, p: int, folding: Folding, seed: int):
    """A random ConvTranspose(k, s, p) of an [xh, xw, cin] input as the conv2d layer the lowering
    makes (the conv over the zero-inserted input, UPSAMPLING members) and its geometry."""
    h, w = (xh - 1) * s + 1, (xw - 1) * s + 1
    config, arrays, _, _ = conv_case(h, w, cin, cout, k, 1, k - 1 - p, 1, folding, seed)
    config.update(UH=s, UW=s, XH=xh, XW=xw)
    inputs = np.random.default_rng(seed).integers(-128, 128, (3, xh * xw * cin), dtype=np.int8)
    shapes = {"x": (1, cin, xh, xw), "w": (cin, cout, k, k), "y": (1, cout, config["HO"], config["WO"])}
    geometry = probe(KERNELS["conv2d"], "ConvTranspose", {"strides": [s, s], "pads": [p] * 4}, ["x", "w"], shapes,
                     ("w",))
    return (config, arrays, [inputs], folding), geometry


@pytest.mark.parametrize(("k", "s", "p", "folding"), [(2, 2, 0, Folding(2, 4, 1)), (4, 2, 1, Folding(6, 8, 2))])
def test_transposed_conv_rtl_bit_exact_and_cycles(tmp_path, k, s, p, folding):
    """The zero-inserting front and the window unit in cocotb: bit-exact with the integer
    reference under backpressure, the steady cycles the conv's on the inserted input."""
    case, geometry = transposed_case(5, 6, 8, 6, k, s, p, folding, seed=k + s)
    result = simulate_case("conv2d", case, tmp_path, geometry=geometry)
    check_cycles(result, f"conv transpose k={k} s={s} {folding}")
    (tmp_path / "lint").mkdir()
    config, arrays, _, _ = case
    assert_verilog_2005_clean(render_op("conv2d", config, arrays, folding, 100), tmp_path / "lint")


def test_a_core_with_a_conv_transpose_is_bit_exact_in_rtl(tmp_path):
    """The whole core (conv, transposed conv, conv) in cocotb under backpressure: bit-exact, and its
    steady cycles within 10% of the cycle model's interval."""
    from fpgaplace.sim.rtl_project import simulate_project_rtl

    result = Design(conv_up_conv(3), "pynq-z2", profile_cpu=False).compile(tmp_path / "project", random_samples=4)
    assert result.cpu_ops == []
    rtl = simulate_project_rtl(tmp_path / "project", samples=2)
    assert rtl.ok and rtl.cores
    for core in rtl.cores:
        assert core.bit_exact and abs(core.cycles_measured - core.cycles_model) <= 0.1 * core.cycles_model, core


def db_head(seed: int = 0) -> onnx.ModelProto:
    """A DB text detector's probability head: Conv 3x3 -> ConvTranspose(2, 2) -> BatchNorm -> Relu
    -> ConvTranspose(2, 2) to one channel -> Sigmoid, on a [1, 3, 8, 8] input."""
    rng = np.random.default_rng(seed)
    n = helper.make_node
    nodes = [n("Conv", ["x", "w1"], ["c"], name="conv_in", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("ConvTranspose", ["c", "wt"], ["u"], name="up", kernel_shape=[2, 2], strides=[2, 2]),
             n("BatchNormalization", ["u", "g", "b", "m", "v"], ["bn"], name="bn"),
             n("Relu", ["bn"], ["r"], name="relu"),
             n("ConvTranspose", ["r", "wt2", "bt2"], ["u2"], name="up2", kernel_shape=[2, 2], strides=[2, 2]),
             n("Sigmoid", ["u2"], ["z"], name="sigmoid")]
    inits = [numpy_helper.from_array(rng.normal(0, 0.4, shape).astype(np.float32), name) for name, shape in
             (("w1", (8, 3, 3, 3)), ("wt", (8, 6, 2, 2)), ("wt2", (6, 1, 2, 2)), ("bt2", (1,)))]
    inits += [numpy_helper.from_array(value.astype(np.float32), name) for name, value in
              (("g", rng.uniform(0.5, 1.5, 6)), ("b", rng.normal(0, 0.2, 6)), ("m", rng.normal(0, 0.2, 6)),
               ("v", rng.uniform(0.5, 1.5, 6)))]
    graph = helper.make_graph(nodes, "db", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 1, 32, 32])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_batch_norm_after_a_conv_transpose_folds_into_its_weights():
    """Its scale multiplies the weight's output-channel axis (1 of [Cin, Cout, KH, KW]); onnxruntime
    gives the folded model the original's outputs."""
    from fpgaplace.model.passes.fold import fold_batchnorm

    model = db_head(1)
    folded, changes = fold_batchnorm(model)
    assert changes == 1 and "BatchNormalization" not in [node.op_type for node in folded.graph.node]
    x = np.random.default_rng(4).normal(0, 1, (1, 3, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(run_model(folded, {"x": x}, ["z"])["z"], run_model(model, {"x": x}, ["z"])["z"],
                               rtol=1e-5, atol=1e-6)


def test_a_db_head_runs_on_the_cores_bit_exact(tmp_path):
    result = Design(db_head(2), "zcu104", profile_cpu=False).compile(tmp_path / "project", random_samples=8)
    layers = [(layer["kernel"], layer["op"]) for core in result.design["cores"] for layer in core["layers"]]
    assert result.cpu_ops == [] and {("conv2d", "up"), ("conv2d", "up2")} <= set(layers), layers
    check = run_csim(tmp_path / "project", samples=4)
    assert check.ok and all(c.bit_exact for c in check.cores)
    assert all(o.max_abs_diff_lsb is not None and o.max_abs_diff_lsb <= 1 for o in check.outputs)
