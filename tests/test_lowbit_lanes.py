"""Lanes at their real width (issue 20, item 2): the RTL dense unit with 1-, 2- and 4-bit weights
and activations (+-1 as XNOR-popcount, LUT shift-and-add lanes, or several narrow products packed
into one multiplier) is bit-exact with the integer reference in cocotb under backpressure and
takes the op library's cycles exactly; yosys maps exactly the op library's DSPs on every family
and LUTs within 25 % of its estimate; the LUT-or-DSP choice is the op library's one definition."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from rtl_cases import lowbit_dense_case, lowbit_dense_module, simulate_dense

from fpgaplace.board.load import load_board
from fpgaplace.board.model import FAMILIES
from fpgaplace.codegen.rtl import render_dense, render_op
from fpgaplace.hw import KERNELS, Folding
from fpgaplace.hw.kernel import (
    Lanes,
    lane_choice,
    lane_share,
    macs_per_dsp,
    narrow_pack,
    packed_dsps,
    with_precision,
)
from fpgaplace.hw.registry import dense_geometry
from fpgaplace.sim import yosys
from fpgaplace.util.errors import FpgaplaceError

LUT_TOLERANCE = 0.25


def packed(wb: int, xb: int, core=None) -> Lanes:
    """Narrow lanes packed into multipliers as the core's family takes them."""
    return Lanes("dsp", wb, xb, narrow_pack(core, wb, xb), wb + xb)


LANES = {  # name: (weight bits, activation bits, unsigned activations, ternary weights, lanes)
    "binary xnor": (1, 1, False, False, Lanes("xnor", 1, 1)),
    "ternary weights, 2-bit unsigned inputs": (2, 2, True, True, Lanes("lut", 2, 2)),
    "w4a4 unsigned on LUTs": (4, 4, True, False, Lanes("lut", 4, 4)),
    "binary weights, 4-bit inputs": (1, 4, False, False, Lanes("lut", 1, 4)),
    "w4a4 packed three to a multiplier": (4, 4, False, False, packed(4, 4)),
    "w2a2 unsigned packed": (2, 2, True, False, packed(2, 2)),
    "w2a4 packed": (2, 4, False, False, packed(2, 4)),
}


