"""Per-core RTL tops from design.json (fpgaplace.codegen.rtl_project): rendered for the small CNN,
clean Verilog-2005, written into the project by compile, simulated end to end bit-exact against
the integer reference; and yosys synth_xilinx DSPs of the op templates beside the estimate."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest
from rtl_cases import conv_case, elementwise_case, pool_case
from typer.testing import CliRunner

from fpgaplace import Design
from fpgaplace.board.load import load_board
from fpgaplace.board.model import BRAM36_BYTES, FAMILIES, family_of
from fpgaplace.cli.app import app
from fpgaplace.codegen import rtl
from fpgaplace.codegen.rtl_project import board_cores, render_core
from fpgaplace.hw import KERNELS, Folding
from fpgaplace.hw.geometry import core_budget
from fpgaplace.hw.registry import window_geometry
from fpgaplace.model import zoo as models
from fpgaplace.project.arrays import load_arrays
from fpgaplace.project.board import project_board
from fpgaplace.project.layout import RTL_DIR, SIM_DIR
from fpgaplace.project.record import load, load_design
from fpgaplace.sim import yosys
from fpgaplace.util.errors import FpgaplaceError


def test_every_core_record_finds_the_board_core_it_was_priced_on(cnn_project):
    """compile and the DSP probes render each core's layers for the board core of the record's
    name (``board_cores``; its budgets pick the lanes): every record finds one, and it is
    the core the placement budgeted (design.json's ``budget``), on a board cut into two cores."""
    design = load(cnn_project)
    cores = board_cores(project_board(design), design)
    assert len(design.cores) == 2
    for record in design.cores:
        assert record.name in cores, (record.name, sorted(cores))
        assert core_budget(cores[record.name]).to_json() == record.budget, record.name


MIXED_CLUSTER = Path(__file__).resolve().parent / "boards" / "cluster-pynqz2-zcu104-fast.yaml"


def test_a_mixed_cluster_s_cores_pair_macs_as_their_own_family_does(tmp_path):
    """On a cluster whose first node is a Zynq-7000 (one int8 MAC a DSP48E1) and whose second is a
    ZCU104 (two a DSP48E2), the CNN placed on the ZCU104 pairs its MACs as the op library priced
    them there: yosys maps a paired conv's DSP probe to the layer's DSPs (the board's first core's
    pairing, 1, gave it twice as many)."""
    from fpgaplace.flow.checks import dsp_probes
    from fpgaplace.sim.stages import select

    project = tmp_path / "cnn"
    Design(models.cnn_residual(batch=1, image=16), load_board(MIXED_CLUSTER), profile_cpu=False).compile(project)
    design = load(project)
    cores = board_cores(project_board(design), design)
    assert {cores[record.name].macs_per_dsp for record in design.cores} == {2}  # the ZCU104's cores
    assert project_board(design).cores[0].macs_per_dsp == 1
    paired = [s for s in select(design, "*/conv2d")
              if s.layer.resources["dsp"] < s.layer.pe * s.layer.simd * s.layer.mmv]
    stage = min(paired, key=lambda s: s.layer.resources["dsp"])
    synthesized = yosys.synthesize(dsp_probes(project)(stage), tmp_path / "probe",
                                   family_of(stage.core.part), True)
    assert synthesized.dsp == stage.layer.resources["dsp"], (stage.name, synthesized)


def test_core_tops_are_verilog_2005_clean(cnn_project, tmp_path):
    kernels = set()
    for record in load(cnn_project).cores:
        core = render_core(record, load_arrays(cnn_project, record), macs_per_dsp=2)
        sources = core.module.write(tmp_path / record.name)
        run = subprocess.run(["iverilog", "-g2005", "-Wall", "-o", str(tmp_path / "lint.vvp"), *map(str, sources)],
                             capture_output=True, text=True, check=False)
        problems = [line for line in run.stderr.splitlines() if "is sensitive to all" not in line]
        assert run.returncode == 0 and not problems, run.stderr
        assert len(core.inputs) == len(record.inputs) and len(core.outputs) == len(record.outputs)
        kernels |= {layer.kernel for layer in record.layers}
    assert {"conv2d", "add", "maxpool", "globalavgpool", "dense"} <= kernels, "the CNN must use every kind of op"


def test_compile_writes_rtl_and_sim_folders(cnn_project):
    document = load_design(cnn_project)
    for record in document["cores"]:
        top = cnn_project / RTL_DIR / record["name"] / f"{record['name']}_rtl.v"
        assert top.is_file(), top
        job = json.loads((cnn_project / SIM_DIR / record["name"] / "job.json").read_text())
        assert [p["port"] for p in job["inputs"]] == [f"s{k}_axis" for k in range(len(record["inputs"]))]
    assert (cnn_project / SIM_DIR / "run_rtl.py").is_file()


@pytest.mark.slow
def test_small_cnn_end_to_end_bit_exact(tmp_path):
    """The small CNN on an 8 x 8 image on pynq-z2, whose cores have few MAC lanes: every layer
    of the 16 px one, and Icarus simulates its two cores in a third of the 16 px one's CPU (both at
    the model's cycles exactly; zcu104's 1,296-lane core takes over ten minutes)."""
    cnn_project = tmp_path / "project"
    design = Design(models.cnn_residual(batch=1, image=8), "pynq-z2", profile_cpu=False).quantized(random_samples=2)
    design.place()
    design.compile(cnn_project)
    run = CliRunner().invoke(app, ["sim", str(cnn_project), "--samples", "8", "--rtl", "--whole-cores", "--json"])
    assert run.exit_code == 0, run.output
    document = json.loads(run.stdout)["rtl"]  # fpgaplace sim --rtl --whole-cores: simulate_project_rtl's result
    assert document["ok"], document
    stored = json.loads((cnn_project / "results" / "rtl.json").read_text())
    assert stored == document and set(stored) == {"ok", "cores"}
    assert [core["name"] for core in document["cores"]] == [core["name"] for core in load_design(cnn_project)["cores"]]
    for core in document["cores"]:
        assert core["bit_exact"]
        assert abs(core["cycles_measured"] - core["cycles_model"]) <= 0.10 * core["cycles_model"], core


@pytest.mark.slow
@pytest.mark.parametrize(("board", "family"), [("zcu104", "xcup"), ("pynq-z2", "xc7")])
def test_yosys_conv_dsps_are_the_estimate(tmp_path, board, family):
    """yosys' DSPs are the op library's exactly: MAC lanes (two per DSP48E2 on zcu104: pixel
    pairs) and the requantizers. The unit's own LUTs (lanes, SIMD adder trees of 9 int8 products,
    accumulators, line buffer, control; not its requantizers, FIFO and gearbox, modules of their
    own) are within the op library's int8 estimate of the whole stage: each tree is adders on
    carry chains (about 16 LUTs a lane, ``DOT_LUT_PER_LANE``), not one $macc of full adders in
    LUTs (525 LUTs a tree on xcup: this unit's own LUTs were twice the estimate)."""
    core = load_board(board).cores[0]
    folding = Folding(2, 9, 2)
    config, arrays, _, _ = conv_case(4, 4, 1, 2, 3, 1, 1, 1, folding, seed=1)
    op = rtl.render_op("conv2d", config, arrays, folding, 100, macs_per_dsp=core.macs_per_dsp)
    got = yosys.synthesize(rtl.RtlModule(op.module.top, {**rtl.library(), **op.module.files}), tmp_path, family)
    estimate = KERNELS["conv2d"].resources(window_geometry("conv2d", config), folding, core)
    assert got.dsp == estimate.dsp, (got, estimate)
    own = yosys.count_cells(yosys.parse_stat(yosys.read_stat(tmp_path), op.module.top), FAMILIES[family])
    assert own.lut <= estimate.lut, (own, estimate)


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["maxpool", "add"])
def test_yosys_lane_ops_use_no_dsp(tmp_path, kernel):
    if kernel == "add":
        config, arrays, _, folding = elementwise_case("add", (2, 4, 4), Folding(2, 1, 1), seed=1)
    else:
        config, arrays, _, folding = pool_case(kernel, 4, 4, 2, 2, 2, 0, Folding(2, 1, 1), seed=1)
    op = rtl.render_op(kernel, config, arrays, folding, 16)
    got = yosys.synthesize(rtl.RtlModule(op.module.top, {**rtl.library(), **op.module.files}), tmp_path, "xcup")
    assert got.dsp == 0 and got.lut > 0 and got.ff > 0, got


