"""The line-buffered window unit shared by convolution and windowed pooling
(``hls_templates/rtl/window.v.j2``): its template values for a layer's config and folding.

A pool is a depthwise window of SIMD = window length; the kernel adds what is its own
(``WindowKernel.window_values``: a conv's lanes at its widths, ROMs and output stage, a pool's requantizer) and
the input beat it chose with the folding (``WindowKernel.window_input_width``). O(weights +
SF * SIMD) for the ROMs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from fpgaplace.board.model import core_family
from fpgaplace.hw.gearbox import ELEMENT_BITS, Gearbox
from fpgaplace.hw.geometry import Folding, Geometry, Resources, Rom, RtlUnit
from fpgaplace.hw.kernel import Kernel, Lanes
from fpgaplace.hw.memory import ecp5_memory, rom_style, written_memory
from fpgaplace.hw.rtl_values import (
    PORT_IN,
    PORT_OUT,
    RATE_MARGIN,
    check_int8_members,
    index_bits,
    int_members,
    pack_lanes,
    signed_bits,
    smallest_divisor,
)
from fpgaplace.util.errors import FpgaplaceError

if TYPE_CHECKING:
    from fpgaplace.board.model import FpgaCore

SPARE_ROWS = 1  # line-buffer rows beyond the window's and a stride's, so the writer runs a row ahead
WINDOW_TEMPLATE = "rtl/window.v.j2"

# LUTs of the window unit's own logic around its narrow lanes on a family Vivado builds from HLS
# (``window_logic_luts``; the dot product, its ROMs and the threshold stage are the dense rules'): its
# counters and coordinates with their tests and increments, per bit of them (the frame's rows and a
# row's elements in, its output rows and columns: ``control_bits``), the line buffer's banks' read
# ports and element selects per bit of their elements, and each read lane that turns channels
# (``TURNING_LUT_PER_READ``). Least squares of the relative error of yosys 0.23 ``synth_xilinx
# -family xc7`` (hierarchical, ``fpgaplace.sim.yosys.synthesize``, the output converter left out: the
# HLS kernel has none) against the estimate, jointly with the line buffer's copies (``COPY_LUTS``) and
# the int8-product lanes of narrow weights (``kernel.LANE_LUTS[("dsp", 2, 8)]``, ``[("dsp", 4, 8)]``),
# the line buffer's memories priced as yosys builds them (``rtl_line_buffer``), over 66 window
# units with narrow lanes and a threshold stage (``tests/rtl_cases.lowbit_conv_case`` rendered for
# pynq-z2's core; ``scripts/bench_lowbit.py --convs --spans --turns --smalls --firsts`` and four of
# the compiled small CNV w2a2's kind, on 3 x 3 and 5 x 5 frames): 9 on 16 x 16 frames, 16 whose SIMD
# spans window positions and 11 whose lanes turn channels on 8 x 8 (one 5 x 5), 14 of one to 36
# lanes on 3 x 3 to 28 x 28 (depthwise at PE 1 to 4, as MobileNetV1's on a small Zynq, 1 x 1 convs),
# 14 first layers. Within 26 % of yosys on all 66, rms 9.9 % (beyond 20 %: a binary 16 -> 16 unit at
# 8 x 12 x 1, 26 % over; a w4a4 1 x 1 unit of 4 lanes, 23 % under; the 5 x 5 turning unit, 22 % under);
# the first layers within 14 % (rms 7.0 %). Rerun once the threshold stage's table word was
# registered (``rtl/window.v.j2``), with the 1 x 1 terms below: rms 9.6 %, within 26 % (the binary
# unit 26 % over, the 5 x 5 turning unit 23 % and a w2a2 32 -> 32 unit at 2 x 9 x 1 21 % under).
# Rerun at these constants once the read lanes tested their rows and columns at a coordinate's own
# width (``rtl/window.v.j2``'s POS_W; before, at the element offset's, the lanes over 128 channels
# cost up to 20 LUTs a read more than priced: a w2a2 unit at PE x SIMD 1 x 64 on a 5 x 5 frame, 3,404
# LUTs in yosys against 2,058 priced, 2,221 since): the 64 units of the five sets within 0.81-1.20 of
# yosys, rms 8.7 %.
# Before (a term per read lane, 8.8, 3.5 where the SIMD spans window positions; a fixed 276.5 where
# the lanes turn channels; banks without copies priced as the HLS kernel's partition, in block RAM):
# rms 16.3 %, the small units 0.31 to 0.69 of yosys (a w2a2 depthwise unit at PE 1: 374 LUTs, priced
# 115), a 3 x 3 frame's unit 1.23 of it, and MobileNetV1 w4a4's depthwise layers on pynq-z2 2.1 to 2.4
# times the estimate. With the control bits the read lanes' terms fit to about zero (-2.4 and 0.6 when
# left free): their LUTs are the lanes' own price's.
WINDOW_LUT_PER_CONTROL_BIT = 13.0  # a bit of the unit's counters and coordinates: its register's logic and tests
# A 1 x 1 window's (``pointwise``): its coordinates address no window around a pixel, so synthesis
# keeps less of their tests. Fitted with the threshold table's kept columns
# (``threshold.TABLE_COLUMN_SHARE``), the other terms as above, least squares of the relative error
# over the 66 units and the 19 conv layers of MobileNetV1 w4a4 compiled for pynq-z2 (11 of them 1 x 1,
# on 14 x 14 to 112 x 112 frames; yosys of the layers as compile writes them, the threshold stage's
# channel word registered): 6.1, and within 26 % of yosys on all 85, rms 8.9 %. At 13.0 the 1 x 1
# layers were 1.24 to 1.37 times yosys. A w4a4 64 -> 128 unit at 2 x 4 x 1 alone: 920 LUTs in yosys
# on a 56 x 56 frame, 881 on 14 x 14, about 5 a bit of the 8 more.
WINDOW_LUT_PER_POINTWISE_CONTROL_BIT = 6.1
WINDOW_LUT_PER_BANK_BIT = 5.8  # a line-buffer bank, per bit of its elements: its read port and selects

# A SIMD spanning window positions (``spans_positions``: SIMD > CIN in an ungrouped conv, so a fold's
# lanes read several pixels of the window; the compiled CNV's convs fold so, SIMD 36 to 72) was
# over-priced by the dense rules, up to 2.4 x yosys (w1a1 8 -> 8 3 x 3 at PE x SIMD x MMV 4 x 72 x 2:
# 1,949 LUTs, estimate 4,675; w2a2 at the same folding 4,401 against 8,622): where the weight ROM is
# shallow (NF x SF words, ``SHALLOW_WEIGHT_WORDS``) a weight of at most 2 bits takes a few values and
# synthesis folds the products into the adder tree's first LUTs (w4a4 lanes do not shrink: 0.91 ..
# 1.11 of their price at 4 to 8 words): the lane shares below, fitted over the 16 --spans units with
# the earlier read-lane terms and kept in the refit above (w2a2 8 -> 8 at 4 x 72 x 2, 4 x 72 x 1,
# 2 x 24 x 1, 8 x 36 x 1; 4 -> 8 at 2 x 36 x 1; 16 -> 16 at 4 x 48 x 1, 4 x 24 x 2; 8 -> 64 at
# 2 x 72 x 1; 8 -> 32 at 4 x 24 x 1; w1a1 8 -> 8 at 4 x 72 x 2, 16 -> 16 at 4 x 48 x 2 and 4 x 48 x 1,
# 8 -> 32 at 4 x 72 x 1; w4a4 8 -> 8 at 4 x 24 x 1, 8 -> 16 and 8 -> 32 at 4 x 72 x 1). A grouped conv
# (depthwise: its SIMD spans its one channel) keeps all of the lane's price.
# A line-buffer copy's memory (``rtl_line_buffer``) is LUTRAM or RAMB18s as yosys 0.23 ``synth_xilinx
# -family xc7`` picks by its library's costs (``memory.yosys_lutram``): the small CNV w2a2's conv_12 at
# 2 x 72 x 1 keeps 36 memories of 4 bits x 70 words in RAM32Ms (no block RAM; priced as memory_blocks
# has it, 36 BRAM36), its conv_25 at 1 x 9 x 1 9 of 4 x 240 (half a BRAM36 in all, its weights'; priced
# so, 10); its conv_7 at 8 x 24 x 3 keeps 5 of 16 x 150 in 5 RAMB18s (priced as such,
# ``memory.bram18_halves``: 3 BRAM36, where whole BRAM36s a copy were 5); a 3 x 3 w2a2 conv over 8
# channels at 1 x 9 x 1 its 9 copies of 2 x 640 in LUTRAM (priced 5 BRAM36 by a 1,024-bit threshold).
# A line buffer without a banked layout (``LineBuffer.banked`` False: one memory read by every lane)
# is no RAM in yosys 0.23 ``synth_xilinx -family xc7`` but registers and, for each read lane, a
# multiplexer over the buffer's element bits: the small CNV w2a2's conv_7 at 8 x 12 x 7 (84 lanes
# reading 1,200 2-bit elements, a 10-element beat) took 131,377 LUTs, 126,430 but its gearbox:
# about 0.6 a lane and element bit beside its lanes' ~5,000 (the MUXF7s and MUXF8s not counted).
UNBANKED_LUTS_PER_READ_BIT = 0.6
# A line-buffer copy (``rtl_line_buffer``) costs LUTs beside its memory's: its own read address
# and write enable; fitted with the window unit's logic above (its 14 first layers: 3 -> 16..64
# channels, w2a8 and w4a8, on 8 to 32 pixel frames at PE x SIMD x MMV 2 x 27 x 1, 1 x 27 x 1, 4 x 9 x 1,
# 2 x 3 x 1, 8 x 27 x 1 and 4 x 27 x 2, 3 to 27 copies); with the copies unpriced and the lanes fitted
# to the compiled layers alone, yosys took 0.97 to 3.19 times the estimate (3 -> 32 at 1 x 27 x 1 on
# 16 x 16: 2,562 LUTs, priced 803). Copies of narrow elements go without it: their units were fitted
# with the copies' memories alone (the term on top took the --convs, --spans and --turns rows from
# rms 10.3 %, worst 23 %, to 28.1 %, worst 67 %, when it was fitted to the first layers alone).
COPY_LUTS = 9.1
# FFs of a window unit with narrow lanes beyond ``kernel.narrow_dot_ffs``' (its counters, coordinates,
# flags, line-buffer addresses and output words), fitted with ``kernel.NARROW_FF_BASE`` (see there)
WINDOW_FF_BASE = 212
# A SIMD that neither divides CIN nor is a multiple of it (``turns_channels``: each lane's channel,
# and so its element of the line buffer's word and its window position, turns from fold to fold)
# costs each read lane its own address arithmetic and in-frame tests, where the elements are wider
# than a bit (the compiled small CNV w2a2's conv_21, 16 -> 32 at 1 x 72 x 1 on a 5 x 5 frame: 977
# CARRY4 in yosys 0.23, about 47 carry bits a lane beside its adder tree's); fitted with the window
# unit's logic above. Binary units (1-bit elements) go without it: their five turning units are within
# 26 % as they are.
TURNING_LUT_PER_READ = 8.1
SPANNING_XNOR_SHARE = 0.40  # of ``kernel.lane_luts`` a binary lane from a shallow weight ROM takes
SPANNING_SHALLOW_SHARE = 0.56  # ... a LUT lane of at most 2 bits both (w2a2) from a shallow weight ROM
SHALLOW_WEIGHT_WORDS = 4  # a weight ROM of at most this many words is shallow, or of twice as many
#   where a lane reads one window position (SF = 1). Measured: the lanes at 2 to 4 words and at 8 with
#   SF = 1 shrink, those at 12 and more words (and 32 with SF = 1) take 0.77 .. 1.11 of their price;
#   in the compiled small CNV w2a2 (tests/test_lowbit_conv_rtl.py) 16 -> 16 at 8 x 48 x 1 (6 words,
#   SF = 3) takes all of it (yosys 4,687 LUTs, 3,342 priced as shallow), 8 -> 8 at 8 x 24 x 3 (3
#   words) and 8 -> 16 at 2 x 72 x 2 (8 words, SF = 1) do not (5,236 and 3,347 against 5,109 and 3,197).


class WindowKernel(Kernel):
    """A kernel whose RTL is the window unit: conv2d, maxpool, avgpool."""

    window_kind = ""  # "conv", "max" or "avg" (the template's ``kind``)
    global_ = False  # a pool of the whole plane (no window unit, no line buffer)
    narrow_ff_base = WINDOW_FF_BASE
    sum_stages = 2  # the window unit's sum and accumulator (``s4_sum``, ``s5_acc``)

    def weight_stages(self, lanes: Lanes, in_blocks: bool) -> int:
        """Registers the window unit keeps a weight word in (``s1_w``, ``s2_w``): none where block
        RAM's output register holds the first, or a one-product DSP's input register the second."""
        return (0 if in_blocks else 1) + (0 if lanes.kind == "dsp" and lanes.pack == 1 else 1)

    def input_register_bits(self, g: Geometry, fold: Folding) -> int:
        """Bits of the inputs the window unit registers beside its lanes' elements: each read lane's
        in-frame flag (``word_in_frame``). O(1)."""
        c = self.window_shape(g.shape, fold)
        return c["MMV"] * (c["PE"] if c["GROUPS"] > 1 else 1) * c["SIMD"]

    def window_shape(self, config: dict[str, Any], fold: Folding) -> dict[str, int]:
        """The layer's members in convolution terms, with PE, SIMD and MMV."""
        raise NotImplementedError

    def window_input_width(self, c: dict[str, int], fold: Folding) -> int:
        """The input beat the op library chose with the folding (0: none)."""
        raise NotImplementedError

    def priced_input_width(self, g: Geometry, fold: Folding) -> int:
        """``window_input_width`` from the layer's geometry (what the cost model holds)."""
        return self.window_input_width(self.window_shape(g.shape, fold), fold)

    def line_buffer_memory(self, g: Geometry, fold: Folding, core: FpgaCore | None) -> tuple[int, int, int]:
        """(BRAM36, URAM, LUTRAM LUTs) of the line buffer. On a family built from the RTL op library
        (ECP5) the window unit's as it is laid out (``line_buffer``: its memories, banks of the
        window's rows and a stride's and a spare) and mapped (``ecp5_memory``), its EBRs counted
        in BRAM36 (two EBRs each, the op's total rounded up). Elsewhere the HLS kernel's
        partitioned buffer (``Kernel.line_buffer_memory``: one buffer in a bank per lane): Vivado
        builds the HLS kernel there, and the RTL is the project's check. The two agree where the
        RTL's lanes read banks of one buffer (``LineBuffer.copies`` 1: SIMD or PE lanes over
        channels that they divide, MMV pixels whose words keep their banks); where they cannot
        (a SIMD spanning window positions or channels it does not divide, MMV pixels whose bank
        turns with the output group: ``read_groups``) the RTL keeps copies the price does not
        hold. Pricing them (the larger of the two) moved the placement's foldings off its plan
        (MobileNetV2 on zcu104: a 25 % longer interval than SCIP's), so the price follows the
        hardware built; but a conv of narrow elements is priced as the RTL keeps its buffer, banks and
        copies (``rtl_line_buffer``, as yosys builds them):
        unpriced, they let compile fold a small CNV w2a2's first narrow conv to 8 x 12 x 7, whose
        buffer of a 10-element beat no bank divides is read by 84 lanes (yosys: 131,377 LUTs, priced
        7,462). O(lanes x folds, cached)."""
        ebrs = self.line_buffer_ebrs(g, fold, core)
        if ebrs is not None:
            return (math.ceil(ebrs[0] / 2), 0, ebrs[1])
        built = self.rtl_line_buffer(g, fold, core)
        return built if built is not None else super().line_buffer_memory(g, fold, core)

    def rtl_line_buffer(self, g: Geometry, fold: Folding, core: FpgaCore | None) -> tuple[int, int, int] | None:
        """(BRAM36, URAM, LUTRAM LUTs) of a narrow-lane conv's line buffer as the RTL keeps it, its
        banks and any copies of them (``LineBuffer.copies`` > 1): its memories (``LineBuffer.layout``:
        one per read group, or one a read lane without a banked layout) each in RAMB18s (``bram18_halves``, two
        to a BRAM36), but in LUTRAM where yosys builds it there on the core's family (``yosys_lutram``;
        four LUTs a RAM64M or RAM32M, eight a RAM64M8 or RAM32M16, ``yosys_lutram_luts``), and a
        copy of 8-bit elements its own logic (``COPY_LUTS``); without a banked layout (a beat that
        is no power of two) a multiplexer over the whole buffer a lane
        (``UNBANKED_LUTS_PER_READ_BIT``). Banks without copies are priced so too: a w2a2 unit at
        2 x 8 x 1 over 32 channels of a 28 x 28 frame keeps its 8 banks of 2 x 360 bits in LUTRAM
        (1,304 LUTs and 1 BRAM36 in yosys 0.23; as the HLS kernel's partition, 8 BRAM36 and 836
        LUTs). None where both operands are 8 bits
        (``narrow_operands``: the int8 fit holds them) or the family is built from the RTL op
        library (``line_buffer_ebrs`` prices it there). A w2a8 first layer's copies of 8-bit pixels
        count too: 3 -> 16 channels on a 16 x 16 frame at PE x SIMD 2 x 27 keeps 27 copies of 8 x 240
        bits, 324 RAM64M in yosys 0.23 (1,296 LUTs; unpriced before, the unit was 2,750 LUTs in
        yosys against 1,158 priced). O(lanes x folds, cached)."""
        if self.global_ or core_family(core).rtl_built or not self.narrow_operands(g):
            return None
        buffer = line_buffer(self.window_shape(g.shape, fold), self.priced_input_width(g, fold))
        if not buffer.banked:  # one memory of every lane's read port: registers and a multiplexer a lane
            return (0, 0, math.ceil(UNBANKED_LUTS_PER_READ_BIT * buffer.reads * g.activation_bits
                                    * buffer.rows * buffer.row_elems))
        count, (width, depth) = buffer.layout(g.activation_bits)
        if g.activation_bits >= 8:
            logic = round(COPY_LUTS * count) if buffer.copies > 1 else 0
        else:  # narrow: the spans fit holds a spanning SIMD's copies, not those of MMV pixels
            logic = round(COPY_LUTS * pixel_copies(self.window_shape(g.shape, fold), buffer))
        halves, luts = written_memory(width, depth, core_family(core).name)
        return (math.ceil(count * halves / 2), 0, count * luts + logic)

    def rtl_roms(self, g: Geometry, fold: Folding, resident: bool) -> list[tuple[int, int]]:
        """``Kernel.rtl_roms`` and the window unit's own: its offsets (``offset_widths``, SIMD a word,
        one word per window fold) and, for grouped windows, each PE lane's group offset (one word
        per output fold), as ``window_unit`` writes them. O(1)."""
        if self.global_:
            return super().rtl_roms(g, fold, resident)
        c = self.window_shape(g.shape, fold)
        nf, sf = window_folds(c)
        roms = [*super().rtl_roms(g, fold, resident), (sum(offset_widths(c)) * c["SIMD"], sf)]
        if c["GROUPS"] > 1:
            roms.append((max(1, c["CIN"].bit_length()) * c["PE"], nf))
        return roms

    def line_buffer_ebrs(self, g: Geometry, fold: Folding, core: FpgaCore | None) -> tuple[int, int] | None:
        """(EBRs, LUTs) of the window unit's line buffer on a family built from the RTL op library
        (``line_buffer_memory``): its memories (``LineBuffer.layout``), each ``ecp5_memory``; None
        elsewhere. O(lanes x folds, cached)."""
        if self.global_ or not core_family(core).rtl_built:
            return None
        buffer = line_buffer(self.window_shape(g.shape, fold), self.priced_input_width(g, fold))
        count, (width, depth) = buffer.layout(g.activation_bits)
        ebrs, luts = ecp5_memory(width, depth)
        return (count * ebrs, count * luts)

    def resources(self, g: Geometry, fold: Folding, core: FpgaCore | None = None, resident: bool = True) -> Resources:
        """``Kernel.resources``; on a family built from the RTL op library (ECP5) with the window
        unit's output gearbox (``output_gearbox``, ``Gearbox.ecp5_luts``), which its base
        coefficients do not hold (6,652 LUT4s for a 64-element group to a beat of one, before its
        input was a fold's word); its output FIFOs are among its RAMs (``rtl_rams``). Not on
        Xilinx, where the HLS kernel has neither, though the RTL keeps them (``Gearbox.xc7_luts``
        would price the gearbox: with a group a word, 1,442 of the small CNV w2a2's conv_21's
        4,416 LUTs in yosys at 1 x 72 x 1); priced there, the small MobileNetV1 w4a4 on pynq-z2 no
        longer fit its core at any folding (24,825 LUTs against 19,680: the placement does not see
        it). O(divisors of the output)."""
        priced = super().resources(g, fold, core, resident)
        if self.global_ or not core_family(core).rtl_built:
            return priced
        return priced + Resources(lut=output_gearbox(self.window_shape(g.shape, fold)).ecp5_luts())

    def rtl_rams(self, g: Geometry, fold: Folding) -> list[tuple[int, int, int]]:
        """``Kernel.rtl_rams``: the output FIFOs (``output_fifo_shape``; a 2 x 2 max pool over 64
        channels at PE 1 keeps 512 bytes, one EBR in yosys). O(divisors of NF)."""
        if self.global_:
            return []
        c = self.window_shape(g.shape, fold)
        fifos = output_fifo_shape(c, self.pipeline_latency(c))
        return [fifos] if fifos else []

    def narrow_operands(self, g: Geometry) -> bool:
        """Whether the layer is a conv with an operand below 8 bits (narrow activations, or narrow
        weights by 8-bit pixels: a low-bit network's first layer), whose RTL's line-buffer copies
        the Xilinx price holds (``rtl_line_buffer``). O(1)."""
        return self.uses_dsp and min(g.weight_bits, g.activation_bits) < 8

    def frame_rows(self, config: dict[str, Any]) -> int | None:
        """A windowed unit streams its ``HO`` output rows; none for a global pool (one output row),
        behind a zero-inserting front (``UH``, its frame is the inserted one) or where a pool
        excludes the padding (its per-position divisors are arrays of the whole frame)."""
        if self.global_ or config.get("EXCLUDE_PAD") or any(key in config for key in ("UH", "UW", "XH", "XW")):
            return None
        return int(config["HO"]) if int(config["HO"]) > 1 else None

    def cut_rows(self, config: dict[str, Any], rows: int) -> dict[str, Any]:
        """The first ``rows`` output rows and the input rows they read, the frame's bottom kept as
        it is (its padding and any row a stride leaves unread): ``H - (HO - rows) * SH`` input
        rows. The unit's Verilog differs from the whole layer's only in ``H``, ``HO`` and the
        widths of the counters over them. O(1)."""
        if self.frame_rows(config) is None or not 1 <= rows <= config["HO"]:
            raise FpgaplaceError(f"{self.name}: cannot cut a frame of {config.get('HO')} output rows to {rows}")
        return {**config, "H": config["H"] - (config["HO"] - rows) * config["SH"], "HO": rows}

    def line_buffer_bytes(self, g: Geometry, core: FpgaCore | None) -> int:
        """On a family built from the RTL op library (ECP5), the window unit's line buffer as
        ``line_buffer`` lays it out for one read lane (the folding is not chosen yet: a wider one
        may add copies, priced in ``line_buffer_memory``); elsewhere the HLS kernel's. O(divisors
        of a row)."""
        if self.global_ or not core_family(core).rtl_built:
            return super().line_buffer_bytes(g, core)
        fold = Folding()
        buffer = line_buffer(self.window_shape(g.shape, fold), self.priced_input_width(g, fold))
        return math.ceil(buffer.rows * buffer.row_elems * g.activation_bits / 8)

    def window_values(self, c: dict[str, int], arrays: dict[str, Any], top: str, nf: int, sf: int,
                      macs_per_dsp: int, xp: int, roms: dict[str, Rom],
                      core: FpgaCore | None = None) -> dict[str, Any]:
        """The kernel's own template values (ROMs added to ``roms``; ``core``: the core it runs
        on, whose budgets choose a conv's lanes, ``lane_choice``)."""
        raise NotImplementedError

    def pipeline_latency(self, c: dict[str, int]) -> int:
        """Cycles from a fold step's issue to its results at the window unit's output FIFO, for the
        members ``c`` (``window_shape``), which size that FIFO (``output_fifo_bits``) in the RTL
        and in the price alike. O(1)."""
        raise NotImplementedError

    def rtl(self, config: dict[str, Any], arrays: dict[str, Any], fold: Folding, top: str, model_cycles: int,
            macs_per_dsp: int = 1, core: FpgaCore | None = None) -> RtlUnit:
        """The window unit for ``config`` (the C++ config members) folded as ``fold``: window
        offsets per fold, the kernel's ROMs, and for grouped windows the input channel offset of
        every PE lane."""
        c = self.window_shape(config, fold)
        check_int8_members(c, ("ZX", "ZY"), self.name)
        return window_unit(self, c, arrays, fold, top, macs_per_dsp, core)


