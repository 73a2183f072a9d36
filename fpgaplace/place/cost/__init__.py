"""Cost model: per-op latency on each device kind, on-chip footprint, transfer times.

Its output is the ``PlacementProblem`` the solvers read. Times are in microseconds.

FPGA core: what the hardware op library (``fpgaplace.hw``) says the op costs: its kernel's
  ``ideal_cycles`` (its share of the core's DSPs or LUT lanes, see ``fpgaplace.hw.kernel``),
  or the cycles to stream its weights from DRAM when they do not stay resident if those take
  longer (the stage reads its weights while it computes, as the folding's interval, the larger
  of compute and DRAM cycles, says), turned into microseconds by ``hw.cycles_to_us``. An op
  without a kernel, or whose line buffer does not fit the core's working area, cannot run on
  the core (infinite latency). ``flow.refine`` corrects these costs where a folding
  measures otherwise (BRAM banks, coarse foldings).
  For the latency objective each op also carries its stage's fill at the serial folding
  (``fpga_fill``, ``PlacementProblem.fills``): the evaluator overlaps a core's stages by them
  (``hw.kernel.dataflow_latency``, as ``sim`` does), each paced at the core's load.
On-chip memory of a core: a share ``WORKING_SHARE`` is the working area for streams and the
  rounding of memories into blocks; the rest holds what the ops keep on chip, which adds up over
  the ops on the core (all stages of a dataflow exist at once): an op's footprint m(v) is its
  kernel's line buffer and per-channel words, plus its weights when they stay resident. Which
  weights stay resident is decided here, once: smallest first, each at most ``RESIDENT_LIMIT``
  of the smallest core's weight area, until they fill ``RESIDENT_BUDGET`` of what the cores'
  weight areas together leave once every op's fixed bytes are counted (``resident_budget``: the
  line buffers and per-channel words are there wherever the weights are), so the cores can hold
  every op with room to spare, and no op is pushed to a CPU only because memory ran out. The
  other weights are streamed from DRAM at every run.
CPU core: the op's time measured by profiling the whole model with onnxruntime on this host
  (median of ``profile_runs`` runs after a warm-up), scaled by (host GFLOP/s) / (board CPU
  GFLOP/s), the host rate measured around the profile; both are cached per model content and
  host (``CpuProfileCache``), so a second run reads the same figures. Where a node has no
  measurement, analytic ``2 * macs / GFLOP/s``.
Element widths: every tensor has its own bit width where a QONNX quantizer gives one
  (``TensorInfo.quant_bits``, carried through ops that only move values), else the precision asked
  for (``PRECISION_BITS``: binary, int2, int4, int8, int16, float16, float32); an op's kernel is
  costed at its operands' widths (``op_bits``, ``hw.kernel.with_precision``): weights stored and
  streamed at their width, line buffers at the input's, and the MACs a DSP takes at the lane's width
  (``hw.kernel.macs_per_dsp``: twice the int8 count at 4 and 2 bits, LUT lanes for binary).
Transfer c(u): bytes of u's outputs, each at its width (packed below 8 bits), over the link that joins the two
  devices (``Board.link_between``: the AXI stream between two cores of a board, DRAM or PCIe
  between a core and a CPU, the network between nodes; a tensor that leaves a core and returns
  to it goes through the core's DRAM), latency included. The problem carries one time per link
  (``PlacementProblem.links``), which the evaluator charges; its ``transfer`` is the costliest
  link's time, the upper bound the solvers' models use.
Fused ops (annotated by ``fpgaplace.model.passes.fuse``): a fused group shares one colour class so
  every solver keeps it on one device; on a core each member is a stage of the same dataflow.
"""
