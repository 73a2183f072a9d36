"""On-chip memories: how a bank of ``depth`` words of ``width_bits`` maps onto a family's blocks.

UltraScale+ and 7-series (``memory_blocks``): LUTRAM up to 64 words deep (one LUT6 holds 64 x 1
bit), URAM (4096 x 72) where asked for and deep, else BRAM36 in the aspect ratio that takes the
fewest blocks (UG573: 512 x 72 to 32K x 1). ECP5 (``ecp5_memory``): yosys' ``memory_libmap``
choice between LUTRAM and DP16KD/PDPW16KD EBRs. Every price of a weight bank, line buffer, table
or FIFO reads these, so the cost model, the report and the generated designs count blocks alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

LUTRAM_MAX_DEPTH = 64  # banks at most this deep go to LUTRAM (one LUT holds 64 x 1 bit)
SINGLE_PORT_LUTRAM_MAX_DEPTH = 256  # the deepest single-port LUTRAM cell (RAM256X1S), ``single_port_ram_style``


URAM_MIN_DEPTH = 2048  # banks at least this deep go to URAM when the core has it


BRAM36_SHAPES = ((72, 512), (36, 1024), (18, 2048), (9, 4096), (4, 8192), (2, 16384), (1, 32768))
# yosys 0.23's costs of a memory's cells (share/xilinx/lutrams_xc5v.txt, 7-series: $__XILINX_LUTRAM_SDP_, 64
# words of 3 bits or 32 of 6, a RAM64M or RAM32M of four LUTs, cost 8 of which 7 scale with the bits a cell
# uses (memlib.md's widthscale); lutrams_xcu.txt, UltraScale+: 64 of 7 or 32 of 14, a RAM64M8 or RAM32M16
# of eight LUTs, cost 16 all of which scales; brams_xc4v.txt for both: $__XILINX_BLOCKRAM_SDP_ at HALF, a
# RAMB18, cost 129): memory_libmap (passes/memory/memory_libmap.cc, handle_geom) builds a memory of the
# cheapest (``yosys_lutram``), a memory deeper than a cell adding ``YOSYS_LUTRAM_MUX_COST`` (its
# FACTOR_MUX and FACTOR_DEMUX) for each data bit of the read multiplexer over each row of cells past the
# first and for each row's write enable. The rule keeps the choices seen on xc7 (4 x 70, 4 x 240, 2 x 640
# and 1 x 1,280 bits in LUTRAM, 16 x 150 and 2 x 1,280 in a RAMB18) and matches the cells yosys built
# for line-buffer banks on both families: 2 x 80 bits in two RAM64M on xc7, three RAM32M16 on xcup (24
# LUTs); 1 x 160 in three RAM64M or three RAM64M8; 2 x 40 or 4 x 25 in one cell of either: 96 such banks
# of a w1a2 unit at MMV 3 took 371 and 380 LUTs more on xcup than on xc7, this rule 384.
YOSYS_RAMB18_COST, YOSYS_LUTRAM_MUX_COST = 129, 0.5


@dataclass(frozen=True)
class LutramLibrary:
    """A family's simple dual port LUTRAM cells as yosys' ``memory_libmap`` weighs them: their
    (bits, words) ``shapes``, the LUTs a cell takes, its ``cost`` and the part of it that scales
    with the bits a cell uses (``widthscale``)."""

    shapes: tuple[tuple[int, int], ...]
    cell_luts: int
    cost: float
    widthscale: float


YOSYS_LUTRAMS = {"xc7": LutramLibrary(((3, 64), (6, 32)), 4, 8, 7),
                 "xcup": LutramLibrary(((7, 64), (14, 32)), 8, 16, 16)}
BRAM18_SHAPES = ((36, 512), (18, 1024), (9, 2048), (4, 4096), (2, 8192), (1, 16384))  # a RAMB18, simple dual port at 36


URAM_SHAPE = (72, 4096)


@cache
def memory_blocks(width_bits: int, depth: int, uram: bool = False) -> tuple[int, int, int]:
    """(BRAM36, URAM, LUT) for one bank of ``depth`` words of ``width_bits``: LUTRAM when
    shallow, URAM (4096 x 72 words) when asked for and the bank is deep, else BRAM36 of the
    cheapest aspect ratio."""
    if depth <= 0 or width_bits <= 0:
        return (0, 0, 0)
    if depth <= LUTRAM_MAX_DEPTH:
        return (0, 0, width_bits * math.ceil(depth / 64))
    if uram and depth >= URAM_MIN_DEPTH:
        return (0, uram_blocks(width_bits, depth), 0)
    return (min(math.ceil(width_bits / w) * math.ceil(depth / d) for w, d in BRAM36_SHAPES), 0, 0)


def bram18_halves(width_bits: int, depth: int) -> int:
    """Xilinx RAMB18s (half a BRAM36 each, ``BRAM18_SHAPES``) of one memory of ``depth`` words of
    ``width_bits``, the cheapest aspect ratio: what yosys ``synth_xilinx`` maps a small memory of
    its own to, where ``memory_blocks`` counts whole BRAM36s. O(1)."""
    if depth <= 0 or width_bits <= 0:
        return 0
    return min(math.ceil(width_bits / w) * math.ceil(depth / d) for w, d in BRAM18_SHAPES)


def yosys_lutram_layout(width_bits: int, depth: int, family: str = "xc7") -> tuple[float, int, int]:
    """(cost, rows, columns) of the cheapest of yosys' simple dual port LUTRAM shapes of
    ``family`` (``YOSYS_LUTRAMS``) for a written memory of ``depth`` words of ``width_bits``:
    ``rows`` cells deep, ``columns`` wide, each costing the unscaled part and its share of the
    scaled part by the bits it holds, and the read multiplexer and write enables over the rows
    (``YOSYS_LUTRAM_MUX_COST``). O(1)."""
    library = YOSYS_LUTRAMS[family]
    fixed = library.cost - library.widthscale
    options = []
    for bits, words in library.shapes:
        rows, columns = math.ceil(depth / words), math.ceil(width_bits / bits)
        read_and_enables = YOSYS_LUTRAM_MUX_COST * ((rows - 1) * width_bits + (rows if rows > 1 else 0))
        cost = fixed * rows * columns + library.widthscale * rows * width_bits / bits + read_and_enables
        options.append((cost, rows, columns))
    return min(options)


def yosys_lutram(width_bits: int, depth: int, family: str = "xc7") -> bool:
    """Whether yosys ``synth_xilinx`` (memory_libmap) builds a written memory of ``depth`` words of
    ``width_bits`` in LUTRAM rather than block RAM on ``family``: where its LUTRAM cells
    (``yosys_lutram_layout``) cost no more than its RAMB18s (``YOSYS_RAMB18_COST`` each,
    ``bram18_halves``). Seen on a low-bit conv's line-buffer copies, yosys 0.23 xc7: 4 x 70,
    4 x 240, 2 x 640 and 1 x 1,280 bits in LUTRAM, 16 x 150 and 2 x 1,280 in a RAMB18. O(1)."""
    cost = yosys_lutram_layout(width_bits, depth, family)[0]
    return cost <= YOSYS_RAMB18_COST * bram18_halves(width_bits, depth)


def yosys_lutram_luts(width_bits: int, depth: int, family: str = "xc7") -> int:
    """LUTs of a written memory yosys builds in LUTRAM on ``family`` (``yosys_lutram``): a cell's
    (``LutramLibrary.cell_luts``) for each cell and, more than a row of cells deep, a write enable
    a row and a 4:1 multiplexer a data bit for every four rows (yosys 0.23 xc7 of the 30 LUTRAM
    memories of the fit above: within 20 % but 1 x 128, one RAM128X1D of 4 LUTs priced 11; the
    rows no multiple of four under; a w2a2 conv's 9 line-buffer copies of 2 x 640 bits: 90
    RAM64M). O(1)."""
    _, rows, columns = yosys_lutram_layout(width_bits, depth, family)
    read = rows + width_bits * math.ceil(rows / 4) if rows > 1 else 0
    return YOSYS_LUTRAMS[family].cell_luts * rows * columns + read


def written_memory(width_bits: int, depth: int, family: str) -> tuple[int, int]:
    """(half blocks, LUTs) of one memory of ``depth`` words of ``width_bits`` with one write and
    one read port, as yosys maps it on ``family``: on ECP5 ``ecp5_memory`` (EBRs of 18 Kbit), on
    Xilinx LUTRAM where ``yosys_lutram`` chooses it (``yosys_lutram_luts``), else RAMB18s
    (``bram18_halves``). Either way two half blocks make the op library's BRAM36. O(1)."""
    if depth <= 0 or width_bits <= 0:
        return (0, 0)
    if family == "ecp5":
        return ecp5_memory(width_bits, depth)
    if yosys_lutram(width_bits, depth, family):
        return (0, yosys_lutram_luts(width_bits, depth, family))
    return (bram18_halves(width_bits, depth), 0)


