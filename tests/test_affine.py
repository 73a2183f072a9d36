"""The per-channel affine kernel (``fpgaplace.hw.affine``): a batch norm that is not folded into a
convolution (DenseNet's BN -> Relu -> Conv after a Concat) and a Mul of an activation by a constant.
The integer layer against onnxruntime on QDQ ops, its routing (folded batch norms stay free, a Mul
of two activations stays the binary kernel's), whole models compiled for zcu104 and C-simulated
(every core bit-exact with the integer reference, outputs within 1 LSB of onnxruntime), the RTL unit
in cocotb (bit-exact under gaps and backpressure, its cycles the op library's), its DSPs against yosys."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_rtl_ops import assert_verilog_2005_clean, check_cycles, simulate_case

from fpgaplace import load_board
from fpgaplace.codegen.rtl import RtlModule, library, render_op
from fpgaplace.flow.design import Design
from fpgaplace.hw import KERNELS, Folding, plan_op, reference
from fpgaplace.hw.affine import MULT_MAGNITUDE_BITS, WORD_BITS, fixed_point
from fpgaplace.hw.lowering import LayerContext
from fpgaplace.hw.memory import memory_blocks
from fpgaplace.hw.quant import quantize_multiplier
from fpgaplace.model.frontend.load import from_model
from fpgaplace.model.passes.fuse import fuse_activations, fuse_elementwise
from fpgaplace.model.passes.manager import optimize
from fpgaplace.model.zoo import light_model_path
from fpgaplace.sim import yosys
from fpgaplace.sim.csim import run_csim
from fpgaplace.sim.rtl_project import simulate_project_rtl
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.onnxrt import run_model

C, H, W = 16, 5, 6


# ---------------------------------------------------------------- the integer layer against onnxruntime


def _init(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


def _qdq_model(op_nodes: list, inits: list, x_shape: tuple[int, ...], relu: bool, seed: int) -> onnx.ModelProto:
    """int8 x -> DequantizeLinear -> ``op_nodes`` (reading ``x_f``, writing ``y_f``) [-> Relu] ->
    QuantizeLinear -> int8 y, with random activation scales and zero points."""
    rng = np.random.default_rng(seed)
    inits = [*inits, _init("x_scale", np.float32(rng.uniform(0.01, 0.05))),
             _init("x_zero", np.int8(rng.integers(-40, 40))),
             _init("y_scale", np.float32(rng.uniform(0.02, 0.06))),
             _init("y_zero", np.int8(-128 if relu else rng.integers(-40, 40)))]
    nodes = [helper.make_node("DequantizeLinear", ["x", "x_scale", "x_zero"], ["x_f"], name="dq_x"), *op_nodes]
    if relu:
        nodes.append(helper.make_node("Relu", ["y_f"], ["y_r"], name="relu"))
    nodes.append(helper.make_node("QuantizeLinear", ["y_r" if relu else "y_f", "y_scale", "y_zero"], ["y"], name="q_y"))
    graph = helper.make_graph(nodes, "qdq_affine", [helper.make_tensor_value_info("x", TensorProto.INT8, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.INT8, x_shape)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def qdq_batchnorm(negative: bool, quantized_params: bool, relu: bool, seed: int) -> onnx.ModelProto:
    """x -> BatchNormalization (float parameters, or as onnxruntime's quantizer writes them: an int8
    scale and an int32 bias behind DequantizeLinear) -> y."""
    rng = np.random.default_rng(seed)
    gamma = rng.uniform(0.5, 1.5, C) * (np.where(rng.random(C) < 0.5, -1, 1) if negative else 1)
    beta, mean, var = rng.uniform(-0.8, 0.8, C), rng.uniform(-0.5, 0.5, C), rng.uniform(0.3, 1.5, C)
    inits = [_init("mean", mean.astype(np.float32)), _init("var", var.astype(np.float32))]
    nodes = []
    if quantized_params:
        gs, bs = float(np.abs(gamma).max() / 127), 1e-4
        inits += [_init("g_q", np.rint(gamma / gs).astype(np.int8)), _init("g_s", np.float32(gs)),
                  _init("g_z", np.int8(0)), _init("b_q", np.rint(beta / bs).astype(np.int32)),
                  _init("b_s", np.float32(bs)), _init("b_z", np.int32(0))]
        nodes += [helper.make_node("DequantizeLinear", ["g_q", "g_s", "g_z"], ["gamma"], name="dq_g"),
                  helper.make_node("DequantizeLinear", ["b_q", "b_s", "b_z"], ["beta"], name="dq_b")]
    else:
        inits += [_init("gamma", gamma.astype(np.float32)), _init("beta", beta.astype(np.float32))]
    nodes.append(helper.make_node("BatchNormalization", ["x_f", "gamma", "beta", "mean", "var"], ["y_f"], name="op",
                                  epsilon=1e-3))
    return _qdq_model(nodes, inits, (1, C, H, W), relu, seed)


def qdq_mul(per_channel: bool, constant_first: bool, seed: int) -> onnx.ModelProto:
    """x -> Mul by DequantizeLinear of an int8 constant [C, 1, 1] (or a scalar) -> y."""
    rng = np.random.default_rng(seed)
    values = rng.integers(-127, 128, (C, 1, 1) if per_channel else (), dtype=np.int8)
    inits = [_init("k_q", values), _init("k_s", np.float32(rng.uniform(0.005, 0.02))), _init("k_z", np.int8(3))]
    operands = ["k", "x_f"] if constant_first else ["x_f", "k"]
    nodes = [helper.make_node("DequantizeLinear", ["k_q", "k_s", "k_z"], ["k"], name="dq_k"),
             helper.make_node("Mul", operands, ["y_f"], name="op")]
    return _qdq_model(nodes, inits, (1, C, H, W), relu=False, seed=seed)


QDQ_OPS = {
    "batch norm": lambda: qdq_batchnorm(False, False, False, 1),
    "batch norm, negative scales": lambda: qdq_batchnorm(True, False, False, 2),
    "batch norm, quantized parameters, relu": lambda: qdq_batchnorm(True, True, True, 3),
    "mul per channel": lambda: qdq_mul(True, False, 4),
    "mul per channel, constant first": lambda: qdq_mul(True, True, 5),
    "mul by a scalar": lambda: qdq_mul(False, False, 6),
}


def stream_order(t: np.ndarray) -> np.ndarray:
    """One NCHW sample in the cores' order (channels last), flat."""
    return t[0].transpose(1, 2, 0).reshape(-1)


