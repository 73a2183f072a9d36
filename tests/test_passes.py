"""Graph optimizer passes: each alone on a tiny graph, then the manager on real structures.

Every rewrite is checked numerically: original and optimized run in onnxruntime on the same
random inputs and must agree to a relative error of 1e-5 (``fpgaplace.flow.split.relative_error``).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from fpgaplace.model import zoo as models
from fpgaplace.model.passes import (
    FUSED_INTO_KEY,
    cancel_transpose_pairs,
    collapse_reshape_chains,
    eliminate_common_subexpressions,
    eliminate_dead_code,
    fold_batchnorm,
    fold_channel_affine,
    fold_constants,
    fuse_activations,
    fuse_elementwise,
    fused_groups,
    name_nodes,
    op_counts,
    optimize,
    remove_dropout,
    remove_identity,
    remove_noop_cast,
    remove_noop_reshape,
    remove_noop_transpose,
)
from fpgaplace.model.passes.graph_tools import node_metadata
from fpgaplace.model.passes.transfers import Transfer, colocate_fused_groups, dedupe_transfers, merge_sync_points
from fpgaplace.util.compare import relative_error
from fpgaplace.util.onnxrt import random_inputs, run_model

RNG = np.random.default_rng(7)
FLOAT = TensorProto.FLOAT


def init(name: str, shape: tuple[int, ...], low: float = -1.0, high: float = 1.0):
    return numpy_helper.from_array(RNG.uniform(low, high, shape).astype(np.float32), name)


def const(name: str, values) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values), name)


def build(nodes, inputs: dict[str, list], outputs: dict[str, list | None],
          initializers=(), opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "tiny",
        [helper.make_tensor_value_info(n, FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, FLOAT, s) for n, s in outputs.items()],
        initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def assert_same_outputs(original: onnx.ModelProto, optimized: onnx.ModelProto,
                        extra: tuple[str, ...] = ()) -> None:
    inputs = random_inputs(original, seed=3)
    expected = run_model(original, inputs, list(extra))
    actual = run_model(optimized, inputs, list(extra))
    for name, value in expected.items():
        assert relative_error(actual[name], value) <= 1e-5, name


def ops(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in model.graph.node]


# ---- removal passes ---------------------------------------------------------------------

def relu_between(op_node: onnx.NodeProto, extra_init=()) -> onnx.ModelProto:
    """x -> Relu -> (op) -> Relu -> y with the op reading 'a' and writing 'b'."""
    nodes = [helper.make_node("Relu", ["x"], ["a"]), op_node,
             helper.make_node("Relu", ["b"], ["y"])]
    return build(nodes, {"x": [2, 3]}, {"y": [2, 3]}, extra_init)


@pytest.mark.parametrize(("a_pass", "node", "inits"), [
    (remove_identity, helper.make_node("Identity", ["a"], ["b"]), ()),
    (remove_dropout, helper.make_node("Dropout", ["a"], ["b"]), ()),
    (remove_noop_cast, helper.make_node("Cast", ["a"], ["b"], to=FLOAT), ()),
    (remove_noop_reshape, helper.make_node("Reshape", ["a", "s"], ["b"]),
     (const("s", np.array([2, 3], np.int64)),)),
    (remove_noop_transpose, helper.make_node("Transpose", ["a"], ["b"], perm=[0, 1]), ()),
])
def test_removal_pass_removes_the_noop_and_keeps_outputs(a_pass, node, inits):
    model = relu_between(node, inits)
    optimized, changes = a_pass(model)
    assert changes == 1
    assert ops(optimized) == ["Relu", "Relu"]
    assert_same_outputs(model, optimized)
    assert a_pass(optimized)[1] == 0
    assert len(model.graph.node) == 3  # the input model is untouched


@pytest.mark.parametrize(("a_pass", "node", "inits"), [
    (remove_identity, helper.make_node("Neg", ["a"], ["b"]), ()),
    (remove_dropout, helper.make_node("Dropout", ["a", "r", "t"], ["b"]),
     (const("r", np.float32(0.5)), const("t", np.bool_(True)))),
    (remove_noop_cast, helper.make_node("Cast", ["a"], ["c"], to=TensorProto.DOUBLE), ()),
    (remove_noop_reshape, helper.make_node("Reshape", ["a", "s"], ["b"]),
     (const("s", np.array([3, 2], np.int64)),)),
    (remove_noop_transpose, helper.make_node("Transpose", ["a"], ["b"], perm=[1, 0]), ()),
])
def test_removal_pass_leaves_real_ops_alone(a_pass, node, inits):
    if node.op_type == "Cast":  # a real cast needs a cast back to stay a float model
        nodes = [helper.make_node("Relu", ["x"], ["a"]), node,
                 helper.make_node("Cast", ["c"], ["y"], to=FLOAT)]
        model = build(nodes, {"x": [2, 3]}, {"y": [2, 3]})
    elif node.op_type in ("Reshape", "Transpose"):
        nodes = [helper.make_node("Relu", ["x"], ["a"]), node, helper.make_node("Relu", ["b"], ["y"])]
        model = build(nodes, {"x": [2, 3]}, {"y": [3, 2]}, inits)
    else:
        model = relu_between(node, inits)
    optimized, changes = a_pass(model)
    assert changes == 0
    assert ops(optimized) == ops(model)


def test_removing_a_node_that_writes_a_graph_output_renames_its_producer():
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Identity", ["a"], ["y"])]
    model = build(nodes, {"x": [4]}, {"y": [4]})
    optimized, changes = remove_identity(model)
    assert changes == 1 and ops(optimized) == ["Relu"]
    assert optimized.graph.node[0].output[0] == "y"
    assert_same_outputs(model, optimized)


def test_transpose_pair_cancels_or_composes():
    cancel = build([helper.make_node("Transpose", ["x"], ["a"], perm=[1, 2, 0]),
                    helper.make_node("Transpose", ["a"], ["b"], perm=[2, 0, 1]),
                    helper.make_node("Relu", ["b"], ["y"])], {"x": [2, 3, 4]}, {"y": [2, 3, 4]})
    optimized, changes = cancel_transpose_pairs(cancel)
    optimized, _ = eliminate_dead_code(optimized)
    assert changes == 1 and ops(optimized) == ["Relu"]
    assert_same_outputs(cancel, optimized)
    compose = build([helper.make_node("Transpose", ["x"], ["a"], perm=[1, 0, 2]),
                     helper.make_node("Transpose", ["a"], ["y"], perm=[0, 2, 1])],
                    {"x": [2, 3, 4]}, {"y": [3, 4, 2]})
    optimized, changes = cancel_transpose_pairs(compose)
    optimized, _ = eliminate_dead_code(optimized)
    assert changes == 1 and ops(optimized) == ["Transpose"]
    assert_same_outputs(compose, optimized)
    assert cancel_transpose_pairs(optimized)[1] == 0


def test_reshape_chain_keeps_the_last_reshape():
    model = build([helper.make_node("Reshape", ["x", "s1"], ["a"]),
                   helper.make_node("Reshape", ["a", "s2"], ["y"])],
                  {"x": [2, 3, 4]}, {"y": [4, 6]},
                  [const("s1", np.array([6, 4], np.int64)), const("s2", np.array([4, -1], np.int64))])
    optimized, changes = collapse_reshape_chains(model)
    optimized, _ = eliminate_dead_code(optimized)
    assert changes == 1 and ops(optimized) == ["Reshape"]
    assert_same_outputs(model, optimized)
    assert collapse_reshape_chains(optimized)[1] == 0
    with_zero = build([helper.make_node("Reshape", ["x", "s1"], ["a"]),
                       helper.make_node("Reshape", ["a", "s0"], ["y"])],
                      {"x": [2, 3, 4]}, {"y": [6, 4]},
                      [const("s1", np.array([6, 4], np.int64)), const("s0", np.array([0, 4], np.int64))])
    assert collapse_reshape_chains(with_zero)[1] == 0


# ---- constant folding, DCE, CSE -------------------------------------------------------------

def test_constant_folding_replaces_constant_subgraph_by_an_initializer():
    model = build([helper.make_node("Add", ["c1", "c2"], ["s"]),
                   helper.make_node("Exp", ["s"], ["e"]),
                   helper.make_node("Mul", ["x", "e"], ["y"])],
                  {"x": [3]}, {"y": [3]}, [init("c1", (3,)), init("c2", (3,))])
    optimized, changes = fold_constants(model)
    assert changes == 2 and ops(optimized) == ["Mul"]
    assert "e" in {t.name for t in optimized.graph.initializer}
    assert_same_outputs(model, optimized)
    assert fold_constants(optimized)[1] == 0


def test_constant_folding_respects_the_size_cap():
    model = build([helper.make_node("ConstantOfShape", ["shape"], ["big"],
                                    value=helper.make_tensor("v", FLOAT, [1], [2.0])),
                   helper.make_node("Mul", ["x", "big"], ["y"])],
                  {"x": [64, 64]}, {"y": [64, 64]}, [const("shape", np.array([64, 64], np.int64))])
    kept, changes = fold_constants(model, max_folded_bytes=1024)
    assert changes == 0 and ops(kept) == ["ConstantOfShape", "Mul"]
    folded, changes = fold_constants(model, max_folded_bytes=64 * 64 * 4)
    assert changes == 1 and ops(folded) == ["Mul"]
    assert_same_outputs(model, folded)


def test_a_weight_above_the_size_cap_is_still_folded():
    """The same 16 KiB ConstantOfShape, as a MatMul's weight, is folded under a 1 KiB cap (so the
    quantizer takes it as a weight: the light zoo's AlexNet/VGG fully connected layers)."""
    model = build([helper.make_node("ConstantOfShape", ["shape"], ["w"],
                                    value=helper.make_tensor("v", FLOAT, [1], [0.02])),
                   helper.make_node("MatMul", ["x", "w"], ["y"])],
                  {"x": [1, 64]}, {"y": [1, 64]}, [const("shape", np.array([64, 64], np.int64))])
    folded, changes = fold_constants(model, max_folded_bytes=1024)
    assert changes == 1 and ops(folded) == ["MatMul"]
    assert_same_outputs(model, folded)


