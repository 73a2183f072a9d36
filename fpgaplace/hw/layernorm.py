"""LayerNormalization (ONNX opset 17, of an int8 QDQ model) over the last axis, rows contiguous in
stream order: a transformer's layer norm after attention or its feed-forward block.

Integer semantics (``layernorm_int8``; C++ ``fp::layernorm``), per row of N int8 values ``x`` (input
scale ``sx``; the zero point cancels in ``x - mean``), output scale ``sy``, zero point ``ZY``:

* exact sums ``S1 = sum x``, ``S2 = sum x**2`` (int64), ``V = N S2 - S1**2`` (``N**2`` times the
  variance in input steps, ``0 <= V < N**2 * 2**14``), ``W = 4 V + E`` with the epsilon term
  ``E = round(4 eps N**2 / sx**2)`` (config), so ``n_i = 2 D_i / sqrt(W)`` is the normalized value
  of ``D_i = N x_i - S1``;
* ``s = isqrt(W * 2**(2 P))`` (exact floor square root, digit by digit, one result bit a step:
  ``SQRT_BITS`` steps), ``P = ROOT_FRACTION``;
* ``r = (2**(RB + P) + s // 2) // s`` (0 when ``s`` is 0, i.e. a constant row with no epsilon), a
  restoring division of ``DIV_BITS`` steps: ``r ~ 2**RB / sqrt(W)``, ``RB = RECIPROCAL_BITS``;
* ``t_i = (2 D_i r + 2**(RB - TB - 1)) >> (RB - TB)``, ``n_i`` in ``TB = NORM_BITS`` fraction bits;
* ``y_i = clamp(ZY + round_half_even((t_i M_i + B_i) / 2**S), LO, HI)``: gamma and beta folded with
  the output requantization, ``M_i = round(gamma_i / sy * 2**(S - TB))`` (``affine.fixed_point``:
  the largest ``|M|`` in ``[2**22, 2**23]``) and ``B_i = round(beta_i / sy * 2**S)``.

Error bound (against the real layer norm of the dequantized row, at the model's gamma and beta):
``s`` is within 1 of ``2**P sqrt(W)``, so ``1 / s`` is within a relative ``2**-P / sqrt(W)`` of exact;
a row that is not constant has ``V >= N - 1``, so ``sqrt(W) >= 2 sqrt(N - 1) >= |n_i| * 2`` and ``n_i``
is within ``2**-(P + 1) = 2**-13`` of exact. ``r`` adds a relative ``1 / (2 r) ~ sqrt(W) / 2**(RB + 1)
<= 2**-22`` (``W < 2**38``), ``t`` rounds by ``2**-(TB + 1)``, ``M`` and ``B`` by ``2**-(S + 1)``.
So the value rounded is within ``|gamma / sy| * 2**-12`` LSB of exact (under 0.025 LSB for
``|gamma / sy| < 100``): the output is the exact value's rounding but within that distance of a
tie. ``E`` rounds ``eps`` to a relative ``1 / (2 E)`` (which matters only when the variance is
near ``eps``). Against onnxruntime's float32 QDQ model the tests measure at most 1 LSB (300
samples).

Rows: the normalized axes must be just the last (``axis`` -1 or rank - 1) of a rank-2 or rank-3
tensor, so a row is N consecutive stream elements; ``N <= MAX_N`` keeps ``W * 2**(2P) < 2**62``.
Cycles per row: a read pass (sums, the row into a buffer), the square root, the division and a
write pass: ``ROWS * (2 ceil(N / L) + SQRT_BITS + DIV_BITS)`` with L lanes (PE). Resources: the
row buffer (N bytes) and the per-element ``M, B`` words (ROM); DSPs (``kernel.product_dsps``: yosys' split of
each product of ``rtl/layernorm.v.j2``, equal to its count) for a lane's ``x**2`` (8 x 8 bits), ``D r``
(``deviation_bits`` x 42), ``t M`` (23 x 25) and ``N x`` and a row's ``S1**2`` and ``N S2`` (the ``N``
products are shifts when N is a power of two); the square root and the divider in LUTs. O(1) for all
but the reference, O(N) per row. Source: ONNX LayerNormalization; digit-by-digit square root
(Wikipedia, "Methods of computing square roots", binary numeral system).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from fpgaplace.hw.affine import fixed_point
from fpgaplace.hw.geometry import Folding, Geometry, Resources, Rom, RtlUnit, Unsupported
from fpgaplace.hw.kernel import (
    LANE_FF_BASE,
    LANE_FF_PER_PE,
    LANE_LUT_BASE,
    LANE_LUT_PER_PE,
    LUTS_PER_LANE_BUDGET,
    product_dsps,
)
from fpgaplace.hw.lowering import Layer, bounds
from fpgaplace.hw.memory import memory_blocks
from fpgaplace.hw.quant import requantize_affine
from fpgaplace.hw.rtl_values import PORT_IN, PORT_OUT, check_int8_members, index_bits, int_members, pack_lanes
from fpgaplace.hw.softmax import RowKernel
from fpgaplace.util.errors import FpgaplaceError

if TYPE_CHECKING:
    from fpgaplace.board.model import FpgaCore
    from fpgaplace.hw.lowering import LayerContext
    from fpgaplace.model.ir import Op, OpGraph

MAX_N = 1024  # W < 4 N**2 2**14 + E <= 2**37: W * 2**24 stays below 2**62
ROOT_FRACTION = 12  # P: s = isqrt(W * 2**24) carries 12 fraction bits of sqrt(W)
SQRT_BITS = 31  # s < 2**31: one result bit a step
RECIPROCAL_BITS = 40  # RB: r ~ 2**40 / sqrt(W), below 2**41
DIV_BITS = RECIPROCAL_BITS + ROOT_FRACTION + 1  # the dividend 2**52 + s/2 < 2**53
NORM_BITS = 16  # TB: t = 2**16 n, |t| < 2**16 sqrt(N) + 1 < 2**22
MAX_EPSILON_TERM = 2**37  # E at most: W stays below 2**38
MAX_OFFSET = 2**14  # |beta / sy| at most (output steps): |B| <= 2**(14 + 37) < 2**52
PASSES = 2  # read (and sums), write
ROOT_LUTS = 300  # 31-step digit-by-digit square root of a 62-bit radicand
DIVIDER_LUTS = 450  # 53-bit restoring divider with its registers
R_BITS, T_M_BITS = 42, (23, 25)  # signed widths: r (by D, deviation_bits), t by M
MULT_BITS, OFFSET_BITS = 25, 54  # a lane's word of the coefficient ROM: signed M (|M| <= 2**23), signed B (< 2**52)


class LayerNorm(RowKernel):
    """LayerNormalization of rows of N int8 values, PE of a row a cycle."""

    name, template = "layernorm", "hls/ops/layernorm.j2"

    def rows(self, op: Op, graph: OpGraph, shape: tuple[int, ...]) -> tuple[int, int] | Unsupported:
        return layernorm_rows(shape, int(op.attrs.get("axis", -1)))

    def cycles(self, g: Geometry, fold: Folding) -> int:
        return g.pixels * (PASSES * math.ceil(g.channels / fold.pe) + SQRT_BITS + DIV_BITS)

    def ideal_cycles(self, g: Geometry, core: FpgaCore) -> float:
        """Its share of the core's lane budget (two passes over every element) and the square root
        and division of every row, which no lane count shortens."""
        return PASSES * g.stream_elements / max(1, core.lut // LUTS_PER_LANE_BUDGET) + g.pixels * (SQRT_BITS + DIV_BITS)

    def resources(self, g: Geometry, fold: Folding, core: FpgaCore | None = None, resident: bool = True) -> Resources:
        lanes, depth = fold.pe, math.ceil(g.channels / fold.pe)
        row_bram, _, row_lut = memory_blocks(8 * lanes, depth)
        word_bram, _, word_lut = memory_blocks((MULT_BITS + OFFSET_BITS) * lanes, depth)  # M and B per element
        n = g.channels
        scaled = n & (n - 1) != 0  # N x and N S2 are products unless N is a power of two (then shifts)
        constant, s1_bits, s2_bits = n.bit_length() + 1, (n * 128).bit_length() + 1, (n * 2**14).bit_length() + 1
        per_lane = (product_dsps(8, 8, core) + product_dsps(deviation_bits(n), R_BITS, core)
                    + product_dsps(*T_M_BITS, core) + scaled * product_dsps(8, constant, core))
        per_row = product_dsps(s1_bits, s1_bits, core) + scaled * product_dsps(constant, s2_bits, core)
        return Resources(lanes * per_lane + per_row, row_bram + word_bram, 0,
                         LANE_LUT_BASE + ROOT_LUTS + DIVIDER_LUTS + LANE_LUT_PER_PE * lanes + row_lut + word_lut,
                         LANE_FF_BASE + 3 * 64 + LANE_FF_PER_PE * lanes)

    def reference(self, config: dict, arrays: dict, inputs: list[np.ndarray], rows: int = 1) -> np.ndarray:
        c = config
        return layernorm_int8(inputs[0], arrays["mult"], arrays["offset"], n=c["N"], e=c["E"], s=c["S"], zy=c["ZY"],
                              lo=c["LO"], hi=c["HI"])

    def lower(self, ctx: LayerContext, op: Op, shape: dict) -> Layer:
        """The layer of ``op``: E from epsilon at the input's scale, ``M, B, S`` from gamma and beta."""
        x, out = ctx.source(op, op.inputs[0]), ctx.sink(op)
        y, n = out.tensor, shape["N"]
        gamma, beta = (affine_input(ctx, op, i, n) for i in (1, 2))
        mult, offset, s = gains(gamma / y.scale, beta / y.scale, f"op '{op.name}'")
        lo, hi = bounds(ctx.index, out.activations, y.scale, y.zero_point)
        config = {"SIZE": shape["SIZE"] // ctx.batch(), "N": n, "E": epsilon_term(op, n, x.scale), "S": s,
                  "ZY": y.zero_point, "LO": lo, "HI": hi}
        return Layer(op.name, self.name, [x.name], y.name, config, {"mult": mult, "offset": offset})

    def hls_config(self, config: dict[str, int], g: Geometry, fold: Folding) -> dict[str, int]:
        return {**config, "L": fold.pe, "SQRT": SQRT_BITS, "DIV": DIV_BITS}

    def rtl(self, config: dict[str, Any], arrays: dict[str, Any], fold: Folding, top: str, model_cycles: int,
            macs_per_dsp: int = 1, core: FpgaCore | None = None) -> RtlUnit:
        """``rtl/layernorm.v.j2``: a row buffer, the sums, a digit-by-digit square root, a restoring
        divider and per lane the two products and the requantizer; L = PE elements a beat, the ``{M, B}``
        of element ``i`` in lane ``i mod L`` of ROM word ``i / L``."""
        c = int_members(config)
        n, size, lanes = c["N"], c["SIZE"], fold.pe
        if not 1 <= n <= MAX_N or size % n or n % lanes or c["S"] < 2:
            raise FpgaplaceError(f"rtl {top}: PE={lanes} must divide N={n} <= {MAX_N}, N the SIZE={size}, and S >= 2")
        check_int8_members(c, ("ZY",), self.name)
        mult = np.asarray(arrays.get("mult", ()), dtype=np.int64).reshape(-1)
        offset = np.asarray(arrays.get("offset", ()), dtype=np.int64).reshape(-1)
        if mult.size != n or offset.size != n or np.abs(mult).max() > 2**23 or np.abs(offset).max() >= 2**52:
            raise FpgaplaceError(f"rtl {top}: N multipliers within ±2**23 and N offsets within ±2**52 expected")
        mask = (1 << OFFSET_BITS) - 1
        words = [pack_lanes([(int(mult[i]) << OFFSET_BITS) | (int(offset[i]) & mask)
                             for i in range(t * lanes, (t + 1) * lanes)], MULT_BITS + OFFSET_BITS)
                 for t in range(n // lanes)]
        rom = f"{top}_coefficients.mem"
        values = c | {"name": top, "L": lanes, "ROWS": size // n, "SQRT_BITS": SQRT_BITS, "DIV_BITS": DIV_BITS,
                      "MB": MULT_BITS, "OB": OFFSET_BITS, "S1_W": (n * 128).bit_length() + 1,
                      "S2_W": (n * 2**14).bit_length(), "D_W": deviation_bits(n),
                      "BEAT_BITS": index_bits(n // lanes), "LO_BITS": f"8'h{c['LO'] & 0xFF:02x}",
                      "HI_BITS": f"8'h{c['HI'] & 0xFF:02x}", "rom_file": rom}
        return RtlUnit("rtl/layernorm.v.j2", values, {rom: Rom(words, (MULT_BITS + OFFSET_BITS) * lanes)},
                       ((PORT_IN, lanes, size),), (PORT_OUT, lanes, size))


def deviation_bits(n: int) -> int:
    """Signed bits of ``D = N x - S1`` (``|D| <= 255 N``)."""
    return (n * 255).bit_length() + 1


def layernorm_rows(shape: tuple[int, ...], axis: int) -> tuple[int, int] | Unsupported:
    """(rows, N) of a layer norm over ``axis`` of ``shape`` when its rows are contiguous in stream
    order and short enough (module docstring), else why not."""
    rank = len(shape)
    if not -rank <= axis < rank:
        return Unsupported(f"axis {axis} out of range for rank {rank}")
    if axis % rank != rank - 1 or rank not in (2, 3):
        return Unsupported(f"a layer norm from axis {axis} of a rank-{rank} tensor: not the stream's rows")
    if shape[-1] > MAX_N:
        return Unsupported(f"rows of {shape[-1]} elements, more than {MAX_N}")
    return math.prod(shape) // shape[-1], shape[-1]


def affine_input(ctx: LayerContext, op: Op, position: int, n: int) -> np.ndarray:
    """Gamma (``position`` 1) or beta (2, zeros when absent) of ``op`` as N real values."""
    name = op.inputs[position] if len(op.inputs) > position else ""
    if not name:
        return np.zeros(n)
    values = ctx.index.bias(name)
    if values is None or values.size not in (1, n):
        raise FpgaplaceError(f"op '{op.name}': input '{name}' must be a constant of 1 or {n} values")
    return np.broadcast_to(values.reshape(-1).astype(np.float64), (n,))


def gains(scale: np.ndarray, offset: np.ndarray, where: str) -> tuple[np.ndarray, np.ndarray, int]:
    """``(M, B, S)`` of real per-element factors ``gamma / sy`` and offsets ``beta / sy`` for
    normalized values in ``NORM_BITS`` fraction bits. O(N)."""
    if not np.all(np.isfinite(offset)) or np.abs(offset).max(initial=0) > MAX_OFFSET:
        raise FpgaplaceError(f"{where}: beta / output scale must be finite and within {MAX_OFFSET} steps")
    mult, _, s = fixed_point(np.ldexp(scale, -NORM_BITS), np.zeros_like(scale), where)
    return mult.astype(np.int32), np.rint(np.ldexp(offset, s)).astype(np.int64), s


def epsilon_term(op: Op, n: int, x_scale: float) -> int:
    """``E = round(4 eps N**2 / sx**2)``, eps the op's ``epsilon`` (1e-5 when absent)."""
    eps = float(op.attrs.get("epsilon", 1e-5))
    e = 4.0 * eps * n * n / (x_scale * x_scale)
    if not (eps >= 0 and e < MAX_EPSILON_TERM):
        raise FpgaplaceError(f"op '{op.name}': epsilon {eps:g} must be >= 0 and small against the input's "
                             f"variance (4 eps N**2 / sx**2 = {e:.3g} >= 2**37)")
    return int(round(e))


def isqrt_steps(value: int, bits: int) -> int:
    """``floor(sqrt(value))`` for ``value < 4**bits`` digit by digit (one result bit a step, from the
    top), as the C++ and RTL compute it. O(bits)."""
    root, remainder = 0, 0
    for k in range(bits - 1, -1, -1):
        remainder = (remainder << 2) | ((value >> (2 * k)) & 3)
        trial = (root << 2) | 1
        root <<= 1
        if remainder >= trial:
            remainder -= trial
            root |= 1
    return root


def row_reciprocal(x: np.ndarray, n: int, e: int) -> tuple[np.ndarray, int]:
    """``(D, r)`` of one row ``x`` (int64): ``D = N x - S1`` and ``r ~ 2**RB / sqrt(W)``. O(N)."""
    s1, s2 = int(x.sum()), int((x * x).sum())
    w = 4 * (n * s2 - s1 * s1) + e
    s = isqrt_steps(w << (2 * ROOT_FRACTION), SQRT_BITS)
    r = ((1 << (RECIPROCAL_BITS + ROOT_FRACTION)) + s // 2) // s if s else 0
    return n * x - s1, r


def layernorm_int8(x: np.ndarray, mult: np.ndarray, offset: np.ndarray, *, n: int, e: int, s: int, zy: int,
                   lo: int = -128, hi: int = 127) -> np.ndarray:
    """The integer layer norm of the module docstring over rows of ``n`` of int8 ``x``. O(size)."""
    rows = np.asarray(x).astype(np.int64).reshape(-1, n)
    shift = RECIPROCAL_BITS - NORM_BITS
    t = np.empty_like(rows)
    for i, row in enumerate(rows):
        d, r = row_reciprocal(row, n, e)
        t[i] = (2 * d * r + (1 << (shift - 1))) >> shift
    return requantize_affine(t, np.asarray(mult, np.int64), np.asarray(offset, np.int64), s, zy, lo, hi,
                             d_bits=NORM_BITS + 7).reshape(-1)
