"""The MAC rules of the op classes (``fpgaplace.model.ops``): each maps an op and the shapes it
sees to its MACs, tolerating unknown shapes. O(rank) each.

What counts as a MAC (``Op.macs``) — one multiply-accumulate or one simple arithmetic
operation on one element:

* Conv, ConvInteger, QLinearConv, FusedConv: N*Cout*Hout*Wout*(Cin/groups)*kh*kw, i.e. output
  elements times the weight's per-output-channel size (any rank, grouped, depthwise, dilated,
  strided). FusedConv's activation is not counted, as a separate Relu after a Conv would be.
* ConvTranspose: input elements * (Cout/groups) * kernel size.
* Gemm, QGemm (com.microsoft): M*N*K (from A and B, so a QGemm without a known output shape
  is still counted). MatMul, MatMulInteger, QLinearMatMul, FusedMatMul and com.microsoft's
  DynamicQuantizeMatMul, MatMulIntegerToFloat: output elements (batched and broadcast) * K.
  Bias additions and FusedMatMul's alpha scaling are not counted (the published ResNet/VGG
  figures leave them out).
* RNN, GRU, LSTM (and com.microsoft DynamicQuantizeLSTM), from the ONNX operator spec's
  equations, per time step, batch row and direction, with g gates (1, 3, 4) and hidden size h:
  the matrix products X_t*W^T and H_{t-1}*R^T, g*h*(input_size + h); the biases Wb and Rb, 2*g*h
  if B is given; LSTM's peepholes P (.) C, 3*h if P is given; the elementwise rest: RNN h (the
  activation), GRU 7*h (3 gate activations, r (.) H or r (.) (H*Rh^T), (1-z) (.) h' + z (.) H as 3),
  LSTM 8*h (4 gate activations, C_t = f (.) C + i (.) c as 2, h(C_t), o (.) h(C_t)). Time steps:
  X's sequence length (``layout`` 0: [seq, batch, input], 1: [batch, seq, input]); a shorter
  ``sequence_lens`` entry is not taken into account. Directions: 2 if bidirectional.
* Control flow (If, Loop, Scan): the MACs of the ops in their bodies (nested bodies too), found
  with the body's own shape inference seeded from the outer tensors (``control_flow_cost``). If:
  the larger branch (the one taken if the condition is a known constant); Loop: the body times
  the trip count M when it is a constant (an upper bound when a condition is given: it may stop
  sooner), else the body once; Scan: the body times the scan axis' extent. The front end notes
  which figure it used.
* Attention, QAttention, MultiHeadAttention (com.microsoft): the Q/K/V projection (not MHA),
  Q*K^T and P*V products, plus 3 per softmax element. Plain MatMul-based attention is costed
  op by op.
* Pooling: output elements * kernel size (one op per input element read per output element);
  global pooling: input elements.
* Elementwise ops and activations: one per output element (k-1 per element for k-input Sum,
  Max, Min, Mean). BatchNormalization (inference): one per element (folded scale and shift).
  QuantizeLinear, DequantizeLinear: one per element.
* Softmax, LogSoftmax: 3 per element (exp, accumulate, scale). LayerNormalization and the other
  normalisations: 4 per element (mean, variance, normalise, scale+shift). LRN: size+1 per element.
  Reductions: one per input element. Einsum: the product of all index extents (an ellipsis
  stands for its operands' broadcast dims), times operands-1 for three or more operands; with
  fewer index shapes than the equation needs, the output elements.
* QOperator contrib ops count as their float counterparts: QLinearAdd, QLinearMul, QLinearWhere,
  QLinearSigmoid, QLinearLeakyRelu one per output element; QLinearSoftmax 3; QLinearConcat one
  per output element (each input is requantized); QLinearAveragePool and
  QLinearGlobalAveragePool like their pools.
* Pure data movement (Reshape, Transpose, Concat, Slice, Gather, Pad, Cast, ...) and shape
  arithmetic (Shape, Range, ...): 0; its cost is in its bytes.
* Random generators, and any op not in the registry: its output elements; not on FPGA cores.

The published 4.09 G for ResNet-50 and 19.6 G for VGG-19 count conv and FC MACs only — the ops
whose ``OpClass.dot_product`` is set (which also marks attention, einsum and recurrent ops);
``fpgaplace.model.frontend.build.dot_product_macs`` gives that figure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from fpgaplace.model.ir import Op

Shapes = Mapping[str, tuple[int, ...]]
MacRule = Callable[[Op, Shapes], int]


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


def conv_macs(op: Op, shapes: Shapes) -> int:
    weight = _shape(shapes, op.inputs, 3 if op.op_type == "QLinearConv" else 1)
    if weight is None:
        return 0
    return _out_numel(op, shapes) * math.prod(weight[1:])


def conv_transpose_macs(op: Op, shapes: Shapes) -> int:
    weight = _shape(shapes, op.inputs, 1)
    if weight is None:
        return 0
    return _numel(shapes, op.inputs, 0) * math.prod(weight[1:])


def gemm_macs(op: Op, shapes: Shapes) -> int:
    """M*N*K from A (input 0) and B (input 1; QGemm's input 3), each 2-D, with transA/transB."""
    a = _shape(shapes, op.inputs, 0)
    b = _shape(shapes, op.inputs, 3 if op.op_type == "QGemm" else 1)
    if a is None or len(a) != 2:
        return 0
    m, k = (a[1], a[0]) if op.attrs.get("transA", 0) else a
    if b is None or len(b) != 2:
        out = _shape(shapes, op.outputs, 0)
        return m * out[-1] * k if out else 0
    n = b[0] if op.attrs.get("transB", 0) else b[1]
    return m * n * k


def matmul_macs(op: Op, shapes: Shapes) -> int:
    """Output elements * K. K is A's last dim; FusedMatMul's transA makes it the matrix dim
    before it, or with transBatchA (A's first dim moved behind the batch dims) A's first dim.
    Without a known output shape (contrib ops onnx cannot infer), A and B give it (no transposes)."""
    a = _shape(shapes, op.inputs, 0)
    if not a:
        return 0
    k = a[-1]
    if op.attrs.get("transA", 0) and len(a) >= 2:
        k = a[0] if op.attrs.get("transBatchA", 0) else a[-2]
    out = _shape(shapes, op.outputs, 0)
    if out is None and not op.attrs.get("transA", 0) and not op.attrs.get("transB", 0):
        out = _matmul_output(a, _shape(shapes, op.inputs, 3 if op.op_type == "QLinearMatMul" else 1))
    return math.prod(out) * k if out is not None else 0


def _matmul_output(a: tuple[int, ...], b: tuple[int, ...] | None) -> tuple[int, ...] | None:
    """numpy.matmul's output shape of A and B (1-D operands promoted and their dim dropped)."""
    if b is None or not b:
        return None
    rows = a[-2:-1] if len(a) >= 2 else ()
    cols = b[-1:] if len(b) >= 2 else ()
    return (*_broadcast(list(a[:-2]), list(b[:-2])), *rows, *cols)


def attention_macs(op: Op, shapes: Shapes) -> int:
    """com.microsoft Attention and QAttention: x [B,S,Hin] @ W [Hin, Hq+Hk+Hv], then QK^T and
    PV. Hv from ``qkv_hidden_sizes``, else the output's last dim, else a third of W's width."""
    x, w = _shape(shapes, op.inputs, 0), _shape(shapes, op.inputs, 1)
    if x is None or w is None or len(x) != 3 or not w:
        return _out_numel(op, shapes)
    batch, seq, _ = x
    sizes = list(op.attrs.get("qkv_hidden_sizes") or [])
    out = _shape(shapes, op.outputs, 0)
    hidden_v = sizes[2] if len(sizes) == 3 else (out[-1] if out else w[-1] // 3)
    hidden_qk = (w[-1] - hidden_v) // 2
    heads = int(op.attrs.get("num_heads", 1))
    projection = math.prod(x) * w[-1]
    return projection + batch * seq * seq * (hidden_qk + hidden_v) + 3 * batch * heads * seq * seq


def multi_head_attention_macs(op: Op, shapes: Shapes) -> int:
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


def window_pool_macs(op: Op, shapes: Shapes) -> int:
    kernel = op.attrs.get("kernel_shape") or []
    return _out_numel(op, shapes) * math.prod(kernel)


def input_numel_macs(op: Op, shapes: Shapes) -> int:
    return _numel(shapes, op.inputs, 0)


def elementwise_macs(op: Op, shapes: Shapes) -> int:
    return _out_numel(op, shapes)


def variadic_macs(op: Op, shapes: Shapes) -> int:
    operands = len([t for t in op.inputs if t])
    return _out_numel(op, shapes) * max(1, operands - 1)


def scaled_elementwise(factor: int) -> MacRule:
    def rule(op: Op, shapes: Shapes) -> int:
        return factor * _out_numel(op, shapes)

    rule.__name__ = f"_elementwise_times_{factor}"
    return rule


def lrn_macs(op: Op, shapes: Shapes) -> int:
    return _out_numel(op, shapes) * (int(op.attrs.get("size", 1)) + 1)


def einsum_macs(op: Op, shapes: Shapes) -> int:
    """Product of the extents of every index letter and of the broadcast ellipsis dims, times
    operands-1 for three or more operands; else (a shape missing or not matching its term)
    output elements. O(sum of the operands' ranks)."""
    equation = str(op.attrs.get("equation", "")).replace(" ", "")
    terms = equation.split("->")[0].split(",")
    if len(terms) != len(op.inputs):
        return _out_numel(op, shapes)
    extents: dict[str, int] = {}
    ellipsis: list[int] = []  # the broadcast ellipsis dims, innermost last
    for position, term in enumerate(terms):
        shape = _shape(shapes, op.inputs, position)
        letters = term.replace("...", "")
        if shape is None or len(shape) < len(letters) or ("..." not in term and len(shape) != len(letters)):
            return _out_numel(op, shapes)
        before = term.index("...") if "..." in term else len(term)
        broadcast = len(shape) - len(letters)
        dims = list(shape[:before]) + list(shape[before + broadcast:])
        for letter, dim in zip(letters, dims, strict=True):
            extents[letter] = max(extents.get(letter, 1), dim)
        ellipsis = _broadcast(ellipsis, list(shape[before:before + broadcast]))
    return math.prod(extents.values()) * math.prod(ellipsis) * max(1, len(terms) - 1)


def _broadcast(a: list[int], b: list[int]) -> list[int]:
    """Numpy broadcasting of two shapes (dims aligned from the right; the larger dim kept)."""
    rank = max(len(a), len(b))
    a, b = [1] * (rank - len(a)) + a, [1] * (rank - len(b)) + b
    return [max(x, y) for x, y in zip(a, b, strict=True)]


RECURRENT_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4, "DynamicQuantizeLSTM": 4}
"""Gates per op type: each has its own W, R and bias blocks of hidden_size rows."""


_RECURRENT_ELEMENTWISE = {"RNN": 1, "GRU": 7, "LSTM": 8, "DynamicQuantizeLSTM": 8}
"""Elementwise operations per hidden unit and step besides biases and peepholes (see the module
docstring)."""


def recurrent_macs(op: Op, shapes: Shapes) -> int:
    """RNN/GRU/LSTM by the module docstring: steps * batch * directions * per-step work."""
    x = _shape(shapes, op.inputs, 0)
    hidden = _hidden_size(op, shapes)
    if x is None or len(x) != 3 or hidden is None:
        return 0
    steps, batch = (x[1], x[0]) if op.attrs.get("layout", 0) else (x[0], x[1])
    directions = 2 if op.attrs.get("direction", "forward") == "bidirectional" else 1
    gates = RECURRENT_GATES[op.op_type]
    per_unit = gates * (x[2] + hidden) + _RECURRENT_ELEMENTWISE[op.op_type]
    if _shape(shapes, op.inputs, 3) is not None:  # B: Wb and Rb
        per_unit += 2 * gates
    if gates == 4 and _shape(shapes, op.inputs, 7) is not None:  # P: three peepholes
        per_unit += 3
    return steps * batch * directions * hidden * per_unit


def _hidden_size(op: Op, shapes: Shapes) -> int | None:
    """The ``hidden_size`` attribute, else the hidden dim of R ([dirs, gates*h, h]; the
    DynamicQuantizeLSTM R is stored transposed, [dirs, h, 4*h])."""
    if op.attrs.get("hidden_size"):
        return int(op.attrs["hidden_size"])
    r = _shape(shapes, op.inputs, 2)
    if r is None or len(r) != 3:
        return None
    return r[1] if op.op_type == "DynamicQuantizeLSTM" else r[2]


def zero_macs(op: Op, shapes: Shapes) -> int:
    return 0


def output_elements(op: Op, shapes: Shapes) -> int:
    """Elements of all of ``op``'s outputs: the MACs of an unknown op (and of random ops)."""
    return sum(_numel(shapes, op.outputs, i) for i in range(len(op.outputs)))