def stat_document(modules: dict[str, dict[str, int]], design: dict[str, int]) -> dict:
    """A yosys ``stat -json`` document of ``modules`` (each one's own cells) and ``design`` (the total)."""
    return {"modules": {name: {"num_cells_by_type": cells} for name, cells in modules.items()},
            "design": {"num_cells_by_type": design}}


def test_stat_parsing_counts_luts_ffs_dsps_and_brams():
    own = {"DSP48E2": 3, "FDRE": 10, "LUT6": 4, "RAM64M": 2, "RAMB18E2": 1, "RAMB36E2": 2, "$paramod\\sub": 1}
    stat = stat_document({"\\a": own, "$paramod\\sub": {"LUT3": 5}}, own | {"LUT3": 5})
    cells = yosys.count_cells(yosys.parse_stat(stat))
    assert (cells.lut, cells.ff, cells.dsp, cells.bram36) == (4 + 2 * 4 + 5, 10, 3, 2.5)
    assert yosys.count_cells(yosys.parse_stat(stat, "a")).lut == 4 + 2 * 4, "a module's own cells"
    assert yosys.module_resources(stat)["$paramod\\sub"].lut == 5 and set(yosys.module_resources(stat)) == {
        "a", "$paramod\\sub"}
    with pytest.raises(FpgaplaceError, match=r"yosys stat: no module b \(modules: "):
        yosys.parse_stat(stat, "b")
    assert family_of("xczu7ev-ffvc1156-2-e").name == "xcup" and family_of("xc7z020clg400-1").name == "xc7"
    assert family_of("LFE5U-85F-6BG381C").name == "ecp5"


