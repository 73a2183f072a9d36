"""The intermediate representation every later stage reads: ``OpGraph``.

An ``OpGraph`` is a DAG of operators (``Op``) over named tensors (``TensorInfo``). It wraps a
``networkx.DiGraph`` whose nodes are op names and whose edges carry the activation tensors one
op hands to another, with their total size in bytes. Parameters (weights) are not edges: they
are the graph's initializers plus *constant tensors* — the outputs of nodes that depend on
initializers only (``Constant``, ``ConstantOfShape`` of a stored shape, ``DequantizeLinear`` of
int8 weights, a ``Transpose`` of a weight ...). Those constant nodes are not ops; they are kept
in ``constant_nodes`` so that ``to_onnx`` can rebuild exactly the model it came from.

Building the graph is O(V + E) plus a stable topological sort, O((V + E) log V).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import networkx as nx
import numpy as np
import onnx
from onnx import helper

from fpgaplace.model.qdq import is_qdq
from fpgaplace.util import graphs
from fpgaplace.util.errors import FpgaplaceError

# Bits per element of ONNX element types numpy cannot express exactly (packed sub-byte types).
_SUB_BYTE_BITS = {
    onnx.TensorProto.INT4: 4,
    onnx.TensorProto.UINT4: 4,
}
for _name in ("FLOAT4E2M1", "INT2", "UINT2"):
    if hasattr(onnx.TensorProto, _name):
        _SUB_BYTE_BITS[getattr(onnx.TensorProto, _name)] = 2 if "INT2" in _name else 4
STRING_ELEMENT_BYTES = 8  # a string element is costed as one pointer


@dataclass
class TensorInfo:
    """A tensor with a concrete shape (after binding the inputs and resolving every shape)."""

    name: str
    shape: tuple[int, ...]
    dtype: str  # numpy dtype name, e.g. "float32", "int8" ("object" for strings)
    elem_type: int = onnx.TensorProto.FLOAT  # the ONNX element type (TensorProto.DataType)
    quant_bits: int | None = None
    """The bit width of the grid its values lie on when a QONNX quantizer (Quant, BipolarQuant,
    Trunc) produced it; None otherwise. ``nbytes`` stays that of ``elem_type``, as ONNX stores it."""

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def bits_per_element(self) -> int:
        if self.elem_type in _SUB_BYTE_BITS:
            return _SUB_BYTE_BITS[self.elem_type]
        if self.elem_type == onnx.TensorProto.STRING:
            return 8 * STRING_ELEMENT_BYTES
        try:
            return 8 * np.dtype(self.dtype).itemsize
        except TypeError:  # a dtype numpy does not know (bfloat16, float8 without ml_dtypes)
            return 8 * _itemsize_from_onnx(self.elem_type)

    @property
    def nbytes(self) -> int:
        return (self.numel * self.bits_per_element + 7) // 8


def _itemsize_from_onnx(elem_type: int) -> int:
    try:
        return int(np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).itemsize)
    except (KeyError, TypeError, ValueError):
        return 4


@dataclass
class Op:
    """One operator of the model, with its cost figures.

    ``inputs`` are the node's positional inputs ('' for an omitted optional input);
    ``implicit_inputs`` are outer tensors read by its subgraph attributes (If/Loop/Scan bodies).
    ``node`` is the ONNX node it came from (its name set to ``name``).
    """

    name: str
    op_type: str
    domain: str
    attrs: dict[str, Any]
    inputs: list[str]
    outputs: list[str]
    index: int  # position in the source ONNX graph
    macs: int = 0
    param_bytes: int = 0  # bytes of parameter (weight) inputs, as stored
    input_bytes: int = 0  # bytes of activation inputs
    output_bytes: int = 0
    fpga_supported: bool = True  # its op class may run on an FPGA (the op library, hw.plan_op, says whether a core can)
    implicit_inputs: list[str] = field(default_factory=list)
    node: onnx.NodeProto | None = field(default=None, repr=False, compare=False)
    body_dot_product_macs: int = 0  # of a control-flow op: the part of ``macs`` its bodies' dot products do

    def all_inputs(self) -> list[str]:
        """Explicit then implicit input tensor names, without blanks or repeats."""
        return list(dict.fromkeys(t for t in [*self.inputs, *self.implicit_inputs] if t))


@dataclass
class _Source:
    """What an ``OpGraph`` and all subgraphs cut from it share: the source model's protos."""

    model: onnx.ModelProto
    initializers: dict[str, onnx.TensorProto]
    value_infos: dict[str, onnx.ValueInfoProto]
    constant_nodes: list[onnx.NodeProto]  # in topological order
    constant_producer: dict[str, int]  # constant tensor -> index into constant_nodes

    @classmethod
    def of(cls, model: onnx.ModelProto, constant_nodes: list[onnx.NodeProto]) -> _Source:
        g = model.graph
        value_infos = {v.name: v for v in [*g.value_info, *g.input, *g.output]}
        return cls(model, {t.name: t for t in g.initializer}, value_infos, constant_nodes,
                   producer_index(constant_nodes))


