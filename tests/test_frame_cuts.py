"""RTL cycles by per-frame cuts (``fpgaplace.sim.rtl_project.extrapolate``, ``Kernel.cut_rows``,
``fpgaplace.flow.checks.frame_cuts``): a window stage simulated on two bands of its frame's rows
gives, through the line between them, the steady cycles the whole frame measures in the same RTL,
and every output of the bands is bit-exact against the cut layer's reference."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

import pytest

from fpgaplace import Design
from fpgaplace.board.load import load_board
from fpgaplace.flow.checks import frame_cuts
from fpgaplace.hw import KERNELS
from fpgaplace.model import zoo
from fpgaplace.project.record import load
from fpgaplace.sim import rtl_project
from fpgaplace.sim.stages import layer_modules, select
from fpgaplace.util.errors import FpgaplaceError

ONE_CORE_BOARD = Path(__file__).parent / "boards" / "pynq-z2-one-core.yaml"


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """The small residual CNN at 10 px as one pynq-z2 core: frames of 10 and 5 output rows."""
    folder = tmp_path_factory.mktemp("cuts") / "cnn"
    Design(zoo.cnn_residual(batch=1, image=10), load_board(ONE_CORE_BOARD), profile_cpu=False).compile(folder)
    return folder


def test_cut_keeps_the_frame_bottom_and_the_module_but_its_height():
    conv = KERNELS["conv2d"]
    config = {"H": 16, "W": 16, "HO": 8, "SH": 2, "KH": 3, "PT": 1, "PB": 0}
    assert conv.cut_rows(config, 3) == {**config, "H": 6, "HO": 3}  # (16 + 1 - 3) // 2 + 1 = 8 rows; 6 -> 3
    with pytest.raises(FpgaplaceError, match="cannot cut"):
        conv.cut_rows(config, 9)
    assert KERNELS["dense"].frame_rows({"K": 4, "N": 2}) is None
    assert rtl_project.extrapolate((3, 4), (672.0, 864.0), 16) == 3168.0
    assert rtl_project.cut_heights(3) is None and rtl_project.cut_heights(None) is None
    assert rtl_project.cut_heights(32, config) == (3, 4)
    assert rtl_project.cut_heights(112, {"KH": 7, "SH": 2}) == (4, 5)  # a band clear of the 7-row window's top


@pytest.mark.slow
def test_frame_cut_cycles_equal_the_whole_frame(project: Path, monkeypatch: pytest.MonkeyPatch):
    """The stem conv (10 output rows) and the stride-2 max pool (5) timed on bands of 3 and 4 rows
    (forced where the whole frame is cheaper): cycles equal the whole frame's exactly, both
    bit-exact; a band's Verilog is the project's with only numbers changed (the height, the
    widths of the counters over it, the line-buffer slot a frame ends on)."""
    monkeypatch.setattr(rtl_project, "CUT_WORTH", 100.0)
    picked = "core0/0,core0/1"
    cut = frame_cuts(project)
    cuts = rtl_project.simulate_project_stages(project, jobs=2, stages=picked, cut=cut)
    whole = rtl_project.simulate_project_stages(project, jobs=2, stages=picked)
    banded = [(a, b) for a, b in zip(cuts.cores[0].stages, whole.cores[0].stages, strict=True) if a.cut]
    assert len(banded) == 2 and {a.kernel for a, _ in banded} == {"conv2d", "maxpool"}, cuts
    for a, b in banded:
        assert a.bit_exact and b.bit_exact, (a, b)
        assert a.cycles_measured == b.cycles_measured, (a, b)
        assert a.cut is not None and a.cut.per_row > 0
    stage = select(load(project), "core0/0")[0]
    band, module = cut(stage, 3), layer_modules(project, stage.core)[0]
    assert band is not None and band.module.files.keys() == module.files.keys()
    changed = [line for name in module.files for line in difflib.ndiff(
        module.files[name].splitlines(), band.module.files[name].splitlines()) if line[:2] in ("- ", "+ ")]
    removed = sorted(re.sub(r"\d+", "#", line[2:]) for line in changed if line[0] == "-")
    added = sorted(re.sub(r"\d+", "#", line[2:]) for line in changed if line[0] == "+")
    assert changed and removed == added, changed
