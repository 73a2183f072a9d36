"""Static shapes to constants: once a model's input dims are bound, ``Shape`` and ``Size`` of a tensor
whose shape is known are constants, and so is every node they drive whose inputs are all constant
(``Shape -> Gather -> Div -> Concat -> Reshape`` targets, as torch and paddle2onnx export them).

``fold_static_shapes`` replaces those ``Shape``/``Size`` nodes by initializers, evaluates the
constant subgraph they drive with onnx's reference evaluator, and stores the tensors the rest of
the graph reads from it as initializers too. Only nodes whose outputs have known shapes of at most
``max_elements`` elements fold (nothing big is ever evaluated; e.g. a ``ConstantOfShape`` mask
stays computed), so onnx shape inference then sees the
``Reshape`` targets and the folded nodes no longer exist. Cost: one sweep, O(n + e), plus the
evaluation of the shape subgraph; ``fold_static_shapes_to_fixpoint`` repeats inference and folding
while shapes keep appearing (each round removes at least one ``Shape``, so at most that many rounds).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper

from fpgaplace.model import ops
from fpgaplace.model.ir import outer_references, upstream_nodes
from fpgaplace.model.passes.graph_tools import keep_nodes, output_names, rewrites_a_copy

DEFAULT_MAX_ELEMENTS = 4096
"""The largest shape-driven tensor stored as an initializer (shape vectors are a few elements)."""


def _known_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    """The fully known shapes of the model's tensors (inputs, value_info, outputs, initializers)."""
    graph = model.graph
    shapes: dict[str, tuple[int, ...]] = {}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        tensor = value.type.tensor_type if value.type.HasField("tensor_type") else None
        if tensor is None or not tensor.HasField("shape"):
            continue
        if all(d.HasField("dim_value") for d in tensor.shape.dim):
            shapes[value.name] = tuple(d.dim_value for d in tensor.shape.dim)
    shapes.update({t.name: tuple(t.dims) for t in graph.initializer})
    return shapes