def producer_index(nodes: Iterable[onnx.NodeProto]) -> dict[str, int]:
    """Tensor name -> position (in ``nodes``) of the node that writes it; empty names (an omitted
    optional output) are skipped. O(outputs). The one producer map: the front end, the split, the
    report and the passes (``graph_tools.producers``) all build theirs here."""
    return {t: i for i, node in enumerate(nodes) for t in node.output if t}


def upstream_nodes(nodes: list[onnx.NodeProto], producer: dict[str, int], tensors: Iterable[str]) -> set[int]:
    """Positions (in ``nodes``) of the nodes ``tensors`` are computed from: their producers and,
    transitively, the producers of those nodes' inputs (``producer`` as ``producer_index`` gives).
    Depth-first, O(the nodes reached and their inputs)."""
    needed: set[int] = set()
    stack = [producer[t] for t in tensors if t in producer]
    while stack:
        i = stack.pop()
        if i not in needed:
            needed.add(i)
            stack += [producer[t] for t in nodes[i].input if t in producer]
    return needed


def outer_references(node: onnx.NodeProto) -> list[str]:
    """Tensors a node's subgraph attributes (If/Loop/Scan bodies, nested too) read from the
    enclosing scope, in order of first use. O(size of the subgraphs)."""
    found: list[str] = []
    for attr in node.attribute:
        bodies = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
        for g in bodies:
            found += _free_tensors(g)
    return list(dict.fromkeys(found))


def _free_tensors(graph: onnx.GraphProto) -> list[str]:
    defined = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    free: list[str] = []
    for node in graph.node:
        for t in [*node.input, *outer_references(node)]:
            if t and t not in defined:
                free.append(t)
        defined.update(node.output)
    free += [v.name for v in graph.output if v.name not in defined]
    return free


def unique_op_names(nodes: Iterable[tuple[int, onnx.NodeProto]]) -> list[str]:
    """The IR's op names for ``(index, node)`` pairs: a node keeps its name when that name is
    non-empty and used once among ``nodes``; otherwise it becomes ``"<op_type>_<index>"``,
    suffixed ``"_<k>"`` while that clashes with a name already given or with an original name.
    O(n) (plus the rare suffix search)."""
    nodes = list(nodes)
    counts: dict[str, int] = {}
    for _, node in nodes:
        if node.name:
            counts[node.name] = counts.get(node.name, 0) + 1
    taken: set[str] = set()
    names = []
    for index, node in nodes:
        name = node.name if node.name and counts[node.name] == 1 else f"{node.op_type}_{index}"
        base, suffix = name, 1
        while name in taken or (name != node.name and name in counts):
            name, suffix = f"{base}_{suffix}", suffix + 1
        taken.add(name)
        names.append(name)
    return names