PROBE_ROWS = 2  # output rows of the frame a DSP probe keeps (``probe_frame``)


def probe_frame(c: dict[str, Any], fold: Folding) -> dict[str, int] | None:
    """The frame members ``H, W, HO, WO`` of a window layer's DSP probe (``Kernel.probe_layer``):
    ``PROBE_ROWS`` output rows of one group of MMV pixels each and the input they read, its
    padding kept; the lanes and requantizers, which depend on the folding alone, are the layer's.
    None where that frame would have no input row or column (the padding alone). O(1)."""
    ho, wo = min(c["HO"], PROBE_ROWS), min(c["WO"], fold.mmv)
    h = (ho - 1) * c["SH"] + c.get("DH", 1) * (c["KH"] - 1) + 1 - c["PT"] - c["PB"]
    w = (wo - 1) * c["SW"] + c.get("DW", 1) * (c["KW"] - 1) + 1 - c["PL"] - c["PR"]
    return {"H": h, "W": w, "HO": ho, "WO": wo} if h >= 1 and w >= 1 else None


def checked_window_shape(kernel: str, config: dict[str, Any], members: dict[str, int]) -> dict[str, int]:
    """The integer members of ``config`` with ``members`` (convolution terms, PE, SIMD, MMV)
    after the checks every window unit needs (PE, SIMD, GROUPS and MMV fit the shape)."""
    c = int_members(config) | members
    reduction = c["KH"] * c["KW"] * c["CIN"] // c["GROUPS"]
    if c["COUT"] % c["PE"] or reduction % c["SIMD"] or c["CIN"] % c["GROUPS"] or c["COUT"] % c["GROUPS"]:
        raise FpgaplaceError(f"rtl {kernel}: PE={c['PE']} must divide COUT={c['COUT']}, SIMD={c['SIMD']} the "
                             f"window length {reduction} and GROUPS={c['GROUPS']} both channel counts")
    if c["MMV"] < 1 or c["MMV"] > c["WO"]:
        raise FpgaplaceError(f"rtl {kernel}: MMV={c['MMV']} must lie in [1, WO={c['WO']}]")
    return c


