"""LRN on the cores: the quantizer puts Q/DQ around LRN (and the MaxPool after it), the integer
LRN (window sums of squares, a table of the power indexed by the sum as a small float) stays
within its stated error bound of the exact value, runs bit-exact in C simulation and RTL
simulation, and is within 1 LSB of onnxruntime's QDQ model."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_rtl_ops import assert_verilog_2005_clean, check_cycles, render_op, simulate_case

from fpgaplace.board.load import load_board
from fpgaplace.codegen import rtl
from fpgaplace.flow.design import Design
from fpgaplace.hw import KERNELS, plan_op
from fpgaplace.hw.geometry import Folding
from fpgaplace.hw.lowering import LayerContext
from fpgaplace.hw.lrn import ERROR_LSB, _bucket, design_table, lrn_reference, lrn_window, table_index
from fpgaplace.hw.qdq import qdq_index
from fpgaplace.model.frontend.load import from_model
from fpgaplace.model.quantize import calibration_inputs, quantize_model
from fpgaplace.model.zoo import light_model_path
from fpgaplace.sim import yosys
from fpgaplace.sim.csim import run_csim
from fpgaplace.sim.rtl_project import simulate_project_rtl
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.onnxrt import run_model

C, H, W = 10, 8, 8
CASES = {  # name: (LRN attributes, Relu before it)
    "alexnet-like": ({"size": 5, "alpha": 1.0, "beta": 0.75, "bias": 1.0}, True),
    "signed size 3": ({"size": 3, "alpha": 0.3, "beta": 0.5, "bias": 2.0}, False),
}


def conv_lrn_pool_conv(name: str, seed: int = 0) -> onnx.ModelProto:
    """Conv (-> Relu) -> LRN -> MaxPool 2x2 -> Conv on a [1, 4, H, W] input."""
    attrs, relu = CASES[name]
    rng = np.random.default_rng(seed)
    conv = helper.make_node("Conv", ["x", "w1"], ["c0"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    act = [helper.make_node("Relu", ["c0"], ["c1"])] if relu else []
    nodes = [conv, *act, helper.make_node("LRN", ["c1" if relu else "c0"], ["n"], **attrs),
             helper.make_node("MaxPool", ["n"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p", "w2"], ["z"], kernel_shape=[1, 1])]
    for i, node in enumerate(nodes):
        node.name = f"{node.op_type.lower()}_{i}"
    weights = [numpy_helper.from_array(rng.normal(0, 0.5, shape).astype(np.float32), wname)
               for wname, shape in (("w1", (C, 4, 3, 3)), ("w2", (6, C, 1, 1)))]
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, H, W])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 6, H // 2, W // 2])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_the_quantizer_puts_lrn_and_the_maxpool_after_it_in_int8():
    model = conv_lrn_pool_conv("alexnet-like")
    quantized = quantize_model(model, calibration_inputs(model, random_samples=4))
    index = qdq_index(quantized)
    for op_type in ("LRN", "MaxPool"):
        node = next(n for n in quantized.graph.node if n.op_type == op_type)
        assert index.int_source(node.input[0]) is not None, op_type
        assert index.int_sink(node.output[0]) is not None, op_type


def test_the_table_index_is_exact_below_its_mantissa_and_its_buckets_tile_the_sums():
    sums = np.arange(0, 5 * 255**2 + 1)
    for mbits in (4, 7):
        index = table_index(sums, mbits)
        assert np.array_equal(index[: 2 ** (mbits + 1)], sums[: 2 ** (mbits + 1)])
        assert np.all(np.diff(index) >= 0) and np.all(np.diff(index) <= 1)  # every entry used, in order
        first, last = _bucket(np.arange(index[-1] + 1), mbits)
        assert np.array_equal(first[index], np.minimum(first[index], sums)) and np.all(sums <= last[index])
        width = last - first + 1  # one sum, or a relative step of at most 2**-mbits
        assert np.all((width == 1) | (width <= first * 2.0**-mbits))


@pytest.mark.parametrize(("alpha", "beta", "bias", "size", "sx", "zx", "sy"), [
    (1.0, 0.75, 1.0, 5, 0.02, -128, 0.01), (1e-4, 0.75, 1.0, 5, 0.05, -128, 0.05), (0.3, 0.5, 2.0, 3, 0.03, 5, 0.02)])
def test_the_integer_lrn_is_within_its_bound_of_the_exact_value(alpha, beta, bias, size, sx, zx, sy):
    """The integer LRN against the ONNX formula in float64 on random int8 pixels: the output
    before clamping is within 0.5 (the rounding) + the table's bound of the exact y / sy."""
    table = design_table(alpha, beta, bias, size, sx, zx, sy)
    assert table.error_lsb <= ERROR_LSB
    before, after = lrn_window(size)
    zy = -128 if zx == -128 else 0  # non-negative outputs use the whole int8 range, as the quantizer's would
    config = {"C": 16, "BEFORE": before, "AFTER": after, "ZX": zx, "ZY": zy, "LO": -128, "HI": 127, "F": table.shift,
              "MBITS": table.mbits}
    q = np.random.default_rng(size).integers(-128, 128, (500, 16)).astype(np.int8)
    got = lrn_reference(q, table.values, config).reshape(q.shape).astype(np.float64) - zy
    x = (q.astype(np.float64) - zx) * sx
    padded = np.pad(x * x, ((0, 0), (before, after)))
    square_sum = sum(padded[:, k:k + 16] for k in range(size))
    exact = x / (bias + alpha / size * square_sum) ** beta / sy
    inside = (exact + zy > -128) & (exact + zy < 127)  # not clamped
    assert inside.mean() > 0.5
    assert np.max(np.abs(got - exact)[inside]) <= 0.5 + table.error_lsb + 1e-9


