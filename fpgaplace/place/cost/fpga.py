"""What an op costs on an FPGA core, as the op library (``fpgaplace.hw``) says: its kernel's share
of the core's DSPs or LUT lanes, or the DRAM time of its streamed weights when longer, in
microseconds; its on-chip footprint; which weights stay resident; every tensor's element width
(the precision asked for, or a QONNX quantizer's own). See ``fpgaplace.place.cost`` for the model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fpgaplace import hw
from fpgaplace.board.model import Board, FpgaCore
from fpgaplace.hw.folding import streamed_cycles
from fpgaplace.hw.geometry import Folding
from fpgaplace.hw.kernel import PRECISION_BITS as KERNEL_BITS
from fpgaplace.hw.kernel import bits_to_bytes, with_precision
from fpgaplace.model import ops
from fpgaplace.model.ir import Op, OpGraph
from fpgaplace.place.solvers.problem import StageFill

PRECISION_BITS = {"binary": 1, "int2": 2, "int4": 4, "int8": 8, "int16": 16, "float16": 16, "float32": 32}
"""Bits of one element at each precision the cores may compute at (``CostOptions.precision``): the
default width of every tensor whose own width (``TensorInfo.quant_bits``, from a QONNX quantizer)
is not known."""


PRECISION_BYTES = {name: bits / 8 for name, bits in PRECISION_BITS.items()}
"""The same in bytes per element (fractional below 8 bits); the functions below that take a
``precision`` take these bytes per element."""


WORKING_SHARE = 0.5  # of a core's on-chip bytes: the working area (streams, block rounding)


RESIDENT_LIMIT = 0.5  # an op's weights may stay resident if they take at most this share of a weight area


RESIDENT_BUDGET = 0.5  # resident weights fill at most this share of what the fixed bytes leave of the weight areas


def fpga_core_kinds(board: Board) -> list[tuple[str, list[FpgaCore]]]:
    """Group identical cores (equal ``kind_key``) into named kinds, in board order."""
    groups: dict[tuple, list[FpgaCore]] = {}
    for core in board.cores:
        groups.setdefault(core.kind_key, []).append(core)
    if len(groups) == 1:
        return [("core", next(iter(groups.values())))]
    return [(f"core-{cores[0].name}", cores) for cores in groups.values()]


def precision_bits(precision: float) -> int:
    """Bits per element of ``precision`` bytes per element (a ``PRECISION_BYTES`` value)."""
    return max(1, round(precision * 8))


def tensor_bits(graph: OpGraph, tensor: str, default_bits: int) -> int:
    """Bits of one element of ``tensor``: its own width (a QONNX quantizer's ``quant_bits``), else
    ``default_bits``; rounded up to a width the op library counts (3 bits take 4, 12 take 16)."""
    info = graph.tensors.get(tensor)
    bits = info.quant_bits if info is not None and info.quant_bits else default_bits
    return next((width for width in KERNEL_BITS if width >= bits), KERNEL_BITS[-1])


def op_bits(op: Op, graph: OpGraph, default_bits: int) -> tuple[int, int]:
    """(weight bits, activation bits) of ``op``'s operands, each by ``tensor_bits``: its first
    input's width, and a dot product's second input's (its weights, or the other activation of an
    attention MatMul); an op without that operand has no weights and gets the activation width."""
    activation = tensor_bits(graph, op.inputs[0], default_bits) if op.inputs and op.inputs[0] else default_bits
    if len(op.inputs) > 1 and op.inputs[1] and ops.is_dot_product(op.op_type, op.domain):
        return tensor_bits(graph, op.inputs[1], default_bits), activation
    return activation, activation


def element_bytes(graph: OpGraph, tensors: list[str], precision: float) -> int:
    """Bytes of ``tensors``, each element at its own width or ``precision`` bytes (packed below 8 bits)."""
    default = precision_bits(precision)
    return sum(bits_to_bytes(graph.tensors[t].numel, tensor_bits(graph, t, default))
               for t in tensors if t in graph.tensors)


@dataclass(frozen=True)
class OnChipPlan:
    """How one op uses a core's memory: bytes it keeps resident and bytes it streams per run."""

    resident_bytes: int
    streamed_bytes: int


def weight_area(core_bytes: int) -> int:
    return int(core_bytes * (1 - WORKING_SHARE))


def plan_at_precision(op: Op, graph: OpGraph, precision: float) -> tuple[hw.Kernel, hw.Geometry] | None:
    """``op``'s kernel and geometry with the element widths of its operands (``op_bits``; the
    geometry's weights and activations at those bits, so its bytes and MACs per DSP follow), or
    None when no core runs it."""
    planned = hw.plan_op(op, graph)
    if not planned:
        return None
    kernel, geometry = planned
    return kernel, with_precision(geometry, *op_bits(op, graph, precision_bits(precision)))


