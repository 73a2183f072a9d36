"""Shared pieces of the kernels' RTL template values (``hls_templates/rtl``): counter widths, the
constant requantizer (``rtl/macros.v.j2``), a dot-product unit's channel ROM and the checks every
op's config passes. Plain values only; ``fpgaplace.codegen.rtl`` renders them. Each helper is
O(its output) unless noted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fpgaplace.hw.kernel import divisors
from fpgaplace.util.errors import FpgaplaceError

PRODUCT_MAGNITUDE = 128 * 128  # largest |x * w| of two int8 values
MAX_ACC_BITS = 33  # |acc| < 2**32, as fpgaplace.hw.quant.requantize needs
DOT_ARRAYS = ("w", "bias", "mult", "shift")  # a dot-product unit's arrays (weights, then per output channel)
PORT_IN, PORT_OUT = "s_axis", "m_axis"  # a one-input unit's stream ports
RATE_MARGIN = 0.75  # a stream's beats may take at most this share of the op's cycles


def index_bits(count: int) -> int:
    """Bits of a counter over ``count`` values (at least 1)."""
    return max(1, (count - 1).bit_length())


def signed_bits(magnitude: int) -> int:
    """Bits of a two's-complement number holding every value in [-magnitude, magnitude]."""
    return magnitude.bit_length() + 1


def pack_lanes(lanes: Any, bits: int) -> int:
    """Lane ``j`` of ``lanes`` (two's complement, ``bits`` wide) in bits ``[bits*j +: bits]``."""
    mask = (1 << bits) - 1
    return sum((int(v) & mask) << (bits * j) for j, v in enumerate(lanes))


def int_members(config: dict[str, Any]) -> dict[str, int]:
    """The integer members of a layer's config (as ints)."""
    return {key: int(value) for key, value in config.items() if isinstance(value, int | np.integer)}


WEIGHTS_APART = "WEIGHTS_APART"  # a layer config's member: the unit's weight ROM is a module of its own
WEIGHT_ROM_SUFFIX = "_weights"  # ... named <top>_weights (rtl/macros.v.j2's weight_rom)


def weight_rom_module(top: str) -> str:
    """The name of unit ``top``'s weight ROM module where it keeps it apart (``weights_apart``). O(1)."""
    return f"{top}{WEIGHT_ROM_SUFFIX}"


def weights_apart(config: dict[str, Any]) -> int:
    """1 where a dot-product unit keeps its weight ROM in a module of its own (``rtl/macros.v.j2``'s
    ``weight_rom``): the layer's config says so (``WEIGHTS_APART``, set where the design keeps the
    weights in DRAM or URAM, ``codegen.rtl_project.layer_config``), else 0. O(1)."""
    return int(bool(config.get(WEIGHTS_APART, 0)))


def check_int8_members(config: dict[str, Any], names: tuple[str, ...], what: str) -> None:
    """A one-line error unless the zero points ``names`` and ``LO <= HI`` are int8."""
    if not all(-128 <= int(config[z]) <= 127 for z in names) or not -128 <= int(config["LO"]) <= int(
            config["HI"]) <= 127:
        raise FpgaplaceError(f"rtl {what}: {', '.join(names)} and LO <= HI must be int8")


def smallest_divisor(total: int, fits: Callable[[int], bool]) -> int:
    """The smallest divisor ``d`` of ``total`` with ``fits(d)`` (``total`` if none); O(sqrt(total))."""
    return next((d for d in divisors(total) if fits(d)), total)


def csd_terms(m: int) -> list[tuple[int, int]]:
    """``m >= 0`` as canonical signed digits: ``[(sign, shift)]`` with ``m = sum sign * 2**shift``,
    no two adjacent (at most ``bits/2 + 1`` terms); O(bits of m)."""
    terms, shift = [], 0
    while m:
        if m & 1:
            digit = 2 - (m & 3)
            terms.append((digit, shift))
            m -= digit
        m >>= 1
        shift += 1
    return terms


