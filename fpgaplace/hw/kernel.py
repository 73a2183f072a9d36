"""The kernel base: what every hardware op answers, the data it answers in, and the shared cost rules.

A core runs its ops as one dataflow pipeline (one stage per op, streams between them), so a
sample leaves the core every *interval* = the slowest stage's cycles. Each stage is folded:

* dot-product kernels (conv2d, dense) compute ``PE`` output channels x ``SIMD`` reduction
  elements per cycle on DSPs (``Kernel.mac_dsps``: one multiplier a MAC lane, or on a DSP48E2
  two int8 lanes that share an operand in one multiplier; plus the multipliers of the
  ``requantize_plan``, ``requantizer_dsps``: the count the RTL op library builds and yosys maps):
  ``cycles = (pixels / MMV) * (channels / PE) * (reduction / SIMD)`` (FINN's MVAU count), with
  PE dividing the channels and SIMD the reduction length, and MMV output pixels of a row side
  by side (FINN's MMV, taken only where a beat then holds whole pixels: PE is every channel
  and MMV divides the row, see ``Kernel.pixel_widths``);
* lane kernels (pools, add, requantize, concat) handle ``PE`` channels of ``MMV`` pixels per
  cycle in LUTs: ``cycles = rows * ceil(row / MMV) * ceil(elements per pixel / PE)``;
* free kernels (reshape, quantize/dequantize and batch norm absorbed into their neighbours)
  cost nothing.

What an op costs the *placement* (``ideal_cycles``) is its share of the core's shared budget:
``MACs / (DSPs * macs_per_dsp)`` for dot products and ``stream elements / LUT lanes`` for lane
kernels. Summed over a core's ops this is the interval a perfectly balanced folding reaches;
``fpgaplace.hw.folding`` finds the real folding, whose interval the compile step reports beside
the planned load. Where a core is far larger than its ops need, the floor of one pixel per
cycle makes the real interval exceed the share (the report shows both).

Resources are estimates of the kind FINN's ``bram_estimation``/``lut_estimation`` make:
weights are held in ``PE`` banks of ``SIMD`` bytes per word (plus a 72-bit word of bias,
multiplier and shift per output channel), each bank in BRAM36 of the best aspect ratio or, as
a folding choice, in URAM when it is deep and the core has URAM, or in LUTRAM when shallow; a window kernel
keeps ``KH`` rows of its input in a line buffer. LUT and FF counts are linear in the lanes; the
coefficients are documented below and are to be checked against yosys.

Precision (``Geometry.weight_bits``, ``Geometry.activation_bits``; 8 unless ``with_precision``
says otherwise; 1, 2, 4, 8, 16 or 32 bits): cycles do not depend on it (a lane is a MAC a cycle at
any width); weight bytes, weight banks and line buffers are counted in bits. How a dot product's
lanes are built is one decision, ``lane_choice`` (the cost model, the RTL and the report read it):

* 8 bits: DSPs, the board's ``macs_per_dsp`` (1 on a DSP48E1; 2 on a DSP48E2, two int8 MACs
  sharing an operand in one 27 x 18 multiplier: Xilinx WP486, "Deep Learning with INT8
  Optimization on Xilinx Devices", 2017; 1 on an ECP5 MULT18X18D);
* 2 to 4 bits both: packed into DSPs or on LUTs, whichever takes the smaller share of the core's
  LUT or DSP budget (``lane_share``). Packed, ``narrow_pack`` channels sharing an
  input put their weights ``wb + ab`` bits apart on the multiplier's A port (3 int4 MACs on a
  DSP48E1 or DSP48E2, 2 on a MULT18X18D; Xilinx WP521, "Convolutional Neural Network with INT4
  Optimization on Xilinx Devices", 2020, reaches four on a DSP48E2 by packing two inputs too),
  and ``packed_dsps`` counts them as yosys maps them (``group_dsps``). On LUTs, a lane is a table
  of its product (``LANE_LUTS``);
* 1 bit (+-1) both: no DSP; an XNOR into a popcount tree (FINN's binary MVAU, Umuroglu et al.,
  "FINN", FPGA 2017); one 1-bit operand with a wider one: a LUT lane;
* 16 bits: one MAC per DSP (16 x 16 fits 25 x 18 or 27 x 18); 32 bits: four (a 32 x 32 product
  in 2 x 2 multiplier tiles).

The LUTs of a stage with narrow or binary lanes are ``narrow_dot_luts`` (fitted to yosys, see the
constants); the int8 stage keeps the linear ``DOT_LUT_*`` estimate. The RTL op library builds
every lane kind in the dense unit (``rtl/dense.v.j2``) and the conv window unit
(``rtl/window.v.j2``), both from ``rtl/lanes.v.j2`` (a grouped conv's packed lanes one a
multiplier, ``Conv2d.mac_dsps``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cache
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np

from fpgaplace.board.model import BRAM36_BYTES, core_family
from fpgaplace.hw import threshold
from fpgaplace.hw.geometry import Fill, Folding, Geometry, Resources, RtlUnit, Unsupported
from fpgaplace.hw.memory import (
    LUTRAM_MAX_DEPTH,
    ecp5_memory,
    ecp5_rom,
    memory_blocks,
    rom_columns,
    rom_luts,
    uram_blocks,
)
from fpgaplace.model.ir import Op, TensorInfo
from fpgaplace.util.errors import FpgaplaceError

if TYPE_CHECKING:
    from fpgaplace.board.model import FpgaCore
    from fpgaplace.hw.lowering import Layer, LayerContext
    from fpgaplace.model.ir import OpGraph


# LUT/FF coefficients (estimates): per MAC lane of a dot-product stage, per lane of a lane
# stage, and a fixed control cost per stage.
DOT_LUT_PER_LANE, DOT_FF_PER_LANE, DOT_LUT_BASE, DOT_FF_BASE = 16, 24, 250, 300


LANE_LUT_PER_PE, LANE_FF_PER_PE, LANE_LUT_BASE, LANE_FF_BASE = 40, 48, 150, 200


LUTS_PER_LANE_BUDGET = 64  # LUTs one lane of a lane kernel is taken to need, for its budget share


MAX_LINE_WIDTH = 256  # int8 elements a line buffer takes in per cycle


CHANNEL_WORD_BITS = 72  # bias (32) + multiplier (32) + shift (8) per output channel


PRECISION_BITS = (1, 2, 4, 8, 16, 32)  # element widths the op library counts


# LUTs of a dot-product stage with narrow lanes (``narrow_dot_luts``), refitted after the SIMD adder
# trees became carry chains (``rtl/lanes.v.j2`` adder_tree, in the dense and window units) and the
# requantizer's shift took clog2(V_W) bits: yosys 0.23 ``synth_xilinx -family xc7`` (hierarchical,
# ``fpgaplace.sim.yosys.synthesize``) of 53 dense units on pynq-z2's core: the 15 narrow rows of
# ``scripts/bench_lowbit.py --kernels`` (K x N = 64 x 16 at PE x SIMD 4 x 8, 8 x 8, 4 x 16 and 512 x 64
# at 2 x 8 for w1a1, w2a2, w4a4; packed w4a4 at 48 x 12, 3 x 8 and 6 x 8; packed w2a2 at 64 x 14, 7 x 8),
# w1a2, w1a4, w1a8 and w2a4 at 64 x 16, 4 x 8, four threshold units (64 x 16 at 4 x 8: w1a1 T = 2, w2a2
# T = 3, w4a4 unsigned T = 15; 32 x 16 at 1 x 32: w1a1 T = 2; ``rtl_cases.threshold_dense_case``) and
# the 15 dense layers of ``--compiled`` (``zoo.qonnx_mlp`` w2a2, w4a4u, w1a2, w1a1, w2a2-bn) twice: as
# compile folded them under the old price (PE x SIMD 4 x 16, 1 x 32, 1 x 8) and under this one without
# the per-result term (PE up to 32 at SIMD 2: 15 to 38 % over the estimate, which is why it is here).
# ``REQUANT_LUTS`` and ``threshold.LUTS_PER_COMPARE_BIT`` are measured from their modules' own stat
# blocks; the shallow channel ROM and threshold table are priced as synthesis builds them
# (``memory.rom_luts``); the fixed part, the lane costs, the per-result-bit cost and
# ``threshold.FREED_REQUANT_LUTS`` are least squares of the relative error over the 53 (a lane pair
# seen in one row is fitted exactly). Within 18.4 % of yosys on all 53 (the worst: the 512 x 64 units
# at 2 x 8, 16 to 18 % under), rms 6.8 %; the compiled layers, folded again under this price, within
# 5.6 % (before the refit: 2 to 63 % over). The fixed part came out near zero: the unit's control
# grows with its lanes and results and is held by their costs. DSP lanes of narrow weights by 8-bit
# inputs (a QONNX model's first layer) are fitted with the window unit's logic and the line buffer's
# copies over 66 window units, 14 of them first layers (``window.WINDOW_LUT_PER_CONTROL_BIT``): fitted
# before to compiled layers whose DSPs synthesis had swept away (``rtl/lanes.v.j2`` adder_tree's
# keep_first), they were 7.0 and 8.0; to the first layers alone, with a term per read lane, 4.6 and 5.5.
# ``scripts/bench_lowbit.py --kernels`` and ``--compiled`` rerun the comparison.
NARROW_LUT_BASE = 6.3  # counters, credits, output FIFO beyond what grows with the lanes
NARROW_LUT_PER_RESULT_BIT = 2.1  # a result's accumulator and its path to the output, per bit of its dot product
REQUANT_LUTS = {1: 380.0, 2: 450.0}  # one fp_requant_var by its cycles a result (one: 360 to 417; two: 427 to 479)
LANE_LUTS: dict[Any, float] = {  # per MAC lane, its adder tree share included (a 1-bit weight's: its own part)
    "xnor": 0.0,
    ("lut", 1, 2): 4.3, ("lut", 1, 4): 7.8, ("lut", 1, 8): 9.0,
    ("lut", 2, 2): 7.6, ("lut", 2, 4): 17.3, ("lut", 4, 4): 30.0,
    ("dsp", 2, 2): 12.3, ("dsp", 4, 4): 15.3, ("dsp", 2, 8): 5.4, ("dsp", 4, 8): 6.2,
}
# A unit whose PE channels are no multiple of the pack leaves a short last group (``unit_lane_luts``):
# on DSP48E2 a 4 x 4 unit at PE 4 packs three channels a DSP and builds the fourth's lone product in
# LUTs (a shift-and-add multiplier). Least squares of the relative error over 16 packed w4a4 window
# units on kv260 (yosys 0.23 synth_xilinx -family xcup; ``scripts/bench_lowbit.py --convs --spans
# --turns --board kv260`` and units at PE 2 to 8), the packed lanes kept at the dense fit's 15.3: a lone
# product 35 LUTs, 1.17 of a (4, 4) LUT lane. The PE 4 units were 15 to 23 % under at 15.3 a lane, and
# are within 8 % now; all 16 within 16 %, rms 7.4 %. A short group on a DSP (a pair of the three) has
# fewer fields to take apart: its lanes cost ``SHORT_GROUP_LANE_SHARE`` of a packed lane. At a whole
# packed lane the MobileNetV1 w4a4's pointwise layers at PE 2 on zcu104 were 1.20 to 1.33 of yosys and
# pointwise units at PE 2 on zcu104 up to 1.43 (64 -> 128 channels at 2 x 64). Least squares of the
# relative error over 31 rows with a pair (kv260 window units at PE 2, 5 and 8; zcu104 pointwise units
# at PE 2 and 8, 8 to 128 output channels; the packed layers of the MobileNetV1 w4a4 on zcu104 and
# kv260 and of the CNV w4a4 on kv260): 0.77 to 1.22, rms 18 -> 9.8 %. The CNV's conv_7 on kv260 (2 x 192
# x 3, its SIMD spanning window positions) is the one under: about even at a whole lane, 0.77 now.
LONE_PRODUCT_SHARE = 1.17
SHORT_GROUP_LANE_SHARE = 0.60
# A lane of a 1-bit (+-1) weight passes or negates its input, and synthesis shares between the PE
# channels that read one input (``input_sharing``) what depends on the input alone: such a lane costs
# its own part (``LANE_LUTS``) and this over the square root of the channels sharing the input
# (``lane_luts``). The form is the one that fitted: over the channels themselves it fits the units as
# well but takes a lane at PE 1 a third dearer than the dense layers at PE 1 show (the CNV w1a2's
# 256 x 512 at 1 x 32, 1.29 of yosys). Least squares of the relative error, yosys 0.23 xc7 and xcup,
# over the 1-bit rows of the window units above (PE 1 to 8), 26 units at PE 2 to 64 (``(5, 16, COUT,
# 3)`` frames of 16 channels at SIMD 16, w1a1, w1a2, w1a4; 3 x 3 x 3 first layers at SIMD 27, w1a8)
# and the dense rows of ``--kernels``. With one cost a lane (8.0 LUTs for w1a2), units at PE 32 and 64
# were 1.28 to 1.59 of yosys, and the zcu104 CNV w1a2's conv_7 (PE 64) 1.41 and its first layer (PE
# 16) 1.30. Now the 39 unit rows of 1-bit weights by wider inputs are within 16 % (rms: w1a2 16 -> 7.6
# %, w1a4 2.6 %, w1a8 7.1 %), and the 1-bit layers of the CNV w1a2 on kv260 and zcu104, folded at this
# price, within 21 % (the worst the zcu104 first layer, w1a8 at PE 64: beyond the units' PE 32). Binary lanes fall
# with PE too, though they negate nothing (2.1 to 3.8 LUTs a lane at PE 16 to 64 and SIMD 16, 8.4 to
# 13.5 at PE 1 and 2), but grow with the SIMD their popcount sums: a lane has no own part and
# ``XNOR_LUTS_PER_TREE_LEVEL`` a level of its tree (log2 SIMD). Fitted, a = 0, to the 36 binary unit
# rows and the 13 binary layers of the CNV w1a1 on kv260 and pynq-z2 (at SIMD 12 to 64): with the
# shared part alone the kv260 CNV's conv_7 and conv_16 (64 x 64 x 2, 64 x 48 x 2) were 0.62 and 0.63
# of yosys and the network 0.69; now the 49 are within 0.79 to 1.24 (rms 10 %), the worst the kv260
# CNV's dense layers at PE 4 (1.24, 1.18), a block-RAM ROM's. A dense unit's binary lane by a
# block-RAM weight ROM takes ``dense.DENSE_XNOR_LANE_SHARE`` of this price; with it, and the CNV
# w1a1's bipolar stages at one threshold a channel (``threshold.merged_steps``), the 52 rows (three
# more dense ones) are within 0.78 to 1.16, rms 9.6 %; both terms fitted again gave rms 9.1 %.
# A w2a2 LUT lane shares in the same way: at one cost a lane (11.5) the window units at PE 16 and 32
# were 1.12 to 1.21 of yosys and the zcu104 CNV w2a2's conv_25 (256 -> 256 at 16 x 9 x 1) 1.27. Least
# squares of the relative error over 77 rows, yosys 0.23 xc7 and xcup: 36 window units 64 -> 64 to
# 256 -> 256 on 3 x 3 to 8 x 8 frames at PE 1 to 32 and SIMD 8 to 144, the 36 w2a2 rows of the unit
# sets above on pynq-z2 and zcu104 and the five w2a2 dense rows of ``--kernels``: rms 10.2 -> 6.7 %,
# 0.78 to 1.21 -> 0.82 to 1.14 (a term in log2 SIMD, the adder tree's depth, fitted worse: 8.2 %).
SHARED_LANE_LUTS: dict[Any, float] = {"xnor": 4.6, ("lut", 1, 2): 5.8, ("lut", 1, 4): 10.7, ("lut", 1, 8): 17.0,
                                      ("lut", 2, 2): 6.6}
XNOR_LUTS_PER_TREE_LEVEL = 0.54
# an unmeasured pair: its product bits at (4, 4)'s rate
LANE_LUT_PER_PRODUCT_BIT = {kind: LANE_LUTS[(kind, 4, 4)] / 8 for kind in ("lut", "dsp")}

# int8 products of a narrow operand (2- to 4-bit weights by 8-bit inputs, or the reverse: a QONNX
# model's first layer, a classifier on 8-bit codes) take LUTs their lanes' price
# (``LANE_LUTS[("dsp", 4, 8)]``, fitted at one pixel a cycle) does not hold. On a DSP48E2, paired two
# to a multiplier (WP486) or not, yosys 0.23 synth_xilinx -family xcup keeps wider sums in the fabric
# (a dense unit at PE x SIMD 1 x 16, w4a8: 74 CARRY4 and 550 FFs against 42 and 358 on xc7, the DSPs
# equal): ``WIDE_DSP_NARROW_PRODUCT_LUTS`` a lane. On any family, a window unit computing MMV pixels
# at once takes ``EXTRA_PIXEL_LUTS`` and ``EXTRA_PIXEL_LUT_PER_LANE`` a lane of each pixel beyond the
# first: the CNV w2a2's first layer on pynq-z2 (w2a8 at 1 x 9 x 5) was 0.71 of yosys, and units of it
# at MMV 1, 3, 5 on xc7 0.89, 0.76, 0.69. Least squares of the relative error over 31 units: 22 first
# layers on xc7 (3 -> 16 to 64 channels, 8 to 32 pixel frames, w2a8 and w4a8, PE x SIMD x MMV 1 to 8 x
# 3 to 27 x 1 to 5), five on kv260's core (w4a8 at 2 x 9 x 1 to 3 and 1 x 9 x 1, w2a8 at 1 x 27 x 1)
# and four dense units on kv260's (64 x 16: w2a8 and w4a8 at 4 x 8, w4a8 at 2 x 16 and 1 x 16).
# Before: 0.63 to 1.08 of yosys; now 0.83 to 1.08.
WIDE_DSP_NARROW_PRODUCT_LUTS = 16.3
EXTRA_PIXEL_LUTS = 118.0
EXTRA_PIXEL_LUT_PER_LANE = 2.0


# FFs of a dot-product stage with narrow lanes (``narrow_dot_ffs``): the RTL units' pipeline registers
# bit for bit, as yosys 0.23 ``synth_xilinx`` keeps them (its FFs grouped by the register they drive):
# each lane's product (``s3_product`` / ``s2_product``; a one-product DSP keeps it inside), the weight
# word a stage (``s1_w``, ``s2_w``: the distinct bit columns of the ROM, ``memory.rom_columns``; none
# where block RAM's own output register holds it, or a one-product DSP's input register), the dot
# products a stage (the dense unit's sum, accumulator and result, the window unit's sum and
# accumulator), the inputs (the dense unit's SIMD elements, the window unit's read lanes' in-frame
# flags), a requantizer's registers and the channel ROM's word (a threshold stage's table:
# ``threshold.stage_resources``). The fixed parts (counters, coordinates, flags, addresses, the
# output's words and FIFO pointers) are least squares of the relative error over 68 units: the narrow
# rows of ``scripts/bench_lowbit.py --kernels`` (19 dense units) and its 49 window units (``--convs
# --spans --turns --firsts``): within 57 % of yosys, rms 13.5 %; the worst are over-priced units of a
# 2-word weight ROM, whose products synthesis shares where a lane's two weights are equal. The int8
# fit (``DOT_FF_PER_LANE``: 24 a lane) took 0.97 to 16 times yosys' FFs on them, and bound the CNV
# w1a1 on kv260 (176,596 of 177,792 FFs; yosys 22,822 for its layers, this model 21,473).
NARROW_FF_BASE = 79  # a dense unit's counters, flags and output FIFO
REQUANT_FFS = 111  # one requantization unit's registers (its product, rounded value and shift)


REQUANT_M_SPLIT = 17  # a requantizer multiplies the dot product by m (31 bits) in two parts split at bit 17


def check_bits(bits: int, what: str = "precision") -> int:
    """``bits`` if the op library counts that element width, else a one-line error."""
    if bits not in PRECISION_BITS:
        raise FpgaplaceError(f"{what}: expected one of {', '.join(map(str, PRECISION_BITS))} bits, got {bits!r}")
    return bits


def with_precision(g: Geometry, weight_bits: int = 8, activation_bits: int = 8) -> Geometry:
    """``g`` with weights of ``weight_bits`` and activations of ``activation_bits`` bits (1, 2, 4,
    8, 16 or 32); cycles stay, bytes and DSPs follow (see the module docstring)."""
    return replace(g, weight_bits=check_bits(weight_bits, "weight_bits"),
                   activation_bits=check_bits(activation_bits, "activation_bits"))


def bits_to_bytes(elements: int, bits: int) -> int:
    """Bytes of ``elements`` packed at ``bits`` each (a last partial byte counts whole)."""
    return math.ceil(elements * bits / 8)


def macs_per_dsp(core: FpgaCore, bits: int = 8) -> float:
    """MACs one DSP takes a cycle at a lane width of ``bits`` (0 for binary lanes, which take
    LUTs); the packing assumed and its sources are in the module docstring."""
    check_bits(bits)
    if bits <= 4:
        lanes = lane_choice(core, bits, bits)
        return float(lanes.pack) if lanes.kind == "dsp" else 0.0
    return {8: float(core.macs_per_dsp), 16: 1.0, 32: 0.25}[bits]


def dsp_a_bits(core: FpgaCore | None) -> int:
    """A-port width of the core's hard multiplier, by its family (``fpgaplace.board.model.FAMILIES``):
    27 on a DSP48E2, 25 on a DSP48E1 (also when no core is given), 18 on an ECP5 MULT18X18D."""
    return core_family(core).a_bits


DSP_B_BITS = 18  # the B port of every family's multiplier (DSP48E1, DSP48E2, MULT18X18D)


def product_dsps(a_bits: int, b_bits: int, core: FpgaCore | None, top: bool = True) -> int:
    """DSPs of a signed ``a_bits`` x ``b_bits`` product as yosys' ``mul2dsp.v`` splits it: the top
    product puts its wider operand on A; an A wider than the port splits into ``n`` pieces of
    ``a_partial_bits - sign_headroom`` bits and a last piece of the rest, else a B wider than
    ``DSP_B_BITS`` likewise, and each piece is split again without the swap; a piece narrower than
    ``min_a_bits`` on either side is an AND in LUTs, no DSP. O(pieces)."""
    family = core_family(core)
    if top and a_bits < b_bits:
        a_bits, b_bits = b_bits, a_bits
    step = family.a_partial_bits - family.sign_headroom
    if a_bits > family.a_bits:
        n = (a_bits - family.a_bits + step - 1) // step
        return n * product_dsps(step + family.sign_headroom, b_bits, core, False) + \
            product_dsps(a_bits - n * step, b_bits, core, False)
    if b_bits > DSP_B_BITS:
        n = (b_bits - DSP_B_BITS + step - 1) // step
        return n * product_dsps(a_bits, step + family.sign_headroom, core, False) + \
            product_dsps(a_bits, b_bits - n * step, core, False)
    return 1 if min(a_bits, b_bits) >= family.min_a_bits else 0


def multiplier_dsps(a_bits: int, core: FpgaCore | None) -> int:
    """DSPs of one product of an ``a_bits``-bit signed operand by at most 18 bits (``product_dsps``
    with the narrow operand on B, as every requantizer and lane here has it)."""
    return product_dsps(a_bits, DSP_B_BITS, core, top=False)


def dot_bits(reduction: int, weight_bits: int = 8, activation_bits: int = 8) -> int:
    """Signed bits of a dot product of ``reduction`` products (zero point folded into the bias, so
    each factor is a signed value of its width): holds ``reduction * 2**(wb-1) * 2**(ab-1)``."""
    magnitude = reduction * 2 ** (weight_bits - 1) * 2 ** (activation_bits - 1)
    return magnitude.bit_length() + 1


def requantizer_dsps(reduction: int, core: FpgaCore | None, g: Geometry | None = None, cycles: int = 1) -> int:
    """DSPs of one requantization unit of a dot-product stage: ``v = dot * m + bias * m`` with
    ``bias * m`` precomputed, ``m`` (31 bits) in two parts split at bit ``REQUANT_M_SPLIT`` (14 and 17
    bits, each within the 18-bit B port), the dot product on the A port (RTL ``fp_requant_var``):
    both parts at once in a one-cycle unit, one after the other on one multiplier in a two-cycle
    unit (``requantize_plan``)."""
    width = dot_bits(reduction, *((g.weight_bits, g.activation_bits) if g is not None else (8, 8)))
    return (2 // cycles) * multiplier_dsps(width, core)


XILINX_DSP_Y_MIN_BITS = 9  # synth_xilinx's mul2dsp -D DSP_Y_MINWIDTH=9: a narrower product stays in LUTs


INT8_FIELD_BITS = 18  # two int8 products share a DSP48E2 18 bits apart (WP486)


DEFAULT_LANE_BUDGET = (53200, 220)  # (LUTs, DSPs) lanes are weighed against when no core is given (an xc7z020)


@dataclass(frozen=True)
class Lanes:
    """How a dot-product stage builds its MAC lanes of ``weight_bits`` x ``activation_bits``
    (``lane_choice``): ``kind`` ``"dsp"`` (``pack`` products of channels sharing the input in one
    multiplier, their weights ``field`` bits apart), ``"lut"`` (a shift-and-add product in LUTs,
    a 1-bit operand +-1) or ``"xnor"`` (both operands +-1: an XNOR into a popcount)."""

    kind: str
    weight_bits: int
    activation_bits: int
    pack: int = 1
    field: int = INT8_FIELD_BITS

    @property
    def product_bits(self) -> int:
        """Bits of one lane's product (1 for an XNOR lane: its agreement bit)."""
        return 1 if self.kind == "xnor" else self.weight_bits + self.activation_bits

    def group_a_bits(self, count: int) -> int:
        """Bits of ``count`` packed weights on the multiplier's wide port: the top weight's field
        and a bit for the carry the fields below it may add (``-8 * 2**16 - 8`` needs 21 bits)."""
        return (count - 1) * self.field + self.weight_bits + (count > 1)


