"""Table islands: connected elementwise ops of a QDQ model that compute a function of one int8 tensor.

In an int8 QDQ model an activation such as SiLU arrives as ``x_q -> DQ -> Sigmoid -> Q -> DQ ->
Mul(DQ(x_q), .) -> Q``: several float ops (with their own Q/DQ pairs) between one int8 tensor
``x_q`` and one QuantizeLinear. Whatever the ops are, the output is a function of the 256 values
``x_q`` can take, so a core computes it with one 256-entry table (``fpgaplace.hw.table``).

An *island* is such a set of nodes:

* its *exit* is a QuantizeLinear (per-tensor int8) whose float input comes from an elementwise
  op of ``TABLE_OPS`` (the *exit op*, which carries the island's table layer);
* walking back from the exit op, every input of an island op is a scalar constant (an
  initializer, a ``Constant``, or a DequantizeLinear of one), the float output of another
  island op, or a DequantizeLinear of an int8 tensor; such a tensor is *inside* the island when a
  QuantizeLinear of an island op made it and all its readers are island DequantizeLinears, else
  it is a *source*; an island has exactly one source ``x``;
* no float tensor inside is read outside the island (or is a graph output);
* at least one island op has no kernel of its own (so Relu/Clip chains and Adds of a
  constant keep their requantizing kernels).

Tensors inside that another island or op also needs are not absorbed: the walk marks them as
sources and tries again (at most once per internal tensor); a walk that ends with two sources
(an LSTM's last ``tanh(C)``, C an Add of two activations read by nothing else) tries once more with
every internal int8 tensor a source. One index per model, O(nodes x
island size), cached like the QDQ index.

Given the graph's tensor shapes, the islands also hold the channel-permutation chains of
``fpgaplace.hw.permutation`` (a channel shuffle's Reshape/Transpose/Reshape, a detector head's
reshape to CHW order): their last op carries a ``shuffle`` or ``reorder`` stage and their other
ops are free members, placed and routed as a table island's (``Island.kernel`` names the stage's
kernel).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from fpgaplace.hw.permutation import Chain, find_chain
from fpgaplace.hw.qdq import QdqIndex, qdq_index

TABLE_OPS = frozenset({
    "Abs", "Add", "Celu", "Ceil", "Clip", "Cos", "Div", "Elu", "Erf", "Exp", "Floor", "Gelu", "HardSigmoid",
    "HardSwish", "Identity", "LeakyRelu", "Log", "Max", "Min", "Mish", "Mul", "Neg", "Pow", "PRelu",
    "Reciprocal", "Relu", "Round", "Selu", "Sigmoid", "Sign", "Sin", "Softplus", "Softsign", "Sqrt", "Sub",
    "Tanh", "ThresholdedRelu",
})
"""Elementwise op types an island may hold (any scalar constant operands)."""

KERNEL_OPS = frozenset({"Relu", "Clip", "Add", "Identity"})
"""Island op types another kernel runs by itself: an island of these alone is left to it."""


@dataclass(frozen=True)
class Island:
    """One table island: the int8 ``source`` it reads, the QuantizeLinear ``exit`` node's name and
    int8 ``output``, the ``exit_op`` carrying the table, and every node of the island in
    topological order (the source's DequantizeLinears, constants, internal Q/DQ, ``exit`` last)."""

    source: str
    exit: str
    output: str
    exit_op: str
    nodes: tuple[str, ...]
    members: tuple[str, ...]  # the nodes placed with the exit op: all but the source's DQs, constants and the exit
    kernel: str = "table"  # the exit op's stage: "table", "shuffle" (a channel permutation), "reorder" or "alias"
    permutation: tuple[int, ...] = ()  # a shuffle's source channel of each output channel
    transpose: tuple[int, int, int] = ()  # a reorder's (R, C, E): a sample read as [R, C, E], written [C, R, E]


class _Walk:
    """The backward walk from one exit op (see the module docstring)."""

    def __init__(self, index: QdqIndex, outputs: set[str]) -> None:
        self.index, self.outputs = index, outputs

    def scalar_constant(self, tensor: str) -> list[onnx.NodeProto] | None:
        """The nodes producing a scalar constant (none for an initializer), or None."""
        value = self.index.constant(tensor)
        node = self.index.producer.get(tensor)
        if value is not None:
            return ([node] if node is not None else []) if np.asarray(value).size == 1 else None
        if node is not None and node.op_type == "DequantizeLinear":
            inner = self.index.constant(node.input[0])
            if inner is not None and inner.size == 1 and self.index.qparams(node) is not None:
                producer = self.index.producer.get(node.input[0])
                return [node, *([producer] if producer is not None else [])]
        return None

    def absorbable(self, node: onnx.NodeProto | None) -> bool:
        """Whether ``node`` may be inside an island: elementwise, every constant operand a scalar
        (a dense layer's bias Add, with its vector of int8 biases, ends the walk: its output is a
        source). O(operands)."""
        return _float_op(node) and all(self.scalar_constant(t) is not None or not self.constant_view(t)
                                       for t in node.input if t)

    def constant_view(self, tensor: str) -> bool:
        """A constant, or a DequantizeLinear of one."""
        if self.index.constant(tensor) is not None:
            return True
        node = self.index.producer.get(tensor)
        return (node is not None and node.op_type == "DequantizeLinear"
                and self.index.constant(node.input[0]) is not None)

    def int8_of(self, dq: onnx.NodeProto) -> str | None:
        """The per-tensor int8 tensor a DequantizeLinear reads, or None."""
        params = self.index.qparams(dq)
        if params is None or params[0].size != 1 or params[1].dtype != np.int8:
            return None
        return dq.input[0]

    def island(self, exit_q: onnx.NodeProto, keep_out: frozenset[str]) -> tuple[set[str], set[str]] | None:
        """(node names, source tensors) of the island ending at ``exit_q``, or None when a node
        on the way is not elementwise or a constant operand is not a scalar."""
        nodes: set[str] = {exit_q.name}
        sources: set[str] = set()
        pending = [exit_q.input[0]]
        while pending:
            tensor = pending.pop()
            node = self.index.producer.get(tensor)
            if node is None or node.name in nodes:
                if node is None:
                    return None  # a float graph input
                continue
            if node.op_type == "DequantizeLinear":
                q = self.int8_of(node)
                if q is None:
                    return None
                nodes.add(node.name)
                maker = self.index.producer.get(q)
                inner = (maker is not None and maker.op_type == "QuantizeLinear" and q not in keep_out
                         and q not in self.outputs and self.absorbable(self.index.producer.get(maker.input[0])))
                if inner:
                    nodes.add(maker.name)
                    pending.append(maker.input[0])
                else:
                    sources.add(q)
                continue
            if node.op_type not in TABLE_OPS or tensor in self.outputs:
                return None
            nodes.add(node.name)
            for operand in (t for t in node.input if t):
                constant = self.scalar_constant(operand)
                if constant is not None:
                    nodes.update(n.name for n in constant)
                elif self.index.constant(operand) is not None:
                    return None  # a constant that is not one value
                else:
                    pending.append(operand)
        return nodes, sources

    def leaks(self, nodes: set[str], sources: set[str]) -> tuple[str | None, bool]:
        """(an internal int8 tensor read outside the island, whether a float tensor leaks)."""
        for name in nodes:
            node = self.index.by_name[name]
            if node.op_type == "QuantizeLinear" and _is_exit(self.index, node, nodes):
                continue
            for tensor in node.output:
                readers = self.index.consumers.get(tensor, [])
                if all(r.name in nodes for r in readers) and tensor not in self.outputs:
                    continue
                if node.op_type == "QuantizeLinear":
                    return tensor, False
                if node.op_type == "DequantizeLinear" and node.input[0] not in sources:
                    if self.index.constant(node.input[0]) is None:
                        return node.input[0], False  # an internal tensor's view read outside
                    continue  # a constant's view: others may share it
                if node.op_type in ("DequantizeLinear", "Constant"):
                    continue
                return None, True
        return None, False


def _float_op(node: onnx.NodeProto | None) -> bool:
    return node is not None and node.op_type in TABLE_OPS


def _is_exit(index: QdqIndex, node: onnx.NodeProto, nodes: set[str]) -> bool:
    return not any(r.name in nodes for r in index.consumers.get(node.output[0], []))


def _find(index: QdqIndex, exit_q: onnx.NodeProto, outputs: set[str]) -> Island | None:
    """The island ending at ``exit_q``, or None (see the module docstring)."""
    walk = _Walk(index, outputs)
    keep_out: set[str] = set()
    while True:
        found = walk.island(exit_q, frozenset(keep_out))
        if found is None:
            return None
        nodes, sources = found
        leaked, float_leak = walk.leaks(nodes, sources)
        if float_leak:
            return None
        if leaked is None:
            inner = _inner_tensors(index, nodes, exit_q) - keep_out
            if len(sources) == 1 or not inner:
                break
            keep_out |= inner  # two sources: the smallest island (every internal int8 tensor a source) may have one
            continue
        if leaked in keep_out:
            return None
        keep_out.add(leaked)
    ops = [index.by_name[n] for n in nodes if index.by_name[n].op_type in TABLE_OPS]
    if len(sources) != 1 or all(op.op_type in KERNEL_OPS for op in ops):
        return None
    exit_op = index.producer[exit_q.input[0]]
    source = next(iter(sources))
    order = tuple(n.name for n in index.model.graph.node if n.name in nodes)
    members = tuple(n for n in order if n != exit_q.name and not _reads(index.by_name[n], source)
                    and not _computes_constant(index, index.by_name[n]))
    return Island(source, exit_q.name, exit_q.output[0], exit_op.name, order, members)


def _inner_tensors(index: QdqIndex, nodes: set[str], exit_q: onnx.NodeProto) -> set[str]:
    """The int8 tensors the island's own QuantizeLinears (all but its exit) make."""
    return {index.by_name[n].output[0] for n in nodes
            if n != exit_q.name and index.by_name[n].op_type == "QuantizeLinear"}


def _computes_constant(index: QdqIndex, node: onnx.NodeProto) -> bool:
    """A Constant, or a DequantizeLinear of a constant: islands may share it (HardSwish's 3 and 6),
    and every device that reads it computes it (``flow.split``), so it is no island's member."""
    return node.op_type == "Constant" or (node.op_type == "DequantizeLinear"
                                          and index.constant(node.input[0]) is not None)


@dataclass(frozen=True)
class Islands:
    """Every island of a model, and the island of each node in one."""

    islands: tuple[Island, ...]
    of_node: dict[str, Island]

    def exit_op(self, node: str) -> Island | None:
        """The island whose table ``node`` carries, if it is an exit op."""
        island = self.of_node.get(node)
        return island if island is not None and island.exit_op == node else None


def _shuffle(chain: Chain) -> Island:
    """A data-movement chain as an island: its members are all but the source's
    DequantizeLinear and the exit."""
    return Island(chain.source, chain.exit, chain.output, chain.last_op, chain.nodes, chain.nodes[1:-1], chain.kernel,
                  chain.permutation, chain.transpose)


def find_islands(model: onnx.ModelProto, tensors: Mapping[str, Any] | None = None) -> Islands:
    """Every island of ``model`` (a QDQ model; none in a float model), with the channel-permutation
    chains when the graph's ``tensors`` (name -> object with a ``shape``) are given. A node belongs
    to at most one island: a later exit whose walk reaches a node of an earlier island is not one."""
    index = qdq_index(model)
    outputs = {o.name for o in model.graph.output}
    found: list[Island] = []
    of_node: dict[str, Island] = {}
    for node in reversed(model.graph.node):  # outermost exits first
        if node.op_type != "QuantizeLinear" or node.name in of_node:
            continue
        chain = find_chain(index, node, outputs, tensors) if tensors is not None else None
        if chain is not None and not any(n in of_node for n in chain.nodes[1:-1]):
            found.append(_shuffle(chain))
            of_node.update((n, found[-1]) for n in found[-1].members)
            continue
        producer = index.producer.get(node.input[0])
        if not _float_op(producer) or len(index.consumers.get(node.input[0], [])) != 1:
            continue
        if index.qparams(node) is None or index.qparams(node)[1].dtype != np.int8:
            continue
        island = _find(index, node, outputs)
        if island is None or any(n in of_node for n in island.members):
            continue
        found.append(island)
        of_node.update((n, island) for n in island.members)
    return Islands(tuple(found), of_node)


def _reads(node: onnx.NodeProto, tensor: str) -> bool:
    return node.op_type == "DequantizeLinear" and node.input[0] == tensor


_CACHE: dict[int, tuple[onnx.ModelProto, bool, Islands]] = {}


def islands(model: onnx.ModelProto | None, tensors: Mapping[str, Any] | None = None) -> Islands:
    """The islands of ``model`` (with its channel-permutation chains when the graph's ``tensors``
    are given), found once per model object (an empty set for None)."""
    if model is None:
        return Islands((), {})
    cached = _CACHE.get(id(model))
    if cached is None or cached[0] is not model or (tensors is not None and not cached[1]):
        if len(_CACHE) >= 8 and id(model) not in _CACHE:
            _CACHE.pop(next(iter(_CACHE)))
        cached = (model, tensors is not None, find_islands(model, tensors))
        _CACHE[id(model)] = cached
    return cached[2]