def const_requant(name: str, inputs: list[tuple[str, int, int]], s: int, zy: int, lo: int, hi: int,
                  tie: int = 0, out_bits: int = 8) -> dict[str, Any]:
    """The values of the ``const_requant`` macro (``rtl/macros.v.j2``): a function ``name`` of
    ``inputs`` ``[(argument, bits, m)]`` computing ``requantize2`` (or ``requantize`` for one
    input, with the midpoint band ``tie`` of an average, ``quant.tie_bits``) with constant
    multipliers as shift-and-add sums. ``|v| < 2**(V_W - 2)``, so a shift of ``V_W - 1`` or more
    rounds to zero and is stored as ``V_W - 1`` (exact, as in dense; a band is then not needed:
    ``tie`` is 0 for such a shift). ``out_bits``: the output's width (8, or 16 for the LSTM's wide
    cell state, ``hw.lstm_cell``)."""
    if not 1 <= s <= 62 or any(not 0 <= m < 2**31 for _, _, m in inputs):
        raise FpgaplaceError(f"rtl {name}: multipliers must lie in [0, 2**31) and the shift in [1, 62]")
    if tie and not 0 < tie <= s - 2:
        raise FpgaplaceError(f"rtl {name}: the midpoint band's bits must lie in [0, s - 2], got {tie}")
    v_w = max(bits for _, bits, _ in inputs) + 32 + (len(inputs) > 1)
    terms = [f"{'+' if sign > 0 else '-'} ({arg}_wide <<< {shift})" for arg, _, m in inputs
             for sign, shift in csd_terms(m)]
    return {"name": name, "inputs": [{"arg": arg, "bits": bits} for arg, bits, _ in inputs], "V_W": v_w,
            "sum": " ".join(["0", *terms]), "S": min(s, v_w - 1), "ZY": zy, "LO": lo, "HI": hi,
            "TIE": tie if s < v_w - 1 else 0,
            "OUT": out_bits, "LO_BITS": f"{out_bits}'h{lo & (2**out_bits - 1):0{out_bits // 4}x}",
            "HI_BITS": f"{out_bits}'h{hi & (2**out_bits - 1):0{out_bits // 4}x}"}


def requant_channels(w: np.ndarray, per_channel: dict[str, np.ndarray], zx: int, pe: int,
                     what: str) -> tuple[int, list[int], int]:
    """(ACC_W, words, bits per PE lane) of a dot-product unit's channel ROM: per output fold, PE
    lanes of ``{shift[8], mult[32], bm[V_W]}`` with ``bm = bias' * mult``, ``bias' = bias - ZX *
    sum w`` (``w`` is ``[channels, reduction]``) and ``V_W = ACC_W + 32``: the requantizer forms
    ``v = acc * mult`` as ``dot * mult + bm``, so only the dot product meets a multiplier. ACC_W
    holds both the true and the offset accumulator. O(w.size)."""
    reduction = w.shape[1]
    bias = per_channel["bias"] - zx * w.astype(np.int64).sum(axis=1)
    acc_magnitude = int(np.abs(per_channel["bias"]).max()) + reduction * 255 * 128
    acc_bits = max(signed_bits(acc_magnitude), signed_bits(int(np.abs(bias).max()) + reduction * PRODUCT_MAGNITUDE))
    if signed_bits(acc_magnitude) > MAX_ACC_BITS:
        raise FpgaplaceError(f"rtl {what}: |bias| + {reduction}*255*128 = {acc_magnitude} reaches 2**32 "
                             "(requantize needs less)")
    v_bits = acc_bits + 32
    channel_bits = v_bits + 40
    # |v| = |acc * m| < 2**(acc_bits + 30), so every shift s >= V_W - 1 = acc_bits + 31 rounds v to 0
    # (q is 0 or -1 and the remainder test rounds -1 up): clamping s there is exact and keeps the
    # shifter's bit select v[s-1] inside v.
    shifts = np.minimum(per_channel["shift"], v_bits - 1)
    words = []
    for fold in range(w.shape[0] // pe):
        lanes = range(fold * pe, (fold + 1) * pe)
        words.append(sum(
            ((int(shifts[c]) << (v_bits + 32)) | (int(per_channel["mult"][c]) << v_bits)
             | ((int(bias[c]) * int(per_channel["mult"][c])) & ((1 << v_bits) - 1))) << (channel_bits * p)
            for p, c in enumerate(lanes)))
    return acc_bits, words, channel_bits


def per_channel_arrays(arrays: dict[str, Any], channels: int) -> dict[str, np.ndarray]:
    """``bias``, ``mult`` and ``shift`` of a dot-product unit broadcast to one int64 per output channel."""
    return {name: np.broadcast_to(np.asarray(arrays[name]).astype(np.int64), (channels,)) for name in DOT_ARRAYS[1:]}