def narrow_pack(core: FpgaCore | None, weight_bits: int, activation_bits: int) -> int:
    """Products of ``weight_bits`` x ``activation_bits`` one multiplier of the core's family takes
    when channels sharing the input put their weights ``weight_bits + activation_bits`` bits apart
    on its A port (the product of each fits its field; ``Lanes.group_a_bits``):
    ``(A - wb - 1) // (wb + ab) + 1``, so 3 int4 MACs on a DSP48E2 or DSP48E1 and 2 on an ECP5
    MULT18X18D; 7 / 6 / 4 at 2 bits. (Xilinx WP521 reaches four int4 MACs on a DSP48E2 by packing
    two inputs as well; a dense stage has one input vector.)"""
    return (dsp_a_bits(core) - weight_bits - 1) // (weight_bits + activation_bits) + 1


def group_dsps(lanes: Lanes, count: int, core: FpgaCore | None) -> int:
    """DSPs yosys maps the product of ``count`` packed weights by one input to: ``product_dsps``,
    except that synth_xilinx leaves a product of fewer than ``XILINX_DSP_Y_MIN_BITS`` bits in LUTs
    (a lone 4 x 4 product; synth_ecp5 maps any product of 2 x 2 bits or more)."""
    a_bits = lanes.group_a_bits(count)
    if core_family(core).name != "ecp5" and a_bits + lanes.activation_bits < XILINX_DSP_Y_MIN_BITS:
        return 0
    return product_dsps(a_bits, lanes.activation_bits, core)


