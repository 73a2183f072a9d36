"""The window units' line buffers as the RTL lays them out, beside their price and yosys.

    python scripts/bench_line_buffer.py [--board zcu104] [--yosys core0/maxpool_4,core0/conv_1]

Compiles the small residual CNN (``zoo.cnn_residual``, int8, random calibration) for the board and
prints one row per window stage: its folding, read lanes (MMV x XP x SIMD: the whole copies the
unit kept before ``hw.window.read_groups``), the input beat, the banks, memories and whole copies
it keeps now, their bytes against one buffer's, and the op library's line-buffer price
(``line_buffer_memory``: BRAM36, LUTRAM LUTs). With ``--yosys``, those stages synthesised alone
(``fpgaplace.sim.yosys.project_resources``, one at a time): yosys' BRAM36 and LUTs beside the
estimate and the CPU seconds of yosys. O(stages) without yosys (seconds).
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

from fpgaplace import Design
from fpgaplace.codegen.rtl_project import board_cores
from fpgaplace.hw import KERNELS, Folding
from fpgaplace.hw.window import WindowKernel, line_buffer
from fpgaplace.model import zoo
from fpgaplace.project.board import project_board
from fpgaplace.project.record import load
from fpgaplace.sim.yosys import project_resources


def layout_rows(project: Path) -> None:
    """The layout table of every window stage of ``project``."""
    design = load(project)
    cores = board_cores(project_board(design), design)
    print("| stage | PE, SIMD, MMV | read lanes | beat | banks | memories | copies | bytes / one buffer | "
          "priced BRAM36, LUTRAM LUT |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    for core in design.cores:
        for layer in core.layers:
            kernel = KERNELS[layer.kernel]
            if not isinstance(kernel, WindowKernel) or kernel.global_:
                continue
            fold = Folding(layer.pe, layer.simd, layer.mmv)
            members = kernel.window_shape(layer.config, fold)
            buffer = line_buffer(members, kernel.window_input_width(members, fold))
            count, (bits, words) = buffer.layout(8)
            price = kernel.line_buffer_memory(kernel.config_geometry(layer.config), fold, cores[core.name])
            share = count * bits * words / 8 / (buffer.rows * buffer.row_elems)
            print(f"| {core.name}/{layer.op} | {layer.pe}, {layer.simd}, {layer.mmv} | {buffer.reads} | "
                  f"{buffer.in_e} | "
                  f"{buffer.banks} | {count} | {buffer.copies} | {share:.2f} | {price[0]}, {price[2]} |", flush=True)


def yosys_rows(project: Path, stages: str) -> None:
    """yosys of each of ``stages`` alone, with its CPU seconds."""
    print("\n| stage | yosys BRAM36 | estimate BRAM36 | yosys LUT | estimate LUT | yosys cpu s | wall s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for stage in stages.split(","):
        started, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        result = project_resources(project, stages=stage, jobs=1)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        for layer in (layer for core in result.cores for layer in core.layers):
            print(f"| {stage} | {layer.yosys.bram36:g} | {layer.estimate['bram36']} | {layer.yosys.lut:,} | "
                  f"{layer.estimate['lut']:,} | {cpu:.0f} | {time.perf_counter() - started:.0f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", default="zcu104")
    parser.add_argument("--yosys", default=None, help="stages to synthesise (sim --stages patterns), comma-separated")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-lbuf-") as scratch:
        project = Path(scratch) / "cnn"
        Design(zoo.cnn_residual(batch=1), args.board, profile_cpu=False).compile(project, random_samples=2)
        layout_rows(project)
        if args.yosys:
            yosys_rows(project, args.yosys)


if __name__ == "__main__":
    main()
