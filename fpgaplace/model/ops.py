"""One registry of op classes: what fpgaplace knows about each ONNX op type.

Every op type the tool understands has exactly one ``OpClass`` here, and every stage asks it
instead of keeping its own table: the front end (MAC rule, FPGA support, constant folding,
shape inference of contrib ops), the graph passes (fusion, CSE), the cost model (which ops run
on DSPs) and the code generator (which int8 kernel implements it). An op type that is not here
(or not in one of its domains) is *unknown*: its MACs are its output elements and it runs on a
CPU. Looking an op up is one dict access, O(1).

The MAC rules live in ``fpgaplace.model.macs`` and the contrib ops' shape proxies in
``fpgaplace.model.proxies``; a control-flow op is costed here from its bodies, whose ops the
registry costs in turn.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

from fpgaplace.model.ir import Op, outer_references
from fpgaplace.model.macs import (
    MacRule,
    Shapes,
    attention_macs,
    conv_macs,
    conv_transpose_macs,
    einsum_macs,
    elementwise_macs,
    gemm_macs,
    input_numel_macs,
    lrn_macs,
    matmul_macs,
    multi_head_attention_macs,
    output_elements,
    recurrent_macs,
    scaled_elementwise,
    variadic_macs,
    window_pool_macs,
    zero_macs,
)
from fpgaplace.model.proxies import (
    SAME_AS_INPUT,
    ShapeProxy,
    channels_last,
    fused_matmul_proxy,
    proxy,
    qgemm_proxy,
    qlinear_concat_proxy,
)

STANDARD_DOMAINS = frozenset({"", "ai.onnx"})
"""The names of the default ONNX domain."""
CONTRIB_DOMAIN = "com.microsoft"
"""onnxruntime's contrib-op domain (FusedConv, Attention, QLinearAdd, ...)."""
QONNX_DOMAINS = frozenset({"qonnx.custom_op.general", "finn.custom_op.general", "finn"})
"""The domains QONNX quantizers are exported in (Brevitas and FINN write either)."""

Fusion = Literal["activation", "elementwise"]


@dataclass(frozen=True)
class OpClass:
    """Everything fpgaplace knows about one op type.

    ``domains``: the ONNX domains it is defined in ("" is the default one). ``family``: the
    kind of computation (names the MAC rule's shape: "conv", "matmul", "elementwise", ...).
    ``mac_rule(op, shapes)``: its MACs by the module docstring's rules; tolerates unknown shapes.
    ``dot_product``: its MACs are dot products, the work a core's DSPs do (convolutions, matrix
    products, attention, einsum; also the recurrent ops' gates, though those run on CPUs).
    ``fpga``: an FPGA core may run it. ``fusion``: it may join its producer's fused group as an
    activation or as any elementwise op (``fpgaplace.model.passes.fuse``); None: it never joins one.
    ``head``: it may head a fused group (False for constants, shape arithmetic and data movement
    that does no real work). ``deterministic``: equal inputs give equal outputs (so it may be
    constant-folded and merged by CSE). ``kernel``: the name of the int8 hardware kernel implementing
    it (a key of ``fpgaplace.hw.registry.KERNELS``, the one list of them).
    ``shape_proxy(node)``: a default-domain node (or a few, in order) writing the same first
    output with the same shape, for onnx shape inference, which does not know contrib ops (None
    when no such nodes exist).
    """

    name: str
    family: str
    mac_rule: MacRule
    domains: frozenset[str] = frozenset({""})
    dot_product: bool = False
    fpga: bool = True
    fusion: Fusion | None = None
    head: bool = True
    deterministic: bool = True
    kernel: str | None = None
    shape_proxy: ShapeProxy | None = None


CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})
"""Default-domain ops whose work is in subgraph attributes (bodies)."""


SMALL_CONSTANT = 64
"""The most elements a constant may have to be kept as a value in a ``Scope`` (trip counts,
shape tensors)."""


@dataclass(frozen=True)
class Scope:
    """What a body may read from around it: tensor shapes, ONNX element types, the values of
    small constants (trip counts, shape tensors), and the model's opset imports."""

    shapes: Shapes
    elem_types: Mapping[str, int] = field(default_factory=dict)
    values: Mapping[str, np.ndarray] = field(default_factory=dict)
    opsets: tuple[onnx.OperatorSetIdProto, ...] = ()