def packed_dsps(lanes: Lanes, channels: int, core: FpgaCore | None) -> int:
    """DSPs of ``channels`` packed lanes sharing one input: groups of ``lanes.pack`` and a last
    short group (``group_dsps`` each), as the RTL groups them."""
    full, rest = divmod(channels, lanes.pack)
    return full * group_dsps(lanes, lanes.pack, core) + (group_dsps(lanes, rest, core) if rest else 0)


def lane_share(lanes: Lanes, core: FpgaCore | None, sharing: int = 1) -> float:
    """The largest share of the core's LUTs or DSPs one MAC lane of ``lanes`` takes where ``sharing``
    channels read each input: a packed lane its ``group_dsps`` over its pack and ``lane_luts`` (its
    field extraction), a LUT lane its ``lane_luts``. The lanes a core holds side by side are its
    budget over this share, so the lanes with the least share are the most a core can hold
    (``DEFAULT_LANE_BUDGET`` without a core). O(1)."""
    luts, dsps = (core.lut, core.dsp) if core is not None else DEFAULT_LANE_BUDGET
    dsp = group_dsps(lanes, lanes.pack, core) / lanes.pack if lanes.kind == "dsp" else 0.0
    lut_share = lane_luts(lanes, sharing) / luts if luts else math.inf
    return max(lut_share, (dsp / dsps if dsps else math.inf) if dsp else 0.0)


