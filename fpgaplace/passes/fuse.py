"""Fusion annotations: activations and elementwise chains joined to the op that produces them.

Plain ONNX has no fused ``Conv+Relu`` op, and the model must stay runnable by onnxruntime, so
fusion is recorded, not performed: a fused node keeps its place in the graph and gets the
node ``metadata_props`` entry ``fpgaplace.fused_into = <head node name>`` (node metadata is
ignored by onnxruntime). A *fused group* is a head plus every node annotated with its name;
the cost model charges a group as one kernel (the members stream through the head's output
pipeline: no extra memory round trip, no transfer between them) and the placer keeps a group
on one device (``fpgaplace.passes.transfers.colocate_fused_groups``).

A node N may join the group of the producer P of one of its data inputs X when X is read by
N alone and is not a graph output, and P does real work (not a constant or a pure data
movement op). Annotations whose condition no longer holds (because another pass removed or
rewired the head) are dropped on the next run. One topological sweep, O(n + e).
"""

from __future__ import annotations

from collections import defaultdict

import onnx

from fpgaplace.passes.graph_tools import (
    FUSED_INTO_KEY,
    PassResult,
    constant_initializers,
    consumers,
    copy_model,
    name_nodes,
    node_metadata,
    output_names,
    producers,
    set_node_metadata,
    topological_order,
)

ACTIVATION_OPS = frozenset({
    "Relu", "Clip", "LeakyRelu", "PRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Elu",
    "Selu", "Celu", "Softplus", "Softsign", "ThresholdedRelu", "Gelu", "Mish",
})
ELEMENTWISE_OPS = ACTIVATION_OPS | frozenset({
    "Add", "Sub", "Mul", "Div", "Sum", "Max", "Min", "Mean", "Pow", "Sqrt", "Reciprocal", "Exp",
    "Log", "Abs", "Neg", "Erf", "Sign", "Floor", "Ceil", "Round", "Cast", "BatchNormalization",
    "Where",
})
NOT_A_HEAD = frozenset({
    "Constant", "ConstantOfShape", "Shape", "Size", "Reshape", "Flatten", "Squeeze", "Unsqueeze",
    "Transpose", "Concat", "Split", "Slice", "Gather", "Identity", "Dropout", "Expand", "Tile",
})



def fused_head(node: onnx.NodeProto) -> str | None:
    """The head a node is fused into, or None."""
    return node_metadata(node, FUSED_INTO_KEY)


def fused_groups(model: onnx.ModelProto) -> dict[str, list[str]]:
    """Head node name -> names of the nodes fused into it (topological order)."""
    groups: dict[str, list[str]] = defaultdict(list)
    for node in topological_order(model.graph):
        head = fused_head(node)
        if head is not None:
            groups[head].append(node.name)
    return dict(groups)


def _group_of(node: onnx.NodeProto) -> str:
    return fused_head(node) or node.name


def _fusable_head(model: onnx.ModelProto, node: onnx.NodeProto, ops: frozenset[str],
                  prods: dict, readers: dict, outputs: set[str], constants: set[str]) -> str | None:
    """The group N can join, or None (see the module docstring for the rule)."""
    if node.op_type not in ops or node.domain not in ("", "ai.onnx"):
        return None
    for name in node.input:
        if not name or name in constants or name in outputs:
            continue
        producer = prods.get(name)
        if producer is None or producer.op_type in NOT_A_HEAD:
            continue
        if len(readers.get(name, [])) == 1:
            return _group_of(producer)
    return None


def _fuse(model: onnx.ModelProto, ops: frozenset[str], keep_other: bool) -> PassResult:
    result = copy_model(model)
    name_nodes(result)
    graph = result.graph
    prods, readers = producers(graph), consumers(graph)
    outputs, constants = output_names(graph), set(constant_initializers(result))
    changes = 0
    for node in topological_order(graph):
        current = fused_head(node)
        wanted = _fusable_head(result, node, ops, prods, readers, outputs, constants)
        if wanted is None and current is not None and keep_other:
            # annotated by the other fusion pass: keep it if its head still feeds this node
            still = _fusable_head(result, node, ELEMENTWISE_OPS, prods, readers, outputs,
                                  constants)
            wanted = still if still == current else None
        if wanted != current:
            set_node_metadata(node, FUSED_INTO_KEY, wanted)
            changes += 1
    return result, changes


def fuse_activations(model: onnx.ModelProto) -> PassResult:
    """Annotate activations (Relu, Clip, Sigmoid, ...) as fused into their producer."""
    return _fuse(model, ACTIVATION_OPS, keep_other=True)


def fuse_elementwise(model: onnx.ModelProto) -> PassResult:
    """Annotate elementwise ops (Add, Mul, BatchNormalization, activations, ...) as fused into
    their producer, so that chains like Conv -> Add -> Relu form one group."""
    return _fuse(model, ELEMENTWISE_OPS, keep_other=True)