def pixel_copies(c: dict[str, int], buffer: LineBuffer) -> int:
    """Memories the line buffer ``buffer`` of the members ``c`` keeps beyond those of one pixel's
    reads (the same window at MMV 1, same beat): the copies MMV > 1 pixels need where their words
    turn banks with the output group; none without a banked layout or where the SIMD spans window
    positions (``spans_positions``: ``spanning_lane_share`` holds those). Each costs ``COPY_LUTS``
    (``WindowKernel.rtl_line_buffer``): the window units of 2-bit codes at 2 x 32 x 3 and 2 x 64 x 3
    and of w4a4 LUT lanes at 1 x 32 x 2 and 1 x 32 x 4 were 0.85 to 0.90 of yosys 0.23 without it, the
    CNV w1a2's conv_21 (128 -> 256 at 2 x 64 x 3 on a 5 x 5 frame: 128 such memories) 0.71 (now 0.85
    to 0.99 and 0.85); least squares over 139 unit rows on xc7 and xcup gave 9.7 a memory; at the
    8-bit copies' 9.1 their rms went from 10.0 to 9.5 %. O(``read_groups``)."""
    if c["MMV"] == 1 or not buffer.banked or spans_positions(c):
        return 0
    one = line_buffer(c | {"MMV": 1}, buffer.in_e)
    return max(0, len(buffer.memories) - len(one.memories)) if one.banked else 0