def test_dead_code_elimination_drops_unreachable_nodes_and_unused_initializers():
    model = build([helper.make_node("Relu", ["x"], ["y"]),
                   helper.make_node("Add", ["x", "w"], ["dead1"]),
                   helper.make_node("Neg", ["dead1"], ["dead2"])],
                  {"x": [3]}, {"y": [3]}, [init("w", (3,)), init("unused", (3,))])
    optimized, changes = eliminate_dead_code(model)
    assert changes == 4  # two nodes, two initializers
    assert ops(optimized) == ["Relu"] and not optimized.graph.initializer
    assert_same_outputs(model, optimized)
    assert eliminate_dead_code(optimized)[1] == 0


def test_common_subexpressions_merge_chains():
    model = build([helper.make_node("Relu", ["x"], ["a1"]), helper.make_node("Relu", ["x"], ["a2"]),
                   helper.make_node("Exp", ["a1"], ["b1"]), helper.make_node("Exp", ["a2"], ["b2"]),
                   helper.make_node("LeakyRelu", ["x"], ["c"], alpha=0.2),
                   helper.make_node("LeakyRelu", ["x"], ["d"], alpha=0.3),
                   helper.make_node("Sum", ["b1", "b2", "c", "d"], ["y"])],
                  {"x": [5]}, {"y": [5]})
    optimized, changes = eliminate_common_subexpressions(model)
    assert changes == 2  # the second Relu and the second Exp; different alphas stay
    assert op_counts(optimized) == {"Exp": 1, "LeakyRelu": 2, "Relu": 1, "Sum": 1}
    assert_same_outputs(model, optimized)
    assert eliminate_common_subexpressions(optimized)[1] == 0


