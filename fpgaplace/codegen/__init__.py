"""Code generation: a placed int8 design -> a buildable project folder with ``design.json``.

``project.compile_design`` is the compile step (lowering, folding, rendering, the split, the
build scripts and the driver); ``record`` reads what it wrote. The compile step's imports are
heavy, so it loads on first use: reading a project (sim, report, flash) stays quick.
"""

from __future__ import annotations

from fpgaplace.project.record import DESIGN_FILE, DESIGN_FORMAT, load_design, transfer_channel

_COMPILE_STEP = ("compile_design", "CompileResult", "check_project_dir")


def __getattr__(name: str):
    if name in _COMPILE_STEP:
        from fpgaplace.codegen import project

        return getattr(project, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["DESIGN_FILE", "DESIGN_FORMAT", *_COMPILE_STEP, "load_design", "transfer_channel"]