def kernel_bytes(op: Op, graph: OpGraph, precision: float, core: FpgaCore | None = None) -> tuple[int, int]:
    """(weight bytes at the weights' width, fixed on-chip bytes) of ``op``'s kernel: what it keeps
    on chip only when resident, and what it keeps wherever its weights are (line buffer as
    ``core``'s family lays it out, per-channel words); (0, 0) for ops no core runs. O(1) per op."""
    planned = plan_at_precision(op, graph, precision)
    if not planned:
        return 0, 0
    kernel, geometry = planned
    return kernel.weight_bytes(geometry, bits=geometry.weight_bits), kernel.fixed_bytes(geometry, core)


def kernel_weight_bytes(op: Op, graph: OpGraph, precision: float) -> int:
    """On-chip weight bytes of ``op``'s kernel at its weights' width (0 for ops no core runs)."""
    return kernel_bytes(op, graph, precision)[0]


def resident_budget(graph: OpGraph, board: Board, precision: float) -> float:
    """Bytes the resident weights of ``graph`` may take on ``board`` together: ``RESIDENT_BUDGET``
    of the cores' weight areas left once every op a core can hold has its fixed bytes there (the
    line buffers and per-channel words share the weight areas with the resident weights, so a
    model with many of them, as DenseNet's 120 convs and 120 batch norms, keeps fewer weights on
    chip and the whole of it still fits the cores, with room for the DP's pieces to differ). O(n)."""
    areas = [weight_area(core.onchip_bytes) for core in board.cores]
    core = board.cores[0] if board.cores else None  # a board's cores share its part's family
    fixed = (kernel_bytes(op, graph, precision, core)[1] for op in graph.ops.values())
    held = sum(nbytes for nbytes in fixed if nbytes <= max(areas, default=0))
    return RESIDENT_BUDGET * max(0, sum(areas) - held)


def resident_ops(graph: OpGraph, board: Board, precision: float) -> set[str]:
    """Ops whose weights stay on chip: smallest first, within ``RESIDENT_LIMIT`` of the smallest
    core's weight area each and ``resident_budget`` together. O(n log n)."""
    if not board.cores:
        return set()
    per_op_limit = RESIDENT_LIMIT * weight_area(min(core.onchip_bytes for core in board.cores))
    budget = resident_budget(graph, board, precision)
    sizes = sorted((kernel_weight_bytes(op, graph, precision), name) for name, op in graph.ops.items())
    chosen, used = set(), 0
    for size, name in sizes:
        if size > per_op_limit or used + size > budget:
            break
        chosen.add(name)
        used += size
    return chosen


def on_chip_plan(op: Op, graph: OpGraph, precision: float, resident: bool, core: FpgaCore | None = None) -> OnChipPlan:
    """m(v): the kernel's fixed on-chip bytes (line buffer at the input's width, per-channel words)
    plus its weights at their width when they stay resident; weights that do not cross the DRAM
    link at every run."""
    weights, fixed = kernel_bytes(op, graph, precision, core)
    return OnChipPlan(fixed + weights, 0) if resident else OnChipPlan(fixed, weights)


def fpga_latency_us(op: Op, graph: OpGraph, core: FpgaCore, board: Board, plan: OnChipPlan,
                    precision: float = 1) -> float:
    """Latency (us) of ``op`` on ``core``: its kernel's share of the core at its operands' widths
    (the MACs a DSP takes at that width, or LUT lanes for binary ones) or, when longer, its streamed
    weights over the DRAM link (read while it computes), both from the op library; infinite where no
    kernel runs it."""
    planned = plan_at_precision(op, graph, precision)
    if not planned:
        return math.inf
    kernel, geometry = planned
    if kernel.fixed_bytes(geometry, core) > weight_area(core.onchip_bytes):
        return math.inf
    cycles = max(kernel.ideal_cycles(geometry, core), streamed_cycles(plan.streamed_bytes, core, board.dram))
    return hw.cycles_to_us(cycles, core)


def fpga_fill(op: Op, graph: OpGraph, core: FpgaCore, precision: float = 1) -> StageFill | None:
    """``op``'s dataflow stage on ``core`` for the latency objective (``StageFill``): its kernel's
    fill and cycles at the serial folding, in microseconds (``hw.cycles_to_us``); None where no
    kernel runs it. O(1) per op (a line-buffered stage's fill is O(output rows))."""
    planned = plan_at_precision(op, graph, precision)
    if not planned:
        return None
    kernel, geometry = planned
    us = hw.cycles_to_us(1.0, core)
    return StageFill(kernel.fill(geometry, Folding()).scaled(us), kernel.cycles(geometry, Folding()) * us)