# ---- folding into Conv / Gemm / MatMul ------------------------------------------------------

def batchnorm_inits(channels: int) -> list[onnx.TensorProto]:
    return [init("scale", (channels,)), init("bias", (channels,)), init("mean", (channels,)),
            init("var", (channels,), 0.5, 2.0)]


def test_fold_batchnorm_into_conv():
    model = build([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                   helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"],
                                    ["n"], epsilon=1e-3),
                   helper.make_node("Relu", ["n"], ["y"])],
                  {"x": [1, 3, 8, 8]}, {"y": [1, 4, 8, 8]},
                  [init("w", (4, 3, 3, 3)), init("b", (4,)), *batchnorm_inits(4)])
    optimized, changes = fold_batchnorm(model)
    assert changes == 1 and ops(optimized) == ["Conv", "Relu"]
    assert_same_outputs(model, optimized)
    assert fold_batchnorm(optimized)[1] == 0


@pytest.mark.parametrize("trans_b", [0, 1])
def test_fold_batchnorm_into_gemm(trans_b):
    weight = (6, 5) if trans_b else (5, 6)
    model = build([helper.make_node("Gemm", ["x", "w", "b"], ["g"], transB=trans_b, beta=0.5),
                   helper.make_node("BatchNormalization", ["g", "scale", "bias", "mean", "var"],
                                    ["y"])],
                  {"x": [2, 5]}, {"y": [2, 6]}, [init("w", weight), init("b", (6,)),
                                                  *batchnorm_inits(6)])
    optimized, changes = fold_batchnorm(model)
    assert changes == 1 and ops(optimized) == ["Gemm"]
    assert_same_outputs(model, optimized)


