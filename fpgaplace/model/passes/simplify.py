"""Passes that delete operators which compute nothing, or cancel pairs that undo each other.

Each pass has the shape ``pass(model) -> (new_model, changes)``; the input model is not
modified. A removed node's readers read its input instead (see ``graph_tools.bypass``).
Each pass visits every node once and rewrites tensor names in O(n) per removal, so a pass is
O(n * removals) in the worst case; in practice removals are few.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from fpgaplace.model.passes.graph_tools import (
    TensorType,
    attribute,
    bypass,
    constant_value,
    consumers,
    output_names,
    producers,
    rewrites_a_copy,
    set_attribute,
    tensor_types,
)


def _remove_where(model: onnx.ModelProto,
                  removable: Callable[[onnx.ModelProto, onnx.NodeProto, dict], str | None],
                  needs_types: bool = False) -> int:
    """Bypass every node for which ``removable`` names the input tensor equal to its output."""
    types = tensor_types(model) if needs_types else {}
    changes = 0
    for node in list(model.graph.node):
        if node.domain not in ("", "ai.onnx"):
            continue
        source = removable(model, node, types)
        if source is not None and bypass(model.graph, node, source):
            changes += 1
    return changes


def _single_output_used(model: onnx.ModelProto, node: onnx.NodeProto) -> bool:
    """True if only the node's first output is read (or is a graph output)."""
    readers = consumers(model.graph)
    outputs = output_names(model.graph)
    return all(not name or (name not in readers and name not in outputs)
               for name in node.output[1:])


@rewrites_a_copy
def remove_identity(model: onnx.ModelProto) -> int:
    """Remove ``Identity`` nodes."""
    return _remove_where(
        model, lambda m, n, t: n.input[0] if n.op_type == "Identity" else None)


@rewrites_a_copy
def remove_dropout(model: onnx.ModelProto) -> int:
    """Remove ``Dropout`` (inference: output = input) when its mask output is unused and it is
    not forced into training mode by a constant ``training_mode`` input that is true."""

    def source(m: onnx.ModelProto, node: onnx.NodeProto, _types: dict) -> str | None:
        if node.op_type != "Dropout" or not _single_output_used(m, node):
            return None
        if len(node.input) > 2 and node.input[2]:
            training = constant_value(m, node.input[2])
            if training is None or bool(np.asarray(training).item()):
                return None
        return node.input[0]

    return _remove_where(model, source)


@rewrites_a_copy
def remove_noop_cast(model: onnx.ModelProto) -> int:
    """Remove ``Cast`` to the element type its input already has."""

    def source(_m: onnx.ModelProto, node: onnx.NodeProto, types: dict) -> str | None:
        if node.op_type != "Cast":
            return None
        known: TensorType | None = types.get(node.input[0])
        return node.input[0] if known and known.elem_type == attribute(node, "to") else None

    return _remove_where(model, source, needs_types=True)


@rewrites_a_copy
def remove_noop_reshape(model: onnx.ModelProto) -> int:
    """Remove ``Reshape`` (also ``Squeeze``/``Unsqueeze``/``Flatten``) whose output shape equals
    its input shape, both fully known."""

    def source(_m: onnx.ModelProto, node: onnx.NodeProto, types: dict) -> str | None:
        if node.op_type not in ("Reshape", "Squeeze", "Unsqueeze", "Flatten"):
            return None
        before, after = types.get(node.input[0]), types.get(node.output[0])
        if before is None or after is None:
            return None
        shape_in, shape_out = before.static_shape(), after.static_shape()
        return node.input[0] if shape_in is not None and shape_in == shape_out else None

    return _remove_where(model, source, needs_types=True)


@rewrites_a_copy
def remove_noop_transpose(model: onnx.ModelProto) -> int:
    """Remove ``Transpose`` whose ``perm`` is the identity permutation."""

    def source(_m: onnx.ModelProto, node: onnx.NodeProto, _types: dict) -> str | None:
        if node.op_type != "Transpose":
            return None
        perm = attribute(node, "perm")
        return node.input[0] if perm is not None and list(perm) == list(range(len(perm))) else None

    return _remove_where(model, source)


@rewrites_a_copy
def cancel_transpose_pairs(model: onnx.ModelProto) -> int:
    """Rewrite ``Transpose(p2)(Transpose(p1)(x))`` as one transpose of ``x``, or as ``x``
    itself when the perms compose to the identity (output dim i = input dim p1[p2[i]]).
    The first transpose is left for dead-code elimination if nothing else reads it."""
    graph = model.graph
    changes = 0
    for node in list(graph.node):
        if node.op_type != "Transpose" or node.domain not in ("", "ai.onnx"):
            continue
        first = producers(graph).get(node.input[0])
        if first is None or first.op_type != "Transpose" or first.domain not in ("", "ai.onnx"):
            continue
        p1, p2 = attribute(first, "perm"), attribute(node, "perm")
        if p1 is None or p2 is None or len(p1) != len(p2):
            continue
        composed = [int(p1[i]) for i in p2]
        if composed == list(range(len(composed))):
            if bypass(graph, node, first.input[0]):
                changes += 1
        else:
            node.input[0] = first.input[0]
            set_attribute(node, "perm", composed)
            changes += 1
    return changes


@rewrites_a_copy
def collapse_reshape_chains(model: onnx.ModelProto) -> int:
    """Rewrite ``Reshape(Reshape(x, s1), s2)`` as ``Reshape(x, s2)`` (keep the last) when ``s2``
    is constant and has no 0 entry (a 0 would copy a dim of the intermediate shape)."""
    graph = model.graph
    changes = 0
    for node in list(graph.node):
        if node.op_type != "Reshape" or len(node.input) < 2:
            continue
        first = producers(graph).get(node.input[0])
        if first is None or first.op_type != "Reshape":
            continue
        shape = constant_value(model, node.input[1])
        if shape is None or attribute(node, "allowzero", 0) or np.any(np.asarray(shape) == 0):
            continue
        node.input[0] = first.input[0]
        changes += 1
    return changes



@rewrites_a_copy
def sum_to_add(model: onnx.ModelProto) -> int:
    """Rewrite a two-input ``Sum`` as ``Add`` and a one-input ``Sum`` as ``Identity`` (same
    values, broadcasting included), so the one Add kernel and the quantizer see residual sums
    as adds (old exports, e.g. the Caffe2 ResNet-50, write them as Sum). O(n)."""
    changes = 0
    for node in model.graph.node:
        if node.op_type == "Sum" and node.domain in ("", "ai.onnx") and 1 <= len(node.input) <= 2:
            node.op_type = "Add" if len(node.input) == 2 else "Identity"
            changes += 1
    return changes