@pytest.mark.parametrize("name", sorted(QDQ_OPS))
def test_integer_layer_within_one_lsb_of_onnxruntime(name):
    """The layer ``lower`` makes, run by the integer reference, against onnxruntime on the QDQ op
    (which computes the batch norm or the Mul in float32 and quantizes). A Mul by a scalar is a
    function of one int8 value, so ``plan_op`` gives it to the table kernel; its affine layer is
    checked all the same."""
    model = QDQ_OPS[name]()
    graph = from_model(model)
    op = graph.ops["op"]
    assert plan_op(op, graph)[0].name == ("table" if "scalar" in name else "affine")
    geometry = KERNELS["affine"].geometry(op, graph)
    layer = KERNELS["affine"].lower(LayerContext(graph), op, geometry.shape)
    assert layer.inputs == ["x"] and layer.config["C"] == (1 if "scalar" in name else C)
    x = np.random.default_rng(len(name)).integers(-128, 128, (1, C, H, W), dtype=np.int8)
    expected = stream_order(run_model(model, {"x": x})["y"])
    got = KERNELS["affine"].reference(layer.config, layer.arrays, [stream_order(x)])
    diff = np.abs(got.astype(int) - expected.astype(int))
    assert diff.max() <= 1, f"{name}: {int(diff.max())} LSB from onnxruntime"
    assert (diff == 0).mean() >= 0.98, f"{name}: only {(diff == 0).mean():.1%} equal to onnxruntime"
    assert len(np.unique(got)) > 30, "the case must spread the outputs"
    if "negative" in name or "quantized" in name:
        assert (layer.arrays["mult"] < 0).any(), "a negative scale is a negative multiplier"


