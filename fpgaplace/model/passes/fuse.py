"""Fusion annotations: activations and elementwise chains joined to the op that produces them.

Plain ONNX has no fused ``Conv+Relu`` op, and the model must stay runnable by onnxruntime, so
fusion is recorded, not performed: a fused node keeps its place in the graph and gets the
node ``metadata_props`` entry ``fpgaplace.fused_into = <head node name>`` (node metadata is
ignored by onnxruntime). A *fused group* is a head plus every node annotated with its name;
the cost model charges a group as one kernel (the members stream through the head's output
pipeline: no extra memory round trip, no transfer between them) and the placer keeps a group
on one device (``fpgaplace.model.passes.transfers.colocate_fused_groups``).

A node N may join the group of the producer P of one of its data inputs X when N's op class
(``fpgaplace.model.ops``) is fusable in this pass (an activation in ``fuse_activations``; an
activation or elementwise op, QuantizeLinear and DequantizeLinear included, in
``fuse_elementwise``), X is read by N alone and is not a graph output, and P may head a group
(``OpClass.head``: constants, shape arithmetic and reshaping or copying data movement may not).
So a QDQ chain Conv -> QuantizeLinear -> DequantizeLinear -> Relu -> ... forms one group headed
by the Conv. Annotations whose condition no longer holds (because another pass removed or
rewired the head) are dropped on the next run. One topological sweep, O(n + e).
"""

from __future__ import annotations

from collections import defaultdict

import onnx

from fpgaplace.model import ops
from fpgaplace.model.passes.graph_tools import (
    FUSED_INTO_KEY,
    constant_initializers,
    consumers,
    name_nodes,
    node_metadata,
    output_names,
    producers,
    rewrites_a_copy,
    set_node_metadata,
    topological_order,
)


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


def _fusable_head(node: onnx.NodeProto, kind: ops.Fusion, prods: dict, readers: dict,
                  outputs: set[str], constants: set[str]) -> str | None:
    """The group N can join in a ``kind`` fusion, or None (see the module docstring for the rule)."""
    if not ops.can_fuse(node.op_type, node.domain, kind):
        return None
    for name in node.input:
        if not name or name in constants or name in outputs:
            continue
        producer = prods.get(name)
        if producer is None or not ops.can_head(producer.op_type, producer.domain):
            continue
        if len(readers.get(name, [])) == 1:
            return _group_of(producer)
    return None


def _fuse(model: onnx.ModelProto, kind: ops.Fusion, keep_other: bool) -> int:
    name_nodes(model)
    graph = model.graph
    prods, readers = producers(graph), consumers(graph)
    outputs, constants = output_names(graph), set(constant_initializers(model))
    changes = 0
    for node in topological_order(graph):
        current = fused_head(node)
        wanted = _fusable_head(node, kind, prods, readers, outputs, constants)
        if wanted is None and current is not None and keep_other:
            # annotated by the other fusion pass: keep it if its head still feeds this node
            still = _fusable_head(node, "elementwise", prods, readers, outputs, constants)
            wanted = still if still == current else None
        if wanted != current:
            set_node_metadata(node, FUSED_INTO_KEY, wanted)
            changes += 1
    return changes


@rewrites_a_copy
def fuse_activations(model: onnx.ModelProto) -> int:
    """Annotate activations (Relu, Clip, Sigmoid, ...) as fused into their producer."""
    return _fuse(model, "activation", keep_other=True)


@rewrites_a_copy
def fuse_elementwise(model: onnx.ModelProto) -> int:
    """Annotate elementwise ops (Add, Mul, BatchNormalization, QuantizeLinear, DequantizeLinear,
    activations, ...) as fused into their producer, so that chains like Conv -> Add -> Relu
    and Conv -> QuantizeLinear -> DequantizeLinear form one group."""
    return _fuse(model, "elementwise", keep_other=True)
