"""The cut of the fabric into cores, chosen by what each cut's folded placement runs at.

Where a board file leaves the cut to the tool (``Board.fixed_cores`` False), each cut
``fpgaplace.board.partition.partitions`` offers (one core per SLR, two, ...) is priced as the
compile step prices a placement: the design is costed on that cut, placed with the placement's
arguments, and refined by the folding (``flow.refine``); the cut whose refined real interval
(the slowest folded core, or another device's load) is least is kept, and on a tie within
``TIE`` the one with fewer cores (fewer clock domains, streams and SLR crossings to build). Every
cut's figures and the reason for the choice are recorded beside the refinement in design.json.
Cost: one placement and refinement per cut (``PER_SLR`` cuts).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from fpgaplace.board.model import Board
from fpgaplace.board.partition import describe, partitioned, partitions
from fpgaplace.flow.refine import Refinable, Refined, refine, say
from fpgaplace.util.errors import FpgaplaceError

TIE = 0.005
"""Refined intervals within this share of each other are a tie: the cut with fewer cores wins."""


class Partitionable(Refinable, Protocol):
    """A design that can be costed on another cut of its board (``flow.design.Design``)."""

    def on_board(self, board: Board) -> Any: ...


@dataclass
class Cut:
    """One cut of the fabric as the compile step priced it."""

    cores: int
    interval_us: float | None  # refined real interval; None where it did not fit
    planned_us: float | None  # the placement's own value before the folding
    note: str = ""

    def to_json(self) -> dict:
        return {"cores": self.cores, "interval_us": self.interval_us, "planned_us": self.planned_us,
                "note": self.note}


def choose_partition(design: Partitionable, progress=None) -> tuple[Refined, dict]:
    """The refined placement of ``design`` on the cut of its board that runs fastest, and a
    record of the choice: every cut with its refined interval, the cores chosen and why. Each
    other cut is placed with the arguments ``design`` was placed with (the defaults when it is
    not placed). A board with fixed cores, or a placement that was set rather than solved (it
    names its own cores), is refined as it is."""
    board = design.board
    counts = partitions(board)
    arguments = design._place_args if design.placed else {}
    if len(counts) == 1 or arguments is None:
        return refine(design, progress), {}
    tried: list[tuple[Cut, Refined | None]] = []
    for count in counts:
        say(progress, f"pricing the cut of {board.name} into {describe(count, board)}")
        candidate = design if count == len(board.cores) else design.on_board(partitioned(board, count))
        try:
            if arguments and candidate is not design:
                candidate.place(**arguments)
            refined = refine(candidate, progress)
        except FpgaplaceError as error:  # e.g. an op fits no core of that size
            tried.append((Cut(count, None, None, str(error).splitlines()[0]), None))
            continue
        rounds = refined.rounds[refined.chosen]
        tried.append((Cut(count, rounds["interval_us"], rounds["planned_value_us"]), refined))
    fitting = [(cut, refined) for cut, refined in tried if refined is not None]
    if not fitting:
        raise FpgaplaceError(f"{board.name}: no cut of the fabric into cores fits the model ({tried[0][0].note})")
    best = min(cut.interval_us for cut, _ in fitting)
    chosen, refined = next((cut, r) for cut, r in fitting if cut.interval_us <= best * (1 + TIE))
    return refined, {"cores": chosen.cores, "cuts": [cut.to_json() for cut, _ in tried],
                     "reason": _reason(chosen, [cut for cut, _ in tried], board)}


def _reason(chosen: Cut, cuts: list[Cut], board: Board) -> str:
    """Why ``chosen`` won, in one line: its folded interval beside every other cut's."""
    others = ", ".join(f"{describe(c.cores, board)} {c.interval_us:.4g} us" if c.interval_us is not None
                       else f"{describe(c.cores, board)} does not fit" for c in cuts if c is not chosen)
    tie = any(c.interval_us is not None and c.cores > chosen.cores and c.interval_us < chosen.interval_us
              for c in cuts)
    return (f"{describe(chosen.cores, board)}: folded interval {chosen.interval_us:.4g} us against {others}"
            + (f" (within {TIE:.1%}: fewer cores)" if tie else ""))