def test_stat_parsing_counts_ecp5_cells():
    """synth_ecp5's cells: LUT4 one LUT, a CCU2C carry cell two, a TRELLIS_DPR16X4 RAM four;
    TRELLIS_FF; MULT18X18D; an 18 Kbit DP16KD half a 36 Kbit block."""
    top = {"CCU2C": 3, "DP16KD": 3, "LUT4": 7, "MULT18X18D": 2, "TRELLIS_DPR16X4": 1, "TRELLIS_FF": 4}
    stat = stat_document({"\\fp_top": top}, top)
    cells = yosys.count_cells(yosys.parse_stat(stat), family_of("LFE5U-45F-6BG381C"))
    assert (cells.lut, cells.ff, cells.dsp, cells.bram36) == (7 + 2 * 3 + 4, 4, 2, 1.5)
    xilinx = yosys.count_cells(yosys.parse_stat(stat))  # read as UltraScale+ cells: only LUT4 is one
    assert (xilinx.lut, xilinx.ff, xilinx.dsp, xilinx.bram36) == (7, 0, 0, 0)


def test_yosys_ecp5_line_buffer_ebrs_are_the_estimate(tmp_path):
    """On ECP5 (built from the RTL) the window unit keeps its line buffer as ``read_groups`` lays
    it out and the op library prices it so: at SIMD 4 of 16 channels the lanes read 4 banks of
    one buffer, and the MMV = 2 pixels, whose banks turn with the output group, a copy each (2 x 4
    memories of 1,280 bytes, an EBR each): yosys' DP16KDs are its bram36 twice (the weights, 36
    words, and the channel words are LUTRAM). It kept a whole buffer per lane before (8 copies
    of 5,120 bytes, 3 EBRs each: 12 BRAM36)."""
    core = load_board("ulx3s-85f").cores[0]
    folding = Folding(2, 4, 2)
    config, arrays, _, _ = conv_case(4, 64, 16, 2, 3, 1, 1, 1, folding, seed=1)
    op = rtl.render_op("conv2d", config, arrays, folding, 100, macs_per_dsp=core.macs_per_dsp)
    got = yosys.synthesize(rtl.RtlModule(op.module.top, {**rtl.library(), **op.module.files}), tmp_path, "ecp5")
    estimate = KERNELS["conv2d"].resources(window_geometry("conv2d", config), folding, core)
    assert got.bram36 == estimate.bram36 == 4, (got, estimate)


