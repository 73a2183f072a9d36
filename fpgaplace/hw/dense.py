"""Dense (ONNX Gemm, MatMul and their quantized and fused forms with a constant weight matrix):
FINN's MVAU over ROWS vectors a sample.

Everything about the op is here: geometry, foldings (PE output channels, SIMD reduction
elements), cycles (``rows * N/PE * K/SIMD``), resources (the dot-product rules of
``fpgaplace.hw.kernel``), the integer reference (``fpgaplace.hw.reference.dense``), the C++
config of ``hls/ops/dense.j2`` and the values of the RTL unit (``rtl/dense.v.j2``: PE x SIMD
MACs a cycle at the layer's widths, built as ``hw.kernel.lane_choice`` says: XNOR-popcount for
+-1 by +-1, product tables in LUTs, or channels packed into one multiplier (two int8 MACs to a
DSP48E2 with ``macs_per_dsp=2``); ``requantize_plan(PE, K/SIMD)`` requantizers shared among
the PE lanes, or a threshold stage in their place, ``rtl/threshold.v.j2``, ``threshold.table_words``) with
its weight ROM at the weights' width and its channel ROM. O(N*K) for the RTL values.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from fpgaplace.board.model import core_family
from fpgaplace.hw import reference, threshold
from fpgaplace.hw.geometry import Fill, Folding, Geometry, Resources, Rom, RtlUnit, Unsupported
from fpgaplace.hw.kernel import (
    Kernel,
    Lanes,
    check_bits,
    dot_bits,
    narrow_lanes,
    probe,
    requantize_plan,
    tensor_shape,
    threshold_table_apart,
    unit_fill,
    unit_lanes,
)
from fpgaplace.hw.lowering import Layer
from fpgaplace.hw.memory import LUTRAM_MAX_DEPTH, rom_style, single_port_ram_style
from fpgaplace.hw.qdq import PASS_THROUGH, qdq_index
from fpgaplace.hw.rtl_values import (
    DOT_ARRAYS,
    PORT_IN,
    PORT_OUT,
    index_bits,
    pack_lanes,
    per_channel_arrays,
    requant_channels,
    weight_rom_module,
    weights_apart,
)
from fpgaplace.util.errors import FpgaplaceError

if TYPE_CHECKING:
    from fpgaplace.board.model import FpgaCore
    from fpgaplace.hw.lowering import LayerContext
    from fpgaplace.model.ir import Op, OpGraph

DENSE_MEMBERS = ("K", "N", "ZX", "ZY", "LO", "HI", "PE", "SIMD")
MAX_TABLE_BITS = 8  # a LUT lane of at most this many input bits is a table (fewer LUTs than shift-and-add)
FIFO_DEPTH = 16  # output FIFO slots: above the results in flight, (issue-to-FIFO latency 7 + PE/RQ + 2) / SF + 1 <= 12


ISSUE_TO_SUM = 4  # rtl/dense.v.j2: s1 operands, s2 products, s3 adder trees, s4 accumulate
REQUANT_TO_BEAT = 3  # s6 dot * m + bm, s7 rounded and clamped, then the output FIFO's word


def result_delay(pe: int, folds: int) -> int:
    """Cycles from an output fold's last issue (its vector's last input beat, for the first fold)
    to its PE results in the unit's output FIFO (``rtl/dense.v.j2``'s pipeline): the operand,
    product, adder-tree and accumulate registers, the requantizers' PE / RQ groups of RQ_CYCLES
    each (``requantize_plan``), the rounding register and the FIFO's write. O(PE)."""
    units, cycles = requantize_plan(pe, folds)
    return ISSUE_TO_SUM + pe // units * cycles + REQUANT_TO_BEAT


