"""ONNX front end: MAC formulas, real architectures, batch binding, export equivalence, bad input."""

from __future__ import annotations

import collections
import math
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from fpgaplace.hw import plan_op
from fpgaplace.model import zoo as models
from fpgaplace.model.frontend.bind import FixedBatchError
from fpgaplace.model.frontend.build import FPGA_OPS, dot_product_macs
from fpgaplace.model.frontend.load import from_model, load_onnx
from fpgaplace.model.ir import OpGraph
from fpgaplace.util.errors import FpgaplaceError

RNG = np.random.default_rng(7)


# ---- helpers ------------------------------------------------------------------------------


def one_node_model(
    op_type: str,
    x_shape: list[int],
    weights: dict[str, np.ndarray],
    opset: int = 17,
    domain: str = "",
    extra_inputs: dict[str, list[int]] | None = None,
    **attrs,
) -> onnx.ModelProto:
    """x (+ extra graph inputs) and initializers -> one node -> y (of x's rank; dims left to inference)."""
    extra_inputs = extra_inputs or {}
    inputs = ["x", *extra_inputs, *weights]
    node = helper.make_node(op_type, inputs, ["y"], name="the_op", domain=domain, **attrs)
    graph = helper.make_graph(
        [node],
        "one_node",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in {"x": x_shape, **extra_inputs}.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [f"y{i}" for i in range(len(x_shape))])],
        initializer=[numpy_helper.from_array(w, n) for n, w in weights.items()],
    )
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return helper.make_model(graph, opset_imports=opsets, ir_version=8)


def weight(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def only_op(graph: OpGraph):
    (op,) = graph.ops.values()
    return op


def run(model: onnx.ModelProto, feeds: dict[str, np.ndarray], outputs: list[str] | None = None) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(outputs, feeds)


def random_feeds(graph: OpGraph, names: list[str]) -> dict[str, np.ndarray]:
    return {n: RNG.standard_normal(graph.tensors[n].shape).astype(graph.tensors[n].dtype) for n in names}


# ---- MAC formulas ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cin", "cout", "k", "group", "stride", "dilation"),
    [
        (8, 16, 3, 1, 1, 1),  # plain
        (8, 16, 3, 4, 1, 1),  # grouped
        (12, 12, 3, 12, 2, 1),  # depthwise, strided
        (8, 8, 3, 1, 1, 2),  # dilated
        (6, 4, 5, 2, 2, 3),  # grouped + strided + dilated
    ],
)
def test_conv_macs_match_hand_formula(cin, cout, k, group, stride, dilation):
    n, h, w = 2, 17, 15
    model = one_node_model(
        "Conv",
        [n, cin, h, w],
        {"w": weight(cout, cin // group, k, k)},
        kernel_shape=[k, k],
        group=group,
        strides=[stride, stride],
        dilations=[dilation, dilation],
        pads=[1, 1, 1, 1],
    )
    graph = from_model(model)
    effective = dilation * (k - 1) + 1
    h_out = (h + 2 - effective) // stride + 1
    w_out = (w + 2 - effective) // stride + 1
    assert graph.tensors["y"].shape == (n, cout, h_out, w_out)
    assert only_op(graph).macs == n * cout * h_out * w_out * (cin // group) * k * k
    assert only_op(graph).param_bytes == cout * (cin // group) * k * k * 4


def test_conv_transpose_macs():
    n, cin, cout, group, k, h = 1, 8, 6, 2, 3, 5
    model = one_node_model(
        "ConvTranspose", [n, cin, h, h], {"w": weight(cin, cout // group, k, k)}, group=group, strides=[2, 2]
    )
    op = only_op(from_model(model))
    assert op.macs == n * cin * h * h * (cout // group) * k * k


@pytest.mark.parametrize("trans_a", [0, 1])
def test_gemm_macs(trans_a):
    m, k, n = 5, 12, 7
    a_shape = [k, m] if trans_a else [m, k]
    model = one_node_model("Gemm", a_shape, {"b": weight(n, k), "c": weight(n)}, transA=trans_a, transB=1)
    graph = from_model(model)
    assert graph.tensors["y"].shape == (m, n)
    assert only_op(graph).macs == m * n * k


def test_batched_broadcast_matmul_macs():
    batch, heads, m, k, n = 3, 4, 6, 10, 9
    model = one_node_model("MatMul", [batch, heads, m, k], {"w": weight(k, n)})  # weight broadcast over batch dims
    op = only_op(from_model(model))
    assert op.macs == batch * heads * m * n * k
    model = one_node_model("MatMul", [batch, 1, m, k], {}, extra_inputs={"b": [heads, k, n]})
    op = only_op(from_model(model))
    assert op.macs == batch * heads * m * n * k


def test_pooling_elementwise_softmax_layernorm_macs():
    x = [2, 8, 12, 12]
    numel = math.prod(x)
    pool = only_op(from_model(one_node_model("MaxPool", x, {}, kernel_shape=[3, 3], strides=[3, 3])))
    assert pool.macs == 2 * 8 * 4 * 4 * 9
    gap = only_op(from_model(one_node_model("GlobalAveragePool", x, {})))
    assert gap.macs == numel
    relu = only_op(from_model(one_node_model("Relu", x, {})))
    assert relu.macs == numel
    add = only_op(from_model(one_node_model("Add", x, {"b": weight(8, 1, 1)})))
    assert add.macs == numel
    softmax = only_op(from_model(one_node_model("Softmax", x, {}, axis=-1)))
    assert softmax.macs == 3 * numel
    ln = only_op(from_model(one_node_model("LayerNormalization", x, {"g": weight(12), "b": weight(12)}, axis=-1)))
    assert ln.macs == 4 * numel


def test_einsum_and_contrib_attention_macs():
    b, s, h = 2, 8, 16
    einsum = only_op(from_model(one_node_model("Einsum", [b, s, h], {"w": weight(h, 3)}, equation="bsh,hk->bsk")))
    assert einsum.macs == b * s * h * 3
    heads = 4
    model = one_node_model(
        "Attention", [b, s, h], {"w": weight(h, 3 * h), "bias": weight(3 * h)}, domain="com.microsoft", num_heads=heads
    )
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", TensorProto.FLOAT, [b, s, h]))
    graph = from_model(model)
    op = only_op(graph)
    assert op.macs == b * s * h * 3 * h + 2 * b * s * s * h + 3 * b * heads * s * s
    assert not plan_op(op, graph)  # the op library has no attention kernel: it runs on CPUs


def test_quantized_conv_variants_count_as_conv():
    n, cin, cout, k, hw = 1, 4, 8, 3, 10
    conv_macs = n * cout * (hw - k + 1) ** 2 * cin * k * k
    w_int8 = RNG.integers(-100, 100, (cout, cin, k, k)).astype(np.int8)
    # QDQ: DequantizeLinear(int8 weight) -> Conv; the weight's DQ folds into a parameter.
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xf"]),
        helper.make_node("DequantizeLinear", ["wq", "sw"], ["wf"]),
        helper.make_node("Conv", ["xf", "wf"], ["y"], kernel_shape=[k, k]),
    ]
    inits = [
        numpy_helper.from_array(np.array(0.05, np.float32), "sx"),
        numpy_helper.from_array(np.array(0, np.int8), "zx"),
        numpy_helper.from_array(w_int8, "wq"),
        numpy_helper.from_array(np.array(0.01, np.float32), "sw"),
    ]
    graph = helper.make_graph(
        nodes,
        "qdq",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, cin, hw, hw])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "c", "h", "w"])],
        initializer=inits,
    )
    qdq = from_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8))
    assert [op.op_type for op in qdq.ops.values()] == ["QuantizeLinear", "DequantizeLinear", "Conv"]
    conv = qdq.ops[qdq.producer("y")]
    assert conv.macs == conv_macs
    assert conv.param_bytes == w_int8.nbytes  # stored as int8, not as the float it dequantizes to
    assert "wf" in qdq.params

    conv_int = one_node_model("ConvInteger", [n, cin, hw, hw], {"w": w_int8})
    conv_int.graph.input[0].type.tensor_type.elem_type = TensorProto.INT8
    conv_int.graph.output[0].type.tensor_type.elem_type = TensorProto.INT32
    assert only_op(from_model(conv_int)).macs == conv_macs


