"""A QONNX model (Brevitas/FINN export: ``Quant`` and ``BipolarQuant`` on weights and activations)
rewritten as the int8 QDQ model the cores are built from, holding the same values.

The integer reference is qonnx's own execution (``qonnx.custom_op.general.intquant.int_quant``,
``bipolar_quant.binary_quant``), whose steps ``int_quant`` below follows: ``y = x / scale +
zeropt`` in float32, clamped to ``[min_int, max_int]`` of ``bitwidth`` bits (signed: ``-2^(b-1) +
narrow .. 2^(b-1) - 1``, unsigned: ``0 .. 2^b - 1 - narrow``), rounded half to even, then ``(y -
zeropt) * scale``; a signed 1-bit Quant and a BipolarQuant give +-1 by the sign of ``y`` (0 counts
as +1). The rewrite, node by node:

- a quantizer of a constant (a weight) becomes its integer codes as an int8 initializer and a
  DequantizeLinear with the quantizer's scale (per tensor, or per channel on the one axis its
  scale varies along) and zero point 0: the same values, stored at their codes;
- a quantizer of an activation becomes ``Clip -> QuantizeLinear -> DequantizeLinear``: the Clip
  bounds ``(min_int - zeropt) * scale`` and ``(max_int - zeropt) * scale`` narrow the int8 range
  to the quantizer's (left out where the range is int8's own); QuantizeLinear rounds half to even
  as Quant does, and clamping before or after rounding agree for integer bounds. An unsigned 8-bit
  range ``0..255`` is held as int8 codes shifted by -128 (zero point ``zeropt - 128``);
- a bipolar activation becomes ``GreaterOrEqual(x, -zeropt * scale) -> Where(+-1 levels) ->
  QuantizeLinear -> DequantizeLinear`` (both at the quantizer's scale and zero point): codes -1 and
  +1, exactly the sign rule above;
- a MaxPool reading a dequantized activation gets a QuantizeLinear/DequantizeLinear pair of its
  input's parameters after it (a maximum of grid values is on the grid, so this changes nothing),
  as the lowering wants every core op's output to reach a QuantizeLinear.

Each int8 tensor's width is kept in the model's metadata (``fpgaplace.model.qdq.write_widths``),
which the front end reads as the QONNX widths. What the
rewrite does not lower (Trunc, a quantizer wider than 8 bits, a non-constant scale or width, a
zero point that is not an integer, another rounding mode) is a one-line error naming the node.
O(nodes + weights).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

from fpgaplace.model.ops import QONNX_DOMAINS, constant_node_values
from fpgaplace.model.qdq import FROM_QONNX_KEY, is_from_qonnx, write_widths
from fpgaplace.util.errors import FpgaplaceError

MAX_BITS = 8
VALUE_PRESERVING = frozenset({"MaxPool", "GlobalMaxPool"})
"""Ops between quantizers whose outputs are values of their input: they get their input's Q/DQ."""
ROUNDINGS = ("ROUND", "HALF_EVEN")


@dataclass(frozen=True)
class QuantSpec:
    """One QONNX quantizer's parameters."""

    node: str
    scale: np.ndarray  # float32, broadcast against the input
    zero_point: float
    bits: int
    signed: bool
    narrow: bool

    @property
    def bipolar(self) -> bool:
        return self.bits == 1 and self.signed

    @property
    def low(self) -> int:
        """qonnx ``min_int``."""
        return -(2 ** (self.bits - 1)) + int(self.narrow) if self.signed else 0

    @property
    def high(self) -> int:
        """qonnx ``max_int``."""
        return 2 ** (self.bits - 1) - 1 if self.signed else 2**self.bits - 1 - int(self.narrow)

    def width(self) -> dict:
        return {"bits": self.bits, "signed": self.signed, "bipolar": self.bipolar, "node": self.node}


def int_quant(x: np.ndarray, spec: QuantSpec) -> np.ndarray:
    """The integer codes qonnx's Quant computes for ``x`` (before its ``(y - zeropt) * scale``), as
    int64: float32 ``x / scale + zeropt``, bipolar +-1 by its sign, else clamped and rounded half to
    even. O(x)."""
    y = np.asarray(x, dtype=np.float32) / spec.scale.astype(np.float32) + np.float32(spec.zero_point)
    if spec.bipolar:
        return np.where(y >= 0, 1, -1).astype(np.int64)
    return np.round(np.clip(y, spec.low, spec.high)).astype(np.int64)


def is_qonnx(model: onnx.ModelProto) -> bool:
    """Whether ``model``'s graph has QONNX quantizer nodes."""
    return any(node.domain in QONNX_DOMAINS and node.op_type in ("Quant", "BipolarQuant", "Trunc")
               for node in model.graph.node)


