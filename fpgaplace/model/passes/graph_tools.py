"""Small helpers every pass shares: node naming, producer/consumer maps, constants, types.

All helpers work on ``onnx.ModelProto`` in place or return plain Python data; every pass is a
rewrite in place wrapped by ``rewrites_a_copy``, so that the caller's model is never mutated.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

from fpgaplace.model.ir import outer_references, producer_index, unique_op_names
from fpgaplace.model.passes.inference import inferred_view
from fpgaplace.util import graphs

PassResult = tuple[onnx.ModelProto, int]
"""What every pass returns: the new model and how many changes it made."""

FUSED_INTO_KEY = "fpgaplace.fused_into"
"""Node ``metadata_props`` key naming the node a fused node belongs to (its group head)."""

def name_nodes(model: onnx.ModelProto) -> int:
    """Give every node a unique name, in place, by the IR's rule (``fpgaplace.model.ir.unique_op_names``
    with each node's position in ``graph.node`` as its index); return how many were renamed.
    O(n)."""
    nodes = model.graph.node
    renamed = 0
    for node, name in zip(nodes, unique_op_names(enumerate(nodes)), strict=True):
        if name != node.name:
            node.name = name
            renamed += 1
    return renamed


def producers(graph: onnx.GraphProto) -> dict[str, onnx.NodeProto]:
    """Tensor name -> the node producing it."""
    return {out: graph.node[i] for out, i in producer_index(graph.node).items()}


def consumers(graph: onnx.GraphProto) -> dict[str, list[onnx.NodeProto]]:
    """Tensor name -> nodes reading it (a node reading a tensor twice appears once)."""
    result: dict[str, list[onnx.NodeProto]] = defaultdict(list)
    for node in graph.node:
        for name in dict.fromkeys(node.input):
            if name:
                result[name].append(node)
        for name in subgraph_inputs(node):
            result[name].append(node)
    return result


def subgraph_inputs(node: onnx.NodeProto) -> set[str]:
    """Outer-scope tensor names that the node's subgraphs (If/Loop/Scan bodies) read."""
    return set(outer_references(node))


def output_names(graph: onnx.GraphProto) -> set[str]:
    return {o.name for o in graph.output}


def initializer_map(graph: onnx.GraphProto) -> dict[str, onnx.TensorProto]:
    return {t.name: t for t in graph.initializer}


def constant_initializers(model: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    """Initializers whose value is fixed: from IR 4 on, one also listed as a graph input is a
    default the caller may override, so it is not a constant."""
    graph = model.graph
    inputs = {i.name for i in graph.input}
    inits = initializer_map(graph)
    if model.ir_version < 4:
        return inits
    return {name: t for name, t in inits.items() if name not in inputs}


def constant_value(model: onnx.ModelProto, name: str,
                   inits: dict[str, onnx.TensorProto] | None = None,
                   prods: dict[str, onnx.NodeProto] | None = None) -> np.ndarray | None:
    """The value of tensor ``name`` if it is a constant initializer or a ``Constant`` output."""
    inits = constant_initializers(model) if inits is None else inits
    if name in inits:
        return numpy_helper.to_array(inits[name])
    prods = producers(model.graph) if prods is None else prods
    node = prods.get(name)
    if node is not None and node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
        for attr in node.attribute:
            if attr.name == "value":
                return numpy_helper.to_array(attr.t)
    return None


def add_initializer(model: onnx.ModelProto, tensor: onnx.TensorProto) -> None:
    """Append an initializer (and, below IR 4 where the format requires it, a graph input)."""
    model.graph.initializer.append(tensor)
    if model.ir_version < 4:
        model.graph.input.append(
            helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims)))


def remove_initializers(model: onnx.ModelProto, names: set[str]) -> None:
    """Drop the named initializers (and their graph-input entries below IR 4)."""
    graph = model.graph
    kept = [t for t in graph.initializer if t.name not in names]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    if model.ir_version < 4:
        inputs = [i for i in graph.input if i.name not in names]
        del graph.input[:]
        graph.input.extend(inputs)


def rename_tensor(graph: onnx.GraphProto, old: str, new: str) -> None:
    """Make every reader of ``old`` (node inputs, graph outputs) read ``new`` instead."""
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name == old:
                node.input[i] = new
        for attr in node.attribute:
            for sub in list(attr.graphs) + ([attr.g] if attr.HasField("g") else []):
                rename_tensor(sub, old, new)
    for out in graph.output:
        if out.name == old:
            out.name = new


def bypass(graph: onnx.GraphProto, node: onnx.NodeProto, source: str) -> bool:
    """Remove a pass-through ``node`` whose output equals tensor ``source``; True if done.

    Readers of the node's output read ``source``. When the output is a graph output the
    producer of ``source`` is made to produce that name instead (only if ``source`` is a node
    output that is not itself a graph output); otherwise the node is kept.
    """
    out = node.output[0]
    outputs = output_names(graph)
    if out in outputs:
        prods = producers(graph)
        if source in outputs or source not in prods:
            return False
        producer = prods[source]
        for i, name in enumerate(producer.output):
            if name == source:
                producer.output[i] = out
        graph.node.remove(node)
        rename_tensor(graph, source, out)
        return True
    graph.node.remove(node)
    rename_tensor(graph, out, source)
    return True


