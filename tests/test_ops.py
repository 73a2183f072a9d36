"""The op-class registry: lookups, consistency, fused contrib ops, and QDQ chains in the fuse pass."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from fpgaplace.hw import KERNELS
from fpgaplace.model import ops
from fpgaplace.model.frontend.build import FPGA_OPS, dot_product_macs
from fpgaplace.model.frontend.load import from_model, load_onnx
from fpgaplace.model.ir import Op
from fpgaplace.model.passes import fuse_activations, fuse_elementwise, fused_groups, optimize
from fpgaplace.util.compare import relative_error
from fpgaplace.util.onnxrt import random_inputs, run_model

RNG = np.random.default_rng(11)
FLOAT = TensorProto.FLOAT

# The int8 kernels and the ops each implements, as the hardware spec lists them.
SPEC_KERNELS = {
    "conv2d": {"Conv", "FusedConv", "QLinearConv", "ConvInteger", "ConvTranspose"},
    "dense": {"Gemm", "MatMul", "FusedMatMul", "QLinearMatMul", "MatMulInteger"},
    "maxpool": {"MaxPool"},
    "avgpool": {"AveragePool"},
    "globalavgpool": {"GlobalAveragePool"},
    "add": {"Add", "QLinearAdd"},
    "requant": {"Relu", "Clip", "Quant", "BipolarQuant", "Trunc"},  # QONNX quantizers requantize
    "concat": {"Concat"},
    "softmax": {"Softmax"}, "lrn": {"LRN"}, "layernorm": {"LayerNormalization"},
    "slice": {"Split", "Slice"},
    "upsample": {"Resize", "Upsample"},
    "pad": {"Pad"},
    "embedding": {"Gather"},  # rows of a constant table of at most 256 (fpgaplace.hw.gather)
    "onehot": {"OneHot"},  # by comparison, a depth of at most 256 (fpgaplace.hw.onehot)
    "sub": {"Sub"}, "mul": {"Mul"}, "max": {"Max"}, "min": {"Min"},  # two activations (fpgaplace.hw.binary)
    "reshape": {"Flatten", "Reshape", "Squeeze", "Unsqueeze", "Identity", "Dropout"},
    "batchnorm": {"BatchNormalization"},
    "quantize": {"QuantizeLinear"},
    "dequantize": {"DequantizeLinear"},
}
DOT_PRODUCT_FAMILIES = {"conv", "conv_transpose", "gemm", "matmul", "attention", "einsum", "recurrent"}
HOST_ONLY_FAMILIES = {"recurrent", "control_flow", "host_shape", "random", "constant"}


def make_op(op_type: str, inputs: list[str], outputs: list[str], domain: str = "", **attrs) -> Op:
    return Op(name=op_type.lower(), op_type=op_type, domain=domain, attrs=attrs, inputs=inputs,
              outputs=outputs, index=0)


# ---- lookup ---------------------------------------------------------------------------------


def test_lookup_treats_both_default_domain_spellings_alike():
    conv = ops.lookup("Conv")
    assert conv is not None and conv.name == "Conv" and conv.family == "conv"
    assert ops.lookup("Conv", "ai.onnx") is conv
    assert ops.lookup("Conv", "") is conv


@pytest.mark.parametrize(("op_type", "domain"), [
    ("MyOp", ""), ("MyOp", "com.microsoft"), ("Conv", "com.example"), ("Conv", "com.microsoft"),
    ("FusedConv", ""), ("Attention", "ai.onnx"), ("TopK", ""), ("If", "com.microsoft"), ("NonMaxSuppression", ""),
])
def test_unknown_ops_and_wrong_domains_are_not_found(op_type, domain):
    assert ops.lookup(op_type, domain) is None
    assert not ops.is_dot_product(op_type, domain) and not ops.is_fpga(op_type, domain)
    assert ops.is_deterministic(op_type, domain) and ops.can_head(op_type, domain)
    assert not ops.can_fuse(op_type, domain, "elementwise")


def test_contrib_ops_are_found_in_their_domain_only():
    for name in ("FusedConv", "FusedMatMul", "Attention", "MultiHeadAttention", "QLinearAdd",
                 "SkipLayerNormalization", "FastGelu"):
        op_class = ops.lookup(name, ops.CONTRIB_DOMAIN)
        assert op_class is not None and op_class.domains == {ops.CONTRIB_DOMAIN}
    gelu = ops.lookup("Gelu", ops.CONTRIB_DOMAIN)
    assert gelu is ops.lookup("Gelu", "") and gelu.domains == {"", ops.CONTRIB_DOMAIN}


# ---- consistency ------------------------------------------------------------------------------


def test_every_class_is_registered_under_its_own_name_once():
    classes = ops.all_classes()
    assert len({c.name for c in classes}) == len(classes)
    for op_class in classes:
        some_domain = sorted(op_class.domains)[0]
        assert ops.lookup(op_class.name, some_domain) is op_class
        known = op_class.domains <= {"", ops.CONTRIB_DOMAIN} or op_class.domains == ops.QONNX_DOMAINS
        assert op_class.domains and known


@pytest.mark.parametrize("op_class", ops.all_classes(), ids=lambda c: c.name)
def test_every_mac_rule_tolerates_unknown_shapes(op_class):
    for inputs in ([], ["a"], ["a", "b"], ["a", "", "c"], ["a", "b", "c", "d", "e"]):
        op = make_op(op_class.name, inputs, ["y"], sorted(op_class.domains)[0])
        macs = op_class.mac_rule(op, {})
        assert isinstance(macs, int) and macs >= 0


def test_fpga_ops_have_mac_rules_and_host_ops_do_not_run_on_cores():
    fpga = [c for c in ops.all_classes() if c.fpga]
    assert fpga and all(callable(c.mac_rule) for c in fpga)
    assert FPGA_OPS == {c.name for c in fpga}
    host = {c.name for c in ops.all_classes() if c.family in ("host_shape", "random", "constant")}
    assert {"Shape", "Size", "ConstantOfShape", "Range", "RandomNormal", "Constant"} <= host
    assert not host & FPGA_OPS


def test_kernels_are_the_spec_kernels_on_the_spec_ops():
    named = {c.kernel for c in ops.all_classes() if c.kernel is not None}
    assert named <= set(KERNELS) and named == set(SPEC_KERNELS)
    for kernel, names in SPEC_KERNELS.items():
        assert {c.name for c in ops.all_classes() if c.kernel == kernel} == names


def test_dot_products_are_exactly_the_dot_product_families():
    for op_class in ops.all_classes():
        assert op_class.dot_product == (op_class.family in DOT_PRODUCT_FAMILIES), op_class.name
        if op_class.dot_product:
            assert op_class.fusion is None and op_class.head
        assert op_class.fpga == (op_class.family not in HOST_ONLY_FAMILIES), op_class.name


def test_fusion_flags():
    assert ops.can_fuse("Relu", "", "activation") and ops.can_fuse("Relu", "", "elementwise")
    assert not ops.can_fuse("Add", "", "activation") and ops.can_fuse("Add", "", "elementwise")
    for name in ("QuantizeLinear", "DequantizeLinear"):
        assert ops.lookup(name).fusion == "elementwise" and ops.lookup(name).family == "quantization"
    assert not ops.can_fuse("Conv", "", "elementwise") and not ops.can_fuse("Reshape", "", "elementwise")
    assert not ops.can_head("Reshape") and not ops.can_head("Constant") and not ops.can_head("Shape")
    assert ops.can_head("Conv") and ops.can_head("QuantizeLinear")


def test_random_ops_are_nondeterministic_and_the_rest_deterministic():
    random = {c.name for c in ops.all_classes() if not c.deterministic}
    assert random == {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                      "Multinomial", "Bernoulli"}
    assert all(not ops.is_fpga(name) for name in random)


# ---- MAC rules of the fused contrib ops ------------------------------------------------------------


def test_fused_conv_is_a_dot_product_counted_like_conv():
    shapes = {"x": (2, 8, 16, 16), "w": (4, 2, 3, 3), "b": (4,), "y": (2, 4, 14, 14)}
    conv = make_op("Conv", ["x", "w", "b"], ["y"], group=4)
    fused = make_op("FusedConv", ["x", "w", "b"], ["y"], ops.CONTRIB_DOMAIN, group=4, activation="Relu")
    assert ops.is_dot_product("FusedConv", ops.CONTRIB_DOMAIN) and ops.is_dot_product("Conv")
    assert ops.lookup("FusedConv", ops.CONTRIB_DOMAIN).family == ops.lookup("Conv").family
    assert ops.count_macs(fused, shapes) == ops.count_macs(conv, shapes) == 2 * 4 * 14 * 14 * 2 * 3 * 3


@pytest.mark.parametrize(("a", "attrs", "k"), [
    ((3, 6, 10), {}, 10),
    ((3, 10, 6), {"transA": 1}, 10),
    ((10, 3, 6), {"transA": 1, "transBatchA": 1}, 10),
])
def test_fused_matmul_counts_like_matmul_with_its_transposes(a, attrs, k):
    shapes = {"a": a, "b": (3, 10, 7), "y": (3, 6, 7)}
    fused = make_op("FusedMatMul", ["a", "b"], ["y"], ops.CONTRIB_DOMAIN, **attrs)
    plain = make_op("MatMul", ["a", "b"], ["y"])
    assert ops.count_macs(fused, shapes) == 3 * 6 * 7 * k
    assert ops.count_macs(plain, {**shapes, "a": (3, 6, 10)}) == 3 * 6 * 7 * k


def test_unknown_op_counts_its_output_elements():
    op = make_op("MyOp", ["x"], ["y", "z"], "com.example")
    assert ops.count_macs(op, {"x": (100,), "y": (2, 3), "z": (5,)}) == 11


def test_shape_proxy_only_for_contrib_ops():
    conv = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3])
    assert ops.shape_proxy(conv) is None
    fused = helper.make_node("FusedConv", ["x", "w", "b"], ["y"], domain=ops.CONTRIB_DOMAIN, name="f",
                             kernel_shape=[3, 3], activation="Relu")
    fused.attribute.append(onnx.AttributeProto(name="activation_params", type=onnx.AttributeProto.FLOATS))
    (proxy,) = ops.shape_proxy(fused)
    assert proxy.op_type == "Conv" and proxy.domain == ""
    assert list(proxy.input) == ["x", "w", "b"] and list(proxy.output) == ["y"]
    assert {a.name for a in proxy.attribute} == {"kernel_shape"}
    batched = helper.make_node("FusedMatMul", ["a", "b"], ["y"], domain=ops.CONTRIB_DOMAIN, transBatchA=1)
    assert ops.shape_proxy(batched) is None  # no default-domain node has its shape


# ---- the front end on models onnxruntime's optimizer fused ------------------------------------------


def _ort_optimized(model: onnx.ModelProto, path) -> onnx.ModelProto:
    """``model`` after onnxruntime's extended (CPU, layout-independent) graph optimizations."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(path)
    options.log_severity_level = 3
    ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return onnx.load(str(path))


