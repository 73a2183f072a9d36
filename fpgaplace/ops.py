"""One registry of op classes: what fpgaplace knows about each ONNX op type.

Every op type the tool understands has exactly one ``OpClass`` here, and every stage asks it
instead of keeping its own table: the front end (MAC rule, FPGA support, constant folding,
shape inference of contrib ops), the graph passes (fusion, CSE), the cost model (which ops run
on DSPs) and the code generator (which int8 kernel implements it). An op type that is not here
(or not in one of its domains) is *unknown*: its MACs are its output elements and it runs on a
CPU. Looking an op up is one dict access, O(1).

What counts as a MAC (``Op.macs``) — one multiply-accumulate or one simple arithmetic
operation on one element:

* Conv, ConvInteger, QLinearConv, FusedConv: N*Cout*Hout*Wout*(Cin/groups)*kh*kw, i.e. output
  elements times the weight's per-output-channel size (any rank, grouped, depthwise, dilated,
  strided). FusedConv's activation is not counted, as a separate Relu after a Conv would be.
* ConvTranspose: input elements * (Cout/groups) * kernel size.
* Gemm: M*N*K. MatMul, MatMulInteger, QLinearMatMul, FusedMatMul: output elements (batched and
  broadcast) * K. Bias additions and FusedMatMul's alpha scaling are not counted (the published
  ResNet/VGG figures leave them out).
* Attention / MultiHeadAttention (com.microsoft): the Q/K/V projection (Attention only),
  Q*K^T and P*V products, plus 3 per softmax element. Plain MatMul-based attention is costed
  op by op.
* Pooling: output elements * kernel size (one op per input element read per output element);
  global pooling: input elements.
* Elementwise ops and activations: one per output element (k-1 per element for k-input Sum,
  Max, Min, Mean). BatchNormalization (inference): one per element (folded scale and shift).
  QuantizeLinear, DequantizeLinear: one per element.
* Softmax, LogSoftmax: 3 per element (exp, accumulate, scale). LayerNormalization and the other
  normalisations: 4 per element (mean, variance, normalise, scale+shift). LRN: size+1 per element.
  Reductions: one per input element. Einsum: the product of all index extents.
* Pure data movement (Reshape, Transpose, Concat, Slice, Gather, Pad, Cast, ...) and shape
  arithmetic (Shape, Range, ...): 0; its cost is in its bytes.
* Random generators, and any op not in the registry: its output elements; not on FPGA cores.

The published 4.09 G for ResNet-50 and 19.6 G for VGG-19 count conv and FC MACs only — the ops
whose ``OpClass.dot_product`` is set; ``fpgaplace.frontend.dot_product_macs`` gives that figure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

import onnx
from onnx import helper

from fpgaplace.ir import Op

STANDARD_DOMAINS = frozenset({"", "ai.onnx"})
"""The names of the default ONNX domain."""
CONTRIB_DOMAIN = "com.microsoft"
"""onnxruntime's contrib-op domain (FusedConv, Attention, QLinearAdd, ...)."""

Shapes = Mapping[str, tuple[int, ...]]
MacRule = Callable[[Op, Shapes], int]
ShapeProxy = Callable[[onnx.NodeProto], onnx.NodeProto | None]
Fusion = Literal["activation", "elementwise"]

KERNELS = frozenset({
    "conv2d", "dense", "maxpool", "avgpool", "globalavgpool", "add", "requant", "concat", "reshape",
    "batchnorm", "quantize", "dequantize",
})
"""Names of the int8 hardware kernels an ``OpClass.kernel`` may name."""