def _label(node: onnx.NodeProto) -> str:
    return f"QONNX {node.op_type} '{node.name or node.output[0]}'"


class _Rewriter:
    """The new node list, initializers and widths of one rewrite."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.model = model
        graph = model.graph
        self.values = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
        self.values.update(constant_node_values(graph.node))
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.widths: dict[str, dict] = {}
        self.activation_qparams: dict[str, tuple[str, str, dict]] = {}  # dequantized tensor -> scale, zero, width
        self.quantizer_readers = {t for node in graph.node if node.domain in QONNX_DOMAINS for t in node.input[:1]}

    def const(self, name: str, value: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(value, name))
        return name

    def add(self, op_type: str, inputs: list[str], output: str, name: str, **attrs) -> str:
        self.nodes.append(helper.make_node(op_type, inputs, [output], name=name, **attrs))
        return output

    def spec(self, node: onnx.NodeProto) -> QuantSpec:
        """The parameters of a Quant or BipolarQuant (one-line errors for what is not lowered)."""
        label = _label(node)
        if node.op_type == "Trunc":
            raise FpgaplaceError(f"{label}: Trunc is not lowered to integer stages yet; expected Quant or "
                                 "BipolarQuant between the layers")
        missing = [t for t in node.input[1:] if t and t not in self.values]
        if missing:
            raise FpgaplaceError(f"{label}: input '{missing[0]}' is not a constant; expected constant quantizer "
                                 "parameters")
        scale = self.values[node.input[1]].astype(np.float32)
        if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
            raise FpgaplaceError(f"{label}: scale {scale.min():g}; expected positive finite scales")
        if node.op_type == "BipolarQuant":
            return QuantSpec(node.name or node.output[0], scale, 0.0, 1, True, False)
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        mode = attrs.get("rounding_mode", b"ROUND")
        mode = mode.decode() if isinstance(mode, bytes) else str(mode)
        if mode.upper() not in ROUNDINGS:
            raise FpgaplaceError(f"{label}: rounding_mode {mode!r} is not lowered; expected 'ROUND'")
        zero, bits = self.values[node.input[2]], self.values[node.input[3]]
        if zero.size != 1 or float(zero.flat[0]) != round(float(zero.flat[0])):
            raise FpgaplaceError(f"{label}: zero point {zero.reshape(-1)[:2].tolist()}; expected one integer")
        if bits.size != 1 or float(bits.flat[0]) != round(float(bits.flat[0])) or not 1 <= bits.flat[0] <= MAX_BITS:
            raise FpgaplaceError(f"{label}: bit width {bits.reshape(-1)[:2].tolist()}; expected an integer 1 to "
                                 f"{MAX_BITS} (wider quantizers are not lowered)")
        return QuantSpec(node.name or node.output[0], scale, float(zero.flat[0]), int(bits.flat[0]),
                         bool(attrs.get("signed", 1)), bool(attrs.get("narrow", 0)))

    def weight(self, node: onnx.NodeProto, spec: QuantSpec) -> None:
        """A quantized constant: int8 codes and a DequantizeLinear writing the quantizer's output."""
        w = self.values[node.input[0]]
        if spec.zero_point != 0:
            raise FpgaplaceError(f"{_label(node)}: weight zero point {spec.zero_point:g}; expected 0")
        axes = [a for a, n in enumerate(np.broadcast_shapes(spec.scale.shape, w.shape)) if a >= w.ndim - spec.scale.ndim
                and spec.scale.shape[a - (w.ndim - spec.scale.ndim)] > 1]
        if len(axes) > 1 or spec.scale.ndim > w.ndim:
            raise FpgaplaceError(f"{_label(node)}: scale of shape {list(spec.scale.shape)} for a weight of shape "
                                 f"{list(w.shape)}; expected one scale or one per channel of one axis")
        out = node.output[0]
        codes = self.const(f"{out}_int", int_quant(w, spec).astype(np.int8))
        scale = spec.scale.reshape(-1)
        attrs = {"axis": axes[0]} if axes else {}
        zero = np.zeros(scale.shape if axes else (), np.int8)
        scale = scale if axes else scale.reshape(())
        self.add("DequantizeLinear", [codes, self.const(f"{out}_scale", scale), self.const(f"{out}_zero", zero)],
                 out, f"{spec.node}_dq", **attrs)
        self.widths[codes] = spec.width()

    def activation(self, node: onnx.NodeProto, spec: QuantSpec) -> None:
        """A quantized activation: (Clip ->) QuantizeLinear -> DequantizeLinear, or the bipolar form."""
        if spec.scale.size != 1:
            raise FpgaplaceError(f"{_label(node)}: {spec.scale.size} scales on an activation; expected one")
        x, out, scale = node.input[0], node.output[0], float(spec.scale.reshape(-1)[0])
        dq_scale = self.const(f"{out}_scale", np.array(scale, np.float32))
        if spec.bipolar:
            edge = self.const(f"{out}_edge", np.array(-spec.zero_point * scale, np.float32))
            sign = self.add("GreaterOrEqual", [x, edge], f"{out}_sign", f"{spec.node}_sign")
            levels = [self.const(f"{out}_{end}", np.array((v - spec.zero_point) * scale, np.float32))
                      for end, v in (("plus", 1), ("minus", -1))]
            x = self.add("Where", [sign, *levels], f"{out}_levels", f"{spec.node}_levels")
            q_scale = dq_scale
            dq_zero = self.const(f"{out}_zero", np.array(int(spec.zero_point), np.int8))
        else:
            offset = 0 if spec.high <= 127 else 127 - spec.high  # unsigned 8 bits: codes shifted into int8
            code = int(spec.zero_point) + offset
            if not -128 <= code <= 127 or spec.low + offset < -128:
                raise FpgaplaceError(f"{_label(node)}: zero point {spec.zero_point:g} puts its range outside int8")
            if spec.low + offset > -128 or spec.high + offset < 127:
                bounds = [self.const(f"{out}_{end}", np.array((v - spec.zero_point) * scale, np.float32))
                          for end, v in (("low", spec.low), ("high", spec.high))]
                x = self.add("Clip", [x, *bounds], f"{out}_clipped", f"{spec.node}_clip")
            q_scale = dq_scale
            dq_zero = self.const(f"{out}_zero", np.array(code, np.int8))
        codes = self.add("QuantizeLinear", [x, q_scale, dq_zero], f"{out}_int", f"{spec.node}_q")
        self.add("DequantizeLinear", [codes, dq_scale, dq_zero], out, f"{spec.node}_dq")
        self.activation_qparams[out] = (dq_scale, dq_zero, spec.width())
        self.widths[codes] = spec.width()

    def requantized(self, node: onnx.NodeProto) -> None:
        """A value-preserving op on a dequantized activation, followed by its input's Q/DQ."""
        scale, zero, width = self.activation_qparams[node.input[0]]
        out = node.output[0]
        moved = onnx.NodeProto()
        moved.CopyFrom(node)
        moved.output[0] = f"{out}_float"
        self.nodes.append(moved)
        codes = self.add("QuantizeLinear", [moved.output[0], scale, zero], f"{out}_int", f"{node.name or out}_q")
        self.add("DequantizeLinear", [codes, scale, zero], out, f"{node.name or out}_dq")
        self.activation_qparams[out] = (scale, zero, width)
        self.widths[codes] = width

    def node(self, node: onnx.NodeProto) -> None:
        if node.domain in QONNX_DOMAINS:
            spec = self.spec(node)
            if node.input[0] in self.values:
                self.weight(node, spec)
            else:
                self.activation(node, spec)
        elif (node.op_type in VALUE_PRESERVING and node.input[0] in self.activation_qparams
              and node.output[0] not in self.quantizer_readers):
            self.requantized(node)
        else:
            self.nodes.append(node)