@pytest.mark.parametrize("with_bias", [True, False])
def test_fold_batchnorm_into_matmul_with_and_without_add(with_bias):
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"])]
    inits = [init("w", (5, 6)), *batchnorm_inits(6)]
    if with_bias:
        nodes.append(helper.make_node("Add", ["m", "b"], ["mb"]))
        inits.append(init("b", (6,)))
    nodes.append(helper.make_node("BatchNormalization",
                                  ["mb" if with_bias else "m", "scale", "bias", "mean", "var"], ["y"]))
    model = build(nodes, {"x": [3, 5]}, {"y": [3, 6]}, inits)
    optimized, changes = fold_batchnorm(model)
    assert changes == 1 and "BatchNormalization" not in ops(optimized)
    assert ops(optimized) == ["MatMul", "Add"]
    assert_same_outputs(model, optimized)


def test_batchnorm_is_not_folded_when_the_conv_output_is_read_twice():
    model = build([helper.make_node("Conv", ["x", "w"], ["c"]),
                   helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["n"]),
                   helper.make_node("Add", ["c", "n"], ["y"])],
                  {"x": [1, 3, 4, 4]}, {"y": [1, 4, 4, 4]},
                  [init("w", (4, 3, 1, 1)), *batchnorm_inits(4)])
    assert fold_batchnorm(model)[1] == 0


def test_fold_channel_affine_mul_and_add_into_conv():
    model = build([helper.make_node("Conv", ["x", "w"], ["c"]),
                   helper.make_node("Mul", ["c", "s"], ["m"]),
                   helper.make_node("Add", ["t", "m"], ["y"])],
                  {"x": [1, 3, 4, 4]}, {"y": [1, 4, 4, 4]},
                  [init("w", (4, 3, 1, 1)), init("s", (4, 1, 1)), init("t", (1, 4, 1, 1))])
    optimized, changes = fold_channel_affine(model)
    assert changes == 2 and ops(optimized) == ["Conv"]
    assert_same_outputs(model, optimized)
    spatial = build([helper.make_node("Conv", ["x", "w"], ["c"]),
                     helper.make_node("Mul", ["c", "s"], ["y"])],
                    {"x": [1, 3, 4, 4]}, {"y": [1, 4, 4, 4]},
                    [init("w", (4, 3, 1, 1)), init("s", (1, 4, 4))])
    assert fold_channel_affine(spatial)[1] == 0  # varies along H: not a per-channel scale


def test_fold_channel_affine_mul_and_add_into_a_batchnorm():
    """DenseNet's BatchNormalization -> Mul -> Add of per-channel constants (after a Concat: no conv to
    fold into) becomes one batch norm, numerically the same; a Mul by a spatial constant stays."""
    def norm_then(mul_const: tuple[int, ...]) -> onnx.ModelProto:
        return build([helper.make_node("Concat", ["x", "x"], ["c"], axis=1),
                      helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["n"]),
                      helper.make_node("Mul", ["n", "s"], ["m"]),
                      helper.make_node("Add", ["m", "t"], ["y"])],
                     {"x": [1, 2, 4, 4]}, {"y": [1, 4, 4, 4]},
                     [*batchnorm_inits(4), init("s", mul_const), init("t", (4, 1, 1))])

    model = norm_then((1, 4, 1, 1))
    optimized, changes = fold_channel_affine(model)
    assert changes == 2 and ops(optimized) == ["Concat", "BatchNormalization"]
    assert_same_outputs(model, optimized)
    optimized, changes = fold_channel_affine(norm_then((1, 1, 4)))
    assert changes == 0 and ops(optimized) == ["Concat", "BatchNormalization", "Mul", "Add"]


# ---- fusion annotations -----------------------------------------------------------------

def conv_add_relu() -> onnx.ModelProto:
    return build([helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
                  helper.make_node("Add", ["c", "x"], ["a"], name="add"),
                  helper.make_node("Relu", ["a"], ["y"], name="relu")],
                 {"x": [1, 3, 4, 4]}, {"y": [1, 3, 4, 4]}, [init("w", (3, 3, 1, 1))])