@pytest.mark.slow
def test_yosys_ecp5_weight_and_offset_roms_are_the_estimate(tmp_path):
    """On ECP5 the window unit's weights are one ROM of PE x SIMD weights a word (here 32 bits x
    1,152 words: three 36 x 512 EBRs), its window offsets another (288 words of 11 bits, one EBR, a
    block ROM by the same depth rule, ``memory.rom_style``), beside the line buffer's EBR: yosys'
    five DP16KDs are the 2.5 BRAM36 the op library rounds up to 3 for the op. Priced as PE banks
    of SIMD weights (the HLS kernel's partition), each a whole block, it was 5."""
    core = load_board("ulx3s-85f").cores[0]
    folding = Folding(4, 1, 1)
    config, arrays, _, _ = conv_case(4, 4, 32, 16, 3, 1, 1, 1, folding, seed=1)
    op = rtl.render_op("conv2d", config, arrays, folding, 100, macs_per_dsp=core.macs_per_dsp)
    assert '(* rom_style = "block" *) reg [SIMD*OFF_W-1:0] offsets' in op.module.files[f"{op.module.top}.v"]
    got = yosys.synthesize(rtl.RtlModule(op.module.top, {**rtl.library(), **op.module.files}), tmp_path, "ecp5")
    estimate = KERNELS["conv2d"].resources(window_geometry("conv2d", config), folding, core)
    assert got.bram36 == 2.5 and estimate.bram36 == math.ceil(got.bram36), (got, estimate)


def test_yosys_ecp5_window_unit_prices_its_output_fifo_and_gearbox(tmp_path):
    """On ECP5 a window unit's price holds its output (``hw.window``): a 2 x 2 max pool over 64
    channels at PE 1 keeps its fold words (one channel each) in a FIFO of 512 bytes, one EBR in
    yosys as in the price (``output_fifo_shape``), and goes through the ring (``fp_gearbox``,
    every beat whole) to beats of 2. yosys' EBRs equal the estimate; its LUT4s are 0.59 of it (577
    against 978; 652 before the read lanes tested their coordinates at their own width, POS_W in
    ``rtl/window.v.j2``; with a group of 64 channels in a FIFO word and a serializer, 1,568 against
    1,468). The bound is a band around that known over-price of an int8 pool on ECP5 (the HLS
    kernel's fit, scaled): an unpriced FIFO or gearbox would take the ratio above it. A lane op:
    LUT4s and TRELLIS_FFs, no multiplier."""
    from fpgaplace.hw.window import output_fifo_shape, output_gearbox

    core = load_board("ulx3s-85f").cores[0]
    folding = Folding(1, 1, 1)
    config, arrays, _, _ = pool_case("maxpool", 8, 8, 64, 2, 2, 0, folding, seed=1)
    op = rtl.render_op("maxpool", config, arrays, folding, 100)
    kernel, g = KERNELS["maxpool"], window_geometry("maxpool", config)
    c = kernel.window_shape(g.shape, folding)
    gearbox = output_gearbox(c)
    params = ", ".join(f".{name}({value})" for name, value in gearbox.params().items() if name != "IN_E")
    verilog = op.module.files[f"{op.module.top}.v"]
    assert gearbox.full and not gearbox.serial and f"{gearbox.module} #(.IN_E(ENTRY_E), {params})" in verilog
    assert output_fifo_shape(c, kernel.pipeline_latency(c)) == (1, 8, 512) and "begin : pixel_words" in verilog
    got = yosys.synthesize(rtl.RtlModule(op.module.top, {**rtl.library(), **op.module.files}), tmp_path, "ecp5")
    estimate = kernel.resources(g, folding, core)
    assert got.dsp == 0 and got.ff > 0, got
    assert got.bram36 == 4.5 and estimate.bram36 == math.ceil(got.bram36), (got, estimate)
    assert 0.55 <= got.lut / estimate.lut <= 1.3, (got, estimate)


def alone(gearbox) -> rtl.RtlModule:
    """``gearbox``'s library module at its parameters, under a top of its own (its count tied to
    IN_E: every beat whole, as a window unit's groups are where the row divides into them)."""
    params = ", ".join(f".{name}({value})" for name, value in gearbox.params().items())
    top = f"""module alone (input wire ap_clk, input wire ap_rst_n, input wire [{8 * gearbox.in_e - 1}:0] s_axis_tdata,
  input wire s_axis_tvalid, output wire s_axis_tready, output wire [{8 * gearbox.out_e - 1}:0] m_axis_tdata,
  output wire m_axis_tvalid, input wire m_axis_tready);
  {gearbox.module} #({params}) unit (.ap_clk(ap_clk), .ap_rst_n(ap_rst_n), .s_axis_tdata(s_axis_tdata),
    .s_axis_tcount({gearbox.count_bits}'d{gearbox.in_e}), .s_axis_tvalid(s_axis_tvalid), .s_axis_tready(s_axis_tready),
    .m_axis_tdata(m_axis_tdata), .m_axis_tvalid(m_axis_tvalid), .m_axis_tready(m_axis_tready));
endmodule
"""
    return rtl.RtlModule("alone", {**rtl.library(), "alone.v": top})


