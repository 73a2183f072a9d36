"""The compile step: an int8 QDQ design -> a buildable project folder.

``compile_design`` checks the model's Q/DQ nodes, places the design with the defaults if it is
not placed, lowers and folds the ops of every FPGA core and refines the placement by the
folding (``fpgaplace.flow.refine``), then hands the placed design and its folded cores to the
writer (``fpgaplace.codegen.project.write_project``), which renders the HLS, the split, the
build scripts, the driver and ``design.json``. The flow decides; codegen writes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from fpgaplace.codegen.project import CompileResult, check_project_dir, write_project
from fpgaplace.flow.refine import Refinable, planned_compute_us, refine
from fpgaplace.model.quantize import check_qdq
from fpgaplace.util.errors import FpgaplaceError


class Compilable(Refinable, Protocol):
    """What the compile step asks of a design besides the refinement's view (``fpgaplace.flow.design.Design``)."""

    name: str
    is_qdq: bool

    def take_placement(self, other: Refinable) -> None: ...


def compile_design(design: Compilable, out_dir: Path, progress=None) -> CompileResult:
    """Write the project of ``design`` (an int8 QDQ design; placed with defaults if it is not)
    into ``out_dir``."""
    out_dir = Path(out_dir)
    check_project_dir(out_dir)
    if not design.is_qdq:
        raise FpgaplaceError(f"{design.name}: compile needs an int8 QDQ model; quantize it first")
    check_qdq(design.graph.model)  # a bad scale or zero point is named by its Q/DQ node, before any work
    refined = refine(design, progress)  # placed with the defaults first if it is not
    if refined.design is not design:
        design.take_placement(refined.design)
    cores = refined.lowered.cores
    return write_project(design, out_dir, cores, refined.lowered.host_ops,
                         {"rounds": refined.rounds, "chosen": refined.chosen},
                         {c.name: planned_compute_us(design, c) for c in cores}, progress)
