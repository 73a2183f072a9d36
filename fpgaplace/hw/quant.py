"""Fixed-point requantization: the integer arithmetic every FPGA core uses to go from an int32
accumulator back to int8.

A real scale ``real = x_scale * w_scale / y_scale`` becomes a 31-bit multiplier ``m`` and a right
shift ``s`` with ``real ≈ m * 2**-s`` (the gemmlowp / TFLite "quantized multiplier" scheme); an
accumulator ``acc`` becomes ``clip(round_half_even(acc * m / 2**s) + zero_point, lo, hi)``.
The C++ kernels (``hls_templates/hls/include/fpgaplace/kernels.h``, ``fp::requantize``) implement
exactly the same steps; ``fpgaplace.hw.reference`` builds every kernel from these functions.

All functions here are elementwise, O(number of elements).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction

import numpy as np
import numpy.typing as npt

INT8_MIN = -128
INT8_MAX = 127
MULTIPLIER_BITS = 31
MIN_SHIFT = 1
MAX_SHIFT = 62
# requantize computes acc * m in int64 with m < 2**31, so |acc| must stay below 2**32.
MAX_ACC_MAGNITUDE = 2**32
# requantize2 adds two such products, so each operand must stay below 2**31.
MAX_ADD_OPERAND_MAGNITUDE = 2**31

IntArrayLike = npt.ArrayLike


def quantize_multiplier(real: float) -> tuple[int, int]:
    """The pair ``(m, s)`` with ``2**30 <= m < 2**31`` and ``m * 2**-s ≈ real`` (relative error at
    most 2**-31), ``m = round_half_even(real * 2**s)``.

    ``s`` ends in [1, 62]: below ``real = 2**-32`` the normalized shift would exceed 62, so
    ``s = 62`` and ``m = round(real * 2**62)`` (then ``m < 2**30``, possibly 0). Raises
    ``ValueError`` for a ``real`` that is not finite, is ``<= 0``, is ``>= 2**30`` or rounds up to
    ``2**30`` (the shift would have to be 0). O(1); scaling by a power of two is exact in floating
    point, so the only rounding is the final one to an integer.
    """
    if not math.isfinite(real) or real <= 0:
        raise ValueError(f"quantize_multiplier: real scale {real!r} must be finite and > 0")
    if real >= 2.0**30:
        raise ValueError(f"quantize_multiplier: real scale {real!r} must be < 2**30")
    mantissa, exponent = math.frexp(real)  # real = mantissa * 2**exponent, 0.5 <= mantissa < 1
    shift = MULTIPLIER_BITS - exponent
    multiplier = round(math.ldexp(mantissa, MULTIPLIER_BITS))
    if multiplier == 2**MULTIPLIER_BITS:
        multiplier //= 2
        shift -= 1
    if shift < MIN_SHIFT:
        raise ValueError(f"quantize_multiplier: real scale {real!r} rounds to 2**30, which needs a shift below 1")
    if shift > MAX_SHIFT:
        shift = MAX_SHIFT
        multiplier = round(math.ldexp(real, MAX_SHIFT))
    return int(multiplier), int(shift)


def _check_range(name: str, values: np.ndarray, low: int, high: int) -> None:
    """Raise ``ValueError`` unless every element of ``values`` lies in [low, high]."""
    if values.size and (values.min() < low or values.max() > high):
        raise ValueError(f"requantize: {name} must lie in [{low}, {high}], got [{values.min()}, {values.max()}]")


def _as_int64(name: str, values: IntArrayLike) -> np.ndarray:
    """``values`` as an int64 array; ``ValueError`` if it is not of an integer type."""
    array = np.asarray(values)
    if array.dtype.kind not in "iub":
        raise ValueError(f"requantize: {name} must be integers, got dtype {array.dtype}")
    return array.astype(np.int64)


def _check_output_parameters(shift: np.ndarray, zero_point: int, lo: int, hi: int) -> None:
    """Shared checks of requantize/requantize2's shift, zero point and activation bounds."""
    _check_range("s", shift, MIN_SHIFT, MAX_SHIFT)
    _check_range("zero_point", np.asarray(zero_point), INT8_MIN, INT8_MAX)
    if not INT8_MIN <= lo <= hi <= INT8_MAX:
        raise ValueError(f"requantize: bounds must satisfy -128 <= lo <= hi <= 127, got lo={lo}, hi={hi}")


