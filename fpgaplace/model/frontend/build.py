"""Building the ``OpGraph`` of a checked, bound and shaped model: tensor infos, constant folding
into parameters, QONNX bit widths, and each op's MACs and FPGA flag from its class in
``fpgaplace.model.ops`` (control flow costed from its bodies). O(nodes + tensors).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from fpgaplace.model import ops
from fpgaplace.model.frontend.bind import initializer_names
from fpgaplace.model.frontend.shapes import is_qonnx_quantizer, qonnx_bits
from fpgaplace.model.ir import (
    Op,
    OpGraph,
    TensorInfo,
    outer_references,
    producer_index,
    unique_op_names,
    upstream_nodes,
)
from fpgaplace.model.ops import STANDARD_DOMAINS
from fpgaplace.model.qdq import read_widths

FPGA_OPS: frozenset[str] = ops.op_types(lambda op_class: op_class.fpga)
"""Op types the FPGA cores can run (a view of ``fpgaplace.model.ops``, which decides)."""


def dot_product_macs(graph: OpGraph) -> int:
    """MACs of the dot-product ops only: convolution, matrix-product, attention and recurrent ops,
    those in control-flow bodies included (the published convention counts conv and FC layers)."""
    return sum(op.macs if ops.is_dot_product(op.op_type, op.domain) else op.body_dot_product_macs
               for op in graph.ops.values())


def _tensor_infos(model: onnx.ModelProto, notes: list[str]) -> dict[str, TensorInfo]:
    graph = model.graph
    infos: dict[str, TensorInfo] = {}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        info = _info_from_value(value, notes)
        if info is not None:
            infos[value.name] = info
    for tensor in graph.initializer:
        dtype = _dtype_name(tensor.data_type)
        infos[tensor.name] = TensorInfo(tensor.name, tuple(tensor.dims), dtype, tensor.data_type)
    return infos


def _dtype_name(elem_type: int) -> str:
    if elem_type == onnx.TensorProto.STRING:
        return "object"
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name
    except (KeyError, TypeError, ValueError):
        return helper.tensor_dtype_to_string(elem_type).removeprefix("TensorProto.").lower()


def _info_from_value(value: onnx.ValueInfoProto, notes: list[str]) -> TensorInfo | None:
    if not value.type.HasField("tensor_type"):
        return None
    tensor_type = value.type.tensor_type
    if tensor_type.elem_type == onnx.TensorProto.UNDEFINED or not tensor_type.HasField("shape"):
        return None
    shape = []
    unknown = []
    for axis, dim in enumerate(tensor_type.shape.dim):
        if dim.HasField("dim_value") and dim.dim_value > 0:
            shape.append(dim.dim_value)
        elif dim.HasField("dim_value") and dim.dim_value == 0:
            shape.append(0)  # a genuinely empty dimension
        else:
            shape.append(1)
            unknown.append(axis)
    if unknown:
        notes.append(f"tensor '{value.name}' dims {unknown} unknown, taken as 1")
    return TensorInfo(value.name, tuple(shape), _dtype_name(tensor_type.elem_type), tensor_type.elem_type)


def _is_constant_node(node: onnx.NodeProto, constants: set[str]) -> bool:
    """A deterministic standard node without subgraphs (or a QONNX quantizer: a quantized weight)
    whose inputs are all in ``constants``."""
    if is_qonnx_quantizer(node):
        return all(t in constants for t in node.input if t)
    if node.domain not in STANDARD_DOMAINS or not ops.is_deterministic(node.op_type, node.domain):
        return False
    if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
        return False
    return all(t in constants for t in node.input if t)


def constant_flags(nodes: Iterable[onnx.NodeProto], initializers: set[str]) -> list[bool]:
    """Whether each of ``nodes`` (in topological order) computes a constant from ``initializers``
    and the constants computed before it: the nodes the front end folds into parameters (they
    are no ops; whoever reads one reads a parameter). O(nodes + edges)."""
    constants = set(initializers)
    flags = []
    for node in nodes:
        flags.append(_is_constant_node(node, constants))
        if flags[-1]:
            constants.update(t for t in node.output if t)
    return flags


def _param_storage(constant_nodes: list[onnx.NodeProto], infos: dict[str, TensorInfo]) -> dict[str, int]:
    """Stored bytes of each constant tensor: a dequantized weight is stored quantized, a QONNX
    quantized one at its bit width."""
    storage = {}
    for node in constant_nodes:
        for t in node.output:
            if not t or t not in infos:
                continue
            if infos[t].quant_bits is not None:
                storage[t] = (infos[t].numel * infos[t].quant_bits + 7) // 8
            elif node.op_type == "DequantizeLinear" and node.input[0] in storage:
                storage[t] = storage[node.input[0]]
            elif node.op_type == "DequantizeLinear" and node.input[0] in infos:
                storage[t] = infos[node.input[0]].nbytes
            else:
                storage[t] = infos[t].nbytes
    return storage


def build(model: onnx.ModelProto, positions: list[int], source: str, notes: list[str]) -> OpGraph:
    graph = model.graph
    infos = _tensor_infos(model, notes)
    initializers = initializer_names(graph)
    folded = constant_flags(graph.node, initializers)
    constant_nodes = [node for node, constant in zip(graph.node, folded, strict=True) if constant]
    compute = [(index, node) for index, node, constant in zip(positions, graph.node, folded, strict=True)
               if not constant]
    constants = initializers | {t for node in constant_nodes for t in node.output if t}
    _read_qonnx_bits(model, infos, notes)
    storage = _param_storage(constant_nodes, infos)
    scope = _outer_scope(model, constant_nodes, [node for _, node in compute], infos)
    graph_ops = []
    for (index, node), name in zip(compute, unique_op_names(compute), strict=True):
        proto = onnx.NodeProto()
        proto.CopyFrom(node)
        proto.name = name
        op = Op(
            name=name,
            op_type=node.op_type,
            domain=node.domain,
            attrs=ops.attribute_values(node),
            inputs=list(node.input),
            outputs=list(node.output),
            index=index,
            implicit_inputs=outer_references(node),
            node=proto,
        )
        _fill_costs(op, scope, infos, constants, storage, notes)
        graph_ops.append(op)
    inputs = [v.name for v in graph.input if v.name not in initializers]
    outputs = [v.name for v in graph.output]
    built = OpGraph(
        graph.name or Path(source).stem,
        graph_ops,
        infos,
        constants,
        inputs,
        outputs,
        model,
        constant_nodes=constant_nodes,
        param_storage_bytes=storage,
        notes=notes,
    )
    return built


def _read_qonnx_bits(model: onnx.ModelProto, infos: dict[str, TensorInfo], notes: list[str]) -> None:
    """Set ``quant_bits`` on every QONNX quantizer's output and on every DequantizeLinear output whose
    int8 input has a width recorded in the model (``model.qdq.read_widths``), in ``infos``, in place,
    and note the widths found; a width that is not a constant scalar in 1..64 is noted and left unset."""
    graph = model.graph
    values = {t.name: numpy_helper.to_array(t) for t in graph.initializer if math.prod(t.dims) == 1}
    values.update(ops.constant_node_values(graph.node))
    widths: dict[str, int] = {}
    recorded = {name: int(width["bits"]) for name, width in read_widths(model).items()}
    for node in graph.node:  # a QDQ model's recorded widths (a QONNX model rewritten, an int4 quantization)
        if node.op_type == "DequantizeLinear" and node.input[0] in recorded and node.output[0] in infos:
            infos[node.output[0]] = dataclasses.replace(infos[node.output[0]], quant_bits=recorded[node.input[0]])
            widths[node.output[0]] = recorded[node.input[0]]
    for node in graph.node:
        if not is_qonnx_quantizer(node) or node.output[0] not in infos:
            continue
        bits = qonnx_bits(node, values)
        if bits is None:
            notes.append(f"QONNX {node.op_type} '{node.name or node.output[0]}': its bit width is not a constant; "
                         f"its output keeps its element type's width")
            continue
        infos[node.output[0]] = dataclasses.replace(infos[node.output[0]], quant_bits=bits)
        widths[node.output[0]] = bits
    if widths:
        notes.append(f"QONNX: {len(widths)} quantized tensors, {min(widths.values())} to "
                     f"{max(widths.values())} bits")
        carried = _carry_bits(graph, infos)
        if carried:
            notes.append(f"QONNX: {carried} more tensors keep a quantized input's width through ops that move or "
                         f"select values (MaxPool, Reshape, Concat, Relu, ...)")


WIDTH_PRESERVING_OPS = frozenset({
    "MaxPool", "GlobalMaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Identity", "Concat",
    "Split", "Slice", "Gather", "Relu", "DepthToSpace", "SpaceToDepth", "Expand", "Tile",
})
"""Ops whose outputs hold only values of their data inputs (or zero, for Relu), so they stay on a
quantized input's grid and keep its bit width (as qonnx's InferDataTypes carries datatypes)."""


def _carry_bits(graph: onnx.GraphProto, infos: dict[str, TensorInfo]) -> int:
    """Give the outputs of width-preserving ops whose data inputs all have ``quant_bits`` the widest
    of them (in ``infos``, in place, in topological order; Concat reads all its inputs, the others
    their first). Returns how many tensors got a width. O(nodes)."""
    carried = 0
    for node in graph.node:
        if node.op_type not in WIDTH_PRESERVING_OPS or node.domain not in STANDARD_DOMAINS or not node.input:
            continue
        data = [t for t in node.input if t] if node.op_type == "Concat" else node.input[:1]
        widths = [infos[t].quant_bits if t in infos else None for t in data]
        if not widths or None in widths:
            continue
        for t in node.output:
            if t in infos and infos[t].quant_bits is None:
                infos[t] = dataclasses.replace(infos[t], quant_bits=max(widths))
                carried += 1
    return carried


def _outer_scope(model: onnx.ModelProto, constant_nodes: list[onnx.NodeProto], compute: list[onnx.NodeProto],
                 infos: dict[str, TensorInfo]) -> ops.Scope:
    """What control-flow bodies read from the top-level graph: shapes, element types, the values
    of small initializers and Constant nodes, and of the small constant tensors other constant
    nodes compute for control-flow ops (a Loop's trip count as Cast(Constant), ...), and the opsets."""
    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer
              if math.prod(t.dims) <= ops.SMALL_CONSTANT}
    values.update(ops.constant_node_values(constant_nodes))
    produced = {t for node in constant_nodes for t in node.output if t}
    wanted = {t for node in compute if ops.is_control_flow(node.op_type, node.domain) for t in node.input
              if t in produced and t not in values and t in infos and infos[t].numel <= ops.SMALL_CONSTANT}
    values.update(_evaluated_constants(model, constant_nodes, wanted))
    return ops.Scope(
        {name: info.shape for name, info in infos.items()},
        {name: info.elem_type for name, info in infos.items()},
        values,
        tuple(model.opset_import),
    )