# ---- real architectures ------------------------------------------------------------------


def test_resnet50_macs_within_one_percent_of_published(resnet50_graph):
    published = 4.09e9
    conv_fc = dot_product_macs(resnet50_graph)
    print(f"ResNet-50: total {resnet50_graph.total_macs / 1e9:.4f} G, conv+fc {conv_fc / 1e9:.4f} G")
    assert abs(resnet50_graph.total_macs - published) / published < 0.01
    assert abs(conv_fc - published) / published < 0.01


def test_vgg19_macs_within_one_percent_of_published(vgg19_graph):
    published = 19.6e9
    print(f"VGG-19: total {vgg19_graph.total_macs / 1e9:.4f} G, conv+fc {dot_product_macs(vgg19_graph) / 1e9:.4f} G")
    assert abs(vgg19_graph.total_macs - published) / published < 0.01
    assert abs(dot_product_macs(vgg19_graph) - published) / published < 0.01


@pytest.mark.parametrize("name", models.LIGHT_MODELS)
def test_light_model_loads_and_op_counts_match(name):
    path = models.light_model_path(name)
    source = onnx.load(str(path))
    graph = load_onnx(path)
    onnx_counts = collections.Counter(node.op_type for node in source.graph.node)
    ours = collections.Counter(op.op_type for op in graph.ops.values())
    folded = collections.Counter(node.op_type for node in graph._source.constant_nodes)
    assert ours + folded == onnx_counts
    assert ours["Conv"] == onnx_counts["Conv"] > 0  # compute ops are never folded away
    assert all(op.fpga_supported and plan_op(op, graph) for op in graph.ops.values() if op.op_type == "Conv")
    assert all(op.fpga_supported for op in graph.ops.values() if plan_op(op, graph))  # a core runs only FPGA classes
    assert graph.inputs and all(graph.tensors[t].shape == (1, 3, 224, 224) for t in graph.inputs)
    onnx.checker.check_model(graph.to_onnx())


HEAVY = {"vgg19", "zfnet512", "bvlc_alexnet"}  # several GMACs per run on the CPU


def _light_params():
    return [pytest.param(n, marks=pytest.mark.slow) if n in HEAVY else n for n in models.LIGHT_MODELS]


def _with_outputs(model: onnx.ModelProto, graph: OpGraph, names: list[str]) -> onnx.ModelProto:
    """The original model also returning intermediate tensors ``names``."""
    extended = onnx.ModelProto()
    extended.CopyFrom(model)
    have = {o.name for o in extended.graph.output}
    for name in names:
        if name not in have:
            info = graph.tensors[name]
            extended.graph.output.append(helper.make_tensor_value_info(name, info.elem_type, list(info.shape)))
    return extended


def _close(actual: np.ndarray, expected: np.ndarray) -> None:
    scale = max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5 * scale)


