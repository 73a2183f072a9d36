"""The LRN kernel: ONNX LRN (local response normalization across channels) on int8 as a lane stage.

ONNX: ``y[c] = x[c] / (bias + alpha / size * sum_{c' in window(c)} x[c']**2) ** beta`` with the
window ``c - floor((size-1)/2) .. c + ceil((size-1)/2)`` (clipped to the channels). With
``x = sx * (q - zx)`` and ``d = q - zx``, the integer stage computes per pixel and channel

* ``S = sum over the window of d**2``, an integer in ``[0, size * D**2]`` (``D``: the largest
  ``|d|`` the zero point allows);
* ``T[index(S)]``: ``(sx / sy) * f(S) * 2**F``, ``f(S) = (bias + alpha / size * sx**2 * S) ** -beta``,
  from a table whose index is ``S`` as a small float (``table_index``: ``S`` itself below
  ``2**(MBITS+1)``, above it the exponent and the ``MBITS`` bits after the leading one), so the
  table has ``(bits(S_max) - MBITS) * 2**MBITS`` entries at most and its relative step in ``S``
  is at most ``2**-MBITS``; each entry holds the midrange of ``f`` over the ``S`` it stands for;
* ``y = requantize(d, T, F, ZY, LO, HI)`` (``fpgaplace.hw.quant``): one rounding.

The error this costs is bounded at lowering: ``|d| <= min(D, sqrt(S))`` since ``d**2`` is in the
sum, so over every ``S`` the value before the rounding is within
``max_S min(D, sqrt S) * |(sx/sy) f(S) - T[index(S)] / 2**F|`` output steps of the exact one.
``MBITS`` is the smallest (from ``MIN_MBITS``) whose bound is at most ``ERROR_LSB`` = 0.25 steps,
so the output is within 1 LSB of onnxruntime's float LRN on the QDQ model (``design_table``,
cached; O(S_max) in numpy per try).

The stage buffers two pixels (``2 C`` bytes, ``linebuffer_bytes``): one fills while the other
gives out its ``C / PE`` beats, like ``fpgaplace.hw.shuffle``; cycles follow the lane rule plus one
pixel's fill. Per lane one DSP (the product ``d * T``), a 256-word ROM of squares and the table
(``resources``). Integer reference, HLS template (``hls/ops/lrn.j2``, ``fp::lrn``) and RTL values
(``rtl/lrn.v.j2``) are here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from fpgaplace.hw.elementwise import Elementwise, lane_geometry
from fpgaplace.hw.geometry import Fill, Folding, Geometry, Resources, Rom, RtlUnit, Unsupported
from fpgaplace.hw.kernel import tensor_shape, unit_fill
from fpgaplace.hw.lowering import Layer, bounds
from fpgaplace.hw.memory import memory_blocks
from fpgaplace.hw.qdq import check_scale, qdq_index
from fpgaplace.hw.quant import requantize
from fpgaplace.hw.rtl_values import PORT_IN, PORT_OUT, check_int8_members, index_bits, int_members
from fpgaplace.util.errors import FpgaplaceError

if TYPE_CHECKING:
    from fpgaplace.board.model import FpgaCore
    from fpgaplace.hw.lowering import LayerContext
    from fpgaplace.model.ir import Op, OpGraph

ERROR_LSB = 0.25  # the table's bound on |value before rounding - exact value|, in output steps
MIN_MBITS, MAX_MBITS = 4, 12  # mantissa bits of the table index tried, coarsest first
DEFAULT_MBITS = 8  # what a float graph's LRN is costed with (its scales are not known yet)
TABLE_BITS = 23  # T < 2**23: with d (10 bits signed) one DSP multiplier on either DSP48
SQUARE_BITS = 17  # (q - zx)**2 <= 255**2 < 2**16, unsigned
PRODUCT_BITS = TABLE_BITS + 12  # d * T: |d| <= 255, T < 2**23, so |d * T| < 2**31 (two bits to spare)


@dataclass(frozen=True)
class LrnTable:
    """The table of one LRN layer: ``values[index(S)]`` = T, its fixed point ``shift`` (F), its
    index's mantissa bits and the bound of the error it causes (output steps)."""

    values: np.ndarray  # int32
    shift: int
    mbits: int
    error_lsb: float