def _shape_value(node: onnx.NodeProto, shape: tuple[int, ...]) -> np.ndarray:
    """What ``Shape`` (with its opset-15 ``start``/``end``) or ``Size`` of a tensor of ``shape`` gives."""
    if node.op_type == "Size":
        return np.array(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
    attrs = {a.name: a.i for a in node.attribute}
    start, end = attrs.get("start", 0), attrs.get("end", len(shape))
    return np.array(shape[slice(start, end)], dtype=np.int64)


def _is_static_shape_node(node: onnx.NodeProto, shapes: dict[str, tuple[int, ...]]) -> bool:
    return (node.op_type in ("Shape", "Size") and ops.normalize_domain(node.domain) == ""
            and len(node.input) == 1 and node.input[0] in shapes and len(node.output) == 1)


def _is_small(shape: tuple[int, ...] | None, max_elements: int) -> bool:
    """A known shape of at most ``max_elements`` elements (an unknown one may be anything: no)."""
    return shape is not None and int(np.prod(shape, dtype=np.float64)) <= max_elements


def _is_foldable(node: onnx.NodeProto, constants: set[str]) -> bool:
    """A deterministic standard node without subgraphs whose inputs are all constant."""
    if ops.normalize_domain(node.domain) != "" or not ops.is_deterministic(node.op_type, node.domain):
        return False
    if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
        return False
    return all(not t or t in constants for t in node.input)


def _evaluate(model: onnx.ModelProto, nodes: list[onnx.NodeProto], feeds: dict[str, np.ndarray],
              wanted: list[str]) -> dict[str, np.ndarray] | None:
    """``wanted`` computed from ``nodes``, the ``feeds`` and the model's initializers; None if
    onnx's reference evaluator cannot run them."""
    read = {t for node in nodes for t in node.input if t}
    initializers = [t for t in model.graph.initializer if t.name in read]
    initializers += [numpy_helper.from_array(value, name) for name, value in feeds.items() if name in read]
    graph = helper.make_graph(nodes, "static_shapes", [], [onnx.ValueInfoProto(name=t) for t in wanted],
                              initializer=initializers)
    try:
        from onnx.reference import ReferenceEvaluator

        values = ReferenceEvaluator(helper.make_model(graph, opset_imports=list(model.opset_import))).run(wanted, {})
    except Exception:  # noqa: BLE001 - the evaluator raises whatever its op implementations raise
        return None
    return {name: np.asarray(value) for name, value in zip(wanted, values, strict=True)}


@rewrites_a_copy
def fold_static_shapes(model: onnx.ModelProto, *, max_elements: int = DEFAULT_MAX_ELEMENTS) -> int:
    """Fold the ``Shape``/``Size`` nodes of known-shape tensors and the constant subgraph they
    drive into initializers (the module docstring says which); return the model and the number
    of nodes removed. The nodes must be in topological order."""
    graph = model.graph
    shapes = _known_shapes(model)
    constants = {t.name for t in graph.initializer}
    feeds: dict[str, np.ndarray] = {}
    shape_nodes: list[int] = []
    driven: list[int] = []
    from_shapes: set[str] = set()
    for i, node in enumerate(graph.node):
        if _is_static_shape_node(node, shapes):
            feeds[node.output[0]] = _shape_value(node, shapes[node.input[0]])
            shape_nodes.append(i)
        elif (any(t in from_shapes for t in node.input) and _is_foldable(node, constants)
              and all(_is_small(shapes.get(t), max_elements) for t in node.output if t)):
            driven.append(i)
        else:
            continue
        from_shapes.update(t for t in node.output if t)
        constants.update(t for t in node.output if t)
    if not feeds:
        return 0
    folded_set = set(shape_nodes) | set(driven)
    produced = {t: i for i in folded_set for t in graph.node[i].output if t}
    outside = {t for i, node in enumerate(graph.node) if i not in folded_set for t in _reads(node)}
    graph_outputs = output_names(graph)
    boundary = sorted(t for t in produced if t in outside or t in graph_outputs)
    values = dict(feeds)
    computed = [t for t in boundary if t not in feeds]
    if computed:
        evaluated = _evaluate(model, [graph.node[i] for i in driven], feeds, computed)
        if evaluated is None:
            evaluated = {}
        values.update(evaluated)
    stored = {t for t in boundary if t in values and values[t].size <= max_elements and t not in graph_outputs}
    needed = _still_needed(graph, produced, [t for t in boundary if t not in stored])
    removed = folded_set - needed
    if not removed:
        return 0
    stored -= {t for i in needed for t in graph.node[i].output}
    removed_outputs = {t for i in removed for t in graph.node[i].output}
    graph.initializer.extend(numpy_helper.from_array(values[t], t) for t in sorted(stored))
    keep_nodes(graph, [i for i in range(len(graph.node)) if i not in removed])
    kept_values = {t for node in graph.node for t in node.output} | {t.name for t in graph.initializer}
    _drop_value_info(graph, (removed_outputs - kept_values) | stored)
    return len(removed)


def _reads(node: onnx.NodeProto) -> set[str]:
    return {t for t in node.input if t} | set(outer_references(node))


def _still_needed(graph: onnx.GraphProto, produced: dict[str, int], computed_at_run_time: list[str]) -> set[int]:
    """The folded nodes that tensors staying computed still need (their ancestors in the set)."""
    return upstream_nodes(graph.node, produced, computed_at_run_time)


def _drop_value_info(graph: onnx.GraphProto, names: set[str]) -> None:
    """Remove the value_info of tensors that are now initializers or gone."""
    kept = [v for v in graph.value_info if v.name not in names]
    del graph.value_info[:]
    graph.value_info.extend(kept)


def fold_static_shapes_to_fixpoint(model: onnx.ModelProto, infer: Callable[[onnx.ModelProto], onnx.ModelProto],
                                   max_rounds: int = 64) -> tuple[onnx.ModelProto, int]:
    """Alternate ``infer`` (shape inference) and ``fold_static_shapes`` until no node folds (at
    most ``max_rounds`` rounds); return the model and the nodes removed in all."""
    total = 0
    for _ in range(max_rounds):
        model, removed = fold_static_shapes(model)
        if not removed:
            break
        total += removed
        model = infer(model)
    return model, total
