"""The cut of a board's fabric into FPGA cores, as a choice: which cuts there are and the board of each.

A board file that leaves out ``cores`` describes its fabric (resources, SLRs) only; its board has
one core per SLR (``Board.fixed_cores`` False) and the tool chooses the cut. The cuts offered are
``PER_SLR`` cores in every SLR, each core an equal share of the usable fabric
(``load.split_equal``): one core per SLR keeps each pipeline inside its SLR (no SLR crossing on its
streams); more cores per SLR give each its own clock domain and memory port, and the placement
more devices to balance the model's stages over (a core's interval is its slowest stage, so two
half-size cores each folding half the stages can beat one folding them all where the folding's
steps are coarse). Which cut pays is priced like any other choice: the compile step folds the
placement of each and keeps the fastest (``fpgaplace.flow.partition``), ``search`` ranks them
beside its other settings. A board whose file gives ``cores`` keeps them.
Cost: O(cuts x cores) to build the boards.
"""

from __future__ import annotations

from dataclasses import replace

from fpgaplace.board.load import split_equal
from fpgaplace.board.model import Board, FpgaCore
from fpgaplace.util.errors import FpgaplaceError

PER_SLR = (1, 2)
"""Cores per SLR of the cuts offered."""


def partitions(board: Board) -> list[int]:
    """The core counts the tool may cut ``board`` into, fewest first: ``PER_SLR`` cores in every
    SLR; only the board's own count where its file fixes the cores, or for a cluster (each node
    keeps its board's cut)."""
    if board.fixed_cores or board.is_cluster:
        return [len(board.cores)]
    slrs = board.fabric.get("slrs", 1)
    return [per * slrs for per in PER_SLR]


def partitioned(board: Board, count: int) -> Board:
    """``board`` cut into ``count`` equal cores (``load.split_equal``: core i in SLR
    ``i * slrs // count``), each with the board's clock, packing and family. The board itself
    when it already has that many cores; an error where its file fixes another count."""
    if count == len(board.cores):
        return board
    if board.fixed_cores or board.is_cluster:
        raise FpgaplaceError(f"{board.source}: its cores are fixed at {len(board.cores)}; cannot cut it into {count}")
    first = board.cores[0]
    specs = split_equal(board.usable, count, board.fabric.get("slrs", 1), first.clock_mhz, board.source)
    cores = [FpgaCore(name=spec["name"], dsp=spec["dsp"], bram36=spec["bram36"], uram=spec["uram"], lut=spec["lut"],
                      ff=spec["ff"], clock_mhz=spec["clock_mhz"], macs_per_dsp=first.macs_per_dsp,
                      region=spec["slr"], node=first.node, family=first.family)
             for spec in specs]
    return replace(board, cores=cores)


def describe(count: int, board: Board) -> str:
    """``count`` cores as the cut of ``board``'s SLRs, e.g. "2 cores (2 per SLR)"."""
    slrs = board.fabric.get("slrs", 1)
    per = f"{count // slrs} per SLR" if count % slrs == 0 else f"over {slrs} SLRs"
    return f"{count} core{'s' if count != 1 else ''} ({per})"
