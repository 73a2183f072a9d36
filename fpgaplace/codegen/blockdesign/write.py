"""Writing a project's build scripts from its record: per node the Vivado (``vivado``) or Vitis
(``vitis``) scripts of its plan (``plan``), and the project's Makefile; on an ECP5 board the
open flow's top, pins and Makefile instead (``ecp5``).
"""

from __future__ import annotations

from pathlib import Path

from fpgaplace.codegen.blockdesign.ecp5 import write_ecp5_scripts
from fpgaplace.codegen.blockdesign.plan import NodePlan, plan_nodes
from fpgaplace.codegen.blockdesign.vitis import vitis_context
from fpgaplace.codegen.blockdesign.vivado import vivado_context
from fpgaplace.project.board import project_board
from fpgaplace.project.layout import (
    BITSTREAM_DIR,
    MAKEFILE,
    VITIS_DIR,
    VIVADO_DIR,
    bitstream_files,
)
from fpgaplace.project.record import DesignRecord
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.templates import environment


def node_files(plan: NodePlan, node_count: int) -> list[str]:
    return bitstream_files(node_count, plan.node, plan.alveo)


def script_folder(plan: NodePlan) -> str:
    """The node's script folder relative to the project: ``vivado``/``vitis`` (+ ``/<node>``)."""
    tool = VITIS_DIR if plan.alveo else VIVADO_DIR
    return f"{tool}/{plan.folder}" if plan.folder else tool


def write_build_scripts(document: DesignRecord, folder: Path) -> None:
    """Write the build scripts of the project whose ``design.json`` is ``document`` into ``folder``:
    per node ``vivado/[<node>/]create_project.tcl`` (Zynq) or ``vitis/[<node>/]link.cfg`` and
    ``movers.cpp`` (Alveo), and the ``Makefile``. Nothing but the Makefile when no op is on a core.
    An ECP5 board's project gets ``ecp5/`` and its Makefile (``ecp5.write_ecp5_scripts``; its
    ``rtl/`` must be written first)."""
    folder = Path(folder)
    try:
        board = project_board(document)
    except FpgaplaceError:
        board = None
    if board is not None and board.ecp5 is not None:
        if not document.cores:
            raise FpgaplaceError(f"ecp5: no op of {document.model.name} is on a core, and {board.name} has no CPU")
        write_ecp5_scripts(document, folder, board)
        return
    plans = plan_nodes(document, folder) if document.cores else []
    for plan in plans:
        target = folder / script_folder(plan)
        target.mkdir(parents=True, exist_ok=True)
        if plan.alveo:
            context = vitis_context(plan, node_files(plan, len(plans)))
            render(target / "link.cfg", "project/vitis/link.cfg.j2", context)
            render(target / "movers.cpp", "project/vitis/movers.cpp.j2", context)
        else:
            render(target / "create_project.tcl", "project/vivado/create_project.tcl.j2",
                   vivado_context(plan, node_files(plan, len(plans))))
            write_last_ips(plan, target)
    render(folder / MAKEFILE, "project/Makefile.j2",
           {"cores": document.cores, "nodes": [_make_node(plan, len(plans)) for plan in plans],
            "alveo": bool(plans) and plans[0].alveo, "bitstream_dir": BITSTREAM_DIR})


def render(path: Path, template: str, context: dict) -> None:
    """Render ``template`` into ``path``; runs of blank lines the template's tags leave become one."""
    text = environment().get_template(template).render(**context)
    lines = text.split("\n")
    kept = [line for i, line in enumerate(lines) if line.strip() or i == 0 or lines[i - 1].strip()]
    path.write_text("\n".join(kept))


def _make_node(plan: NodePlan, node_count: int) -> dict:
    scripts = script_folder(plan)
    files = node_files(plan, node_count)
    node = {"name": plan.node, "scripts": scripts, "files": files, "cores": plan.cores,
            "last_ips": [] if plan.alveo else [f"{scripts}/ip/{top}" for top in plan.last_tops]}
    if plan.alveo:
        context = vitis_context(plan, files)
        node.update(platform=context["platform"], clock_mhz=plan.clock_mhz,
                    kernels=[kernel.name for kernel in context["units"]])
    return node


def write_last_ips(plan: NodePlan, target: Path) -> None:
    """The TLAST marker IPs' HLS source and run_hls.tcl, in ``<scripts>/ip/<top>/``."""
    for top in plan.last_tops:
        ip = target / "ip" / top
        ip.mkdir(parents=True, exist_ok=True)
        beats, width = top.removeprefix("fp_last_").split("x")
        context = {"top": top, "beats": int(beats), "bytes": int(width), "part": plan.part,
                   "clock_mhz": plan.clock_mhz, "period_ns": f"{1e3 / plan.clock_mhz:.3f}"}
        render(ip / f"{top}.cpp", "project/vivado/last.cpp.j2", context)
        render(ip / "run_hls.tcl", "project/vivado/last_run_hls.tcl.j2", context)
