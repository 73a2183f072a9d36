"""Deprecated: the model-to-split chain now lives in ``fpgaplace.design.Design``.

Kept only for ``scripts/bench_dp.py`` and ``scripts/bench_partitioner.py``; remove this file
once they build a ``Design`` themselves. Everything here is a thin view of a ``Design``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import onnx

from fpgaplace.board import Board
from fpgaplace.cost import CostOptions
from fpgaplace.design import Design
from fpgaplace.ir import OpGraph
from fpgaplace.passes.manager import OptimizeReport
from fpgaplace.solvers.problem import Placement, PlacementProblem


@dataclass
class PreparedModel:
    """A ``Design`` seen as the old flow's graph, board, problem and optimizer report."""

    design: Design

    @property
    def graph(self) -> OpGraph:
        return self.design.graph

    @property
    def board(self) -> Board:
        return self.design.board

    @property
    def problem(self) -> PlacementProblem:
        return self.design.problem

    @property
    def report(self) -> OptimizeReport | None:
        return self.design.optimize_report

    @property
    def model(self) -> onnx.ModelProto:
        return self.design.graph.model


def prepare(
    model_path: str | Path,
    board: str | Board,
    batch: int = 1,
    optimized: bool = True,
    options: CostOptions = CostOptions(),
) -> PreparedModel:
    """``Design(model_path, board, ...)`` with its costs computed."""
    design = Design(model_path, board, batch=batch, optimize=optimized, precision=options.precision,
                    profile_cpu=options.profile_cpu)
    design.problem  # noqa: B018 - compute the stages now, as the old flow did
    return PreparedModel(design)


def split_placement(prepared: PreparedModel, placement: Placement, out_dir: Path, check: bool = True):
    """``Design.split`` of a placement solved outside the design."""
    prepared.design.set_placement(placement)
    return prepared.design.split(out_dir, check)
