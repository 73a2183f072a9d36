"""OpGraph: tensor sizes, edges, queries, cycles, subgraphs and ONNX export."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from fpgaplace.model.frontend.load import from_model, load_onnx
from fpgaplace.model.ir import Op, OpGraph, TensorInfo, outer_references, unique_op_names
from fpgaplace.model.zoo import light_model_path
from fpgaplace.util.errors import FpgaplaceError


def run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(None, feeds)


def test_tensor_sizes():
    assert TensorInfo("a", (2, 3), "float32").nbytes == 24
    assert TensorInfo("b", (2, 3), "int8", TensorProto.INT8).nbytes == 6
    scalar = TensorInfo("c", (), "int64", TensorProto.INT64)
    assert scalar.numel == 1 and scalar.nbytes == 8
    assert TensorInfo("d", (5,), "int8", TensorProto.INT4).nbytes == 3  # packed, rounded up
    assert TensorInfo("e", (4, 0), "float32").nbytes == 0


def _split_add_model() -> onnx.ModelProto:
    """x -> Split -> (s0, s1) -> Add -> MatMul(shared w) -> MatMul(shared w) -> y."""
    w = numpy_helper.from_array(np.eye(4, dtype=np.float32) * 2, "w")
    split = numpy_helper.from_array(np.array([4, 4], np.int64), "split")
    nodes = [
        helper.make_node("Split", ["x", "split"], ["s0", "s1"], name="split", axis=1),
        helper.make_node("Add", ["s0", "s1"], ["sum"], name="add"),
        helper.make_node("MatMul", ["sum", "w"], ["m1"], name="mm1"),
        helper.make_node("MatMul", ["m1", "w"], ["y"], name="mm2"),
    ]
    graph = helper.make_graph(
        nodes,
        "split_add",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
        initializer=[w, split],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_edges_carry_every_tensor_between_a_pair_and_their_bytes():
    g = from_model(_split_add_model())
    assert g.graph.edges["split", "add"]["tensors"] == ["s0", "s1"]
    assert g.graph.edges["split", "add"]["bytes"] == 2 * 3 * 4 * 4
    assert g.graph.edges["add", "mm1"]["bytes"] == 3 * 4 * 4
    assert set(g.graph.edges) == {("split", "add"), ("add", "mm1"), ("mm1", "mm2")}  # params are not edges
    assert g.graph.nodes["mm1"]["op"] is g.ops["mm1"]
    assert g.params == {"w", "split"}


def test_queries_and_byte_accounting():
    g = from_model(_split_add_model())
    assert g.producer("s1") == "split" and g.producer("x") is None and g.producer("w") is None
    assert g.consumers("w") == ["mm1", "mm2"] and g.consumers("y") == []
    assert g.topological_order() == ["split", "add", "mm1", "mm2"]
    mm1 = g.ops["mm1"]
    assert (mm1.param_bytes, mm1.input_bytes, mm1.output_bytes) == (64, 48, 48)
    assert mm1.macs == 3 * 4 * 4
    assert g.total_macs == sum(op.macs for op in g.ops.values())
    assert g.total_param_bytes == 64 + 16  # the shared weight counts once, plus the split sizes


def test_topological_order_respects_every_edge():
    g = load_onnx(light_model_path("inception_v1"))
    position = {name: i for i, name in enumerate(g.topological_order())}
    assert len(position) == len(g.ops)
    assert all(position[u] < position[v] for u, v in g.graph.edges)


def _op(name: str, inputs: list[str], outputs: list[str], index: int) -> Op:
    return Op(name, "Relu", "", {}, inputs, outputs, index)


def test_cycle_is_an_error_naming_an_op_on_it():
    ops = [_op("a", ["x", "t2"], ["t1"], 0), _op("b", ["t1"], ["t2"], 1), _op("c", ["t2"], ["y"], 2)]
    tensors = {t: TensorInfo(t, (2,), "float32") for t in ("x", "t1", "t2", "y")}
    with pytest.raises(FpgaplaceError, match=r"cyclic: .*cycle.*'(a|b)'"):
        OpGraph("cyclic", ops, tensors, set(), ["x"], ["y"], onnx.ModelProto())


def test_duplicate_op_names_are_an_error():
    ops = [_op("a", ["x"], ["t"], 0), _op("a", ["t"], ["y"], 1)]
    with pytest.raises(FpgaplaceError, match="'a'"):
        OpGraph("dup", ops, {}, set(), ["x"], ["y"], onnx.ModelProto())


def test_ops_given_out_of_order_come_back_topologically():
    ops = [_op("late", ["t"], ["y"], 0), _op("early", ["x"], ["t"], 1)]
    g = OpGraph("manual", ops, {}, set(), ["x"], ["y"], onnx.ModelProto())
    assert list(g.ops) == ["early", "late"]


def test_subgraph_boundary_tensors_become_inputs_and_outputs(cnn_model):
    g = from_model(cnn_model)
    order = g.topological_order()
    block = [n for n in order if g.ops[n].op_type != "Gemm"][3:12]
    sub = g.subgraph(block, name="block")
    assert sub.name == "block" and list(sub.ops) == block
    for t in sub.inputs:
        assert g.producer(t) not in block and t not in g.params
        assert any(t in g.ops[n].inputs for n in block)
    for t in sub.outputs:
        assert g.producer(t) in block
        assert any(c not in block for c in g.consumers(t)) or t in g.outputs
    assert sub.params <= g.params and sub.params
    assert set(sub.graph.edges) == {(u, v) for u, v in g.graph.edges if u in block and v in block}


def test_subgraph_export_reproduces_intermediate_tensors(cnn_model):
    g = from_model(cnn_model)
    order = g.topological_order()
    sub = g.subgraph(order[5:20])
    wanted = list(dict.fromkeys([*sub.inputs, *sub.outputs]))
    extended = onnx.ModelProto()
    extended.CopyFrom(g.to_onnx())
    del extended.graph.output[:]
    extended.graph.output.extend(helper.make_tensor_value_info(t, TensorProto.FLOAT, None) for t in wanted)
    image = np.random.default_rng(0).standard_normal(g.tensors["image"].shape).astype(np.float32)
    values = dict(zip(wanted, run(extended, {"image": image}), strict=True))
    model = sub.to_onnx()
    onnx.checker.check_model(model)
    for got, name in zip(run(model, {t: values[t] for t in sub.inputs}), sub.outputs, strict=True):
        np.testing.assert_allclose(got, values[name], rtol=1e-5, atol=1e-6)


def test_subgraph_of_subgraph_and_graph_outputs(multi_io_model):
    g = from_model(multi_io_model)
    whole = g.subgraph(g.ops)
    assert whole.inputs == g.inputs and whole.outputs == g.outputs
    tail = whole.subgraph([g.producer("y1"), g.producer("y2")])
    assert tail.outputs == ["y1", "y2"]  # y1 is a graph output even though an op inside reads it
    assert g.producer("y1") in tail.ops


def test_subgraph_of_unknown_op_is_an_error(multi_io_model):
    g = from_model(multi_io_model)
    with pytest.raises(FpgaplaceError, match="'nope'"):
        g.subgraph(["nope"])


def test_to_onnx_names_nodes_after_ops_and_keeps_outputs(bert_model):
    g = from_model(bert_model, batch=2)
    model = g.to_onnx()
    onnx.checker.check_model(model)
    assert [n.name for n in model.graph.node] == list(g.ops)
    assert [o.name for o in model.graph.output] == g.outputs
    x = np.random.default_rng(1).standard_normal((2, 16, 64)).astype(np.float32)
    np.testing.assert_allclose(
        run(model, {"hidden_states": x})[0], run(bert_model, {"hidden_states": x})[0], rtol=1e-5, atol=1e-5
    )


def test_outer_references_reads_nested_bodies_in_first_use_order():
    inner = helper.make_graph([helper.make_node("Add", ["y", "x"], ["s"])], "inner", [],
                              [helper.make_tensor_value_info("s", TensorProto.FLOAT, [1])])
    body = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["n"]),
         helper.make_node("If", ["c"], ["o"], then_branch=inner, else_branch=inner),
         helper.make_node("Add", ["n", "o"], ["r"])],
        "body", [], [helper.make_tensor_value_info("r", TensorProto.FLOAT, [1])])
    node = helper.make_node("If", ["c"], ["out"], then_branch=body, else_branch=body)
    assert outer_references(node) == ["x", "c", "y"]  # n and o are defined inside the body


def test_unique_op_names_keeps_unique_names_and_renames_the_rest():
    nodes = [helper.make_node("Relu", ["a"], ["b"], name="r"),
             helper.make_node("Relu", ["b"], ["c"], name="dup"),
             helper.make_node("Relu", ["c"], ["d"], name="dup"),
             helper.make_node("Relu", ["d"], ["e"]),
             helper.make_node("Relu", ["e"], ["f"], name="Relu_3")]
    assert unique_op_names(enumerate(nodes)) == ["r", "Relu_1", "Relu_2", "Relu_3_1", "Relu_3"]