def test_a_serializer_takes_a_lut_a_shifted_bit_under_a_quarter_of_the_ring(tmp_path):
    """A group of 64 elements out as beats of 8 (a window unit's output) on xcup: the serializer
    shifts its register by a constant, about one LUT a bit that moves (448 here; 522 measured,
    yosys 0.23), where the ring rotates the group into and out of its banks (2,344 LUTs and 64
    LUTRAM cells)."""
    from fpgaplace.hw.gearbox import Gearbox

    serial = yosys.synthesize(alone(Gearbox(64, 8, 7, serial=True)), tmp_path / "serial", "xcup")
    ring = yosys.synthesize(alone(Gearbox(64, 8, 7)), tmp_path / "ring", "xcup")
    assert serial.lut <= 1.25 * 8 * (64 - 8) and serial.ff >= 8 * 64, serial
    assert serial.lut * 4 < ring.lut, (serial, ring)


def line_buffer_memories(op, folder: Path) -> list[tuple[int, int, int]]:
    """(words, word bits, read ports) of each memory the window unit ``op`` writes (its line
    buffer's; the ROMs have no write port, the FIFO and gearbox are submodules), as yosys
    elaborates it (``proc; memory_collect``: generate loops unrolled, under a second)."""
    for name, text in {**rtl.library(), **op.module.files}.items():
        (folder / name).write_text(text)
    top = op.module.top
    script = f"read_verilog fp_lib.v {top}.v; hierarchy -top {top}; proc; memory_collect; write_json memories.json"
    program = yosys.yosys_program(FAMILIES["xcup"])
    subprocess.run(["nice", "-n", "19", program, "-q", "-p", script], cwd=folder, check=True)
    cells = json.loads((folder / "memories.json").read_text())["modules"][top]["cells"].values()
    return [(int(p["SIZE"], 2), int(p["WIDTH"], 2), int(p["RD_PORTS"], 2))
            for p in (cell["parameters"] for cell in cells if cell["type"] == "$mem_v2") if int(p["WR_PORTS"], 2)]


@pytest.mark.parametrize("shape, folding, banks", [((8, 8, 16, 2, 3, 1, 1, 1), Folding(2, 4, 1), 4),
                                                   ((4, 4, 32, 4, 1, 1, 0, 1), Folding(2, 16, 1), 2)])
def test_channel_parallel_window_lanes_read_banks_of_one_line_buffer(tmp_path, shape, folding, banks):
    """SIMD lanes reading SIMD consecutive channels of one window position (SIMD divides CIN) read
    distinct banks of one line buffer split cyclically by word (``hw.window.read_groups``): a 3 x 3
    conv over 16 channels at SIMD 4 with a beat of one element keeps 4 banks of 160 bytes, a 1 x 1
    conv over 32 at SIMD 16 with beats of 8 two banks of 8 x 8 bytes; each memory one read port,
    the banks one buffer of ROWS rows, and the op library prices that (``LineBuffer.copies``).
    The unit kept a whole copy per SIMD lane before (4 and 16 buffers)."""
    from fpgaplace.hw.window import line_buffer

    config, arrays, _, _ = conv_case(*shape, folding, seed=1)
    op = rtl.render_op("conv2d", config, arrays, folding, 100)
    kernel = KERNELS["conv2d"]
    members = kernel.window_shape(config, folding)
    buffer = line_buffer(members, kernel.window_input_width(members, folding))
    memories = line_buffer_memories(op, tmp_path)
    assert len(memories) == banks == buffer.banks and buffer.copies == 1, (memories, buffer)
    assert all(ports == 1 for _, _, ports in memories), memories
    rows = config["KH"] + config["SH"] + 1  # the window's, a stride's, a spare
    assert sum(words * bits for words, bits, _ in memories) == rows * config["W"] * config["CIN"] * 8, memories