def window_folds(c: dict[str, int]) -> tuple[int, int]:
    """(NF, SF): output folds of PE channels and window folds of SIMD elements. O(1)."""
    return c["COUT"] // c["PE"], c["KH"] * c["KW"] * (c["CIN"] // c["GROUPS"]) // c["SIMD"]


@dataclass(frozen=True)
class LineBuffer:
    """The window unit's line buffer (``window.v.j2``): ``rows`` rows of ``row_elems`` elements in
    words of ``in_e`` (the input beat), kept as ``memories`` (copy, bank) of one write and one read
    port each: a copy is the buffer split cyclically by word index into ``banks`` banks, and the
    read lanes (MMV x XP x SIMD) are grouped by the word they read together (``read_groups``), one
    group a memory; ``lane_element[lane]`` = (the memory whose word the lane picks its element
    from, the element index's bits that vary, the value of the fixed ones).
    Without a power-of-two beat (``banked`` False) the buffer is one memory of every lane's read
    port, which synthesis copies once a lane (``copies``)."""

    rows: int
    row_elems: int
    in_e: int
    banks: int = 1
    memories: tuple[tuple[int, int, int], ...] = ()  # (copy, bank, leader lane: its address is read)
    lane_element: tuple[tuple[int, int, int], ...] = ()
    banked: bool = True
    reads: int = 1

    @property
    def copies(self) -> int:
        """Copies of the whole buffer the memories amount to (a bank no lane reads is not kept):
        the banks' total over one buffer's, rounded up; every read lane's own copy without a
        banked layout."""
        if not self.banked:
            return self.reads
        return math.ceil(len(self.memories) / self.banks)

    def layout(self, element_bits: int) -> tuple[int, tuple[int, int]]:
        """(memories, (word bits, words) of each): one of one write and one read port per
        ``memories`` entry, or without a banked layout a whole buffer per read lane (one memory
        of every lane's read port, which synthesis copies once a port). O(1)."""
        if not self.banked:
            return self.reads, (self.in_e * element_bits, self.rows * self.row_elems // self.in_e)
        return len(self.memories), (self.in_e * element_bits, self.bank_words)

    @property
    def bank_words(self) -> int:
        """Words of ``in_e`` elements in one bank."""
        return self.rows * self.row_elems // self.in_e // self.banks


def line_buffer(c: dict[str, int], width: int) -> LineBuffer:
    """The line buffer of the window members ``c`` (``WindowKernel.window_shape``) whose op
    library input beat is ``width`` (0: none): ROWS = the window's rows + SH + SPARE_ROWS; the
    beat is ``width`` when it divides an input row, else the narrowest divisor of the row whose SH
    rows arrive within RATE_MARGIN of an output row's steps; with a power-of-two beat its banks and
    memories as ``read_groups`` lays them out. O(divisors of a row + ``read_groups``)."""
    row_elems = c["W"] * c["CIN"]
    rows = c["DH"] * (c["KH"] - 1) + 1 + c["SH"] + SPARE_ROWS
    xp = c["PE"] if c["GROUPS"] > 1 else 1
    folds = math.prod(window_folds(c))
    row_cycles = math.ceil(c["WO"] / c["MMV"]) * folds
    if not (width and row_elems % width == 0):
        width = smallest_divisor(row_elems, lambda d: c["SH"] * row_elems / d <= RATE_MARGIN * row_cycles)
    reads = c["MMV"] * xp * c["SIMD"]
    if width & (width - 1):
        return LineBuffer(rows, row_elems, width, banked=False, reads=reads)
    keys = ("W", "CIN", "KH", "KW", "SH", "SW", "PL", "DH", "DW", "GROUPS", "COUT", "PE", "SIMD", "MMV", "WO")
    banks, memories, lane_element = read_groups(tuple(c[k] for k in keys), width)
    return LineBuffer(rows, row_elems, width, banks, memories, lane_element, reads=reads)


@cache
def read_groups(members: tuple[int, ...], in_e: int) -> tuple[int, tuple[tuple[int, int, int], ...],
                                                              tuple[tuple[int, int, int], ...]]:
    """(banks, memories, lane_element) of the window unit's line buffer (``LineBuffer``) for the
    members ``W, CIN, KH, KW, SH, SW, PL, DH, DW, GROUPS, COUT, PE, SIMD, MMV, WO`` and a beat of
    ``in_e`` elements (a power of two). Lanes that read the same row and word at every step form a
    group and share one read port (``lane_groups``: the PE lanes of a pool, the SIMD lanes of a
    conv whose SIMD channels lie in one word); the buffer is split into banks and the groups dealt
    to copies of it (``bank_layout``); ``lane_element[lane]`` = (memory, varying, fixed), the lane's
    element of its memory's word (``lane_elements``). O(lanes x NF' x SF x WG) with numpy (NF' =
    NF for grouped windows, else 1)."""
    w, cin = members[0], members[1]
    address, row = lane_addresses(members)
    leaders, lane_group = lane_groups(np.concatenate([row, np.floor_divide(address, in_e)], axis=1))
    banks, memories = bank_layout(np.floor_divide(address[leaders], in_e), leaders, w * cin // in_e)
    return banks, memories, lane_elements(address % in_e, lane_group)


def lane_addresses(members: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Each read lane's element address in its row and the row, at every step: arrays of (lanes,
    NF' x SF x WG) for the members of ``read_groups``. Lane (m, xp, i) (the template's order,
    ``LANE = (m*XP + xp)*SIMD + i``) reads, at output group wg, output fold nf and window fold sf,
    the element ``(wg*MMV*SW - PL)*CIN + m*SW*CIN + dc*CIN + ci + goff`` of row ``dr``
    (``window_unit``'s offsets; goff the group offset of PE lane xp). O(lanes x steps)."""
    w, cin, kh, kw, sh, sw, pl, dh, dw, groups, cout, pe, simd, mmv, wo = members
    cin_g, xp = cin // groups, (pe if groups > 1 else 1)
    nf, sf = (cout // pe if groups > 1 else 1), kh * kw * cin_g // simd
    k = np.arange(sf * simd).reshape(sf, 1, simd)  # window element of fold s, lane i
    dr = k // (kw * cin_g) * dh
    element = (k // cin_g % kw * dw) * cin + k % cin_g
    co = np.arange(nf * pe).reshape(nf, pe)[:, :xp] if groups > 1 else np.zeros((1, 1), dtype=np.int64)
    goff = co // (cout // groups) * cin_g  # (nf, xp)
    col = (np.arange(math.ceil(wo / mmv)) * mmv * sw - pl) * cin  # (wg,)
    m = np.arange(mmv) * sw * cin
    address = (m[:, None, None, None, None, None] + goff.T[None, :, None, :, None, None]
               + element.transpose(1, 2, 0)[None, :, :, None, :, None]
               + col[None, None, None, None, None, :])
    lanes = mmv * xp * simd
    row = np.broadcast_to(dr.transpose(1, 2, 0)[None, :, :, None, :, None], address.shape)
    return address.reshape(lanes, -1), row.reshape(lanes, -1)


def lane_groups(steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(leaders, group of each lane): lanes whose ``steps`` rows (their row and word at every step)
    are equal form a group, numbered in the order of its first lane, its leader. O(lanes x steps)."""
    group_of: dict[bytes, int] = {}
    leaders, groups = [], []
    for lane, key in enumerate(np.ascontiguousarray(steps)):
        groups.append(group_of.setdefault(key.tobytes(), len(leaders)))
        if groups[-1] == len(leaders):
            leaders.append(lane)
    return np.array(leaders), np.array(groups)


def bank_layout(words: np.ndarray, leaders: np.ndarray, row_words: int) -> tuple[int, tuple[tuple[int, int, int], ...]]:
    """(banks, memories) for groups reading ``words`` (group x step) of rows of ``row_words``
    words: the buffer split cyclically by word index into ``banks`` (a power of two dividing a
    row's words and every group's word steps, so each group reads a fixed bank; no more than give
    fewer copies), the groups dealt to copies of it, a group per bank of a copy: ``memories`` =
    (copy, bank, leader lane) a group. Groups reading words of one row whose bank turns with the
    output group (a conv's SIMD lanes spanning window positions, MMV pixels of one row) are
    copies: a lane then needs no crossbar between banks. O(groups x steps)."""
    turns = math.gcd(int(np.gcd.reduce((words - words[:, :1]).ravel())), row_words)
    banks = turns & -turns  # the largest power of two dividing a row's words and every group's word steps
    residue = words[:, 0] % banks
    best = max(np.bincount(residue, minlength=banks))
    while banks > 1 and max(np.bincount(words[:, 0] % (banks // 2), minlength=banks // 2)) == best:
        banks //= 2  # no fewer copies from more banks: fewer, larger memories
        residue = words[:, 0] % banks
    copy, seen = [], [0] * banks
    for r in residue:
        copy.append(seen[r])
        seen[r] += 1
    return banks, tuple((copy[g], int(residue[g]), int(leaders[g])) for g in range(len(leaders)))


def lane_elements(element: np.ndarray, lane_group: np.ndarray) -> tuple[tuple[int, int, int], ...]:
    """Each lane's (memory, varying, fixed) from its ``element`` index in the word at every step
    (lanes x steps): its group's memory, the index bits that change from step to step and the
    value of the others (a pool's PE lane picks a fixed element of its word: no multiplexer). O(lanes x steps)."""
    varying = np.bitwise_or.reduce(element ^ element[:, :1], axis=1)
    return tuple((int(g), int(v), int(e & ~v)) for g, v, e in zip(lane_group, varying, element[:, 0], strict=True))


def window_logic_luts(c: dict[str, int], banks: int, element_bits: int) -> float:
    """LUTs of the window unit's own logic with narrow lanes where Vivado builds the HLS kernel
    (fitted to yosys: see ``WINDOW_LUT_PER_CONTROL_BIT``) for the window members ``c``
    (``WindowKernel.window_shape``), its line buffer's ``banks`` (``LineBuffer.banks``) and its
    elements' bits: ``WINDOW_LUT_PER_CONTROL_BIT`` a bit of its counters and coordinates
    (``control_bits``; ``WINDOW_LUT_PER_POINTWISE_CONTROL_BIT`` for a 1 x 1 window),
    ``WINDOW_LUT_PER_BANK_BIT`` a bank per element bit, and ``TURNING_LUT_PER_READ`` for each of
    its MMV x SIMD read lanes where a window wider than a pixel turns their channels over elements
    wider than a bit. O(1)."""
    turning = turns_channels(c) and element_bits > 1 and not pointwise(c)
    reads = c["MMV"] * c["SIMD"] if turning else 0
    per_control_bit = WINDOW_LUT_PER_POINTWISE_CONTROL_BIT if pointwise(c) else WINDOW_LUT_PER_CONTROL_BIT
    return (per_control_bit * control_bits(c) + WINDOW_LUT_PER_BANK_BIT * banks * element_bits
            + TURNING_LUT_PER_READ * reads)


def pointwise(c: dict[str, int]) -> bool:
    """Whether the window members ``c`` are a 1 x 1 window (a pointwise conv). O(1)."""
    return c["KH"] * c["KW"] == 1


def control_bits(c: dict[str, int]) -> int:
    """Bits of the window unit's frame counters and coordinates for the members ``c``: the input
    frame's rows and a row's elements, the output's rows and columns (``index_bits`` each). O(1)."""
    return index_bits(c["H"]) + index_bits(c["W"] * c["CIN"]) + index_bits(c["HO"]) + index_bits(c["WO"])


def turns_channels(c: dict[str, int]) -> bool:
    """Whether an ungrouped window's SIMD neither divides CIN nor is a multiple of it, so that a
    lane's channel turns from fold to fold (``TURNING_LUT_PER_READ``). O(1)."""
    return c["GROUPS"] == 1 and bool(c["CIN"] % c["SIMD"]) and bool(c["SIMD"] % c["CIN"])


def spans_positions(c: dict[str, int]) -> bool:
    """Whether the SIMD lanes of an ungrouped window (members ``c``) span window positions: SIMD >
    CIN, so one fold reads several pixels of the window (``spanning_lane_share``). A SIMD straddling
    positions (not a multiple of CIN) is one too. O(1)."""
    return c["GROUPS"] == 1 and c["SIMD"] > c["CIN"]


def spanning_lane_share(c: dict[str, int], lanes: Lanes, weight_words: int) -> float:
    """The share of ``kernel.lane_luts`` a narrow MAC lane of the window members ``c`` takes, its
    weight ROM ``weight_words`` deep (fitted to yosys: see ``SPANNING_XNOR_SHARE``): all of it
    unless the SIMD spans window positions (``spans_positions``) and the ROM is shallow (at most
    ``SHALLOW_WEIGHT_WORDS`` words, twice as many in one window fold); then ``SPANNING_XNOR_SHARE``
    for a binary lane and ``SPANNING_SHALLOW_SHARE`` for a LUT lane of at most 2 bits both,
    all for others. O(1)."""
    one_fold = window_folds(c)[1] == 1
    if not spans_positions(c) or weight_words > SHALLOW_WEIGHT_WORDS * (2 if one_fold else 1):
        return 1.0
    if lanes.kind == "xnor":
        return SPANNING_XNOR_SHARE
    return SPANNING_SHALLOW_SHARE if lanes.kind == "lut" and max(lanes.weight_bits, lanes.activation_bits) <= 2 else 1.0


def output_gearbox(c: dict[str, int]) -> Gearbox:
    """The window unit's output gearbox for the members ``c`` (``WindowKernel.window_shape``): out
    the narrowest beat dividing the output whose beats a group of MMV output pixels (MMV * COUT
    elements) takes fit RATE_MARGIN of the group's NF * SF steps; its count as wide as an output
    row's elements. In a word of a pixel's FIFO (``word_folds``: that many folds' PE results of
    the pixel, every beat whole, ``full``), or where the unit keeps none a whole group, its count
    out of the group FIFO's memory (never ``full`` as yosys sees it, even where every group is
    whole). ``serial`` (``fp_serializer``, the entry shifted out beat by beat) where the beat
    divides every entry, else the ring. With a group a word, the small CNN's conv_21 (256 elements
    to beats of 8) took 25,189 LUTs on xcup with the ring, 16,951 of them its gearbox, and 10,270
    with the serializer (2,061), yosys 0.23; the CNV w4a4's conv_21 (groups of 768 4-bit elements
    at 1 x 16 x 3) 10,910 LUTs on xc7, 2,067 the group FIFO and 3,088 the serializer, where its
    three pixels' FIFOs (a RAMB18 each) and serializer of one element take 78. O(divisors of the
    output)."""
    group_e = c["MMV"] * c["COUT"]
    folds = math.prod(window_folds(c))
    out_e = smallest_divisor(c["HO"] * c["WO"] * c["COUT"],
                             lambda d: math.ceil(group_e / d) <= max(1, int(RATE_MARGIN * folds)))
    count_bits = index_bits(c["WO"] * c["COUT"] + 1)
    k = word_folds(c)
    if k is not None:
        serial = k * c["PE"] % out_e == 0
        return Gearbox(k * c["PE"], out_e, count_bits, full=True, serial=serial,
                       element_bits=output_bits(c) if serial else ELEMENT_BITS)
    last_group_e = c["WO"] % c["MMV"] * c["COUT"]  # a row's short last group (none: 0)
    serial = group_e % out_e == 0 and last_group_e % out_e == 0
    return Gearbox(group_e, out_e, count_bits, serial=serial, element_bits=output_bits(c) if serial else ELEMENT_BITS)


def word_folds(c: dict[str, int]) -> int | None:
    """Folds a word of the window unit's output FIFO a pixel gathers: the fewest ``K`` dividing NF
    with ``K * SF >= MMV``, so that reading the group's ``MMV * NF / K`` words, a word a cycle,
    takes no more than its ``NF * SF`` steps (reading pixel after pixel, the words of the first
    come as the folds do). None where no ``K`` does (a group's steps fewer than its pixels: a max
    pool at MMV 8 and PE = C, a fold a group), where the unit keeps whole groups a word of one FIFO
    instead. O(divisors of NF)."""
    nf, sf = window_folds(c)
    return next((k for k in range(1, nf + 1) if nf % k == 0 and k * sf >= c["MMV"]), None)


def group_bits(c: dict[str, int], latency: int) -> int:
    """``GROUP_BITS``: log2 of the groups of MMV output pixels the window unit lets in flight
    (issued, not yet read out): those a ``latency``-cycle pipeline holds (one every NF * SF
    steps) and two more. O(1)."""
    nf, sf = window_folds(c)
    return max(1, (math.ceil(latency / (nf * sf)) + 2).bit_length())


def output_fifo_bits(c: dict[str, int], latency: int) -> int:
    """``FIFO_BITS``: log2 of the words of each of the window unit's output FIFOs (a pixel's, a
    word ``word_folds`` folds of it): the words of each of the ``2^group_bits`` groups in flight
    and of the next group's folds before its last, which the issue does not hold back; the groups
    where the unit keeps a group a word. With fewer the small CNN's core stalled at a residual
    fork (its 1 x 1 conv_11, 16 channels at PE 1: 645 and 709 cycles a sample in RTL with 64 and
    32 words against the model's 576; 576 with 128). The CNV w4a4's 2 x 2 max pools over 128
    channels at PE 1 keep 1,024 bytes, one RAMB18 in yosys 0.23 on xc7. O(divisors of NF)."""
    groups = group_bits(c, latency)
    k = word_folds(c)
    if k is None:
        return groups
    return index_bits(((1 << groups) + 1) * window_folds(c)[0] // k)


def groups_in_flight(c: dict[str, int], latency: int) -> int:
    """``GROUPS_IN_FLIGHT``: the groups the window unit's issue lets in flight, issued and not yet
    read out: the group FIFO's words, or as many as the pixels' FIFOs (``output_fifo_bits``, a
    power of two of words) hold with the next group's folds before its last besides (at least
    ``2^group_bits``). O(divisors of NF)."""
    k = word_folds(c)
    if k is None:
        return 1 << group_bits(c, latency)
    return (1 << output_fifo_bits(c, latency)) // (window_folds(c)[0] // k) - 1


def output_fifo_shape(c: dict[str, int], latency: int) -> tuple[int, int, int] | None:
    """(FIFOs, bits a word, words) of the window unit's output FIFOs of pixels' words: one a pixel
    of a group (MMV), a word ``word_folds`` folds' PE results at ``output_bits`` each,
    ``2^output_fifo_bits`` words. None for a FIFO of whole groups (a few words as wide as a group:
    yosys keeps them in flip-flops and LUTs, which the base price holds). O(divisors of NF)."""
    k = word_folds(c)
    if k is None:
        return None
    return (c["MMV"], k * c["PE"] * output_bits(c), 1 << output_fifo_bits(c, latency))


def output_bits(c: dict[str, int]) -> int:
    """``OB``: the bits the window unit holds an output element in from its gather on (the group
    register, the group FIFO, the serializer; each widened to a byte as it leaves): the two's
    complement width of the output's range ``LO`` .. ``HI``, 8 without one. A w1a1 CNV's bipolar
    convs (-1 .. 1: 2 bits) held 8 bits an element, their groups of up to 640 elements a FIFO word
    and a register shifting 5,120 bits. O(1)."""
    if "LO" not in c or "HI" not in c:
        return ELEMENT_BITS
    lo, hi = int(c["LO"]), int(c["HI"])
    return min(ELEMENT_BITS, max((-lo - 1).bit_length() if lo < 0 else 0, hi.bit_length()) + 1)


def offset_widths(c: dict[str, int]) -> tuple[int, int, int]:
    """Bits of a window element's row, column and element offsets in the unit's offsets ROM (one
    word per window fold, SIMD offsets a word): the window's reach in rows and columns and its
    largest element ``(KW - 1) * DW * CIN + CIN / GROUPS - 1`` within a row. O(1)."""
    kh_eff = c["DH"] * (c["KH"] - 1) + 1
    largest = (c["KW"] - 1) * c["DW"] * c["CIN"] + c["CIN"] // c["GROUPS"] - 1
    return (max(1, (kh_eff - 1).bit_length()), max(1, ((c["KW"] - 1) * c["DW"]).bit_length()),
            max(1, largest.bit_length()))


def window_unit(kernel: WindowKernel, c: dict[str, int], arrays: dict[str, Any], fold: Folding, top: str,
                macs_per_dsp: int, core: FpgaCore | None = None) -> RtlUnit:
    """The window unit's values for the members ``c`` (``WindowKernel.window_shape``)."""
    cin_g = c["CIN"] // c["GROUPS"]
    pe, simd, mmv = c["PE"], c["SIMD"], c["MMV"]
    nf, sf = window_folds(c)
    wg = math.ceil(c["WO"] / mmv)
    kh_eff = c["DH"] * (c["KH"] - 1) + 1
    buffer = line_buffer(c, kernel.window_input_width(c, fold))
    rows, row_elems, in_e = buffer.rows, buffer.row_elems, buffer.in_e
    xp = pe if c["GROUPS"] > 1 else 1
    gearbox = output_gearbox(c)
    out_e, out_total = gearbox.out_e, c["HO"] * c["WO"] * c["COUT"]
    # window offsets: element k = sf*SIMD + i of the window is (kh, kw, ci) in the weights' order
    reach = [(k // (c["KW"] * cin_g) * c["DH"], k // cin_g % c["KW"] * c["DW"], k % cin_g)
             for k in range(sf * simd)]
    dr_w, dc_w, do_w = offset_widths(c)
    element = [dc * c["CIN"] + ci for _, dc, ci in reach]
    off_w = dr_w + dc_w + do_w
    offsets = [sum((dr | dc << dr_w | e << (dr_w + dc_w)) << (off_w * i)
                   for i, ((dr, dc, _), e) in enumerate(zip(reach[f * simd:(f + 1) * simd],
                                                            element[f * simd:(f + 1) * simd], strict=True)))
               for f in range(sf)]
    go_w = max(1, c["CIN"].bit_length())
    roms = {f"{top}_offsets.mem": Rom(offsets, off_w * simd)}
    # magnitudes of a window's column and row coordinates (a row's element offset is CIN columns')
    column_reach = wg * mmv * c["SW"] + c["PL"] + c["KW"] * c["DW"]
    row_reach = c["H"] + c["SH"] + kh_eff
    values: dict[str, Any] = c | {
        "name": top, "kind": kernel.window_kind, "CIN_G": cin_g, "NF": nf, "SF": sf, "WG": wg, "KH_EFF": kh_eff,
        "ROWS": rows, "ROW_ELEMS": row_elems, "XP": xp, "IN_E": in_e, "OUT_E": out_e,
        "DR_W": dr_w, "DC_W": dc_w, "DO_W": do_w, "GO_W": go_w,
        "EB": 8, "PAD": "8'h80" if kernel.window_kind == "max" else f"8'h{c['ZX'] & 0xFF:02x}",
        "LB_BITS": index_bits(rows * row_elems), "LINE_BANKS": buffer.banked, "BANKS": buffer.banks,
        "BANK_LOG": buffer.banks.bit_length() - 1, "BANK_WORDS": buffer.bank_words,
        "LINE_MEMORIES": buffer.memories, "LANE_ELEMENT": buffer.lane_element,
        "IN_LOG": in_e.bit_length() - 1, "SLOT_BITS": index_bits(rows), "POS_BITS": index_bits(row_elems),
        "HELD_BITS": rows.bit_length() + 1, "DONE_BITS": (c["H"] + rows + kh_eff).bit_length() + 1,
        "HO_BITS": index_bits(c["HO"]), "FRAME_ROW_BITS": index_bits(c["H"]), "WG_BITS": index_bits(wg),
        "NF_BITS": index_bits(nf),
        "SF_BITS": index_bits(sf), "WA_BITS": index_bits(nf * sf),
        "CNT_BITS": gearbox.count_bits,
        "POS_W": signed_bits(max(column_reach, row_reach)) + 1,
        "COORD_W": signed_bits(max(column_reach * c["CIN"], row_reach)) + 1,
        "GEAR_BITS": gearbox.cap_bits, "SERIAL": gearbox.serial, "OB": output_bits(c),
        "offsets_file": f"{top}_offsets.mem", "offsets_attribute": rom_style(sf),
        "groups_attribute": rom_style(nf),
        "macs_per_dsp": macs_per_dsp,
    }
    if c["GROUPS"] > 1:  # every PE lane reads its own group's input channels
        cout_g = c["COUT"] // c["GROUPS"]
        channel_offsets = [pack_lanes([(co // cout_g) * cin_g for co in range(f * pe, (f + 1) * pe)], go_w)
                           for f in range(nf)]
        roms[f"{top}_groups.mem"] = Rom(channel_offsets, go_w * pe)
        values["groups_file"] = f"{top}_groups.mem"
    values |= kernel.window_values(c, arrays, top, nf, sf, macs_per_dsp, xp, roms, core)
    latency = kernel.pipeline_latency(c)
    k = word_folds(c)
    folds_a_word = k or nf  # a FIFO of whole groups gathers all NF folds a word
    in_flight = groups_in_flight(c, latency)
    values |= {"GROUP_BITS": group_bits(c, latency), "FIFO_BITS": output_fifo_bits(c, latency),
               "GROUPS_IN_FLIGHT": in_flight, "IN_FLIGHT_BITS": in_flight.bit_length(),
               "PIXEL_FIFOS": k is not None, "WORD_FOLDS": folds_a_word, "WORD_FOLD_BITS": index_bits(folds_a_word),
               "OUT_WORD_BITS": index_bits(nf // folds_a_word), "PIXEL_BITS": index_bits(mmv),
               "LAST_PIXELS": c["WO"] - (wg - 1) * mmv}
    return RtlUnit(WINDOW_TEMPLATE, values, roms, ((PORT_IN, in_e, c["H"] * row_elems),),
                   (PORT_OUT, out_e, out_total))