def rom_columns(width_bits: int, depth: int) -> int:
    """Bit columns of a constant ROM of ``depth`` words that synthesis keeps: no more than there
    are distinct non-constant functions of ``depth`` words, ``2^depth - 2``, as it shares equal
    columns and drops constant ones (yosys 0.23 ``synth_xilinx``: a 4-word ROM of 900 threshold
    bits took no LUT beyond the unit's others; the registered read of an 8-word ROM of 512 weight
    bits, 217 FFs). O(1)."""
    if depth <= 0 or width_bits <= 0:
        return 0
    return width_bits if depth >= width_bits.bit_length() + 1 else min(width_bits, 2**depth - 2)


def rom_luts(width_bits: int, depth: int) -> int:
    """LUTs of a shallow constant ROM (at most ``LUTRAM_MAX_DEPTH`` words: no block RAM) built as
    logic: one LUT a bit of the word (``rom_columns``: those synthesis keeps) for each 64 words
    (``memory_blocks``' LUTRAM). O(1)."""
    return rom_columns(width_bits, depth) * math.ceil(max(0, depth) / 64)


def uram_blocks(width_bits: int, depth: int) -> int:
    """URAMs (4096 x 72 words, one aspect) of a bank of ``depth`` words of ``width_bits``. O(1)."""
    w, d = URAM_SHAPE
    return math.ceil(width_bits / w) * math.ceil(depth / d)