@pytest.mark.parametrize("name", _light_params())
def test_light_model_export_and_subgraph_match_onnxruntime(name):
    path = models.light_model_path(name)
    graph = load_onnx(path)
    original = onnx.load(str(path))
    feeds = random_feeds(graph, graph.inputs)
    order = graph.topological_order()
    middle = order[len(order) // 3 : 2 * len(order) // 3]
    sub = graph.subgraph(middle, name=f"{name}_middle")
    wanted = list(dict.fromkeys([*graph.outputs, *sub.inputs, *sub.outputs]))
    values = dict(zip(wanted, run(_with_outputs(original, graph, wanted), feeds, wanted), strict=True))

    for got, out in zip(run(graph.to_onnx(), feeds), graph.outputs, strict=True):
        _close(got, values[out])

    sub_model = sub.to_onnx()
    onnx.checker.check_model(sub_model)
    assert sub.outputs and set(sub.ops) == set(middle)
    got = run(sub_model, {t: values[t] for t in sub.inputs})
    for value, out in zip(got, sub.outputs, strict=True):
        _close(value, values[out])


@pytest.mark.parametrize("builder", [models.mlp, models.cnn_residual, models.bert_encoder_layer, models.multi_io])
def test_builtin_models_export_equals_original(builder):
    model = builder()
    graph = from_model(model)
    feeds = random_feeds(graph, graph.inputs)
    for got, expected in zip(run(graph.to_onnx(), feeds), run(model, feeds), strict=True):
        _close(got, expected)


def test_bert_layer_has_attention_ops_and_matmul_macs(bert_model):
    seq, hidden, heads = 16, 64, 4
    graph = from_model(bert_model, batch=2)
    types = collections.Counter(op.op_type for op in graph.ops.values())
    assert types["Softmax"] == 1 and types["LayerNormalization"] == 2 and types["Erf"] == 1
    assert types["Transpose"] == 4 and types["MatMul"] == 8
    projections = 2 * seq * hidden * (4 * hidden + 2 * 4 * hidden)  # Q, K, V, out; FFN in and out
    attention = 2 * 2 * heads * seq * seq * (hidden // heads)  # Q K^T and P V
    matmul_macs = sum(op.macs for op in graph.ops.values() if op.op_type == "MatMul")
    assert matmul_macs == projections + attention


# ---- batch binding and opsets -------------------------------------------------------------


def test_symbolic_batch_binds_to_requested_batch(tmp_path, mlp_model, cnn_model):
    path = tmp_path / "mlp.onnx"
    onnx.save(mlp_model, path)
    one, four = load_onnx(path), load_onnx(path, batch=4)
    assert four.tensors["x"].shape == (4, 64) and four.tensors["y"].shape == (4, 10)
    assert all(four.tensors[t].shape[0] == 4 for op in four.ops.values() for t in op.outputs)
    assert four.total_macs == 4 * one.total_macs > 0
    cnn1, cnn4 = from_model(cnn_model), from_model(cnn_model, batch=4)
    assert cnn4.total_macs == 4 * cnn1.total_macs
    assert not cnn4.notes  # every dim was known after binding


def test_an_unbound_symbolic_dim_other_than_the_batch_is_an_error_naming_it():
    model = one_node_model("Relu", ["N", "seq", 8], {})
    with pytest.raises(FpgaplaceError) as caught:
        from_model(model, batch=3, source="m.onnx")
    message = str(caught.value)
    assert "\n" not in message
    for part in ("m.onnx", "input 'x'", "axis 1", "'seq'", "input_shapes={'x': (3, seq, 8)}"):
        assert part in message, part
    graph = from_model(model, batch=3, input_shapes={"x": (3, 5, 8)})
    assert graph.tensors["x"].shape == (3, 5, 8)


def test_an_unnamed_unknown_dim_is_an_error_too():
    model = one_node_model("Relu", ["N", 4, 8], {})
    model.graph.input[0].type.tensor_type.shape.dim[2].Clear()
    with pytest.raises(FpgaplaceError, match=r"input 'x' axis 2 is an unknown dim"):
        from_model(model)


def test_a_batch_symbol_elsewhere_takes_the_batch():
    """'N' at axis 0 of one input binds it at axis 1 of another (sequence-first inputs)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, "N", 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])
    out = helper.make_tensor_value_info("z", TensorProto.FLOAT, [4, "N", 8])
    model = helper.make_model(helper.make_graph([helper.make_node("Add", ["x", "y"], ["z"])], "g", [x, y], [out]),
                              opset_imports=[helper.make_opsetid("", 17)])
    graph = from_model(model, batch=2)
    assert graph.tensors["x"].shape == (4, 2, 8) and graph.tensors["z"].shape == (4, 2, 8)


@pytest.mark.parametrize("opset", [9, 11, 13, 17, 21])
def test_opsets_9_to_21_load(opset):
    k = 3
    model = one_node_model("Conv", [1, 4, 9, 9], {"w": weight(6, 4, k, k)}, opset=opset, kernel_shape=[k, k])
    graph = from_model(model)
    assert only_op(graph).macs == 6 * 7 * 7 * 4 * k * k


def test_old_opset_is_upgraded():
    model = one_node_model("Conv", [1, 3, 8, 8], {"w": weight(4, 3, 3, 3)}, opset=7, kernel_shape=[3, 3])
    graph = from_model(model)
    assert only_op(graph).macs == 4 * 6 * 6 * 3 * 3 * 3
    assert any("upgraded from opset 7" in note for note in graph.notes)


def test_a_fixed_batch_other_than_the_requested_one_is_an_error(resnet50_path):
    with pytest.raises(FixedBatchError) as caught:
        load_onnx(resnet50_path, batch=4)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{resnet50_path}: batch 4 ")
    name = caught.value.input_name
    assert f"fixed batch of 1 of input '{name}'" in message and caught.value.fixed == 1
    assert load_onnx(resnet50_path).tensors[name].shape == (1, 3, 224, 224)


def test_the_default_batch_keeps_a_fixed_batch_with_a_note():
    model = one_node_model("Relu", [3, 8], {})
    graph = from_model(model)
    assert graph.tensors["x"].shape == (3, 8)
    assert any("fixed batch of 3; kept" in note for note in graph.notes)
    assert from_model(model, batch=3).tensors["y"].shape == (3, 8)
    with pytest.raises(FixedBatchError, match=r"expected batch 3, or 1 \(the default\)"):
        from_model(model, batch=2, source="m.onnx")


def test_external_data_is_read_from_the_files_folder(tmp_path, bert_model):
    folder = tmp_path / "model"
    folder.mkdir()
    path = folder / "bert.onnx"
    onnx.save(
        models.bert_encoder_layer(),
        path,
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="weights.bin",
        size_threshold=0,
    )
    assert (folder / "weights.bin").stat().st_size > 0
    graph = load_onnx(path)
    feeds = random_feeds(graph, graph.inputs)
    _close(run(graph.to_onnx(), feeds)[0], run(bert_model, feeds)[0])
    (folder / "weights.bin").unlink()
    with pytest.raises(FpgaplaceError, match="bert.onnx"):
        load_onnx(path)


def test_from_model_leaves_the_callers_model_alone(mlp_model):
    before = mlp_model.SerializeToString()
    from_model(mlp_model, batch=8)
    assert mlp_model.SerializeToString() == before


# ---- unknown and CPU-only ops ---------------------------------------------------------------


def test_unknown_op_is_kept_costed_from_outputs_and_not_on_fpga():
    model = one_node_model("MyOp", [2, 5], {}, domain="com.example")
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 7]))
    op = only_op(from_model(model))
    assert op.op_type == "MyOp" and not op.fpga_supported
    assert op.macs == 14


def test_topk_and_control_flow_go_to_cpu():
    assert {"Conv", "Gemm", "MatMul", "Softmax", "Concat", "Reshape", "LayerNormalization"} <= FPGA_OPS
    assert not {"If", "Loop", "Scan", "TopK", "NonMaxSuppression"} & FPGA_OPS
    then_branch = helper.make_graph(
        [helper.make_node("Relu", ["h"], ["t"])],
        "then",
        [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [4])],
    )
    else_branch = helper.make_graph(
        [helper.make_node("Neg", ["h"], ["e"])],
        "else",
        [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [4])],
    )
    nodes = [
        helper.make_node("Abs", ["x"], ["h"], name="abs"),
        helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then_branch, else_branch=else_branch),
        helper.make_node("TopK", ["y", "k"], ["values", "indices"], name="topk"),
    ]
    graph = helper.make_graph(
        nodes,
        "control",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("values", TensorProto.FLOAT, [2])],
        initializer=[numpy_helper.from_array(np.array([2], np.int64), "k")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    g = from_model(model)
    assert not plan_op(g.ops["abs"], g)  # no int8 kernel for Abs in the op library
    assert not g.ops["branch"].fpga_supported and not g.ops["topk"].fpga_supported
    assert g.ops["branch"].implicit_inputs == ["h"]
    assert g.graph.edges["abs", "branch"]["tensors"] == ["h"]  # the If body reads h
    x = np.array([-1.0, 2.0, -3.0, 0.5], np.float32)
    out = run(g.to_onnx(), {"x": x, "cond": np.array(True)})[0]
    np.testing.assert_allclose(out, [3.0, 2.0])


def test_unsorted_nodes_are_sorted_and_unnamed_nodes_get_names():
    nodes = [
        helper.make_node("Relu", ["a"], ["b"]),
        helper.make_node("Abs", ["x"], ["a"]),
        helper.make_node("Neg", ["b"], ["y"], name="dup"),
        helper.make_node("Neg", ["x"], ["z"], name="dup"),
    ]
    graph = helper.make_graph(
        nodes,
        "unsorted",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info(t, TensorProto.FLOAT, [3]) for t in ("y", "z")],
    )
    g = from_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8))
    assert len(set(g.ops)) == 4
    assert g.topological_order().index(g.producer("a")) < g.topological_order().index(g.producer("b"))
    assert {g.ops[n].index for n in g.ops} == {0, 1, 2, 3}
    assert g.producer("a") == "Abs_1" and g.producer("b") == "Relu_0"
    assert {g.producer("y"), g.producer("z")} == {"Neg_2", "Neg_3"}


# ---- bad input ------------------------------------------------------------------------------


def _cycle_model() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Add", ["x", "t2"], ["t1"], name="loop_add"),
        helper.make_node("Relu", ["t1"], ["t2"], name="loop_relu"),
        helper.make_node("Identity", ["t2"], ["y"], name="out"),
    ]
    graph = helper.make_graph(
        nodes,
        "cyclic",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _checker_rejected_model() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["nowhere"], ["y"], name="dangling")],
        "bad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _write(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path


@pytest.mark.parametrize(
    "make_file",
    [
        pytest.param(lambda d, r: d / "missing.onnx", id="missing"),
        pytest.param(lambda d, r: _write(d / "empty.onnx", b""), id="empty"),
        pytest.param(lambda d, r: _write(d / "half.onnx", r.read_bytes()[: r.stat().st_size // 2]), id="truncated"),
        pytest.param(lambda d, r: _write(d / "cut_early.onnx", r.read_bytes()[:100]), id="truncated-early"),
        pytest.param(lambda d, r: _write(d / "notes.onnx", b"this is a text file, not a model\n"), id="text"),
        pytest.param(lambda d, r: _write(d / "noise.onnx", RNG.bytes(4096)), id="random-bytes"),
        pytest.param(lambda d, r: _write(d / "cycle.onnx", _cycle_model().SerializeToString()), id="cycle"),
        pytest.param(
            lambda d, r: _write(d / "rejected.onnx", _checker_rejected_model().SerializeToString()), id="checker"
        ),
        pytest.param(lambda d, r: d, id="directory"),
    ],
)
def test_bad_files_give_one_line_error_naming_the_file(tmp_path, resnet50_path, make_file):
    path = make_file(tmp_path, resnet50_path)
    with pytest.raises(FpgaplaceError) as info:
        load_onnx(path)
    message = str(info.value)
    assert str(path) in message and "\n" not in message


def test_cycle_error_names_an_op_on_the_cycle(tmp_path):
    path = _write(tmp_path / "cycle.onnx", _cycle_model().SerializeToString())
    with pytest.raises(FpgaplaceError, match=r"cycle.*'loop_(add|relu)'"):
        load_onnx(path)


def test_checker_rejection_is_reported(tmp_path):
    with pytest.raises(FpgaplaceError, match="onnx.checker"):
        from_model(_checker_rejected_model(), source="rejected.onnx")


@pytest.mark.parametrize("batch", [0, -2])
def test_batch_below_one_is_an_error(tmp_path, mlp_model, batch):
    path = tmp_path / "mlp.onnx"
    onnx.save(mlp_model, path)
    with pytest.raises(FpgaplaceError, match=r"mlp\.onnx.*batch"):
        load_onnx(path, batch=batch)


def test_unknown_light_model_name_is_an_error():
    with pytest.raises(FpgaplaceError, match="resnet50"):
        models.light_model_path("resnet5000")


# ---- input_shapes ---------------------------------------------------------------------------


def _symbolic_conv_model() -> onnx.ModelProto:
    """Conv 3->8, 3x3, stride 2, pad 1 over an input [N, 3, H, W] with symbolic N, H, W."""
    return one_node_model(
        "Conv", ["N", 3, "H", "W"], {"w": weight(8, 3, 3, 3)}, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]
    )


def test_input_shapes_bind_symbolic_dims_and_give_the_right_macs():
    graph = from_model(_symbolic_conv_model(), input_shapes={"x": (1, 3, 64, 64)})
    assert graph.tensors["x"].shape == (1, 3, 64, 64)
    assert graph.tensors["y"].shape == (1, 8, 32, 32)
    assert only_op(graph).macs == 1 * 8 * 32 * 32 * 3 * 3 * 3
    assert not graph.notes
    wide = from_model(_symbolic_conv_model(), input_shapes={"x": [2, 3, 48, 80]})
    assert only_op(wide).macs == 2 * 8 * 24 * 40 * 3 * 3 * 3


def test_batch_does_not_override_given_input_shapes(tmp_path):
    path = tmp_path / "conv.onnx"
    onnx.save(_symbolic_conv_model(), path)
    graph = load_onnx(path, batch=4, input_shapes={"x": (1, 3, 32, 32)})
    assert graph.tensors["x"].shape == (1, 3, 32, 32) and graph.tensors["y"].shape == (1, 8, 16, 16)
    batched = load_onnx(path, batch=4, input_shapes={"x": (2, 3, 32, 32)})
    assert only_op(batched).macs == 2 * only_op(graph).macs
    assert not [note for note in graph.notes if "batch" in note]


def test_a_symbol_bound_by_input_shapes_binds_the_other_inputs_too():
    nodes = [helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")]
    graph = helper.make_graph(
        nodes,
        "two_inputs",
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", "S", 16]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", 16, "S"]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "S", "S"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    bound = from_model(model, batch=5, input_shapes={"a": (3, 7, 16)})
    assert bound.tensors["b"].shape == (3, 16, 7) and bound.tensors["y"].shape == (3, 7, 7)
    assert bound.ops["mm"].macs == 3 * 7 * 7 * 16
    assert not bound.notes
    with pytest.raises(FpgaplaceError, match=r"input_shapes\['b'\] dim 0 \('N'\) is 4; expected 3"):
        from_model(model, input_shapes={"a": (3, 7, 16), "b": (4, 16, 7)})


def test_input_shapes_give_the_rank_of_an_input_without_a_shape():
    model = one_node_model("Relu", [1, 1, 1], {})  # declares y of rank 3, dims left to inference
    model.graph.input[0].type.tensor_type.ClearField("shape")
    graph = from_model(model, input_shapes={"x": (2, 3, 5)})
    assert graph.tensors["x"].shape == (2, 3, 5) and only_op(graph).macs == 30


def test_a_billion_element_input_is_accepted():
    graph = from_model(one_node_model("Relu", ["N", "C"], {}), input_shapes={"x": (1000, 1_000_000)})
    assert only_op(graph).macs == 10**9


@pytest.mark.parametrize(
    ("input_shapes", "message"),
    [
        ({"z": (1, 3, 8, 8)}, r"input_shapes names 'z', which is not a graph input; expected one of 'x'"),
        ({"w": (8, 3, 3, 3)}, r"'w', which is not a graph input"),  # an initializer is not an input to bind
        ({"x": (1, 3, 8)}, r"input_shapes\['x'\] = \(1, 3, 8\) has 3 dims; expected 4 \(input 'x' is \[N, 3, H, W\]\)"),
        ({"x": (1, 4, 8, 8)}, r"input_shapes\['x'\] dim 1 is 4; expected 3, the input's fixed dim"),
        ({"x": (0, 3, 8, 8)}, r"input_shapes\['x'\] dim 0 is 0; expected a whole number in 1\.\.2147483647"),
        ({"x": (1, 3, -8, 8)}, r"input_shapes\['x'\] dim 2 is -8"),
        ({"x": (1, 3, 2**31, 8)}, r"input_shapes\['x'\] dim 2 is 2147483648"),
        ({"x": (1, 3, 64.0, 64)}, r"input_shapes\['x'\] dim 2 is 64\.0; expected a whole number"),
        ({"x": (True, 3, 8, 8)}, r"input_shapes\['x'\] dim 0 is True"),
        ({"x": (2**20, 3, 2**10, 2**10)}, r"input_shapes\['x'\] = .* has 3298534883328 elements; expected at most"),
        ({"x": 64}, r"input_shapes\['x'\] is 64; expected a tuple of dims"),
        ({"x": "1,3,8,8"}, r"input_shapes\['x'\] is '1,3,8,8'; expected a tuple of dims"),
        ([("x", (1, 3, 8, 8))], r"input_shapes must map input names to dims, got list"),
    ],
)
def test_bad_input_shapes_are_one_line_errors_naming_input_and_dim(tmp_path, input_shapes, message):
    with pytest.raises(FpgaplaceError, match=message) as info:
        from_model(_symbolic_conv_model(), input_shapes=input_shapes, source="conv.onnx")
    assert str(info.value).startswith("conv.onnx: ") and "\n" not in str(info.value)
    path = tmp_path / "conv.onnx"
    onnx.save(_symbolic_conv_model(), path)
    with pytest.raises(FpgaplaceError, match=message):
        load_onnx(path, input_shapes=input_shapes)


# ---- control flow: If, Loop, Scan bodies --------------------------------------------------------

FLOAT = TensorProto.FLOAT


def _matmul_body(name: str, a: str, w: str, out: str, out_shape: list) -> onnx.GraphProto:
    """A body without inputs reading the outer ``a`` and ``w``: MatMul then Relu."""
    return helper.make_graph(
        [helper.make_node("MatMul", [a, w], [f"{name}_mm"]), helper.make_node("Relu", [f"{name}_mm"], [out])],
        name, [], [helper.make_tensor_value_info(out, FLOAT, out_shape)])


def _if_model(big_branch: str) -> onnx.ModelProto:
    """x [4, 8] -> If(cond): one branch x @ w [8, 16] then Relu, the other Relu(x @ v [8, 2]) padded to [4, 16]."""
    big = _matmul_body("big", "x", "w", "big_out", [4, 16])
    small = helper.make_graph(
        [helper.make_node("MatMul", ["x", "v"], ["small_mm"]),
         helper.make_node("Tile", ["small_mm", "reps"], ["small_out"])],
        "small", [], [helper.make_tensor_value_info("small_out", FLOAT, [4, 16])])
    branches = {"then_branch": big, "else_branch": small} if big_branch == "then" else \
        {"then_branch": small, "else_branch": big}
    graph = helper.make_graph(
        [helper.make_node("If", ["cond"], ["y"], name="branch", **branches)], "if_model",
        [helper.make_tensor_value_info("x", FLOAT, ["n", 8]),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", FLOAT, ["n", 16])],
        initializer=[numpy_helper.from_array(weight(8, 16), "w"), numpy_helper.from_array(weight(8, 2), "v"),
                     numpy_helper.from_array(np.array([1, 8], np.int64), "reps")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("big_branch", ["then", "else"])
def test_if_costs_both_branches_and_uses_the_larger_with_a_note(big_branch):
    model = _if_model(big_branch)
    graph = from_model(model, batch=4)
    op = graph.ops["branch"]
    big, small = 4 * 16 * 8 + 4 * 16, 4 * 2 * 8  # MatMul M*N*K + Relu; MatMul (Tile moves data)
    assert op.macs == big and not op.fpga_supported
    (note,) = [n for n in graph.notes if n.startswith("If 'branch'")]
    then_macs, else_macs = (big, small) if big_branch == "then" else (small, big)
    assert f"then branch {then_macs} MACs, else branch {else_macs} MACs; the larger ({big_branch})" in note
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    for cond in (True, False):  # the model is valid and both branches run
        assert run(graph.to_onnx(), {"x": x, "cond": np.array(cond)})[0].shape == (4, 16)


def _loop_model(trip_count: int | None, with_condition: bool) -> onnx.ModelProto:
    """s [2, 6] carried through ``trip_count`` trips of s = s @ w [6, 6] + s; M a graph input if None."""
    body = helper.make_graph(
        [helper.make_node("MatMul", ["s_in", "w"], ["s_mm"]), helper.make_node("Add", ["s_mm", "s_in"], ["s_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s_in", FLOAT, None)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s_out", FLOAT, None)])
    inits = [numpy_helper.from_array(weight(6, 6) / 6, "w"), numpy_helper.from_array(np.array(True), "go")]
    inputs = [helper.make_tensor_value_info("s0", FLOAT, [2, 6])]
    if trip_count is None:
        inputs.append(helper.make_tensor_value_info("m", TensorProto.INT64, []))
    else:
        inits.append(numpy_helper.from_array(np.array(trip_count, np.int64), "m"))
    node = helper.make_node("Loop", ["m", "go" if with_condition else "", "s0"], ["s_final"], name="loop", body=body)
    graph = helper.make_graph([node], "loop_model", inputs, [helper.make_tensor_value_info("s_final", FLOAT, [2, 6])],
                              initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


LOOP_BODY_MACS = 2 * 6 * 6 + 2 * 6  # MatMul M*N*K + Add (Identity moves data)


@pytest.mark.parametrize("with_condition", [False, True])
def test_loop_with_a_constant_trip_count_costs_body_times_trips(with_condition):
    graph = from_model(_loop_model(5, with_condition))
    assert graph.ops["loop"].macs == 5 * LOOP_BODY_MACS
    (note,) = [n for n in graph.notes if n.startswith("Loop 'loop'")]
    assert f"body {LOOP_BODY_MACS} MACs x 5 trips" in note and ("at most" in note) == with_condition
    s0 = RNG.standard_normal((2, 6)).astype(np.float32)
    expected = s0
    w = numpy_helper.to_array(next(t for t in graph.model.graph.initializer if t.name == "w"))
    for _ in range(5):
        expected = expected @ w + expected
    np.testing.assert_allclose(run(graph.to_onnx(), {"s0": s0})[0], expected, rtol=1e-4, atol=1e-5)


def test_loop_with_an_unknown_trip_count_costs_the_body_once_and_says_so():
    graph = from_model(_loop_model(None, True))
    assert graph.ops["loop"].macs == LOOP_BODY_MACS
    assert any(n.startswith("Loop 'loop': trip count unknown") for n in graph.notes)


@pytest.mark.parametrize("axis", [0, 1])
def test_scan_costs_body_times_the_scan_length(axis):
    steps, width, hidden = 9, 5, 3
    body = helper.make_graph(
        [helper.make_node("MatMul", ["xt", "w"], ["proj"]), helper.make_node("Add", ["acc_in", "proj"], ["acc_out"]),
         helper.make_node("Tanh", ["acc_out"], ["yt"])],
        "scan_body",
        [helper.make_tensor_value_info("acc_in", FLOAT, None), helper.make_tensor_value_info("xt", FLOAT, None)],
        [helper.make_tensor_value_info("acc_out", FLOAT, None), helper.make_tensor_value_info("yt", FLOAT, None)])
    x_shape = [steps, 1, width] if axis == 0 else [1, steps, width]
    node = helper.make_node("Scan", ["acc0", "x"], ["acc", "ys"], name="scan", body=body, num_scan_inputs=1,
                            scan_input_axes=[axis])
    graph = helper.make_graph(
        [node], "scan_model",
        [helper.make_tensor_value_info("acc0", FLOAT, [1, hidden]), helper.make_tensor_value_info("x", FLOAT, x_shape)],
        [helper.make_tensor_value_info("acc", FLOAT, [1, hidden]), helper.make_tensor_value_info("ys", FLOAT, None)],
        initializer=[numpy_helper.from_array(weight(width, hidden), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    model.graph.output[1].type.tensor_type.shape.dim.extend([onnx.TensorShapeProto.Dimension(dim_param=p)
                                                            for p in ("a", "b", "c")])
    built = from_model(model)
    assert built.ops["scan"].macs == steps * (1 * hidden * width + hidden + hidden)  # MatMul, Add, Tanh
    assert any(f"x {steps} steps" in n for n in built.notes)
    feeds = {"acc0": np.zeros((1, hidden), np.float32), "x": RNG.standard_normal(x_shape).astype(np.float32)}
    assert run(built.to_onnx(), feeds)[1].shape == (steps, 1, hidden)


def test_an_if_inside_a_loop_is_costed_through_both_levels():
    model = _loop_model(4, False)
    body = model.graph.node[0].attribute[0].g
    inner_if = helper.make_node("If", ["cond_in"], ["s_out"], name="inner",
                                then_branch=_matmul_body("t", "s_mm", "w", "t_out", [2, 6]),
                                else_branch=helper.make_graph([helper.make_node("Neg", ["s_mm"], ["e_out"])], "e", [],
                                                              [helper.make_tensor_value_info("e_out", FLOAT, [2, 6])]))
    body.node[1].CopyFrom(inner_if)  # the Add becomes If(cond) Relu(s_mm @ w) else -s_mm
    graph = from_model(model)
    inner = 2 * 6 * 6 + 2 * 6  # the then branch: MatMul + Relu
    assert graph.ops["loop"].macs == 4 * (2 * 6 * 6 + inner)
    s0 = RNG.standard_normal((2, 6)).astype(np.float32)
    assert run(graph.to_onnx(), {"s0": s0})[0].shape == (2, 6)


# ---- cross-check on a CRNN-style model against the shapes of an onnxruntime run -----------------------


def _crnn_model() -> onnx.ModelProto:
    """Conv -> Relu -> MaxPool -> reshape to a sequence over the width -> bidirectional LSTM -> MatMul."""
    hidden, classes = 32, 11
    nodes = [
        helper.make_node("Conv", ["x", "cw", "cb"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Transpose", ["p"], ["pt"], name="to_sequence", perm=[3, 0, 1, 2]),  # [W, N, C, H]
        helper.make_node("Reshape", ["pt", "seq_shape"], ["seq"], name="flatten_features"),
        helper.make_node("LSTM", ["seq", "lw", "lr", "lb"], ["lstm_y"], name="lstm", hidden_size=hidden,
                         direction="bidirectional"),
        helper.make_node("Transpose", ["lstm_y"], ["lstm_t"], name="directions_last", perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["lstm_t", "feature_shape"], ["features"], name="join_directions"),
        helper.make_node("MatMul", ["features", "fw"], ["y"], name="classifier"),
    ]
    features = 16 * 4  # channels * pooled height
    inits = [numpy_helper.from_array(a, n) for n, a in [
        ("cw", weight(16, 1, 3, 3)), ("cb", weight(16)), ("seq_shape", np.array([0, 0, -1], np.int64)),
        ("lw", weight(2, 4 * hidden, features)), ("lr", weight(2, 4 * hidden, hidden)), ("lb", weight(2, 8 * hidden)),
        ("feature_shape", np.array([0, 0, -1], np.int64)), ("fw", weight(2 * hidden, classes)),
    ]]
    graph = helper.make_graph(nodes, "crnn", [helper.make_tensor_value_info("x", FLOAT, ["n", 1, 8, 40])],
                              [helper.make_tensor_value_info("y", FLOAT, ["t", "n", classes])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_crnn_macs_match_a_count_from_onnxruntime_run_shapes():
    from fpgaplace.util.onnxrt import run_model

    model = _crnn_model()
    graph = from_model(model, batch=2)
    x = RNG.standard_normal((2, 1, 8, 40)).astype(np.float32)
    outputs = run_model(model, {"x": x}, ["c", "p", "seq", "lstm_y", "features"])
    shapes = {name: value.shape for name, value in outputs.items()}
    n, cout, h, w = shapes["c"]
    conv = n * cout * h * w * 1 * 3 * 3
    relu = math.prod(shapes["c"])
    pool = math.prod(shapes["p"]) * 2 * 2
    steps, batch, features = shapes["seq"]
    _, directions, _, hidden = shapes["lstm_y"]
    per_unit = 4 * (features + hidden) + 2 * 4 + 8  # gate products, biases Wb + Rb, gates/cell/output
    lstm = steps * batch * directions * hidden * per_unit
    classifier = math.prod(shapes["features"][:-1]) * shapes["features"][-1] * shapes["y"][-1]
    expected = conv + relu + pool + lstm + classifier
    assert abs(graph.total_macs - expected) <= 0.01 * expected
    assert graph.ops["lstm"].macs == lstm and dot_product_macs(graph) == conv + lstm + classifier


def test_loop_trip_count_computed_by_constant_nodes_is_evaluated():
    model = _loop_model(None, False)
    model.graph.input.pop()  # m is no longer a graph input but Add(Cast(Constant 2), 1) = 3
    two = numpy_helper.from_array(np.array(2, np.int32))
    model.graph.node.insert(0, helper.make_node("Constant", [], ["two"], value=two))
    model.graph.node.insert(1, helper.make_node("Cast", ["two"], ["two64"], to=TensorProto.INT64))
    model.graph.node.insert(2, helper.make_node("Add", ["two64", "one"], ["m"]))
    model.graph.initializer.append(numpy_helper.from_array(np.array(1, np.int64), "one"))
    graph = from_model(model)
    assert list(graph.ops) == ["loop"]  # the trip count's nodes fold into parameters
    assert graph.ops["loop"].macs == 3 * LOOP_BODY_MACS
    assert any("x 3 trips" in n for n in graph.notes)


def test_contrib_ops_in_a_branch_get_shapes_from_their_proxies():
    conv = helper.make_node("FusedConv", ["x", "w"], ["c"], domain="com.microsoft", kernel_shape=[3, 3],
                            activation="Relu")
    then_branch = helper.make_graph([conv, helper.make_node("Relu", ["c"], ["t"])], "then", [],
                                    [helper.make_tensor_value_info("t", FLOAT, ["a", "b", "c", "d"])])
    else_branch = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [],
                                    [helper.make_tensor_value_info("e", FLOAT, ["a", "b", "c", "d"])])
    graph = helper.make_graph(
        [helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then_branch, else_branch=else_branch)],
        "contrib_if",
        [helper.make_tensor_value_info("x", FLOAT, [1, 4, 10, 10]),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", FLOAT, ["a", "b", "c", "d"])],
        initializer=[numpy_helper.from_array(weight(6, 4, 3, 3), "w")])
    model = helper.make_model(graph, ir_version=8, opset_imports=[helper.make_opsetid("", 17),
                                                                   helper.make_opsetid("com.microsoft", 1)])
    conv_macs = 1 * 6 * 8 * 8 * 4 * 3 * 3
    assert from_model(model).ops["branch"].macs == conv_macs + 6 * 8 * 8  # FusedConv + Relu


@pytest.mark.parametrize("condition", [True, False])
def test_if_with_a_constant_condition_costs_the_branch_taken(condition):
    model = _if_model("then")
    model.graph.input.pop()  # cond becomes a constant
    model.graph.initializer.append(numpy_helper.from_array(np.array(condition), "cond"))
    graph = from_model(model, batch=4)
    big, small = 4 * 16 * 8 + 4 * 16, 4 * 2 * 8
    assert graph.ops["branch"].macs == (big if condition else small)
    taken = "then" if condition else "else"
    assert any(f"the condition is a constant {condition}: the {taken} branch is costed" in n for n in graph.notes)


# ---- shapes onnx shape inference cannot follow -----------------------------------------------


def _int64(name: str, values: list[int]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def computed_reshape_attention(hidden: int = 64, heads: int = 4) -> onnx.ModelProto:
    """Torch-style attention scores: the head split's Reshape target is Shape -> Gather -> Div -> Concat."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["q"], name="proj"),
        helper.make_node("Shape", ["q"], ["q_shape"], name="shape"),
        *[helper.make_node("Gather", ["q_shape", f"i{axis}"], [f"d{axis}"], axis=0, name=f"gather{axis}")
          for axis in range(3)],
        helper.make_node("Div", ["d2", "heads"], ["head_dim"], name="div"),
        helper.make_node("Concat", ["d0", "d1", "heads", "head_dim"], ["target"], axis=0, name="concat"),
        helper.make_node("Reshape", ["q", "target"], ["q4"], name="split_heads"),
        helper.make_node("Transpose", ["q4"], ["qt"], perm=[0, 2, 1, 3], name="heads_first"),
        helper.make_node("Transpose", ["q4"], ["kt"], perm=[0, 2, 3, 1], name="keys_first"),
        helper.make_node("MatMul", ["qt", "kt"], ["scores"], name="scores"),
    ]
    initializers = [numpy_helper.from_array(weight(hidden, hidden), "w"), _int64("heads", [heads]),
                    *[_int64(f"i{axis}", [axis]) for axis in range(3)]]
    graph = helper.make_graph(nodes, "attention", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                 ["batch", "seq", hidden])],
                              [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [None] * 4)], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_a_computed_reshape_target_folds_and_the_attention_keeps_its_macs():
    batch, seq, hidden, heads = 2, 10, 64, 4
    graph = from_model(computed_reshape_attention(hidden, heads), batch=batch, input_shapes={"x": (batch, seq, hidden)})
    assert graph.tensors["q4"].shape == (batch, seq, heads, hidden // heads)
    assert graph.ops["scores"].macs == batch * heads * seq * seq * (hidden // heads)
    assert not {"shape", "div", "concat"} & set(graph.ops)  # folded to constants, not CPU ops
    assert any("folded to constants" in note for note in graph.notes)
    assert not any("taken as 1" in note for note in graph.notes)


def test_symbolic_height_and_width_drive_an_upsample_to_the_right_size():
    """YOLO-style neck: Resize to twice the feature map's Shape, concatenated with a skip input."""
    nodes = [
        helper.make_node("Conv", ["images", "w"], ["f"], strides=[2, 2], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                         name="down"),
        helper.make_node("Shape", ["f"], ["f_shape"], name="shape"),
        helper.make_node("Slice", ["f_shape", "two", "four"], ["hw"], name="hw"),
        helper.make_node("Mul", ["hw", "two"], ["hw2"], name="double"),
        helper.make_node("Slice", ["f_shape", "zero", "two"], ["nc"], name="nc"),
        helper.make_node("Concat", ["nc", "hw2"], ["sizes"], axis=0, name="sizes"),
        helper.make_node("Resize", ["f", "", "", "sizes"], ["up"], mode="nearest", name="up"),
        helper.make_node("Conv", ["up", "w2"], ["y"], kernel_shape=[1, 1], name="head"),
    ]
    w, w2 = numpy_helper.from_array(weight(8, 3, 3, 3), "w"), numpy_helper.from_array(weight(4, 8, 1, 1), "w2")
    initializers = [w, w2, _int64("zero", [0]), _int64("two", [2]), _int64("four", [4])]
    graph = helper.make_graph(nodes, "neck", [helper.make_tensor_value_info("images", TensorProto.FLOAT,
                                                                            ["batch", 3, "height", "width"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, None, None])],
                              initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    loaded = from_model(model, input_shapes={"images": (1, 3, 320, 256)})
    assert loaded.tensors["up"].shape == (1, 8, 320, 256)
    assert loaded.ops["head"].macs == 4 * 8 * 320 * 256
    expected = ort.InferenceSession(loaded.model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"images": np.zeros((1, 3, 320, 256), np.float32)})[0].shape
    assert loaded.tensors["y"].shape == expected


def test_a_shape_onnx_cannot_infer_comes_from_an_onnxruntime_run():
    nodes = [helper.make_node("Inverse", ["x"], ["inv"], domain="com.microsoft", name="inverse"),
             helper.make_node("MatMul", ["inv", "w"], ["y"], name="mm")]
    w = numpy_helper.from_array(weight(8, 8), "w")
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None, None])], [w])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    loaded = from_model(model, batch=3)
    assert loaded.tensors["inv"].shape == (3, 8, 8) and loaded.ops["mm"].macs == 3 * 8 * 8 * 8
    assert any("onnxruntime run" in note for note in loaded.notes)


