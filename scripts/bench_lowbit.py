"""Low-bit lanes at their real width: the op library's DSP / LUT / FF / BRAM estimate beside yosys for
the dense unit at 1, 2, 4 and 8 bits and a few foldings, and the CNV network (FINN's BNN-PYNQ
topology) per width and board.

Usage: .venv/bin/python scripts/bench_lowbit.py [--kernels] [--convs] [--spans] [--turns] [--firsts] [--smalls]
[--models] [--compiled] [--sim-models] [--board pynq-z2] [--networks cnv_w1a1,...] [--boards pynq-z2,...]
[--synth full|dsp|none] [--jobs 2] [--keep DIR] [--json out.json] (no flag: --kernels and --models). Prints
markdown tables.

* ``--kernels`` (``kernel_rows``): per width and folding, the lanes the op library chooses for the
  board's core (``hw.kernel.lane_choice``), its DSPs, LUTs and BRAM36 beside yosys ``synth_xilinx``
  (or ``synth_ecp5``) of the rendered unit (``tests/rtl_cases.lowbit_dense_case``), and three rows
  estimated for the board's core with ``DSP_RICH_LUTS_PER_DSP`` LUTs a DSP, where ``lane_choice``
  packs w4a4 (w2a2's LUT lanes take fewer LUTs than its packed ones since the carry-chain adder
  trees, so that row is LUT lanes), and w1a2, w1a4, w1a8, w2a4 at one folding. 5 to 20 s of yosys per
  row here; 23 rows.
* ``--convs`` (``conv_rows``): the window unit's convolution with low-bit lanes and a threshold
  stage (``tests/rtl_cases.lowbit_conv_case``) on frames of 16 x 16 pixels: yosys' LUTs per module
  of the rendered unit (the window unit, its threshold stage, FIFO and output converter, which the
  Xilinx price does not hold: the HLS kernel has none) beside the estimate, and the line buffer's
  memories against its banks (more memories than banks: copies the Xilinx price does not hold,
  ``WindowKernel.line_buffer_memory``), and the gearbox's ``Gearbox.xc7_luts`` (unpriced on Xilinx).
  1 to 3 min of yosys per row; 9 rows.
* ``--spans`` (``conv_rows`` of ``SPAN_CASES``): the same on 8 x 8 frames for 16 units whose SIMD
  spans window positions (SIMD > CIN), the fit of ``hw.window.SPANNING_XNOR_SHARE`` and the
  lane shares beside it. 15 s to 2 min of yosys per row.
* ``--turns`` (``conv_rows`` of ``TURN_CASES``): the same on 8 x 8 frames (one 5 x 5, as the small
  CNV w2a2's conv_21 may compile) for 11 units whose SIMD neither divides CIN nor is a multiple of it
  (``hw.window.turns_channels``), the fit of ``hw.window.TURNING_LUT_PER_READ``. Under a minute of
  yosys per row.
* ``--firsts`` (``conv_rows`` of ``FIRST_CASES``): the same for 14 first layers (2- and 4-bit weights
  by 8-bit pixels, int8 products on DSPs, 3 channels in) on 8 to 32 pixel frames, the fit of
  ``hw.window.COPY_LUTS`` and the lanes' ``("dsp", 2, 8)`` and ``("dsp", 4, 8)`` costs. 20 s to a
  minute of yosys per row.
* ``--smalls`` (``conv_rows`` of ``SMALL_CASES``): the same for 14 units of one to 36 lanes on 3 x 3 to
  28 x 28 frames (depthwise 3 x 3 at PE 1 to 4, as MobileNetV1's are folded on a small Zynq, 1 x 1
  convs of 4 to 16 lanes, and one w2a2 unit at 2 x 8 x 1 on a 3 x 3 and a 28 x 28 frame: 604 and
  1,304 LUTs), where the window unit's control is most of it: the fit of
  ``hw.window.WINDOW_LUT_PER_CONTROL_BIT`` with the rows above. 20 s to a minute of yosys per row.
* ``--models`` (``cnv_cost_rows``): the CNV network at w1a1, w2a2, w4a4 and w8a8 folded onto one
  core of each board by the op library alone (``hw.folding.fold_core``): DSPs, LUTs, BRAM36 and
  the fps of its interval at the core's clock. Cost model only: no simulation.
* ``--compiled`` (``compiled_rows``): small QONNX MLPs (``zoo.qonnx_mlp``: w2a2, w4a4 unsigned,
  w1a2, w1a1 and w2a2 with batch norms, the last two with threshold stages) compiled for the board;
  per dense layer its widths, lanes and output stage, design.json's DSPs and LUTs beside yosys of
  the layer's RTL as compile wrote it (``sim.yosys.project_resources``). About a minute of yosys a layer.
* ``--sim-models`` (``network_rows``): the issue's table. FINN's CNV (with batch norms: threshold
  stages) at w1a1, w1a2, w2a2, w4a4 and, for comparison, w8a8 (batch norms folded: requantizers),
  and MobileNetV1 at 224 w4a4 and w8a8 (``--networks``), each compiled for pynq-z2, kv260 and
  zcu104 (``--boards``): cores, ops left on CPUs, fps from ``sim``, design.json's DSPs, LUTs and
  BRAM36, and yosys of every layer on a core (``--synth full``; ``dsp``: DSPs only; ``none``)
  beside the layers' estimate. The window units' output converters are counted apart ("LUT RTL
  only"): the RTL builds one, the HLS kernels a Xilinx project is built from have none, so the
  estimate does not hold it; so are the weight ROMs of layers whose weights the design keeps in DRAM
  or URAM, which the RTL keeps in a module of their own (their LUTs there, their blocks in "weight
  ROM BRAM36 (RTL only)", ``sim.yosys.unpriced_counts``). The unit rows
  and ``--compiled`` print FFs beside the estimate too (``hw.kernel.narrow_dot_ffs``, fitted to
  the unit rows). ``--keep DIR`` keeps the projects (and yosys' cache in them)
  for a run again. Minutes of yosys a CNV project, much more for MobileNetV1.

The anchor (FINN, binary CNV on CIFAR-10):

* Umuroglu et al., "FINN: A Framework for Fast, Scalable Binarized Neural Network Inference",
  FPGA 2017 (abstract): 21,906 classifications/s at 283 us latency on a ZC706 (80.1 % on CIFAR-10).
* finn-examples' Pynq-Z1 build of cnv-w1a1 (Xilinx/finn-examples,
  build/bnn-pynq/folding_config/cnv-w1a1_folding_config.json): MVAU PE x SIMD of 16x3, 32x32, 16x32,
  16x32, 4x32, 1x32, then the FC layers 1x4, 1x8, 5x1. By the MVAU cycle count (pixels * N/PE *
  K/SIMD) its slowest layers take 32,768 cycles (the two 512-wide FC layers), i.e. about 3,050 fps
  at 100 MHz; this is derived from the published folding, not a measured figure. Its accuracy is
  84.19 % (finn-examples' notebook test). Published LUT / BRAM counts of that build could not be
  verified here and are not quoted.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from rtl_cases import lowbit_conv_case, lowbit_dense_module, with_conv_thresholds  # noqa: E402

from fpgaplace.board.load import load_board  # noqa: E402
from fpgaplace.board.model import FAMILIES, Board, FpgaCore  # noqa: E402
from fpgaplace.codegen.rtl import render_op  # noqa: E402
from fpgaplace.hw import KERNELS, Folding  # noqa: E402
from fpgaplace.hw.folding import DoesNotFit, Stage, fold_core  # noqa: E402
from fpgaplace.hw.gearbox import OUTPUT_MODULES  # noqa: E402
from fpgaplace.hw.kernel import lane_choice, with_precision  # noqa: E402
from fpgaplace.hw.registry import dense_geometry, window_geometry  # noqa: E402
from fpgaplace.hw.window import line_buffer, output_gearbox  # noqa: E402
from fpgaplace.sim import yosys  # noqa: E402
from fpgaplace.util.errors import FpgaplaceError  # noqa: E402

WIDTHS = [(1, 1), (2, 2), (4, 4), (8, 8)]
FOLDINGS = [(64, 16, 4, 8), (64, 16, 8, 8), (64, 16, 4, 16), (512, 64, 2, 8)]  # K, N, PE, SIMD (the last: a BRAM ROM)
PACKED = [(48, 12, 3, 8, 4, 4), (48, 12, 6, 8, 4, 4), (64, 14, 7, 8, 2, 2)]  # K, N, PE, SIMD, bits: packed lanes
MIXED = [(64, 16, 4, 8, wb, xb) for wb, xb in ((1, 2), (1, 4), (1, 8), (2, 4))]  # K, N, PE, SIMD, bits: mixed widths
DSP_RICH_LUTS_PER_DSP = 5  # the packed rows' core: the board's core with 5 LUTs a DSP, so DSP lanes win
# the --convs rows: H, CIN, COUT, K, stride, pad, groups, (PE, SIMD, MMV), weight and input bits, unsigned
CONV_CASES = [
    (16, 16, 16, 3, 1, 1, 1, (4, 16, 1), 4, 4, True), (16, 16, 16, 3, 1, 1, 1, (4, 16, 2), 4, 4, True),
    (16, 16, 16, 3, 1, 1, 1, (2, 8, 1), 4, 4, True), (16, 32, 32, 1, 1, 0, 1, (4, 32, 1), 4, 4, True),
    (16, 32, 32, 3, 1, 1, 1, (8, 16, 1), 2, 2, True), (16, 32, 16, 3, 1, 0, 1, (4, 32, 1), 1, 1, False),
    (16, 32, 16, 3, 1, 0, 1, (8, 32, 2), 1, 1, False), (16, 16, 16, 3, 1, 0, 1, (4, 48, 1), 1, 1, False),
    (16, 16, 16, 3, 1, 1, 16, (4, 9, 1), 4, 4, True)]
# the --spans rows (SIMD > CIN; the last but one's 24 straddles 16-channel positions), as the --convs rows
SPAN_CASES = [
    (8, 8, 8, 3, 1, 1, 1, (4, 72, 2), 2, 2, True), (8, 8, 8, 3, 1, 1, 1, (4, 72, 1), 2, 2, True),
    (8, 8, 8, 3, 1, 1, 1, (2, 24, 1), 2, 2, True), (8, 8, 8, 3, 1, 1, 1, (8, 36, 1), 2, 2, True),
    (8, 16, 16, 3, 1, 1, 1, (4, 48, 1), 2, 2, True), (8, 4, 8, 3, 1, 1, 1, (2, 36, 1), 2, 2, True),
    (8, 8, 64, 3, 1, 1, 1, (2, 72, 1), 2, 2, True), (8, 8, 32, 3, 1, 1, 1, (4, 24, 1), 2, 2, True),
    (8, 8, 8, 3, 1, 0, 1, (4, 72, 2), 1, 1, False), (8, 16, 16, 3, 1, 0, 1, (4, 48, 2), 1, 1, False),
    (8, 16, 16, 3, 1, 0, 1, (4, 48, 1), 1, 1, False), (8, 8, 32, 3, 1, 0, 1, (4, 72, 1), 1, 1, False),
    (8, 8, 8, 3, 1, 1, 1, (4, 24, 1), 4, 4, True), (8, 8, 16, 3, 1, 1, 1, (4, 72, 1), 4, 4, True),
    (8, 16, 16, 3, 1, 1, 1, (4, 24, 2), 2, 2, True), (8, 8, 32, 3, 1, 1, 1, (4, 72, 1), 4, 4, True)]
# the --turns rows: w2a2 units whose SIMD neither divides CIN nor is a multiple of it (lanes turn
# channels from fold to fold), one w4a4 and five w1a1, as the --convs rows on 8 x 8 frames
TURN_CASES = [
    (8, 16, 32, 3, 1, 1, 1, (2, 36, 1), 2, 2, True), (8, 32, 32, 3, 1, 1, 1, (2, 9, 1), 2, 2, True),
    (8, 16, 32, 3, 1, 1, 1, (8, 9, 1), 2, 2, True), (8, 16, 32, 3, 1, 1, 1, (1, 72, 1), 2, 2, True),
    (8, 16, 16, 3, 1, 1, 1, (4, 12, 1), 4, 4, True), (8, 16, 16, 3, 1, 0, 1, (8, 12, 1), 1, 1, False),
    (8, 16, 32, 3, 1, 0, 1, (2, 36, 1), 1, 1, False), (8, 32, 32, 3, 1, 0, 1, (2, 9, 1), 1, 1, False),
    (8, 16, 32, 3, 1, 0, 1, (8, 9, 1), 1, 1, False), (8, 16, 32, 3, 1, 0, 1, (1, 72, 1), 1, 1, False),
    (5, 16, 32, 3, 1, 0, 1, (1, 72, 1), 2, 2, True)]  # the last as the small CNV w2a2's conv_21 compiles
CONV_THRESHOLDS = {1: (-1, 2), 2: (0, 3), 4: (0, 15)}  # output bits: (LO, thresholds a channel)
# the --firsts rows: a low-bit network's first layer, 2- or 4-bit weights by 8-bit pixels (int8 products
# on DSPs), 3 channels in, writing the weights' width through thresholds (``case_output_bits``), as the CNV's does
FIRST_CASES = [(h, 3, cout, 3, 1, 0, 1, fold, wb, 8, False) for wb in (2, 4) for h, cout, fold in (
    (32, 64, (2, 27, 1)), (16, 16, (2, 27, 1)), (16, 32, (1, 27, 1)), (16, 16, (4, 9, 1)), (16, 16, (2, 3, 1)),
    (16, 32, (8, 27, 1)), (8, 16, (4, 27, 2)))]
# the --smalls rows: units of few lanes, depthwise (w4a4 unsigned as MobileNetV1's, one w2a2, one w1a1), 1 x 1,
# and one unit on a 3 x 3 and a 28 x 28 frame
SMALL_CASES = [
    *[(14, 32, 32, 3, 1, 1, 32, fold, 4, 4, True) for fold in ((1, 1, 1), (2, 1, 1), (4, 1, 1), (1, 9, 1), (4, 9, 1))],
    (14, 128, 128, 3, 1, 1, 128, (1, 1, 1), 4, 4, True), (28, 64, 64, 3, 2, 1, 64, (2, 1, 1), 4, 4, True),
    (14, 32, 32, 3, 1, 1, 32, (1, 1, 1), 2, 2, True), (14, 32, 32, 3, 1, 0, 32, (2, 3, 1), 1, 1, False),
    *[(14, 64, 64, 1, 1, 0, 1, fold, 4, 4, True) for fold in ((1, 16, 1), (2, 8, 1), (1, 4, 1))],
    (3, 32, 32, 3, 1, 0, 1, (2, 8, 1), 2, 2, True), (28, 32, 32, 3, 1, 1, 1, (2, 8, 1), 2, 2, True)]
BOARDS = ["pynq-z2", "zcu104"]
FINN_CNV_W1A1_FPS_PYNQ_Z1 = 100e6 / 32768  # derived from finn-examples' folding (see the docstring)

# CNV (BNN-PYNQ): 3x32x32 in; conv 3x3 valid 64, 64, pool, 128, 128, pool, 256, 256; FC 512, 512, 10
CNV_CONVS = [(32, 3, 64), (30, 64, 64), (14, 64, 128), (12, 128, 128), (5, 128, 256), (3, 256, 256)]  # H, CIN, COUT
CNV_POOLS = (1, 3)  # a 2x2 max pool after these convs
CNV_DENSE = [(256, 512), (512, 512), (512, 10)]


def kernel_rows(board: str) -> list[dict[str, Any]]:
    """Per width and folding: the op library's lanes and resources beside yosys' (see the docstring)."""
    core = load_board(board).cores[0]
    family = FAMILIES[core.family]
    dsp_rich = replace(core, lut=core.dsp * DSP_RICH_LUTS_PER_DSP)
    cases = [(k, n, pe, simd, wb, xb, core) for wb, xb in WIDTHS for k, n, pe, simd in FOLDINGS]
    cases += [(*case, dsp_rich) for case in PACKED] + [(*case, core) for case in MIXED]
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-lowbit-") as scratch:
        for k, n, pe, simd, wb, xb, chosen_for in cases:
            module, geometry, lanes = lowbit_dense_module(k, n, pe, simd, wb, xb, chosen_for)
            got = yosys.synthesize(module, Path(scratch) / f"w{wb}a{xb}_{k}x{n}_{pe}x{simd}", family)
            estimate = KERNELS["dense"].resources(geometry, Folding(pe, simd), chosen_for)
            rows.append({"width": f"w{wb}a{xb}", "K x N": f"{k}x{n}", "PE x SIMD": f"{pe}x{simd}",
                         "lanes": lanes.kind + (f" x{lanes.pack}" if lanes.kind == "dsp" else ""),
                         "dsp est": estimate.dsp, "dsp yosys": got.dsp, "lut est": estimate.lut,
                         "lut yosys": got.lut, "lut ratio": round(got.lut / estimate.lut, 2),
                         "ff est": estimate.ff, "ff yosys": got.ff,
                         "bram est": estimate.bram36, "bram yosys": got.bram36})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def module_parts(folder: Path, family) -> dict[str, dict[str, int]]:
    """LUTs and FFs of each module of the yosys ``stat -json`` document ``synthesize`` left in
    ``folder`` (each module's own cells), by the part of the unit it is. O(cells)."""
    parts: dict[str, dict[str, int]] = {}
    for title, counts in yosys.module_resources(yosys.read_stat(folder), family).items():
        part = "output" if OUTPUT_MODULES & set(title.split("\\")) else next(
            (name for key, name in (("fp_fifo", "fifo"), ("threshold", "threshold")) if key in title), "window unit")
        summed = parts.setdefault(part, {"lut": 0, "ff": 0})
        summed["lut"], summed["ff"] = summed["lut"] + counts.lut, summed["ff"] + counts.ff
    return parts


def case_output_bits(weight_bits: int, activation_bits: int) -> int:
    """A conv case's output width: its inputs', but a first layer (8-bit pixels) writes its
    weights' width, as the CNV's first layer does. O(1)."""
    return activation_bits if activation_bits < 8 else weight_bits


def conv_rows(board: str, cases: list[tuple] = CONV_CASES) -> list[dict[str, Any]]:
    """Per low-bit conv case of ``cases``: yosys' LUTs by module beside the estimate, and the line
    buffer's memories and banks (see the docstring)."""
    core = load_board(board).cores[0]
    family = FAMILIES[core.family]
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-lowbit-conv-") as scratch:
        for h, cin, cout, k, stride, pad, groups, fold, wb, xb, unsigned in cases:
            case = lowbit_conv_case(h, cin, cout, k, stride, pad, groups, Folding(*fold), wb, xb, unsigned, seed=5)
            config, arrays, _, folding = with_conv_thresholds(case, *CONV_THRESHOLDS[case_output_bits(wb, xb)], 5)
            module = render_op("conv2d", config, arrays, folding, 1, macs_per_dsp=core.macs_per_dsp, core=core).module
            folder = Path(scratch) / f"w{wb}a{xb}_{cin}x{cout}_k{k}_g{groups}_h{h}_{'x'.join(map(str, fold))}"
            total = yosys.synthesize(module, folder, family)
            parts = module_parts(folder, family)
            geometry = with_precision(KERNELS["conv2d"].config_geometry(config), wb, xb)
            estimate = KERNELS["conv2d"].resources(geometry, folding, core)
            buffer = line_buffer(KERNELS["conv2d"].window_shape(geometry.shape, folding),
                                 KERNELS["conv2d"].priced_input_width(geometry, folding))
            output = parts.get("output", {"lut": 0, "ff": 0})
            built = total.lut - (0 if family.rtl_built else output["lut"])
            built_ff = total.ff - (0 if family.rtl_built else output["ff"])
            rows.append({"width": f"w{wb}a{xb}", "conv": f"{cin}->{cout} {k}x{k}" + (" dw" if groups > 1 else ""),
                         "PE x SIMD x MMV": "x".join(map(str, fold)), "lanes": lane_choice(core, wb, xb).kind,
                         "lut yosys": total.lut, **{f"lut {part}": parts.get(part, {}).get("lut", 0) for part in
                                                    ("window unit", "threshold", "fifo", "output")},
                         "lut est": estimate.lut, "priced part / est": round(built / estimate.lut, 2),
                         "ff yosys": total.ff, "ff output": output["ff"], "ff est": estimate.ff,
                         "ff priced part / est": round(built_ff / estimate.ff, 2),
                         "gearbox xc7_luts": output_gearbox(KERNELS["conv2d"].window_shape(config, folding)).xc7_luts(),
                         "memories / banks": f"{buffer.layout(xb)[0]} / {buffer.banks}",
                         "bram est": estimate.bram36, "bram yosys": total.bram36})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def cnv_stages(weight_bits: int, act_bits: int) -> list[Stage]:
    """The CNV network's stages at ``weight_bits`` / ``act_bits`` (the first layer reads 8-bit
    pixels, the last writes 8-bit scores, as FINN's CNV does)."""
    stages = []
    for i, (size, cin, cout) in enumerate(CNV_CONVS):
        out = size - 2
        config = {"H": size, "W": size, "CIN": cin, "COUT": cout, "KH": 3, "KW": 3, "SH": 1, "SW": 1, "PT": 0,
                  "PL": 0, "PB": 0, "PR": 0, "DH": 1, "DW": 1, "GROUPS": 1, "HO": out, "WO": out}
        bits = (weight_bits, 8 if i == 0 else act_bits)
        stages.append(Stage(f"conv{i}", KERNELS["conv2d"], with_precision(window_geometry("conv2d", config), *bits)))
        if i in CNV_POOLS:
            pooled = {"H": out, "W": out, "C": cout, "KH": 2, "KW": 2, "SH": 2, "SW": 2, "HO": out // 2, "WO": out // 2}
            geometry = with_precision(window_geometry("maxpool", pooled), 8, act_bits)
            stages.append(Stage(f"pool{i}", KERNELS["maxpool"], geometry))
    for i, (k, n) in enumerate(CNV_DENSE):
        stages.append(Stage(f"fc{i}", KERNELS["dense"], with_precision(dense_geometry(k, n), weight_bits, act_bits)))
    return stages


def whole_fabric(board: Board) -> FpgaCore:
    """One core holding every core's budget of ``board`` (the network on the whole fabric, as FINN
    builds it)."""
    cores = board.cores
    totals = {key: sum(getattr(c, key) for c in cores) for key in ("dsp", "lut", "ff", "bram36", "uram")}
    return replace(cores[0], **totals)


def cnv_cost_rows(boards: list[str]) -> list[dict[str, Any]]:
    """CNV per board and width, folded onto the board's whole fabric by the op library alone;
    a width that fits at no folding is a row saying so."""
    rows = []
    for name in boards:
        board = load_board(name)
        core = whole_fabric(board)
        for wb, xb in WIDTHS:
            try:
                folded = fold_core(cnv_stages(wb, xb), core, board.dram)
            except DoesNotFit as error:
                rows.append({"board": name, "width": f"w{wb}a{xb}", "lanes": lane_choice(core, wb, xb).kind,
                             "dsp": "-", "lut": "-", "bram36": "-", "interval cycles": "-",
                             "fps (cost model)": f"does not fit: {error.resource}", "clock MHz": core.clock_mhz})
                continue
            used = folded.resources
            rows.append({"board": name, "width": f"w{wb}a{xb}",
                         "lanes": lane_choice(core, wb, xb).kind, "dsp": used.dsp, "lut": used.lut,
                         "bram36": used.bram36, "interval cycles": folded.interval,
                         "fps (cost model)": round(core.clock_mhz * 1e6 / folded.interval),
                         "clock MHz": core.clock_mhz})
    return rows


# --sim-models: name -> (weight bits, activation bits); cnv_*: zoo.cnv, mobilenet_*: zoo.mobilenet_v1_lowbit
NETWORKS = {
    **{f"cnv_w{w}a{a}": (w, a) for w, a in ((1, 1), (1, 2), (2, 2), (4, 4), (8, 8))},
    "mobilenet_w4a4": (4, 4), "mobilenet_w8a8": (8, 8)}
SIM_BOARDS = ["pynq-z2", "kv260", "zcu104"]


def network(name: str):
    """The QONNX model of a ``NETWORKS`` name: CNV with a batch norm before each activation quantizer
    (FINN's CNV; threshold stages) below 8 bits, at 8 bits without (an int8 deployment folds its batch
    norms into the weights: requantizers); MobileNetV1 at 224 with 8-bit first and last layers."""
    wb, xb = NETWORKS[name]
    from fpgaplace.model import zoo

    return zoo.cnv(wb, xb, batch_norm=xb < 8) if name.startswith("cnv") else zoo.mobilenet_v1_lowbit(wb, xb)


def synthesized_totals(project: Path, synth: str, jobs: int) -> dict[str, Any]:
    """yosys of every layer of ``project`` (``synth``: ``full``, ``dsp``: DSPs only, ``none``) beside
    design.json's estimate, summed over the layers on cores: LUTs and BRAM36 priced and those of RTL
    the Xilinx design has none of (the window units' output converters; the weight ROMs, blocks and
    LUTs, of layers whose weights it keeps in DRAM or URAM: ``sim.yosys.unpriced_counts``)."""
    if synth == "none":
        return {}
    result = yosys.project_resources(project, dsp_only=synth == "dsp", jobs=jobs,
                                     progress=lambda line: print(f"  {project.name}: {line}", file=sys.stderr))
    layers = [layer for core in result.cores for layer in core.layers]
    row = {"DSP est": sum(layer.estimate["dsp"] for layer in layers),
           "DSP yosys": sum(layer.yosys.dsp for layer in layers)}
    if synth == "full":
        row |= {"LUT est": sum(layer.estimate["lut"] for layer in layers),
                "LUT yosys": sum(layer.priced_lut for layer in layers),
                "LUT RTL only (output, weight ROM)": sum(layer.unpriced_lut for layer in layers),
                "FF est": sum(layer.estimate["ff"] for layer in layers),
                "FF yosys": sum(layer.yosys.ff for layer in layers),
                "BRAM36 est": sum(layer.estimate["bram36"] for layer in layers),
                "BRAM36 yosys": sum(layer.priced_bram36 for layer in layers),
                "weight ROM BRAM36 (RTL only)": sum(layer.unpriced_bram36 for layer in layers)}
    return row


def network_rows(names: list[str], boards: list[str], folder: Path, synth: str, jobs: int) -> list[dict[str, Any]]:
    """Each network compiled per board (``folder/<name>-<board>``, kept: a run again reuses the
    project and yosys' cache in it): cores, ops left on CPUs, fps from ``sim``, design.json's DSPs,
    LUTs and BRAM36 on the cores, and ``synthesized_totals`` beside them."""
    from fpgaplace import Design
    from fpgaplace.project.record import load

    rows = []
    for name in names:
        for board in boards:
            project = folder / f"{name}-{board}"
            if not (project / "design.json").is_file():
                Design(network(name), board, profile_cpu=False).compile(project, random_samples=2)
            design = load(project)
            totals = {key: sum(core.resources.get(key, 0) for core in design.cores) for key in ("dsp", "lut", "bram36")}
            wb, xb = NETWORKS[name]
            row = {"network": name.split("_")[0], "width": f"w{wb}a{xb}", "board": board, "cores": len(design.cores),
                   "CPU ops": len(design.cpu_ops), "fps (sim)": round(Design.sim(project).fps),
                   "design DSP": totals["dsp"], "design LUT": totals["lut"], "design BRAM36": totals["bram36"]}
            rows.append(row | synthesized_totals(project, synth, jobs))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


COMPILED_MLPS = {  # name: (weight bits, activation bits, signed activations, batch norms)
    "w2a2": (2, 2, True, False), "w4a4u": (4, 4, False, False), "w1a2": (1, 2, True, False),
    "w1a1": (1, 1, True, False), "w2a2-bn": (2, 2, True, True),
}


def compiled_rows(board: str, folder: Path) -> list[dict[str, Any]]:
    """Per dense layer of each compiled QONNX MLP (``COMPILED_MLPS``): widths, lanes, output stage,
    design.json's DSPs and LUTs beside yosys of its RTL, and the LUT error relative to yosys."""
    from fpgaplace import Design
    from fpgaplace.hw.dense import lane_widths
    from fpgaplace.model import zoo
    from fpgaplace.project.arrays import load_arrays
    from fpgaplace.project.record import load

    core = load_board(board).cores[0]
    rows = []
    for name, (wb, xb, signed, batch_norm) in COMPILED_MLPS.items():
        project = folder / name
        Design(zoo.qonnx_mlp(wb, xb, signed=signed, batch_norm=batch_norm), board,
               profile_cpu=False).compile(project, random_samples=2)
        design = load(project)
        lanes = {layer.op: lane_widths(layer.widths.to_json(), arrays["w"]) or {"WB": 8, "XB": 8}
                 for record in design.cores for layer, arrays in zip(record.layers, load_arrays(project, record),
                                                                     strict=True) if layer.kernel == "dense"}
        records = {layer.op: layer for record in design.cores for layer in record.layers}
        for result in yosys.project_resources(project).cores:
            for layer in result.layers:
                members, record = lanes[layer.op], records[layer.op]
                rows.append({"model": f"mlp-{name}", "op": layer.op, "widths": record.widths.text(),
                             "lanes": lane_choice(core, members["WB"], members["XB"]).kind,
                             "PE x SIMD": f"{record.pe} x {record.simd}", "DSP est": layer.estimate["dsp"],
                             "DSP yosys": layer.yosys.dsp, "LUT est": layer.estimate["lut"],
                             "LUT yosys": layer.yosys.lut,
                             "LUT err": f"{(layer.estimate['lut'] - layer.yosys.lut) / layer.yosys.lut:+.1%}",
                             "FF est": layer.estimate["ff"], "FF yosys": layer.yosys.ff})
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(no rows)\n"
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(row[key]) for key in keys) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--kernels", action="store_true", help="dense units per width and folding (23 rows)")
    parser.add_argument("--convs", action="store_true", help="low-bit conv units on 16 x 16 frames (9 rows)")
    parser.add_argument("--spans", action="store_true", help="conv units whose SIMD spans window positions (16)")
    parser.add_argument("--turns", action="store_true", help="conv units whose lanes turn channels (11)")
    parser.add_argument("--firsts", action="store_true", help="first layers: 2/4-bit weights by 8-bit pixels (14)")
    parser.add_argument("--smalls", action="store_true", help="units of few lanes: depthwise and 1 x 1 convs (14)")
    parser.add_argument("--models", action="store_true", help="CNV per width and board, cost model only")
    parser.add_argument("--compiled", action="store_true", help="compiled QONNX MLPs' dense layers beside yosys")
    parser.add_argument("--sim-models", action="store_true",
                        help="the issue's table: networks compiled, simulated and synthesized per board")
    parser.add_argument("--board", default="pynq-z2", help="board of the kernel table")
    parser.add_argument("--networks", default=",".join(NETWORKS), help="--sim-models: comma-separated networks")
    parser.add_argument("--boards", default=",".join(SIM_BOARDS), help="--sim-models: comma-separated boards")
    parser.add_argument("--synth", choices=("full", "dsp", "none"), default="full",
                        help="--sim-models: yosys of every layer, its DSPs only, or none")
    parser.add_argument("--jobs", type=int, default=2, help="--sim-models: yosys runs side by side")
    parser.add_argument("--keep", type=Path, help="--sim-models: folder of the compiled projects (kept)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    tables = (args.kernels, args.convs, args.spans, args.turns, args.firsts, args.smalls, args.models, args.compiled,
              args.sim_models)
    everything = not any(tables)
    out: dict[str, Any] = {}
    if args.kernels or everything:
        out["kernels"] = kernel_rows(args.board)
        print(f"## Dense unit at its widths on {args.board}: op library beside yosys\n\n{markdown(out['kernels'])}")
    if args.convs:
        out["convs"] = conv_rows(args.board)
        print(f"## Low-bit conv units on {args.board}: yosys by module beside the estimate\n\n{markdown(out['convs'])}")
    if args.spans:
        out["spans"] = conv_rows(args.board, SPAN_CASES)
        print(f"## Conv units with a spanning SIMD on {args.board}: yosys by module beside the estimate\n\n"
              f"{markdown(out['spans'])}")
    if args.turns:
        out["turns"] = conv_rows(args.board, TURN_CASES)
        print(f"## Conv units whose lanes turn channels on {args.board}: yosys by module beside the estimate\n\n"
              f"{markdown(out['turns'])}")
    if args.smalls:
        out["smalls"] = conv_rows(args.board, SMALL_CASES)
        print(f"## Conv units of few lanes on {args.board}: yosys by module beside the estimate\n\n"
              f"{markdown(out['smalls'])}")
    if args.firsts:
        out["firsts"] = conv_rows(args.board, FIRST_CASES)
        print(f"## First-layer conv units (narrow weights by 8-bit pixels) on {args.board}: yosys by module beside "
              f"the estimate\n\n{markdown(out['firsts'])}")
    if args.models or everything:
        out["models"] = cnv_cost_rows(BOARDS)
        print(f"## CNV per width and board (cost model)\n\nFINN cnv-w1a1 on Pynq-Z1 (derived from its folding): "
              f"{math.floor(FINN_CNV_W1A1_FPS_PYNQ_Z1)} fps at 100 MHz; FINN paper, ZC706: 21,906 fps.\n\n"
              f"{markdown(out['models'])}")
    if args.compiled:
        with tempfile.TemporaryDirectory(prefix="bench-lowbit-mlp-") as scratch:
            out["compiled"] = compiled_rows(args.board, Path(scratch))
        print(f"## Compiled QONNX MLPs on {args.board}: design.json beside yosys per dense layer\n\n"
              f"{markdown(out['compiled'])}")
    if args.sim_models:
        names = [name for name in args.networks.split(",") if name]
        unknown = [name for name in names if name not in NETWORKS]
        if unknown:
            parser.error(f"--networks: {', '.join(unknown)}; expected some of {', '.join(NETWORKS)}")
        boards = [name for name in args.boards.split(",") if name]
        for board in boards:  # an unknown board or a jobs count below one fails before any compile
            try:
                load_board(board)
            except FpgaplaceError as error:
                parser.error(f"--boards: {error}")
        if args.jobs < 1:
            parser.error(f"--jobs: {args.jobs}; expected at least 1")
        with tempfile.TemporaryDirectory(prefix="bench-lowbit-nets-") as scratch:
            folder = args.keep or Path(scratch)
            out["sim_models"] = network_rows(names, boards, folder, args.synth, args.jobs)
        print(f"## Networks per width and board (compiled, sim, yosys: {args.synth})\n\n"
              f"FINN cnv-w1a1 on Pynq-Z1 (derived from its folding): {math.floor(FINN_CNV_W1A1_FPS_PYNQ_Z1)} fps "
              f"at 100 MHz; FINN paper, ZC706: 21,906 fps.\n\n{markdown(out['sim_models'])}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