def test_fuse_activations_annotates_relu_and_stays_runnable():
    model = conv_add_relu()
    optimized, changes = fuse_activations(model)
    assert changes == 1
    assert fused_groups(optimized) == {"add": ["relu"]}
    assert node_metadata(optimized.graph.node[2], FUSED_INTO_KEY) == "add"
    assert_same_outputs(model, optimized)
    assert fuse_activations(optimized)[1] == 0


def test_fuse_elementwise_builds_one_group_per_chain():
    optimized, changes = fuse_elementwise(conv_add_relu())
    assert changes == 2 and fused_groups(optimized) == {"conv": ["add", "relu"]}
    again, changes = fuse_activations(optimized)
    assert changes == 0 and fused_groups(again) == {"conv": ["add", "relu"]}


def test_stale_fusion_annotation_is_dropped():
    optimized, _ = fuse_elementwise(conv_add_relu())
    # make the Conv output read twice: the Add may no longer fuse into it
    optimized.graph.output.append(helper.make_tensor_value_info("c", FLOAT, None))
    refreshed, changes = fuse_elementwise(optimized)
    assert changes == 2 and fused_groups(refreshed) == {"add": ["relu"]}


# ---- manager --------------------------------------------------------------------------------

@pytest.mark.parametrize("builder", [models.cnn_residual, models.bert_encoder_layer, models.multi_io,
                                     models.mlp])
def test_optimize_keeps_outputs_of_the_built_models(builder):
    model = builder()
    optimized, report = optimize(model)
    assert report.converged and report.rounds >= 1
    assert report.changes_per_round[-1] and not any(report.changes_per_round[-1].values())
    heads = sum(n.name.endswith(("_heads_as_batch", "_heads")) for n in optimized.graph.node)  # passes.heads
    assert report.nodes_after == len(optimized.graph.node) <= report.nodes_before + heads
    assert_same_outputs(model, optimized)
    data = report.to_dict()
    assert {p["name"] for p in data["passes"]} >= {"fold_batchnorm", "eliminate_dead_code"}
    assert "fold_batchnorm" in report.text()


def test_optimize_folds_every_batchnorm_of_the_residual_cnn():
    model = models.cnn_residual()
    optimized, report = optimize(model)
    assert op_counts(model).get("BatchNormalization", 0) > 0
    assert "BatchNormalization" not in op_counts(optimized)
    stat = {p.name: p.changes for p in report.passes}
    assert stat["fold_batchnorm"] == op_counts(model)["BatchNormalization"]


def randomized_light_model(name: str) -> onnx.ModelProto:
    """The light model with its constant-filled weights replaced by random ones, so that
    outputs depend on every channel (the shipped weights make every logit equal)."""
    model, _ = fold_constants(onnx.load(models.light_model_path(name)), max_folded_bytes=1 << 26)
    model, _ = eliminate_dead_code(model)
    rng = np.random.default_rng(0)
    for tensor in model.graph.initializer:
        value = numpy_helper.to_array(tensor)
        if value.dtype == np.float32 and value.ndim >= 2:
            noisy = value * rng.uniform(0.5, 1.5, value.shape).astype(np.float32)
            tensor.CopyFrom(numpy_helper.from_array(noisy, tensor.name))
    return model


@pytest.mark.parametrize("name", ["resnet50", "inception_v2"])
def test_light_model_zoo_structures_fold_all_batchnorms(name):
    original = onnx.load(models.light_model_path(name))
    optimized, report = optimize(original)
    assert "BatchNormalization" in op_counts(original)
    assert "BatchNormalization" not in op_counts(optimized)
    assert report.converged
    assert_same_outputs(original, optimized)
    model = randomized_light_model(name)
    optimized, _ = optimize(model)
    assert "BatchNormalization" not in op_counts(optimized)
    logits = next(n.input[0] for n in model.graph.node if n.op_type == "Softmax")
    assert_same_outputs(model, optimized, extra=(logits,))


def test_name_nodes_follows_the_frontend_rule():
    from fpgaplace.model.frontend.load import load_onnx

    model = onnx.load(models.light_model_path("resnet50"))
    names = onnx.ModelProto()
    names.CopyFrom(model)
    assert name_nodes(names) > 0
    assert set(load_onnx(models.light_model_path("resnet50")).ops) <= {
        n.name for n in names.graph.node}


# ---- placement-level passes ---------------------------------------------------------------

