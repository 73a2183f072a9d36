"""The per-channel affine kernel: ``y = x * a[c] + b[c]`` on an int8 stream, one lane stage.

The ops it runs (``registry.BROADER`` sends them here when their own kernel refuses them): a
``BatchNormalization`` that is not folded into a convolution (DenseNet's pre-activation batch
norms after a Concat: ``a = scale / sqrt(var + eps)``, ``b = B - mean * a``, every parameter
constant), and a ``Mul`` of one activation by a constant of one value per channel or one in all
(``a`` the constant, ``b = 0``). A Relu or Clip between the op and its QuantizeLinear gives the
output's bounds. In a QDQ model every constant is read as real values (``QdqIndex.bias``: a
DequantizeLinear of an int8 or int32 constant, per tensor or per axis, or a float constant).

Integer semantics (``fpgaplace.hw.reference.affine``, C++ ``fp::affine``, RTL ``rtl/affine.v.j2``)
for element ``x`` of channel ``c`` (stream order is channels last, so ``c = e mod C``)::

    y = clamp(ZY + round_half_even(((x - ZX) * M[c] + B[c]) / 2**S), LO, HI)

with signed multipliers ``M[c] = round_half_even(sx * a[c] / sy * 2**S)`` (a batch norm's scale
may be negative) and offsets ``B[c] = round_half_even(b[c] / sy * 2**S)``, one shift ``S`` for
all channels: ``quantize_multiplier``'s shift of the largest ``|sx * a[c] / sy|`` less
``MULTIPLIER_BITS - MULT_MAGNITUDE_BITS``, so the largest ``|M|`` lies in ``[2**22, 2**23]``
and every ``M`` fits a 25-bit signed DSP port; ``S`` is at most ``MAX_SHIFT``. Error: each of
``M[c] * 2**-S`` and ``B[c] * 2**-S`` is within ``2**-(S+1)`` of its real value, so the value
rounded is within ``256 * 2**-(S+1)`` LSB of the real ``(x - zx) * sx * a / sy + b / sy``: at most
``2**-15 * max|sx a / sy|`` (``2**-30`` where ``S`` is capped), far below the float32 rounding
onnxruntime itself makes; the output is onnxruntime's but where that value lies that close to a
rounding tie, then 1 LSB off (DenseNet-121's 62 batch norms on a random input: every element
equal, ``tests/test_affine.py``).
``B`` is clamped to ``±(256 * 2**S + 256 * max|M|)``: beyond that the output saturates either
way, so the clamp changes no output and keeps ``B`` within ``OFFSET_BITS``.

Cost: the lane rule (``Kernel.cycles``: SIZE / (PE x MMV) cycles), one DSP a lane for its
``(x - ZX) * M[c]`` product (10 x 25 bits, one DSP48E1 or DSP48E2: ``resources``, checked
against yosys), and the per-channel words in a ROM of ``lcm(L, C) / L`` words of L lanes of
``WORD_BITS`` (``memory_blocks``: LUTRAM when shallow, else BRAM). Geometry and cycles O(1),
lowering O(C), the reference O(SIZE).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from fpgaplace.hw import reference
from fpgaplace.hw.elementwise import Elementwise, lane_geometry, per_channel_period
from fpgaplace.hw.geometry import Folding, Geometry, Resources, Rom, RtlUnit, Unsupported
from fpgaplace.hw.kernel import activation_inputs, probe, tensor_shape
from fpgaplace.hw.lowering import Layer, bounds, multipliers
from fpgaplace.hw.memory import memory_blocks
from fpgaplace.hw.qdq import qdq_index
from fpgaplace.hw.quant import MULTIPLIER_BITS
from fpgaplace.hw.rtl_values import (
    PORT_IN,
    PORT_OUT,
    check_int8_members,
    const_requant,
    index_bits,
    int_members,
    pack_lanes,
)
from fpgaplace.util.errors import FpgaplaceError

if TYPE_CHECKING:
    from fpgaplace.board.model import FpgaCore
    from fpgaplace.hw.lowering import LayerContext
    from fpgaplace.model.ir import Op, OpGraph

MULT_MAGNITUDE_BITS = 23  # |M| <= 2**23: a 25-bit signed multiplier, one DSP's A port (DSP48E1 and E2)
MULT_BITS = MULT_MAGNITUDE_BITS + 2  # signed bits of a multiplier in the ROM
MAX_SHIFT = 37  # the shift S at most: |B| <= 256 * 2**S + 2**31 then fits OFFSET_BITS
OFFSET_BITS = 48  # signed bits of an offset in the ROM
WORD_BITS = MULT_BITS + OFFSET_BITS  # one lane's word: {M, B}
VALUE_BITS = OFFSET_BITS + 1  # signed bits of (x - ZX) * M + B: |.| < 2**31 + 2**47
BATCHNORM_EPSILON = 1e-5  # ONNX BatchNormalization's default epsilon


def rom_words(lanes: int, channels: int) -> int:
    """Words of the per-channel ROM of a stage of ``lanes`` lanes over a constant repeating every
    ``channels`` elements: ``lcm(lanes, channels) / lanes`` (one beat phase a word)."""
    return math.lcm(lanes, channels) // lanes


def fixed_point(real_scale: np.ndarray, real_offset: np.ndarray, where: str) -> tuple[np.ndarray, np.ndarray, int]:
    """(M, B, S) of the per-channel real factors ``real_scale`` (``sx * a / sy``) and offsets
    ``real_offset`` (``b / sy``, in output LSB): see the module docstring. O(C)."""
    if not (np.all(np.isfinite(real_scale)) and np.all(np.isfinite(real_offset))):
        raise FpgaplaceError(f"{where}: the per-channel scale or offset is not finite")
    largest = float(np.abs(real_scale).max())
    shift = MAX_SHIFT
    if largest > 0:
        (_,), (s,) = multipliers(np.array([largest]), where)
        shift = min(int(s) - (MULTIPLIER_BITS - MULT_MAGNITUDE_BITS), MAX_SHIFT)
    if shift < 1:
        raise FpgaplaceError(f"{where}: per-channel scale {largest:.3g} is too large for an int8 affine stage")
    mult = np.rint(np.ldexp(real_scale, shift)).astype(np.int64)
    limit = (256 << shift) + 256 * int(np.abs(mult).max())
    offset = np.clip(np.rint(np.ldexp(real_offset, shift)), -limit, limit).astype(np.int64)
    return mult, offset, shift


class Affine(Elementwise):
    """``y = x * a[c] + b[c]`` of one int8 stream with constant ``a``, ``b`` (a batch norm that is
    not folded, a Mul by a constant): see the module docstring."""

    name, template = "affine", "hls/ops/affine.j2"

    # ---- geometry and cost ----

    def geometry(self, op: Op, graph: OpGraph) -> Geometry | Unsupported:
        """A lane geometry whose ``C`` member is the constants' period (the channels, or 1)."""
        acts = activation_inputs(op, graph)
        out = tensor_shape(graph, op.outputs[0]) if op.outputs else None
        if len(acts) != 1 or out is None or tensor_shape(graph, acts[0]) != out:
            return Unsupported(f"{op.op_type}: expected one activation of the output's shape and constant operands")
        period = self.period(op, graph, out)
        if isinstance(period, Unsupported):
            return period
        if getattr(graph, "is_qdq", False):
            index = qdq_index(graph.model)
            unreadable = next((t for t in self.constants(op, graph) if index.bias(t) is None), None)
            if unreadable is not None:
                return Unsupported(f"constant '{unreadable}' is neither a DequantizeLinear of a constant nor a "
                                   "float constant")
        channels = out[1] if len(out) >= 2 else out[0]
        return lane_geometry(self.name, out, channels, {"CHANNELS": [channels], "C": period})

    def constants(self, op: Op, graph: OpGraph) -> list[str]:
        """The constant operands: a batch norm's scale, B, mean and variance; a Mul's constant."""
        return [t for t in op.inputs if t and t in graph.params]

    def period(self, op: Op, graph: OpGraph, out: tuple[int, ...]) -> int | Unsupported:
        """Elements after which ``a`` and ``b`` repeat in stream order: the channels (a batch norm
        of an NCHW or [N, C] tensor, a Mul by one value per channel) or 1 (a Mul by a scalar)."""
        consts = self.constants(op, graph)
        if op.op_type == "BatchNormalization":
            if len(op.outputs) != 1 or int(op.attrs.get("training_mode", 0)) or len(consts) != 4:
                return Unsupported("a batch norm in training mode, or with a parameter that is not constant")
            if len(out) not in (2, 4) or any(tensor_shape(graph, t) != (out[1],) for t in consts):
                return Unsupported(f"a batch norm of {out}: expected an NCHW or [N, C] tensor and [C] parameters")
            return out[1]
        if op.op_type == "Mul" and len(consts) == 1:
            period = per_channel_period(tensor_shape(graph, consts[0]), out)
            return period if period else Unsupported("Mul by a constant that is not one value per channel "
                                                     "(or one in all)")
        return Unsupported(f"{op.op_type}: expected a batch norm or a Mul of one activation by a constant")

    def resources(self, g: Geometry, fold: Folding, core: FpgaCore | None = None, resident: bool = True) -> Resources:
        """The lane rules (the ROM in ``_memory``) plus one DSP a lane for ``(x - ZX) * M[c]``."""
        base = super().resources(g, fold, core, resident)
        return Resources(fold.pe * fold.mmv, *base.as_tuple()[1:])

    def _memory(self, g: Geometry, fold: Folding, core: FpgaCore | None, resident: bool) -> tuple[int, int, int]:
        """The per-channel ROM: ``rom_words`` words of L lanes of ``WORD_BITS`` (``memory_blocks``)."""
        lanes = fold.pe * fold.mmv
        return memory_blocks(WORD_BITS * lanes, rom_words(lanes, g.shape["C"]))

    def fixed_bytes(self, g: Geometry, core: FpgaCore | None = None) -> int:
        """The per-channel words, ``WORD_BITS`` each, on chip wherever the stage runs."""
        return math.ceil(WORD_BITS * g.shape["C"] / 8)

    def shape_geometry(self, shape: tuple[int, ...], constant: tuple[int, ...] | None = None) -> Geometry:
        """The geometry of a one-sample Mul of an NCHW ``shape`` by a ``constant`` (per channel unless given)."""
        return probe(self, "Mul", {}, ["a", "b"], {"a": shape, "b": constant or (shape[1], 1, 1), "y": shape}, ("b",))

    # ---- integer layer and reference ----

    def real_map(self, ctx: LayerContext, op: Op, period: int) -> tuple[np.ndarray, np.ndarray]:
        """``(a, b)`` of ``op`` in float64, ``period`` values each, from its constants as real values."""
        values = {t: ctx.index.bias(t) for t in self.constants(op, ctx.graph)}
        missing = next((t for t, v in values.items() if v is None), None)
        if missing is not None:
            raise FpgaplaceError(f"op '{op.name}': constant '{missing}' is neither a DequantizeLinear of a constant "
                                 "nor a float constant")
        if op.op_type == "Mul":
            (a,) = values.values()
            return np.broadcast_to(a.reshape(-1), (period,)).astype(np.float64), np.zeros(period)
        scale, bias, mean, var = (values[t].reshape(-1) for t in op.inputs[1:5])
        variance = var + float(op.attrs.get("epsilon", BATCHNORM_EPSILON))
        if np.any(variance <= 0):
            raise FpgaplaceError(f"op '{op.name}': variance + epsilon must be positive")
        a = scale / np.sqrt(variance)
        return a, bias - mean * a

    def lower(self, ctx: LayerContext, op: Op, shape: dict) -> Layer:
        """The layer of ``op``: ``fixed_point`` of ``sx * a / sy`` and ``b / sy``, the output's bounds."""
        x = ctx.source(op, activation_inputs(op, ctx.graph)[0])
        out = ctx.sink(op)
        y = out.tensor
        a, b = self.real_map(ctx, op, shape["C"])
        mult, offset, s = fixed_point(x.scale * a / y.scale, b / y.scale, f"op '{op.name}'")
        lo, hi = bounds(ctx.index, out.activations, y.scale, y.zero_point)
        config = {"SIZE": shape["SIZE"] // ctx.batch(), "C": shape["C"], "ZX": x.zero_point, "S": s,
                  "ZY": y.zero_point, "LO": lo, "HI": hi}
        return Layer(op.name, self.name, [x.name], y.name, config,
                     {"mult": mult.astype(np.int32), "offset": offset.astype(np.int64)})

    def reference(self, config: dict, arrays: dict, inputs: list[np.ndarray], rows: int = 1) -> np.ndarray:
        c = config
        return reference.affine(np.asarray(inputs[0]).reshape(-1), arrays["mult"], arrays["offset"], zx=c["ZX"],
                                s=c["S"], zy=c["ZY"], lo=c["LO"], hi=c["HI"])

    # ---- RTL ----

    def rtl(self, config: dict[str, Any], arrays: dict[str, Any], fold: Folding, top: str, model_cycles: int,
            macs_per_dsp: int = 1, core: FpgaCore | None = None) -> RtlUnit:
        """``rtl/affine.v.j2``: E = PE x MMV elements a beat, lane j of beat t of channel
        ``(t E + j) mod C``, its ``{M, B}`` from word ``t mod rom_words`` of the ROM."""
        c = int_members(config)
        check_int8_members(c, ("ZX", "ZY"), self.name)
        size, period, elems = c["SIZE"], c["C"], fold.pe * fold.mmv
        mult = np.asarray(arrays.get("mult", ()), dtype=np.int64).reshape(-1)
        offset = np.asarray(arrays.get("offset", ()), dtype=np.int64).reshape(-1)
        if size % elems or size % period or mult.size != period or offset.size != period:
            raise FpgaplaceError(f"rtl {top}: PE={fold.pe} x MMV={fold.mmv} lanes and the C={period} channels must "
                                 f"divide SIZE={size}, with C multipliers and offsets")
        if np.abs(mult).max() > 2**MULT_MAGNITUDE_BITS or np.abs(offset).max() >= 2 ** (OFFSET_BITS - 1):
            raise FpgaplaceError(f"rtl {top}: multipliers must lie within ±2**{MULT_MAGNITUDE_BITS} and offsets "
                                 f"within {OFFSET_BITS} signed bits")
        words = rom_words(elems, period)
        mask = (1 << OFFSET_BITS) - 1
        lane_words = [[((int(mult[ch]) << OFFSET_BITS) | (int(offset[ch]) & mask))
                       for ch in ((t * elems + j) % period for j in range(elems))] for t in range(words)]
        rom = f"{top}_coefficients.mem"
        rq = const_requant(f"{top}_rq", [("a", VALUE_BITS, 1)], c["S"], c["ZY"], c["LO"], c["HI"])
        values = c | {"name": top, "E": elems, "WORDS": words, "WORD_INDEX_BITS": index_bits(words),
                      "MB": MULT_BITS, "OB": OFFSET_BITS, "WB": WORD_BITS, "VB": VALUE_BITS, "rom_file": rom,
                      "rq": rq}
        return RtlUnit("rtl/affine.v.j2", values, {rom: Rom([pack_lanes(w, WORD_BITS) for w in lane_words],
                                                            WORD_BITS * elems)},
                       ((PORT_IN, elems, size),), (PORT_OUT, elems, size))