def lrn_against_onnxruntime(model: onnx.ModelProto, x: dict[str, np.ndarray]) -> list[tuple[int, float]]:
    """Per LRN of the QDQ ``model``: the largest difference (in output steps) between its integer
    layer (as lowered) on onnxruntime's int8 input and onnxruntime's int8 output, and the share equal."""
    graph = from_model(model)
    context = LayerContext(graph)
    found = []
    for op in (op for op in graph.ops.values() if op.op_type == "LRN"):
        kernel, geometry = plan_op(op, graph)
        layer = kernel.lower(context, op, geometry.shape)
        values = run_model(model, x, [layer.inputs[0], layer.output])
        q = values[layer.inputs[0]].transpose(0, 2, 3, 1)  # channels last, as the core streams it
        got = kernel.reference(layer.config, layer.arrays, [q]).reshape(q.shape).transpose(0, 3, 1, 2)
        diff = np.abs(got.astype(np.int16) - values[layer.output])
        found.append((int(diff.max()), float((diff == 0).mean())))
    return found


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_lowered_lrn_is_within_1_lsb_of_onnxruntime(name):
    model = conv_lrn_pool_conv(name, seed=2)
    quantized = quantize_model(model, calibration_inputs(model, random_samples=8))
    x = {"x": np.random.default_rng(9).normal(0, 1, (1, 4, H, W)).astype(np.float32)}
    ((worst, exact),) = lrn_against_onnxruntime(quantized, x)
    assert worst <= 1 and exact > 0.9, (worst, exact)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_conv_lrn_pool_conv_runs_on_the_cores_bit_exact(name, tmp_path):
    result = Design(conv_lrn_pool_conv(name, seed=len(name)), "zcu104", profile_cpu=False).compile(
        tmp_path / "project", random_samples=8)
    kernels = [layer["kernel"] for core in result.design["cores"] for layer in core["layers"]]
    assert "lrn" in kernels and result.cpu_ops == [], (kernels, result.cpu_ops)
    check = run_csim(tmp_path / "project", samples=4)
    assert check.ok and all(c.bit_exact for c in check.cores)
    assert all(o.max_abs_diff_lsb is not None and o.max_abs_diff_lsb <= 1 for o in check.outputs)


@pytest.mark.parametrize("model", [pytest.param("bvlc_alexnet", marks=pytest.mark.slow),  # ~30 s to quantize
                                   pytest.param("zfnet512", marks=pytest.mark.slow), "inception_v1"])
def test_light_zoo_lrns_and_the_max_pools_after_them_plan_on_the_cores(model):
    graph = Design(light_model_path(model), "zcu104", profile_cpu=False).quantized(random_samples=1).graph
    planned = {op.name: plan_op(op, graph) for op in graph.ops.values() if op.op_type in ("LRN", "MaxPool")}
    refused = {name: p.reason for name, p in planned.items() if not p}
    assert refused == {}
    assert sorted(p[0].name for p in planned.values()).count("lrn") == 2


@pytest.mark.parametrize(("name", "channels", "pixels", "folding"), [
    ("alexnet-like", 10, 16, Folding(2, 1, 1)), ("signed size 3", 8, 12, Folding(8, 1, 1))])
