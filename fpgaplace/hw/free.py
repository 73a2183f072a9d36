"""Free kernels: ops that cost nothing on a core (stream-order-preserving reshapes, a flatten of a
feature map that only dense layers read (they take its channels-last order by permuting their
weights, ``fpgaplace.hw.dense.flattened_from``), the ops of an island but its last, QuantizeLinear
and DequantizeLinear absorbed into their neighbours' requantization, batch norm folded into a
convolution, a Relu or Clip between an op and its QuantizeLinear, which the op's requantization
clamps by: ``hw.qdq.absorbed_activation``). They have a geometry (to say whether a core can take them) and nothing else:
no cycles, no resources, no template. O(1).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from fpgaplace.hw.dense import flatten_readers
from fpgaplace.hw.geometry import Geometry, Unsupported
from fpgaplace.hw.kernel import Kernel, tensor_shape

if TYPE_CHECKING:
    from fpgaplace.hw.lowering import Layer, LayerContext
    from fpgaplace.model.ir import Op, OpGraph


class Free(Kernel):
    """Ops that cost nothing on a core: stream-order-preserving reshapes, Q/DQ and folded BN."""

    free = True

    def __init__(self, name: str) -> None:
        self.name = name
        self.template = ""

    def geometry(self, op: Op, graph: OpGraph) -> Geometry | Unsupported:
        out = tensor_shape(graph, op.outputs[0]) if op.outputs else None
        if out is None:
            return Unsupported("unknown output shape")
        if self.name == "reshape":
            x = tensor_shape(graph, op.inputs[0])
            mixed = x is None or changes_stream_order(x, out)
            if mixed and not (len(out) == 2 and x is not None and len(x) == 4 and flatten_readers(graph, op)):
                return Unsupported("a reshape to or from a 4-D tensor with both channels and pixels changes the "
                                   "stream order (channels last), and not a flatten read by dense layers only, a "
                                   "channel permutation or a transpose of each sample's stream to rank 3 "
                                   "(fpgaplace.hw.permutation)")
        if self.name == "batchnorm" and not _folds_into_producer(op, graph):
            return Unsupported("a batch norm that is not folded into a convolution")
        return Geometry(self.name, 0, 1, 1, stream_elements=math.prod(out), shape={"SIZE": math.prod(out)})

    def lower(self, ctx: LayerContext, op: Op, shape: dict) -> Layer | tuple[str, str] | None:
        """None (absorbed into its neighbours), or for a reshape an alias (output int8 tensor,
        input int8 tensor) or a requantization where its two scales differ."""
        return ctx.reshape(op) if self.name == "reshape" else None


def changes_stream_order(x: tuple[int, ...], out: tuple[int, ...]) -> bool:
    """Whether a reshape of ``x`` into ``out`` may change the stream order (channels last): either
    is a 4-D tensor with both channels and pixels. O(1)."""
    return any(len(t) == 4 and t[1] > 1 and t[2] * t[3] > 1 for t in (x, out))


FOLDING_HEADS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul"})  # ops a batch norm of their output folds into


def _folds_into_producer(op: Op, graph: OpGraph) -> bool:
    """Whether the batch norm ``op`` folds into a convolution: it is the only reader of a dot-product
    op's output (``fpgaplace.model.passes.fold.fold_batchnorm`` folds it there). One behind a Concat,
    or behind a QuantizeLinear -> DequantizeLinear pair, scales int8 values: the affine kernel's. O(1)."""
    if op.node is None or not op.inputs:
        return False
    head = graph.producer(op.inputs[0])
    return head is not None and graph.ops[head].op_type in FOLDING_HEADS and graph.consumers(op.inputs[0]) == [op.name]