@dataclass(frozen=True)
class ControlFlowCost:
    """A control-flow op's MACs and a one-line note saying how they were found; ``dot_product_macs``
    is the part of ``macs`` its bodies' dot-product ops do (``is_dot_product``)."""

    macs: int
    note: str
    dot_product_macs: int = 0


def control_flow_cost(op: Op, scope: Scope) -> ControlFlowCost:
    """MACs of an If, Loop or Scan by the module docstring's rule, with the note saying which
    branch or trip count was used. One onnx shape inference per body (nested ones too)."""
    if op.op_type == "If":
        return _if_cost(op, scope)
    if op.op_type == "Loop":
        return _loop_cost(op, scope)
    if op.op_type == "Scan":
        return _scan_cost(op, scope)
    raise ValueError(f"'{op.op_type}' is not a control-flow op")


@dataclass(frozen=True)
class _BodyCost:
    macs: int
    unshaped: list[str]  # body ops with an output of unknown shape
    dot_product_macs: int = 0

    def times(self, trips: int) -> tuple[int, int]:
        """(MACs, dot-product MACs) of ``trips`` runs of the body."""
        return self.macs * trips, self.dot_product_macs * trips

    def remark(self) -> str:
        if not self.unshaped:
            return ""
        listed = ", ".join(f"'{name}'" for name in self.unshaped[:3])
        more = f" and {len(self.unshaped) - 3} more" if len(self.unshaped) > 3 else ""
        return f"; body ops without a known output shape ({listed}{more}) are costed from what is known"


def _if_cost(op: Op, scope: Scope) -> ControlFlowCost:
    """The larger branch; the one taken when the condition is a known constant."""
    then_cost = _body_cost(op, "then_branch", {}, scope)
    else_cost = _body_cost(op, "else_branch", {}, scope)
    condition = _scalar(scope.values.get(op.inputs[0])) if op.inputs and op.inputs[0] else None
    if condition is not None:
        taken, cost = ("then", then_cost) if condition else ("else", else_cost)
        why = f"the condition is a constant {bool(condition)}: the {taken} branch is costed"
    else:
        taken, cost = ("then", then_cost) if then_cost.macs >= else_cost.macs else ("else", else_cost)
        why = f"the larger ({taken}) is costed"
    note = (f"If '{op.name}': then branch {then_cost.macs} MACs, else branch {else_cost.macs} MACs; "
            f"{why}{then_cost.remark() or else_cost.remark()}")
    return ControlFlowCost(cost.macs, note, cost.dot_product_macs)


def _loop_cost(op: Op, scope: Scope) -> ControlFlowCost:
    """Body inputs: iteration number (int64 scalar), condition (bool scalar), carried values."""
    seeds: dict[int, tuple[tuple[int, ...], int] | None] = {
        0: ((), onnx.TensorProto.INT64), 1: ((), onnx.TensorProto.BOOL)}
    for k, outer in enumerate(op.inputs[2:]):
        seeds[2 + k] = _outer_seed(outer, scope)
    body = _body_cost(op, "body", seeds, scope)
    trip_name = op.inputs[0] if op.inputs else ""
    trips = _scalar(scope.values.get(trip_name)) if trip_name else None
    if trips is None:
        return ControlFlowCost(body.macs, f"Loop '{op.name}': trip count unknown; its body ({body.macs} MACs) "
                                          f"is costed once{body.remark()}", body.dot_product_macs)
    bound = " (at most: its condition may stop it sooner)" if len(op.inputs) > 1 and op.inputs[1] else ""
    note = f"Loop '{op.name}': body {body.macs} MACs x {trips} trips{bound}{body.remark()}"
    macs, dot = body.times(trips)
    return ControlFlowCost(macs, note, dot)