# The narrow dense unit with its weights in block RAM (``block_rom``) took more LUTs in yosys 0.23
# synth_xilinx -family xc7 than its fit (``kernel.narrow_dot_luts``, whose dense rows mostly kept a
# shallow ROM in LUTs): 90 to 222 over the estimate on 14 units of 256 x 64, 256 x 512 and 512 x 64
# (1 to 4 bits, PE x SIMD 1 x 8 to 8 x 8, requantized or thresholded), -41 to 84 on the 64 x 16 units
# of a LUT ROM. A constant fits as well as one growing with the word (least squares of the relative
# error: 113 + 0.43 a word bit): the 14 within 9 %, rms 4 % (before: up to 32 % under; the CNV w1a2's
# 256 x 512 threshold unit at 1 x 32, 276 LUTs priced against 408).
BLOCK_ROM_LUTS = 115
# The share of a binary (XNOR) lane's price (``kernel.lane_luts``, fitted to window units and the
# CNV w1a1's layers) a dense unit's binary lane takes where its weights are in block RAM
# (``block_rom``). yosys 0.23 synth_xilinx -family xc7 of nine dense units with a bipolar threshold
# stage (T = 1, STEP = 2; ``rtl_cases.threshold_dense_case``), K x N = 256 and 512 x 512 at PE x SIMD
# 1 x 32 to 16 x 64: at the full price 1.13 to 1.42 of yosys (the CNV w1a1's 512 x 512 at 8 x 32
# 1.36); at this share, least squares of the relative error, 0.92 to 1.07. Both of the price's terms,
# fitted apart to the nine, came out at the same share (3.0 / sqrt(PE) and 0.38 a tree level against
# 4.6 and 0.54). Units whose weights are a LUT ROM take the full price: the compiled MLP w1a1's 32 x
# 16 at 2 x 16 was 0.74 of yosys at the share, 0.98 at the full price; the 64 x 16 units of
# ``--kernels`` 0.83 to 0.86 at the share.
DENSE_XNOR_LANE_SHARE = 0.68
# FFs a dense unit with a threshold stage has fewer than ``kernel.narrow_dot_ffs`` counts beyond its
# registers (``Dense.narrow_ffs``): the requantizers' group control and rounding registers. yosys 0.23
# synth_xilinx -family xc7 of 15 binary dense units with a bipolar threshold stage (the nine of
# ``DENSE_XNOR_LANE_SHARE``, and 32 x 16 and 64 x 16 at 2 x 8 to 8 x 8), least squares of the relative
# error: 0.89 to 1.12 of yosys (before: 1.07 to 1.37; the compiled MLP w1a1's 32 x 16 at 4 x 8 1.37).
THRESHOLD_FREED_FFS = 41


def block_rom(g: Geometry, fold: Folding, core: FpgaCore | None, resident: bool) -> bool:
    """Whether a dense unit on a family Vivado builds from HLS keeps its weights on chip in block
    RAM: resident, deeper than ``LUTRAM_MAX_DEPTH`` words of PE x SIMD weights. O(1)."""
    depth = math.ceil(g.weights / (fold.pe * fold.simd)) if g.weights else 0
    return resident and depth > LUTRAM_MAX_DEPTH and not core_family(core).rtl_built


