"""A low-bit network's first layer on a DSP48E2 core (issue 20): its int8 products of 4-bit
weights by 8-bit pixels pair two to a DSP (WP486), and the sums the pairs leave to the fabric
are priced (``Conv2d.paired_products``): yosys maps exactly the estimate's DSPs and its LUTs
are within 25 % of the estimate's."""

from __future__ import annotations

from rtl_cases import lowbit_conv_case, with_conv_thresholds

from fpgaplace.board.load import load_board
from fpgaplace.codegen.rtl import render_op
from fpgaplace.hw import KERNELS, Folding
from fpgaplace.hw.conv import PAIRED_PRODUCT_LUTS
from fpgaplace.hw.kernel import with_precision
from fpgaplace.sim import yosys

LUT_TOLERANCE = 0.25  # issue 20: LUT estimates within 25 % of yosys


def test_a_first_layer_s_paired_products_are_priced_as_yosys_builds_them(tmp_path):
    """A CNV w4a4's first layer (3 -> 64 channels, 3 x 3 on a 32 x 32 frame, a threshold stage to
    4-bit codes) at PE x SIMD x MMV 2 x 9 x 3 on kv260's core, as compile folded the CNV there:
    pixel pairs on DSP48E2s (36 DSPs) and the lanes' sums in LUTs. Without ``PAIRED_PRODUCT_LUTS``
    it was priced 2,540 LUTs against yosys' 3,520 (0.72). About a minute of yosys."""
    core = load_board("kv260").cores[0]
    case = lowbit_conv_case(32, 3, 64, 3, 1, 0, 1, Folding(2, 9, 3), 4, 8, False, seed=5)
    config, arrays, _, fold = with_conv_thresholds(case, 0, 15, 5)
    op = render_op("conv2d", config, arrays, fold, 1, macs_per_dsp=core.macs_per_dsp, core=core)
    assert "pixel pairs" in op.module.files[f"{op.module.top}.v"]
    conv = KERNELS["conv2d"]
    geometry = with_precision(conv.config_geometry(config), 4, 8)
    estimate = conv.resources(geometry, fold, core)
    assert conv.paired_products(geometry, fold, core).lut == round(PAIRED_PRODUCT_LUTS * fold.lanes)
    got = yosys.synthesize(op.module, tmp_path, "xcup")
    assert got.dsp == estimate.dsp == 36, (got, estimate)
    luts = got.lut - got.output_lut
    assert abs(luts - estimate.lut) <= LUT_TOLERANCE * luts, (luts, estimate)
