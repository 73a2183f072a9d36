"""MAC efficiency of a project (issue 21, item 5): every DSP-cycle the cores offer is useful or
lost in one named way, the shares agree with the event simulation's DSP roofline, and `sim`
prints them with the three stages losing the most (its JSON carries them too)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fpgaplace import Design
from fpgaplace.model import zoo as models
from fpgaplace.project.record import load
from fpgaplace.sim.efficiency import LOSSES, efficiency
from fpgaplace.sim.event import simulate


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("efficiency") / "cnn"
    Design(models.cnn_residual(batch=1, image=16), "zcu104-dpu", profile_cpu=False).compile(folder, random_samples=2)
    return folder


def test_every_offered_dsp_cycle_is_useful_or_lost_in_one_way(project):
    simulated = simulate(project, 16)
    mac = efficiency(project, simulated.interval_us)
    lost = mac.by_way()
    assert set(lost) == {"unused", *LOSSES}
    assert mac.useful + sum(lost.values()) == pytest.approx(mac.offered, rel=1e-9)
    assert all(value >= -1e-6 * mac.offered for value in lost.values())
    assert mac.cores_fraction == pytest.approx(simulated.roofline_fraction, rel=1e-9)
    record = load(project)
    budgets = sum(core.budget["dsp"] for core in record.cores)
    assert mac.chip_fraction == pytest.approx(mac.cores_fraction * budgets / 1728, rel=1e-9)  # ZU7EV: 1,728 DSPs
    largest = mac.largest()
    assert 1 <= len(largest) <= 3 and [s.total for s in largest] == sorted((s.total for s in largest), reverse=True)
    assert largest[0].total == max(s.total for s in mac.stages)


def test_a_slower_interval_only_adds_idle_and_unused(project):
    base = efficiency(project)
    slower = efficiency(project, load(project).interval_us * 2)
    assert slower.cores_fraction == pytest.approx(base.cores_fraction / 2, rel=1e-9)
    for way in ("fill", "folding"):
        assert slower.by_way()[way] == pytest.approx(base.by_way()[way], rel=1e-9)
    assert slower.by_way()["idle"] > base.by_way()["idle"]


def test_sim_prints_the_efficiency_and_its_largest_losses(project):
    def sim(*flags: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "fpgaplace.cli.app", "sim", str(project), "-n", "8", *flags],
                              capture_output=True, text=True, timeout=300)

    text = sim()
    assert text.returncode == 0, text.stderr
    assert "MAC efficiency:" in text.stdout and "of the chip's" in text.stdout and "  1. " in text.stdout
    document = json.loads(sim("--json").stdout)["efficiency"]
    assert 0 < document["chip_fraction"] < document["cores_fraction"] <= 1
    assert f"{document['cores_fraction']:.1%}" in text.stdout


@pytest.mark.parametrize(("member", "value", "says"), [
    ("HO", None, "config.HO: missing"), ("W", None, "config.W: missing"),
    ("SW", 0, "SW=0; expected strides >= 1"), ("CIN", 0, "no MACs; expected members giving")])
def test_a_damaged_conv_config_is_one_error_line_naming_the_layer(project, tmp_path, member, value, says):
    """A conv layer's config that design.json's rules allow (ints) but its kernel cannot rebuild
    the layer from: one line naming design.json, the layer's path and the config (fuzz cases)."""
    import shutil

    from fpgaplace.util.errors import FpgaplaceError

    damaged = tmp_path / "cnn"
    shutil.copytree(project, damaged)
    document = json.loads((damaged / "design.json").read_text())
    index, layer = next((i, layer) for i, layer in enumerate(document["cores"][0]["layers"])
                        if layer["kernel"] == "conv2d" and layer["resources"]["dsp"])
    if value is None:
        del layer["config"][member]
    else:
        layer["config"][member] = value
    (damaged / "design.json").write_text(json.dumps(document))
    with pytest.raises(FpgaplaceError) as error:
        efficiency(damaged)
    message = str(error.value)
    assert message.startswith(f"{damaged / 'design.json'}: cores[0].layers[{index}].config")
    assert says in message and "\n" not in message


def test_a_low_bit_design_counts_only_its_dsp_lanes_macs_against_the_dsp_roofline(tmp_path):
    """A QONNX w2a2 MLP on pynq-z2: its first layer's 2-bit weights by 8-bit inputs packed several to
    a DSP, its later layers on LUT lanes. Their MACs need DSP-cycles at their packing and none
    (``mac_dsp_cycles``, ``lut_macs``), so the account stays exact with no loss below zero and the
    efficiency stays under 100 % (counted as int8 MACs it was 104.5 %, with a folding loss of -32 %
    of the offer), and it is the event simulation's roofline fraction: the board's second core,
    which the design leaves empty, offers its DSPs to both (unused)."""
    project = tmp_path / "mlp"
    Design(models.qonnx_mlp(2, 2), "pynq-z2", profile_cpu=False).compile(project, random_samples=1)
    simulated = simulate(project, 16)
    mac = efficiency(project, simulated.interval_us)
    lost = mac.by_way()
    assert mac.useful + sum(lost.values()) == pytest.approx(mac.offered, rel=1e-9)
    assert all(value >= -1e-6 * mac.offered for value in lost.values()), lost
    assert 0 < mac.lut_macs < mac.macs
    assert 0 < mac.cores_fraction <= 1 and mac.cores_fraction == pytest.approx(simulated.roofline_fraction, rel=1e-9)