def _conv_relu_matmul_model() -> onnx.ModelProto:
    """Conv -> Relu -> Flatten -> MatMul(W) -> MatMul(transposed input k) -> y."""
    inits = [
        numpy_helper.from_array(RNG.standard_normal((8, 4, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(RNG.standard_normal(8).astype(np.float32), "b"),
        numpy_helper.from_array(RNG.standard_normal((8 * 6 * 6, 12)).astype(np.float32), "m"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Flatten", ["r"], ["f"]),
        helper.make_node("MatMul", ["f", "m"], ["h"]),
        helper.make_node("Transpose", ["k"], ["kt"], perm=[1, 0]),
        helper.make_node("MatMul", ["h", "kt"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "fusable",
        [helper.make_tensor_value_info("x", FLOAT, [2, 4, 8, 8]), helper.make_tensor_value_info("k", FLOAT, [5, 12])],
        [helper.make_tensor_value_info("y", FLOAT, [2, 5])], initializer=inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_onnxruntime_fused_ops_get_the_macs_of_the_ops_they_replace(tmp_path):
    model = _conv_relu_matmul_model()
    fused_model = _ort_optimized(model, tmp_path / "fused.onnx")
    fused_types = {(n.op_type, n.domain) for n in fused_model.graph.node}
    assert {("FusedConv", "com.microsoft"), ("FusedMatMul", "com.microsoft")} <= fused_types
    assert not fused_model.graph.value_info  # onnxruntime saves no shapes: the front end infers them
    plain, fused = from_model(model), load_onnx(tmp_path / "fused.onnx")
    conv_macs = 2 * 8 * 6 * 6 * 4 * 3 * 3
    assert dot_product_macs(plain) == conv_macs + 2 * 288 * 12 + 2 * 5 * 12
    assert dot_product_macs(fused) == dot_product_macs(plain)
    fused_conv = next(op for op in fused.ops.values() if op.op_type == "FusedConv")
    assert fused_conv.macs == conv_macs and fused_conv.fpga_supported
    assert fused.tensors[fused_conv.outputs[0]].shape == (2, 8, 6, 6)
    assert not [note for note in fused.notes if "unknown" in note or "inference" in note]


# ---- QDQ chains in the fuse pass ---------------------------------------------------------------


def _qdq_conv_chain() -> onnx.ModelProto:
    """x -> Conv -> Q -> DQ -> Relu -> Q -> DQ -> y, with per-tensor scales and zero points."""
    inits = [
        numpy_helper.from_array(RNG.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(np.array(0.05, np.float32), "scale"),
        numpy_helper.from_array(np.array(3, np.int8), "zero"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3]),
        helper.make_node("QuantizeLinear", ["c", "scale", "zero"], ["cq"], name="q1"),
        helper.make_node("DequantizeLinear", ["cq", "scale", "zero"], ["cd"], name="dq1"),
        helper.make_node("Relu", ["cd"], ["r"], name="relu"),
        helper.make_node("QuantizeLinear", ["r", "scale", "zero"], ["rq"], name="q2"),
        helper.make_node("DequantizeLinear", ["rq", "scale", "zero"], ["y"], name="dq2"),
    ]
    graph = helper.make_graph(nodes, "qdq_chain", [helper.make_tensor_value_info("x", FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", FLOAT, [1, 4, 6, 6])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_qdq_chain_fuses_into_its_conv():
    model = _qdq_conv_chain()
    fused, changes = fuse_elementwise(model)
    assert changes == 5
    assert fused_groups(fused) == {"conv": ["q1", "dq1", "relu", "q2", "dq2"]}
    inputs = random_inputs(model)
    assert relative_error(run_model(fused, inputs)["y"], run_model(model, inputs)["y"]) == 0.0
    assert fuse_activations(fused)[1] == 0  # the activation pass keeps the elementwise groups


def test_qdq_chain_is_one_group_after_the_default_passes():
    optimized, _ = optimize(_qdq_conv_chain())
    assert fused_groups(optimized) == {"conv": ["q1", "dq1", "relu", "q2", "dq2"]}


def test_qdq_chain_read_twice_splits_the_group():
    model = _qdq_conv_chain()
    model.graph.output.append(helper.make_tensor_value_info("cd", FLOAT, [1, 4, 6, 6]))
    fused, _ = fuse_elementwise(model)
    assert fused_groups(fused) == {"conv": ["q1", "dq1"], "relu": ["q2", "dq2"]}


# ---- recurrent ops, from the ONNX operator spec's equations ---------------------------------------

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _spec_recurrent_macs(op_type: str, steps: int, batch: int, directions: int, input_size: int, hidden: int,
                         bias: bool, peephole: bool) -> int:
    """Per step, batch row and direction, from the spec's equations (f, g, h the activations):
    RNN  H = f(X W^T + H R^T + Wb + Rb)
    GRU  z = f(..), r = f(..), h' = g(X Wh^T + (r . H) Rh^T + ..), H = (1 - z) . h' + z . H
    LSTM i, f, o = f(.. + P . C), c = g(..), C = f . C + i . c, H = o . h(C)"""
    gates = GATES[op_type]
    products = gates * hidden * input_size + gates * hidden * hidden  # X W^T and H R^T per gate
    biases = 2 * gates * hidden if bias else 0  # + Wb + Rb
    if op_type == "RNN":
        rest = hidden  # f
    elif op_type == "GRU":
        rest = 3 * hidden + hidden + 3 * hidden  # f(z), f(r), g(h'); r . H; 1 - z, (1 - z) . h', + z . H
    else:
        rest = 4 * hidden + 2 * hidden + hidden + hidden  # gate activations; C; h(C); o . h(C)
        rest += 3 * hidden if peephole else 0  # P_i . C, P_f . C, P_o . C
    return steps * batch * directions * (products + biases + rest)


def _recurrent_model(op_type: str, steps: int, batch: int, input_size: int, hidden: int, direction: str,
                     layout: int, bias: bool, peephole: bool) -> onnx.ModelProto:
    gates, directions = GATES[op_type], 2 if direction == "bidirectional" else 1
    x_shape = [batch, steps, input_size] if layout else [steps, batch, input_size]
    inits = [numpy_helper.from_array(RNG.standard_normal((directions, gates * hidden, size)).astype(np.float32), name)
             for name, size in (("w", input_size), ("r", hidden))]
    inputs = ["x", "w", "r"]
    if bias or peephole:
        inputs.append("b" if bias else "")
        if bias:
            inits.append(numpy_helper.from_array(np.zeros((directions, 2 * gates * hidden), np.float32), "b"))
    if peephole:
        inputs += ["", "", "", "p"]
        inits.append(numpy_helper.from_array(np.ones((directions, 3 * hidden), np.float32), "p"))
    node = helper.make_node(op_type, inputs, ["y"], name="rnn", hidden_size=hidden, direction=direction,
                            **({"layout": layout} if layout else {}))
    graph = helper.make_graph([node], "recurrent", [helper.make_tensor_value_info("x", FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", FLOAT, ["d0", "d1", "d2", "d3"])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


@pytest.mark.parametrize(("op_type", "direction", "layout", "bias", "peephole"), [
    ("RNN", "forward", 0, True, False),
    ("RNN", "bidirectional", 1, False, False),
    ("GRU", "forward", 0, False, False),
    ("GRU", "reverse", 1, True, False),
    ("GRU", "bidirectional", 0, True, False),
    ("LSTM", "forward", 0, True, False),
    ("LSTM", "bidirectional", 0, True, True),
    ("LSTM", "reverse", 1, False, True),
])
def test_recurrent_macs_follow_the_spec_equations(op_type, direction, layout, bias, peephole):
    steps, batch, input_size, hidden = 7, 3, 10, 6
    model = _recurrent_model(op_type, steps, batch, input_size, hidden, direction, layout, bias, peephole)
    op = only_op(from_model(model))
    # the counts come from the shapes of an onnxruntime run: Y is [seq, dirs, batch, hidden] (layout 0)
    x = RNG.standard_normal([d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim])
    # onnxruntime runs layout 0 only; onnx's reference evaluator runs both
    (y,) = ReferenceEvaluator(model).run(None, {"x": x.astype(np.float32)}) if layout else \
        run_model(model, {"x": x.astype(np.float32)}).values()
    run_steps, run_dirs, run_batch, run_hidden = (y.shape[1], y.shape[2], y.shape[0], y.shape[3]) if layout \
        else y.shape
    assert (run_steps, run_batch, run_hidden) == (steps, batch, hidden)
    expected = _spec_recurrent_macs(op_type, run_steps, run_batch, run_dirs, input_size, run_hidden, bias, peephole)
    assert op.macs == expected
    assert not op.fpga_supported and ops.is_dot_product(op_type)


def only_op(graph):
    (op,) = graph.ops.values()
    return op


def test_dynamically_quantized_lstm_costs_like_the_float_lstm(tmp_path):
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = _recurrent_model("LSTM", 5, 2, 8, 16, "bidirectional", 0, True, False)
    onnx.save(model, tmp_path / "lstm.onnx")
    quantize_dynamic(tmp_path / "lstm.onnx", tmp_path / "lstm_int8.onnx", weight_type=QuantType.QInt8,
                     op_types_to_quantize=["LSTM"])
    quantized = load_onnx(tmp_path / "lstm_int8.onnx")
    (lstm,) = [op for op in quantized.ops.values() if op.op_type == "DynamicQuantizeLSTM"]
    assert lstm.macs == _spec_recurrent_macs("LSTM", 5, 2, 2, 8, 16, True, False)
    assert quantized.tensors[lstm.outputs[0]].shape == (5, 2, 2, 16)


# ---- Einsum ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("equation", "shapes", "expected"), [
    ("ij,jk->ik", [(4, 5), (5, 6)], 4 * 5 * 6),
    ("bij,bjk->bik", [(3, 4, 5), (3, 5, 6)], 3 * 4 * 5 * 6),
    ("...ij,...jk->...ik", [(2, 3, 4, 5), (1, 3, 5, 6)], 2 * 3 * 4 * 5 * 6),  # ellipsis broadcast to (2, 3)
    ("...ij,jk", [(2, 4, 5), (5, 6)], 2 * 4 * 5 * 6),  # implicit output
    ("ij,jk,kl->il", [(4, 5), (5, 6), (6, 7)], 2 * 4 * 5 * 6 * 7),  # two multiplies per index tuple
    ("ii->i", [(5, 5)], 5),  # diagonal
    ("ij->", [(4, 5)], 20),  # full sum: one per element
])
def test_einsum_counts_every_index_combination(equation, shapes, expected):
    inputs = [f"t{i}" for i in range(len(shapes))]
    feeds = {t: RNG.standard_normal(s).astype(np.float32) for t, s in zip(inputs, shapes, strict=True)}
    reference = np.einsum(equation, *feeds.values())
    graph = helper.make_graph(
        [helper.make_node("Einsum", inputs, ["y"], name="e", equation=equation)], "einsum",
        [helper.make_tensor_value_info(t, FLOAT, list(s)) for t, s in zip(inputs, shapes, strict=True)],
        [helper.make_tensor_value_info("y", FLOAT, [f"d{i}" for i in range(reference.ndim)])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    np.testing.assert_allclose(run_model(model, feeds)["y"], reference, rtol=1e-4, atol=1e-4)
    assert only_op(from_model(model)).macs == expected


# ---- QOperator models from onnxruntime's quantizer --------------------------------------------------


def _qoperator_source_model() -> onnx.ModelProto:
    """Conv, AveragePool, Add, Mul, Concat, GlobalAveragePool, Flatten, Gemm, MatMul, Softmax."""
    inits = [numpy_helper.from_array(RNG.standard_normal(s).astype(np.float32), n) for n, s in [
        ("w", (8, 3, 3, 3)), ("cb", (8,)), ("gw", (16, 10)), ("gb", (10,)), ("mw", (10, 12)), ("k", (1, 8, 1, 1)),
    ]]
    nodes = [
        helper.make_node("Conv", ["x", "w", "cb"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("AveragePool", ["c"], ["p"], name="avgpool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Add", ["p", "p"], ["a"], name="add"),
        helper.make_node("Mul", ["a", "k"], ["m"], name="mul"),
        helper.make_node("Concat", ["a", "m"], ["cat"], name="concat", axis=1),
        helper.make_node("GlobalAveragePool", ["cat"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "gw", "gb"], ["h"], name="gemm"),
        helper.make_node("MatMul", ["h", "mw"], ["mm"], name="matmul"),
        helper.make_node("Softmax", ["mm"], ["y"], name="softmax", axis=-1),
    ]
    graph = helper.make_graph(nodes, "qop", [helper.make_tensor_value_info("x", FLOAT, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", FLOAT, [1, 12])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


class _Calibration:
    def __init__(self) -> None:
        self._batches = iter([{"x": RNG.standard_normal((1, 3, 16, 16)).astype(np.float32)} for _ in range(4)])

    def get_next(self):
        return next(self._batches, None)


QOPERATOR_OF = {"conv": "QLinearConv", "avgpool": "QLinearAveragePool", "add": "QLinearAdd", "mul": "QLinearMul",
                "concat": "QLinearConcat", "gap": "QLinearGlobalAveragePool", "gemm": "QGemm",
                "matmul": "QLinearMatMul", "softmax": "QLinearSoftmax"}


def test_qoperator_ops_onnxruntime_emits_get_the_macs_of_their_float_ops(tmp_path):
    from onnxruntime.quantization import QuantFormat, quantize_static

    source = _qoperator_source_model()
    onnx.save(source, tmp_path / "float.onnx")
    quantize_static(tmp_path / "float.onnx", tmp_path / "int8.onnx", _Calibration(), quant_format=QuantFormat.QOperator)
    float_graph, int8_graph = from_model(source), load_onnx(tmp_path / "int8.onnx")
    by_type = {op.op_type: op for op in int8_graph.ops.values()}
    assert set(QOPERATOR_OF.values()) <= set(by_type), sorted(by_type)
    for float_name, q_type in QOPERATOR_OF.items():
        q_op = by_type[q_type]
        float_macs = float_graph.ops[float_name].macs
        assert q_op.macs > 0 and (q_op.macs == float_macs or q_type == "QLinearConcat"), q_type
        float_output = float_graph.ops[float_name].outputs[0]
        assert int8_graph.tensors[q_op.outputs[0]].shape == float_graph.tensors[float_output].shape
    assert by_type["QGemm"].macs == 1 * 16 * 10 and ops.is_dot_product("QGemm", ops.CONTRIB_DOMAIN)
    assert by_type["QLinearConv"].macs == 8 * 16 * 16 * 3 * 3 * 3
    assert by_type["QLinearConcat"].macs == 16 * 8 * 8  # one requantization per output element
    assert dot_product_macs(int8_graph) == dot_product_macs(float_graph)
    assert not [note for note in int8_graph.notes if "unknown" in note]


def test_channels_last_qoperator_ops_of_onnxruntimes_layout_transformer_keep_their_macs(tmp_path):
    from onnxruntime.quantization import QuantFormat, quantize_static

    onnx.save(_qoperator_source_model(), tmp_path / "float.onnx")
    quantize_static(tmp_path / "float.onnx", tmp_path / "int8.onnx", _Calibration(), quant_format=QuantFormat.QOperator)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL  # NHWC layout transformer
    options.optimized_model_filepath = str(tmp_path / "nhwc.onnx")
    options.log_severity_level = 3
    ort.InferenceSession(str(tmp_path / "int8.onnx"), options, providers=["CPUExecutionProvider"])
    nhwc_model = onnx.load(tmp_path / "nhwc.onnx")
    conv = next(n for n in nhwc_model.graph.node if n.op_type == "QLinearConv")
    assert conv.domain == ops.CONTRIB_DOMAIN
    assert any(a.name == "channels_last" and helper.get_attribute_value(a) == 1 for a in conv.attribute)
    plain, nhwc = load_onnx(tmp_path / "int8.onnx"), load_onnx(tmp_path / "nhwc.onnx")
    macs_by_type = {op.op_type: op.macs for op in plain.ops.values() if op.op_type.startswith("Q")}
    assert {op.op_type: op.macs for op in nhwc.ops.values() if op.op_type.startswith("Q")} == macs_by_type
    nhwc_conv = next(op for op in nhwc.ops.values() if op.op_type == "QLinearConv")
    assert nhwc.tensors[nhwc_conv.outputs[0]].shape == (1, 16, 16, 8)  # NHWC
    assert not any("__channels_first" in name for name in nhwc.tensors)  # the proxies' tensors stay out


def test_qgemm_with_a_float_output_still_counts_m_n_k():
    op = make_op("QGemm", ["a", "as", "az", "b", "bs", "bz", "c"], ["y"], ops.CONTRIB_DOMAIN, transB=1)
    assert ops.count_macs(op, {"a": (4, 9), "b": (5, 9)}) == 4 * 5 * 9
    node = helper.make_node("QGemm", ["a", "as", "az", "b", "bs", "bz"], ["y"], domain=ops.CONTRIB_DOMAIN)
    assert ops.shape_proxy(node) is None  # float output: no default-domain node has that type


def weight_of(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _save_dynamic_quantized(model: onnx.ModelProto, folder) -> onnx.ModelProto:
    """``model`` through onnxruntime's dynamic quantizer (int8 weights)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    onnx.save(model, folder / "float.onnx")
    quantize_dynamic(folder / "float.onnx", folder / "dynamic.onnx", weight_type=QuantType.QInt8)
    return onnx.load(folder / "dynamic.onnx")


def test_dynamically_quantized_matmul_in_every_form_costs_m_n_k(tmp_path):
    batch, rows, k, n = 2, 8, 16, 10
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "mm",
                              [helper.make_tensor_value_info("x", FLOAT, [batch, rows, k])],
                              [helper.make_tensor_value_info("y", FLOAT, [batch, rows, n])],
                              initializer=[numpy_helper.from_array(weight_of(k, n), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    dynamic = _save_dynamic_quantized(model, tmp_path)
    fused = _ort_optimized(dynamic, tmp_path / "fused.onnx")
    assert "MatMulInteger" in {n.op_type for n in dynamic.graph.node}
    assert "DynamicQuantizeMatMul" in {n.op_type for n in fused.graph.node}
    for form in (model, dynamic, fused):
        assert dot_product_macs(from_model(form)) == batch * rows * n * k


def test_qattention_costs_like_the_attention_it_quantizes(tmp_path):
    b, s, h, heads = 2, 8, 16, 4
    inits = [numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32), name)
             for name, shape in (("w", (h, 3 * h)), ("bias", (3 * h,)))]
    graph = helper.make_graph(
        [helper.make_node("Attention", ["x", "w", "bias"], ["y"], name="attention", domain=ops.CONTRIB_DOMAIN,
                          num_heads=heads)], "attention",
        [helper.make_tensor_value_info("x", FLOAT, [b, s, h])], [helper.make_tensor_value_info("y", FLOAT, [b, s, h])],
        initializer=inits)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(ops.CONTRIB_DOMAIN, 1)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=8)
    # the contrib op's definition: x W + bias, Q K^T per head, softmax, P V per head
    expected = b * s * h * 3 * h + b * heads * s * s * (h // heads) * 2 + 3 * b * heads * s * s
    dynamic = from_model(_save_dynamic_quantized(model, tmp_path))
    (qattention,) = [op for op in dynamic.ops.values() if op.op_type == "QAttention"]
    assert qattention.macs == expected == only_op(from_model(model)).macs


def test_control_flow_costs_tolerate_malformed_nodes():
    a, b = (helper.make_tensor_value_info(name, FLOAT, [3]) for name in "ab")
    body = helper.make_graph([helper.make_node("Relu", ["a"], ["b"])], "body", [a], [b])
    too_many = make_op("Scan", ["x"], ["y"], body=body, num_scan_inputs=5)
    cost = ops.control_flow_cost(too_many, ops.Scope({"x": (4, 3)}))
    assert cost.macs == 3 and "scan length unknown" in cost.note  # the body once, from its declared shapes
    negative = make_op("Loop", ["m", "", "x"], ["y"], body=body)
    scope = ops.Scope({"x": (3,)}, values={"m": np.array(-4, np.int64)})
    assert ops.control_flow_cost(negative, scope).macs == 0  # a negative trip count runs no trip
    assert ops.control_flow_cost(make_op("If", ["c"], ["y"]), ops.Scope({})).macs == 0  # no branches
    with pytest.raises(ValueError, match="not a control-flow op"):
        ops.control_flow_cost(make_op("Relu", ["x"], ["y"]), ops.Scope({}))
