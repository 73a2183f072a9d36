"""Threshold output stages: a dot product's accumulator turned into its output code by comparing it
with thresholds, as FINN's MultiThreshold (``qonnx.custom_op.general.multithreshold``) does.

Where the float steps between a convolution or dense layer and its QuantizeLinear are more than a
rescale (a BatchNormalization before the quantizer; a bipolar quantizer's sign test,
``fpgaplace.hw.qdq.ThresholdSink``), no multiplier and shift reproduce them exactly, but each
channel's map from the integer accumulator ``acc`` to the output code is monotone: code ``k`` is
reached from the smallest accumulator ``t[c][k]`` on. So the stage holds ``T = HI - LO`` thresholds
per output channel and writes ``y = LO + #{i : acc >= t[c][i]}`` (FINN's compare-and-count, with
the output range's lowest code as its bias). Where the codes a stage writes are every ``STEP``-th of
``LO..HI`` (a bipolar quantizer's -1 and +1, never 0), each threshold stands ``STEP`` times in that
table; the stage keeps it once and writes ``y = LO + STEP * #{...}`` (FINN's out_scale), so
``T = (HI - LO) / STEP`` (``code_step``). A channel whose map falls (a negative batch-norm
scale) has its weights negated, so that it rises. The thresholds come from evaluating the float
steps exactly as the model does (float32, onnxruntime's BatchNormalization kernel, ``batch_norm``,
and QuantizeLinear's round half to even) at every candidate accumulator by bisection, so the
stage equals the model's execution by onnxruntime and by qonnx (which runs these nodes in
onnxruntime) also where a value lies within a float32 rounding of a code boundary.

The stage is fused into the dot product's output (as FINN's MVAU with thresholds): the C++
kernels select it by the config member ``T`` (``hls/include/fpgaplace/kernels.h``,
``fp::OutputStage``), the RTL dense and window (conv) units by their threshold ROM (``rtl/threshold.v.j2``). Both store
a table as the hardware compares it (``stored_table``): each threshold less its channel's offset
(the bias and the inputs' zero point, ``dot_offsets``), so it is compared with the bare dot product
of lane values, clamped to that dot product's range and kept at its width and one bit more
(``stored_bits``); one word per output fold holds its PE channels' thresholds (``table_words``).
Its extra resources are that memory, priced as the word and depth it is (``table_memory``), and
the comparators (``resources``). O(channels * T * log(range)) to compute the thresholds.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import onnx

from fpgaplace.hw.geometry import Folding, Geometry, Resources
from fpgaplace.hw.memory import LUTRAM_MAX_DEPTH, memory_blocks, rom_columns, rom_luts
from fpgaplace.hw.qdq import THRESHOLD_HEADS, QdqIndex, ThresholdSink, qdq_index
from fpgaplace.model.qdq import read_widths
from fpgaplace.util.errors import FpgaplaceError

if TYPE_CHECKING:
    from fpgaplace.model.ir import Op, OpGraph

# LUTs of the comparators and their count per compared bit (results x thresholds x dot-product bits):
# yosys 0.23 synth_xilinx -family xc7, the threshold module's own stat block in the eight dense units
# with a threshold stage of ``hw.kernel``'s fit (13 to 657 LUTs; 0.72 to 0.96 a bit), least squares
# of the relative error. A carry chain alone would be half a LUT a bit; the count's adders take the rest.
LUTS_PER_COMPARE_BIT = 0.83
# LUTs a dense unit with a threshold stage has fewer than the narrow lanes' fit prices beyond its
# requantizers and their channel ROM (``hw.kernel.narrow_dot_luts``; the requantizers' words, their
# registers and result path in the unit): fitted with that fit's constants, least squares of the
# relative error over its 53 yosys runs, eight of them with a threshold stage (see ``hw.kernel``).
FREED_REQUANT_LUTS = 37
# The share of a shallow table's bit columns synthesis keeps as LUTs: a threshold's high bits repeat
# its sign where a channel's thresholds span less than the dot product's range (and the word is padded
# to bytes), and yosys 0.23 shares equal columns and drops constant ones. Fitted with the window unit's
# terms (see ``hw.window.WINDOW_LUT_PER_POINTWISE_CONTROL_BIT``): 0.65. Counted in the tables compile
# wrote for MobileNetV1 w4a4 on pynq-z2: 316 distinct non-constant columns of 452 (64 words), 1,416 of 2,160.
TABLE_COLUMN_SHARE = 0.65


def _float32(value) -> np.ndarray:
    return np.asarray(value, dtype=np.float32)


def batch_norm(v: np.ndarray, gamma, beta, mean, var, epsilon: float) -> np.ndarray:
    """Inference BatchNormalization of ``v`` ([channels, ...] float32) as onnxruntime's CPU kernel
    computes it, every step in float32 (``onnxruntime/core/providers/cpu/nn/batch_norm.h``): per
    channel ``inv_std = 1 / sqrt(var + epsilon)``, ``a = inv_std * gamma``, ``b = beta - mean * a``,
    then ``v * a + b``. That is the model's value: qonnx's ``execute_onnx`` runs the node in
    onnxruntime, as the QDQ model's CPU pieces do. ONNX's formula ``(v - mean) / sqrt(var +
    epsilon) * gamma + beta`` in float32 differs from it in the last bit on about half the values
    (``tests/test_qonnx_compile.py::test_batch_norm_is_onnxruntimes``), which moved a threshold by
    one accumulator where a value sat within that bit of a code's midpoint (MobileNetV1 w4a4 at 224:
    one value of 401,408 in the first layer's output, 6 LSB at the logits). O(v)."""
    shape = (-1, *([1] * (v.ndim - 1)))
    gamma, beta, mean, var = (_float32(c).reshape(shape) for c in (gamma, beta, mean, var))
    inv_std = np.float32(1) / np.sqrt(var + np.float32(epsilon))
    scale = inv_std * gamma
    return (_float32(v) * scale + (beta - mean * scale)).astype(np.float32)


