"""The alias kernel: a data-movement chain that keeps the stream order costs nothing.

A ViT's patch embedding writes its tokens as ``Conv -> Reshape [B, C, H*W] -> Transpose(0, 2, 1)``:
the convolution streams its output channels last (HWC), which is already the tokens' order
``[H*W, C]``. ``fpgaplace.hw.permutation`` finds such a chain (its effect in stream order the
identity, output of rank 3); its last op is an alias of the chain's int8 source, or a
requantization where the chain's exit scale differs. Like the other free kernels it has a geometry
and no cycles, resources or template. O(1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fpgaplace.hw.free import Free
from fpgaplace.hw.geometry import Geometry, Unsupported
from fpgaplace.hw.islands import islands
from fpgaplace.hw.table import island_source
from fpgaplace.util.errors import FpgaplaceError

if TYPE_CHECKING:
    from fpgaplace.hw.lowering import Layer, LayerContext
    from fpgaplace.model.ir import Op, OpGraph


class Alias(Free):
    """The last op of a chain keeping the stream order: its output is the chain's source."""

    def __init__(self) -> None:
        super().__init__("alias")

    def geometry(self, op: Op, graph: OpGraph) -> Geometry | Unsupported:
        island = islands(graph.model, graph.tensors).exit_op(op.name)
        if island is None or island.kernel != self.name:
            return Unsupported("not the last op of a chain keeping the stream order")
        return super().geometry(op, graph)

    def lower(self, ctx: LayerContext, op: Op, shape: dict) -> Layer | tuple[str, str] | None:
        """An alias of the chain's source (or its requantization to the exit's scale)."""
        island = islands(ctx.graph.model, ctx.graph.tensors).exit_op(op.name)
        if island is None:
            raise FpgaplaceError(f"op '{op.name}': not the last op of a chain keeping the stream order")
        return ctx.reshape(op, island_source(ctx, op, island))