def shift_round_clip(product: np.ndarray, shift: IntArrayLike, zero_point: int, lo: int, hi: int,
                     tie: IntArrayLike = 0, dtype: type = np.int8) -> np.ndarray:
    """``clip(round_half_even(product / 2**shift) + zero_point, lo, hi)`` as ``dtype`` (int8 unless
    a wider output, the LSTM's int16 cell state), in int64; a remainder less than ``2**tie`` from
    the midpoint counts as the midpoint (``tie = 0``: only the midpoint itself; see ``tie_bits``)."""
    product, shift = np.asarray(product, dtype=np.int64), np.asarray(shift, dtype=np.int64)
    quotient = product >> shift  # arithmetic shift: floor division by 2**shift
    remainder = product - (quotient << shift)  # in [0, 2**shift)
    half = np.left_shift(np.int64(1), shift - 1)
    band = np.left_shift(np.int64(1), np.asarray(tie, dtype=np.int64))  # |remainder - half| < band: a tie
    tied = np.abs(remainder - half) < band
    round_up = np.where(tied, (quotient & 1) == 1, remainder > half)
    rounded = quotient + round_up.astype(np.int64) + np.int64(zero_point)
    return np.clip(rounded, lo, hi).astype(dtype)


def requantize(
    acc: IntArrayLike,
    m: IntArrayLike,
    s: IntArrayLike,
    zero_point: int,
    lo: int = INT8_MIN,
    hi: int = INT8_MAX,
    tie: IntArrayLike = 0,
) -> np.ndarray:
    """``clip(round_half_even(acc * m * 2**-s) + zero_point, lo, hi)`` as int8, elementwise, with
    ``m``, ``s`` and ``tie`` broadcast against ``acc`` (e.g. per output channel on the last axis).

    Computed in int64 exactly as the spec's steps (multiply, arithmetic shift, remainder test for
    round half to even, zero point, clip), so the C++ ``fp::requantize`` gives the same bits.
    ``tie`` (``tie_bits``; 0 for an ordinary rescale) widens the midpoint test to the remainders
    less than ``2**tie`` from it, so that a product whose exact value is a tie rounds to even
    although ``m`` only approximates the scale. Requires ``|acc| < 2**32``, ``0 <= m < 2**31``,
    ``1 <= s <= 62`` and ``0 <= tie <= s - 2`` (``ValueError`` otherwise).
    """
    acc64 = _as_int64("acc", acc)
    m64 = _as_int64("m", m)
    s64 = _as_int64("s", s)
    tie64 = _as_int64("tie", tie)
    _check_range("acc", acc64, -MAX_ACC_MAGNITUDE + 1, MAX_ACC_MAGNITUDE - 1)
    _check_range("m", m64, 0, 2**MULTIPLIER_BITS - 1)
    _check_output_parameters(s64, zero_point, lo, hi)
    if np.any(tie64 < 0) or np.any((tie64 > 0) & (tie64 > s64 - 2)):
        raise ValueError(f"requantize: tie bits must lie in [0, s - 2], got {tie64.min()} .. {tie64.max()}")
    return shift_round_clip(acc64 * m64, s64, zero_point, lo, hi, tie64)


