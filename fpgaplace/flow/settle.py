"""Free ops settled next to what they read, so every cut of a placement is one a core can build.

A placement may cut anywhere: between a Concat on a core and the QuantizeLinear that gives its
result a scale, or after a DequantizeLinear on a core whose int8 input comes from a CPU. The
placer sees no reason not to (such ops cost nothing on a core), but the core cannot honour the
cut: its layer computes the quantized tensor, so the float it was to hand over (a Concat's
result before its QuantizeLinear) is not a stream it has, and a DequantizeLinear of a tensor the
core only receives has no output port behind it.

``settle`` first puts every member of a fused group on its head's device, as the split does,
so the lowering reads the placement the split cuts. Then it moves each other free op (``hw``
kernels with ``free``: QuantizeLinear, DequantizeLinear, order-keeping reshapes) onto the
device of the op that produces the tensor it reads, where that device may run it, in
topological order so a chain (op -> Q -> DQ -> Reshape) follows its head; a free op that heads a
fused group stays with its group (a QuantizeLinear heading a Mul no core runs; the core then hands
over the float that QuantizeLinear reads as a view of its output, ``codegen.lower``). Then every tensor
crossing out of a core is the int8 tensor of one of its layers or a view of it (its
DequantizeLinear, a reshape of that), and every tensor entering a core is read through a port
of its own.

In a solver's placement fused groups already share a device, and moving a free op keeps every
device's set convex: its one computed input comes from the device it joins, so no path leaves
that set and comes back through it, and no path into the set it leaves passes it. The settled
placement is scored again by the trusted evaluator; it is charged the free ops' small CPU times
where they move to a CPU and the crossings where they now fall. O(ops) plus one evaluation.
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np

from fpgaplace import hw
from fpgaplace.model.ir import Op, OpGraph
from fpgaplace.model.passes.fuse import fused_head
from fpgaplace.place.solvers.problem import Placement, PlacementProblem


class Settleable(Protocol):
    """What ``settle`` reads and sets (``fpgaplace.flow.design.Design`` is one)."""

    graph: OpGraph
    problem: PlacementProblem
    placement: object  # its Result: placement, evaluation

    def set_placement(self, placement: Placement, arguments: dict | None = None) -> object: ...


def is_free(op: Op, graph: OpGraph) -> bool:
    """Whether ``op`` computes nothing on a core (a Q/DQ or an order-keeping reshape): its
    kernel is free; folded batch norms are left to their fused group."""
    planned = hw.plan_op(op, graph)
    return bool(planned) and planned[0].free and planned[0].name != "batchnorm"


def source_op(op: Op, graph: OpGraph) -> str | None:
    """The op producing ``op``'s data input (its first input), None for a graph input or a constant."""
    tensor = op.inputs[0] if op.inputs else ""
    producer = graph.producer(tensor) if tensor else None
    return producer if producer in graph.ops else None


def _fused_head(op: Op, graph: OpGraph) -> str | None:
    """The head of ``op``'s fused group, when it has one in the graph."""
    head = fused_head(op.node) if op.node is not None else None
    return head if head in graph.ops and head != op.name else None


def settled_devices(problem: PlacementProblem, graph: OpGraph, device: np.ndarray) -> np.ndarray:
    """The device array ``device`` with each fused op on its group head's device (as the split
    puts it, ``passes.transfers.colocate_fused_groups``) and each other free op on its source's
    device where it may run there (module docstring). O(ops)."""
    settled = np.array(device, copy=True)
    index = {name: v for v, name in enumerate(problem.names)}
    kinds = problem.device_kinds()
    heads = {_fused_head(op, graph) for op in graph.ops.values()} - {None}
    for name in graph.topological_order():  # a head and a source come before the ops that follow them
        op, v = graph.ops[name], index.get(name)
        head = _fused_head(op, graph)
        if v is None:
            continue
        if head in index:
            settled[v] = settled[index[head]]
            continue
        source = source_op(op, graph)
        if source in index and name not in heads and is_free(op, graph):  # a group moves as one, or not
            target = settled[index[source]]
            if math.isfinite(problem.latency[v, kinds[int(target)]]):
                settled[v] = target
    return settled


def settle(design: Settleable) -> bool:
    """Settle the free ops of ``design``'s placement (module docstring); the placement keeps the
    arguments it was solved with. Returns whether any op moved."""
    result = design.placement
    placement = result.placement
    device = settled_devices(design.problem, design.graph, placement.device)
    if np.array_equal(device, placement.device):
        return False
    moved = Placement(device, None, placement.method, placement.objective, bound=placement.bound,
                      seconds=placement.seconds, status=placement.status, contiguous=placement.contiguous)
    design.set_placement(moved, getattr(design, "_place_args", None))
    design.placement.placement.value = design.placement.value
    return True
