"""Fuse a layer normalization written out in elementary ops into one ``LayerNormalization``.

Exporters (PyTorch before its LayerNorm export, TensorFlow, hand-made graphs) write
``y = (x - mean(x)) / sqrt(mean((x - mean(x))**2) + eps) * gamma + beta`` over the last axis as

    m = ReduceMean(x)            or  Mul(ReduceSum(x), 1/N)  or  Div(ReduceSum(x), N)
    d = Sub(x, m)
    q = Pow(d, 2)                or  Mul(d, d)
    v = ReduceMean(q)            (or the ReduceSum forms again)
    s = Sqrt(Add(v, eps))
    n = Div(d, s)                or  Mul(d, Reciprocal(s))
    y = Add(Mul(n, gamma), beta)  (gamma and beta optional, either operand order)

onnxruntime's static quantizer leaves that chain in float (only Mul/Add are in its QDQ registry),
while it quantizes a ``LayerNormalization`` (``QDQNormalization``: its input, its scale as a
weight, its bias as an int32 bias), so the chain becomes one op of opset 17 (where
LayerNormalization was added; a model of an older opset is left alone). Every reduction must be
over the last axis with ``keepdims`` 1, every intermediate read by the chain alone, and gamma, beta
and eps constants (gamma and beta a scalar or of the last axis' size). The fused node takes the
name and output of the chain's last node. The same computation with float32 rounding in another
order: equal to the chain within about 1e-6 relative (the tests check 1e-5 with onnxruntime).
One sweep, O(nodes + weights). Source: ONNX operator spec, LayerNormalization (opset 17).
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
    tensor_types,
)

MIN_OPSET = 17


@dataclass
class _Chain:
    """The matched nodes (to remove) and what the fused node needs."""

    x: str
    size: int
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    eps: float = 0.0
    gamma: np.ndarray | None = None
    beta: np.ndarray | None = None


class _Graph:
    """The look-ups one sweep needs: producers, readers, constants, shapes."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.model = model
        self.producers = producers(model.graph)
        self.readers = consumers(model.graph)
        self.outputs = output_names(model.graph)
        self.types = tensor_types(model)
        self.version = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)

    def node(self, tensor: str, *op_types: str) -> onnx.NodeProto | None:
        node = self.producers.get(tensor)
        return node if node is not None and node.op_type in op_types and node.domain in ("", "ai.onnx") else None

    def constant(self, tensor: str) -> np.ndarray | None:
        return constant_value(self.model, tensor, prods=self.producers)

    def private(self, tensor: str, readers: int = 1) -> bool:
        """Read by ``readers`` nodes only, and no graph output."""
        return len(self.readers.get(tensor, [])) == readers and tensor not in self.outputs

    def rank(self, tensor: str) -> int | None:
        known = self.types.get(tensor)
        return len(known.shape) if known is not None and known.shape is not None else None

    def last_size(self, tensor: str) -> int | None:
        known = self.types.get(tensor)
        size = known.shape[-1] if known is not None and known.shape else None
        return size if isinstance(size, int) and size > 0 else None


def _scalar(value: np.ndarray | None) -> float | None:
    return float(value.reshape(-1)[0]) if value is not None and value.size == 1 else None


def _other(node: onnx.NodeProto, tensor: str) -> str | None:
    """The other input of a two-input node one of whose inputs is ``tensor``."""
    if len(node.input) != 2 or tensor not in node.input:
        return None
    return node.input[1] if node.input[0] == tensor else node.input[0]


def _last_axis_reduction(g: _Graph, node: onnx.NodeProto) -> bool:
    """Whether a ReduceMean/ReduceSum reduces exactly the last axis of its input, keeping dims."""
    if attribute(node, "keepdims", 1) != 1:
        return False
    axes = attribute(node, "axes")
    if axes is None and len(node.input) > 1 and node.input[1]:
        found = g.constant(node.input[1])
        axes = None if found is None else [int(a) for a in found.reshape(-1)]
    rank = g.rank(node.input[0])
    return axes is not None and len(axes) == 1 and rank is not None and axes[0] % rank == rank - 1


def _mean_source(g: _Graph, tensor: str) -> tuple[str, list[onnx.NodeProto]] | None:
    """``(x, nodes)`` when ``tensor`` is the mean of ``x`` over its last axis (ReduceMean, or ReduceSum
    times 1/N or divided by N), else None."""
    node = g.node(tensor, "ReduceMean", "ReduceSum", "Mul", "Div")
    if node is None:
        return None
    if node.op_type == "ReduceMean":
        return (node.input[0], [node]) if _last_axis_reduction(g, node) else None
    total = g.node(node.input[0], "ReduceSum")
    if total is None or not g.private(total.output[0]) or not _last_axis_reduction(g, total):
        return None
    factor, size = _scalar(g.constant(node.input[1])), g.last_size(total.input[0])
    if factor is None or size is None:
        return None
    want = 1.0 / size if node.op_type == "Mul" else float(size)
    return (total.input[0], [total, node]) if np.isclose(factor, want, rtol=1e-6) else None


def _square_of(g: _Graph, tensor: str) -> str | None:
    """``d`` when ``tensor`` is ``Pow(d, 2)`` or ``Mul(d, d)``."""
    node = g.node(tensor, "Pow", "Mul")
    if node is None or len(node.input) != 2:
        return None
    if node.op_type == "Mul":
        return node.input[0] if node.input[0] == node.input[1] else None
    return node.input[0] if _scalar(g.constant(node.input[1])) == 2.0 else None