def test_dedupe_transfers_sends_a_tensor_once_per_device():
    transfers = [Transfer("t", "s0", "s1", "A", "B", 8), Transfer("t", "s0", "s2", "A", "B", 8),
                 Transfer("t", "s0", "s3", "A", "C", 8), Transfer("u", "s1", "s3", "B", "B", 4)]
    kept, dropped = dedupe_transfers(transfers)
    assert dropped == 2
    assert [(t.tensor, t.target) for t in kept] == [("t", "s1"), ("t", "s3")]


def test_merge_sync_points_merges_only_without_a_path_through_another_piece():
    # pieces 0 (A) -> 1 (B) -> 2 (A): cannot merge; piece 3 (A) independent of 1: merges
    group, merges = merge_sync_points(["A", "B", "A", "A"], {(0, 1), (1, 2)})
    assert group[0] != group[2]
    assert merges == 1 and group[3] in (group[0], group[2])
    group, merges = merge_sync_points(["A", "A"], {(0, 1)})
    assert merges == 1 and group == [0, 0]


def test_colocate_fused_groups_moves_members_to_their_head():
    optimized, _ = fuse_elementwise(conv_add_relu())
    placed, moved = colocate_fused_groups(optimized, {"conv": "A", "add": "B", "relu": "A"})
    assert moved == 1 and placed == {"conv": "A", "add": "A", "relu": "A"}


def test_sum_of_two_becomes_add_and_of_one_identity():
    from fpgaplace.model.passes.simplify import sum_to_add

    model = build(
        [helper.make_node("Sum", ["a", "b"], ["s"], name="s2"), helper.make_node("Sum", ["s"], ["y"], name="s1"),
         helper.make_node("Sum", ["a", "b", "y"], ["z"], name="s3")],
        {"a": [2, 3], "b": [1, 3]},
        {"z": [2, 3]},
    )
    rewritten, changes = sum_to_add(model)
    assert changes == 2
    assert ops(rewritten) == ["Add", "Identity", "Sum"]
    assert_same_outputs(model, rewritten)
    optimized, _ = optimize(model)
    assert "Identity" not in ops(optimized)
    assert_same_outputs(model, optimized)


# ---- QONNX quantizers as model-local functions ---------------------------------------------------

QONNX_DOMAIN = "qonnx.custom_op.general"
QONNX_CASES = {
    "quant signed 4 bits": ("Quant", 1, [0.25, 0.0, 4.0], {"signed": 1, "narrow": 0, "rounding_mode": "ROUND"}),
    "quant signed narrow 3 bits, zero point": ("Quant", 1, [0.5, 1.0, 3.0],
                                               {"signed": 1, "narrow": 1, "rounding_mode": "ROUND"}),
    "quant unsigned narrow 2 bits": ("Quant", 1, [0.3, 0.0, 2.0],
                                     {"signed": 0, "narrow": 1, "rounding_mode": "ROUND"}),
    "quant signed 1 bit (bipolar)": ("Quant", 1, [0.25, 0.0, 1.0],
                                     {"signed": 1, "narrow": 0, "rounding_mode": "ROUND"}),
    "quant 8 bits half even": ("Quant", 1, [0.5, 0.0, 8.0],
                               {"signed": 1, "narrow": 0, "rounding_mode": "HALF_EVEN"}),
    "bipolar": ("BipolarQuant", 1, [0.75], {}),
    "trunc v1 8 -> 4 bits": ("Trunc", 1, [0.25, 0.0, 8.0, 4.0], {"rounding_mode": "FLOOR"}),
    "trunc v2 signed": ("Trunc", 2, [0.25, 0.0, 8.0, 4.0, 4.0], {"rounding_mode": "FLOOR", "signed": 1, "narrow": 0}),
    "trunc v2 unsigned narrow": ("Trunc", 2, [0.25, 2.0, 8.0, 2.0, 4.0],
                                 {"rounding_mode": "FLOOR", "signed": 0, "narrow": 1}),
}


def qonnx_model(op_type: str, version: int, constants: list[float], attrs: dict, opset: int = 13) -> onnx.ModelProto:
    """x [4, 64] -> one QONNX quantizer (its other inputs constant scalars) -> y."""
    names = [f"c{i}" for i in range(len(constants))]
    node = helper.make_node(op_type, ["x", *names], ["y"], domain=QONNX_DOMAIN, name="q", **attrs)
    scalars = [numpy_helper.from_array(np.array(c, np.float32), n) for n, c in zip(names, constants, strict=True)]
    graph = helper.make_graph([node], "qonnx_one", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 64])], scalars)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid(QONNX_DOMAIN, version)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("case", sorted(QONNX_CASES))
