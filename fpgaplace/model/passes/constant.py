"""Constant folding: evaluate every node whose inputs are all constant and store the result.

A node is foldable when it is a deterministic standard-domain op without subgraphs and each
of its inputs is a constant initializer or the output of a foldable node (so whole constant
subgraphs fold at once, e.g. the ``ConstantOfShape`` weights of the onnx package's "light"
models). The tensors that leave the foldable set are computed in ONE onnxruntime session
(falling back to ``onnx.reference`` if onnxruntime rejects the subgraph) and become
initializers under their own names; the foldable nodes no longer needed are removed.
A tensor bigger than ``max_folded_bytes`` stays computed at run time so folding never blows
up the model (e.g. an ``Expand`` to a huge shape), but for the weight operand of a Conv,
ConvTranspose, Gemm or MatMul, folded up to ``MAX_FOLDED_WEIGHT_BYTES`` so the quantizer takes it
as a weight (int8, symmetric) rather than as an activation. Cost: one sweep, O(n + e), plus the
evaluation of the constant subgraph.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from fpgaplace.model import ops
from fpgaplace.model.passes.graph_tools import (
    add_initializer,
    constant_initializers,
    consumers,
    keep_nodes,
    output_names,
    rewrites_a_copy,
    tensor_types,
    topological_indices,
)
from fpgaplace.util import onnxrt

DEFAULT_MAX_FOLDED_BYTES = 1 << 24  # 16 MiB: bigger than any single ResNet-50 weight
MAX_FOLDED_WEIGHT_BYTES = 1 << 31  # a weight matrix (VGG-19's first FC: 411 MB in float) is folded up to 2 GiB,
# the protobuf limit, so that the quantizer sees it as a weight
WEIGHT_INPUTS = {"Conv": 1, "ConvTranspose": 1, "Gemm": 1, "MatMul": 1}  # op type -> the input holding its weight


def _has_subgraph(node: onnx.NodeProto) -> bool:
    return any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
               for a in node.attribute)


def _foldable_positions(model: onnx.ModelProto, order: list[int]) -> list[int]:
    constants = set(constant_initializers(model))
    foldable: list[int] = []
    for i in order:
        node = model.graph.node[i]
        if (node.domain not in ops.STANDARD_DOMAINS or not ops.is_deterministic(node.op_type, node.domain)
                or _has_subgraph(node)):
            continue
        if all(not name or name in constants for name in node.input):
            foldable.append(i)
            constants.update(name for name in node.output if name)
    return foldable


def _evaluate(model: onnx.ModelProto, nodes: list[onnx.NodeProto],
              wanted: list[str]) -> dict[str, np.ndarray] | None:
    """Values of ``wanted`` computed from ``nodes`` and the model's constants, or None."""
    inits = constant_initializers(model)
    read = {name for node in nodes for name in node.input if name}
    graph = helper.make_graph(
        list(nodes), "constant_subgraph", [],
        [onnx.ValueInfoProto(name=name) for name in wanted],
        initializer=[inits[name] for name in sorted(read & set(inits))],
    )
    sub = helper.make_model(graph, opset_imports=list(model.opset_import))
    sub.ir_version = max(model.ir_version, 4)
    try:
        values = onnxrt.session(sub, "constant subgraph").run(wanted, {})  # quiet: a failure falls back
    except Exception:  # noqa: BLE001 - fall back to the reference implementation
        try:
            from onnx.reference import ReferenceEvaluator

            values = ReferenceEvaluator(sub).run(wanted, {})
        except Exception:  # noqa: BLE001 - leave the subgraph unfolded
            return None
    return {name: np.asarray(value) for name, value in zip(wanted, values, strict=True)}


@rewrites_a_copy
def fold_constants(model: onnx.ModelProto, *, max_folded_bytes: int = DEFAULT_MAX_FOLDED_BYTES) -> int:
    """Replace constant subgraphs by initializers; return the model and the nodes removed."""
    graph = model.graph
    order = topological_indices(graph)
    foldable = _foldable_positions(model, order)
    if not foldable:
        return 0
    foldable_set = set(foldable)
    produced = {name: i for i in foldable for name in graph.node[i].output if name}
    readers = consumers(graph)
    outputs = output_names(graph)
    types = tensor_types(model)
    position = {id(node): i for i, node in enumerate(graph.node)}

    def read_outside(name: str) -> bool:
        return any(position.get(id(n)) not in foldable_set for n in readers.get(name, []))

    boundary = [name for name in produced if name not in outputs and read_outside(name)]
    weights = {node.input[WEIGHT_INPUTS[node.op_type]] for node in graph.node
               if node.op_type in WEIGHT_INPUTS and len(node.input) > WEIGHT_INPUTS[node.op_type]}

    def limit(name: str) -> int:
        return max(max_folded_bytes, MAX_FOLDED_WEIGHT_BYTES) if name in weights else max_folded_bytes

    small = [name for name in boundary if name not in types or (types[name].nbytes() or 0) <= limit(name)]
    values = _evaluate(model, [graph.node[i] for i in foldable], small) if small else {}
    if values is None:
        return 0
    folded = {name for name, value in values.items() if value.nbytes <= limit(name)}
    # nodes still needed: ancestors (within the foldable set) of tensors that stay computed
    needed: set[int] = set()
    stack = [produced[name] for name in produced
             if name not in folded and (name in outputs or read_outside(name))]
    while stack:
        i = stack.pop()
        if i in needed:
            continue
        needed.add(i)
        stack.extend(produced[t] for t in graph.node[i].input if t in produced)
    folded -= {name for i in needed for name in graph.node[i].output}
    removed = foldable_set - needed
    if not removed:
        return 0
    for name in sorted(folded):
        add_initializer(model, numpy_helper.from_array(values[name], name))
    keep_nodes(graph, [i for i in range(len(graph.node)) if i not in removed])
    return len(removed)