def test_a_shape_nothing_resolves_is_an_error_naming_the_op():
    nodes = [helper.make_node("Mystery", ["x"], ["m"], domain="example.custom", name="mystery"),
             helper.make_node("Relu", ["m"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None])])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("example.custom", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    with pytest.raises(FpgaplaceError) as caught:
        from_model(model, source="custom.onnx")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("custom.onnx: op 'mystery' (Mystery)") and "'m'" in message


# ---- QONNX quantizers --------------------------------------------------------------------------


def qonnx_cnn(weight_bits: int = 2, activation_bits: int = 4) -> onnx.ModelProto:
    """x -> Quant(4 bits) -> Conv(Quant(w, 2 bits)) -> Relu -> BipolarQuant -> y, as Brevitas exports."""
    domain = "qonnx.custom_op.general"
    scalar = lambda name, value: numpy_helper.from_array(np.array(value, np.float32), name)  # noqa: E731
    nodes = [
        helper.make_node("Quant", ["x", "s", "z", "act_bits"], ["xq"], domain=domain, name="quant_in",
                         signed=1, narrow=0, rounding_mode="ROUND"),
        helper.make_node("Quant", ["w", "s", "z", "w_bits"], ["wq"], domain=domain, name="quant_w",
                         signed=1, narrow=1, rounding_mode="ROUND"),
        helper.make_node("Conv", ["xq", "wq"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("BipolarQuant", ["r", "s"], ["y"], domain=domain, name="binarize"),
    ]
    initializers = [numpy_helper.from_array(weight(8, 3, 3, 3), "w"), scalar("s", 0.25), scalar("z", 0.0),
                    scalar("act_bits", activation_bits), scalar("w_bits", weight_bits)]
    graph = helper.make_graph(nodes, "qonnx_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                 [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16, 16])], initializers)
    opsets = [helper.make_opsetid("", 13), helper.make_opsetid(domain, 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    return model


def test_qonnx_quantizers_are_read_as_bit_widths_and_the_conv_keeps_its_macs():
    graph = from_model(qonnx_cnn(weight_bits=2, activation_bits=4), source="qonnx.onnx")
    assert graph.ops["conv"].macs == 8 * 16 * 16 * 3 * 3 * 3
    assert graph.tensors["xq"].quant_bits == 4 and graph.tensors["wq"].quant_bits == 2
    assert graph.tensors["y"].quant_bits == 1 and graph.tensors["c"].quant_bits is None
    assert "quant_w" not in graph.ops  # a quantized weight is a parameter, stored at its bit width
    assert graph.ops["conv"].param_bytes == (8 * 3 * 3 * 3 * 2 + 7) // 8
    assert any("QONNX: 3 quantized tensors, 1 to 4 bits" in note for note in graph.notes)


def test_a_qonnx_bit_width_that_is_not_a_constant_is_noted():
    model = qonnx_cnn()
    model.graph.node[0].input[3] = "x_bits"
    model.graph.input.append(helper.make_tensor_value_info("x_bits", TensorProto.FLOAT, []))
    graph = from_model(model)
    assert graph.tensors["xq"].quant_bits is None
    assert any("'quant_in': its bit width is not a constant" in note for note in graph.notes)


# ---- onnxruntime stays quiet ------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[1]
FRONT_END_FILES = ("fpgaplace/util/onnxrt.py", "fpgaplace/model/quantize.py", "fpgaplace/flow/split.py",
                   *(f"fpgaplace/place/cost/{name}.py" for name in ("fpga", "cpu", "problem")),
                   *(str(p.relative_to(REPO)) for folder in ("fpgaplace/model/frontend", "fpgaplace/model/passes")
                     for p in sorted((REPO / folder).glob("*.py"))))


def test_every_session_of_the_front_end_comes_from_onnxrt_session():
    opened = [name for name in FRONT_END_FILES if name != "fpgaplace/util/onnxrt.py"
              and "InferenceSession(" in (REPO / name).read_text()]
    assert not opened
    assert len(FRONT_END_FILES) > 6 and "InferenceSession(" in (REPO / "fpgaplace/util/onnxrt.py").read_text()


def _warning_model(path: Path) -> None:
    """A model onnxruntime warns about on load (an initializer no node reads)."""
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
                              [numpy_helper.from_array(np.zeros((3, 3), np.float32), "unused")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_onnxrt_sessions_print_no_onnxruntime_log_line(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "warns.onnx"
    _warning_model(path)
    plain = f"import onnxruntime as ort; ort.InferenceSession({str(path)!r}, providers=['CPUExecutionProvider'])"
    quiet = f"from fpgaplace.util import onnxrt; onnxrt.session({str(path)!r}, 'warns.onnx')"
    loud = subprocess.run([sys.executable, "-c", plain], capture_output=True, text=True, check=True)
    assert "onnxruntime" in loud.stderr  # the warning the helper must silence
    silent = subprocess.run([sys.executable, "-c", quiet], capture_output=True, text=True, check=True, cwd=REPO)
    assert silent.stderr == ""


def test_a_model_whose_strings_are_not_utf8_is_a_one_line_error(tmp_path):
    model = one_node_model("Relu", [1, 8], {})
    model.graph.node[0].name = "NAME_TO_DAMAGE"
    data = model.SerializeToString().replace(b"NAME_TO_DAMAGE", b"NAME_\xc0\xc0_DAMAGE")
    path = tmp_path / "damaged.onnx"
    path.write_bytes(data)
    with pytest.raises(FpgaplaceError) as caught:
        load_onnx(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: a string in the model is not valid UTF-8") and "\n" not in message