def test_qonnx_functions_run_in_onnxruntime_as_the_qonnx_package_executes_them(case):
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx

    from fpgaplace.model.passes.qonnx import attach_functions
    from fpgaplace.util import onnxrt

    model = qonnx_model(*QONNX_CASES[case])
    x = (np.random.default_rng(3).standard_normal((4, 64)) * 6).astype(np.float32)
    x[0, :8] = [0.5, 1.5, -0.5, -2.5, 0.0, 0.125, 2.5, -0.125]  # ties and zero
    expected = execute_onnx(ModelWrapper(model), {"x": x})["y"]
    with_functions = onnx.ModelProto()
    with_functions.CopyFrom(model)
    assert attach_functions(with_functions, "q.onnx") == 1
    onnx.checker.check_model(with_functions, full_check=True)
    got = onnxrt.session(with_functions, "q.onnx").run(["y"], {"x": x})[0]
    np.testing.assert_array_equal(got, expected)
    assert len(np.unique(got)) > 1


def test_a_qonnx_rounding_mode_no_function_implements_is_an_error_naming_the_node():
    from fpgaplace.model.passes.qonnx import attach_functions
    from fpgaplace.util.errors import FpgaplaceError

    model = qonnx_model("Quant", 1, [0.25, 0.0, 4.0], {"signed": 1, "narrow": 0, "rounding_mode": "CEIL"})
    with pytest.raises(FpgaplaceError, match=r"q.onnx: QONNX Quant 'q' has rounding_mode 'CEIL'; expected 'ROUND'"):
        attach_functions(model, "q.onnx")


def test_a_qonnx_model_on_opset_11_is_upgraded_and_runs():
    from fpgaplace.model.frontend.load import from_model
    from fpgaplace.util import onnxrt

    graph = from_model(qonnx_model(*QONNX_CASES["quant signed 4 bits"], opset=11))
    assert any("upgraded from opset 11 to 12" in note for note in graph.notes)
    assert graph.tensors["y"].quant_bits == 4 and len(graph.model.functions) == 1
    x = np.linspace(-3, 3, 256, dtype=np.float32).reshape(4, 64)
    y = onnxrt.session(graph.to_onnx(), "q.onnx").run(["y"], {"x": x})[0]
    assert set(np.unique(y / 0.25)) <= set(range(-8, 8))


# ---- shape inference without the weights (passes.inference) ---------------------------------