def test_fixed_point_precision_and_the_offset_clamp():
    """The largest multiplier is normalized to [2**22, 2**23], each within half a unit of its real
    value; an offset far beyond the output's range is clamped where the output saturates anyway."""
    real = np.array([0.37, -1.9, 0.0, 1e-4])
    offsets = np.array([3.25, -1e9, 0.0, 1e9])
    m, b, s = fixed_point(real, offsets, "test")
    assert 2**22 <= np.abs(m).max() <= 2**MULT_MAGNITUDE_BITS
    assert s == quantize_multiplier(1.9)[1] - 8
    assert np.all(np.abs(m - real * 2.0**s) <= 0.5) and b[0] == round(3.25 * 2**s)
    assert b[1] < 0 < b[3] and abs(int(b[1])) < 2**47
    x = np.repeat(np.arange(-128, 128, dtype=np.int8), 4)  # every value in each of the four channels
    for zx in (-128, 127):  # the clamped channels saturate whatever x, even at the far zero points
        low = reference.affine(x, m, b, zx=zx, s=s, zy=127).reshape(-1, 4)[:, 1]
        high = reference.affine(x, m, b, zx=zx, s=s, zy=-128).reshape(-1, 4)[:, 3]
        assert np.all(low == -128) and np.all(high == 127)
    with pytest.raises(FpgaplaceError, match="op 'big': per-channel scale 8.39e\\+06 is too large"):
        fixed_point(np.array([2.0**23]), np.zeros(1), "op 'big'")


# ---------------------------------------------------------------- routing