def _step(index: QdqIndex, node: onnx.NodeProto, v: np.ndarray, channel_axis: int) -> np.ndarray:
    """``node`` (a ThresholdSink step) applied to ``v`` ([channels, ...] float32), as onnxruntime computes it."""
    const = [index.constant(t) if t else None for t in node.input]
    if node.op_type == "BatchNormalization":
        return batch_norm(v, *const[1:5], next((a.f for a in node.attribute if a.name == "epsilon"), 1e-5))
    if node.op_type == "Relu":
        return np.maximum(v, np.float32(0))
    if node.op_type == "Clip":
        low = const[1] if len(const) > 1 and const[1] is not None else -np.inf
        high = const[2] if len(const) > 2 and const[2] is not None else np.inf
        return np.clip(v, _float32(low), _float32(high))
    if node.op_type == "GreaterOrEqual":
        return (v >= _float32(const[1])).astype(np.float32)
    if node.op_type == "Where":  # reads the GreaterOrEqual before it: 1 where true
        return np.where(v > 0.5, _float32(const[1]), _float32(const[2])).astype(np.float32)
    raise FpgaplaceError(f"node '{node.name}': {node.op_type} is not a threshold step")


def _codes(index: QdqIndex, sink: ThresholdSink, real: np.ndarray) -> np.ndarray:
    """The int8 codes the sink's steps and QuantizeLinear give the real dot products ``real``."""
    v = real.astype(np.float32)
    for node in sink.steps:
        v = _step(index, node, v, 0)
    q = sink.tensor
    return np.clip(np.rint(v / np.float32(q.scale)) + q.zero_point, -128, 127).astype(np.int64)