def test_lrn_rtl_bit_exact_and_cycles(tmp_path, name, channels, pixels, folding):
    attrs, relu = CASES[name]
    rng = np.random.default_rng(channels + pixels)
    zx = -128 if relu else 3
    table = design_table(attrs["alpha"], attrs["beta"], attrs["bias"], attrs["size"], 0.02, zx, 0.012)
    before, after = lrn_window(attrs["size"])
    config = {"SIZE": channels * pixels, "PIXELS": pixels, "C": channels, "BEFORE": before, "AFTER": after,
              "ZX": zx, "ZY": -4, "LO": -128, "HI": 127, "F": table.shift, "MBITS": table.mbits,
              "ENTRIES": int(table.values.size)}
    low = -128 if relu else -100
    inputs = [rng.integers(low, 101, (3, channels * pixels)).astype(np.int8)]
    geometry = KERNELS["lrn"].config_geometry(config)
    result = simulate_case("lrn", (config, {"table": table.values}, inputs, folding), tmp_path, geometry=geometry)
    check_cycles(result, f"lrn {name} {folding}")
    (tmp_path / "lint").mkdir()
    assert_verilog_2005_clean(render_op("lrn", config, {"table": table.values}, folding, 100), tmp_path / "lint")


@pytest.mark.slow
@pytest.mark.parametrize(("board", "family"), [("pynq-z2", "xc7"), ("zcu104", "xcup")])
@pytest.mark.parametrize("kernel", ["lrn", "shuffle"])
def test_yosys_dsps_equal_the_estimate(tmp_path, board, family, kernel):
    """yosys maps one DSP a lane for the LRN's d * T (the squares come from a ROM) and none for
    the shuffle (a permutation and a constant requantizer), as the op library counts them."""
    core = load_board(board).cores[0]
    folding = Folding(2, 1, 1)
    if kernel == "lrn":
        table = design_table(1.0, 0.75, 1.0, 5, 0.02, -128, 0.012)
        config = {"SIZE": 60, "PIXELS": 10, "C": 6, "BEFORE": 2, "AFTER": 2, "ZX": -128, "ZY": -4, "LO": -128,
                  "HI": 127, "F": table.shift, "MBITS": table.mbits, "ENTRIES": int(table.values.size)}
        arrays, geometry = {"table": table.values}, KERNELS["lrn"].config_geometry(config)
    else:
        config = {"SIZE": 60, "PIXELS": 10, "C": 6, "ZX": 3, "M": 3 << 28, "S": 30, "ZY": -2, "LO": -128, "HI": 127}
        arrays, geometry = {"perm": np.array([3, 0, 4, 1, 5, 2], np.int16)}, KERNELS["shuffle"].channels_geometry(
            (1, 6, 10, 1))
    op = rtl.render_op(kernel, config, arrays, folding, 100, macs_per_dsp=core.macs_per_dsp)
    got = yosys.synthesize(rtl.RtlModule(op.module.top, {**rtl.library(), **op.module.files}), tmp_path, family,
                           dsp_only=True)
    assert got.dsp == KERNELS[kernel].resources(geometry, folding, core).dsp == (2 if kernel == "lrn" else 0)


def test_a_core_with_an_lrn_is_bit_exact_in_rtl(tmp_path):
    """The whole core (conv, LRN, max pool, conv) in cocotb under backpressure: bit-exact, and its
    steady cycles within 10% of the cycle model's interval."""
    result = Design(conv_lrn_pool_conv("alexnet-like", seed=3), "pynq-z2", profile_cpu=False).compile(
        tmp_path / "project", random_samples=4)
    assert "lrn" in {layer["kernel"] for core in result.design["cores"] for layer in core["layers"]}
    rtl = simulate_project_rtl(tmp_path / "project", samples=2)
    assert rtl.ok and rtl.cores
    for core in rtl.cores:
        assert core.bit_exact and abs(core.cycles_measured - core.cycles_model) <= 0.1 * core.cycles_model, core


def test_bad_lrn_layers_are_one_line_errors():
    table = design_table(1.0, 0.75, 1.0, 5, 0.02, -128, 0.012)
    config = {"SIZE": 80, "PIXELS": 10, "C": 8, "BEFORE": 2, "AFTER": 2, "ZX": -128, "ZY": 0, "LO": -128, "HI": 127,
              "F": table.shift, "MBITS": table.mbits, "ENTRIES": int(table.values.size)}
    with pytest.raises(FpgaplaceError, match="PE=3 must divide C=8"):
        render_op("lrn", config, {"table": table.values}, Folding(3, 1, 1), 100)
    with pytest.raises(FpgaplaceError, match="table of values in"):
        render_op("lrn", config, {"table": np.array([-1, 2])}, Folding(2, 1, 1), 100)
    node = helper.make_node("LRN", ["x"], ["y"], name="lrn", size=3)
    values = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 8, 5]) for name in ("x", "y")]
    model = helper.make_model(helper.make_graph([node], "lrn3d", values[:1], values[1:]),
                              opset_imports=[helper.make_opsetid("", 17)])
    graph = from_model(model)
    assert plan_op(graph.ops["lrn"], graph).reason == "LRN of a tensor that is not 4-D (NCHW)"
