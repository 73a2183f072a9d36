"""What the stage-by-stage checks of ``fpgaplace sim`` need from code generation: a layer's DSP
probe (``fpgaplace.hw.kernel.Kernel.probe_layer``, rendered by ``fpgaplace.codegen.rtl_project``)
for yosys to count its DSPs in a fraction of the layer's time (``fpgaplace.sim.yosys``), and a
layer cut to a band of its frame (``Kernel.cut_rows``) for the RTL simulation to time a few rows
and extrapolate the frame (``fpgaplace.sim.rtl_project``). Those read ``project/`` only and never
code generation; this layer joins the two."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fpgaplace.codegen import rtl
from fpgaplace.codegen.rtl_project import board_cores, core_macs_per_dsp, layer_config, layer_folding, probe_module
from fpgaplace.hw import KERNELS
from fpgaplace.project.arrays import load_arrays
from fpgaplace.project.board import project_board
from fpgaplace.project.record import load
from fpgaplace.sim.stages import Cut, Module, StageRef, layer_modules


def dsp_probes(project: Path) -> Callable[[StageRef], Module | None]:
    """For ``project``: each stage's DSP probe module (None where its kernel has none); a core's
    arrays are read once, when its first stage is asked for. O(PE weights) a stage."""
    design = load(project)
    board = project_board(design)
    cores = board_cores(board, design)
    arrays: dict[str, list] = {}

    def probe(stage: StageRef) -> Module | None:
        if stage.core.name not in arrays:
            arrays[stage.core.name] = load_arrays(project, stage.core)
        fpga_core = cores.get(stage.core.name)
        return probe_module(stage.core, stage.index, arrays[stage.core.name][stage.index],
                            core_macs_per_dsp(fpga_core), fpga_core)

    return probe


def frame_cuts(project: Path) -> Callable[[StageRef, int], Cut | None]:
    """For ``project``: a stage cut to its first ``rows`` output rows (``Kernel.cut_rows``, rendered
    as the layer is, under the layer's own top), or None where its kernel streams no frame of rows
    or where this code renders the whole layer differently from the Verilog in ``rtl/<core>/``
    (a project compiled by another version: the stage is then simulated whole). The whole layer
    is rendered once a stage and compared file by file, so a cut is the project's module with only
    its height changed. O(weights) a stage."""
    design = load(project)
    cores = board_cores(project_board(design), design)
    arrays: dict[str, list] = {}
    modules: dict[str, list[Module]] = {}
    same: dict[str, bool] = {}

    def render(stage: StageRef, config: dict) -> rtl.OpModule:
        fpga_core = cores.get(stage.core.name)
        top = modules[stage.core.name][stage.index].top
        return rtl.render_op(stage.layer.kernel, config, arrays[stage.core.name][stage.index],
                             layer_folding(stage.layer), stage.layer.cycles, top, core_macs_per_dsp(fpga_core),
                             fpga_core)

    def cut(stage: StageRef, rows: int) -> Cut | None:
        kernel = KERNELS[stage.layer.kernel]
        if kernel.frame_rows(stage.layer.config) is None:
            return None
        if stage.core.name not in arrays:
            arrays[stage.core.name] = load_arrays(project, stage.core)
            modules[stage.core.name] = layer_modules(project, stage.core)
        config = layer_config(stage.layer, arrays[stage.core.name][stage.index])
        if stage.name not in same:
            same[stage.name] = render(stage, config).module.files == modules[stage.core.name][stage.index].files
        if not same[stage.name]:
            return None
        cut_config = kernel.cut_rows(config, rows)
        op = render(stage, cut_config)
        return Cut(rows, cut_config, op.module,
                   {"inputs": [port.to_json() for port in op.inputs], "outputs": [op.output.to_json()]})

    return cut