def _inverse_deviation(g: _Graph, tensor: str, chain: list[onnx.NodeProto]) -> tuple[str, float] | None:
    """``(d, eps)`` when ``tensor`` is ``sqrt(mean(d**2) + eps)``; appends the matched nodes."""
    root = g.node(tensor, "Sqrt")
    shifted = g.node(root.input[0], "Add") if root is not None and g.private(root.input[0]) else None
    if shifted is None:
        return None
    for variance in shifted.input:
        eps = _scalar(g.constant(_other(shifted, variance) or ""))
        mean = _mean_source(g, variance) if eps is not None and g.private(variance) else None
        square = mean[0] if mean is not None else None
        d = _square_of(g, square) if square is not None and g.private(square) else None
        if d is not None:
            chain.extend([g.producers[square], *mean[1], shifted, root])
            return d, eps
    return None


def _normalized(g: _Graph, node: onnx.NodeProto) -> _Chain | None:
    """The chain ending at ``node`` = ``d / s`` or ``d * Reciprocal(s)``, up to its gamma and beta."""
    nodes: list[onnx.NodeProto] = []
    if node.op_type == "Div":
        d, deviation = node.input[0], node.input[1]
    elif node.op_type == "Mul":
        pair = [(a, g.node(b, "Reciprocal")) for a, b in (node.input, node.input[::-1])]
        d, reciprocal = next(((a, r) for a, r in pair if r is not None), (None, None))
        if reciprocal is None or not g.private(reciprocal.output[0]):
            return None
        deviation = reciprocal.input[0]
        nodes.append(reciprocal)
    else:
        return None
    if not g.private(deviation):
        return None
    found = _inverse_deviation(g, deviation, nodes)
    sub = g.node(d, "Sub") if found is not None and found[0] == d and g.private(d, 2) else None
    mean = _mean_source(g, sub.input[1]) if sub is not None and g.private(sub.input[1]) else None
    size = g.last_size(sub.input[0]) if sub is not None else None
    if mean is None or mean[0] != sub.input[0] or size is None:
        return None
    return _Chain(sub.input[0], size, [*mean[1], sub, *nodes, node], eps=found[1])


def _affine(g: _Graph, chain: _Chain, attr: str, op_type: str) -> None:
    """Extend ``chain`` by a ``Mul`` by gamma / ``Add`` of beta after it, when there is one."""
    end = chain.nodes[-1].output[0]
    readers = g.readers.get(end, [])
    if not g.private(end) or readers[0].op_type != op_type or readers[0].domain not in ("", "ai.onnx"):
        return
    value = g.constant(_other(readers[0], end) or "")
    if value is None or value.size not in (1, chain.size) or (value.ndim and value.shape[-1] != value.size):
        return
    setattr(chain, attr, np.broadcast_to(value.astype(np.float32).reshape(-1), (chain.size,)).copy())
    chain.nodes.append(readers[0])


def _fresh(g: _Graph, base: str) -> str:
    taken = {t.name for t in g.model.graph.initializer} | set(g.producers) | set(g.readers)
    k = 0
    while f"{base}{k}" in taken:
        k += 1
    return f"{base}{k}"


def _replace(g: _Graph, chain: _Chain) -> None:
    """Put the fused node where the chain's last node was and drop the chain."""
    last = chain.nodes[-1]
    gamma = chain.gamma if chain.gamma is not None else np.ones(chain.size, np.float32)
    names = []
    for what, value in (("scale", gamma), ("bias", chain.beta)):
        if value is not None:
            names.append(_fresh(g, f"{last.name}_{what}"))
            add_initializer(g.model, numpy_helper.from_array(value, names[-1]))
            g.producers[names[-1]] = last  # taken
    fused = helper.make_node("LayerNormalization", [chain.x, *names], [last.output[0]], name=last.name, axis=-1,
                             epsilon=chain.eps)
    fused.metadata_props.extend(last.metadata_props)
    position = list(g.model.graph.node).index(last)
    drop = {id(node) for node in chain.nodes}
    kept = [node for i, node in enumerate(g.model.graph.node) if id(node) not in drop or i == position]
    del g.model.graph.node[:]
    g.model.graph.node.extend(fused if node is last else node for node in kept)


@rewrites_a_copy
def fuse_layernorm(model: onnx.ModelProto) -> int:
    """Replace every decomposed layer normalization over the last axis (module docstring) by one
    ``LayerNormalization``, in place; return how many were fused. O(nodes + weights) per fusion's
    look-ups (each fusion rebuilds them, with onnx shape inference); O(nodes) without reductions."""
    fused = 0
    while any(node.op_type in ("ReduceMean", "ReduceSum") for node in model.graph.node):  # else no shape inference
        g = _Graph(model)
        if g.version < MIN_OPSET:
            return fused
        chain = next((c for c in map(lambda n: _normalized(g, n), g.model.graph.node) if c is not None), None)
        if chain is None:
            return fused
        _affine(g, chain, "gamma", "Mul")
        _affine(g, chain, "beta", "Add")
        _replace(g, chain)
        fused += 1
    return fused
