"""fpgaplace: place a DNN's operators on a multicore FPGA board and build the project that runs it.

The Python API is ``Design`` (``fpgaplace.flow.design``) and ``load_board`` (``fpgaplace.board.load``)::

    from fpgaplace import Design
    design = Design("model.onnx", "zcu104")
    design.place()                    # optimal pipelined throughput
    design.split("split/")            # one ONNX per device, checked against the model

Both are imported on first use, so ``import fpgaplace`` (and the CLI's start) stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"
__all__ = ["Design", "__version__", "load_board"]

if TYPE_CHECKING:
    from fpgaplace.board.load import load_board
    from fpgaplace.flow.design import Design


def __getattr__(name: str):
    """Lazy exports (PEP 562)."""
    if name == "Design":
        from fpgaplace.flow.design import Design

        return Design
    if name == "load_board":
        from fpgaplace.board.load import load_board

        return load_board
    raise AttributeError(f"module 'fpgaplace' has no attribute {name!r}")
