"""The op-class registry: lookups, consistency, fused contrib ops, and QDQ chains in the fuse pass."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from fpgaplace import ops
from fpgaplace.frontend import FPGA_OPS, dot_product_macs, from_model, load_onnx
from fpgaplace.ir import Op
from fpgaplace.passes import fuse_activations, fuse_elementwise, fused_groups, optimize
from fpgaplace.split import random_inputs, relative_error, run_model

RNG = np.random.default_rng(11)
FLOAT = TensorProto.FLOAT

# The int8 kernels and the ops each implements, as the hardware spec lists them.
SPEC_KERNELS = {
    "conv2d": {"Conv", "FusedConv", "QLinearConv", "ConvInteger"},
    "dense": {"Gemm", "MatMul", "FusedMatMul", "QLinearMatMul", "MatMulInteger"},
    "maxpool": {"MaxPool"},
    "avgpool": {"AveragePool"},
    "globalavgpool": {"GlobalAveragePool"},
    "add": {"Add", "QLinearAdd"},
    "requant": {"Relu", "Clip"},
    "concat": {"Concat"},
    "reshape": {"Flatten", "Reshape", "Squeeze", "Unsqueeze", "Identity", "Dropout"},
    "batchnorm": {"BatchNormalization"},
    "quantize": {"QuantizeLinear"},
    "dequantize": {"DequantizeLinear"},
}
DOT_PRODUCT_FAMILIES = {"conv", "conv_transpose", "gemm", "matmul", "attention", "einsum"}


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
    ("FusedConv", ""), ("Attention", "ai.onnx"), ("TopK", ""), ("If", ""), ("NonMaxSuppression", ""),
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
        assert op_class.domains and op_class.domains <= {"", ops.CONTRIB_DOMAIN}


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
    assert {"Shape", "Size", "ConstantOfShape", "Range", "OneHot", "RandomNormal", "Constant"} <= host
    assert not host & FPGA_OPS


def test_kernels_are_the_spec_kernels_on_the_spec_ops():
    named = {c.kernel for c in ops.all_classes() if c.kernel is not None}
    assert named <= ops.KERNELS and named == set(SPEC_KERNELS)
    for kernel, names in SPEC_KERNELS.items():
        assert {c.name for c in ops.all_classes() if c.kernel == kernel} == names


def test_dot_products_are_exactly_the_dot_product_families():
    for op_class in ops.all_classes():
        assert op_class.dot_product == (op_class.family in DOT_PRODUCT_FAMILIES), op_class.name
        if op_class.dot_product:
            assert op_class.fpga and op_class.fusion is None and op_class.head


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
    proxy = ops.shape_proxy(fused)
    assert proxy is not None and proxy.op_type == "Conv" and proxy.domain == ""
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
