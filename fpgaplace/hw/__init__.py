"""The hardware op library: the one place that knows what an op costs on an FPGA core.

Every op a core can run maps to a ``Kernel`` (``fpgaplace.hw.kernels``). A kernel answers, for an
op of the graph and a folding (PE output channels and SIMD reduction elements per cycle):

* ``geometry(op, graph)``: the op's shape in the kernel's terms (``Geometry``), or a reason why
  the kernel cannot run it (``Unsupported``);
* ``cycles(geometry, folding)``: the steady-state cycles per sample of its dataflow stage;
* ``resources(geometry, folding, resident)``: DSP, BRAM36, URAM, LUT, FF;
* ``ideal_cycles(geometry, core)``: the cycles the op costs the placement (its share of the core's
  shared budget, see ``kernels``);
* ``template``: the Jinja2 template its C++ is rendered from.

The integer semantics (int8 in, int32 accumulate, fixed-point requantization) are in
``fpgaplace.hw.quant`` and the bit-exact numpy reference in ``fpgaplace.hw.reference``.
The cost model, the folding of a core (``fpgaplace.hw.folding``), the code generator, the
simulator and the report all read cycles and resources from here and nowhere else;
``cycles_to_us`` is the one conversion to time.
"""

from __future__ import annotations

from fpgaplace.hw.kernels import (
    KERNELS,
    Folding,
    Geometry,
    Kernel,
    Resources,
    Unsupported,
    cycles_to_us,
    kernel_for,
    plan_op,
)

__all__ = [
    "KERNELS",
    "Folding",
    "Geometry",
    "Kernel",
    "Resources",
    "Unsupported",
    "cycles_to_us",
    "kernel_for",
    "plan_op",
]