def test_a_pools_pe_lanes_share_the_word_they_read_and_pick_fixed_elements():
    """The small CNN's 2 x 2 max pool at PE 16, MMV 2 (beats of 32 elements): its 128 read lanes
    (MMV x PE x 4 window positions) read 4 words a step, the two pixels' in banks of their own
    (even and odd words) and the two window rows each a copy: 4 memories, 2 buffers (it kept 128
    whole copies, 512 RAMB36 in yosys), and every lane takes one fixed element of its word (no
    multiplexer: ``read_groups``' varying bits are 0)."""
    from fpgaplace.hw.window import line_buffer

    folding = Folding(16, 1, 2)
    config, _, _, _ = pool_case("maxpool", 32, 32, 16, 2, 2, 0, folding, seed=1)
    kernel = KERNELS["maxpool"]
    members = kernel.window_shape(config, folding)
    buffer = line_buffer(members, kernel.window_input_width(members, folding))
    assert (buffer.reads, buffer.in_e, buffer.banks, len(buffer.memories), buffer.copies) == (128, 32, 2, 4, 2)
    assert sorted(bank for _, bank, _ in buffer.memories) == [0, 0, 1, 1]
    assert all(varying == 0 for _, varying, _ in buffer.lane_element)
    assert len({(memory, fixed) for memory, _, fixed in buffer.lane_element}) == 128  # no two lanes alike


def test_ecp5_fixed_bytes_hold_the_rtl_line_buffer_not_the_hls_one():
    """The cost model's fixed on-chip bytes of a window unit on ECP5 are the line buffer the RTL
    lays out (``hw.window.line_buffer`` for one read lane: 3 + 1 + 1 = 5 rows of 64 x 16 bytes
    for a 3 x 3 window, two whole BRAM36 blocks), not the HLS kernel's 3 padded rows (one block);
    a Zynq keeps the HLS price."""
    from fpgaplace.hw.window import line_buffer

    ecp5, zynq = load_board("ulx3s-85f").cores[0], load_board("zcu104").cores[0]
    config, _, _, _ = conv_case(4, 64, 16, 2, 3, 1, 1, 1, Folding(), seed=1)
    g = window_geometry("conv2d", config)
    kernel = KERNELS["conv2d"]
    buffer = line_buffer(kernel.window_shape(g.shape, Folding()), kernel.priced_input_width(g, Folding()))
    assert buffer.rows * buffer.row_elems == 5 * 64 * 16
    assert kernel.line_buffer_bytes(g, ecp5) == 5 * 64 * 16 != kernel.line_buffer_bytes(g, zynq)
    assert kernel.line_buffer_bytes(g, zynq) == g.linebuffer_bytes == 3 * 66 * 16
    channel_words = kernel.fixed_bytes(g, zynq) - BRAM36_BYTES
    assert kernel.fixed_bytes(g, ecp5) == channel_words + 2 * BRAM36_BYTES


def test_ecp5_fifos_are_priced_in_ebrs_two_a_bram36_block():
    """A reader FIFO of 256 x 8 bits is one 18 Kbit EBR on ECP5: six of them (the 8-px CNN's
    residual branches) are three BRAM36 of EBR pairs, not six whole blocks; a Zynq puts each in a
    block of its own."""
    from fpgaplace.hw.buffers import buffer_memory

    ecp5, zynq = load_board("ulx3s-85f").cores[0], load_board("zcu104").cores[0]
    buffers, widths = {"a": [256, 256], "b": [256], "c": [222, 256, 256]}, {"a": 1, "b": 1, "c": 1}
    assert buffer_memory(buffers, widths, ecp5).bram36 == 3
    assert buffer_memory(buffers, widths, zynq).bram36 == 6


def test_a_failed_synthesis_says_yosys_words_after_its_folder_is_gone(tmp_path):
    """yosys stopping on the RTL is one line with yosys' own error in it, so that it still says what
    went wrong once the (temporary) folder of the run is removed: ResNet-50's sim --resources said
    only "see <log>" of a folder deleted by then."""
    import shutil

    from fpgaplace.util.errors import FpgaplaceError

    broken = rtl.RtlModule("broken", {"broken.v": "module broken(input a);\n  wire w = ;\nendmodule\n"})
    with pytest.raises(FpgaplaceError) as caught:
        yosys.synthesize(broken, tmp_path / "unit", "xcup")
    shutil.rmtree(tmp_path / "unit")
    message = str(caught.value)
    assert message.startswith("yosys: synthesis of broken failed (exit 1): ") and "\n" not in message, message
    assert "broken.v:2" in message and "syntax error" in message.lower(), message
