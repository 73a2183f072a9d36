"""The hardware op library: the one place that knows what an op costs on an FPGA core and how
it is built. One module per kernel, each a ``Kernel`` (``fpgaplace.hw.kernel``) that answers,
for an op of the graph and a folding (PE output channels, SIMD reduction elements and MMV
pixels per cycle), every question asked about its op:

* ``geometry(op, graph)``: the op's shape in the kernel's terms (``Geometry``), or why the
  kernel cannot run it (``Unsupported``); ``foldings(geometry)``: the foldings it may take;
* ``cycles(geometry, folding)``: the steady-state cycles per sample of its dataflow stage, and
  ``fill_factor``: how much longer it runs for refilling a buffer it cannot overlap;
* ``fill(geometry, folding)``: its fill latency (``Fill``: how much of a sample's input it waits
  for before its first output, a line buffer's rows, a dense layer's vector, a row, a plane, and
  what follows its last input); ``kernel.dataflow_latency`` overlaps a core's stages by them, the
  one figure ``sim`` (``registry.core_latency``, folded) and the placement's latency objective
  (``kernel.paced_fill``, each stage paced at the core's load) read;
* ``resources(geometry, folding, core, resident)``: DSP, BRAM36, URAM, LUT, FF;
* ``ideal_cycles(geometry, core)``: what it costs the placement (its share of the core's budget);
* ``lower(context, op, shape)``: its integer layer (config members, int8/int32 arrays) from the
  QDQ graph (``fpgaplace.hw.lowering``), and ``config_macs`` of that layer;
* ``reference(config, arrays, inputs)``: its bit-exact integer output (``fpgaplace.hw.reference``);
* ``template``, ``hls_config``, ``stream_widths``, ``output_size``: its C++ template
  (``hls_templates/hls/ops``) and the values it is rendered with;
* ``rtl(config, arrays, folding, top, ...)``: its Verilog template (``hls_templates/rtl``), the
  values and ROMs it is rendered with and its stream ports (an ``RtlUnit``).

The kernels return plain values; ``fpgaplace.codegen`` renders them and nothing else here
imports code generation or simulation. The modules: ``conv`` (Conv2d, and ConvTranspose behind a
zero-inserting front), ``dense``, ``matmul`` (a MatMul of two activations, heads as a
batch), ``pool`` (max, average, global average), ``elementwise`` (add,
requantize), ``binary`` (mul, sub, max, min of two activations, one maybe broadcast per channel or
per pixel), ``affine`` (``x * a[c] + b[c]``: a batch norm not folded into a convolution, a Mul by a
constant), ``concat`` (runs of each input in stream order), ``slice`` (Split and Slice: channel
ranges, strided rows and pixels), ``upsample`` (nearest Resize), ``pad``, ``shuffle`` (a channel
permutation, its chains found by ``permutation``), ``reorder`` (a whole-sample transpose of the
stream), ``lrn``, ``gather`` (an embedding: rows of a table of at most 256 by byte indices),
``onehot`` (by comparison), ``threshold`` (a conv's or dense layer's output stage as FINN's
MultiThreshold where a batch norm or a bipolar quantizer stands before its QuantizeLinear), ``free``
(reshape, Q/DQ, folded batch norm, a Relu/Clip or threshold step its producer absorbs);
``window`` (the line-buffered RTL unit conv and pools share), ``rtl_values`` (shared pieces of
RTL values), ``geometry`` (the data a kernel answers in: Geometry, Folding, Resources),
``kernel`` (the base and the shared cost rules), ``registry`` (``KERNELS`` by name, ``plan_op``),
``folding`` (a core's folding), ``lowering`` (the QDQ reading the kernels' ``lower`` share,
``Layer``), ``quant``/``qdq``/``reference`` (integer semantics, QDQ reading, the numpy reference).

Adding a kernel:

1. one module here with its ``Kernel`` subclass answering the questions above (the shared cost
   rules of ``kernel`` apply unless it overrides them);
2. its two templates: ``hls_templates/hls/ops/<name>.j2`` (C++) and ``hls_templates/rtl/<name>.v.j2``
   (Verilog);
3. one entry in ``registry.KERNELS``, and the op types it runs name it (``OpClass.kernel`` in
   ``fpgaplace.model.ops``);
4. tests: bit-exact C simulation and RTL simulation against its integer reference, its modelled
   cycles equal to the RTL's, its DSP estimate equal to yosys' count.

Nothing else changes: the cost model, the folding, the code generator, the simulators and the
report read cycles, resources and template values from the kernel; ``cycles_to_us`` is the one
conversion to time.
"""

from __future__ import annotations

from fpgaplace.hw.geometry import Folding, Geometry, Resources, Unsupported
from fpgaplace.hw.kernel import Kernel, cycles_to_us
from fpgaplace.hw.registry import KERNELS, kernel_for, plan_op

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