NARROW_LANE_KINDS = ("dsp", "lut")  # how 2-4-bit lanes may be built (``FpgaCore.narrow_lanes``)


def open_lane_choice(weight_bits: int, activation_bits: int) -> bool:
    """Whether lanes of these widths may go either way, packed into DSPs or on LUTs (2 to 4 bits
    both; ``lane_choice``). O(1)."""
    return min(weight_bits, activation_bits) >= 2 and max(weight_bits, activation_bits) < 8


def lane_choice(core: FpgaCore | None, weight_bits: int = 8, activation_bits: int = 8) -> Lanes:
    """The one decision how a dot product's lanes are built (cost model, codegen and report read
    it): +-1 by +-1 an XNOR; a +-1 operand with a wider one a LUT lane; 8 bits or more the int8
    DSP rule (``macs_per_dsp``); 2 to 4 bits both, packed in DSPs (``narrow_pack``) or LUT lanes,
    whichever takes the smaller share of the core's scarcer budget (``lane_share``), so that more
    of them fit: a core rich in DSPs packs them, one rich in LUTs keeps them in LUTs (a DSP-poor
    Zynq-7020 core: a third of one of its 88 DSPs is the larger share against 37 of its 19,680
    LUTs). A rate of exchange between the two (LUTs per DSP) chose LUTs on a KV260 whose LUTs bound
    a MobileNetV1 w4a4 while 93 % of its DSPs were idle. A core may say which instead
    (``FpgaCore.narrow_lanes``: compile folds a core each way where the layers' other LUTs make the
    other kind faster, ``codegen.lower.lane_cores``). O(1)."""
    if weight_bits == activation_bits == 1:
        return Lanes("xnor", 1, 1)
    if min(weight_bits, activation_bits) == 1:
        return Lanes("lut", weight_bits, activation_bits)
    if not open_lane_choice(weight_bits, activation_bits):
        pack = core.macs_per_dsp if core is not None and max(weight_bits, activation_bits) == 8 else 1
        return Lanes("dsp", weight_bits, activation_bits, pack)
    packed = Lanes("dsp", weight_bits, activation_bits, narrow_pack(core, weight_bits, activation_bits),
                   weight_bits + activation_bits)
    on_luts = Lanes("lut", weight_bits, activation_bits)
    if core is not None and core.narrow_lanes:  # the kind compile chose for this core's folding
        return packed if core.narrow_lanes == "dsp" else on_luts
    # LUT lanes at the channels a packed group shares: only where that many read an input is there a choice
    return packed if lane_share(packed, core) < lane_share(on_luts, core, packed.pack) else on_luts


def unit_lanes(core: FpgaCore | None, weight_bits: int, activation_bits: int, sharing: int) -> Lanes:
    """The lanes a dot-product unit builds where ``sharing`` channels read each input (a dense
    unit's or an ungrouped window's PE; 1 in a grouped conv, each channel its own input):
    ``lane_choice``'s, but LUT lanes where it packs narrow lanes into DSPs and no group of
    ``sharing`` maps to one (``packed_dsps``: synth_xilinx leaves a product below
    ``XILINX_DSP_Y_MIN_BITS`` in LUTs, so a lone 4 x 4 product is a LUT multiplier either way; the
    CNV w4a4's conv_7 on kv260 at PE 1 took 60,882 LUTs in yosys 0.23, priced 36,553 at the packed
    lanes' LUTs, ``LANE_LUTS[("dsp", 4, 4)]``). O(1)."""
    lanes = lane_choice(core, weight_bits, activation_bits)
    if lanes.kind == "dsp" and min(weight_bits, activation_bits) < 8 and not packed_dsps(lanes, sharing, core):
        return Lanes("lut", weight_bits, activation_bits)
    return lanes


def channel_rom_bits(g: Geometry, fold: Folding) -> int:
    """Bits of one word of a dot product's channel ROM in the RTL units, PE channels a word: the
    requantizers' words, or behind a threshold stage (``shape["T"]``) its thresholds at the dot
    product's width and one bit more (``threshold.rom_word_bits``), the only ROM that stage reads
    (on ECP5 it was priced as both, the table through ``memory_blocks`` as well). O(1)."""
    count = int(g.shape.get("T", 0))
    if count:
        return threshold.rom_word_bits(fold.pe, count, dot_bits(g.reduction, g.weight_bits, g.activation_bits))
    return CHANNEL_WORD_BITS * fold.pe


def threshold_table_apart(core: FpgaCore | None) -> bool:
    """Whether a threshold stage's table is priced apart from the dot product's memories
    (``threshold.stage_resources``): on a family built from HLS, its own array; on one built from
    the RTL op library the table is the unit's channel ROM (``channel_rom_bits``), mapped with its
    other ROMs (``Kernel._rtl_memory``). O(1)."""
    return not core_family(core).rtl_built


def lane_luts(lanes: Lanes, sharing: int = 1, simd: int = 1) -> float:
    """LUTs one MAC lane takes with its share of the adder tree, in a unit whose ``sharing``
    channels read each input and whose dot products sum ``simd`` lanes: measured per kind and width
    pair (``LANE_LUTS``), a lane of a 1-bit weight or of 2 x 2 bits with its share of what those channels share
    (``SHARED_LANE_LUTS`` over the square root of ``sharing``) and a binary lane its popcount tree's
    levels (``XNOR_LUTS_PER_TREE_LEVEL``), else per product bit (``LANE_LUT_PER_PRODUCT_BIT``). O(1)."""
    key = lane_key(lanes)
    if key not in SHARED_LANE_LUTS:
        return LANE_LUTS.get(key, LANE_LUT_PER_PRODUCT_BIT[lanes.kind] * lanes.product_bits)
    tree = XNOR_LUTS_PER_TREE_LEVEL * math.log2(max(1, simd)) if key == "xnor" else 0.0
    return LANE_LUTS[key] + SHARED_LANE_LUTS[key] / math.sqrt(max(1, sharing)) + tree


def lane_key(lanes: Lanes) -> Any:
    """The key of ``lanes`` in ``LANE_LUTS``: ``"xnor"``, else (kind, narrower, wider bits). O(1)."""
    if lanes.kind == "xnor":
        return "xnor"
    narrow, wide = sorted((lanes.weight_bits, lanes.activation_bits))
    return (lanes.kind, narrow, wide)


def unit_lane_luts(lanes: Lanes, sharing: int, core: FpgaCore | None, simd: int = 1) -> float:
    """LUTs a MAC lane takes on average in a unit whose ``sharing`` channels read each input and
    whose dot products sum ``simd`` lanes:
    ``lane_luts``, but where packed lanes leave a short last group (``packed_dsps``: ``sharing``
    no multiple of the pack), its lanes at what that group costs. A group synthesis leaves in LUTs
    (``group_dsps`` 0: a lone 4 x 4 product, a shift-and-add multiplier) costs
    ``LONE_PRODUCT_SHARE`` of a LUT lane of its widths; a group on a DSP ``SHORT_GROUP_LANE_SHARE``
    of a packed lane's each.
    Fitted to yosys: see the constant. O(1)."""
    per_lane = lane_luts(lanes, sharing, simd)
    full, rest = divmod(sharing, lanes.pack)
    if lanes.kind != "dsp" or not rest:
        return per_lane
    if group_dsps(lanes, rest, core):  # a short group on a DSP: fewer fields to take apart
        return (full * lanes.pack + rest * SHORT_GROUP_LANE_SHARE) * per_lane / sharing
    lone = LONE_PRODUCT_SHARE * lane_luts(Lanes("lut", lanes.weight_bits, lanes.activation_bits))
    return (full * lanes.pack * per_lane + rest * lone) / sharing


def narrow_lanes(g: Geometry, core: FpgaCore | None) -> bool:
    """Whether a dot product's LUTs follow ``narrow_dot_luts`` (binary, LUT or packed narrow
    lanes, and DSP lanes with an operand below 8 bits: the RTL dense unit's lanes at their widths),
    not the int8 DSP lanes' fit (``DOT_LUT_BASE``, ``DOT_LUT_PER_LANE``)."""
    narrow = min(g.weight_bits, g.activation_bits) < 8
    return narrow or lane_choice(core, g.weight_bits, g.activation_bits).kind != "dsp"


