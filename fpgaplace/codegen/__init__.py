"""Code generation: a placed int8 design -> a buildable project folder with ``design.json``.

``project.compile_design`` is the compile step (lowering, folding, rendering, the split, the
build scripts and the driver); ``fpgaplace.project.record`` reads what it wrote. The compile
step's imports are heavy, so it loads on first use.
"""

from __future__ import annotations

_COMPILE_STEP = ("compile_design", "CompileResult", "check_project_dir")


def __getattr__(name: str):
    if name in _COMPILE_STEP:
        from fpgaplace.codegen import project

        return getattr(project, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [*_COMPILE_STEP]