def _scan_cost(op: Op, scope: Scope) -> ControlFlowCost:
    """Body inputs: the state variables, then one slice of each scan input (its scan axis gone)."""
    scanned = int(op.attrs.get("num_scan_inputs", 0))
    if not 0 < scanned <= len(op.inputs):
        scanned = 0  # malformed: no scan input known, so no scan length
    states = len(op.inputs) - scanned
    axes = list(op.attrs.get("scan_input_axes") or [0] * scanned)
    seeds: dict[int, tuple[tuple[int, ...], int] | None] = {
        k: _outer_seed(t, scope) for k, t in enumerate(op.inputs[:states])}
    trips = None
    for j, outer in enumerate(op.inputs[states:]):
        seed = _outer_seed(outer, scope)
        axis = axes[j] if j < len(axes) else 0
        if seed is None or not -len(seed[0]) <= axis < len(seed[0]):
            seeds[states + j] = None
            continue
        shape = list(seed[0])
        extent = shape.pop(axis)
        trips = extent if trips is None else trips
        seeds[states + j] = (tuple(shape), seed[1])
    body = _body_cost(op, "body", seeds, scope)
    if trips is None:
        return ControlFlowCost(body.macs, f"Scan '{op.name}': scan length unknown; its body ({body.macs} MACs) "
                                          f"is costed once{body.remark()}", body.dot_product_macs)
    macs, dot = body.times(trips)
    return ControlFlowCost(macs, f"Scan '{op.name}': body {body.macs} MACs x {trips} steps{body.remark()}", dot)


def _outer_seed(tensor: str, scope: Scope) -> tuple[tuple[int, ...], int] | None:
    if not tensor or tensor not in scope.shapes:
        return None
    return tuple(scope.shapes[tensor]), scope.elem_types.get(tensor, onnx.TensorProto.UNDEFINED)


def _scalar(value: np.ndarray | None) -> int | None:
    """A one-element numeric value as a trip count (a negative one runs no trip); else None."""
    if value is None or value.size != 1 or value.dtype.kind not in "biuf":
        return None
    number = value.reshape(-1)[0]
    return max(0, int(number)) if np.isfinite(number) else None


def _body_cost(op: Op, attr: str, seeds: Mapping[int, tuple[tuple[int, ...], int] | None], scope: Scope) -> _BodyCost:
    """MACs of the body ``op.attrs[attr]``, its ``seeds`` (body input position -> outer shape
    and element type) and outer tensors typed from ``scope``."""
    body = op.attrs.get(attr)
    if not isinstance(body, onnx.GraphProto):
        return _BodyCost(0, [])
    node = op.node if op.node is not None else helper.make_node(op.op_type, op.inputs, op.outputs, **op.attrs)
    inner = _body_scope(body, seeds, outer_references(node), scope)
    total, dot, unshaped = 0, 0, []
    for i, body_node in enumerate(body.node):
        body_op = Op(name=body_node.name or f"{body_node.op_type}_{i}", op_type=body_node.op_type,
                     domain=body_node.domain, attrs=attribute_values(body_node), inputs=list(body_node.input),
                     outputs=list(body_node.output), index=i, node=body_node)
        if is_control_flow(body_op.op_type, body_op.domain):
            nested = control_flow_cost(body_op, inner)
            total, dot = total + nested.macs, dot + nested.dot_product_macs
        else:
            macs = count_macs(body_op, inner.shapes)
            total, dot = total + macs, dot + (macs if is_dot_product(body_op.op_type, body_op.domain) else 0)
        if any(t and t not in inner.shapes for t in body_node.output):
            unshaped.append(body_op.name)
    return _BodyCost(total, unshaped, dot)


def _body_scope(body: onnx.GraphProto, seeds: Mapping[int, tuple[tuple[int, ...], int] | None],
                free: list[str], scope: Scope) -> Scope:
    """``scope`` plus the shapes, types and small constants of ``body``, found by onnx shape
    inference (strict off, data propagation on) of the body as a model of its own: seeded inputs
    get their outer shapes, the outer tensors it reads become inputs (initializers when their
    value is known); contrib nodes stand in as their shape proxies. If inference fails, the
    body's declared shapes only."""
    graph = onnx.GraphProto()
    graph.CopyFrom(body)
    proxied = [proxy or [node] for node in graph.node for proxy in [shape_proxy(node)]]
    del graph.node[:]
    graph.node.extend(n for nodes in proxied for n in nodes)
    for position, seed in seeds.items():
        if seed is not None and position < len(graph.input):
            _set_type(graph.input[position], *seed)
    for tensor in free:
        if tensor in scope.values:
            graph.initializer.append(numpy_helper.from_array(scope.values[tensor], tensor))
        elif tensor in scope.shapes:
            elem_type = scope.elem_types.get(tensor, onnx.TensorProto.FLOAT)
            graph.input.append(helper.make_tensor_value_info(tensor, elem_type, list(scope.shapes[tensor])))
    model = helper.make_model(graph, opset_imports=list(scope.opsets) or [helper.make_opsetid("", 17)])
    try:
        model = shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    except Exception:  # inference raises InferenceError, ValueError or RuntimeError alike
        pass
    shapes, elem_types, values = dict(scope.shapes), dict(scope.elem_types), dict(scope.values)
    for value in [*model.graph.input, *model.graph.value_info, *model.graph.output]:
        shape = _known_shape(value)
        if shape is not None:
            shapes[value.name] = shape
            elem_types[value.name] = value.type.tensor_type.elem_type
    for tensor in body.initializer:
        shapes[tensor.name], elem_types[tensor.name] = tuple(tensor.dims), tensor.data_type
        if math.prod(tensor.dims) <= SMALL_CONSTANT:
            values[tensor.name] = numpy_helper.to_array(tensor)
    values.update(constant_node_values(body.node))
    return Scope(shapes, elem_types, values, scope.opsets)