@pytest.mark.parametrize("name", sorted(LANES))
def test_narrow_lanes_bit_exact_under_backpressure_and_cycles_equal_the_model(tmp_path, name):
    wb, xb, unsigned, ternary, lanes = LANES[name]
    config, arrays, vectors = lowbit_dense_case(16, 6, wb, xb, unsigned, seed=wb * 10 + xb, samples=5)
    if ternary:
        arrays["w"] = np.clip(arrays["w"], -1, 1).astype(np.int8)
    config |= {"PE": 3, "SIMD": 4}
    result = simulate_dense(config, arrays, vectors, tmp_path, seed=7, steady_vectors=6, lanes=lanes)
    assert result.random.mismatches == 0 and result.steady.mismatches == 0, name
    assert result.random.vectors == 5
    assert result.steady.cycles_per_vector == result.model_cycles == (6 // 3) * (16 // 4)


def test_the_weight_rom_holds_weights_at_their_width(tmp_path):
    config, arrays, _ = lowbit_dense_case(16, 6, 2, 2, False, seed=1)
    for wb, lanes in ((2, Lanes("lut", 2, 2)), (1, Lanes("xnor", 1, 1))):
        w = np.where(arrays["w"] >= 0, 1, -1).astype(np.int8) if wb == 1 else arrays["w"]
        module = render_dense(config | {"PE": 3, "SIMD": 4, "WB": wb, "XB": wb}, arrays | {"w": w}, lanes=lanes)
        words = module.files["fp_dense_weights.mem"].split()
        assert len(words) == (6 // 3) * (16 // 4)  # NF * SF words of PE * SIMD weights
        assert {len(word) for word in words} == {-(-3 * 4 * wb // 4)}  # hex digits of 12 weights at wb bits


def test_weights_outside_their_width_are_a_one_line_error():
    config, arrays, _ = lowbit_dense_case(16, 6, 2, 2, False, seed=1)
    with pytest.raises(FpgaplaceError, match=r"rtl dense: w holds values outside 2-bit weights \(\[-2, 1\]\)"):
        render_dense(config | {"PE": 3, "SIMD": 4}, arrays | {"w": arrays["w"] * 2})
    with pytest.raises(FpgaplaceError, match=r"outside 1-bit weights \(\+-1\)"):
        render_dense(config | {"PE": 3, "SIMD": 4, "WB": 1}, arrays | {"w": np.zeros_like(arrays["w"])})
    with pytest.raises(FpgaplaceError, match="rtl dense XB: expected one of 1, 2, 4, 8, 16, 32 bits, got 3"):
        render_dense(config | {"PE": 3, "SIMD": 4, "XB": 3}, arrays)


def test_lane_choice_takes_the_smaller_share_of_the_core():
    """Binary lanes are XNORs, a +-1 operand makes LUT lanes, 8 bits keep the int8 DSP rule, and
    2-4-bit lanes go to DSPs only where a packed lane takes a smaller share of the core's DSPs than
    a LUT lane of its LUTs; the cost model follows."""
    core = load_board("pynq-z2").cores[0]  # 19,680 LUTs / 88 DSPs: a third of a DSP is the larger share
    dsp_rich = replace(core, lut=core.dsp * 10)  # 880 LUTs: a LUT lane's 37 is the larger share
    assert lane_choice(core, 1, 1).kind == "xnor" and lane_choice(core, 1, 4).kind == "lut"
    assert lane_choice(core, 8, 8) == Lanes("dsp", 8, 8, core.macs_per_dsp)
    g = with_precision(dense_geometry(64, 16), 4, 4)
    fold = Folding(8, 8)
    assert lane_choice(core, 4, 4).kind == "lut" and KERNELS["dense"].mac_dsps(g, fold, core) == 0
    assert macs_per_dsp(core, 4) == 0
    choice = lane_choice(dsp_rich, 4, 4)
    assert choice == packed(4, 4, dsp_rich) and choice.pack == 3  # 4-bit weights 8 bits apart on 25 bits
    assert KERNELS["dense"].mac_dsps(g, fold, dsp_rich) == 8 * packed_dsps(choice, 8, dsp_rich) == 8 * 3
    assert KERNELS["dense"].ideal_cycles(g, dsp_rich) < KERNELS["dense"].ideal_cycles(
        with_precision(g, 8, 8), dsp_rich), "packed narrow lanes cost less than int8 ones"
    kv260 = load_board("kv260").cores[0]  # 87,296 LUTs, 998 DSPs: a DSP is worth 87 LUTs by their ratio
    assert lane_choice(kv260, 4, 4).kind == "dsp", "a third of a DSP there is a smaller share than 37 LUTs"
    assert lane_share(lane_choice(kv260, 4, 4), kv260) < lane_share(Lanes("lut", 4, 4), kv260)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["xc7", "xcup", "ecp5"])
def test_packed_lanes_dsps_equal_yosys_on_every_family(tmp_path, family):
    """Groups of ``narrow_pack`` channels and a short last group (PE = pack + 1): a lone 4 x 4
    product is LUTs in synth_xilinx (under 9 bits) and a MULT18X18D in synth_ecp5."""
    board = {"xc7": "pynq-z2", "xcup": "zcu104", "ecp5": "ulx3s-85f"}[family]
    core = load_board(board).cores[0]
    lanes = packed(4, 4, core)
    pe = lanes.pack + 1
    module, geometry, _ = lowbit_dense_module(8 * 2, pe * 2, pe, 2, 4, 4, core, lanes=lanes)
    got = yosys.synthesize(module, tmp_path, family, dsp_only=True)
    fold = Folding(pe, 2)
    estimate = KERNELS["dense"].requantizer_dsps(geometry, fold, core) + 2 * packed_dsps(lanes, pe, core)
    assert got.dsp == estimate, (family, got, estimate)
    lone = 1 if FAMILIES[family].name == "ecp5" else 0
    assert packed_dsps(lanes, pe, core) == 1 + lone


YOSYS_CASES = {  # name: (K, N, PE, SIMD, weight bits, activation bits, DSP-rich core); ~30 s of yosys each
    "binary 4x8": (64, 16, 4, 8, 1, 1, False),
    "w2a2 LUT lanes 4x8": (64, 16, 4, 8, 2, 2, False),
    "w2a4 LUT lanes 4x8": (64, 16, 4, 8, 2, 4, False),
    "w4a4 packed 3x8": (48, 12, 3, 8, 4, 4, True),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(YOSYS_CASES))
def test_yosys_dsps_equal_and_luts_within_a_quarter_of_the_estimate(tmp_path, name):
    """synth_xilinx (xc7) of the unit the op library's lanes build: DSPs exactly, LUTs within 25 %."""
    k, n, pe, simd, wb, xb, dsp_rich = YOSYS_CASES[name]
    core = load_board("pynq-z2").cores[0]
    core = replace(core, lut=core.dsp * 10) if dsp_rich else core
    module, geometry, lanes = lowbit_dense_module(k, n, pe, simd, wb, xb, core)
    assert (lanes.kind == "dsp") == dsp_rich
    got = yosys.synthesize(module, Path(tmp_path), "xc7")
    estimate = KERNELS["dense"].resources(geometry, Folding(pe, simd), core)
    assert got.dsp == estimate.dsp, (name, got, estimate)
    assert abs(got.lut - estimate.lut) <= LUT_TOLERANCE * got.lut, (name, got.lut, estimate.lut)
    assert got.bram36 == estimate.bram36 == 0, "a shallow weight ROM is LUTs in both"


def test_a_layer_rendered_for_its_core_has_the_lanes_and_dsps_the_cost_model_priced(tmp_path):
    """``rtl.render_op`` on a core (as compile and the per-stage checks render each layer) builds
    the lanes ``lane_choice`` picks for that core's budgets, not for the default ones: on a
    DSP-rich core w4a4 lanes are packed into multipliers where the default puts them in LUTs, and
    yosys maps exactly the op library's DSPs of the layer on that core."""
    core = load_board("pynq-z2").cores[0]
    dsp_rich = replace(core, lut=core.dsp * 10)  # a DSP worth 10 LUTs
    choice = lane_choice(dsp_rich, 4, 4)
    assert choice.kind == "dsp" and lane_choice(None, 4, 4).kind == "lut", "the two prices must differ here"
    config, arrays, _ = lowbit_dense_case(48, 12, 4, 4, False, seed=3)
    fold = Folding(3, 8)
    unit = KERNELS["dense"].rtl(config, arrays, fold, "fp_dense", 1, dsp_rich.macs_per_dsp, dsp_rich)
    assert (unit.values["LANE_KIND"], unit.values["PACK"]) == (choice.kind, choice.pack)
    default = KERNELS["dense"].rtl(config, arrays, fold, "fp_dense", 1, dsp_rich.macs_per_dsp)
    assert default.values["LANE_KIND"] == "lut", "no core: the default price, as before"
    op = render_op("dense", config, arrays, fold, 1, macs_per_dsp=dsp_rich.macs_per_dsp, core=dsp_rich)
    got = yosys.synthesize(op.module, Path(tmp_path), "xc7", dsp_only=True)
    geometry = with_precision(KERNELS["dense"].config_geometry({"K": 48, "N": 12}), 4, 4)
    priced = KERNELS["dense"].resources(geometry, fold, dsp_rich).dsp
    assert KERNELS["dense"].mac_dsps(geometry, fold, dsp_rich) > 0
    assert got.dsp == priced, (got, priced)