def lrn_window(size: int) -> tuple[int, int]:
    """Channels before and after ``c`` in ``c``'s window (ONNX: floor and ceil of (size-1)/2)."""
    return (size - 1) // 2, size // 2


def table_index(s: np.ndarray, mbits: int) -> np.ndarray:
    """The table index of the sums ``s`` (int64 >= 0): ``s`` below ``2**(mbits+1)``, else
    ``e * 2**mbits + (s >> e)`` with ``e = bits(s) - mbits - 1``. O(len(s))."""
    s = np.asarray(s, dtype=np.int64)
    _, length = np.frexp(s.astype(np.float64))  # the bit length of s (exact: frexp is)
    e = np.maximum(length.astype(np.int64) - mbits - 1, 0)
    return (e << mbits) + (s >> e)


def _bucket(index: np.ndarray, mbits: int) -> tuple[np.ndarray, np.ndarray]:
    """The first and last sums each table index stands for (``table_index`` inverted)."""
    e = np.maximum((index >> mbits) - 1, 0)
    top = index - (e << mbits)
    return top << e, ((top + 1) << e) - 1


def max_offset(zx: int) -> int:
    """The largest ``|q - zx|`` of an int8 ``q``."""
    return max(127 - zx, zx + 128)


@lru_cache(maxsize=64)
def design_table(alpha: float, beta: float, bias: float, size: int, sx: float, zx: int, sy: float,
                 mbits: int | None = None) -> LrnTable:
    """The table of an LRN layer (module docstring): the coarsest index from ``MIN_MBITS`` whose
    error bound is at most ``ERROR_LSB``, or exactly ``mbits`` bits when given; a ValueError when
    none up to ``MAX_MBITS`` is fine enough. O(S_max) per try, in numpy."""
    reach = max_offset(zx)
    sums = np.arange(size * reach * reach + 1, dtype=np.int64)
    ratio = sx / sy

    def f(s: np.ndarray) -> np.ndarray:
        return (bias + alpha / size * sx * sx * s.astype(np.float64)) ** -beta

    exact = ratio * f(sums)
    weight = np.minimum(reach, np.floor(np.sqrt(sums)))
    shift = int(min(62, max(1, math.floor(math.log2((2**TABLE_BITS - 1) / max(exact[0], 1e-300))))))
    for bits in (mbits,) if mbits is not None else range(MIN_MBITS, MAX_MBITS + 1):
        first, last = _bucket(np.arange(int(table_index(sums[-1:], bits)[0]) + 1), bits)
        last = np.minimum(last, sums[-1])
        values = np.rint(ratio * (f(first) + f(last)) / 2 * 2.0**shift).astype(np.int64)
        error = float(np.max(weight * np.abs(exact - values[table_index(sums, bits)] / 2.0**shift)))
        if error <= ERROR_LSB or mbits is not None:
            return LrnTable(values.astype(np.int32), shift, bits, error)
    raise ValueError(f"no table index up to {MAX_MBITS} mantissa bits keeps the error within {ERROR_LSB} LSB")


def lrn_reference(x: np.ndarray, table: np.ndarray, c: dict) -> np.ndarray:
    """The integer LRN of int8 ``x`` (pixels x C, channels last) with ``c``'s members and table."""
    d = np.asarray(x).reshape(-1, c["C"]).astype(np.int64) - c["ZX"]
    squares = np.pad(d * d, ((0, 0), (c["BEFORE"], c["AFTER"])))
    window = c["BEFORE"] + c["AFTER"] + 1
    running = np.concatenate([np.zeros((d.shape[0], 1), np.int64), np.cumsum(squares, axis=1)], axis=1)
    sums = running[:, window:] - running[:, :-window]
    t = np.asarray(table, dtype=np.int64)[table_index(sums, c["MBITS"])]
    return requantize(d, t, c["F"], c["ZY"], c["LO"], c["HI"]).reshape(-1)