@dataclass(frozen=True)
class OpClass:
    """Everything fpgaplace knows about one op type.

    ``domains``: the ONNX domains it is defined in ("" is the default one). ``family``: the
    kind of computation (names the MAC rule's shape: "conv", "matmul", "elementwise", ...).
    ``mac_rule(op, shapes)``: its MACs by the module docstring's rules; tolerates unknown shapes.
    ``dot_product``: its MACs run on DSPs (convolutions, matrix products, attention, einsum).
    ``fpga``: an FPGA core may run it. ``fusion``: it may join its producer's fused group as an
    activation or as any elementwise op (``fpgaplace.passes.fuse``); None: it never joins one.
    ``head``: it may head a fused group (False for constants, shape arithmetic and data movement
    that does no real work). ``deterministic``: equal inputs give equal outputs (so it may be
    constant-folded and merged by CSE). ``kernel``: the int8 hardware kernel implementing it.
    ``shape_proxy(node)``: a default-domain node with the same first output shape, for onnx
    shape inference, which does not know contrib ops (None when no such node exists).
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


# ---- MAC rules ------------------------------------------------------------------------------


def _shape(shapes: Shapes, tensors: list[str], position: int) -> tuple[int, ...] | None:
    """Shape of the ``position``-th tensor of ``tensors``; None if absent, omitted or unknown."""
    if position >= len(tensors) or not tensors[position]:
        return None
    return shapes.get(tensors[position])


def _numel(shapes: Shapes, tensors: list[str], position: int) -> int:
    shape = _shape(shapes, tensors, position)
    return math.prod(shape) if shape is not None else 0


def _out_numel(op: Op, shapes: Shapes) -> int:
    return _numel(shapes, op.outputs, 0)


def _conv_macs(op: Op, shapes: Shapes) -> int:
    weight = _shape(shapes, op.inputs, 3 if op.op_type == "QLinearConv" else 1)
    if weight is None:
        return 0
    return _out_numel(op, shapes) * math.prod(weight[1:])


def _conv_transpose_macs(op: Op, shapes: Shapes) -> int:
    weight = _shape(shapes, op.inputs, 1)
    if weight is None:
        return 0
    return _numel(shapes, op.inputs, 0) * math.prod(weight[1:])


def _gemm_macs(op: Op, shapes: Shapes) -> int:
    a = _shape(shapes, op.inputs, 0)
    if a is None or len(a) != 2:
        return 0
    k = a[0] if op.attrs.get("transA", 0) else a[1]
    return _out_numel(op, shapes) * k


def _matmul_macs(op: Op, shapes: Shapes) -> int:
    """Output elements * K. K is A's last dim; FusedMatMul's transA makes it the matrix dim
    before it, or with transBatchA (A's first dim moved behind the batch dims) A's first dim."""
    a = _shape(shapes, op.inputs, 0)
    if not a:
        return 0
    k = a[-1]
    if op.attrs.get("transA", 0) and len(a) >= 2:
        k = a[0] if op.attrs.get("transBatchA", 0) else a[-2]
    return _out_numel(op, shapes) * k


def _attention_macs(op: Op, shapes: Shapes) -> int:
    """com.microsoft Attention: x [B,S,Hin] @ W [Hin, Hq+Hk+Hv], then QK^T and PV."""
    x, w = _shape(shapes, op.inputs, 0), _shape(shapes, op.inputs, 1)
    out = _shape(shapes, op.outputs, 0)
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
    q = _shape(shapes, op.inputs, 0)
    k = _shape(shapes, op.inputs, 1)
    out = _shape(shapes, op.outputs, 0)
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
    return _numel(shapes, op.inputs, 0)


def _elementwise_macs(op: Op, shapes: Shapes) -> int:
    return _out_numel(op, shapes)


def _variadic_macs(op: Op, shapes: Shapes) -> int:
    operands = len([t for t in op.inputs if t])
    return _out_numel(op, shapes) * max(1, operands - 1)


def _scaled_elementwise(factor: int) -> MacRule:
    def rule(op: Op, shapes: Shapes) -> int:
        return factor * _out_numel(op, shapes)

    rule.__name__ = f"_elementwise_times_{factor}"
    return rule


def _lrn_macs(op: Op, shapes: Shapes) -> int:
    return _out_numel(op, shapes) * (int(op.attrs.get("size", 1)) + 1)


def _einsum_macs(op: Op, shapes: Shapes) -> int:
    """Product of the extents of every index letter (no ellipsis); else output elements."""
    equation = str(op.attrs.get("equation", "")).replace(" ", "")
    terms = equation.split("->")[0].split(",")
    if "..." in equation or len(terms) != len(op.inputs):
        return _out_numel(op, shapes)
    extents: dict[str, int] = {}
    for position, term in enumerate(terms):
        shape = _shape(shapes, op.inputs, position)
        if shape is None or len(shape) != len(term):
            return _out_numel(op, shapes)
        extents.update(zip(term, shape, strict=True))
    return math.prod(extents.values())


def _zero_macs(op: Op, shapes: Shapes) -> int:
    return 0


def output_elements(op: Op, shapes: Shapes) -> int:
    """Elements of all of ``op``'s outputs: the MACs of an unknown op (and of random ops)."""
    return sum(_numel(shapes, op.outputs, i) for i in range(len(op.outputs)))


# ---- shape proxies for contrib ops ------------------------------------------------------------


def _proxy(op_type: str, inputs: Iterable[int], *, keep_attrs: bool = True,
           dropped_attrs: Iterable[str] = (), refused_attrs: Iterable[str] = ()) -> ShapeProxy:
    """A proxy builder: ``op_type`` over the node's ``inputs`` (positions), writing its first
    output, with the node's attributes (if ``keep_attrs``) minus ``dropped_attrs`` and
    ``refused_attrs``; it builds none when a ``refused_attrs`` one is set (non-zero)."""
    positions, dropped, refused = tuple(inputs), frozenset(dropped_attrs), frozenset(refused_attrs)

    def build(node: onnx.NodeProto) -> onnx.NodeProto | None:
        if any(a.name in refused and helper.get_attribute_value(a) for a in node.attribute):
            return None
        if max(positions) >= len(node.input):
            return None
        proxy = helper.make_node(op_type, [node.input[i] for i in positions], node.output[:1], name=node.name)
        if keep_attrs:
            proxy.attribute.extend(a for a in node.attribute if a.name not in dropped | refused)
        return proxy

    return build


def _fused_matmul_proxy(node: onnx.NodeProto) -> onnx.NodeProto | None:
    """FusedMatMul as MatMul, or with transA/transB as an Einsum over the last two dims (equal
    operand ranks only: onnx infers no shape for a broadcast ellipsis); none with transBatch."""
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if attrs.get("transBatchA") or attrs.get("transBatchB") or len(node.input) < 2:
        return None
    trans_a, trans_b = bool(attrs.get("transA")), bool(attrs.get("transB"))
    if not trans_a and not trans_b:
        return helper.make_node("MatMul", list(node.input[:2]), node.output[:1], name=node.name)
    equation = f"...{'km' if trans_a else 'mk'},...{'nk' if trans_b else 'kn'}->...mn"
    return helper.make_node("Einsum", list(node.input[:2]), node.output[:1], name=node.name,
                            equation=equation)


_SAME_AS_INPUT = _proxy("Identity", [0], keep_attrs=False)

# ---- the registry ---------------------------------------------------------------------------

_STD = frozenset({""})
_CONTRIB = frozenset({CONTRIB_DOMAIN})


def _classes(family: str, names: str, mac_rule: MacRule, **flags) -> list[OpClass]:
    """One ``OpClass`` per whitespace-separated name in ``names``, all with the same flags."""
    return [OpClass(name, family, mac_rule, **flags) for name in names.split()]


_ALL: list[OpClass] = [
    # dot products: the DSP work
    *_classes("conv", "Conv ConvInteger QLinearConv", _conv_macs, dot_product=True, kernel="conv2d"),
    OpClass("FusedConv", "conv", _conv_macs, _CONTRIB, dot_product=True, kernel="conv2d",
            shape_proxy=_proxy("Conv", [0, 1, 2], dropped_attrs=["activation", "activation_params"])),
    OpClass("ConvTranspose", "conv_transpose", _conv_transpose_macs, dot_product=True),
    OpClass("Gemm", "gemm", _gemm_macs, dot_product=True, kernel="dense"),
    *_classes("matmul", "MatMul MatMulInteger QLinearMatMul", _matmul_macs, dot_product=True,
              kernel="dense"),
    OpClass("FusedMatMul", "matmul", _matmul_macs, _CONTRIB, dot_product=True, kernel="dense",
            shape_proxy=_fused_matmul_proxy),
    OpClass("Attention", "attention", _attention_macs, _CONTRIB, dot_product=True),
    OpClass("MultiHeadAttention", "attention", _multi_head_attention_macs, _CONTRIB, dot_product=True),
    OpClass("Einsum", "einsum", _einsum_macs, dot_product=True),
    # pooling
    OpClass("MaxPool", "window_pool", _window_pool_macs, kernel="maxpool"),
    OpClass("AveragePool", "window_pool", _window_pool_macs, kernel="avgpool"),
    OpClass("LpPool", "window_pool", _window_pool_macs),
    OpClass("QLinearAveragePool", "window_pool", _window_pool_macs, _CONTRIB,
            shape_proxy=_proxy("AveragePool", [0], refused_attrs=["channels_last"])),
    OpClass("GlobalAveragePool", "global_pool", _input_numel_macs, kernel="globalavgpool"),
    *_classes("global_pool", "GlobalMaxPool GlobalLpPool", _input_numel_macs),
    OpClass("QLinearGlobalAveragePool", "global_pool", _input_numel_macs, _CONTRIB,
            shape_proxy=_proxy("GlobalAveragePool", [0], refused_attrs=["channels_last"])),
    # elementwise arithmetic, activations, quantisation
    *_classes("variadic", "Sum Max Min Mean", _variadic_macs, fusion="elementwise"),
    OpClass("Add", "elementwise", _elementwise_macs, fusion="elementwise", kernel="add"),
    *_classes("elementwise", "Sub Mul Div Pow Sqrt Reciprocal Exp Log Abs Neg Erf Sign Floor Ceil "
              "Round Where", _elementwise_macs, fusion="elementwise"),
    *_classes("elementwise", "Mod Equal Less Greater LessOrEqual GreaterOrEqual And Or Xor Not "
              "IsNaN IsInf BitShift BitwiseAnd BitwiseOr BitwiseXor BitwiseNot Sin Cos Tan Asin "
              "Acos Atan Sinh Cosh Asinh Acosh Atanh", _elementwise_macs),
    OpClass("QLinearAdd", "elementwise", _elementwise_macs, _CONTRIB, kernel="add",
            shape_proxy=_proxy("Add", [0, 3], keep_attrs=False)),
    OpClass("QLinearMul", "elementwise", _elementwise_macs, _CONTRIB,
            shape_proxy=_proxy("Mul", [0, 3], keep_attrs=False)),
    *_classes("activation", "Relu Clip", _elementwise_macs, fusion="activation", kernel="requant"),
    *_classes("activation", "LeakyRelu PRelu Sigmoid HardSigmoid HardSwish Tanh Elu Selu Celu "
              "Softplus Softsign ThresholdedRelu Mish", _elementwise_macs, fusion="activation"),
    OpClass("Gelu", "activation", _elementwise_macs, _STD | _CONTRIB, fusion="activation",
            shape_proxy=_SAME_AS_INPUT),  # standard from opset 20, contrib before
    OpClass("Shrink", "activation", _elementwise_macs),
    *_classes("activation", "FastGelu BiasGelu QuickGelu QLinearSigmoid QLinearLeakyRelu",
              _elementwise_macs, domains=_CONTRIB, shape_proxy=_SAME_AS_INPUT),
    OpClass("QuantizeLinear", "quantization", _elementwise_macs, fusion="elementwise", kernel="quantize"),
    OpClass("DequantizeLinear", "quantization", _elementwise_macs, fusion="elementwise",
            kernel="dequantize"),
    OpClass("DynamicQuantizeLinear", "quantization", _elementwise_macs),
    *_classes("resample", "Resize Upsample", _elementwise_macs),
    # normalisation, softmax, reductions
    OpClass("BatchNormalization", "batchnorm", _elementwise_macs, fusion="elementwise", kernel="batchnorm"),
    *_classes("normalization", "LayerNormalization InstanceNormalization GroupNormalization "
              "MeanVarianceNormalization LpNormalization RMSNormalization", _scaled_elementwise(4)),
    *_classes("normalization", "SkipLayerNormalization SimplifiedLayerNormalization",
              _scaled_elementwise(4), domains=_CONTRIB, shape_proxy=_SAME_AS_INPUT),
    OpClass("LRN", "lrn", _lrn_macs),
    *_classes("softmax", "Softmax LogSoftmax", _scaled_elementwise(3)),
    *_classes("reduce", "ReduceMean ReduceSum ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 "
              "ReduceLogSum ReduceLogSumExp ReduceSumSquare ArgMax ArgMin Hardmax CumSum", _input_numel_macs),
    # data movement: no arithmetic; only the ones that do some real work may head a group
    *_classes("data_movement", "Reshape Flatten Squeeze Unsqueeze Identity Dropout", _zero_macs,
              head=False, kernel="reshape"),
    OpClass("Concat", "data_movement", _zero_macs, head=False, kernel="concat"),
    *_classes("data_movement", "Transpose Split Slice Gather Expand Tile", _zero_macs, head=False),
    OpClass("Cast", "data_movement", _zero_macs, fusion="elementwise"),
    *_classes("data_movement", "CastLike Pad GatherElements GatherND DepthToSpace SpaceToDepth "
              "ScatterElements ScatterND Trilu ReverseSequence", _zero_macs),
    # host only: shape arithmetic and dynamically sized outputs, constants, random generators
    *_classes("host_shape", "Shape Size ConstantOfShape", _zero_macs, fpga=False, head=False),
    *_classes("host_shape", "Range OneHot", _zero_macs, fpga=False),
    OpClass("Constant", "constant", _zero_macs, fpga=False, head=False),
    *_classes("random", "RandomNormal RandomUniform RandomNormalLike RandomUniformLike Multinomial "
              "Bernoulli", output_elements, fpga=False, deterministic=False),
]
"""Every op class. Control flow (If, Loop, Scan), string ops, NonMaxSuppression, TopK, NonZero,
Unique and other ops not listed are unknown: they go to CPUs."""


def _index(classes: list[OpClass]) -> dict[str, OpClass]:
    registry: dict[str, OpClass] = {}
    for op_class in classes:
        if op_class.name in registry:
            raise ValueError(f"op class '{op_class.name}' is registered twice")
        registry[op_class.name] = op_class
    return registry


_REGISTRY = _index(_ALL)


# ---- queries --------------------------------------------------------------------------------


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
    """Whether the op's MACs run on DSPs (convolutions, matrix products, attention, einsum)."""
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


def shape_proxy(node: onnx.NodeProto) -> onnx.NodeProto | None:
    """A default-domain node with ``node``'s first output shape, for onnx shape inference;
    None if ``node`` needs none (a default-domain op) or has none."""
    op_class = lookup(node.op_type, node.domain)
    if op_class is None or op_class.shape_proxy is None or normalize_domain(node.domain) == "":
        return None
    return op_class.shape_proxy(node)
