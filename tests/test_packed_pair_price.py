"""Lanes packed several to a DSP whose unit leaves a short group (issue 20): at PE 2 a DSP48E2 that
packs three w4a4 products holds two, and synthesis takes fewer LUTs apart for them
(``kernel.SHORT_GROUP_LANE_SHARE``). Its own file so that pytest-xdist (``--dist loadfile``) runs
it beside the other low-bit RTL tests."""

from __future__ import annotations

from dataclasses import replace

import pytest
from test_lowbit_conv_rtl import LUT_TOLERANCE, thresholded_unit

from fpgaplace.board.load import load_board
from fpgaplace.hw import Folding
from fpgaplace.hw.kernel import lane_choice


@pytest.mark.slow
def test_a_pointwise_unit_of_packed_pairs_is_priced_within_a_quarter_of_yosys(tmp_path):
    """A 1 x 1 conv 32 -> 64 of w4a4 (4-bit unsigned inputs, a 15-threshold stage) at PE x SIMD x
    MMV 2 x 32 x 2 on zcu104's core with packed DSP lanes: 64 DSPs of two products each, as the
    estimate counts, and the unit's LUTs but the output's within 25 % of the estimate (yosys 0.23
    -family xcup). At a whole packed lane a pair's lanes were priced 1.32 of yosys (the MobileNetV1
    w4a4's conv_13 at this folding 1.23). A few minutes of yosys."""
    core = replace(load_board("zcu104").cores[0], narrow_lanes="dsp")
    assert lane_choice(core, 4, 4).pack == 3
    args = (8, 32, 64, 1, 1, 0, 1, Folding(2, 32, 2), 4, 4, True)
    got, estimate = thresholded_unit(args, core, "xcup", tmp_path)
    assert got.dsp == estimate.dsp == 64, (got, estimate)
    luts = got.lut - got.output_lut
    assert abs(luts - estimate.lut) <= LUT_TOLERANCE * luts, (luts, estimate)
