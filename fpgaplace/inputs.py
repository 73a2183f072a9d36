"""Turn what a user names on the command line into a ``PlacementProblem``.

A paper workload JSON becomes a problem directly; an ONNX model goes through the front end and
the cost model for a board.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fpgaplace.errors import FpgaplaceError
from fpgaplace.ir import OpGraph
from fpgaplace.solvers.problem import PlacementProblem

DEFAULT_BOARD = "zcu104"


@dataclass
class LoadedInput:
    problem: PlacementProblem
    graph: OpGraph | None  # the model, when the input was ONNX
    board: str | None


def is_workload(path: Path) -> bool:
    return path.suffix.lower() == ".json"


def load_problem(
    path: str | Path,
    board: str | None = None,
    batch: int = 1,
    precision: str = "int8",
    profile_cpu: bool = True,
) -> LoadedInput:
    """Load a paper workload JSON, or an ONNX model costed for ``board`` (default zcu104)."""
    from fpgaplace.board import load_board
    from fpgaplace.cost import CostOptions, build_problem
    from fpgaplace.frontend import load_onnx
    from fpgaplace.workload import load_workload

    path = Path(path)
    if is_workload(path):
        if board is not None:
            raise FpgaplaceError(f"{path}: --board applies to ONNX models, not to a workload JSON")
        return LoadedInput(load_workload(path), None, None)
    graph = load_onnx(path, batch=batch)
    chosen = load_board(board or DEFAULT_BOARD)
    options = CostOptions(precision=precision, profile_cpu=profile_cpu)
    return LoadedInput(build_problem(graph, chosen, options), graph, chosen.name)
