"""ONNX front end: an ONNX file or ModelProto -> ``OpGraph`` with shapes, bytes and MACs.

Steps: read (with external data from the file's folder), sort the nodes topologically (a cycle
is an error naming an op on it), bind the symbolic batch dim of every graph input to ``batch``,
check with ``onnx.checker``, run onnx shape inference (strict off, with data propagation), then
build the ops. Nodes whose inputs are all constant (initializers or outputs of other such
nodes) are folded into parameters rather than kept as ops (see ``fpgaplace.ir``).

What counts as a MAC (``Op.macs``) — one multiply-accumulate or one simple arithmetic
operation on one element:

* Conv, ConvInteger, QLinearConv: N*Cout*Hout*Wout*(Cin/groups)*kh*kw, i.e. output elements
  times the weight's per-output-channel size (any rank, grouped, depthwise, dilated, strided).
* ConvTranspose: input elements * (Cout/groups) * kernel size.
* Gemm: M*N*K. MatMul, MatMulInteger, QLinearMatMul: output elements (batched and broadcast)
  * K. Bias additions are not counted (the published ResNet/VGG figures leave them out).
* Attention / MultiHeadAttention (com.microsoft): the Q/K/V projection (Attention only),
  Q*K^T and P*V products, plus 3 per softmax element. Plain MatMul-based attention is costed
  op by op.
* Pooling: output elements * kernel size (one op per input element read per output element);
  global pooling: input elements.
* Elementwise ops and activations: one per output element (k-1 per element for k-input Sum,
  Max, Min, Mean). BatchNormalization (inference): one per element (folded scale and shift).
* Softmax, LogSoftmax: 3 per element (exp, accumulate, scale). LayerNormalization and the other
  normalisations: 4 per element (mean, variance, normalise, scale+shift). LRN: size+1 per element.
  Reductions: one per input element. Einsum: the product of all index extents.
* Pure data movement (Reshape, Transpose, Concat, Slice, Gather, Pad, Cast, ...): 0; its cost
  is in its bytes.
* Any other op: its output elements, and it is marked not supported on FPGA cores.

The published 4.09 G for ResNet-50 and 19.6 G for VGG-19 count conv and FC MACs only;
``dot_product_macs`` gives that figure, ``OpGraph.total_macs`` adds the (small) rest.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import helper, shape_inference

from fpgaplace import graphs
from fpgaplace.errors import FpgaplaceError, first_line
from fpgaplace.ir import Op, OpGraph, TensorInfo, outer_references, unique_op_names

STANDARD_DOMAINS = frozenset({"", "ai.onnx"})
CONTRIB_DOMAIN = "com.microsoft"
MIN_OPSET, MAX_OPSET = 9, 21

# ---- op classes ---------------------------------------------------------------------------

CONV_OPS = frozenset({"Conv", "ConvInteger", "QLinearConv", "FusedConv"})
MATMUL_OPS = frozenset({"MatMul", "MatMulInteger", "QLinearMatMul", "FusedMatMul"})
ATTENTION_OPS = frozenset({"Attention", "MultiHeadAttention"})
DOT_PRODUCT_OPS = CONV_OPS | MATMUL_OPS | ATTENTION_OPS | {"ConvTranspose", "Gemm", "Einsum"}
WINDOW_POOL_OPS = frozenset({"MaxPool", "AveragePool", "LpPool", "QLinearAveragePool"})
GLOBAL_POOL_OPS = frozenset(
    {"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool", "QLinearGlobalAveragePool"}
)
VARIADIC_OPS = frozenset({"Sum", "Max", "Min", "Mean"})
ELEMENTWISE_OPS = frozenset(
    {
        # arithmetic and comparison
        "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Neg", "Abs", "Reciprocal", "Sqrt", "Exp",
        "Log", "Floor", "Ceil", "Round", "Sign", "Erf", "Clip", "Where", "Equal", "Less",
        "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Not", "IsNaN", "IsInf",
        "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "Sin", "Cos", "Tan",
        "Asin", "Acos", "Atan", "Sinh", "Cosh", "Tanh", "Asinh", "Acosh", "Atanh",
        # activations
        "Relu", "LeakyRelu", "PRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Elu", "Selu",
        "Celu", "Softplus", "Softsign", "ThresholdedRelu", "Gelu", "Mish", "Shrink",
        "FastGelu", "BiasGelu", "QuickGelu",
        # quantisation and element-wise quantised arithmetic
        "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "QLinearAdd",
        "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu",
        # element-wise resampling
        "Resize", "Upsample",
    }
)
NORMALIZATION_OPS = frozenset(
    {
        "LayerNormalization", "SkipLayerNormalization", "SimplifiedLayerNormalization",
        "InstanceNormalization", "GroupNormalization", "MeanVarianceNormalization",
        "LpNormalization", "RMSNormalization",
    }
)
SOFTMAX_OPS = frozenset({"Softmax", "LogSoftmax"})
REDUCE_OPS = frozenset(
    {
        "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
        "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin",
        "Hardmax", "CumSum",
    }
)
DATA_MOVEMENT_OPS = frozenset(
    {
        "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout", "Transpose",
        "Concat", "Split", "Slice", "Gather", "GatherElements", "GatherND", "Expand", "Tile",
        "Pad", "Cast", "CastLike", "DepthToSpace", "SpaceToDepth", "ScatterElements",
        "ScatterND", "Shape", "Size", "ConstantOfShape", "Range", "OneHot", "Trilu",
        "ReverseSequence",
    }
)
# Contrib (com.microsoft) ops the front end costs; everything else in that domain is unknown.
CONTRIB_OPS = frozenset(
    {
        "Attention", "MultiHeadAttention", "FusedConv", "FusedMatMul", "Gelu", "FastGelu",
        "BiasGelu", "QuickGelu", "QLinearAdd", "QLinearMul", "QLinearSigmoid",
        "QLinearLeakyRelu", "QLinearAveragePool", "QLinearGlobalAveragePool",
        "SkipLayerNormalization", "SimplifiedLayerNormalization",
    }
)
_CONTRIB_ONLY_OPS = CONTRIB_OPS - {"Gelu"}  # Gelu is also a standard op (opset 20)

# Data movement the cores do not run: shape arithmetic and dynamically sized outputs.
_HOST_ONLY_OPS = frozenset({"Shape", "Size", "ConstantOfShape", "Range", "OneHot"})

FPGA_OPS: frozenset[str] = (
    DOT_PRODUCT_OPS
    | WINDOW_POOL_OPS
    | GLOBAL_POOL_OPS
    | VARIADIC_OPS
    | ELEMENTWISE_OPS
    | NORMALIZATION_OPS
    | SOFTMAX_OPS
    | REDUCE_OPS
    | {"BatchNormalization", "LRN"}
    | (DATA_MOVEMENT_OPS - _HOST_ONLY_OPS)
)
"""Op types the FPGA cores can run. Control flow (If, Loop, Scan), string ops,
NonMaxSuppression, TopK, NonZero, Unique, random ops and anything unknown go to CPUs."""

# Nodes never folded into parameters even when their inputs are constant.
_NONDETERMINISTIC_OPS = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}
)

# ---- MAC counting -------------------------------------------------------------------------

Shapes = dict[str, tuple[int, ...]]


def _shape(shapes: Shapes, tensor: str) -> tuple[int, ...] | None:
    return shapes.get(tensor) if tensor else None


def _numel(shapes: Shapes, tensor: str) -> int:
    shape = _shape(shapes, tensor)
    return math.prod(shape) if shape is not None else 0


def _out_numel(op: Op, shapes: Shapes) -> int:
    return _numel(shapes, op.outputs[0]) if op.outputs else 0


def _weight_index(op: Op) -> int:
    return 3 if op.op_type == "QLinearConv" else 1


def _conv_macs(op: Op, shapes: Shapes) -> int:
    weight = _shape(shapes, op.inputs[_weight_index(op)]) if len(op.inputs) > _weight_index(op) else None
    if weight is None:
        return 0
    return _out_numel(op, shapes) * math.prod(weight[1:])


def _conv_transpose_macs(op: Op, shapes: Shapes) -> int:
    weight = _shape(shapes, op.inputs[1])
    if weight is None:
        return 0
    return _numel(shapes, op.inputs[0]) * math.prod(weight[1:])


def _gemm_macs(op: Op, shapes: Shapes) -> int:
    a = _shape(shapes, op.inputs[0])
    if a is None or len(a) != 2:
        return 0
    k = a[0] if op.attrs.get("transA", 0) else a[1]
    return _out_numel(op, shapes) * k


def _matmul_macs(op: Op, shapes: Shapes) -> int:
    a = _shape(shapes, op.inputs[0])
    if not a:
        return 0
    return _out_numel(op, shapes) * a[-1]


def _attention_macs(op: Op, shapes: Shapes) -> int:
    """com.microsoft Attention: x [B,S,Hin] @ W [Hin, Hq+Hk+Hv], then QK^T and PV."""
    x, w = _shape(shapes, op.inputs[0]), _shape(shapes, op.inputs[1])
    out = _shape(shapes, op.outputs[0])
    if x is None or w is None or out is None or len(x) != 3:
        return _out_numel(op, shapes)
    batch, seq, _ = x
    hidden_v = out[-1]
    hidden_qk = (w[-1] - hidden_v) // 2
    heads = int(op.attrs.get("num_heads", 1))
    projection = math.prod(x) * w[-1]
    return projection + batch * seq * seq * (hidden_qk + hidden_v) + 3 * batch * heads * seq * seq


def _multi_head_attention_macs(op: Op, shapes: Shapes) -> int:
    """com.microsoft MultiHeadAttention: q [B,S,Hq], k [B,L,Hk] or [B,N,L,Hd]; QK^T and PV."""
    q = _shape(shapes, op.inputs[0])
    k = _shape(shapes, op.inputs[1]) if len(op.inputs) > 1 else None
    out = _shape(shapes, op.outputs[0])
    if q is None or out is None or len(q) != 3:
        return _out_numel(op, shapes)
    batch, seq, hidden_q = q
    kv_len = seq if k is None else (k[1] if len(k) == 3 else k[2])
    heads = int(op.attrs.get("num_heads", 1))
    return batch * seq * kv_len * (hidden_q + out[-1]) + 3 * batch * heads * seq * kv_len


def _window_pool_macs(op: Op, shapes: Shapes) -> int:
    kernel = op.attrs.get("kernel_shape") or []
    return _out_numel(op, shapes) * math.prod(kernel)


def _input_numel_macs(op: Op, shapes: Shapes) -> int:
    return _numel(shapes, op.inputs[0]) if op.inputs else 0


def _elementwise_macs(op: Op, shapes: Shapes) -> int:
    return _out_numel(op, shapes)


def _variadic_macs(op: Op, shapes: Shapes) -> int:
    operands = len([t for t in op.inputs if t])
    return _out_numel(op, shapes) * max(1, operands - 1)


def _scaled_elementwise(factor: int) -> Callable[[Op, Shapes], int]:
    return lambda op, shapes: factor * _out_numel(op, shapes)


def _lrn_macs(op: Op, shapes: Shapes) -> int:
    return _out_numel(op, shapes) * (int(op.attrs.get("size", 1)) + 1)


def _einsum_macs(op: Op, shapes: Shapes) -> int:
    """Product of the extents of every index letter (no ellipsis); else output elements."""
    equation = str(op.attrs.get("equation", "")).replace(" ", "")
    terms = equation.split("->")[0].split(",")
    if "..." in equation or len(terms) != len(op.inputs):
        return _out_numel(op, shapes)
    extents: dict[str, int] = {}
    for term, tensor in zip(terms, op.inputs, strict=True):
        shape = _shape(shapes, tensor)
        if shape is None or len(shape) != len(term):
            return _out_numel(op, shapes)
        extents.update(zip(term, shape, strict=True))
    return math.prod(extents.values())


def _zero_macs(op: Op, shapes: Shapes) -> int:
    return 0


MAC_RULES: dict[str, Callable[[Op, Shapes], int]] = {
    **dict.fromkeys(CONV_OPS, _conv_macs),
    **dict.fromkeys(MATMUL_OPS, _matmul_macs),
    "ConvTranspose": _conv_transpose_macs,
    "Gemm": _gemm_macs,
    "Einsum": _einsum_macs,
    "Attention": _attention_macs,
    "MultiHeadAttention": _multi_head_attention_macs,
    **dict.fromkeys(WINDOW_POOL_OPS, _window_pool_macs),
    **dict.fromkeys(GLOBAL_POOL_OPS, _input_numel_macs),
    **dict.fromkeys(REDUCE_OPS, _input_numel_macs),
    **dict.fromkeys(ELEMENTWISE_OPS, _elementwise_macs),
    **dict.fromkeys(VARIADIC_OPS, _variadic_macs),
    **dict.fromkeys(SOFTMAX_OPS, _scaled_elementwise(3)),
    **dict.fromkeys(NORMALIZATION_OPS, _scaled_elementwise(4)),
    "BatchNormalization": _elementwise_macs,
    "LRN": _lrn_macs,
    **dict.fromkeys(DATA_MOVEMENT_OPS, _zero_macs),
}


def is_known(op: Op) -> bool:
    """Whether the front end has a cost rule for ``op`` (standard or supported contrib op)."""
    if op.domain in STANDARD_DOMAINS:
        return op.op_type in MAC_RULES and op.op_type not in _CONTRIB_ONLY_OPS
    return op.domain == CONTRIB_DOMAIN and op.op_type in CONTRIB_OPS


def count_macs(op: Op, shapes: Shapes) -> int:
    """MACs of ``op`` by the rules in the module docstring; unknown ops: output elements."""
    if not is_known(op):
        return sum(_numel(shapes, t) for t in op.outputs)
    return int(MAC_RULES[op.op_type](op, shapes))


def dot_product_macs(graph: OpGraph) -> int:
    """MACs of the convolution, matrix-product and attention ops only (the published convention)."""
    return sum(op.macs for op in graph.ops.values() if op.op_type in DOT_PRODUCT_OPS)


# ---- loading -------------------------------------------------------------------------------


def load_onnx(path: str | Path, batch: int = 1) -> OpGraph:
    """Load the ONNX file ``path`` (external data from its folder) as an ``OpGraph``."""
    path = Path(path)
    source = str(path)
    _check_batch(batch, source)
    if not path.exists():
        raise FpgaplaceError(f"{source}: no such file; expected an ONNX model")
    if not path.is_file():
        raise FpgaplaceError(f"{source}: is not a file; expected an ONNX model")
    if path.stat().st_size == 0:
        raise FpgaplaceError(f"{source}: the file is empty; expected an ONNX model")
    try:
        model = onnx.load(source, load_external_data=False)
    except (DecodeError, ValueError, TypeError, RuntimeError, OSError) as exc:
        raise FpgaplaceError(f"{source}: not a valid ONNX protobuf ({first_line(exc)})") from None
    _check_proto(model, source)
    try:
        from onnx.external_data_helper import load_external_data_for_model

        load_external_data_for_model(model, str(path.parent))
    except (OSError, ValueError, RuntimeError, onnx.checker.ValidationError) as exc:
        raise FpgaplaceError(f"{source}: cannot read the model's external data ({first_line(exc)})") from None
    return from_model(model, batch=batch, source=source)


def from_model(model: onnx.ModelProto, batch: int = 1, source: str = "<model>") -> OpGraph:
    """Build the ``OpGraph`` of an in-memory model (not modified). ``source`` names it in errors."""
    _check_batch(batch, source)
    _check_proto(model, source)
    work = onnx.ModelProto()
    work.CopyFrom(model)
    notes: list[str] = []
    positions = _sort_nodes(work, source)
    if _upgrade_old_opset(work, source, notes):
        positions = list(range(len(work.graph.node)))  # the converter rebuilt the node list
    _bind_batch(work, batch, notes)
    _run_checker(work, source, notes)
    work = _infer_shapes(work, source, notes)
    return _build(work, positions, source, notes)


def _check_batch(batch: int, source: str) -> None:
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise FpgaplaceError(f"{source}: batch must be an integer >= 1, got {batch!r}")


def _check_proto(model: onnx.ModelProto, source: str) -> None:
    if not isinstance(model, onnx.ModelProto):
        raise FpgaplaceError(f"{source}: expected an onnx.ModelProto, got {type(model).__name__}")
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise FpgaplaceError(f"{source}: not an ONNX model (no IR version or no graph)")
    if not model.graph.node or not model.graph.output:
        raise FpgaplaceError(f"{source}: the ONNX graph has no nodes or no outputs")


def _sort_nodes(model: onnx.ModelProto, source: str) -> list[int]:
    """Order ``model``'s nodes topologically (stable); a cycle is an error naming an op on it.

    Returns each sorted node's position in the original node list.
    """
    nodes = list(model.graph.node)
    producer: dict[str, int] = {}
    for i, node in enumerate(nodes):
        for t in node.output:
            if t and t in producer:
                raise FpgaplaceError(
                    f"{source}: tensor '{t}' is produced by two nodes ('{_label(nodes, producer[t])}' "
                    f"and '{_label(nodes, i)}'); expected one producer per tensor"
                )
            if t:
                producer[t] = i
    edges = [(producer[t], i) for i, node in enumerate(nodes)
             for t in [*node.input, *outer_references(node)] if t in producer]
    try:
        order = graphs.topological_order(len(nodes), edges)
    except graphs.CycleError as cycle:
        raise FpgaplaceError(
            f"{source}: the graph has a cycle through node '{_label(nodes, cycle.node)}'; expected a DAG"
        ) from None
    if order != list(range(len(nodes))):
        sorted_nodes = [nodes[i] for i in order]
        del model.graph.node[:]
        model.graph.node.extend(sorted_nodes)
    return order


def _label(nodes: list[onnx.NodeProto], i: int) -> str:
    return nodes[i].name or f"{nodes[i].op_type}_{i}"


def _default_opset(model: onnx.ModelProto) -> int:
    for opset in model.opset_import:
        if opset.domain in STANDARD_DOMAINS:
            return opset.version
    return 0


def _upgrade_old_opset(model: onnx.ModelProto, source: str, notes: list[str]) -> bool:
    """Accept opsets 9..21 (newer with a note); upgrade older ones to 9 with onnx's version
    converter. Returns whether the model was converted."""
    version = _default_opset(model)
    if version == 0:
        raise FpgaplaceError(f"{source}: the model imports no default-domain opset")
    if version > MAX_OPSET:
        notes.append(f"opset {version} is newer than the tested range {MIN_OPSET}-{MAX_OPSET}")
    if version >= MIN_OPSET:
        return False
    try:
        from onnx import version_converter

        upgraded = version_converter.convert_version(model, MIN_OPSET)
    except Exception as exc:  # the converter raises bare RuntimeErrors and C++ errors alike
        raise FpgaplaceError(
            f"{source}: opset {version} is older than {MIN_OPSET} and cannot be upgraded ({first_line(exc)})"
        ) from None
    model.CopyFrom(upgraded)
    notes.append(f"upgraded from opset {version} to {MIN_OPSET}")
    return True


def _initializer_names(graph: onnx.GraphProto) -> set[str]:
    return {t.name for t in graph.initializer} | {t.values.name for t in graph.sparse_initializer}


def _bind_batch(model: onnx.ModelProto, batch: int, notes: list[str]) -> None:
    """Set dim 0 of every (non-initializer) graph input that is symbolic or unknown to ``batch``.

    Other unknown input dims become 1 (noted). The batch symbols are replaced everywhere else
    (outputs, value_info) so shape inference sees consistent shapes.
    """
    graph = model.graph
    params = _initializer_names(graph)
    symbols: set[str] = set()
    for value in graph.input:
        if value.name in params or not value.type.HasField("tensor_type"):
            continue
        dims = value.type.tensor_type.shape.dim
        for axis, dim in enumerate(dims):
            if dim.HasField("dim_value") and dim.dim_value > 0:
                if axis == 0 and dim.dim_value != batch:
                    notes.append(f"input '{value.name}' has a fixed batch of {dim.dim_value}; kept (not {batch})")
                continue
            if dim.HasField("dim_param") and dim.dim_param:
                if axis == 0:
                    symbols.add(dim.dim_param)
                elif dim.dim_param not in symbols:
                    notes.append(f"input '{value.name}' dim {axis} ('{dim.dim_param}') unknown, taken as 1")
            elif axis != 0:
                notes.append(f"input '{value.name}' dim {axis} unknown, taken as 1")
            dim.dim_value = batch if axis == 0 or dim.dim_param in symbols else 1
    for value in [*graph.output, *graph.value_info]:
        if value.type.HasField("tensor_type"):
            for dim in value.type.tensor_type.shape.dim:
                if dim.HasField("dim_param") and dim.dim_param in symbols:
                    dim.dim_value = batch


def _run_checker(model: onnx.ModelProto, source: str, notes: list[str]) -> None:
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as exc:
        raise FpgaplaceError(f"{source}: rejected by onnx.checker: {first_line(exc)}") from None
    except ValueError as exc:  # e.g. a model over the 2 GB protobuf limit
        notes.append(f"onnx.checker skipped: {first_line(exc)}")


def _infer_shapes(model: onnx.ModelProto, source: str, notes: list[str]) -> onnx.ModelProto:
    """onnx shape inference, strict off; data propagation first, plain inference as fallback."""
    for data_prop in (True, False):
        try:
            return shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=data_prop)
        except Exception as exc:  # inference raises InferenceError, ValueError or RuntimeError
            failure = first_line(exc)
    notes.append(f"shape inference failed ({failure}); only declared shapes are known")
    return model


# ---- building the OpGraph ------------------------------------------------------------------


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
    """A deterministic standard node without subgraphs whose inputs are all constant."""
    if node.domain not in STANDARD_DOMAINS or node.op_type in _NONDETERMINISTIC_OPS:
        return False
    if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
        return False
    return all(t in constants for t in node.input if t)


def _attr_values(node: onnx.NodeProto) -> dict:
    attrs = {}
    for attr in node.attribute:
        value = helper.get_attribute_value(attr)
        if isinstance(value, bytes):
            value = value.decode("utf-8", errors="replace")
        elif isinstance(value, list) and value and isinstance(value[0], bytes):
            value = [v.decode("utf-8", errors="replace") for v in value]
        attrs[attr.name] = value
    return attrs


def _param_storage(constant_nodes: list[onnx.NodeProto], infos: dict[str, TensorInfo]) -> dict[str, int]:
    """Stored bytes of each constant tensor: a dequantized weight is stored quantized."""
    storage = {}
    for node in constant_nodes:
        for t in node.output:
            if not t or t not in infos:
                continue
            if node.op_type == "DequantizeLinear" and node.input[0] in storage:
                storage[t] = storage[node.input[0]]
            elif node.op_type == "DequantizeLinear" and node.input[0] in infos:
                storage[t] = infos[node.input[0]].nbytes
            else:
                storage[t] = infos[t].nbytes
    return storage


def _build(model: onnx.ModelProto, positions: list[int], source: str, notes: list[str]) -> OpGraph:
    graph = model.graph
    infos = _tensor_infos(model, notes)
    constants = _initializer_names(graph)
    initializer_names = set(constants)
    constant_nodes: list[onnx.NodeProto] = []
    compute: list[tuple[int, onnx.NodeProto]] = []
    for index, node in zip(positions, graph.node, strict=True):
        if _is_constant_node(node, constants):
            constant_nodes.append(node)
            constants.update(t for t in node.output if t)
        else:
            compute.append((index, node))
    storage = _param_storage(constant_nodes, infos)
    shapes = {name: info.shape for name, info in infos.items()}
    ops = []
    for (index, node), name in zip(compute, unique_op_names(compute), strict=True):
        proto = onnx.NodeProto()
        proto.CopyFrom(node)
        proto.name = name
        op = Op(
            name=name,
            op_type=node.op_type,
            domain=node.domain,
            attrs=_attr_values(node),
            inputs=list(node.input),
            outputs=list(node.output),
            index=index,
            implicit_inputs=outer_references(node),
            node=proto,
        )
        _fill_costs(op, shapes, infos, constants, storage)
        ops.append(op)
    inputs = [v.name for v in graph.input if v.name not in initializer_names]
    outputs = [v.name for v in graph.output]
    return OpGraph(
        graph.name or Path(source).stem,
        ops,
        infos,
        constants,
        inputs,
        outputs,
        model,
        constant_nodes=constant_nodes,
        param_storage_bytes=storage,
        notes=notes,
    )


def _fill_costs(
    op: Op, shapes: Shapes, infos: dict[str, TensorInfo], params: set[str], storage: dict[str, int]
) -> None:
    """Set ``op``'s MACs, byte counts and FPGA support flag."""
    reads = op.all_inputs()
    op.macs = count_macs(op, shapes)
    op.param_bytes = sum(storage.get(t, infos[t].nbytes if t in infos else 0) for t in reads if t in params)
    op.input_bytes = sum(infos[t].nbytes for t in reads if t not in params and t in infos)
    op.output_bytes = sum(infos[t].nbytes for t in op.outputs if t in infos)
    strings = any(infos[t].dtype == "object" for t in [*reads, *op.outputs] if t in infos)
    op.fpga_supported = is_known(op) and op.op_type in FPGA_OPS and not strings