def tie_bits(x_scale: float, y_scale: float, count: int, m: int, s: int) -> int:
    """The ``tie`` of ``requantize`` for an average of ``count`` int8 differences ``x - zx`` (each
    of magnitude at most 255) rescaled by ``m * 2**-s ≈ x_scale / (y_scale * count)``: the bits
    that make its rounding exact at midpoints, so that it returns ``round_half_even(sum * x_scale
    / (y_scale * count))`` of the exact real value, as the ONNX spec of AveragePool followed by
    QuantizeLinear defines it. O(1).

    Why: when ``x_scale / y_scale`` is a power of two ``2**k`` (onnxruntime's quantizer gives an
    AveragePool its input's scale, ``k = 0``) and ``count`` is not, ``m`` cannot be exact, and a sum
    whose exact average is a midpoint (``sum / 6 = 2.5``) would round one way for every sign
    instead of to even: a 3x3 pool's border windows of 6 and 4 elements made one output in a
    hundred 1 LSB off onnxruntime (ShuffleNet). Exact averages are ``sum * 2**k / count``, so one
    that is not a midpoint lies at least ``gap = 2**s * min(1, 2**k) / (2 * count)`` from it in
    units of the product ``sum * m``, while ``m``'s rounding moves a product by at most ``error =
    255 * count * |m - 2**s * 2**k / count|``. Any band ``2**b`` with ``error < 2**b <= gap -
    error`` catches exactly the midpoints; the largest such ``b`` is returned. 0 (the plain
    midpoint test) when the ratio is not a power of two (a midpoint then needs the scales'
    mantissas to divide just so; onnxruntime's float32 arithmetic rounds such a sum either way
    anyway), when ``m`` is exact, or when no band separates the two (a shift too short; never for
    ``quantize_multiplier``'s 31-bit multipliers). Source: the bound is the usual one for
    correctly rounded division by a constant (Granlund & Montgomery, "Division by invariant
    integers using multiplication", PLDI 1994), applied to the midpoint instead of the floor.
    """
    if count < 1:
        raise ValueError(f"tie_bits: count must be >= 1, got {count}")
    mantissa, exponent = math.frexp(x_scale / y_scale)
    if mantissa != 0.5:
        return 0
    ratio = Fraction(2) ** (exponent - 1)
    exact = Fraction(2**s) * ratio / count  # the real multiplier in units of 2**-s
    if m == exact:
        return 0
    gap = Fraction(2**s) * min(Fraction(1), ratio) / (2 * count)
    error = (INT8_MAX - INT8_MIN) * count * abs(m - exact)
    if gap - error <= 0:
        return 0
    bits = math.floor(math.log2(gap - error))
    while 2 ** (bits + 1) <= gap - error:  # log2 of a Fraction is a float: settle the last bit exactly
        bits += 1
    while 2**bits > gap - error:
        bits -= 1
    return bits if 2**bits > error and 0 <= bits <= s - 2 else 0


def requantize2(
    a: IntArrayLike,
    ma: IntArrayLike,
    b: IntArrayLike,
    mb: IntArrayLike,
    s: IntArrayLike,
    zero_point: int,
    lo: int = INT8_MIN,
    hi: int = INT8_MAX,
) -> np.ndarray:
    """``clip(round_half_even((a*ma + b*mb) * 2**-s) + zero_point, lo, hi)`` as int8 (the Add
    kernel's two-input rescale), elementwise with broadcasting, in int64.

    Requires ``|a|, |b| < 2**31`` (so the sum of products cannot overflow int64), multipliers in
    [0, 2**31) and ``1 <= s <= 62``.
    """
    a64, b64 = _as_int64("a", a), _as_int64("b", b)
    ma64, mb64 = _as_int64("ma", ma), _as_int64("mb", mb)
    s64 = _as_int64("s", s)
    for name, operand in (("a", a64), ("b", b64)):
        _check_range(name, operand, -MAX_ADD_OPERAND_MAGNITUDE + 1, MAX_ADD_OPERAND_MAGNITUDE - 1)
    for name, multiplier in (("ma", ma64), ("mb", mb64)):
        _check_range(name, multiplier, 0, 2**MULTIPLIER_BITS - 1)
    _check_output_parameters(s64, zero_point, lo, hi)
    return shift_round_clip(a64 * ma64 + b64 * mb64, s64, zero_point, lo, hi)


def requantize_affine(
    d: IntArrayLike,
    m: IntArrayLike,
    b: IntArrayLike,
    s: int,
    zero_point: int,
    lo: int = INT8_MIN,
    hi: int = INT8_MAX,
    d_bits: int = 10,
) -> np.ndarray:
    """``clip(round_half_even((d * m + b) * 2**-s) + zero_point, lo, hi)`` as int8 with *signed*
    multipliers ``m`` and offsets ``b`` broadcast against ``d`` (the per-channel affine kernel,
    ``fpgaplace.hw.affine``; the layer norm's normalized values, ``fpgaplace.hw.layernorm``), in
    int64. Requires ``|d| < 2**d_bits`` (``d_bits <= 30``), ``|m| < 2**31``, ``|b| < 2**52`` (so
    ``d * m + b`` stays inside int64) and ``1 <= s <= 62``. O(n)."""
    d64, m64, b64 = _as_int64("d", d), _as_int64("m", m), _as_int64("b", b)
    s64 = _as_int64("s", s)
    if not 1 <= d_bits <= 30:
        raise ValueError(f"d_bits must be in [1, 30], got {d_bits}")
    _check_range("d", d64, -(2**d_bits) + 1, 2**d_bits - 1)
    _check_range("m", m64, -(2**31) + 1, 2**31 - 1)
    _check_range("b", b64, -(2**52) + 1, 2**52 - 1)
    _check_output_parameters(s64, zero_point, lo, hi)
    return shift_round_clip(d64 * m64 + b64, s64, zero_point, lo, hi)


