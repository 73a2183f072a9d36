"""Lanes of 1-bit weights at a wide PE (issue 20): the channels that read one input share what
depends on it alone in synthesis (``kernel.SHARED_LANE_LUTS``), so the op library prices a lane
below what one at PE 2 takes; yosys agrees within 25 %. Its own file so that pytest-xdist (``--dist
loadfile``) runs it beside the other low-bit RTL tests."""

from __future__ import annotations

import pytest
from test_lowbit_conv_rtl import LUT_TOLERANCE, thresholded_unit

from fpgaplace.board.load import load_board
from fpgaplace.hw import Folding


@pytest.mark.slow
@pytest.mark.parametrize("input_bits", [1, 2])
def test_one_bit_weight_lanes_at_a_wide_pe_are_priced_as_synthesis_shares_them(tmp_path, input_bits):
    """A 3 x 3 conv 16 -> 32 of +-1 weights at PE x SIMD 32 x 16: the 32 channels read each input,
    and yosys shares what depends on the input alone, so a lane takes fewer LUTs than one at PE 2
    (``kernel.SHARED_LANE_LUTS``). The unit's LUTs but the output's are within 25 % of the estimate
    on xc7. At one cost a lane, w1a1 was priced 1.54 of yosys 0.23 and w1a2 1.30. About 30 s of
    yosys each."""
    args = (5, 16, 32, 3, 1, 0, 1, Folding(32, 16, 1), 1, input_bits, False)
    got, estimate = thresholded_unit(args, load_board("pynq-z2").cores[0], "xc7", tmp_path)
    luts = got.lut - got.output_lut
    assert abs(luts - estimate.lut) <= LUT_TOLERANCE * luts, (luts, estimate)
