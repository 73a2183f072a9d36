"""RTL dense unit (hls_templates/rtl/dense.v.j2): Verilog-2005, bit-exact with the integer
reference under random input gaps and output backpressure, steady-state cycles within 10% of
the op library's cycle model, and yosys synth_xilinx DSPs beside the op library's estimate."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from rtl_cases import dense_case, simulate_dense
from rtl_cases import dense_model_cycles as model_cycles

from fpgaplace.board.load import load_board
from fpgaplace.codegen.rtl import render_dense
from fpgaplace.hw import KERNELS, Folding, reference
from fpgaplace.hw.registry import dense_geometry
from fpgaplace.sim import yosys
from fpgaplace.util.errors import FpgaplaceError

CYCLE_TOLERANCE = 0.10


def random_dense(k: int, n: int, pe: int, simd: int, seed: int, vectors: int = 4):
    """A dense op with random int8 weights, int32 bias, per-channel scales that spread the outputs
    over the int8 range, random zero points and a ReLU-like lower bound; ``vectors`` inputs
    (``rtl_cases.dense_case`` with the folding's PE and SIMD in the config)."""
    config, arrays, inputs, _ = dense_case(k, n, Folding(pe=pe, simd=simd), seed, samples=vectors)
    return config | {"PE": pe, "SIMD": simd}, arrays, inputs


def expected_outputs(config, arrays, vectors) -> np.ndarray:
    return np.stack([reference.dense(v, arrays["w"], arrays["bias"], arrays["mult"], arrays["shift"], zx=config["ZX"],
                                     zy=config["ZY"], lo=config["LO"], hi=config["HI"]) for v in vectors])


def check_simulation(config, arrays, vectors, folder: Path, steady_vectors: int = 6, macs_per_dsp: int = 1):
    result = simulate_dense(config, arrays, vectors, folder, seed=config["K"] + config["N"],
                            steady_vectors=steady_vectors, macs_per_dsp=macs_per_dsp)
    assert result.random.mismatches == 0, f"{config}: {result.random.mismatches} outputs differ under backpressure"
    assert result.steady.mismatches == 0, f"{config}: {result.steady.mismatches} outputs differ back to back"
    assert result.random.vectors == len(vectors) and result.steady.vectors == steady_vectors
    assert abs(result.cycle_error) <= CYCLE_TOLERANCE, (
        f"{config}: {result.steady.cycles_per_vector} cycles per vector measured, model {result.model_cycles}")
    return result


def test_model_cycles_come_from_the_kernel():
    config = {"K": 64, "N": 32, "PE": 4, "SIMD": 8}
    geometry = dense_geometry(64, 32)
    assert (geometry.channels, geometry.reduction, geometry.pixels) == (32, 64, 1)
    assert model_cycles(config) == KERNELS["dense"].cycles(geometry, Folding(pe=4, simd=8)) == 8 * 8


def test_dense_bit_exact_under_backpressure_and_cycles(tmp_path):
    config, arrays, vectors = random_dense(16, 8, 2, 4, seed=3, vectors=6)
    expected = expected_outputs(config, arrays, vectors)
    assert len(np.unique(expected)) > 20, "the case must spread the outputs, not saturate them"
    result = check_simulation(config, arrays, vectors, tmp_path, steady_vectors=10)
    # the gaps and backpressure do slow the stream down: the random phase is not back to back
    assert result.random.cycles_per_vector > result.steady.cycles_per_vector


def test_dense_rounding_ties_shift_extremes_and_clamp(tmp_path):
    """Small values with scales 1/2, 1/4 (m = 2**30, s = 31, 32) make many exact halves (round
    half to even); shift 1 and shift 62 with a tiny multiplier are the extremes of s; LO/HI clamp."""
    k, n = 8, 8
    rng = np.random.default_rng(11)
    w = rng.integers(-3, 4, (n, k), dtype=np.int8)
    vectors = rng.integers(-4, 5, (16, k), dtype=np.int8)
    mult = np.array([2**30, 2**30, 2**30, 2**30, 2**30 - 1, 3, 2**30, 2**31 - 1], dtype=np.int64)
    shift = np.array([31, 32, 31, 32, 31, 62, 1, 33], dtype=np.int64)
    arrays = {"w": w, "bias": rng.integers(-5, 6, n).astype(np.int32), "mult": mult, "shift": shift}
    config = {"K": k, "N": n, "ZX": 1, "ZY": -3, "LO": -6, "HI": 5, "PE": 4, "SIMD": 2}
    acc = np.stack([reference.dense_accumulate(v, w, arrays["bias"], zx=1) for v in vectors]) * mult
    tie = (acc % (2**shift)) == 2 ** (shift - 1)
    odd = (acc >> shift) % 2 == 1
    assert np.sum(tie & odd) >= 3 and np.sum(tie & ~odd) >= 3, "the case must round halves both up and down"
    expected = expected_outputs(config, arrays, vectors)
    assert {config["LO"], config["HI"]} <= set(expected.reshape(-1).tolist()), "the case must clamp at both bounds"
    check_simulation(config, arrays, vectors, tmp_path)


SWEEP = [(k, n, pe, simd) for k, n in ((16, 8), (16, 32), (64, 8), (64, 32))
         for pe, simd in ((1, 1), (2, 4), (8, 8), (4, 2), (8, 1))] + [(16, 32, 8, 16), (64, 8, 8, 32)]  # SF = 1, 2


@pytest.mark.slow
@pytest.mark.parametrize(("k", "n", "pe", "simd"), SWEEP)
def test_dense_sweep_bit_exact_and_within_ten_percent(tmp_path, k, n, pe, simd):
    config, arrays, vectors = random_dense(k, n, pe, simd, seed=k * n + pe * 10 + simd, vectors=3)
    check_simulation(config, arrays, vectors, tmp_path, steady_vectors=5)


@pytest.mark.parametrize("macs_per_dsp", [1, 2])
def test_rendered_verilog_is_verilog_2005_clean(tmp_path, macs_per_dsp):
    config, arrays, _ = random_dense(16, 8, 4, 2, seed=5)
    sources = render_dense(config, arrays, top="dense_lint", macs_per_dsp=macs_per_dsp).write(tmp_path)
    run = subprocess.run(["iverilog", "-g2005", "-Wall", "-o", str(tmp_path / "lint.vvp"), *map(str, sources)],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0 and not run.stderr.strip(), run.stderr


def test_weights_file_is_folded_order(tmp_path):
    config, arrays, _ = random_dense(16, 8, 2, 4, seed=6)
    module = render_dense(config, arrays)
    words = module.files["fp_dense_weights.mem"].split()
    lanes = config["PE"] * config["SIMD"]
    assert len(words) == 16 * 8 // lanes and all(len(word) == 2 * lanes for word in words)
    # lane j of a word is bits [8j +: 8]: the hex text holds the lanes last to first
    unpacked = [int(word[2 * (lanes - 1 - j):2 * (lanes - j)], 16) for word in words for j in range(lanes)]
    assert np.array_equal(np.array(unpacked, dtype=np.uint8).view(np.int8),
                          reference.fold_weights(arrays["w"], config["PE"], config["SIMD"]))


@pytest.mark.parametrize(("change", "message"), [
    ({"PE": 3}, "PE=3 must divide N=8"),
    ({"SIMD": 5}, "SIMD=5 must divide K=16"),
    ({"LO": 100, "HI": 0}, "LO <= HI"),
    ({"ZY": 128}, "ZY and LO <= HI must be int8"),
])
def test_bad_config_is_one_line_error(change, message):
    config, arrays, _ = random_dense(16, 8, 2, 4, seed=7)
    with pytest.raises(FpgaplaceError, match=re.escape(message)):
        render_dense(config | change, arrays)


def test_bad_arrays_are_one_line_errors():
    config, arrays, _ = random_dense(16, 8, 2, 4, seed=8)
    with pytest.raises(FpgaplaceError, match="lack mult"):
        render_dense(config, {key: v for key, v in arrays.items() if key != "mult"})
    with pytest.raises(FpgaplaceError, match="shift must lie in"):
        render_dense(config, arrays | {"shift": np.zeros(8, dtype=np.int64)})
    with pytest.raises(FpgaplaceError, match="reaches 2\\*\\*32"):
        render_dense(config, arrays | {"bias": np.full(8, 2**32, dtype=np.int64)})


@pytest.mark.slow
@pytest.mark.parametrize(("family", "board"), [("xc7", "pynq-z2"), ("xcup", "zcu104")])
def test_yosys_mac_dsps_equal_the_model(tmp_path, family, board):
    """yosys' DSPs are the op library's exactly (pynq-z2: 1 MAC per DSP48E1; zcu104: 2 per
    DSP48E2, channel pairs packed; plus the requantization units' multipliers), and going from SIMD=1 to
    SIMD=4 adds the MAC lanes' DSPs only."""
    core = load_board(board).cores[0]
    k, n, pe = 16, 8, 2
    counts, models = {}, {}
    for simd in (1, 4):
        config, arrays, _ = random_dense(k, n, pe, simd, seed=9)
        module = render_dense(config, arrays, macs_per_dsp=core.macs_per_dsp)
        counts[simd] = yosys.synthesize(module, tmp_path / f"simd{simd}", family).dsp
        models[simd] = KERNELS["dense"].resources(dense_geometry(k, n), Folding(pe=pe, simd=simd), core).dsp
    assert counts == models, (counts, models)
    assert counts[4] - counts[1] == pe * 3 // core.macs_per_dsp


@pytest.mark.parametrize(("pe", "simd"), [(4, 2), (3, 4)])
def test_dense_two_macs_per_multiplier_bit_exact(tmp_path, pe, simd):
    """Channel pairs sharing one 27 x 8 multiplier (macs_per_dsp = 2; an odd PE leaves one single)."""
    config, arrays, vectors = random_dense(16, 12, pe, simd, seed=12, vectors=4)
    verilog = render_dense(config, arrays, macs_per_dsp=2).files["fp_dense.v"]
    assert verilog.count("w_group * ") == -(-pe // 2), "one multiplier per channel pair and input element"
    check_simulation(config, arrays, vectors, tmp_path, macs_per_dsp=2)
