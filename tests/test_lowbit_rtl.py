"""Compiled low-bit layers in RTL at their own widths (issue 20, item 2): a QONNX dense stack
compiled for a board gets dense units whose lanes are the layer's widths and signedness as
design.json records them (``Dense.width_members``), priced by the folding at those lanes, bit-exact
in cocotb/Icarus against the integer reference; yosys maps the estimate's DSPs exactly and its LUTs
within 25 % for the low-bit lanes."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from rtl_cases import simulate_dense, threshold_dense_case

from fpgaplace import Design
from fpgaplace.board.load import load_board
from fpgaplace.codegen.rtl import render_dense
from fpgaplace.codegen.rtl_project import board_cores, probe_module
from fpgaplace.hw import KERNELS, Folding
from fpgaplace.hw.dense import lane_widths
from fpgaplace.hw.kernel import dot_bits, lane_choice
from fpgaplace.model import zoo
from fpgaplace.project.arrays import load_arrays
from fpgaplace.project.layout import RTL_DIR, cell_name
from fpgaplace.project.record import load
from fpgaplace.sim import yosys
from fpgaplace.sim.rtl_project import simulate_project_rtl
from fpgaplace.util.errors import FpgaplaceError

LUT_TOLERANCE = 0.25
FF_TOLERANCE = 0.35  # kernel.narrow_dot_ffs: rms 13.5 % over 68 units, 57 % at worst (a 2-word weight ROM)
BOARD = "pynq-z2"


def compiled(folder: Path, weight_bits: int, act_bits: int, signed: bool, batch_norm: bool = False) -> Path:
    """A small QONNX MLP (``zoo.qonnx_mlp``) compiled for ``BOARD`` into ``folder``; every op on a core."""
    model = zoo.qonnx_mlp(weight_bits, act_bits, signed=signed, batch_norm=batch_norm)
    result = Design(model, BOARD, profile_cpu=False).compile(folder / "project", random_samples=2)
    assert result.cpu_ops == [], result.cpu_ops
    return folder / "project"


def dense_layers(project: Path):
    """(core, index, layer, arrays) of every dense layer of ``project``."""
    design = load(project)
    for core in design.cores:
        arrays = load_arrays(project, core)
        for i, layer in enumerate(core.layers):
            if layer.kernel == "dense":
                yield core, i, layer, arrays[i]


def test_lane_widths_follow_the_record():
    """The lanes a layer's widths give: +-1 only for a signed 1-bit input, unsigned codes in XU
    lanes up to 4 bits (3 bits take 4, 1 bit takes 2), wider unsigned codes as int8 codes; weights
    at the least lane width holding them (a negated -8 needs 8 bits); int8 layers keep the int8 unit."""
    w4 = np.array([[-7, 7]], np.int8)

    def lanes(weights, bits, signed, w=w4):
        return lane_widths({"weights": weights, "inputs": [bits], "inputs_signed": [signed]}, w)

    assert lanes(1, 1, True, np.array([[-1, 1]], np.int8)) == {"WB": 1, "XB": 1, "XU": 0}
    assert lanes(2, 1, False, np.array([[-1, 1]], np.int8)) == {"WB": 2, "XB": 2, "XU": 1}
    assert lanes(4, 3, False) == {"WB": 4, "XB": 4, "XU": 1}
    assert lanes(4, 3, True) == {"WB": 4, "XB": 4, "XU": 0}
    assert lanes(4, 8, False) == {"WB": 4, "XB": 8, "XU": 0}
    assert lanes(4, 4, True, np.array([[8, -7]], np.int8)) == {"WB": 8, "XB": 4, "XU": 0}
    assert lanes(8, 8, True, np.array([[100]], np.int8)) == {}
    assert lane_widths(None, w4) == {} and lane_widths({"weights": 4, "inputs": [4]}, w4)["XU"] == 0


COMPILED = {  # name: (weight bits, activation bits, signed activations, batch norms)
    "w2a2": (2, 2, True, False),
    "w4a4 unsigned": (4, 4, False, False),
    "w1a2": (1, 2, True, False),
    "w1a1 (bipolar: thresholds)": (1, 1, True, False),
    "w2a2 batch norms (thresholds)": (2, 2, True, True),
}


@pytest.mark.parametrize("name", sorted(COMPILED))
def test_compiled_lowbit_dense_layers_are_built_at_their_widths_and_bit_exact(tmp_path, name):
    """Each dense layer's RTL unit has the lanes of its recorded widths (the weight ROM's words
    PE x SIMD weights of WB bits, the lane kind ``lane_choice`` gives on the board's core with the
    lanes compile chose for it) and
    its output stage (thresholds where the record says so), the record's resources are the op
    library's at those lanes, and the whole core is bit-exact in Icarus with the model's cycles."""
    weight_bits, act_bits, signed, batch_norm = COMPILED[name]
    project = compiled(tmp_path, weight_bits, act_bits, signed, batch_norm)
    thresholds = 0
    design = load(project)
    models = board_cores(load_board(BOARD), design)  # with the lanes compile chose for each core
    narrow = 0
    for core, i, layer, arrays in dense_layers(project):
        core_model = models[core.name]
        assert layer.widths is not None and layer.widths.inputs_signed is not None
        members = lane_widths(layer.widths.to_json(), arrays["w"])
        assert members["WB"] == weight_bits, (layer.op, members)
        folder = project / RTL_DIR / cell_name(core.name)
        verilog = (folder / f"{cell_name(core.name)}_{i}_dense.v").read_text()
        assert f"localparam WB = {members['WB']};" in verilog and f"localparam XB = {members['XB']};" in verilog
        words = (folder / f"{cell_name(core.name)}_{i}_dense_weights.mem").read_text().split()
        assert {len(word) for word in words} == {math.ceil(layer.pe * layer.simd * members["WB"] / 4)}
        kind = lane_choice(core_model, members["WB"], members["XB"]).kind
        assert f"// {'Binary' if kind == 'xnor' else kind.upper()} lanes" in verilog, (layer.op, kind)
        geometry = KERNELS["dense"].priced_geometry(KERNELS["dense"].config_geometry(layer.config),
                                                    layer.widths.to_json(), arrays)
        priced = KERNELS["dense"].resources(geometry, Folding(layer.pe, layer.simd), core_model, layer.resident)
        assert layer.resources == priced.to_json(), (layer.op, layer.resources, priced)
        narrow += members["XB"] < 8
        thresholds += layer.widths.output_stage == "thresholds"
        assert (f"module {cell_name(core.name)}_{i}_dense_threshold" in verilog) == (
            layer.widths.output_stage == "thresholds"), layer.op
        probe = probe_module(core, i, arrays, core_model.macs_per_dsp, core_model)  # the DSP probe: PE outputs
        probed = probe.files[f"{probe.top}.v"] if probe is not None else ""
        assert f"localparam WB = {members['WB']};" in probed
        assert ("_threshold thresholds (" in probed) == (layer.widths.output_stage == "thresholds")
        if not signed and members["XB"] < 8:
            assert members["XU"] == 1 and layer.widths.inputs_signed == [False]
    assert narrow >= 2, "the hidden and last layers read low-bit activations"
    assert (thresholds == 2) == (batch_norm or act_bits == 1), thresholds
    rtl = simulate_project_rtl(project, samples=2)
    assert rtl.ok and rtl.cores
    for core in rtl.cores:
        assert core.bit_exact, core
        assert core.cycles_measured == core.cycles_model, core


# every compiled MLP (LUT, XNOR and DSP lanes by 8-bit inputs; requantizers and threshold stages);
# about half a minute of yosys a case here; `scripts/bench_lowbit.py --compiled` prints the table
YOSYS_CASES = sorted(COMPILED)


@pytest.mark.slow
@pytest.mark.parametrize("name", YOSYS_CASES)
def test_yosys_of_compiled_lowbit_layers_agrees_with_the_estimate(tmp_path, name):
    """synth_xilinx of every dense layer of the compiled MLP (5 to 15 s of yosys each): DSPs
    equal to design.json's estimate exactly, and LUTs within 25 % of it and FFs within 35 %
    (``kernel.narrow_dot_ffs``; 0.97 to 1.32 of yosys here, where the int8 price was 1.3 to 5.8)
    where an operand is below 8 bits (the new lanes, with their requantizers or threshold stages;
    the first layer's 8-bit inputs by narrow weights on DSPs too)."""
    project = compiled(tmp_path, *COMPILED[name])
    result = yosys.project_resources(project)
    widths = {layer.op: lane_widths(layer.widths.to_json(), arrays["w"]) for _, _, layer, arrays in
              dense_layers(project)}
    checked = 0
    for core in result.cores:
        for layer in core.layers:
            assert layer.yosys.dsp == layer.estimate["dsp"], (layer.op, layer.yosys, layer.estimate)
            if min(widths[layer.op]["XB"], widths[layer.op]["WB"]) < 8:
                assert abs(layer.yosys.lut - layer.estimate["lut"]) <= LUT_TOLERANCE * layer.yosys.lut, (
                    layer.op, layer.yosys.lut, layer.estimate["lut"])
                assert abs(layer.yosys.ff - layer.estimate["ff"]) <= FF_TOLERANCE * layer.yosys.ff, (
                    layer.op, layer.yosys.ff, layer.estimate["ff"])
                checked += 1
    assert checked == 3  # every layer: the first's 8-bit inputs meet narrow weights


THRESHOLD_CASES = {  # name: (weight bits, activation bits, unsigned inputs, LO, thresholds a channel, code step)
    "w1a1 binary, bipolar out (-1, +1: one threshold, step 2)": (1, 1, False, -1, 1, 2),
    "w1a1 binary, three codes out": (1, 1, False, -1, 2, 1),
    "w2a2, 2-bit signed out": (2, 2, False, -2, 3, 1),
    "w4a4 unsigned, 4-bit unsigned out": (4, 4, True, 0, 15, 1),
    "w8a8, 3-bit out": (8, 8, False, -4, 7, 1),
}


@pytest.mark.parametrize("name", sorted(THRESHOLD_CASES))
def test_threshold_stage_bit_exact_under_backpressure(tmp_path, name):
    """The dense unit with a threshold stage (``rtl/threshold.v.j2``: PE x T comparators on the
    dot product, thresholds less the bias and clamped to its range, one channel's at +-2^31; codes
    LO + STEP x count) equals the integer reference (``threshold.multithreshold`` of the
    accumulator) under backpressure and back to back, at the op library's cycles; without a
    requantizer in it."""
    wb, xb, unsigned, lo, count, step = THRESHOLD_CASES[name]
    config, arrays, vectors = threshold_dense_case(16, 6, wb, xb, unsigned, lo, count, seed=wb + 3 * xb, step=step)
    expected = KERNELS["dense"].reference(config, arrays, [np.concatenate(vectors)], len(vectors))
    codes = set(np.unique(expected).tolist())
    assert len(codes) >= 2 and codes <= set(range(lo, lo + step * count + 1, step)), codes
    config |= {"PE": 3, "SIMD": 4}
    result = simulate_dense(config, arrays, vectors, tmp_path, seed=5, steady_vectors=6)
    assert result.random.mismatches == 0 and result.steady.mismatches == 0, name
    assert result.random.vectors == len(vectors)
    assert result.steady.cycles_per_vector == result.model_cycles == (6 // 3) * (16 // 4)
    verilog = render_dense(config, arrays).files["fp_dense.v"]
    unit, stage = verilog.split("module fp_dense_threshold")
    assert "fp_requant_var #(" not in unit and "fp_dense_threshold thresholds (" in unit and stage


def test_ecp5_prices_a_threshold_stage_s_table_as_its_one_channel_rom(tmp_path):
    """On ECP5 (built from the RTL op library) a dense unit's threshold stage reads one channel
    ROM, its table (PE x T thresholds of ``stored_bits`` a word, ``threshold.rom_word_bits``), mapped
    with the weight ROM: yosys' three DP16KDs (1.5 BRAM36) are the 2 the op library rounds up to.
    Priced as the requantizers' channel ROM and the table beside it (through ``memory_blocks``,
    the HLS families' blocks) it was 4."""
    from fpgaplace.codegen.rtl import RtlModule, library, render_op
    from fpgaplace.hw.kernel import with_precision

    core = load_board("ulx3s-85f").cores[0]
    config, arrays, _ = threshold_dense_case(16, 256, 2, 2, False, -2, 3, seed=1)
    config |= {"PE": 2, "SIMD": 8}
    folding = Folding(2, 8, 1)
    op = render_op("dense", config, arrays, folding, 100, macs_per_dsp=core.macs_per_dsp, core=core)
    got = yosys.synthesize(RtlModule(op.module.top, {**library(), **op.module.files}), tmp_path, "ecp5")
    geometry = with_precision(KERNELS["dense"].config_geometry(config), 2, 2)
    estimate = KERNELS["dense"].resources(geometry, folding, core)
    assert geometry.shape["T"] == 3 and got.bram36 == 1.5 and estimate.bram36 == math.ceil(got.bram36), (got, estimate)


@pytest.mark.slow
def test_a_dense_unit_s_weights_in_block_ram_are_priced(tmp_path):
    """A w1a2 dense unit with a threshold stage, as the CNV w1a2's 256 -> 512 layer is built at
    1 x 32: its 4,096-word weight ROM in block RAM adds ``dense.BLOCK_ROM_LUTS`` (priced without
    them, 276 LUTs against 408 in yosys 0.23 xc7); a 32-word ROM, in LUTs, does not. Within 15 %
    of yosys. Half a minute of yosys."""
    from fpgaplace.hw.dense import block_rom
    from fpgaplace.hw.kernel import with_precision

    core = load_board("pynq-z2").cores[0]
    config, arrays, _ = threshold_dense_case(256, 512, 1, 2, False, 0, 3, seed=3)
    folding = Folding(1, 32)
    module = render_dense(config | {"PE": 1, "SIMD": 32}, arrays, macs_per_dsp=core.macs_per_dsp,
                          lanes=lane_choice(core, 1, 2))
    got = yosys.synthesize(module, tmp_path, "xc7")
    geometry = with_precision(KERNELS["dense"].config_geometry(config), 1, 2)
    shallow = with_precision(KERNELS["dense"].config_geometry({**config, "K": 64, "N": 16}), 1, 2)
    assert block_rom(geometry, folding, core, True) and not block_rom(shallow, folding, core, True)
    estimate = KERNELS["dense"].resources(geometry, folding, core)
    assert abs(estimate.lut - got.lut) <= 0.15 * got.lut, (got, estimate)


def test_threshold_tables_that_do_not_fit_are_one_line_errors():
    config, arrays, _ = threshold_dense_case(16, 6, 2, 2, False, -2, 3, seed=1)
    config |= {"PE": 3, "SIMD": 4}
    wrong_shape = r"rtl dense: thresholds of shape \[6, 2\] .*expected \[6, \(HI - LO\) / STEP\]"
    with pytest.raises(FpgaplaceError, match=wrong_shape):
        render_dense(config, arrays | {"thresholds": arrays["thresholds"][:, :2]})
    with pytest.raises(FpgaplaceError, match=r"shape \[6, 3\] with LO=-2, HI=1, STEP=2, ZY=-2"):  # 3 codes: no step 2
        render_dense(config | {"STEP": 2}, arrays)


@pytest.mark.parametrize("name", ["w1a1 (bipolar: thresholds)", "w4a4 unsigned"])
def test_hls_keeps_lowbit_dense_weights_packed_and_csim_is_bit_exact(tmp_path, name):
    """The C++ core keeps a resident low-bit dense layer's weights at their lane width (the width
    the folding priced its memory at): ``N * K * WB / 8`` bytes read by ``fp::detail::weight``; a
    threshold stage's table at the dot product's width and one bit more, a word per fold (the RTL
    ROM's words, ``threshold.table_bytes``); and C simulation is bit-exact against the integer
    reference."""
    from fpgaplace.sim.csim import run_csim

    weight_bits, act_bits, signed, batch_norm = COMPILED[name]
    project = compiled(tmp_path, weight_bits, act_bits, signed, batch_norm)
    header = "\n".join(path.read_text() for path in project.rglob("weights.h"))
    tables = 0
    for _core, i, layer, arrays in dense_layers(project):
        assert layer.resident
        size = math.ceil(arrays["w"].size * lane_widths(layer.widths.to_json(), arrays["w"])["WB"] / 8)
        assert f"static const int8_t l{i}_w[{size}] =" in header, (layer.op, size)
        if "thresholds" in arrays:  # the table at the dot product's width + 1, one word a fold of PE channels
            table, members = arrays["thresholds"], lane_widths(layer.widths.to_json(), arrays["w"])
            bits = dot_bits(arrays["w"].shape[1], members["WB"], members["XB"]) + 1
            word = math.ceil(layer.pe * table.shape[1] * bits / 8)
            assert f"static const uint8_t l{i}_thresholds[{table.shape[0] // layer.pe * word + 8}] =" in header
            assert bits < 32, "stored narrower than the accumulator's C++ type"
            if weight_bits == 1:  # a bipolar quantizer writes -1 and +1: one threshold a channel, step 2
                assert table.shape[1] == layer.config["T"] == 1 and layer.config["STEP"] == 2, layer.config
            tables += 1
    assert tables == (2 if "thresholds" in name else 0), tables
    images = np.random.default_rng(0).uniform(-1, 1, (3, 3, 4, 4)).astype(np.float32)
    simulated = run_csim(project, inputs=images)
    assert simulated.cores and all(core.bit_exact for core in simulated.cores)
