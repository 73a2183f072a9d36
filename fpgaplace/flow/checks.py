"""What the stage-by-stage checks of ``fpgaplace sim`` need from code generation: a layer's DSP
probe (``fpgaplace.hw.kernel.Kernel.probe_layer``, rendered by ``fpgaplace.codegen.rtl_project``)
for yosys to count its DSPs in a fraction of the layer's time (``fpgaplace.sim.yosys``, which reads
``project/`` only and never code generation; this layer joins the two)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fpgaplace.codegen.rtl_project import board_cores, core_macs_per_dsp, probe_module
from fpgaplace.project.arrays import load_arrays
from fpgaplace.project.board import project_board
from fpgaplace.project.record import load
from fpgaplace.sim.stages import Module, StageRef


def dsp_probes(project: Path) -> Callable[[StageRef], Module | None]:
    """For ``project``: each stage's DSP probe module (None where its kernel has none); a core's
    arrays are read once, when its first stage is asked for. O(PE weights) a stage."""
    design = load(project)
    board = project_board(design)
    cores = board_cores(board)
    arrays: dict[str, list] = {}

    def probe(stage: StageRef) -> Module | None:
        if stage.core.name not in arrays:
            arrays[stage.core.name] = load_arrays(project, stage.core)
        fpga_core = cores.get(stage.core.name)
        return probe_module(stage.core, stage.index, arrays[stage.core.name][stage.index],
                            core_macs_per_dsp(fpga_core), fpga_core)

    return probe
