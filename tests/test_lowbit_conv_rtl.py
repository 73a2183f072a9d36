"""The RTL window unit's convolutions below int8 (issue 20): a threshold output stage in place of
the requantizers (``rtl/threshold.v.j2``, the dense unit's, with the same ROM words), bit-exact in
cocotb/Icarus against the integer reference under backpressure, at the cycles of the int8 unit."""

from __future__ import annotations

import numpy as np
from rtl_cases import conv_case, threshold_conv_case

from fpgaplace.codegen.rtl import render_op
from fpgaplace.hw import KERNELS, Folding
from fpgaplace.hw.registry import window_geometry
from fpgaplace.sim.rtl import simulate_stream

CYCLE_TOLERANCE = 0.10  # the window unit's steady state against the op library's model (test_rtl_ops)


def simulated(config, arrays, inputs, fold, folder):
    """The rendered conv unit simulated on ``inputs`` against ``Conv2d.reference`` (the kernel's
    integer reference: ``threshold.multithreshold`` of the accumulator behind a threshold stage)."""
    model = KERNELS["conv2d"].cycles(window_geometry("conv2d", config), fold)
    op = render_op("conv2d", config, arrays, fold, model)
    expected = np.stack([KERNELS["conv2d"].reference(config, arrays, [x]).reshape(-1) for x in inputs])
    result = simulate_stream(op, [inputs], expected, folder, model, config, seed=1, steady_vectors=4)
    return op, expected, result


def test_conv_threshold_stage_bit_exact_under_backpressure(tmp_path):
    """MobileNetV1 w4a4's first layer in small: int8 lanes, 15 thresholds a channel (4-bit unsigned
    out), two pixels and two channels a fold: every output equals the integer reference under
    input gaps and backpressure and back to back; comparators replace the requantizers; the
    steady state takes the int8 unit's cycles for the same folding (within the model's tolerance)."""
    fold = Folding(2, 9, 2)
    config, arrays, inputs, _ = threshold_conv_case(6, 3, 4, 3, 1, 1, fold, 0, 15, seed=3)
    op, expected, result = simulated(config, arrays, inputs, fold, tmp_path / "thresholds")
    assert len(np.unique(expected)) >= 12, "the case spreads the codes"
    assert result.random.mismatches == 0 and result.steady.mismatches == 0
    unit, stage = op.module.files["fp_conv2d.v"].split("module fp_conv2d_threshold")
    assert "fp_requant_var #(" not in unit and "fp_conv2d_threshold thresholds (" in unit and "T = 15" in stage
    int8 = conv_case(6, 6, 3, 4, 3, 1, 1, 1, fold, seed=3)
    _, _, requantized = simulated(*int8[:3], fold, tmp_path / "int8")
    assert requantized.random.mismatches == 0
    assert result.steady.cycles_per_vector == requantized.steady.cycles_per_vector
    assert abs(result.cycle_error) <= CYCLE_TOLERANCE, (result.steady.cycles_per_vector, result.model_cycles)
    g = KERNELS["conv2d"].config_geometry(config)
    assert g.shape["T"] == 15 and KERNELS["conv2d"].requantizers(g, fold) == 0
    assert KERNELS["conv2d"].dsps(g, fold, None) == KERNELS["conv2d"].mac_dsps(g, fold, None)