class Dense(Kernel):
    name, template, uses_dsp = "dense", "hls/ops/dense.j2", True

    def geometry(self, op: Op, graph: OpGraph) -> Geometry | Unsupported:
        a, b, out = (tensor_shape(graph, t) for t in (op.inputs[0], op.inputs[1], op.outputs[0]))
        if op.inputs[1] not in graph.params:
            return Unsupported("the second operand is not a constant weight matrix")
        if a is None or b is None or out is None or len(b) != 2:
            return Unsupported("expected a 2-D constant weight matrix")
        if op.op_type == "Gemm":
            if op.attrs.get("transA", 0) or float(op.attrs.get("alpha", 1.0)) != 1.0:
                return Unsupported("Gemm with transA or alpha != 1")
            if len(op.inputs) > 2 and op.inputs[2] and (
                op.inputs[2] not in graph.params or float(op.attrs.get("beta", 1.0)) != 1.0
            ):
                return Unsupported("Gemm bias must be constant with beta = 1")
            k, n = (b[1], b[0]) if op.attrs.get("transB", 0) else b
        else:
            k, n = b
        if a[-1] != k:
            return Unsupported("operand shapes do not agree")
        rows = math.prod(a[:-1])
        shape = {"K": k, "N": n, "ROWS": rows, "TRANSB": int(op.attrs.get("transB", 0)) if op.op_type == "Gemm" else 0,
                 "T": threshold.count(op, graph)}
        return Geometry(self.name, rows, n, k, stream_elements=max(math.prod(a), math.prod(out)),
                        weights=k * n, macs=rows * n * k, shape=shape)

    def fill(self, g: Geometry, fold: Folding) -> Fill:
        """Each vector's whole input before its outputs: the unit takes a vector's SF beats during
        its first output fold, so its first PE outputs follow the vector's last beat by the unit's
        pipeline (``result_delay``) and the other NF - 1 folds come after it (``unit_fill``, a
        vector a unit)."""
        folds = g.reduction // fold.simd
        delay = result_delay(fold.pe, folds)
        return unit_fill(self.cycles(g, fold), g.pixels, folds, delay, (g.channels // fold.pe - 1) * folds + delay)

    def reference(self, config: dict, arrays: dict, inputs: list[np.ndarray], rows: int = 1) -> np.ndarray:
        c = config
        vectors = inputs[0].reshape(rows, c["K"])
        if "thresholds" in arrays:  # a threshold output stage (fpgaplace.hw.threshold)
            acc = np.stack([reference.dense_accumulate(v, arrays["w"], arrays["bias"], zx=c["ZX"]) for v in vectors])
            out = threshold.multithreshold(acc, arrays["thresholds"], c["ZY"], threshold.code_step(c))
            return out.reshape(-1) if rows > 1 else out[0]
        out = [reference.dense(v, arrays["w"], arrays["bias"], arrays["mult"], arrays["shift"], zx=c["ZX"], zy=c["ZY"],
                               lo=c["LO"], hi=c["HI"]) for v in vectors]
        return np.stack(out).reshape(-1) if rows > 1 else out[0]

    def lower(self, ctx: LayerContext, op: Op, shape: dict) -> Layer:
        """The layer of ``op``: its config members and arrays from the QDQ graph (``fpgaplace.hw.lowering``)."""
        x = ctx.source(op, op.inputs[0])
        weight = ctx.index.weight(op.inputs[1])
        n_axis = 0 if shape["TRANSB"] else 1
        if weight.scale.size not in (1, shape["N"]) or (weight.scale.size > 1 and weight.axis != n_axis):
            raise FpgaplaceError(f"op '{op.name}': weight scales must be per tensor or per output column")
        w = weight.values if shape["TRANSB"] else weight.values.T  # -> [N, K]
        layout = flattened_from(ctx.graph, op.inputs[0])
        if layout is not None and math.prod(layout[1:]) == shape["K"]:  # the stream is HWC: permute K to match
            w = w.reshape(shape["N"], *layout[1:]).transpose(0, 2, 3, 1).reshape(shape["N"], shape["K"])
        y, arrays, output_stage = ctx.dot_output(op, x, w, weight.scale, shape["N"])
        config = {"K": shape["K"], "N": shape["N"], "ZX": x.zero_point, **output_stage}
        return Layer(op.name, "dense", [x.name], y.name, config, arrays, rows=shape["ROWS"] // ctx.batch())

    def narrow_ffs(self, g: Geometry, fold: Folding, lanes: Lanes, resident: bool) -> int:
        """``Kernel.narrow_ffs``, but behind a threshold stage (``rtl/dense.v.j2``: no result register
        and no requantizers): each of the PE dot products' sum register at its adder tree's width
        (``dot_bits`` of SIMD products; synthesis keeps no copies of its sign), its accumulator, and
        the stage's int8 code in place of the result; ``THRESHOLD_FREED_FFS`` fewer. O(1)."""
        ffs = super().narrow_ffs(g, fold, lanes, resident)
        if not g.shape.get("T"):
            return ffs
        dot, tree = (dot_bits(n, g.weight_bits, g.activation_bits) for n in (g.reduction, fold.simd))
        kept = fold.pe * (tree + dot + 8)
        return max(0, ffs - fold.pe * self.sum_stages * dot + kept - THRESHOLD_FREED_FFS)

    def lane_scale(self, g: Geometry, fold: Folding, core: FpgaCore | None, resident: bool = True) -> float:
        """The share of ``lane_luts`` a narrow lane takes (``narrow_dot_luts``): a binary lane's
        ``DENSE_XNOR_LANE_SHARE`` where its weights are in block RAM (``block_rom``, on a family
        Vivado builds from HLS: fitted on Xilinx alone); all of it elsewhere. O(1)."""
        if not block_rom(g, fold, core, resident) or self.unit_lanes(g, fold, core).kind != "xnor":
            return 1.0
        return DENSE_XNOR_LANE_SHARE

    def resources(self, g: Geometry, fold: Folding, core=None, resident: bool = True) -> Resources:
        """The dot product's resources, and a threshold output stage's where it has one (``threshold``:
        its comparators and table in place of the requantizers, ``requantizers``, their channel
        ROM and ``threshold.FREED_REQUANT_LUTS``), as the RTL unit builds it; with narrow lanes on
        Xilinx, ``BLOCK_ROM_LUTS`` where its weights are in block RAM (``block_rom``)."""
        acc_bits = dot_bits(g.reduction, g.weight_bits, g.activation_bits)
        stage = threshold.stage_resources(g, fold, acc_bits, threshold_table_apart(core), narrow_lanes(g, core))
        total = super().resources(g, fold, core, resident) + stage
        if not narrow_lanes(g, core):  # the int8 fit holds those LUTs
            return total
        freed = threshold.FREED_REQUANT_LUTS if g.shape.get("T") else 0
        rom = BLOCK_ROM_LUTS if block_rom(g, fold, core, resident) else 0
        lut = max(0, total.lut - freed + rom)
        return Resources(total.dsp, total.bram36, total.uram, lut, total.ff)

    def config_macs(self, config: dict[str, int], rows: int = 1) -> int:
        return rows * config["N"] * config["K"]

    def width_members(self, widths: dict[str, Any] | None, arrays: dict[str, Any]) -> dict[str, int]:
        """The lane widths ``WB, XB, XU`` of the layer (``lane_widths``); none at 8 x 8 bits."""
        return lane_widths(widths, arrays.get("w"))

    # ---- HLS ----

    def stream_widths(self, g: Geometry, fold: Folding, inputs: int) -> tuple[list[int], int]:
        """SIMD elements of a vector in, PE results out."""
        return [fold.simd], fold.pe

    def hls_config(self, config: dict[str, int], g: Geometry, fold: Folding) -> dict[str, int]:
        return {**config, "PE": fold.pe, "SIMD": fold.simd}

    def output_size(self, config: dict[str, int], arrays: dict[str, np.ndarray], rows: int = 1) -> int:
        return rows * config["N"]

    # ---- RTL ----

    def config_geometry(self, config: dict[str, Any]) -> Geometry:
        """The geometry of a ``[1, K] x [K, N]`` MatMul with the config members K and N (and T,
        thresholds per channel, where the config has them)."""
        k, n = int(config["K"]), int(config["N"])
        g = probe(self, "MatMul", {}, ["x", "w"], {"x": (1, k), "w": (k, n), "y": (1, n)}, ("w",))
        return replace(g, shape={**g.shape, "T": int(config.get("T", 0))})

    def config_cycles(self, config: dict[str, Any]) -> int:
        """Cycles per vector of the cycle model for the config's K, N, PE and SIMD."""
        return self.cycles(self.config_geometry(config), Folding(pe=int(config["PE"]), simd=int(config["SIMD"])))

    def probe_layer(self, config: dict[str, Any], arrays: dict[str, Any],
                    fold: Folding) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The layer cut to PE outputs of one vector (the weights' first PE rows, and their
        thresholds): the same lanes and requantizers or threshold stage (``Kernel.probe_layer``)."""
        kept = {name: (np.asarray(value)[:fold.pe] if name in (*DOT_ARRAYS, "thresholds") else value)
                for name, value in arrays.items()}
        return {**config, "N": fold.pe, "ROWS": 1}, kept

    def rtl(self, config: dict[str, Any], arrays: dict[str, Any], fold: Folding, top: str, model_cycles: int,
            macs_per_dsp: int = 1, core: FpgaCore | None = None) -> RtlUnit:
        """A layer's dense unit: ``config`` with the folding's PE and SIMD (``rtl_values``), its
        input a sample of ROWS vectors one after another."""
        rows = int(config.get("ROWS", 1))
        unit = self.rtl_values(config | {"PE": fold.pe, "SIMD": fold.simd}, arrays, top, macs_per_dsp, core=core)
        return RtlUnit(unit.template, unit.values, unit.roms, ((PORT_IN, fold.simd, rows * int(config["K"])),),
                       (PORT_OUT, fold.pe, rows * int(config["N"])))

    def rtl_values(self, config: dict[str, Any], arrays: dict[str, Any], top: str = "fp_dense",
                   macs_per_dsp: int = 1, lanes: Lanes | None = None, core: FpgaCore | None = None) -> RtlUnit:
        """The dense unit for ``config`` (the C++ members ``K, N, ZX, ZY, LO, HI, PE, SIMD``) and
        ``arrays`` (``w [N, K]`` int8, ``bias``, ``mult``, ``shift`` per output channel): ROMs
        ``{top}_weights.mem`` (folded ``[N/PE][K/SIMD][PE][SIMD]``, one word per MAC step) and
        ``{top}_channels.mem`` (per output fold, PE words of ``{shift, mult, bias'}`` with
        ``bias' = bias - (ZX - XOFF) * sum_k w``). Widths (``lane_values``): the optional members
        ``WB`` and ``XB`` (bits of weights and activations, 8 unless given; 1 means +-1) and ``XU``
        (1: unsigned activations); ``lanes`` as ``lane_choice`` builds them on ``core`` unless given
        (at 8 bits ``macs_per_dsp = 2`` packs channel pairs' MACs into one multiplier). O(N*K)."""
        if macs_per_dsp not in (1, 2):
            raise FpgaplaceError(f"rtl dense: macs_per_dsp must be 1 or 2, got {macs_per_dsp}")
        checked = _check_dense(config, arrays)
        k, n, pe, simd, zx = (int(config[m]) for m in ("K", "N", "PE", "SIMD", "ZX"))
        w = checked["w"]
        nf, sf = n // pe, k // simd
        units, cycles = requantize_plan(pe, sf)
        lane = lane_values(config, w, pe, macs_per_dsp, lanes, core)
        weight_rom = weight_words(reference.fold_weights(w, pe, simd).reshape(nf * sf, pe * simd), lane["WB"])
        acc_bits, channel_words, channel_bits = requant_channels(w.reshape(n, -1), checked, zx - lane["XOFF"], pe,
                                                                 "dense")
        dot_w = dot_bits(k, lane["WB"], lane["XB"])
        stage = {"T": 0}
        if "thresholds" in arrays:  # the channel ROM holds thresholds in place of the requantizers' words
            stored, _, _ = lane_thresholds(config, checked, lane)
            channel_words = threshold.table_words(stored, dot_w, pe)
            th_bits = threshold.stored_bits(dot_w)
            stage = {"T": int(checked["thresholds"].shape[1]), "TH_W": th_bits, "STEP": threshold.code_step(config)}
            channel_bits = stage["T"] * th_bits
        weights_file, channels_file = f"{top}_weights.mem", f"{top}_channels.mem"
        values = {m: int(config[m]) for m in DENSE_MEMBERS} | lane | stage | {
            "name": top, "NF": nf, "SF": sf, "macs_per_dsp": macs_per_dsp,
            "DOT_W": dot_w, "ACC_W": acc_bits,
            "RQ": units, "RQ_CYCLES": cycles, "GROUP_BITS": index_bits(pe // units),
            "FIFO_DEPTH": FIFO_DEPTH, "FIFO_BITS": index_bits(FIFO_DEPTH), "CREDIT_BITS": FIFO_DEPTH.bit_length(),
            "SF_BITS": index_bits(sf), "NF_BITS": index_bits(nf), "WA_BITS": index_bits(nf * sf),
            "weights_file": weights_file, "channels_file": channels_file, "WEIGHTS_APART": weights_apart(config),
            "weights_module": weight_rom_module(top),
            "weights_attribute": rom_style(nf * sf), "channels_attribute": rom_style(nf),
            "xbuf_attribute": single_port_ram_style(sf),
        }
        roms = {weights_file: weight_rom, channels_file: Rom(channel_words, channel_bits * pe)}
        return RtlUnit("rtl/dense.v.j2", values, roms, ((PORT_IN, simd, k),), (PORT_OUT, pe, n))


LANE_BITS = (1, 2, 4, 8)  # widths the RTL dense lanes take (1: +-1)
UNSIGNED_LANE_BITS = 4  # unsigned codes up to this width go in XU lanes; wider ones are int8 codes


def lane_widths(widths: dict[str, Any] | None, w: np.ndarray | None) -> dict[str, int]:
    """The RTL dense unit's lane members ``WB, XB, XU`` for a layer of ``widths`` (design.json's:
    ``weights``, ``inputs``, ``inputs_signed``) and weights ``w``; none where both are 8 bits
    (the int8 unit). Weights: the least of ``LANE_BITS`` at least their recorded width that holds
    every weight (a threshold stage's negated channels may need one more bit; 1 only for +-1).
    Inputs: a signed 1-bit input is +-1 (``XB = 1``); other signed ones the least lane width
    holding them; unsigned codes of up to ``UNSIGNED_LANE_BITS`` bits ``XU`` lanes of at least 2
    bits (``lane_values``: code - 2^(XB-1)); wider unsigned codes are int8 codes (``XB = 8``). O(N*K)."""
    if not widths or w is None or not widths.get("inputs"):
        return {}
    w = np.asarray(w)
    wb = next((bits for bits in LANE_BITS if bits >= (widths.get("weights") or 8) and (
        np.isin(w, (-1, 1)).all() if bits == 1 else (w.min(initial=0) >= -2 ** (bits - 1)
                                                       and w.max(initial=0) < 2 ** (bits - 1)))), 8)
    xb, xu = input_lane_bits(widths)
    members = {"WB": wb, "XB": xb, "XU": xu}
    return {} if members == {"WB": 8, "XB": 8, "XU": 0} else members


def input_lane_bits(widths: dict[str, Any]) -> tuple[int, int]:
    """``(XB, XU)``: the lane width and unsignedness of the first input's codes for a layer of
    ``widths`` (design.json's ``inputs``, ``inputs_signed``): a signed 1-bit input is +-1 (``XB =
    1``); other signed ones the least lane width holding them; unsigned codes of up to
    ``UNSIGNED_LANE_BITS`` bits ``XU`` lanes of at least 2 bits; wider ones int8 codes. O(1)."""
    bits, signed = int(widths["inputs"][0]), bool((widths.get("inputs_signed") or [True])[0])
    unsigned = not signed and bits <= UNSIGNED_LANE_BITS
    xb = 1 if signed and bits == 1 else next(b for b in LANE_BITS[1:] if b >= bits) if bits <= 8 else 8
    return xb, int(unsigned)


def weight_words(folded: np.ndarray, wb: int) -> Rom:
    """The weight ROM of a dot-product unit from its folded weights (a row a MAC step): int8 byte
    lanes at 8 bits, else each row's weights packed at ``wb`` bits (``pack_lanes``; a 1-bit weight
    +-1 as 1 / 0), as the dense and window units read them. O(weights)."""
    if wb == 8:
        return Rom(folded)
    return Rom([pack_lanes(row > 0 if wb == 1 else row, wb) for row in folded], wb * folded.shape[1])


def lane_code(value: int, xb: int, xu: int) -> int:
    """The ``XB``-bit code a lane holds for the int8 ``value`` (``rtl/lanes.v.j2``'s ``narrow``): +-1
    as its sign bit inverted, an unsigned value with its top bit flipped, a signed one as its low
    bits. O(1)."""
    if xb == 1:
        return int(value >= 0)
    return (value ^ (xu << (xb - 1))) & ((1 << xb) - 1)


def lane_range(xb: int, xu: int) -> tuple[int, int]:
    """The least and greatest int8 values ``XB``-bit lanes hold (``XU``: unsigned codes; one bit: +-1). O(1)."""
    if xb == 1:
        return -1, 1
    return (0, 2**xb - 1) if xu else (-(2 ** (xb - 1)), 2 ** (xb - 1) - 1)


def lane_offset(xb: int, xu: int) -> int:
    """What an unsigned input's ``XB``-bit lanes subtract from its codes (``XU = 1``: ``2^(XB-1)``,
    so each lane holds a signed value of its width), else 0."""
    return xu * 2 ** (xb - 1)


def lane_thresholds(config: dict[str, Any], arrays: dict[str, Any],
                    members: dict[str, int]) -> tuple[np.ndarray, np.ndarray, int]:
    """A dot product's threshold table as its units store it (``threshold.stored_table``), for the
    dot product of its lane values at the lane widths ``members`` (``WB``, ``XB``, ``XU``; 8-bit
    signed lanes where absent): the table, each channel's offset (``threshold.dot_offsets``; the
    C++ kernels take the bias less it) and the dot product's bits. The RTL dense unit and the HLS kernels both read it,
    and the folding prices its bits (``threshold.stage_resources``). O(weights + C*T)."""
    w = np.asarray(arrays["w"])
    xb, xu = int(members.get("XB", 8)), int(members.get("XU", 0))
    bits = dot_bits(w.reshape(w.shape[0], -1).shape[1], int(members.get("WB", 8)), xb)
    offsets = threshold.dot_offsets(w, arrays["bias"], int(config["ZX"]), lane_offset(xb, xu))
    return threshold.stored_table(arrays["thresholds"], offsets, bits), offsets, bits


def lane_values(config: dict[str, Any], w: np.ndarray, pe: int, macs_per_dsp: int, lanes: Lanes | None,
                core: FpgaCore | None = None, what: str = "dense", sharing: int | None = None) -> dict[str, Any]:
    """The lane members of the dense template: widths ``WB``, ``XB``, ``XU`` and the offset
    ``XOFF`` an unsigned input's lanes subtract, the lane kind, the product bits ``PW``, the
    operands of a LUT lane's shift-and-add (``AW`` the wider, ``BW`` the narrower), a DSP lane's
    channel groups ``[(first, count)]`` and the SIMD adder tree's levels ``[(count, bits)]``
    (``adder_tree``); the lanes ``unit_lanes(core, WB, XB, sharing)`` unless given (``sharing``:
    the channels reading each input, PE unless given), the decision the cost model prices
    (``Kernel.unit_lanes``); a one-line error naming the unit ``what`` (the dense unit's, or the
    window unit's ``conv2d``) for weights outside their width. O(N*K)."""
    wb, xb, xu = int(config.get("WB", 8)), int(config.get("XB", 8)), int(config.get("XU", 0))
    check_bits(wb, f"rtl {what} WB")
    check_bits(xb, f"rtl {what} XB")
    if wb > 8 or xb > 8 or xu not in (0, 1) or (xu and xb in (1, 8)):
        raise FpgaplaceError(f"rtl {what}: WB={wb} and XB={xb} must be at most 8 bits, XU 0 or 1 (1 only for 2-4 bits)")
    allowed = {-1, 1} if wb == 1 else range(-2 ** (wb - 1), 2 ** (wb - 1))
    if not np.isin(w, list(allowed)).all():
        raise FpgaplaceError(f"rtl {what}: w holds values outside {wb}-bit weights "
                             f"({'+-1' if wb == 1 else f'[{-2 ** (wb - 1)}, {2 ** (wb - 1) - 1}]'})")
    if lanes is None:
        lanes = Lanes("dsp", wb, xb, macs_per_dsp) if max(wb, xb) == 8 and min(wb, xb) > 1 else \
            unit_lanes(core, wb, xb, pe if sharing is None else sharing)
    if (lanes.weight_bits, lanes.activation_bits) != (wb, xb):
        raise FpgaplaceError(f"rtl {what}: lanes of {lanes.weight_bits} x {lanes.activation_bits} bits "
                             f"for WB={wb}, XB={xb}")
    groups = [(first, min(lanes.pack, pe - first)) for first in range(0, pe, lanes.pack)]
    return {"WB": wb, "XB": xb, "XU": xu, "XOFF": lane_offset(xb, xu), "LANE_KIND": lanes.kind, "PACK": lanes.pack,
            "FIELD": lanes.field, "PW": lanes.product_bits, "AW": max(wb, xb), "BW": min(wb, xb), "groups": groups,
            "table": product_table(wb, xb) if lanes.kind == "lut" and wb + xb <= MAX_TABLE_BITS else [],
            "tree": adder_tree(int(config["SIMD"]), lanes.product_bits)}


def code_values(bits: int) -> np.ndarray:
    """The value of each ``bits``-bit lane code: +-1 (1 is +1) at one bit, else two's complement."""
    codes = np.arange(2**bits)
    return 2 * codes - 1 if bits == 1 else np.where(codes >= 2 ** (bits - 1), codes - 2**bits, codes)


def product_table(weight_bits: int, activation_bits: int) -> list[int]:
    """A LUT lane's products by code ``{w, x}`` (the weight's code above the input's), each as
    ``weight_bits + activation_bits`` bits of two's complement. O(2 ** (wb + ab))."""
    products = np.outer(code_values(weight_bits), code_values(activation_bits)).reshape(-1)
    return [int(v) & ((1 << (weight_bits + activation_bits)) - 1) for v in products]


def adder_tree(count: int, bits: int) -> list[tuple[int, int]]:
    """Levels ``[(values, bits)]`` of a balanced adder tree over ``count`` values of ``bits``: half
    as many (rounded up) and one bit wider a level, down to one value. O(log count)."""
    levels = [(count, bits)]
    while levels[-1][0] > 1:
        levels.append(((levels[-1][0] + 1) // 2, levels[-1][1] + 1))
    return levels


FLATTEN_PATH = frozenset({"QuantizeLinear", "DequantizeLinear", *PASS_THROUGH})
"""Ops between a flatten of a feature map and the dense layers reading it: they keep its stream order."""


def flattened_from(graph: OpGraph, tensor: str) -> tuple[int, ...] | None:
    """The NCHW shape (channels and pixels both > 1) of which ``tensor`` is a flatten, through
    Q/DQ and reshapes: its stream on a core is that tensor's, channels last (HWC). O(path)."""
    index = qdq_index(graph.model)
    node = index.producer.get(tensor)
    while node is not None and node.op_type in FLATTEN_PATH:
        info = graph.tensors.get(node.input[0])
        shape = info.shape if info is not None else None
        if shape is not None and len(shape) == 4 and shape[1] > 1 and shape[2] * shape[3] > 1:
            return tuple(shape)
        node = index.producer.get(node.input[0])
    return None


def flatten_readers(graph: OpGraph, op: Op) -> list[str] | None:
    """The nodes from ``op``'s output (through Q/DQ and reshapes) to the dense layers that read it
    as their vector, or None when anything else reads it (a CPU op would see the HWC order)."""
    index = qdq_index(graph.model)
    path, frontier = [], list(op.outputs[:1])
    while frontier:
        tensor = frontier.pop()
        if tensor in index.graph_outputs:
            return None
        for reader in index.consumers.get(tensor, []):
            path.append(reader.name)
            if reader.op_type in FLATTEN_PATH:
                frontier.append(reader.output[0])
            elif reader.op_type not in ("Gemm", "MatMul") or reader.input[0] != tensor or reader.name not in graph.ops:
                return None
    return path or None


def _check_dense(config: dict[str, Any], arrays: dict[str, Any]) -> dict[str, np.ndarray]:
    missing = [m for m in DENSE_MEMBERS if m not in config] + [a for a in DOT_ARRAYS if a not in arrays]
    if missing:
        raise FpgaplaceError(f"rtl dense: config/arrays lack {', '.join(missing)}")
    k, n, pe, simd = (int(config[m]) for m in ("K", "N", "PE", "SIMD"))
    if k < 1 or n < 1 or pe < 1 or simd < 1 or n % pe or k % simd:
        raise FpgaplaceError(f"rtl dense: PE={pe} must divide N={n} and SIMD={simd} must divide K={k}")
    w = np.asarray(arrays["w"])
    if w.dtype != np.int8 or w.shape != (n, k):
        raise FpgaplaceError(f"rtl dense: w must be int8 of shape ({n}, {k}), got {w.dtype} {w.shape}")
    per_channel = per_channel_arrays(arrays, n)
    if per_channel["mult"].min() < 0 or per_channel["mult"].max() >= 2**31:
        raise FpgaplaceError("rtl dense: mult must lie in [0, 2**31)")
    if per_channel["shift"].min() < 1 or per_channel["shift"].max() > 62:
        raise FpgaplaceError("rtl dense: shift must lie in [1, 62]")
    if not all(-128 <= int(config[z]) <= 127 for z in ("ZX", "ZY")) or not -128 <= int(config["LO"]) <= int(
            config["HI"]) <= 127:
        raise FpgaplaceError("rtl dense: ZX, ZY and LO <= HI must be int8")
    return {"w": w, **per_channel, **threshold.checked_table(config, arrays, n, "dense")}
