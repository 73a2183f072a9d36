"""Attention's heads as a batch: the rank-4 ``[B, H, S, D]`` tensors of multi-head attention
become rank-3 ``[B*H, S, D]`` ones.

Exporters write multi-head attention with rank-4 tensors: ``Q [B, H, S, D]``, ``Kᵀ [B, H, D, S]``,
the scores ``[B, H, S, S]`` and the context ``[B, H, S, D]``. A core streams a rank-4 tensor
channels last (``hw.permutation.stream_order``: H innermost), so neither the MatMul kernel nor
the Softmax rows can read heads on axis 1. Every op between the head split and the head merge
is computed head by head, so the same ops on ``[B*H, S, D]`` give the same values:

* a *head region* starts at each MatMul of two rank-4 activations with equal ``[B, H]`` (H > 1)
  and grows forward through head-wise readers: MatMuls of two such activations, Softmax or
  LogSoftmax over the last axis, elementwise ops of ``ELEMENTWISE`` whose other operands are
  scalar constants;
* each rank-4 tensor a region op reads from outside is reshaped to ``[-1, X, Y]`` first, and each
  tensor it writes that is read outside (or is a graph output) is reshaped back to ``[-1, H, X,
  Y]``; a Softmax's axis becomes -1.

The split ``Reshape [B, S, H, D] -> Transpose(0, 2, 1, 3)`` then ends in a Reshape to ``[B*H, S,
D]``, a rank-3 chain a reorder stage runs (blocks of D elements; ``hw.reorder``), and so does the
merge. Values are unchanged (reshapes only). O(nodes) a region, with one shape inference.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from fpgaplace.model.passes.graph_tools import (
    add_initializer,
    attribute,
    constant_value,
    consumers,
    output_names,
    producers,
    rewrites_a_copy,
    set_attribute,
    tensor_types,
)

ELEMENTWISE = frozenset({"Mul", "Div", "Add", "Sub", "Relu", "Sigmoid", "Tanh", "Exp", "Erf", "Identity"})
"""Elementwise op types a head region passes through (any other operand a scalar constant)."""


class _Heads:
    """One sweep's look-ups: shapes, producers, readers, constants."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.model = model
        self.types = tensor_types(model)
        self.producers = producers(model.graph)
        self.readers = consumers(model.graph)
        self.outputs = output_names(model.graph)

    def shape(self, tensor: str) -> tuple | None:
        found = self.types.get(tensor)
        return found.shape if found is not None else None

    def constant(self, tensor: str) -> bool:
        return constant_value(self.model, tensor) is not None

    def heads(self, tensor: str) -> tuple | None:
        """``(B, H)`` of a rank-4 activation with static H, X and Y (B may be a symbol), or None."""
        shape = self.shape(tensor)
        if shape is None or len(shape) != 4 or self.constant(tensor):
            return None
        return tuple(shape[:2]) if all(isinstance(d, int) and d > 0 for d in shape[1:]) else None

    def activations(self, node: onnx.NodeProto) -> list[str]:
        return [t for t in node.input if t and not self.constant(t)]

    def head_wise(self, node: onnx.NodeProto, heads: tuple) -> bool:
        """Whether ``node`` computes head by head on activations of ``heads`` (module docstring)."""
        acts = self.activations(node)
        if node.domain not in ("", "ai.onnx") or not acts or any(self.heads(t) != heads for t in acts):
            return False
        if node.op_type == "MatMul":
            return len(acts) == 2 == len(node.input)
        if node.op_type in ("Softmax", "LogSoftmax"):
            return int(attribute(node, "axis", -1)) in (-1, 3)
        scalars = all(np.asarray(constant_value(self.model, t)).size == 1 for t in node.input if t and t not in acts)
        return node.op_type in ELEMENTWISE and scalars and self.heads(node.output[0]) == heads


def _region(g: _Heads, seed: onnx.NodeProto) -> list[onnx.NodeProto]:
    """The head region grown forward from the MatMul ``seed``. O(region size x readers)."""
    heads = g.heads(seed.input[0])
    region, pending = [seed], [seed]
    while pending:
        node = pending.pop()
        for reader in (r for t in node.output for r in g.readers.get(t, [])):
            if all(reader is not n for n in region) and g.head_wise(reader, heads):
                region.append(reader)
                pending.append(reader)
    return region


def _reshape(g: _Heads, source: str, target: str, dims: list[int], name: str) -> onnx.NodeProto:
    shape = f"{name}_shape"
    add_initializer(g.model, numpy_helper.from_array(np.array(dims, np.int64), shape))
    return helper.make_node("Reshape", [source, shape], [target], name=name)


def _rewrite(g: _Heads, region: list[onnx.NodeProto]) -> None:
    """Reshape the region's rank-4 inputs to rank 3 and its outputs read outside back."""
    inside = {t for node in region for t in node.output}
    heads = g.heads(region[0].input[0])[1]
    renamed = {t: f"{t}_batch_of_heads" for t in inside
               if t in g.outputs or any(all(r is not n for n in region) for r in g.readers.get(t, []))}
    added: dict[str, str] = {}  # outside rank-4 tensor -> its rank-3 view
    before: list[tuple[onnx.NodeProto, onnx.NodeProto]] = []
    after: list[tuple[onnx.NodeProto, onnx.NodeProto]] = []
    for node in region:
        for i, t in enumerate(node.input):
            if t in renamed:
                node.input[i] = renamed[t]
            elif t and t not in inside and not g.constant(t):
                if t not in added:
                    added[t] = f"{t}_heads_as_batch"
                    before.append((node, _reshape(g, t, added[t], [-1, *g.shape(t)[2:]], added[t])))
                node.input[i] = added[t]
        for i, t in enumerate(node.output):
            if t in renamed:
                node.output[i] = renamed[t]
                after.append((node, _reshape(g, renamed[t], t, [-1, heads, *g.shape(t)[2:]], f"{t}_heads")))
        if node.op_type in ("Softmax", "LogSoftmax"):
            set_attribute(node, "axis", -1)
    nodes = list(g.model.graph.node)
    for anchor, reshape in before:
        nodes.insert(next(i for i, n in enumerate(nodes) if n is anchor), reshape)
    for anchor, reshape in after:
        nodes.insert(next(i for i, n in enumerate(nodes) if n is anchor) + 1, reshape)
    del g.model.graph.node[:]
    g.model.graph.node.extend(nodes)
    stale = inside | set(added.values()) | set(renamed.values())
    kept = [v for v in g.model.graph.value_info if v.name not in stale]
    del g.model.graph.value_info[:]
    g.model.graph.value_info.extend(kept)


@rewrites_a_copy
def heads_to_batch(model: onnx.ModelProto) -> int:
    """Rewrite every head region (module docstring) on rank-3 tensors, in place; return how many
    regions were rewritten. O(nodes) a region, with one onnx shape inference each."""
    if not any(node.op_type == "MatMul" for node in model.graph.node):
        return 0
    rewritten = 0
    while True:
        g = _Heads(model)
        seed = next((n for n in model.graph.node if n.op_type == "MatMul" and g.heads(n.input[0]) is not None
                     and g.heads(n.input[0])[1] > 1 and g.head_wise(n, g.heads(n.input[0]))), None)
        if seed is None:
            return rewritten
        _rewrite(g, _region(g, seed))
        rewritten += 1
