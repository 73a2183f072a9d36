"""Dead-code elimination and common-subexpression elimination.

Dead code: a node none of whose outputs reaches a graph output (one reverse sweep over a
topological order, O(n + e)), and constant initializers no live node reads.
Common subexpressions: two nodes with the same domain, op type, attributes and input tensors
compute the same outputs (for deterministic ops), so the later one's readers can read the
earlier one's outputs (one forward sweep with a hash of each node's key, O(n) expected plus
the renames). Both follow the textbook compiler passes (Aho et al., "Compilers", ch. 9).
"""

from __future__ import annotations

import onnx

from fpgaplace.model import ops
from fpgaplace.model.passes.graph_tools import (
    constant_initializers,
    keep_nodes,
    output_names,
    remove_initializers,
    rename_tensor,
    rewrites_a_copy,
    subgraph_inputs,
    topological_indices,
)


@rewrites_a_copy
def eliminate_dead_code(model: onnx.ModelProto) -> int:
    """Remove nodes that do not reach a graph output and constant initializers nobody reads."""
    graph = model.graph
    live = output_names(graph)
    order = topological_indices(graph)
    alive: set[int] = set()
    for i in reversed(order):
        node = graph.node[i]
        if any(name in live for name in node.output if name):
            alive.add(i)
            live.update(name for name in node.input if name)
            live.update(subgraph_inputs(node))
    removed_nodes = len(graph.node) - len(alive)
    if removed_nodes:
        keep_nodes(graph, [i for i in order if i in alive])
    unused = {name for name in constant_initializers(model) if name not in live}
    remove_initializers(model, unused)
    return removed_nodes + len(unused)


def _node_key(node: onnx.NodeProto) -> tuple:
    attrs = tuple(sorted((a.name, a.SerializeToString(deterministic=True)) for a in node.attribute))
    used_outputs = tuple(bool(name) for name in node.output)
    return (node.domain, node.op_type, tuple(node.input), attrs, used_outputs)


@rewrites_a_copy
def eliminate_common_subexpressions(model: onnx.ModelProto) -> int:
    """Merge nodes with equal (domain, op type, attributes, inputs); keep the first one.

    A duplicate whose output is a graph output is kept (the graph must still name it)."""
    graph = model.graph
    outputs = output_names(graph)
    first_by_key: dict[tuple, onnx.NodeProto] = {}
    duplicates: set[int] = set()
    order = topological_indices(graph)
    for i in order:
        node = graph.node[i]
        if not ops.is_deterministic(node.op_type, node.domain):
            continue
        key = _node_key(node)
        kept = first_by_key.get(key)
        if kept is None:
            first_by_key[key] = node
            continue
        if any(name in outputs for name in node.output):
            continue
        duplicates.add(i)
        for old, new in zip(node.output, kept.output, strict=True):
            if old:
                rename_tensor(graph, old, new)
    # renames above already updated the inputs (and so the keys) of later nodes
    if duplicates:
        keep_nodes(graph, [i for i in order if i not in duplicates])
    return len(duplicates)
