"""End to end on the stand-in board: compile, flash over a real sshd, self-test with the real
driver in the pynq 4.0 environment.

The destination folder plays the board: flash sends what a board gets (design.json, bitstream,
host/, split/); the stand-in's "programmed fabric" is each core's C-simulation library, placed
beside the flashed files as the PL would be (flash does not send it: a board does not need it).
The self-test then runs ``host/driver.py --self-test`` on the far side through pynq's Overlay,
DMA driver and allocate, and compares the board's outputs with the QDQ model's.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sshd import start_sshd

from fpgaplace import Design
from fpgaplace.deploy.pynq import flash
from fpgaplace.model import zoo as models
from fpgaplace.project.record import load
from fpgaplace.sim import csim

REPO = Path(__file__).resolve().parents[1]
PYNQ_PYTHON = REPO / ".venv-pynq" / "bin" / "python"
sys.path.insert(0, str(REPO / "tests" / "pynq_standin"))
from hwh import write_standin_bitstream  # noqa: E402


@pytest.fixture(scope="module")
def board_python() -> str:
    """The far side's python: the pynq environment with the stand-in board switched on."""
    done = subprocess.run(["bash", str(REPO / "scripts" / "setup_pynq_env.sh")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return f"env FPGAPLACE_PYNQ_STANDIN=1 {PYNQ_PYTHON}"


@pytest.mark.slow
def test_a_flashed_project_passes_its_self_test_on_the_standin_board(board_python, tmp_path):
    project = tmp_path / "cnn"
    design = Design(models.cnn_residual(batch=1), "zcu104", profile_cpu=False).quantized(random_samples=2)
    design.place()
    design.compile(project)
    write_standin_bitstream(project)
    server = start_sshd(tmp_path / "sshd")
    try:
        options = {"host": server.host, "port": server.port, "user": server.user, "key": server.client_key,
                   "known_hosts": tmp_path / "known_hosts"}
        board = tmp_path / "board"
        first = flash(project, dest=str(board), **options)
        assert first.verified and first.sent_bytes == first.total_bytes > 0
        assert (board / "host" / "driver.py").is_file() and (board / "bitstream" / "design.bit").is_file()
        for record in load(project).cores:  # "program the fabric": the stand-in's cores
            library, _ = csim.build_core(project, record)
            target = board / record.folder / "build"
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy(library, target / library.name)
        second = flash(project, dest=str(board), self_test=True, python=board_python, **options)
        assert second.sent_bytes == 0 and second.verified  # everything was already there
        assert second.self_test is not None and second.self_test.ok, second.self_test
        assert second.self_test.fps > 0 and second.self_test.samples > 0
        assert second.self_test.max_abs_diff_lsb is not None and second.self_test.max_abs_diff_lsb <= 1
    finally:
        server.stop()