def attribute(node: onnx.NodeProto, name: str, default=None):
    for attr in node.attribute:
        if attr.name == name:
            return helper.get_attribute_value(attr)
    return default


def set_attribute(node: onnx.NodeProto, name: str, value) -> None:
    for attr in list(node.attribute):
        if attr.name == name:
            node.attribute.remove(attr)
    node.attribute.append(helper.make_attribute(name, value))


def node_metadata(node: onnx.NodeProto, key: str) -> str | None:
    for entry in node.metadata_props:
        if entry.key == key:
            return entry.value
    return None


def set_node_metadata(node: onnx.NodeProto, key: str, value: str | None) -> None:
    """Set (or with ``None`` delete) one ``metadata_props`` entry of a node."""
    for entry in list(node.metadata_props):
        if entry.key == key:
            node.metadata_props.remove(entry)
    if value is not None:
        entry = node.metadata_props.add()
        entry.key, entry.value = key, value


@dataclass(frozen=True)
class TensorType:
    """Element type (``onnx.TensorProto`` enum) and shape; a dim is an int, a str or None."""

    elem_type: int
    shape: tuple[int | str | None, ...] | None

    def static_shape(self) -> tuple[int, ...] | None:
        if self.shape is None or not all(isinstance(d, int) for d in self.shape):
            return None
        return tuple(int(d) for d in self.shape)

    def nbytes(self) -> int | None:
        shape = self.static_shape()
        if shape is None or self.elem_type == onnx.TensorProto.STRING:
            return None
        itemsize = np.dtype(helper.tensor_dtype_to_np_dtype(self.elem_type)).itemsize
        return int(np.prod(shape, dtype=np.int64)) * itemsize


def _value_info_type(info: onnx.ValueInfoProto) -> TensorType | None:
    if not info.type.HasField("tensor_type"):
        return None
    tensor = info.type.tensor_type
    shape = None
    if tensor.HasField("shape"):
        shape = tuple(
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
            for d in tensor.shape.dim
        )
    return TensorType(tensor.elem_type, shape)


def tensor_types(model: onnx.ModelProto) -> dict[str, TensorType]:
    """Type and shape of every tensor onnx shape inference can find (inputs, initializers,
    intermediates, outputs). Missing entries mean inference could not tell."""
    try:
        inferred = inferred_view(model, strict_mode=False, data_prop=True)  # the weights stay out (passes.inference)
    except Exception:  # noqa: BLE001 - inference is best-effort; passes skip unknown tensors
        inferred = model
    graph = inferred.graph
    types: dict[str, TensorType] = {}
    for info in list(graph.value_info) + list(graph.input) + list(graph.output):
        found = _value_info_type(info)
        if found is not None and found.elem_type:
            types[info.name] = found
    for init in model.graph.initializer:
        types[init.name] = TensorType(init.data_type, tuple(init.dims))
    return types


def topological_indices(graph: onnx.GraphProto) -> list[int]:
    """Positions in ``graph.node`` in a dependency-respecting order, stable with respect to the
    stored order (``fpgaplace.util.graphs.topological_order``, O((n + e) log n)); a node reading its
    own output is not a dependency. A cycle raises ``graphs.CycleError`` (a ``ValueError``)."""
    prods = {out: i for i, node in enumerate(graph.node) for out in node.output if out}
    edges = [(p, i) for i, node in enumerate(graph.node)
             for p in {prods[t] for t in set(node.input) | subgraph_inputs(node) if t in prods}
             if p != i]
    return graphs.topological_order(len(graph.node), edges)


def topological_order(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """Nodes of ``graph`` (the stored messages, not copies) in topological order."""
    return [graph.node[i] for i in topological_indices(graph)]


def keep_nodes(graph: onnx.GraphProto, positions: list[int]) -> None:
    """Replace ``graph.node`` by the nodes at ``positions`` (in that order)."""
    kept = [onnx.NodeProto.FromString(graph.node[i].SerializeToString()) for i in positions]
    del graph.node[:]
    graph.node.extend(kept)


def sort_nodes(graph: onnx.GraphProto) -> None:
    """Reorder ``graph.node`` topologically, in place."""
    keep_nodes(graph, topological_indices(graph))


def op_counts(model: onnx.ModelProto) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for node in model.graph.node:
        counts[node.op_type] += 1
    return dict(sorted(counts.items()))


def copy_model(model: onnx.ModelProto) -> onnx.ModelProto:
    result = onnx.ModelProto()
    result.CopyFrom(model)
    return result


InPlacePass = Callable[..., int]
"""A pass's rewrite: it changes the model it is given and returns how many changes it made."""


def rewrites_a_copy(in_place: InPlacePass) -> Callable[..., PassResult]:
    """The pass ``(model, **options) -> (new_model, changes)`` that applies ``in_place`` to a copy
    of ``model`` (the caller's model stays as it was). The rewrite itself stays reachable as the
    pass's ``in_place`` attribute: the pass manager, which owns its working model, calls that and
    so saves one copy of every weight per pass run."""

    @functools.wraps(in_place)
    def a_pass(model: onnx.ModelProto, **options) -> PassResult:
        result = copy_model(model)
        return result, in_place(result, **options)

    a_pass.in_place = in_place  # type: ignore[attr-defined]
    return a_pass