def qonnx_to_qdq(model: onnx.ModelProto, source: str = "<model>") -> onnx.ModelProto:
    """The int8 QDQ model of QONNX ``model`` (see the module docstring; ``model`` is not changed).
    One-line errors name ``source`` and the quantizer that is not lowered. O(nodes + weights)."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < 13:
        raise FpgaplaceError(f"{source}: opset {opset}; per-channel DequantizeLinear needs opset 13 or later")
    rewriter = _Rewriter(model)
    try:
        for node in model.graph.node:
            rewriter.node(node)
    except FpgaplaceError as error:
        raise FpgaplaceError(f"{source}: {error}") from None
    result = onnx.ModelProto()
    result.CopyFrom(model)
    graph = result.graph
    del graph.node[:]
    graph.node.extend(rewriter.nodes)
    used = {t for node in graph.node for t in node.input} | {o.name for o in graph.output}
    kept = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept + rewriter.initializers)
    del graph.value_info[:]  # the rewritten tensors are inferred again
    kept_functions = [f for f in result.functions if f.domain not in QONNX_DOMAINS]
    del result.functions[:]
    result.functions.extend(kept_functions)
    opsets = [o for o in result.opset_import if o.domain not in QONNX_DOMAINS]
    del result.opset_import[:]
    result.opset_import.extend(opsets)
    write_widths(result, rewriter.widths)
    if not is_from_qonnx(result):
        result.metadata_props.add(key=FROM_QONNX_KEY, value=source)
    return result