def _set_type(value: onnx.ValueInfoProto, shape: tuple[int, ...], elem_type: int) -> None:
    """Give the body input ``value`` the outer ``shape`` (and ``elem_type`` if it declares none)."""
    tensor_type = value.type.tensor_type
    declared = tensor_type.elem_type
    value.type.CopyFrom(helper.make_tensor_type_proto(declared or elem_type or onnx.TensorProto.FLOAT, list(shape)))


def _known_shape(value: onnx.ValueInfoProto) -> tuple[int, ...] | None:
    """``value``'s dims if every one is a number, else None."""
    if not value.type.HasField("tensor_type") or not value.type.tensor_type.HasField("shape"):
        return None
    dims = value.type.tensor_type.shape.dim
    if not all(d.HasField("dim_value") and d.dim_value >= 0 for d in dims):
        return None
    return tuple(d.dim_value for d in dims)


def constant_node_values(nodes: Iterable[onnx.NodeProto]) -> dict[str, np.ndarray]:
    """The values of the ``Constant`` nodes among ``nodes`` with at most SMALL_CONSTANT elements."""
    values = {}
    for node in nodes:
        if node.op_type != "Constant" or normalize_domain(node.domain) != "" or not node.output:
            continue
        attr = next((a for a in node.attribute if a.name == "value"), None)
        if attr is not None and math.prod(attr.t.dims) <= SMALL_CONSTANT:
            values[node.output[0]] = numpy_helper.to_array(attr.t)
    return values


def _control_flow_macs(op: Op, shapes: Shapes) -> int:
    return control_flow_cost(op, Scope(shapes)).macs


def attribute_values(node: onnx.NodeProto) -> dict:
    """``node``'s attributes as Python values (strings decoded; graphs as GraphProtos)."""
    attrs = {}
    for attr in node.attribute:
        value = helper.get_attribute_value(attr)
        if isinstance(value, bytes):
            value = value.decode("utf-8", errors="replace")
        elif isinstance(value, list) and value and isinstance(value[0], bytes):
            value = [v.decode("utf-8", errors="replace") for v in value]
        attrs[attr.name] = value
    return attrs


_STD = frozenset({""})


_CONTRIB = frozenset({CONTRIB_DOMAIN})


def _classes(family: str, names: str, mac_rule: MacRule, **flags) -> list[OpClass]:
    """One ``OpClass`` per whitespace-separated name in ``names``, all with the same flags."""
    return [OpClass(name, family, mac_rule, **flags) for name in names.split()]


