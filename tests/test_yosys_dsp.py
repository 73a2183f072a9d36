"""yosys synth_xilinx / synth_ecp5 DSP counts of every layer of compiled projects equal the op
library's estimate exactly (issue 9): the MAC lanes as the RTL pairs them on a DSP48E2 and the
requantizers' multipliers, per op and per core, on a DSP48E1 board (pynq-z2), a DSP48E2 one
(zcu104) and an ECP5 one (ulx3s-85f, MULT18X18D). yosys stops after its DSP mapping
(``dsp_only``), where the count is final."""

from __future__ import annotations

from pathlib import Path

import pytest
from rtl_cases import dense_case

from fpgaplace import Design
from fpgaplace.board.load import load_board
from fpgaplace.codegen import rtl
from fpgaplace.hw import KERNELS, Folding
from fpgaplace.hw.kernel import requantize_plan
from fpgaplace.hw.registry import dense_geometry
from fpgaplace.model import zoo as models
from fpgaplace.project.record import load
from fpgaplace.sim import yosys

PROJECTS = {  # name: (model, board); small enough for yosys under a minute or two each
    "mlp-pynq-z2": (lambda: models.mlp(batch=1), "pynq-z2"),
    "mlp-zcu104": (lambda: models.mlp(batch=1), "zcu104"),
    "cnn16-pynq-z2": (lambda: models.cnn_residual(batch=1, image=16), "pynq-z2"),
    "mlp-ulx3s-85f": (lambda: models.mlp(batch=1), "ulx3s-85f"),
}


def compiled(folder: Path, name: str) -> Path:
    model, board = PROJECTS[name]
    design = Design(model(), board, profile_cpu=False).quantized(random_samples=2)
    design.place()
    design.compile(folder / name)
    return folder / name


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PROJECTS))
def test_yosys_dsps_equal_the_estimate_per_op_and_core(tmp_path, name):
    """Every layer's DSPs from yosys as ``sim --resources --dsp-only`` counts them (a layer's DSP
    probe where it has one: ``test_stage_checks`` shows a probe maps its layer's DSPs) equal its
    estimate, and each core's sum the core's."""
    from fpgaplace.flow.checks import dsp_probes

    project = compiled(tmp_path, name)
    result = yosys.project_resources(project, dsp_only=True, probe=dsp_probes(project))
    design = load(project)
    assert [core.name for core in result.cores] == [core.name for core in design.cores]
    kernels = set()
    for core, record in zip(result.cores, design.cores, strict=True):
        for layer in core.layers:
            assert layer.yosys.dsp == layer.estimate["dsp"], (core.name, layer.op, layer.kernel, layer.yosys)
            kernels.add(layer.kernel)
        assert sum(layer.yosys.dsp for layer in core.layers) == record.resources["dsp"], core.name
        assert record.resources["dsp"] <= record.budget["dsp"], "the folding keeps the core within its DSPs"
    assert "dense" in kernels or "conv2d" in kernels
    assert any(layer.yosys.dsp > 0 for core in result.cores for layer in core.layers)


@pytest.mark.slow
@pytest.mark.parametrize(("board", "family"), [("pynq-z2", "xc7"), ("zcu104", "xcup"), ("ulx3s-85f", "ecp5")])
@pytest.mark.parametrize("k", [8, 64, 1024, 4096])
def test_requantizer_dsps_follow_the_dot_product_width(tmp_path, board, family, k):
    """A dot product of K int8 products needs log2(K) + 16 bits: past the A port (25 bits on a
    DSP48E1, 27 on a DSP48E2, 18 on an ECP5 MULT18X18D) the requantizer's multiplier takes two
    DSPs, unless only one bit is left over (K = 8 on ECP5: 19 bits), which yosys multiplies in
    LUTs. With K folds for two results, one two-cycle unit (``requantize_plan``) multiplies both
    partial products on that one multiplier."""
    core = load_board(board).cores[0]
    folding = Folding(2, 1, 1)
    config, arrays, _, _ = dense_case(k, 2, folding, seed=3)
    op = rtl.render_op("dense", config, arrays, folding, 100, macs_per_dsp=core.macs_per_dsp)
    got = yosys.synthesize(rtl.RtlModule(op.module.top, {**rtl.library(), **op.module.files}), tmp_path, family,
                           dsp_only=True)
    estimate = KERNELS["dense"].resources(dense_geometry(k, 2), folding, core)
    assert got.dsp == estimate.dsp, (got, estimate)
    macs = 2 // core.macs_per_dsp  # two channels, SIMD 1: paired on a DSP48E2
    a_port = {"xc7": 25, "xcup": 27, "ecp5": 18}[family]
    bits = (k * 2**14).bit_length() + 1
    one_bit_over = family == "ecp5" and bits == a_port + 1  # mul2dsp: an 18-bit part and a 1-bit one (LUTs)
    assert requantize_plan(2, k) == (1, 2)
    assert estimate.dsp - macs == (1 if bits <= a_port or one_bit_over else 2)