def narrow_dot_luts(g: Geometry, fold: Folding, lane_cost: float, units: int | None = None) -> float:
    """LUTs of a dot-product stage with narrow or binary lanes (a 1-bit operand, both at most 4
    bits, or DSP lanes of one operand below 8 bits) but its weight ROM (``Kernel._memory``):
    ``NARROW_LUT_BASE``, ``lane_cost`` per MAC lane (``unit_lane_luts`` times the kernel's
    ``lane_scale``: a window unit whose SIMD spans window positions), ``NARROW_LUT_PER_RESULT_BIT`` per bit of each
    result it finishes at once (PE x MMV dot products), ``REQUANT_LUTS`` per requantization unit by
    its cycles a result (``units``, by default ``requantize_plan``'s; none behind a threshold
    stage) and their channel ROM (``channel_rom_luts``) (fitted to yosys: see the constants). O(1)."""
    results = fold.pe * fold.mmv
    planned, cycles = requantize_plan(results, g.reduction // fold.simd)
    units = planned if units is None else units
    accumulators = results * dot_bits(g.reduction, g.weight_bits, g.activation_bits) * NARROW_LUT_PER_RESULT_BIT
    return (NARROW_LUT_BASE + fold.lanes * lane_cost + accumulators + units * REQUANT_LUTS[cycles]
            + channel_rom_luts(g, fold))


def narrow_dot_ffs(g: Geometry, fold: Folding, lanes: Lanes, weight_bits: int, sum_stages: int, input_bits: int,
                   requantizers: int) -> int:
    """FFs of a narrow-lane dot-product stage's pipeline registers but the fixed part
    (``Kernel.narrow_ffs``): each lane's product (but a one-product DSP's, held inside it), the
    ``weight_bits`` registered, ``sum_stages`` registers of each of the PE x MMV dot products,
    the ``input_bits``, ``REQUANT_FFS`` a requantizer and the channel ROM's word where it is
    logic (``memory.rom_columns``; a threshold stage's table: ``threshold.stage_resources``).
    Fitted to yosys: see ``NARROW_FF_BASE``. O(1)."""
    products = 0 if lanes.kind == "dsp" and lanes.pack == 1 else fold.lanes * lanes.product_bits
    sums = sum_stages * fold.pe * fold.mmv * dot_bits(g.reduction, g.weight_bits, g.activation_bits)
    depth = math.ceil(g.channels / fold.pe)
    channel = 0 if g.shape.get("T") or depth > LUTRAM_MAX_DEPTH else rom_columns(fold.pe * CHANNEL_WORD_BITS, depth)
    return products + weight_bits + sums + input_bits + requantizers * REQUANT_FFS + channel


def channel_rom_luts(g: Geometry, fold: Folding) -> int:
    """LUTs of the requantizers' channel ROM (PE channels' ``CHANNEL_WORD_BITS`` a word, one word an
    output fold) where it is shallow, as synthesis builds it (``memory.rom_luts``); none behind a
    threshold stage (its table is priced by ``threshold.stage_resources``) or in block RAM. O(1)."""
    depth = math.ceil(g.channels / fold.pe)
    if g.shape.get("T") or depth > LUTRAM_MAX_DEPTH:
        return 0
    return rom_luts(fold.pe * CHANNEL_WORD_BITS, depth)


def narrow_weight_rom(width_bits: int, depth: int, uram: bool = False) -> tuple[int, int, int]:
    """(BRAM36, URAM, LUT) of a narrow-weight ROM (PE x SIMD packed weights a word): in block RAM
    as ``memory_blocks`` has it, in LUTs where shallow as synthesis builds a constant ROM
    (``memory.rom_luts``: no more LUTs than its distinct bit columns; a 1 x 1 conv's 4-word ROM of
    128 bits took 14, not 128, in yosys 0.23 ``synth_xilinx``). O(1)."""
    blocks = memory_blocks(width_bits, depth, uram)
    return (*blocks[:2], rom_luts(width_bits, depth)) if blocks[2] else blocks


def cycles_to_us(cycles: float, core: FpgaCore) -> float:
    """The one conversion from cycles to microseconds: ``clock_mhz`` cycles per microsecond."""
    return cycles / core.clock_mhz


STAGE_DELAY = 2  # cycles a stage's registered output and the two-beat FIFO behind it add to a beat's way


def unit_fill(cycles: float, units: int, read: float, first: float, tail: float) -> Fill:
    """The fill of a stage that takes a sample in ``units`` equal parts (rows, heads, pixels), each
    read whole (``read`` cycles at its own pace; the rest of its part's cycles follow the read)
    before its outputs: the first leaves ``first`` cycles after the first part is in, the last
    ``tail`` cycles after the last part is in (each plus ``STAGE_DELAY``)."""
    per_unit = cycles / max(1, units)
    return Fill(needs=1 / max(1, units), lead=read, reading=cycles - max(0.0, per_unit - read),
                first=first + STAGE_DELAY, work=max(cycles - read, tail) + STAGE_DELAY, tail=tail + STAGE_DELAY)


def window_fill(shape: dict[str, int], window_rows: int, cycles: int, row_beats: int, row_cycles: int,
                first: int, samples: int = 1) -> Fill:
    """The fill of a line-buffered stage (``sliding_cycles``) over ``samples`` frames a run: it
    waits for the input rows its first output row reads (``window_rows`` less the top padding, of
    ``H``; ``row_beats`` beats each at its own pace), its first output leaves ``first`` cycles
    later and its compute (the rest of ``cycles``) follows; after the last input row only the last
    output row's ``row_cycles`` remain."""
    rows = max(0, min(shape["H"], window_rows - shape["PT"]))
    return Fill(needs=rows / (shape["H"] * max(1, samples)), lead=rows * row_beats,
                reading=max(0, cycles - row_cycles), first=first + STAGE_DELAY,
                work=cycles - rows * row_beats + STAGE_DELAY, tail=row_cycles + STAGE_DELAY)


def stage_times(stages: Iterable[tuple[Sequence[str], str, Fill]]) -> dict[str, tuple[float, float]]:
    """(first, last) beat times of every stage's output tensor for one sample through a core's
    dataflow stages (``(input tensors, output tensor, fill)`` in topological order, the core's
    inputs there at cycle 0): each stage starts on its inputs' first beats (``stage_start``) and
    follows them at its own pace (``Fill.outputs``; of several inputs, the latest first and the
    latest last beat count). O(stages + edges)."""
    times: dict[str, tuple[float, float]] = {}
    for inputs, output, fill in stages:
        known = [times[t] for t in inputs if t in times]
        times[output] = fill.outputs(stage_start(inputs, times), max((t[1] for t in known), default=0.0))
    return times


def stage_start(inputs: Sequence[str], times: dict[str, tuple[float, float]]) -> float:
    """When a stage of ``inputs`` starts: the latest of its inputs' first beats (``stage_times``;
    a core input's at cycle 0). O(inputs)."""
    return max((times[t][0] for t in inputs if t in times), default=0.0)


def pipeline_latency(stages: Iterable[tuple[Sequence[str], str, Fill]], outputs: Sequence[str]) -> float:
    """Cycles from a sample's first input beat to its last output beat through a core's dataflow
    stages (``stage_times``): the stages overlap, so the latency is far below the sum of their
    cycles. O(stages + edges)."""
    times = stage_times(stages)
    return max((times[t][1] for t in outputs if t in times), default=0.0)


def dataflow_latency(stages: Iterable[tuple[Sequence[str], str, Fill]] | Iterable[tuple[Sequence[int], int, Fill]],
                     outputs: Sequence, interval: float) -> float:
    """A core's single-sample latency, the one figure ``sim`` (``registry.core_latency``, from the
    folded stages' fills) and the placement's latency objective (``place.solvers.evaluate``, from
    the planned stages' ``paced_fill``) both read: its stages' fills overlapped
    (``pipeline_latency``), and at least its ``interval`` (a sample's input cannot go in faster
    than the slowest stage takes it). O(stages + edges)."""
    return max(interval, pipeline_latency(stages, outputs))


def paced_fill(fill: Fill, cycles: float, interval: float) -> Fill:
    """The fill a stage is planned to have on a core of ``interval``, from ``fill``, its fill at
    the serial folding (``Folding()``, ``cycles`` a sample): the folding gives each stage its
    cheapest folding within the interval (``hw.folding``), so it runs at the interval, or at its
    serial pace where that is already faster, and its fill's times shrink by that ratio
    (``Fill.scaled``; a line buffer still waits for the same share of its input). O(1)."""
    return fill.scaled(min(1.0, interval / cycles)) if cycles > 0 else fill


def sliding_cycles(shape: dict[str, int], window_rows: int, row_beats: int, steps: int) -> int:
    """Iterations per sample of a line-buffered stage (kernels.h ``detail::slide_rows``): the
    input rows output row 0 needs, then per output row the larger of the input beats of the rows
    the next output row needs and the row's ``steps`` compute cycles. O(HO), in numpy."""
    h, pt, sh = shape["H"], shape["PT"], shape["SH"]
    first = max(0, min(h, window_rows - pt))
    tops = np.arange(shape["HO"]) * sh - pt
    wanted = np.minimum(h, tops + sh + window_rows)
    wanted[-1] = h  # the last output row also reads the rows no window covers
    read_before = np.maximum.accumulate(np.concatenate(([first], wanted[:-1])))
    reads = np.maximum(0, wanted - read_before) * row_beats
    return int(first * row_beats + np.maximum(reads, steps).sum())


def requantize_units(results: int, folds: int) -> int:
    """Requantization units a dot-product stage needs: ``results`` accumulators finish every
    ``folds`` cycles and one unit takes one group of them a cycle, so the fewest units dividing
    ``results`` with ``units * folds >= results`` (one when the folds outnumber the results)."""
    return next(units for units in range(1, results + 1) if results % units == 0 and units * folds >= results)


def requantize_plan(results: int, folds: int) -> tuple[int, int]:
    """(units, cycles a result) of a dot-product stage's requantizers. A one-cycle unit multiplies
    both parts of ``m`` at once (two multipliers, ``requantize_units``); a two-cycle unit multiplies
    them one after the other on one multiplier, so ``units`` of them need ``2 * results / units``
    cycles a fold: the fewest units dividing ``results`` with ``units * folds >= 2 * results``.
    Two-cycle units are taken where they need fewer multipliers (``units2 < 2 * units1``: a
    stage whose results finish far apart, e.g. one unit of a long reduction, halves its
    requantizer DSPs); never with one fold. O(results)."""
    single = requantize_units(results, folds)
    if folds < 2:
        return single, 1
    double = next(u for u in range(1, results + 1) if results % u == 0 and u * folds >= 2 * results)
    return (double, 2) if double < 2 * single else (single, 1)


@cache
def fold_widths(n: int) -> tuple[int, ...]:
    """The smallest width giving each possible fold count ``ceil(n / width)`` of ``n`` items:
    one width per distinct count, O(sqrt(n)) of them (a last partial fold is allowed)."""
    return tuple(sorted({math.ceil(n / math.ceil(n / w)) for w in range(1, n + 1)})) if n <= 4096 else divisors(n)


@cache
def divisors(n: int) -> tuple[int, ...]:
    """Divisors of ``n`` in increasing order, O(sqrt(n))."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return tuple(sorted({*small, *(n // d for d in small)}))


def stream_memory(fifos: Iterable[tuple[int, int, bool]], core: FpgaCore | None) -> tuple[int, int, int]:
    """(BRAM36, URAM, LUTRAM LUTs) of FIFOs of ``(width_bits, depth, in_uram)`` as the core's
    family maps them: on a family built from the RTL op library (ECP5, no URAM) ``ecp5_memory``,
    their EBRs summed and then counted two a BRAM36 (a FIFO of one EBR is half a block, not a whole
    one), elsewhere ``memory_blocks`` each, or ``uram_blocks`` where ``in_uram``. O(FIFOs)."""
    fifos = list(fifos)
    if not core_family(core).rtl_built:
        blocks = [(0, uram_blocks(width_bits, depth), 0) if in_uram else memory_blocks(width_bits, depth)
                  for width_bits, depth, in_uram in fifos]
        return (sum(b[0] for b in blocks), sum(b[1] for b in blocks), sum(b[2] for b in blocks))
    ebrs = luts = 0
    for width_bits, depth, _ in fifos:
        e, lut = ecp5_memory(width_bits, depth)
        ebrs, luts = ebrs + e, luts + lut
    return (math.ceil(ebrs / 2), 0, luts)


class Kernel:
    """Base of every kernel; see the module docstring for the cost rules."""

    name: str = ""
    template: str = ""
    uses_dsp: bool = False
    free: bool = False

    def geometry(self, op: Op, graph: OpGraph) -> Geometry | Unsupported:
        raise NotImplementedError

    def foldings(self, g: Geometry) -> list[Folding]:
        if self.free:
            return [Folding()]
        simds = divisors(g.reduction) if self.uses_dsp else (1,)
        memories = (False, True) if g.weights else (False,)
        return [Folding(pe, simd, mmv, uram) for pe in divisors(g.channels) for simd in simds
                for mmv in self.pixel_widths(g, pe) for uram in memories]

    def pixel_widths(self, g: Geometry, pe: int) -> tuple[int, ...]:
        """The MMV values a stage of ``pe`` channels may take: for a conv one per count of pixel
        groups in a row (the last group may be short) whose outputs can leave in time; for a lane
        stage divisors of the row, and only when a beat then holds whole pixels (``pe`` is every
        channel), so that the MMV x PE elements of a cycle are consecutive in stream order."""
        if self.uses_dsp:  # a conv's outputs may leave through a reorder buffer (Conv2d.foldings checks)
            return fold_widths(g.row)
        if pe != g.channels:
            return (1,)
        return tuple(m for m in divisors(g.row) if g.shape.get("W", g.row) % m == 0)

    def lane_bound(self, fold: Folding, core: FpgaCore, g: Geometry | None = None) -> int:
        """DSPs the folding needs at least (a cheap filter before ``resources``; narrow lanes' own
        count, since a short group's product may take none)."""
        if g is not None and g.lane_bits < 8:
            return self.mac_dsps(g, fold, core)
        per_dsp = macs_per_dsp(core, g.lane_bits if g is not None else 8)
        return math.ceil(fold.lanes / per_dsp) if self.uses_dsp and per_dsp else 0

    def cycles(self, g: Geometry, fold: Folding) -> int:
        if self.free:
            return 0
        rows = g.pixels // g.row * math.ceil(g.row / fold.mmv)
        if self.uses_dsp:
            return rows * (g.channels // fold.pe) * (g.reduction // fold.simd)
        return rows * math.ceil(g.stream_elements // g.pixels / fold.pe)

    def ideal_cycles(self, g: Geometry, core: FpgaCore) -> float:
        """The op's share of the core's budget (what it adds to the core's load), at its best: a
        LUT lane at the most channels that can share its input (``lane_luts``). A DSP lane
        costs 1 / macs-per-DSP DSPs plus its part of the requantizers: L lanes finish L /
        reduction results a cycle, one unit of ``requantizer_dsps`` each, so a lane carries
        ``requantizer_dsps / reduction`` of them (a depthwise conv's 9-term dot products pay
        about half again over their MACs; a wide conv's, almost nothing)."""
        if self.free:
            return 0.0
        if self.uses_dsp:
            lanes = lane_choice(core, g.weight_bits, g.activation_bits)
            if lanes.kind != "dsp":  # LUT lanes share the core's LUTs, at best every channel reading each input
                per_lane = lane_luts(lanes, self.input_sharing(g, Folding(pe=g.channels)))
                return g.macs / max(1, core.lut // per_lane) * self.fill_factor(g)
            per_dsp = lanes.pack if g.lane_bits < 8 else macs_per_dsp(core, g.lane_bits)
            dsps_per_lane = 1 / per_dsp + requantizer_dsps(g.reduction, core, g) / max(1, g.reduction)
            return g.macs * dsps_per_lane / core.dsp * self.fill_factor(g)
        return g.stream_elements / max(1, core.lut // LUTS_PER_LANE_BUDGET)

    def fill_factor(self, g: Geometry) -> float:
        """How much longer than its compute a stage runs for refilling buffers it cannot overlap
        (1 but for a line-buffered conv, see ``Conv2d.fill_factor``)."""
        return 1.0

    def fill(self, g: Geometry, fold: Folding) -> Fill:
        """The stage's fill latency (``Fill``): a lane stage streams, its first output a beat after
        its first input and its last a beat after its last; a free op takes no time. Kernels that
        buffer (a line buffer's rows, a dense layer's whole input, a row, a plane) override it."""
        if self.free:
            return Fill()
        cycles = self.cycles(g, fold)
        return Fill(reading=cycles, first=STAGE_DELAY, work=cycles + STAGE_DELAY, tail=STAGE_DELAY)

    def turn_elements(self, layer: Layer) -> int:
        """Elements this stage may leave in front of each input while it reads the others (0: it
        reads its inputs side by side; ``hw.buffers``). O(1)."""
        return 0

    def layer_fill(self, layer: Layer) -> Fill:
        """The fill of one lowered layer (its geometry and folding set): ``fill``, but where an op
        lowers to several layers each with its own part (a Split's slices), that layer's own. O(1)."""
        return self.fill(layer.geometry, layer.folding)

    def reference(self, config: dict, arrays: dict, inputs: list[np.ndarray], rows: int = 1) -> np.ndarray:
        """The bit-exact int8 output of one sample (``fpgaplace.hw.reference``), inputs in stream layout."""
        raise NotImplementedError(f"{self.name} has no integer reference")

    # ---- the integer layer, and what the templates need (``fpgaplace.codegen`` renders them) ----

    def lower(self, ctx: LayerContext, op: Op, shape: dict) -> Layer | list[Layer] | tuple[str, str] | None:
        """The integer layer of ``op`` (config members and arrays) from its QDQ graph (one per
        output for an op of several), an alias (output int8 tensor, input int8 tensor), or None
        when the op is absorbed."""
        raise NotImplementedError(f"{self.name} has no lowering")

    def config_macs(self, config: dict[str, int], rows: int = 1) -> int:
        """MACs of one sample of a lowered layer (0 but for dot products)."""
        return 0

    def stream_widths(self, g: Geometry, fold: Folding, inputs: int) -> tuple[list[int], int]:
        """Elements per beat of each of the stage's ``inputs`` streams and of its output: a lane
        stage moves PE x MMV lanes in and out."""
        lanes = fold.pe * fold.mmv
        return [lanes] * inputs, lanes

    def hls_config(self, config: dict[str, int], g: Geometry, fold: Folding) -> dict[str, int]:
        """The stage's C++ config members (``template``): the layer's shape and quantization plus
        its folding (a lane stage's ``L`` lanes)."""
        return {**config, "L": fold.pe * fold.mmv}

    def output_size(self, config: dict[str, int], arrays: dict[str, np.ndarray], rows: int = 1) -> int:
        """Output elements of one sample."""
        return config["SIZE"]

    def width_members(self, widths: dict[str, Any] | None, arrays: dict[str, Any]) -> dict[str, int]:
        """Config members that give a layer's RTL unit its element widths (``widths``: the layer's
        widths as design.json records them, ``lowering.LayerContext.widths``): none here, the unit
        computes at 8 bits. A kernel whose lanes follow the widths overrides this (``Dense``), and
        the folding prices the layer at them (``priced_geometry``). O(1)."""
        return {}

    def priced_geometry(self, g: Geometry, widths: dict[str, Any] | None, arrays: dict[str, Any]) -> Geometry:
        """``g`` as the layer's units build it, so the folding, the record's resources and the RTL
        agree: at the lane widths of ``width_members`` (8 bits where there are none), and with
        the thresholds per channel its lowered table holds (``shape["T"]``: the codes its channels
        reach, two for a bipolar output, where the graph's count is ``2^bits - 1``)."""
        members = self.width_members(widths, arrays)
        g = with_precision(g, members.get("WB", g.weight_bits), members.get("XB", 8)) if members else g
        table = arrays.get("thresholds")
        return replace(g, shape={**g.shape, "T": int(np.shape(table)[1])}) if table is not None else g

    def rtl(self, config: dict[str, Any], arrays: dict[str, Any], fold: Folding, top: str, model_cycles: int,
            macs_per_dsp: int = 1, core: FpgaCore | None = None) -> RtlUnit:
        """The op's Verilog unit named ``top`` for a layer's ``config`` and ``arrays`` folded as
        ``fold`` (``model_cycles``: the cycles the op library gives it; ``macs_per_dsp``: the
        board's; ``core``: the core it runs on, whose budgets pick a dot product's lanes as the
        cost model does, ``lane_choice``; None where unknown: the default budgets); a
        one-line error for a kernel the RTL op library lacks."""
        raise FpgaplaceError(f"rtl {top}: no RTL template for kernel {self.name!r}")

    def frame_rows(self, config: dict[str, Any]) -> int | None:
        """The output rows a sample of this layer streams, where its RTL takes the frame row by
        row and a frame of fewer rows is the same unit with only its height changed
        (``cut_rows``); None (the default): the layer is simulated whole."""
        return None

    def cut_rows(self, config: dict[str, Any], rows: int) -> dict[str, Any]:
        """The layer's config cut to its first ``rows`` output rows (``frame_rows``), for simulating
        a band of the frame instead of the whole; a one-line error where the kernel has none."""
        raise FpgaplaceError(f"{self.name}: no frame cut (the layer is simulated whole)")

    def probe_layer(self, config: dict[str, Any], arrays: dict[str, Any],
                    fold: Folding) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """A smaller layer (config and arrays) whose RTL at ``fold`` has this layer's DSPs exactly, for
        counting them with yosys in a fraction of the time: the MAC lanes and requantizers depend
        on PE, SIMD, MMV and the dot-product length only, so fewer output channels (down to PE)
        and a smaller frame keep them. None (the default): synthesise the layer itself."""
        return None

    def weight_bytes(self, g: Geometry, precision_bytes: int | None = None, *, bits: int | None = None) -> int:
        """Bytes of the op's weights (on chip when resident, else read from DRAM every run) at
        ``bits`` per element (1, 2, 4, 8, 16, 32), else ``precision_bytes`` whole bytes (the old
        argument), else the geometry's ``weight_bits``; sub-byte weights are packed."""
        if bits is None:
            bits = 8 * precision_bytes if precision_bytes is not None else g.weight_bits
        return bits_to_bytes(g.weights, check_bits(bits, "weight bits"))

    def mac_dsps(self, g: Geometry, fold: Folding, core: FpgaCore | None) -> int:
        """DSPs of the MAC lanes: ``ceil(lanes / macs_per_dsp)`` (none for binary lanes); where a
        DSP takes two int8 MACs, only two lanes sharing an operand share it (``paired_lanes``)."""
        if not self.uses_dsp:
            return 0
        lanes = self.unit_lanes(g, fold, core)
        if lanes.kind != "dsp":
            return 0
        if g.lane_bits < 8:
            return fold.simd * fold.mmv * packed_dsps(lanes, fold.pe, core)
        per_dsp = macs_per_dsp(core, g.lane_bits) if core is not None else 1.0
        if g.lane_bits == 8 and per_dsp == 2:
            return self.paired_lanes(g, fold)
        return math.ceil(fold.lanes / per_dsp)

    def paired_lanes(self, g: Geometry, fold: Folding) -> int:
        """Multipliers of the lanes when two int8 lanes that share an operand share one (WP486):
        channel pairs share the input, so ``ceil(PE / 2) * SIMD`` (dense; Conv2d adds pixel pairs)."""
        return math.ceil(fold.pe / 2) * fold.simd * fold.mmv

    def requantizer_dsps(self, g: Geometry, fold: Folding, core: FpgaCore | None) -> int:
        """DSPs of the stage's requantizers: ``requantize_plan``'s units for its PE x MMV results a
        fold, ``requantizer_dsps`` each."""
        if not self.uses_dsp:
            return 0
        _, cycles = requantize_plan(fold.pe * fold.mmv, g.reduction // fold.simd)
        return self.requantizers(g, fold) * requantizer_dsps(g.reduction, core, g, cycles)

    def requantizers(self, g: Geometry, fold: Folding) -> int:
        """Requantization units of a dot-product stage (``requantize_plan``); none behind a threshold
        stage (``shape["T"]``: its comparators take their place, in the RTL dense and window units
        and the HLS kernels' ``fp::OutputStage``) and none for other kernels."""
        if not self.uses_dsp or g.shape.get("T"):
            return 0
        return requantize_plan(fold.pe * fold.mmv, g.reduction // fold.simd)[0]

    def dsps(self, g: Geometry, fold: Folding, core: FpgaCore | None) -> int:
        """Every DSP of the stage: MAC lanes and requantizers."""
        return self.mac_dsps(g, fold, core) + self.requantizer_dsps(g, fold, core)

    def narrow_int8_products(self, g: Geometry, fold: Folding, core: FpgaCore | None) -> float:
        """LUTs the lanes' int8 products of a narrow operand (one side 2 to 4 bits, the other 8) take
        beside their lanes' price: ``WIDE_DSP_NARROW_PRODUCT_LUTS`` a lane on a DSP48E2 core, and for
        each of the MMV - 1 pixels beyond the first ``EXTRA_PIXEL_LUTS`` and
        ``EXTRA_PIXEL_LUT_PER_LANE`` a lane of its PE x SIMD; none for other lanes, nor on a family
        built from the RTL op library (ECP5: fitted on Xilinx alone). O(1)."""
        narrow, wide = sorted((g.weight_bits, g.activation_bits))
        if wide != 8 or not 1 < narrow < 8 or core_family(core).rtl_built:
            return 0.0
        wide_dsp = WIDE_DSP_NARROW_PRODUCT_LUTS * fold.lanes if core_family(core).multiplier == "DSP48E2" else 0.0
        return wide_dsp + (fold.mmv - 1) * (EXTRA_PIXEL_LUTS + EXTRA_PIXEL_LUT_PER_LANE * fold.pe * fold.simd)

    def fixed_bytes(self, g: Geometry, core: FpgaCore | None = None) -> int:
        """On-chip bytes the op holds wherever its weights are: bias, multiplier and shift per
        output channel, and its line buffer (``line_buffer_bytes`` on ``core``), which is
        byte-wide: a BRAM36 holds 4096 of its bytes (4096 x 9 bits), so it is charged in whole
        blocks of 36 Kbit as it will occupy them."""
        line = self.line_buffer_bytes(g, core)
        if line:
            blocks, _, _ = memory_blocks(8, line)
            line = max(line, blocks * BRAM36_BYTES)
        return (CHANNEL_WORD_BITS // 8 * g.channels if self.uses_dsp else 0) + line

    def line_buffer_bytes(self, g: Geometry, core: FpgaCore | None) -> int:
        """The line buffer's bytes before a folding is chosen: the HLS kernel's
        (``Geometry.linebuffer_bytes`` at the activations' width). O(1)."""
        return bits_to_bytes(g.linebuffer_bytes, g.activation_bits)

    def resources(self, g: Geometry, fold: Folding, core: FpgaCore | None = None, resident: bool = True) -> Resources:
        if self.free:
            return Resources()
        lanes = fold.lanes
        bram, uram, lutram = self._memory(g, fold, core, resident)
        scale = core_family(core).lut_scale  # the fabric's LUTs per op-library (LUT6) LUT
        if self.uses_dsp:
            choice = self.unit_lanes(g, fold, core)
            if not narrow_lanes(g, core):  # the fitted fixed part holds the requantizers
                # those the plan shares away; a threshold stage's comparators are priced in their
                # place (``threshold.stage_resources``) and the fit's share of them kept, an upper bound
                results, folds = fold.pe * fold.mmv, g.reduction // fold.simd
                unbuilt = requantize_units(results, folds) - requantize_plan(results, folds)[0]
                luts = DOT_LUT_BASE + DOT_LUT_PER_LANE * lanes + lutram - unbuilt * REQUANT_LUTS[1]
                return Resources(self.dsps(g, fold, core), bram, uram, round(scale * luts),
                                 DOT_FF_BASE + DOT_FF_PER_LANE * lanes)
            # narrow_dot_luts prices the channel ROM as synthesis builds it (channel_rom_luts)
            channel_rom = fold.pe * memory_blocks(CHANNEL_WORD_BITS, math.ceil(g.channels / fold.pe))[2]
            per_lane = unit_lane_luts(choice, self.input_sharing(g, fold), core, fold.simd)
            lane_cost = per_lane * self.lane_scale(g, fold, core, resident)
            dot = narrow_dot_luts(g, fold, lane_cost, self.requantizers(g, fold))
            luts = round(dot + self.narrow_int8_products(g, fold, core)) + lutram - channel_rom
            return Resources(self.dsps(g, fold, core), bram, uram, round(scale * luts),
                             self.narrow_ffs(g, fold, choice, resident))
        return Resources(0, bram, uram, round(scale * (LANE_LUT_BASE + LANE_LUT_PER_PE * lanes + lutram)),
                         LANE_FF_BASE + LANE_FF_PER_PE * lanes)

    def input_sharing(self, g: Geometry, fold: Folding) -> int:
        """Channels of the unit that read each input: its PE (``unit_lanes``)."""
        return fold.pe

    def unit_lanes(self, g: Geometry, fold: Folding, core: FpgaCore | None) -> Lanes:
        """The lanes the stage builds at ``fold`` (``unit_lanes`` of its ``input_sharing``). O(1)."""
        return unit_lanes(core, g.weight_bits, g.activation_bits, self.input_sharing(g, fold))

    def lane_scale(self, g: Geometry, fold: Folding, core: FpgaCore | None, resident: bool = True) -> float:
        """The share of ``lane_luts`` a narrow MAC lane of this kernel takes (``narrow_dot_luts``) with
        its weights ``resident`` or streamed: all of it, but in a window unit whose SIMD spans window
        positions (``Conv2d.lane_scale``) and a dense unit's binary lanes by a block-RAM weight ROM
        (``Dense.lane_scale``)."""
        return 1.0

    narrow_ff_base = NARROW_FF_BASE  # the RTL unit's registers that do not grow with its lanes
    sum_stages = 3  # registers a dot product passes in the RTL dense unit: its sum, accumulator and result

    def narrow_ffs(self, g: Geometry, fold: Folding, lanes: Lanes, resident: bool) -> int:
        """FFs of a dot-product stage with narrow lanes as its RTL unit registers them
        (``narrow_dot_ffs``), with this kernel's weight stages (``weight_stages``), dot-product
        stages (``sum_stages``) and input registers (``input_register_bits``). O(1)."""
        depth = math.ceil(g.weights / (fold.pe * fold.simd)) if g.weights else 0
        width = g.weight_bits * fold.pe * fold.simd
        in_blocks = not resident or depth > LUTRAM_MAX_DEPTH  # streamed, or block RAM's own output register
        weights = self.weight_stages(lanes, in_blocks) * rom_columns(width, depth)
        return self.narrow_ff_base + narrow_dot_ffs(g, fold, lanes, weights, self.sum_stages,
                                                    self.input_register_bits(g, fold), self.requantizers(g, fold))

    def weight_stages(self, lanes: Lanes, in_blocks: bool) -> int:
        """Registers the RTL dense unit keeps a weight word in: one (``s1_w``), none where block
        RAM's output register holds it."""
        return 0 if in_blocks else 1

    def input_register_bits(self, g: Geometry, fold: Folding) -> int:
        """Bits of the inputs the RTL dense unit registers: its SIMD elements (``s1_x``)."""
        return fold.simd * g.activation_bits

    def _memory(self, g: Geometry, fold: Folding, core: FpgaCore | None, resident: bool) -> tuple[int, int, int]:
        """(BRAM36, URAM, LUTRAM LUTs) of the weight banks, per-channel words and line buffer (on a
        family built from the RTL op library, ``_rtl_memory``)."""
        if core_family(core).rtl_built:
            return self._rtl_memory(g, fold, core, resident)
        banks: list[tuple[int, tuple[int, int, int]]] = []
        if g.weights and resident:
            depth = math.ceil(g.weights / (fold.pe * fold.simd))
            in_uram = fold.uram and core is not None and core.uram > 0
            if g.weight_bits < 8:  # one ROM of PE x SIMD packed weights a word, as the RTL builds it
                banks.append((1, narrow_weight_rom(g.weight_bits * fold.simd * fold.pe, depth, in_uram)))
            else:
                banks.append((fold.pe, memory_blocks(g.weight_bits * fold.simd, depth, in_uram)))
        if self.uses_dsp:
            banks.append((fold.pe, memory_blocks(CHANNEL_WORD_BITS, math.ceil(g.channels / fold.pe))))
        banks.append((1, self.line_buffer_memory(g, fold, core)))
        return tuple(sum(n * bank[i] for n, bank in banks) for i in range(3))

    def _rtl_memory(self, g: Geometry, fold: Folding, core: FpgaCore | None, resident: bool) -> tuple[int, int, int]:
        """``_memory`` on a family built from the RTL op library (ECP5), as its units lay it out: one
        weight ROM of PE x SIMD weights a word and one channel ROM of PE channels' words a word
        (``rtl/dense.v.j2``, ``rtl/window.v.j2``) and the unit's own (``rtl_roms``: a window's
        offsets), each mapped by ``ecp5_rom``, the unit's RAMs (``rtl_rams``: a window's output
        FIFOs) and the line buffer, their EBRs counted together two a BRAM36: priced as PE banks of
        SIMD weights, each rounded to whole blocks, a 3 x 3 conv of 32 to 16 channels at PE 4 was 4
        BRAM36 against yosys' 2.5. O(1)."""
        ebrs = luts = 0
        for width, depth in self.rtl_roms(g, fold, resident):
            e, lut = ecp5_rom(width, depth)
            ebrs, luts = ebrs + e, luts + lut
        for count, width, depth in self.rtl_rams(g, fold):
            e, lut = ecp5_memory(width, depth)
            ebrs, luts = ebrs + count * e, luts + count * lut
        line_ebrs = self.line_buffer_ebrs(g, fold, core)
        if line_ebrs is not None:
            return (math.ceil((ebrs + line_ebrs[0]) / 2), 0, luts + line_ebrs[1])
        line = self.line_buffer_memory(g, fold, core)
        return (math.ceil(ebrs / 2) + line[0], line[1], luts + line[2])

    def rtl_roms(self, g: Geometry, fold: Folding, resident: bool) -> list[tuple[int, int]]:
        """(word bits, words) of each ROM the RTL unit declares: a dot product's weights (PE x SIMD
        a word, when resident) and channel words (PE a word, ``channel_rom_bits``). O(1)."""
        roms = []
        if g.weights and resident:
            roms.append((g.weight_bits * fold.simd * fold.pe, math.ceil(g.weights / (fold.pe * fold.simd))))
        if self.uses_dsp:
            roms.append((channel_rom_bits(g, fold), math.ceil(g.channels / fold.pe)))
        return roms

    def rtl_rams(self, g: Geometry, fold: Folding) -> list[tuple[int, int, int]]:
        """(count, word bits, words) of the RAMs the RTL unit declares besides a line buffer: none
        here. O(1)."""
        return []

    def line_buffer_ebrs(self, g: Geometry, fold: Folding, core: FpgaCore | None) -> tuple[int, int] | None:
        """(EBRs, LUTs) of the line buffer where the unit lays it out in EBRs itself (the window
        unit on ECP5, ``WindowKernel.line_buffer_ebrs``), so ``_rtl_memory`` counts it with the ROMs'
        EBRs; None here: ``line_buffer_memory``'s blocks."""
        return None

    def line_buffer_memory(self, g: Geometry, fold: Folding, core: FpgaCore | None) -> tuple[int, int, int]:
        """(BRAM36, URAM, LUTRAM LUTs) of the line buffer: ``linebuffer_bytes`` split into one bank
        per lane (the HLS kernel's partitioned buffer). O(1)."""
        if not g.linebuffer_bytes:
            return (0, 0, 0)
        count = (fold.simd if self.uses_dsp else fold.pe) * fold.mmv
        bank = memory_blocks(g.activation_bits, math.ceil(g.linebuffer_bytes / count))
        return (count * bank[0], count * bank[1], count * bank[2])


def tensor_shape(graph: OpGraph, tensor: str) -> tuple[int, ...] | None:
    info = graph.tensors.get(tensor) if tensor else None
    return info.shape if info is not None else None


def activation_inputs(op: Op, graph: OpGraph) -> list[str]:
    return [t for t in op.inputs if t and t not in graph.params]


def ints(value: Any, count: int, default: int) -> list[int]:
    values = [int(v) for v in value] if value else []
    return values if len(values) == count else [default] * count


def window_members(op: Op, graph: OpGraph, x: tuple[int, ...], out: tuple[int, ...], kernel: tuple[int, int],
            dilation: tuple[int, int] = (1, 1)) -> dict[str, int] | Unsupported:
    """Strides and explicit pads of a 2-D window op (auto_pad resolved from the output shape)."""
    sh, sw = ints(op.attrs.get("strides"), 2, 1)
    if sh < 1 or sw < 1:
        return Unsupported(f"strides SH={sh}, SW={sw}; expected strides >= 1")
    (h, w), (ho, wo) = x[2:], out[2:]
    auto_pad = str(op.attrs.get("auto_pad", "NOTSET"))
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for size, outsize, stride, k, d in ((h, ho, sh, kernel[0], dilation[0]), (w, wo, sw, kernel[1], dilation[1])):
            total = max(0, (outsize - 1) * stride + (k - 1) * d + 1 - size)
            small, big = total // 2, total - total // 2
            pads.append((small, big) if auto_pad == "SAME_UPPER" else (big, small))
        pt, pl, pb, pr = pads[0][0], pads[1][0], pads[0][1], pads[1][1]
    elif auto_pad == "VALID":
        pt = pl = pb = pr = 0
    else:
        pt, pl, pb, pr = ints(op.attrs.get("pads"), 4, 0)
    expect_h = (h + pt + pb - dilation[0] * (kernel[0] - 1) - 1) // sh + 1
    expect_w = (w + pl + pr - dilation[1] * (kernel[1] - 1) - 1) // sw + 1
    if (expect_h, expect_w) != (ho, wo):
        return Unsupported(f"output {ho}x{wo} does not follow from the window (ceil_mode or auto_pad)")
    return {"H": h, "W": w, "SH": sh, "SW": sw, "PT": pt, "PL": pl, "PB": pb, "PR": pr, "HO": ho, "WO": wo}


def probe(kernel: Kernel, op_type: str, attrs: dict[str, Any], inputs: list[str], shapes: dict[str, tuple[int, ...]],
          params: tuple[str, ...] = ()) -> Geometry:
    """The geometry ``kernel`` gives a one-sample ``op_type`` op of ``inputs`` (output ``y``) with
    ``shapes`` and constant ``params`` (so a unit test or bench costs an op from its config
    members exactly as the placement does); a one-line error where the kernel rejects it."""
    graph = SimpleNamespace(params=dict.fromkeys(params), model=None,
                            tensors={name: TensorInfo(name, shape, "int8") for name, shape in shapes.items()})
    geometry = kernel.geometry(Op(kernel.name, op_type, "", attrs, inputs, ["y"], 0), graph)  # type: ignore[arg-type]
    if not isinstance(geometry, Geometry):
        raise FpgaplaceError(f"rtl {kernel.name}: the op library rejects {shapes}: {geometry.reason}")
    return geometry