def _ir3_model_with_declared_weights() -> onnx.ModelProto:
    """A Conv -> Reshape model in the IR 3 style (every initializer also a graph input), one weight
    declared with a symbolic dim (so it must stay in the view), the Reshape's shape an int64 constant."""
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    bias = numpy_helper.from_array(rng.standard_normal(200).astype(np.float32)[:8], "b")
    loose = numpy_helper.from_array(rng.standard_normal((4, 50)).astype(np.float32), "loose")
    shape = numpy_helper.from_array(np.array([1, -1], dtype=np.int64), "shape")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1]),
             helper.make_node("Reshape", ["y", "shape"], ["z"]),
             helper.make_node("Add", ["loose", "loose"], ["l2"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 6]),
              helper.make_tensor_value_info("w", TensorProto.FLOAT, [8, 3, 3, 3]),
              helper.make_tensor_value_info("b", TensorProto.FLOAT, [8]),
              helper.make_tensor_value_info("loose", TensorProto.FLOAT, ["rows", 50]),
              helper.make_tensor_value_info("shape", TensorProto.INT64, [2])]
    graph = helper.make_graph(nodes, "ir3", inputs, [helper.make_tensor_value_info("z", TensorProto.FLOAT, None),
                                                   helper.make_tensor_value_info("l2", TensorProto.FLOAT, None)],
                              [weight, bias, loose, shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 3
    return model


@pytest.mark.parametrize("build", [lambda: models.cnn_residual(batch=1), lambda: models.mobilenet_v2(batch=1),
                                   lambda: models.bert_encoder_layer(seq=8, hidden=32, heads=2, batch=1),
                                   _ir3_model_with_declared_weights])
@pytest.mark.parametrize("options", [{}, {"strict_mode": False, "data_prop": True},
                                     {"check_type": True, "strict_mode": True, "data_prop": True}])
def test_inference_without_weights_gives_onnx_result_byte_for_byte(build, options):
    from onnx import shape_inference

    from fpgaplace.model.passes import inference

    model = build()
    view, stripped = inference.weightless_view(model)
    assert stripped > 0 and len(view.SerializeToString()) < len(model.SerializeToString())
    expected = shape_inference.infer_shapes(model, **options)
    got = inference.infer_shapes(model, **options)
    assert got.SerializeToString(deterministic=True) == expected.SerializeToString(deterministic=True)
    viewed = inference.inferred_view(model, **options)
    assert list(viewed.graph.value_info) == list(expected.graph.value_info)
    assert list(viewed.graph.output) == list(expected.graph.output)


def test_inference_view_keeps_the_weights_inference_might_read():
    """Shape-like int64 constants, a weight declared with other dims than its own, and (below IR 4)
    nothing undeclared leaves the view; the conv weight and its bias-sized sibling do."""
    from fpgaplace.model.passes import inference

    model = _ir3_model_with_declared_weights()
    view, stripped = inference.weightless_view(model)
    kept = {t.name for t in view.graph.initializer}
    assert kept == {"b", "shape", "loose"} and stripped == 1  # b: 8 elements, loose: declared ['rows', 50]
    assert [v.name for v in view.graph.input] == [v.name for v in model.graph.input]
    model.ir_version = 8
    del model.graph.input[1:]
    view, stripped = inference.weightless_view(model)
    assert {t.name for t in view.graph.initializer} == {"b", "shape"} and stripped == 2
    assert [v.name for v in view.graph.input] == ["x", "w", "loose"]


def test_inference_on_a_model_without_large_weights_is_onnx_inference_itself():
    from fpgaplace.model.passes import inference

    model = models.multi_io()
    view, stripped = inference.weightless_view(model)
    assert view is model and stripped == 0


def test_manager_rewrites_in_place_what_the_copying_passes_compute():
    """Every default pass offers its in-place rewrite; the manager's in-place run gives the same
    model, byte for byte, as running the copying passes, and the caller's model is untouched."""
    from fpgaplace.model.passes.manager import DEFAULT_PASSES

    assert all(callable(getattr(a_pass, "in_place", None)) for a_pass in DEFAULT_PASSES)
    model = models.cnn_residual(batch=1)
    before = model.SerializeToString(deterministic=True)
    copying = [lambda m, p=a_pass: p(m) for a_pass in DEFAULT_PASSES]  # no in_place attribute: copies
    in_place, report = optimize(model)
    copied, copied_report = optimize(model, copying)
    assert report.total_changes > 0 and report.total_changes == copied_report.total_changes
    assert in_place.SerializeToString(deterministic=True) == copied.SerializeToString(deterministic=True)
    assert model.SerializeToString(deterministic=True) == before


@pytest.mark.parametrize("name", ["squeezenet", "inception_v1"])
def test_opset_conversion_without_weights_gives_onnx_result_byte_for_byte(name):
    from onnx import version_converter

    from fpgaplace.model.frontend.load import from_model
    from fpgaplace.model.passes import inference

    model = from_model(models.with_random_weights(onnx.load(str(models.light_model_path(name))))).model
    assert model.opset_import[0].version < 13 and inference.weightless_view(model)[1] > 0
    expected = version_converter.convert_version(model, 13)
    got = inference.convert_version(model, 13)
    assert got.SerializeToString(deterministic=True) == expected.SerializeToString(deterministic=True)


def test_opset_conversion_converts_the_whole_model_when_the_converter_touches_an_initializer(monkeypatch):
    from onnx import version_converter

    from fpgaplace.model.frontend.load import from_model
    from fpgaplace.model.passes import inference

    model = from_model(models.with_random_weights(onnx.load(str(models.light_model_path("squeezenet"))))).model
    convert = version_converter.convert_version
    sizes = []

    def touching(candidate, target):
        sizes.append(len(candidate.graph.initializer))
        converted = convert(candidate, target)
        converted.graph.initializer[0].name += "_renamed"  # as if an adapter had rewritten it
        return converted

    monkeypatch.setattr(inference.version_converter, "convert_version", touching)
    result = inference.convert_version(model, 13)
    assert sizes == [len(inference.weightless_view(model)[0].graph.initializer), len(model.graph.initializer)]
    assert len(result.graph.initializer) == len(model.graph.initializer)
    assert result.graph.initializer[0].name.endswith("_renamed")  # the full model's conversion came back
