"""A project's board: the board file design.json names when it is still there, else the shipped
board of its name (``fpgaplace.board.load.load_board``), and what it says about the build."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from fpgaplace.board.load import load_board
from fpgaplace.board.model import Board
from fpgaplace.board.partition import partitioned
from fpgaplace.project.layout import DESIGN_FILE
from fpgaplace.project.record import DesignRecord
from fpgaplace.util.errors import FpgaplaceError, first_line


def project_board(document: DesignRecord, where: str | Path = DESIGN_FILE) -> Board:
    """The board of the project whose record is ``document``, cut into the cores the compile step
    chose where the board file left the cut to it (``BoardInfo.cores``); one line naming ``where``
    (its design.json) and the board when neither its file nor a shipped board of its name loads."""
    source = document.board.source
    try:
        board = load_board(source if source and Path(source).is_file() else document.board.name)
        return partitioned(board, document.board.cores) if document.board.cores else board
    except FpgaplaceError as error:
        raise FpgaplaceError(f"{where}: board {document.board.name!r}: {first_line(error)}") from None


def clocked_board(board: Board, document: DesignRecord) -> Board:
    """``board`` with its cores at the clock the built design runs at (design.json's
    ``implementation``, ``Implementation.clock_mhz``) once place and route has measured one; else
    ``board`` itself, its cores at the planned clock. O(cores)."""
    if document.implementation is None:
        return board
    clock = document.implementation.clock_mhz
    return replace(board, cores=[replace(core, clock_mhz=clock) for core in board.cores])


def is_alveo(document: DesignRecord) -> bool:
    """A PCIe card (the board has a host link and is no ECP5 board, whose host link is a UART),
    built with Vitis into an xclbin; a board that no longer loads counts as an embedded one."""
    try:
        board = project_board(document)
    except FpgaplaceError:
        return False
    return board.host is not None and board.ecp5 is None


def is_ecp5(document: DesignRecord) -> bool:
    """An ECP5 board, built by the open flow (yosys, nextpnr-ecp5, ecppack); a board that no
    longer loads counts as none."""
    try:
        return project_board(document).ecp5 is not None
    except FpgaplaceError:
        return False