def _evaluated_constants(model: onnx.ModelProto, constant_nodes: list[onnx.NodeProto],
                         wanted: set[str]) -> dict[str, np.ndarray]:
    """The values of the constant tensors ``wanted``, by onnx's reference evaluator over only the
    constant nodes producing them (transitively; O(those nodes)); {} if it cannot run them."""
    if not wanted:
        return {}
    needed = upstream_nodes(constant_nodes, producer_index(constant_nodes), wanted)
    nodes = [constant_nodes[i] for i in sorted(needed)]
    reads = {t for node in nodes for t in node.input if t}
    names = sorted(wanted)
    graph = helper.make_graph(nodes, "constants", [], [helper.make_empty_tensor_value_info(t) for t in names],
                              initializer=[t for t in model.graph.initializer if t.name in reads])
    try:
        from onnx.reference import ReferenceEvaluator

        results = ReferenceEvaluator(helper.make_model(graph, opset_imports=list(model.opset_import))).run(names, {})
    except Exception:  # the evaluator raises whatever its op implementations raise
        return {}
    return {t: np.asarray(value) for t, value in zip(names, results, strict=True)}


def _fill_costs(
    op: Op, scope: ops.Scope, infos: dict[str, TensorInfo], params: set[str], storage: dict[str, int],
    notes: list[str],
) -> None:
    """Set ``op``'s MACs, byte counts and FPGA support flag; a control-flow op's costing is noted."""
    reads = op.all_inputs()
    if ops.is_control_flow(op.op_type, op.domain):
        cost = ops.control_flow_cost(op, scope)
        op.macs, op.body_dot_product_macs = cost.macs, cost.dot_product_macs
        notes.append(cost.note)
    else:
        op.macs = ops.count_macs(op, scope.shapes)
    op.param_bytes = sum(storage.get(t, infos[t].nbytes if t in infos else 0) for t in reads if t in params)
    op.input_bytes = sum(infos[t].nbytes for t in reads if t not in params and t in infos)
    op.output_bytes = sum(infos[t].nbytes for t in op.outputs if t in infos)
    strings = any(infos[t].dtype == "object" for t in [*reads, *op.outputs] if t in infos)
    op.fpga_supported = ops.is_fpga(op.op_type, op.domain) and not strings
