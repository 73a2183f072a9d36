"""``compile --fps``: every core folded only as fast as the rate needs, on its cheapest foldings
(``hw.folding.fold_core`` with ``FpgaCore.fps``), the placement as without; on ulx3s-85f, whose
UART link feeds the small CNN about 89 samples a second, the fabric's extra speed is waste."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from fpgaplace import Design
from fpgaplace.cli.app import app
from fpgaplace.model import zoo
from fpgaplace.project.record import load
from fpgaplace.sim.event import simulate

RATE = 300.0  # samples a second: above the link's rate, below the cores' fastest folding
BOARD = "ulx3s-85f"


@pytest.fixture(scope="module")
def projects(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("fps")
    model = zoo.cnn_residual(batch=1)
    Design(model, BOARD, profile_cpu=False).compile(folder / "fastest", random_samples=4)
    Design(model, BOARD, profile_cpu=False).compile(folder / "capped", random_samples=4, fps=RATE)
    return folder / "fastest", folder / "capped"


def test_a_core_folded_for_a_rate_keeps_up_with_it_on_fewer_resources(projects):
    fastest, capped = (load(project) for project in projects)
    assert [core.ops for core in capped.cores] == [core.ops for core in fastest.cores]  # the same placement
    assert capped.placement.refinement["fps_target"] == RATE
    for fast, slow in zip(fastest.cores, capped.cores, strict=True):
        allowed = slow.clock_mhz * 1e6 / RATE
        assert fast.interval_cycles < slow.interval_cycles <= allowed, (slow.name, fast.interval_cycles, allowed)
        assert all(layer.cycles <= allowed for layer in slow.layers)
        assert all(slow.resources[key] <= fast.resources[key] for key in fast.resources), (fast.resources,
                                                                                           slow.resources)
        assert slow.resources["dsp"] < fast.resources["dsp"] and slow.binding == ["fps"]
        assert fast.binding != ["fps"]


def test_the_link_bound_rate_is_the_same_on_the_smaller_fabric(projects):
    """The link (89 samples a second) bounds both designs: the capped one loses nothing."""
    fastest, capped = (simulate(project, 8) for project in projects)
    assert capped.fps == pytest.approx(fastest.fps, rel=1e-6) and capped.fps < RATE


def test_a_rate_the_cores_cannot_reach_keeps_their_fastest_folding(projects, tmp_path):
    fastest = load(projects[0])
    Design(zoo.cnn_residual(batch=1), BOARD, profile_cpu=False).compile(tmp_path / "p", random_samples=4, fps=1e9)
    beyond = load(tmp_path / "p")
    assert [[(layer.pe, layer.simd, layer.mmv) for layer in core.layers] for core in beyond.cores] == \
        [[(layer.pe, layer.simd, layer.mmv) for layer in core.layers] for core in fastest.cores]
    assert all(core.binding != ["fps"] for core in beyond.cores)


@pytest.mark.parametrize("rate", ["0", "-3", "nan", "inf"])
def test_a_rate_that_is_no_rate_is_one_line_before_any_work(tmp_path, rate):
    model = tmp_path / "model.onnx"
    model.write_bytes(zoo.mlp().SerializeToString())
    run = CliRunner().invoke(app, ["compile", str(model), "--out", str(tmp_path / "p"), "--fps", rate])
    assert run.exit_code != 0
    assert run.output.strip().splitlines() == [f"error: --fps: expected samples a second above 0, got {rate}"]
    assert not (tmp_path / "p").exists()


def test_compile_says_a_core_folded_for_the_rate_keeps_up_with_it_not_how_far_it_is_from_its_plan(tmp_path):
    """The plan is the fastest folding's, so a core folded for ``--fps`` would read thousands of
    percent "against the plan": compile says its rate beside the one asked for instead."""
    model = tmp_path / "model.onnx"
    model.write_bytes(zoo.cnn_residual(batch=1, image=8).SerializeToString())
    run = CliRunner().invoke(app, ["compile", str(model), "--out", str(tmp_path / "p"), "--fps", f"{RATE:g}",
                                   "--board", BOARD])
    assert run.exit_code == 0, run.output
    capped = [core for core in load(tmp_path / "p").cores if core.binding == ["fps"]]
    assert capped, "no core folded for the rate"
    text = " ".join(run.output.split())  # the console wraps long lines
    for core in capped:
        said = text.split(f"{core.name}: folded interval ")[1].split(f"{core.name[:-1]}")[0]
        assert f"keep up with the {RATE:g} fps asked for (--fps)" in said and "against the plan" not in said, said