class Lrn(Elementwise):
    """ONNX LRN of a 4-D int8 tensor: window sums of squares, a table of the power, one rounding."""

    name, template, inputs = "lrn", "hls/ops/lrn.j2", 1

    def geometry(self, op: Op, graph: OpGraph) -> Geometry | Unsupported:
        out = tensor_shape(graph, op.outputs[0])
        if out is None or len(out) != 4:
            return Unsupported("LRN of a tensor that is not 4-D (NCHW)")
        size = int(op.attrs.get("size", 0))
        if size < 1:
            return Unsupported(f"LRN size {size}; expected a positive integer")
        entries = _table_entries(op, graph)
        if isinstance(entries, Unsupported):
            return entries
        return self.channels_geometry(out, entries)

    def channels_geometry(self, out: tuple[int, ...], entries: int) -> Geometry:
        """The geometry of an LRN writing ``out`` (NCHW) with a table of ``entries``: a two-pixel buffer."""
        g = lane_geometry(self.name, out, out[1], {"CHANNELS": [out[1]], "TABLE": entries})
        return replace(g, linebuffer_bytes=2 * out[1])

    def config_geometry(self, config: dict[str, int]) -> Geometry:
        """The geometry of a one-sample layer with ``config``'s members (RTL tests and benches)."""
        return self.channels_geometry((1, config["C"], config["PIXELS"], 1), config["ENTRIES"])

    def pixel_widths(self, g: Geometry, pe: int) -> tuple[int, ...]:
        """One pixel a cycle at most: the buffer turns over once a pixel."""
        return (1,)

    def cycles(self, g: Geometry, fold: Folding) -> int:
        """The lane rule (``C / PE`` beats a pixel) plus one pixel's beats to fill the buffer."""
        return super().cycles(g, fold) + math.ceil(g.channels / fold.pe)

    def fill(self, g: Geometry, fold: Folding) -> Fill:
        """A pixel whole in its buffer before its outputs (``unit_fill``, a pixel a unit)."""
        beats = math.ceil(g.channels / fold.pe)
        return unit_fill(self.cycles(g, fold), g.pixels, beats, 0, beats)

    def resources(self, g: Geometry, fold: Folding, core: FpgaCore | None = None, resident: bool = True) -> Resources:
        """The lane stage's, plus per lane one DSP (``d * T``) and its copies of the table and of the squares."""
        base = super().resources(g, fold, core, resident)
        table = memory_blocks(TABLE_BITS, g.shape["TABLE"])
        squares = memory_blocks(SQUARE_BITS, 256)
        bram, uram, lut = (fold.pe * (a + b) for a, b in zip(table, squares, strict=True))
        return base + Resources(fold.pe, bram, uram, lut, 0)

    def reference(self, config: dict, arrays: dict, inputs: list[np.ndarray], rows: int = 1) -> np.ndarray:
        return lrn_reference(inputs[0], arrays["table"], config)

    def lower(self, ctx: LayerContext, op: Op, shape: dict) -> Layer:
        """The layer of ``op``: its window, zero points, bounds and table (``design_table``)."""
        x, out = ctx.source(op, op.inputs[0]), ctx.sink(op)
        y = out.tensor
        table = _table(op, x.scale, x.zero_point, y.scale)
        lo, hi = bounds(ctx.index, out.activations, y.scale, y.zero_point)
        before, after = lrn_window(int(op.attrs["size"]))
        channels = shape["CHANNELS"][0]
        pixels = shape["PIXELS"] // ctx.batch()
        config = {"SIZE": pixels * channels, "PIXELS": pixels, "C": channels, "BEFORE": before, "AFTER": after,
                  "ZX": x.zero_point, "ZY": y.zero_point, "LO": lo, "HI": hi, "F": table.shift, "MBITS": table.mbits,
                  "ENTRIES": int(table.values.size)}
        return Layer(op.name, self.name, [x.name], y.name, config, {"table": table.values})

    def rtl(self, config: dict[str, Any], arrays: dict[str, Any], fold: Folding, top: str, model_cycles: int,
            macs_per_dsp: int = 1, core: FpgaCore | None = None) -> RtlUnit:
        """``rtl/lrn.v.j2``: PE channels a beat; ROMs of the squares (by ``q``) and of the table."""
        c = int_members(config)
        table = [int(v) for v in np.asarray(arrays.get("table", ()), dtype=np.int64).reshape(-1)]
        if not table or any(not 0 <= v < 2**TABLE_BITS for v in table) or c["C"] % fold.pe:
            raise FpgaplaceError(f"rtl {top}: a table of values in [0, 2**{TABLE_BITS}) is needed and PE={fold.pe} "
                                 f"must divide C={c['C']}")
        check_int8_members(c, ("ZX", "ZY"), self.name)
        squares = [(q - c["ZX"]) ** 2 for q in range(-128, 128)]
        sum_bits = (max(squares) * (c["BEFORE"] + c["AFTER"] + 1)).bit_length()
        roms = {f"{top}_table.mem": Rom(table, TABLE_BITS), f"{top}_squares.mem": Rom(squares, SQUARE_BITS)}
        beats = c["C"] // fold.pe
        values = c | {"name": top, "PE": fold.pe, "BEATS": beats, "BEAT_BITS": index_bits(beats), "T_W": TABLE_BITS,
                      "V_W": PRODUCT_BITS, "F_RTL": min(c["F"], PRODUCT_BITS - 1), "SQ_W": SQUARE_BITS,
                      "SUM_W": sum_bits, "INDEX_W": index_bits(len(table)),
                      "ENTRIES": len(table), "table_file": f"{top}_table.mem", "squares_file": f"{top}_squares.mem",
                      "LO_BITS": f"8'h{c['LO'] & 0xFF:02x}", "HI_BITS": f"8'h{c['HI'] & 0xFF:02x}"}
        size = c["SIZE"]
        return RtlUnit("rtl/lrn.v.j2", values, roms, ((PORT_IN, fold.pe, size),), (PORT_OUT, fold.pe, size))