EBR_SHAPES = ((36, 512), (18, 1024), (9, 2048), (4, 4096), (2, 8192), (1, 16384))  # ECP5 DP16KD / PDPW16KD
EBR_COST, LUTRAM_COST, LUTRAM_MUX_COST = 128, 4, 0.39  # yosys' memory_libmap: an EBR, a DPR16X4, a mux bit


def rom_style(depth: int) -> str:
    """The Verilog attribute an RTL unit puts on a ROM of ``depth`` words: none up to
    ``LUTRAM_MAX_DEPTH`` (LUTs), else block RAM, so that the synthesiser maps every ROM as
    ``ecp5_rom`` prices it (without it yosys 0.70 kept a window unit's 72-word offsets ROM in logic
    and put a 288-word one in an EBR). O(1)."""
    return "" if depth <= LUTRAM_MAX_DEPTH else '(* rom_style = "block" *) '


def single_port_ram_style(depth: int) -> str:
    """The Verilog attribute an RTL unit puts on a memory of ``depth`` words written and read at
    one address (single port: the dense unit's buffer of the input vector): block RAM beyond
    ``SINGLE_PORT_LUTRAM_MAX_DEPTH`` words, whose LUTRAM yosys 0.23 ``synth_xilinx -family xcup``
    cannot map (its UltraScale library offers single-port LUTRAM 65,536 words deep, its map file
    only up to 256: "invalid OPTION_ABITS/WIDTH combination"; ResNet-50's classifier, 2,048 words
    of one element). O(1)."""
    return "" if depth <= SINGLE_PORT_LUTRAM_MAX_DEPTH else '(* ram_style = "block" *) '


def ecp5_rom(width_bits: int, depth: int) -> tuple[int, int]:
    """(EBRs of 18 Kbit, LUTs) of one ECP5 ROM of ``depth`` words of ``width_bits``, as the RTL op
    library declares its weight, channel and offset ROMs: up to ``LUTRAM_MAX_DEPTH`` words a LUT
    ROM (one op-library LUT a bit for each 64 words, as ``memory_blocks``), deeper ones
    ``rom_style = "block"``, EBRs of the cheapest aspect ratio (yosys 0.70 maps a 32 x 1152 weight
    ROM to three PDPW16KD of 36 x 512, its initial contents in them). O(1)."""
    if depth <= 0 or width_bits <= 0:
        return (0, 0)
    if depth <= LUTRAM_MAX_DEPTH:
        return (0, width_bits * math.ceil(depth / 64))
    return (min(math.ceil(width_bits / w) * math.ceil(depth / d) for w, d in EBR_SHAPES), 0)


@cache
def ecp5_memory(width_bits: int, depth: int) -> tuple[int, int]:
    """(EBRs of 18 Kbit, LUTs) of one ECP5 memory of ``depth`` words of ``width_bits`` with one
    write and one read port, as yosys 0.70's ``memory_libmap`` maps it: LUTRAM (TRELLIS_DPR16X4,
    16 x 4 bits; one op-library LUT each, as 64 bits of a LUT6) while its cost, 4 a DPR16X4 plus
    0.39 per bit of the read mux over the 16-word chunks, is at most an EBR's 128, else EBRs of the
    cheapest aspect ratio. The 0.39 is fitted to yosys' choice on 22 shapes (``synth_ecp5 -run
    begin:map_ffram`` of one such memory, 2 .. 32 bits by 48 .. 512 words: 8 x 176, 16 x 96, 24 x 64
    and 32 x 48 LUTRAM; 8 x 184, 12 x 128, 4 x 384 and 32 x 64 one EBR; any value in (0.381, 0.4]
    fits them all). Sources: yosys techlibs/lattice/brams_16kd.txt, lutrams_trellis.txt. O(1)."""
    if depth <= 0 or width_bits <= 0:
        return (0, 0)
    chunks = math.ceil(depth / 16)
    luts = math.ceil(width_bits / 4) * chunks
    if LUTRAM_COST * luts + LUTRAM_MUX_COST * (chunks - 1) * width_bits <= EBR_COST:
        return (0, luts)
    return (min(math.ceil(width_bits / w) * math.ceil(depth / d) for w, d in EBR_SHAPES), 0)


