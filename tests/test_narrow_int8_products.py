"""int8 products of a narrow operand (issue 20): a low-bit network's first layer (narrow weights by
8-bit pixels, paired two to a DSP48E2: WP486) and a dense unit of 4-bit weights on 8-bit codes take
LUTs beside their lanes' price (``Kernel.narrow_int8_products``): on a DSP48E2 a term a lane, and on
any family one for each pixel beyond the first. yosys maps exactly the estimate's DSPs and its LUTs
are within 25 % of the estimate's."""

from __future__ import annotations

import pytest
from rtl_cases import lowbit_conv_case, lowbit_dense_module, with_conv_thresholds

from fpgaplace.board.load import load_board
from fpgaplace.codegen.rtl import render_op
from fpgaplace.hw import KERNELS, Folding
from fpgaplace.hw.kernel import WIDE_DSP_NARROW_PRODUCT_LUTS, with_precision
from fpgaplace.sim import yosys

LUT_TOLERANCE = 0.25  # issue 20: LUT estimates within 25 % of yosys
KV260 = load_board("kv260").cores[0]


def test_a_first_layer_s_paired_products_are_priced_as_yosys_builds_them(tmp_path):
    """A CNV w4a4's first layer (3 -> 64 channels, 3 x 3 on a 32 x 32 frame, a threshold stage to
    4-bit codes) at PE x SIMD x MMV 2 x 9 x 3 on kv260's core, as compile folded the CNV there:
    pixel pairs on DSP48E2s (36 DSPs) and the lanes' sums in LUTs. Without
    ``WIDE_DSP_NARROW_PRODUCT_LUTS`` it was priced 2,540 LUTs against yosys' 3,520 (0.72). About a
    minute of yosys."""
    case = lowbit_conv_case(32, 3, 64, 3, 1, 0, 1, Folding(2, 9, 3), 4, 8, False, seed=5)
    config, arrays, _, fold = with_conv_thresholds(case, 0, 15, 5)
    op = render_op("conv2d", config, arrays, fold, 1, macs_per_dsp=KV260.macs_per_dsp, core=KV260)
    assert "pixel pairs" in op.module.files[f"{op.module.top}.v"]
    conv = KERNELS["conv2d"]
    geometry = with_precision(conv.config_geometry(config), 4, 8)
    estimate = conv.resources(geometry, fold, KV260)
    on_xc7 = conv.narrow_int8_products(geometry, fold, load_board("pynq-z2").cores[0])  # a DSP48E1
    assert on_xc7 > 0  # the two pixels beyond the first
    wide_dsp = conv.narrow_int8_products(geometry, fold, KV260) - on_xc7
    assert wide_dsp == pytest.approx(WIDE_DSP_NARROW_PRODUCT_LUTS * fold.lanes)
    got = yosys.synthesize(op.module, tmp_path, "xcup")
    assert got.dsp == estimate.dsp == 36, (got, estimate)
    luts = got.lut - got.output_lut
    assert abs(luts - estimate.lut) <= LUT_TOLERANCE * luts, (luts, estimate)


def test_a_first_layer_s_pixels_beyond_the_first_are_priced_on_a_dsp48e1(tmp_path):
    """The CNV w2a2's first layer (3 -> 64 channels, w2a8, a threshold stage to 2-bit codes) at PE x
    SIMD x MMV 1 x 9 x 5 on pynq-z2's core, as compile folded it there: 45 DSP48E1s, one product each.
    Its LUTs but the output's are within 25 % of the estimate (without the pixels' term, 1,126 against
    yosys 0.23's 1,628: 0.69). About 20 s of yosys."""
    core = load_board("pynq-z2").cores[0]
    case = lowbit_conv_case(32, 3, 64, 3, 1, 0, 1, Folding(1, 9, 5), 2, 8, False, seed=5)
    config, arrays, _, fold = with_conv_thresholds(case, 0, 3, 5)
    op = render_op("conv2d", config, arrays, fold, 1, macs_per_dsp=core.macs_per_dsp, core=core)
    conv = KERNELS["conv2d"]
    estimate = conv.resources(with_precision(conv.config_geometry(config), 2, 8), fold, core)
    got = yosys.synthesize(op.module, tmp_path, "xc7")
    assert got.dsp == estimate.dsp == 45, (got, estimate)
    luts = got.lut - got.output_lut
    assert abs(luts - estimate.lut) <= LUT_TOLERANCE * luts, (luts, estimate)


def test_a_dense_unit_of_narrow_weights_on_8_bit_codes_is_priced_as_yosys_builds_it(tmp_path):
    """A dense unit 64 -> 16 of 4-bit weights on 8-bit codes at PE x SIMD 4 x 8 on kv260's core:
    channel pairs on 16 DSP48E2s and a requantizer's. Its LUTs are within 25 % of the estimate (948
    without ``WIDE_DSP_NARROW_PRODUCT_LUTS`` against yosys 0.23's 1,473: 0.64). About 15 s of yosys."""
    module, geometry, lanes = lowbit_dense_module(64, 16, 4, 8, 4, 8, KV260)
    assert lanes.kind == "dsp" and lanes.pack == 2, lanes
    estimate = KERNELS["dense"].resources(geometry, Folding(4, 8), KV260)
    got = yosys.synthesize(module, tmp_path, "xcup")
    assert got.dsp == estimate.dsp == 17, (got, estimate)
    assert abs(got.lut - estimate.lut) <= LUT_TOLERANCE * got.lut, (got, estimate)