def _clip_bound(value: float | None, scale: float, zero_point: int, default: int) -> int:
    """The int8 code of a real Clip bound, ``zero_point + round_half_even(value / scale)``,
    saturated to int8; ``default`` when the bound is absent."""
    if value is None:
        return default
    code = zero_point + round(float(value) / scale)  # Python's round is half to even
    return min(INT8_MAX, max(INT8_MIN, code))


def _clip_limits(attrs_or_bounds: Mapping[str, float | None] | Sequence[float | None] | None) -> tuple:
    """Clip's (min, max) from a mapping with optional ``"min"``/``"max"`` keys or a pair."""
    if attrs_or_bounds is None:
        return None, None
    if isinstance(attrs_or_bounds, Mapping):
        return attrs_or_bounds.get("min"), attrs_or_bounds.get("max")
    if len(attrs_or_bounds) != 2:
        raise ValueError(f"activation_bounds: Clip bounds must be a (min, max) pair, got {attrs_or_bounds!r}")
    return attrs_or_bounds[0], attrs_or_bounds[1]


def activation_bounds(
    op_type: str | None,
    attrs_or_bounds: Mapping[str, float | None] | Sequence[float | None] | None,
    scale: float,
    zero_point: int,
) -> tuple[int, int]:
    """The int8 ``(lo, hi)`` clip of a fused activation on an output with ``scale``/``zero_point``.

    ``op_type`` is ``None`` (or ``""``/``"Identity"``) for none: (-128, 127); ``"Relu"``:
    ``(max(-128, zero_point), 127)``; ``"Clip"``: each given bound ``b`` of ``attrs_or_bounds``
    (``{"min": .., "max": ..}`` or ``(min, max)``, ``None`` for an absent bound) becomes
    ``zero_point + round_half_even(b / scale)`` saturated to [-128, 127]. (The spec writes
    ``lo = max(-128, ...)``; saturating on both sides also keeps ``lo <= hi`` when the whole Clip
    range lies outside the int8 range, where every output saturates to the same code.)
    Raises ``ValueError`` for another op type, a non-positive scale or ``min > max``.
    """
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"activation_bounds: scale must be finite and > 0, got {scale!r}")
    if not INT8_MIN <= zero_point <= INT8_MAX:
        raise ValueError(f"activation_bounds: zero point {zero_point} must lie in [-128, 127]")
    if op_type in (None, "", "Identity"):
        return INT8_MIN, INT8_MAX
    if op_type == "Relu":
        return max(INT8_MIN, zero_point), INT8_MAX
    if op_type == "Clip":
        low, high = _clip_limits(attrs_or_bounds)
        if low is not None and high is not None and low > high:
            raise ValueError(f"activation_bounds: Clip min {low} is above max {high}")
        return _clip_bound(low, scale, zero_point, INT8_MIN), _clip_bound(high, scale, zero_point, INT8_MAX)
    raise ValueError(f"activation_bounds: activation {op_type!r} is not one of Relu, Clip or none")


def quantize_float(x: npt.ArrayLike, scale: float, zero_point: int) -> np.ndarray:
    """int8 ``clip(round_half_even(x / scale) + zero_point, -128, 127)``, as onnx QuantizeLinear
    computes it (the division in float32)."""
    quotient = np.asarray(x, dtype=np.float32) / np.float32(scale)
    rounded = np.rint(quotient).astype(np.float64) + zero_point
    return np.clip(rounded, INT8_MIN, INT8_MAX).astype(np.int8)


def dequantize(q: npt.ArrayLike, scale: float, zero_point: int) -> np.ndarray:
    """float32 ``(q - zero_point) * scale``, as onnx DequantizeLinear computes it."""
    shifted = np.asarray(q).astype(np.int32) - np.int32(zero_point)
    return shifted.astype(np.float32) * np.float32(scale)