class OpGraph:
    """Ops in topological order, tensors with shapes, parameters, and the edge graph."""

    def __init__(
        self,
        name: str,
        ops: Iterable[Op],
        tensors: dict[str, TensorInfo],
        params: set[str],
        inputs: list[str],
        outputs: list[str],
        model: onnx.ModelProto,
        constant_nodes: list[onnx.NodeProto] | None = None,
        param_storage_bytes: dict[str, int] | None = None,
        notes: list[str] | None = None,
        _source: _Source | None = None,
    ) -> None:
        self.name = name
        self.tensors = tensors
        self.params = set(params)
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.notes = list(notes or [])
        self._source = _source or _Source.of(model, list(constant_nodes or []))
        self._model: onnx.ModelProto | None = model if _source is None else None
        self.param_storage_bytes = dict(param_storage_bytes or {})
        op_list = list(ops)
        self._producer: dict[str, str] = {}
        self._consumers: dict[str, list[str]] = {}
        self.graph = self._build_graph(op_list)
        self.ops: dict[str, Op] = {op.name: op for op in self._sorted(op_list)}

    # ---- construction -------------------------------------------------------------------
    def _build_graph(self, ops: list[Op]) -> nx.DiGraph:
        graph = nx.DiGraph()
        for op in ops:
            if op.name in graph:
                raise FpgaplaceError(f"{self.name}: two ops are named '{op.name}'; names must be unique")
            graph.add_node(op.name, op=op)
            for t in op.outputs:
                if t:
                    self._producer[t] = op.name
        for op in ops:
            for t in op.all_inputs():
                self._consumers.setdefault(t, []).append(op.name)
                src = self._producer.get(t)
                if src is None or t in self.params:
                    continue
                if not graph.has_edge(src, op.name):
                    graph.add_edge(src, op.name, tensors=[], bytes=0)
                edge = graph.edges[src, op.name]
                edge["tensors"].append(t)
                edge["bytes"] += self.tensors[t].nbytes if t in self.tensors else 0
        return graph

    def _sorted(self, ops: list[Op]) -> list[Op]:
        """``ops`` in topological order, smallest ``Op.index`` first among ready ops (ties in
        list order)."""
        position = {op.name: i for i, op in enumerate(ops)}
        edges = [(position[a], position[b]) for a, b in self.graph.edges]
        try:
            order = graphs.topological_order(len(ops), edges, key=lambda i: ops[i].index)
        except graphs.CycleError as cycle:
            raise FpgaplaceError(
                f"{self.name}: the graph has a cycle through op '{ops[cycle.node].name}'; expected a DAG"
            ) from None
        return [ops[i] for i in order]

    # ---- queries --------------------------------------------------------------------------
    @property
    def model(self) -> onnx.ModelProto:
        """The source model (for a subgraph: its own model, built on first use)."""
        if self._model is None:
            self._model = self.to_onnx()
        return self._model

    @functools.cached_property
    def is_qdq(self) -> bool:
        """Whether its model is a QDQ model (``fpgaplace.model.qdq.is_qdq``), asked once."""
        return is_qdq(self.model)

    def producer(self, tensor: str) -> str | None:
        """Name of the op producing ``tensor`` (None for graph inputs and parameters)."""
        return self._producer.get(tensor)

    def consumers(self, tensor: str) -> list[str]:
        """Names of the ops reading ``tensor``, in topological order."""
        return list(self._consumers.get(tensor, []))

    def topological_order(self) -> list[str]:
        return list(self.ops)

    @property
    def total_macs(self) -> int:
        return sum(op.macs for op in self.ops.values())

    @property
    def total_param_bytes(self) -> int:
        """Stored bytes of the distinct parameters the ops read (shared weights count once)."""
        used = {t for op in self.ops.values() for t in op.all_inputs() if t in self.params}
        return sum(self.param_nbytes(t) for t in used)

    def param_nbytes(self, tensor: str) -> int:
        """Stored bytes of parameter ``tensor`` (int8 for a dequantized int8 weight)."""
        if tensor in self.param_storage_bytes:
            return self.param_storage_bytes[tensor]
        info = self.tensors.get(tensor)
        return info.nbytes if info else 0

    def __len__(self) -> int:
        return len(self.ops)

    def __repr__(self) -> str:
        return f"OpGraph({self.name!r}, ops={len(self.ops)}, macs={self.total_macs})"

    # ---- subgraphs and export ------------------------------------------------------------
    def subgraph(self, op_names: Iterable[str], name: str | None = None) -> OpGraph:
        """The ops ``op_names`` as a graph of their own.

        Tensors they read from outside become graph inputs; tensors they produce that an op
        outside reads, or that are outputs of this graph, become graph outputs. O(V + E).
        """
        chosen = list(dict.fromkeys(op_names))
        unknown = [n for n in chosen if n not in self.ops]
        if unknown:
            raise FpgaplaceError(f"{self.name}: subgraph asks for op '{unknown[0]}', which is not in the graph")
        members = set(chosen)
        ordered = [n for n in self.ops if n in members]
        inputs: list[str] = []
        outputs: list[str] = []
        graph_outputs = set(self.outputs)
        for n in ordered:
            op = self.ops[n]
            for t in op.all_inputs():
                if t not in self.params and self._producer.get(t) not in members and t not in inputs:
                    inputs.append(t)
        for n in ordered:
            for t in self.ops[n].outputs:
                outside = any(c not in members for c in self._consumers.get(t, []))
                if t and (outside or t in graph_outputs) and t not in outputs:
                    outputs.append(t)
        ops = [replace(self.ops[n]) for n in ordered]
        used = {t for op in ops for t in [*op.all_inputs(), *op.outputs]} | set(outputs)
        params = {t for t in used if t in self.params}
        tensors = {t: info for t, info in self.tensors.items() if t in used}
        storage = {t: b for t, b in self.param_storage_bytes.items() if t in params}
        return OpGraph(
            name or f"{self.name}_sub",
            ops,
            tensors,
            params,
            inputs,
            outputs,
            self._source.model,
            param_storage_bytes=storage,
            _source=self._source,
        )

    def to_onnx(self) -> onnx.ModelProto:
        """A self-contained ONNX model of this graph (passes onnx.checker, runs in onnxruntime).

        Constant nodes that compute the parameters the ops read are included before the ops.
        """
        src = self._source
        params_needed = {t for op in self.ops.values() for t in op.all_inputs() if t in self.params}
        params_needed |= {t for t in self.outputs if t in self.params}
        const_nodes = self._constant_nodes_for(params_needed)
        const_inputs = {t for node in const_nodes for t in node.input if t}
        init_names = [t for t in src.initializers if t in params_needed or t in const_inputs]
        initializers = [src.initializers[t] for t in init_names]
        nodes = [*const_nodes, *(self._node_of(op) for op in self.ops.values())]
        graph_inputs = [self._value_info(t) for t in self.inputs]
        if src.model.ir_version < 4:  # IR 3 requires every initializer to be a graph input too
            graph_inputs += [
                helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in initializers
            ]
        boundary = set(self.inputs) | set(self.outputs) | set(init_names)
        inner = [src.value_infos[t] for t in self.tensors if t not in boundary and t in src.value_infos]
        graph = helper.make_graph(
            nodes,
            self.name,
            graph_inputs,
            [self._value_info(t) for t in self.outputs],
            initializer=initializers,
            value_info=inner,
        )
        model = helper.make_model(
            graph,
            opset_imports=list(src.model.opset_import),
            ir_version=src.model.ir_version,
            producer_name="fpgaplace",
        )
        model.functions.extend(src.model.functions)
        return model

    def _constant_nodes_for(self, tensors: set[str]) -> list[onnx.NodeProto]:
        """Constant nodes producing ``tensors``, transitively, in source order."""
        src = self._source
        needed: set[int] = set()
        stack = [src.constant_producer[t] for t in tensors if t in src.constant_producer]
        while stack:
            i = stack.pop()
            if i in needed:
                continue
            needed.add(i)
            stack += [src.constant_producer[t] for t in src.constant_nodes[i].input if t in src.constant_producer]
        return [src.constant_nodes[i] for i in sorted(needed)]

    def _node_of(self, op: Op) -> onnx.NodeProto:
        if op.node is not None:
            return op.node
        return helper.make_node(op.op_type, op.inputs, op.outputs, name=op.name, domain=op.domain, **op.attrs)

    def _value_info(self, tensor: str) -> onnx.ValueInfoProto:
        """The source model's value info of ``tensor``, else one built from its TensorInfo."""
        if tensor in self._source.value_infos:
            return self._source.value_infos[tensor]
        info = self.tensors.get(tensor)
        if info is None:
            raise FpgaplaceError(f"{self.name}: tensor '{tensor}' has no known type; cannot export it")
        return helper.make_tensor_value_info(tensor, info.elem_type, list(info.shape))