_ALL: list[OpClass] = [
    # dot products: the DSP work
    *_classes("conv", "Conv ConvInteger", conv_macs, dot_product=True, kernel="conv2d"),
    OpClass("QLinearConv", "conv", conv_macs, _STD | _CONTRIB, dot_product=True, kernel="conv2d",
            shape_proxy=channels_last(proxy("Conv", [0, 3, 8], optional=1))),  # contrib: NHWC too
    OpClass("FusedConv", "conv", conv_macs, _CONTRIB, dot_product=True, kernel="conv2d",
            shape_proxy=proxy("Conv", [0, 1, 2], optional=1,
                               dropped_attrs=["activation", "activation_params"])),
    OpClass("ConvTranspose", "conv_transpose", conv_transpose_macs, dot_product=True, kernel="conv2d"),
    OpClass("Gemm", "gemm", gemm_macs, dot_product=True, kernel="dense"),
    OpClass("QGemm", "gemm", gemm_macs, _CONTRIB, dot_product=True, shape_proxy=qgemm_proxy),
    *_classes("matmul", "MatMul MatMulInteger QLinearMatMul", matmul_macs, dot_product=True,
              kernel="dense"),
    OpClass("FusedMatMul", "matmul", matmul_macs, _CONTRIB, dot_product=True, kernel="dense",
            shape_proxy=fused_matmul_proxy),
    # onnxruntime's fusions of dynamically quantized MatMuls; MatMulIntegerToFloat's int8 inputs
    # and float output match no default-domain node's types, so it has no shape proxy
    OpClass("DynamicQuantizeMatMul", "matmul", matmul_macs, _CONTRIB, dot_product=True,
            shape_proxy=proxy("MatMul", [0, 1], keep_attrs=False)),
    OpClass("MatMulIntegerToFloat", "matmul", matmul_macs, _CONTRIB, dot_product=True),
    *_classes("attention", "Attention QAttention", attention_macs, domains=_CONTRIB, dot_product=True),
    OpClass("MultiHeadAttention", "attention", multi_head_attention_macs, _CONTRIB, dot_product=True),
    OpClass("Einsum", "einsum", einsum_macs, dot_product=True),
    # recurrent: matrix products and gates per time step; host only (no hardware kernel)
    *_classes("recurrent", "RNN GRU LSTM", recurrent_macs, dot_product=True, fpga=False),
    OpClass("DynamicQuantizeLSTM", "recurrent", recurrent_macs, _CONTRIB, dot_product=True, fpga=False,
            shape_proxy=proxy("LSTM", [0, 1, 2])),
    # control flow: the bodies' MACs; host only
    *_classes("control_flow", "If Loop Scan", _control_flow_macs, fpga=False),
    # pooling
    OpClass("MaxPool", "window_pool", window_pool_macs, kernel="maxpool"),
    OpClass("AveragePool", "window_pool", window_pool_macs, kernel="avgpool"),
    OpClass("LpPool", "window_pool", window_pool_macs),
    OpClass("QLinearAveragePool", "window_pool", window_pool_macs, _CONTRIB,
            shape_proxy=channels_last(proxy("AveragePool", [0]))),
    OpClass("GlobalAveragePool", "global_pool", input_numel_macs, kernel="globalavgpool"),
    *_classes("global_pool", "GlobalMaxPool GlobalLpPool", input_numel_macs),
    OpClass("QLinearGlobalAveragePool", "global_pool", input_numel_macs, _CONTRIB,
            shape_proxy=channels_last(proxy("GlobalAveragePool", [0]))),
    # elementwise arithmetic, activations, quantisation
    *_classes("variadic", "Sum Mean", variadic_macs, fusion="elementwise"),
    *(OpClass(name, "variadic", variadic_macs, fusion="elementwise", kernel=name.lower()) for name in ("Max", "Min")),
    OpClass("Add", "elementwise", elementwise_macs, fusion="elementwise", kernel="add"),
    *(OpClass(name, "elementwise", elementwise_macs, fusion="elementwise", kernel=name.lower())
      for name in ("Sub", "Mul")),
    *_classes("elementwise", "Div Pow Sqrt Reciprocal Exp Log Abs Neg Erf Sign Floor Ceil "
              "Round Where", elementwise_macs, fusion="elementwise"),
    *_classes("elementwise", "Mod Equal Less Greater LessOrEqual GreaterOrEqual And Or Xor Not "
              "IsNaN IsInf BitShift BitwiseAnd BitwiseOr BitwiseXor BitwiseNot Sin Cos Tan Asin "
              "Acos Atan Sinh Cosh Asinh Acosh Atanh", elementwise_macs),
    OpClass("QLinearAdd", "elementwise", elementwise_macs, _CONTRIB, kernel="add",
            shape_proxy=proxy("Add", [0, 3], keep_attrs=False)),
    OpClass("QLinearMul", "elementwise", elementwise_macs, _CONTRIB,
            shape_proxy=proxy("Mul", [0, 3], keep_attrs=False)),
    OpClass("QLinearWhere", "elementwise", elementwise_macs, _CONTRIB,
            shape_proxy=proxy("Where", [0, 1, 4], keep_attrs=False)),
    OpClass("QLinearConcat", "requantize", elementwise_macs, _CONTRIB, shape_proxy=qlinear_concat_proxy),
    *_classes("activation", "Relu Clip", elementwise_macs, fusion="activation", kernel="requant"),
    *_classes("activation", "LeakyRelu PRelu Sigmoid HardSigmoid HardSwish Tanh Elu Selu Celu "
              "Softplus Softsign ThresholdedRelu Mish", elementwise_macs, fusion="activation"),
    OpClass("Gelu", "activation", elementwise_macs, _STD | _CONTRIB, fusion="activation",
            shape_proxy=SAME_AS_INPUT),  # standard from opset 20, contrib before
    OpClass("Shrink", "activation", elementwise_macs),
    *_classes("activation", "FastGelu BiasGelu QuickGelu QLinearSigmoid QLinearLeakyRelu",
              elementwise_macs, domains=_CONTRIB, shape_proxy=SAME_AS_INPUT),
    OpClass("QuantizeLinear", "quantization", elementwise_macs, fusion="elementwise", kernel="quantize"),
    OpClass("DequantizeLinear", "quantization", elementwise_macs, fusion="elementwise",
            kernel="dequantize"),
    OpClass("DynamicQuantizeLinear", "quantization", elementwise_macs),
    # QONNX quantizers: onto a grid of their bit width (round, clamp, rescale), which a core's dataflow
    # does as a requantization stage; onnxruntime runs them as fpgaplace.model.passes.qonnx's functions
    *_classes("quantization", "Quant BipolarQuant Trunc", elementwise_macs, domains=QONNX_DOMAINS,
              fusion="elementwise", kernel="requant"),
    *_classes("resample", "Resize Upsample", elementwise_macs, kernel="upsample"),
    # normalisation, softmax, reductions
    OpClass("BatchNormalization", "batchnorm", elementwise_macs, fusion="elementwise", kernel="batchnorm"),
    OpClass("LayerNormalization", "normalization", scaled_elementwise(4), kernel="layernorm"),
    *_classes("normalization", "InstanceNormalization GroupNormalization "
              "MeanVarianceNormalization LpNormalization RMSNormalization", scaled_elementwise(4)),
    *_classes("normalization", "SkipLayerNormalization SimplifiedLayerNormalization",
              scaled_elementwise(4), domains=_CONTRIB, shape_proxy=SAME_AS_INPUT),
    OpClass("LRN", "lrn", lrn_macs, kernel="lrn"),
    OpClass("Softmax", "softmax", scaled_elementwise(3), kernel="softmax"),
    OpClass("LogSoftmax", "softmax", scaled_elementwise(3)),
    OpClass("QLinearSoftmax", "softmax", scaled_elementwise(3), _CONTRIB,
            shape_proxy=proxy("Softmax", [0], dropped_attrs=["opset"])),
    *_classes("reduce", "ReduceMean ReduceSum ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 "
              "ReduceLogSum ReduceLogSumExp ReduceSumSquare ArgMax ArgMin Hardmax CumSum", input_numel_macs),
    # data movement: no arithmetic; only the ones that do some real work may head a group
    *_classes("data_movement", "Reshape Flatten Squeeze Unsqueeze Identity Dropout", zero_macs,
              head=False, kernel="reshape"),
    # a core's concat and slices requantize to their outputs' scales: they head a group with the
    # QuantizeLinear after them, so that no placement separates them
    OpClass("Concat", "data_movement", zero_macs, kernel="concat"),
    *_classes("data_movement", "Split Slice", zero_macs, kernel="slice"),
    *_classes("data_movement", "Transpose Expand Tile", zero_macs, head=False),
    OpClass("Gather", "data_movement", zero_macs, head=False, kernel="embedding"),
    OpClass("Cast", "data_movement", zero_macs, fusion="elementwise"),
    OpClass("Pad", "data_movement", zero_macs, kernel="pad"),
    *_classes("data_movement", "CastLike GatherElements GatherND DepthToSpace SpaceToDepth "
              "ScatterElements ScatterND Trilu ReverseSequence", zero_macs),
    # host only: shape arithmetic and dynamically sized outputs, constants, random generators
    *_classes("host_shape", "Shape Size ConstantOfShape", zero_macs, fpga=False, head=False),
    *_classes("host_shape", "Range", zero_macs, fpga=False),
    OpClass("OneHot", "data_movement", zero_macs, head=False, kernel="onehot"),
    OpClass("Constant", "constant", zero_macs, fpga=False, head=False),
    *_classes("random", "RandomNormal RandomUniform RandomNormalLike RandomUniformLike Multinomial "
              "Bernoulli", output_elements, fpga=False, deterministic=False),
]
"""Every op class. String ops, NonMaxSuppression, TopK, NonZero, Unique and other ops not listed
are unknown: they go to CPUs."""