def _table(op: Op, sx: float, zx: int, sy: float, mbits: int | None = None) -> LrnTable:
    """The op's table from its attributes and scales; a one-line error naming the op."""
    a = op.attrs
    check_scale(sx, f"op '{op.name}': input")
    check_scale(sy, f"op '{op.name}': output")
    try:
        return design_table(float(a.get("alpha", 1e-4)), float(a.get("beta", 0.75)), float(a.get("bias", 1.0)),
                            int(a["size"]), sx, zx, sy, mbits)
    except ValueError as error:
        raise FpgaplaceError(f"op '{op.name}': LRN table: {error}") from None


def _table_entries(op: Op, graph: OpGraph) -> int | Unsupported:
    """The table's entries for the op's scales in a QDQ graph; in a float graph, those of
    ``DEFAULT_MBITS`` bits for an input of zero point 0 and equal scales."""
    if not graph.is_qdq:
        return int(_table(op, 1.0, 0, 1.0, DEFAULT_MBITS).values.size)
    index = qdq_index(graph.model)
    x, out = index.int_source(op.inputs[0]), index.int_sink(op.outputs[0])
    if x is None or out is None:
        return Unsupported(f"LRN input '{op.inputs[0]}' or output '{op.outputs[0]}' is not per-tensor int8")
    try:
        return int(_table(op, x.scale, x.zero_point, out.tensor.scale).values.size)
    except FpgaplaceError as error:
        return Unsupported(str(error))