def float_model(nodes: list, inits: list, x_shape: list[int], z_shape: list[int]) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "affine", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, z_shape)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _conv(name: str, x: str, y: str, cin: int, cout: int, k: int, seed: int) -> tuple[onnx.NodeProto, list]:
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k)).astype(np.float32)
    b = (rng.standard_normal(cout) * 0.1).astype(np.float32)
    return (helper.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [y], name=name, kernel_shape=[k, k],
                             pads=[k // 2] * 4), [_init(f"{name}_w", w), _init(f"{name}_b", b)])


def _batchnorm(name: str, x: str, y: str, c: int, negative: bool, seed: int) -> tuple[onnx.NodeProto, list]:
    rng = np.random.default_rng(seed)
    gamma = rng.uniform(0.5, 1.5, c) * (np.where(np.arange(c) % 3 == 0, -1, 1) if negative else 1)
    params = [gamma, rng.uniform(-0.5, 0.5, c), rng.uniform(-0.3, 0.3, c), rng.uniform(0.2, 1.0, c)]
    names = [f"{name}_{p}" for p in ("scale", "bias", "mean", "var")]
    return (helper.make_node("BatchNormalization", [x, *names], [y], name=name),
            [_init(n, v.astype(np.float32)) for n, v in zip(names, params, strict=True)])


def _concat_stem(c: int, size: int) -> tuple[list, list]:
    """x[1, 4, size, size] -> two convs (c/2 channels each, one with a Relu) -> Concat -> ``cat``."""
    left, w1 = _conv("left", "x", "l0", 4, c // 2, 3, 1)
    right, w2 = _conv("right", "x", "r", 4, c // 2, 1, 2)
    nodes = [left, helper.make_node("Relu", ["l0"], ["l"], name="left_relu"), right,
             helper.make_node("Concat", ["l", "r"], ["cat"], name="concat", axis=1)]
    return nodes, w1 + w2


def concat_bn_relu_conv(negative: bool = False, c: int = 8, size: int = 8) -> onnx.ModelProto:
    """DenseNet's pre-activation: Concat -> BatchNormalization -> Relu -> Conv 1x1."""
    nodes, inits = _concat_stem(c, size)
    bn, p = _batchnorm("norm", "cat", "n", c, negative, 7)
    head, w = _conv("head", "a", "z", c, c, 1, 8)
    return float_model([*nodes, bn, helper.make_node("Relu", ["n"], ["a"], name="norm_relu"), head], inits + p + w,
                       [1, 4, size, size], [1, c, size, size])


def concat_mul_add_relu_conv(c: int = 8, size: int = 8) -> onnx.ModelProto:
    """A batch norm as Mul and Add of per-channel constants (Caffe's Scale layer) after a Concat:
    Concat -> Mul [1, C, 1, 1] -> Add [C, 1, 1] -> Relu -> Conv 1x1."""
    nodes, inits = _concat_stem(c, size)
    rng = np.random.default_rng(9)
    inits += [_init("gain", rng.uniform(0.5, 2.0, (1, c, 1, 1)).astype(np.float32)),
              _init("shift", rng.uniform(-0.5, 0.5, (c, 1, 1)).astype(np.float32))]
    head, w = _conv("head", "a", "z", c, c, 1, 10)
    nodes += [helper.make_node("Mul", ["cat", "gain"], ["m"], name="scale_mul"),
              helper.make_node("Add", ["m", "shift"], ["s"], name="scale_add"),
              helper.make_node("Relu", ["s"], ["a"], name="scale_relu"), head]
    return float_model(nodes, inits + w, [1, 4, size, size], [1, c, size, size])


def conv_bn(shared: bool = False) -> onnx.ModelProto:
    """Conv -> BatchNormalization -> Relu: the batch norm folds into the conv (unless ``shared``:
    the conv's output is also added to the Relu's)."""
    conv, w = _conv("conv", "x", "c", 4, 8, 3, 11)
    bn, p = _batchnorm("norm", "c", "n", 8, False, 12)
    nodes = [conv, bn, helper.make_node("Relu", ["n"], ["r" if shared else "z"], name="relu")]
    if shared:
        nodes.append(helper.make_node("Add", ["r", "c"], ["z"], name="residual"))
    return float_model(nodes, w + p, [1, 4, 8, 8], [1, 8, 8, 8])


def test_unfolded_batch_norms_and_constant_muls_are_affine_and_folded_ones_free():
    """A batch norm after a Concat is this kernel's, one fused into its conv stays free; a Mul by a
    constant is this kernel's, a Mul of two activations the binary kernel's."""
    graph = from_model(concat_bn_relu_conv())
    assert plan_op(graph.ops["norm"], graph)[0].name == "affine"
    for passes in ([], [fuse_activations, fuse_elementwise]):  # as loaded, and annotated as fused
        folded = from_model(optimize(conv_bn(), passes)[0])
        assert plan_op(folded.ops["norm"], folded)[0].name == "batchnorm"
    shared = from_model(conv_bn(shared=True))  # the conv's output has a second reader: the BN cannot fold
    assert plan_op(shared.ops["norm"], shared)[0].name == "affine"
    graph = from_model(concat_mul_add_relu_conv())
    assert plan_op(graph.ops["scale_mul"], graph)[0].name == "affine"
    assert plan_op(graph.ops["scale_add"], graph)[0].name == "add"
    pair = helper.make_node("Mul", ["x", "x"], ["z"], name="square")
    graph = from_model(float_model([pair], [], [1, 4, 3, 3], [1, 4, 3, 3]))
    assert plan_op(graph.ops["square"], graph)[0].name == "mul"


def test_other_constants_stay_on_cpus_with_the_reason():
    along_w = helper.make_node("Mul", ["x", "k"], ["z"], name="along_w")
    graph = from_model(float_model([along_w], [_init("k", np.ones((1, 1, 1, 3), np.float32))], [1, 4, 3, 3],
                                   [1, 4, 3, 3]))
    reason = plan_op(graph.ops["along_w"], graph)
    assert "nor affine's: Mul by a constant that is not one value per channel" in str(reason), reason


# ---------------------------------------------------------------- cost


def test_cost_is_the_lane_rule_one_dsp_a_lane_and_the_rom():
    affine = KERNELS["affine"]
    g = affine.shape_geometry((1, 256, 14, 14))
    for fold in (Folding(8, 1, 1), Folding(256, 1, 2)):
        lanes = fold.pe * fold.mmv
        assert affine.cycles(g, fold) == 256 * 14 * 14 // lanes
        r = affine.resources(g, fold, load_board("zcu104").cores[0])
        words = 256 // lanes if lanes <= 256 else 1
        bram, _, lutram = memory_blocks(WORD_BITS * lanes, words)
        assert r.dsp == lanes and r.bram36 == bram and r.lut >= lutram
    assert affine.resources(g, Folding(4, 1, 1)).bram36 == 0  # 64 words of 4 lanes: LUTRAM
    assert affine.resources(g, Folding(2, 1, 1)).bram36 == 3  # 128 words of 2 x 73 bits: 3 BRAM36 of 72 x 512
    assert affine.fixed_bytes(g) == 256 * WORD_BITS // 8 + (256 * WORD_BITS % 8 > 0)


# ---------------------------------------------------------------- whole models on a core, C simulation

MODELS = {
    "concat bn relu": lambda: concat_bn_relu_conv(),
    "concat bn relu, negative scales": lambda: concat_bn_relu_conv(negative=True),
    "concat mul add relu": lambda: concat_mul_add_relu_conv(),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_models_on_a_core_bit_exact_and_within_one_lsb(name, tmp_path):
    result = Design(MODELS[name](), "zcu104", profile_cpu=False).compile(tmp_path / "project", random_samples=8)
    assert result.cpu_ops == []
    layers = [layer for core in result.design["cores"] for layer in core["layers"]]
    assert sum(layer["kernel"] == "affine" for layer in layers) == 1, [layer["kernel"] for layer in layers]
    tops = "".join(p.read_text() for p in (tmp_path / "project" / "cores").glob("*/*_top.cpp"))
    assert "fp::affine<" in tops
    check = run_csim(tmp_path / "project", samples=4)
    assert check.ok and check.cores and all(c.bit_exact for c in check.cores)
    assert all(o.max_abs_diff_lsb is not None and o.max_abs_diff_lsb <= 1 for o in check.outputs)


@pytest.mark.parametrize("name", ["concat bn relu, negative scales", "concat mul add relu"])
def test_cores_in_rtl_bit_exact_at_the_models_interval(name, tmp_path):
    """The whole core in cocotb: the affine stage among convs and the concat, bit-exact, at the
    interval the op library gives the core."""
    Design(MODELS[name](), "zcu104", profile_cpu=False).compile(tmp_path / "project", random_samples=4)
    assert not list((tmp_path / "project" / "rtl").glob("*/README.txt")), "every core has RTL"
    rtl = simulate_project_rtl(tmp_path / "project", samples=2)
    assert rtl.ok and rtl.cores
    for core in rtl.cores:
        assert core.bit_exact, core
        assert abs(core.cycles_measured - core.cycles_model) <= 0.10 * core.cycles_model, core


@pytest.mark.slow
def test_densenet121_plans_on_cores_and_its_affine_layers_equal_onnxruntime():
    """The onnx package's DenseNet-121 quantized for zcu104: its BN -> Mul -> Add blocks after each
    Concat fold into one batch norm (``fold_channel_affine``), every op has a kernel, and each of the
    62 affine layers, run by the integer reference on the int8 tensor onnxruntime feeds it, gives
    onnxruntime's int8 output (captured from the QDQ model) within 1 LSB."""
    graph = Design(light_model_path("densenet121"), "zcu104", profile_cpu=False).quantized(random_samples=1).graph
    plans = {name: plan_op(op, graph) for name, op in graph.ops.items()}
    refused = {graph.ops[n].op_type: p.reason for n, p in plans.items() if not isinstance(p, tuple)}
    assert not refused, refused
    affine = [n for n, p in plans.items() if p[0].name == "affine"]
    assert len(affine) == 62 and not any(op.op_type == "Mul" for op in graph.ops.values())
    context = LayerContext(graph)
    layers = [KERNELS["affine"].lower(context, graph.ops[n], plans[n][1].shape) for n in affine]
    model = onnx.ModelProto()
    model.CopyFrom(graph.model)
    captured = sorted({t for layer in layers for t in (*layer.inputs, layer.output)})
    model.graph.output.extend(helper.make_tensor_value_info(t, TensorProto.INT8, None) for t in captured)
    x = next(i for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer})
    shape = [d.dim_value for d in x.type.tensor_type.shape.dim]
    run = run_model(model, {x.name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)})
    diffs = np.concatenate([
        np.abs(KERNELS["affine"].reference(layer.config, layer.arrays, [stream_order(run[layer.inputs[0]])])
               .astype(int) - stream_order(run[layer.output]).astype(int)) for layer in layers])
    assert diffs.max() <= 1 and (diffs == 0).mean() >= 0.999, (int(diffs.max()), (diffs == 0).mean())


# ---------------------------------------------------------------- RTL


def affine_case(channels: int, shape: tuple[int, int], folding: Folding, seed: int, samples: int = 3):
    """A random layer of ``channels`` channels (1: a scalar Mul) over (H, W) pixels, some scales negative."""
    rng = np.random.default_rng(seed)
    size = channels * shape[0] * shape[1] if channels > 1 else 8 * shape[0] * shape[1]
    real = rng.uniform(0.2, 0.9, channels) * np.where(rng.random(channels) < 0.3, -1, 1)
    mult, offset, s = fixed_point(real, rng.uniform(-60, 60, channels), "case")
    zy = int(rng.integers(-20, 20))
    config = {"SIZE": size, "C": channels, "ZX": int(rng.integers(-60, 60)), "S": s, "ZY": zy, "LO": -120, "HI": 126}
    arrays = {"mult": mult.astype(np.int32), "offset": offset}
    return config, arrays, [rng.integers(-128, 128, (samples, size), dtype=np.int8)], folding


RTL_CASES = {  # channels, (H, W), folding
    "per channel, PE 4 of 16": (16, (4, 3), Folding(4, 1, 1)),
    "per channel, PE 1": (6, (2, 3), Folding(1, 1, 1)),
    "per channel, MMV 2": (8, (4, 4), Folding(8, 1, 2)),
    "one value": (1, (4, 4), Folding(4, 1, 1)),
}


def _geometry(channels: int, hw: tuple[int, int]):
    c = channels if channels > 1 else 8
    return KERNELS["affine"].shape_geometry((1, c, *hw), (channels, 1, 1) if channels > 1 else (1,))


@pytest.mark.parametrize("name", sorted(RTL_CASES))
def test_rtl_bit_exact_and_cycles(tmp_path, name):
    channels, hw, folding = RTL_CASES[name]
    result = simulate_case("affine", affine_case(channels, hw, folding, seed=len(name)), tmp_path,
                           geometry=_geometry(channels, hw))
    check_cycles(result, name)


@pytest.mark.parametrize("name", sorted(RTL_CASES))
def test_rendered_verilog_is_verilog_2005_clean(tmp_path, name):
    channels, hw, folding = RTL_CASES[name]
    config, arrays, _, _ = affine_case(channels, hw, folding, seed=1)
    assert_verilog_2005_clean(render_op("affine", config, arrays, folding, 100), tmp_path)


def test_rtl_of_a_folding_that_does_not_divide_is_a_one_line_error():
    config, arrays, _, _ = affine_case(6, (1, 1), Folding(4, 1, 1), seed=2)
    with pytest.raises(FpgaplaceError, match=r"rtl fp_affine: PE=4 x MMV=1 lanes and the C=6 channels must divide "
                                             r"SIZE=6"):
        render_op("affine", config, arrays, Folding(4, 1, 1), 100)
    with pytest.raises(FpgaplaceError, match=r"rtl fp_affine: multipliers must lie within"):
        render_op("affine", config, arrays | {"mult": arrays["mult"] * 4}, Folding(2, 1, 1), 100)


@pytest.mark.slow
@pytest.mark.parametrize(("board", "family"), [("pynq-z2", "xc7"), ("zcu104", "xcup")])
@pytest.mark.parametrize("channels", [16, 1])
def test_dsps_equal_yosys(tmp_path, board, family, channels):
    """synth_xilinx of the unit: each lane's (x - ZX) * M product on one DSP, as the op library counts."""
    folding = Folding(4, 1, 1)
    config, arrays, _, _ = affine_case(channels, (4, 4), folding, seed=3)
    op = render_op("affine", config, arrays, folding, 100)
    got = yosys.synthesize(RtlModule(op.module.top, {**library(), **op.module.files}), tmp_path, family, dsp_only=True)
    estimate = KERNELS["affine"].resources(_geometry(channels, (4, 4)), folding, load_board(board).cores[0])
    assert got.dsp == estimate.dsp == 4, (got, estimate)