def _index(classes: list[OpClass]) -> dict[str, OpClass]:
    registry: dict[str, OpClass] = {}
    for op_class in classes:
        if op_class.name in registry:
            raise ValueError(f"op class '{op_class.name}' is registered twice")
        registry[op_class.name] = op_class
    return registry


_REGISTRY = _index(_ALL)


def normalize_domain(domain: str) -> str:
    """``domain`` with the default domain's two spellings ("" and "ai.onnx") made ""."""
    return "" if domain in STANDARD_DOMAINS else domain


def lookup(op_type: str, domain: str = "") -> OpClass | None:
    """The class of ``op_type`` in ``domain`` ("" or "ai.onnx": the default one); None if
    fpgaplace does not know that op in that domain."""
    op_class = _REGISTRY.get(op_type)
    if op_class is None or normalize_domain(domain) not in op_class.domains:
        return None
    return op_class


def all_classes() -> list[OpClass]:
    """Every registered op class, in registry order."""
    return list(_REGISTRY.values())


def op_types(predicate: Callable[[OpClass], bool] = lambda op_class: True) -> frozenset[str]:
    """Names of the op classes satisfying ``predicate`` (e.g. ``lambda c: c.fpga``)."""
    return frozenset(name for name, op_class in _REGISTRY.items() if predicate(op_class))


