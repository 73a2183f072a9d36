"""The model-to-split flow, shared by `fpgaplace split`, `fpgaplace search` and the benchmarks.

    model.onnx -> (graph optimizer) -> OpGraph -> PlacementProblem (board) -> Placement -> split

Each step is one call into its stage's module; this file only chains them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import onnx

from fpgaplace.board import Board, load_board
from fpgaplace.cost import CostOptions, build_problem
from fpgaplace.errors import FpgaplaceError
from fpgaplace.frontend import from_model, load_onnx
from fpgaplace.ir import OpGraph
from fpgaplace.passes.manager import OptimizeReport, optimize
from fpgaplace.solvers.problem import Placement, PlacementProblem


@dataclass
class PreparedModel:
    """A model ready to place: its graph (optimized or not), the board and the problem."""

    graph: OpGraph
    board: Board
    problem: PlacementProblem
    report: OptimizeReport | None  # what the graph optimizer changed, if it ran

    @property
    def model(self) -> onnx.ModelProto:
        return self.graph.model


def prepare(
    model_path: str | Path,
    board: str | Board,
    batch: int = 1,
    optimized: bool = True,
    options: CostOptions = CostOptions(),
) -> PreparedModel:
    """Load ``model_path``, optionally run the graph optimizer, and cost it for ``board``."""
    chosen = board if isinstance(board, Board) else load_board(board)
    graph = load_onnx(model_path, batch=batch)
    report = None
    if optimized:
        model, report = optimize(graph.model)
        graph = from_model(model, batch=batch, source=graph.name)
    return PreparedModel(graph, chosen, build_problem(graph, chosen, options), report)


def device_assignment(prepared: PreparedModel, placement: Placement) -> dict[str, str]:
    """Map every node of the ONNX model to a device name, as ``split_model`` wants it.

    Ops of the problem take their placement's device. Nodes the front end folded into
    parameters (constants computed from constants) are not ops: each goes to the device of the
    first op that reads what it computes, directly or through other folded nodes.
    """
    from fpgaplace.passes.graph_tools import name_nodes

    problem = prepared.problem
    model = onnx.ModelProto()
    model.CopyFrom(prepared.model)
    name_nodes(model)
    assignment = {name: problem.device_name(int(placement.device[v])) for v, name in enumerate(problem.names)}
    readers: dict[str, list[str]] = {}
    for node in model.graph.node:
        for tensor in node.input:
            readers.setdefault(tensor, []).append(node.name)
    for node in reversed(model.graph.node):  # readers come after writers: resolve back to front
        if node.name in assignment:
            continue
        devices = [assignment[r] for out in node.output for r in readers.get(out, []) if r in assignment]
        if not devices:
            devices = [next(iter(assignment.values()))] if assignment else []
        if not devices:
            raise FpgaplaceError(f"{prepared.graph.name}: node {node.name!r} has no placed reader")
        assignment[node.name] = devices[0]
    return assignment


def split_placement(prepared: PreparedModel, placement: Placement, out_dir: Path, check: bool = True):
    """Write the per-device ONNX split of ``placement``; check it against the whole model."""
    from fpgaplace.split import check_split, split_model

    manifest = split_model(prepared.model, device_assignment(prepared, placement), Path(out_dir))
    errors = check_split(prepared.model, Path(out_dir)) if check else {}
    return manifest, errors