def thresholds(index: QdqIndex, sink: ThresholdSink, acc_scale: np.ndarray, bias: np.ndarray, bound: np.ndarray,
               lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Per output channel ``c``, the smallest accumulator reaching each code ``lo + 1 .. hi`` (``[C,
    hi - lo]`` int64; ``bound[c] + 1`` for a code never reached with ``|acc| <= bound[c]``) and
    whether the channel's map falls (its weights are to be negated, and its accumulator with them).
    The real dot product of accumulator ``a`` is ``a * acc_scale[c] + bias[c]`` in float32, as the
    model's float convolution computes it. Bisection over ``[-bound, bound + 1]``. O(C * T * log bound)."""
    channels = acc_scale.size
    scale = _float32(acc_scale).reshape(-1, 1)
    offset = _float32(bias).reshape(-1, 1)
    edge = np.stack([-bound, bound], axis=1).astype(np.float64)
    ends = _codes(index, sink, edge * scale + offset)
    falls = ends[:, 0] > ends[:, 1]
    sign = np.where(falls, -1.0, 1.0).reshape(-1, 1)
    targets = np.arange(lo + 1, hi + 1).reshape(1, -1)
    low = np.broadcast_to(-bound.reshape(-1, 1), (channels, targets.size)).astype(np.int64).copy()
    high = np.broadcast_to(bound.reshape(-1, 1) + 1, low.shape).astype(np.int64).copy()
    while np.any(low < high):
        mid = (low + high) // 2  # floor, so low <= mid < high where they differ
        reached = _codes(index, sink, (sign * mid) * scale + offset) >= targets
        high = np.where(reached & (low < high), mid, high)
        low = np.where(~reached & (low < high), mid + 1, low)
    return low, falls


def multithreshold(acc: np.ndarray, table: np.ndarray, lo: int, step: int = 1) -> np.ndarray:
    """int8 ``lo + step * #{i : acc >= table[c][i]}`` with the channel ``c`` on ``acc``'s last axis
    (the integer reference of the stage; FINN's ``multithreshold`` with out_bias ``lo`` and out_scale
    ``step``). O(acc * T)."""
    acc = np.asarray(acc, dtype=np.int64)
    if table.ndim != 2 or table.shape[0] != acc.shape[-1]:
        raise FpgaplaceError(f"thresholds of shape {list(table.shape)}; expected [{acc.shape[-1]}, T]")
    return (lo + step * (acc[..., None] >= table).sum(axis=-1)).astype(np.int8)


def merged_steps(table: np.ndarray) -> tuple[np.ndarray, int]:
    """A table ``[C, HI - LO]`` with each threshold once where every channel's stands in runs of a
    common length ``s`` (the codes between never written: a bipolar quantizer's 0), and ``s``: the
    kept ``[C, (HI - LO) / s]`` thresholds and the code step (``code_step``); ``(table, 1)`` where
    no run longer than one is common. O(C * T * divisors(T))."""
    size = table.shape[1]
    for s in range(size, 1, -1):
        if size % s == 0 and np.array_equal(np.repeat(table[:, ::s], s, axis=1), table):
            return table[:, ::s], s
    return table, 1


def code_step(config: dict) -> int:
    """The step between the codes a threshold stage writes (config member ``STEP``, 1 where absent:
    every code of ``LO..HI``; ``merged_steps``). O(1)."""
    return int(config.get("STEP", 1))


def stored_bits(dot_bits: int) -> int:
    """Bits of one stored threshold for a dot product of ``dot_bits`` signed bits: one more, for the
    clamp's top value ``2^(dot_bits-1)`` (never reached; ``stored_table``). O(1)."""
    return dot_bits + 1


def rom_word_bits(pe: int, count: int, dot_bits: int) -> int:
    """Bits of one word of the RTL unit's table ROM (``rtl/threshold.v.j2``, ``rtl/window.v.j2``:
    ``PE * T * TH_W``): ``pe`` channels of ``count`` thresholds of ``stored_bits``. O(1)."""
    return pe * count * stored_bits(dot_bits)


def word_bits(pe: int, count: int, dot_bits: int) -> int:
    """Bits of one word of the table: ``rom_word_bits`` padded to whole bytes (the C++ array's
    bytes). O(1)."""
    return 8 * -(-rom_word_bits(pe, count, dot_bits) // 8)


def table_memory(channels: int, count: int, pe: int, dot_bits: int) -> tuple[int, int, int]:
    """(BRAM36, URAM, LUTRAM LUTs) of the table: one bank of ``word_bits`` words, one per output
    fold (``ceil(channels / pe)`` deep), as ``memory_blocks`` maps it: the word is read whole once
    per fold, so a wide table is as many blocks as its width needs; a shallow one is a constant
    ROM in LUTs (``rom_luts``: a table of a few words holds few distinct bit columns), of which
    synthesis keeps ``TABLE_COLUMN_SHARE``. O(1)."""
    width, depth = word_bits(pe, count, dot_bits), -(-channels // pe)
    bram, uram, lutram = memory_blocks(width, depth)
    return (bram, uram, math.ceil(TABLE_COLUMN_SHARE * rom_luts(width, depth)) if lutram else 0)


def comparator_luts(results: int, count: int, dot_bits: int) -> int:
    """LUTs of a threshold stage's comparators: ``count`` per result of ``dot_bits`` bits, each
    half a LUT per bit (a carry chain). A unit compares every dot product it finishes at once: a
    dense unit's PE, a window unit's PE x MMV (``rtl/threshold.v.j2``'s lanes, as the HLS kernel's
    unrolled loop over them). O(1)."""
    return int(np.ceil(results * count * dot_bits * LUTS_PER_COMPARE_BIT))


def dot_offsets(w: np.ndarray, bias: np.ndarray, zero_point: int, lane_offset: int) -> np.ndarray:
    """Per output channel, what the accumulator ``bias + sum (x - zero_point) * w`` (the integer
    reference's, against which ``thresholds`` are found) holds beyond the dot product of lane values
    ``sum (x - lane_offset) * w`` (``lane_offset``: the ``XOFF`` an unsigned input's lanes subtract,
    else 0): ``bias - (zero_point - lane_offset) * sum w``. O(weights)."""
    w = np.asarray(w, np.int64).reshape(len(bias), -1)
    return np.asarray(bias, np.int64) - (int(zero_point) - int(lane_offset)) * w.sum(axis=1)


def stored_table(table: np.ndarray, offsets: np.ndarray, dot_bits: int) -> np.ndarray:
    """The thresholds ``table[C][T]`` as the hardware compares them with a dot product of ``dot_bits``
    signed bits: less each channel's offset, clamped to ``[-2^(dot_bits-1), 2^(dot_bits-1)]`` (below
    every dot product: always reached; above: never, as before), each fits ``stored_bits``. O(C*T)."""
    limit = 2 ** (dot_bits - 1)
    return np.clip(np.asarray(table, np.int64) - np.asarray(offsets, np.int64).reshape(-1, 1), -limit, limit)


def table_words(stored: np.ndarray, dot_bits: int, pe: int) -> list[int]:
    """One word per output fold of ``pe`` channels (``stored_table``'s rows): lane ``p``'s ``i``-th
    threshold in bits ``[TH_W*(T*p + i) +: TH_W]``, ``TH_W = stored_bits(dot_bits)``, two's
    complement; the RTL ROM's words and, as little-endian bytes, the C++ array's. O(C*T)."""
    bits = stored_bits(dot_bits)
    fields = np.asarray(stored, np.int64) & ((1 << bits) - 1)  # two's complement codes
    return [sum(int(v) << (bits * j) for j, v in enumerate(fields[f:f + pe].reshape(-1)))
            for f in range(0, fields.shape[0], pe)]


def table_bytes(stored: np.ndarray, dot_bits: int, pe: int) -> np.ndarray:
    """``table_words`` as the C++ array ``fp::OutputStage`` reads (uint8): ``word_bits / 8`` bytes a
    word, little-endian, and 8 zero bytes after the last word, so a field is always read as a whole
    eight-byte window. O(C*T)."""
    count = stored.shape[1]
    size = word_bits(pe, count, dot_bits) // 8
    data = b"".join(word.to_bytes(size, "little") for word in table_words(stored, dot_bits, pe)) + bytes(8)
    return np.frombuffer(data, dtype=np.uint8)


def checked_table(config: dict, arrays: dict, channels: int, what: str) -> dict[str, np.ndarray]:
    """A threshold stage's table ``[channels, T]`` as int64 (T = (HI - LO) / STEP, at most 255, ZY =
    LO: the RTL units count from ZY; ``code_step``; none without one), or a one-line error naming the
    unit ``what``."""
    if "thresholds" not in arrays:
        return {}
    table = np.asarray(arrays["thresholds"])
    span, step = int(config["HI"]) - int(config["LO"]), code_step(config)
    size = span // step if step >= 1 and span % step == 0 else -1
    if table.ndim != 2 or table.shape != (channels, size) or not 1 <= size <= 255 or int(config["ZY"]) != int(
            config["LO"]):
        raise FpgaplaceError(f"rtl {what}: thresholds of shape {list(table.shape)} with LO={config['LO']}, "
                             f"HI={config['HI']}, STEP={step}, ZY={config['ZY']}; expected "
                             f"[{channels}, (HI - LO) / STEP] with ZY = LO")
    return {"thresholds": table.astype(np.int64)}


def count(op: Op, graph: OpGraph) -> int:
    """Thresholds per output channel of ``op``'s output stage: 0 when it requantizes, else ``2^bits
    - 1`` for its output's width (the model's recorded width, 8 otherwise; FINN's count), where a
    batch norm or a bipolar quantizer stands between it and its QuantizeLinear. O(chain)."""
    if not getattr(graph, "is_qdq", False) or op.op_type not in THRESHOLD_HEADS or not op.outputs:  # a probe: none
        return 0
    index = qdq_index(graph.model)
    sink = index.threshold_sink(op.outputs[0]) if index.int_sink(op.outputs[0]) is None else None
    if sink is None:
        return 0
    bits = int(read_widths(graph.model).get(sink.tensor.name, {}).get("bits", 8))
    return 2**bits - 1


def stage_resources(g: Geometry, fold: Folding, dot_bits: int, table: bool = True,
                    registers: bool = False) -> Resources:
    """What the threshold stage a dot product's geometry names (``shape["T"]``) adds to it on its
    ``dot_bits``-bit dot product, nothing without one: the comparators of its PE x MMV results
    (``comparator_luts``) and, with its ``table``, the table (``table_memory``). Without it: the
    comparators only, where the unit's channel ROM is the table (a family built from the RTL op
    library, whose ROMs ``Kernel.rtl_roms`` maps). The comparators take the requantizers' place
    (``Kernel.requantizers``: none behind a threshold stage); the dense unit also drops the
    ``FREED_REQUANT_LUTS`` (``Dense.resources``). With ``registers`` (narrow lanes, whose FFs
    ``kernel.narrow_dot_ffs`` counts register by register) the FFs of the table word the unit
    reads (``word_register_bits``); the int8 lanes' FF fit holds theirs. O(1)."""
    thresholds = int(g.shape.get("T", 0))
    if not thresholds:
        return Resources()
    compare = comparator_luts(fold.pe * fold.mmv, thresholds, dot_bits)
    ff = word_register_bits(g.channels, thresholds, fold.pe, dot_bits) if registers else 0
    if not table:
        return Resources(lut=compare, ff=ff)
    bram, uram, lutram = table_memory(g.channels, thresholds, fold.pe, dot_bits)
    return Resources(bram36=bram, uram=uram, lut=compare + lutram, ff=ff)


def word_register_bits(channels: int, count: int, pe: int, dot_bits: int) -> int:
    """FFs of the table word the RTL unit reads an output fold (``channel``): its distinct bit
    columns (``memory.rom_columns``) where the table is logic, those synthesis keeps
    (``TABLE_COLUMN_SHARE``), none in block RAM (its own output register). O(1)."""
    depth = -(-channels // pe)
    if depth > LUTRAM_MAX_DEPTH:
        return 0
    return math.ceil(TABLE_COLUMN_SHARE * rom_columns(word_bits(pe, count, dot_bits), depth))