def is_dot_product(op_type: str, domain: str = "") -> bool:
    """Whether the op's MACs are dot products (convolutions, matrix products, attention, einsum,
    recurrent gates)."""
    op_class = lookup(op_type, domain)
    return op_class is not None and op_class.dot_product


def is_fpga(op_type: str, domain: str = "") -> bool:
    """Whether an FPGA core may run the op (unknown ops may not)."""
    op_class = lookup(op_type, domain)
    return op_class is not None and op_class.fpga


def is_deterministic(op_type: str, domain: str = "") -> bool:
    """Whether equal inputs give equal outputs; unknown ops are taken to be deterministic."""
    op_class = lookup(op_type, domain)
    return op_class is None or op_class.deterministic


def is_control_flow(op_type: str, domain: str = "") -> bool:
    """Whether the op is a default-domain If, Loop or Scan (its work is in its bodies)."""
    return op_type in CONTROL_FLOW and normalize_domain(domain) == ""


def can_head(op_type: str, domain: str = "") -> bool:
    """Whether the op may head a fused group; unknown ops may (they do work of their own)."""
    op_class = lookup(op_type, domain)
    return op_class is None or op_class.head


def can_fuse(op_type: str, domain: str, kind: Fusion) -> bool:
    """Whether the op may join its producer's group in a ``kind`` fusion: an "activation"
    fusion takes activations only, an "elementwise" one activations and elementwise ops."""
    op_class = lookup(op_type, domain)
    if op_class is None or op_class.fusion is None:
        return False
    return kind == "elementwise" or op_class.fusion == kind


def count_macs(op: Op, shapes: Shapes) -> int:
    """MACs of ``op`` by the rules in the module docstring; unknown ops: output elements."""
    op_class = lookup(op.op_type, op.domain)
    rule = output_elements if op_class is None else op_class.mac_rule
    return int(rule(op, shapes))


def shape_proxy(node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    """Default-domain nodes (in order) writing ``node``'s first output with its shape, for onnx
    shape inference; None if ``node`` needs none (a default-domain op) or has none."""
    op_class = lookup(node.op_type, node.domain)
    if op_class is None or op_class.shape_proxy is None or normalize_domain(node.domain) == "":
        return None
    proxy = op_class.shape_proxy(node)
    return [proxy] if isinstance(proxy, onnx.NodeProto) else proxy
