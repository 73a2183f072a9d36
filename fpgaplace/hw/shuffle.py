"""The shuffle kernel: a fixed permutation of each pixel's channels (a channel shuffle) as one lane stage.

A channel-permutation chain (``fpgaplace.hw.permutation``: ShuffleNet's Reshape -> Transpose ->
Reshape, or any chain of data-movement ops with the same effect) maps the stream of pixels
``x[p, :]`` (channels last) to ``y[p, c] = requantize(x[p, perm[c]] - ZX, M, S, ZY, LO, HI)``: the
requantization is the identity (M = 2**30, S = 30) unless the chain's exit scale differs from its
source's. The chain's last op carries the stage, its other ops are free members
(``fpgaplace.hw.islands``).

The stage reads a pixel's C channels into one half of a two-pixel buffer while it writes the
previous pixel, permuted, from the other half: PE channels a cycle, ``C / PE`` beats a pixel plus
one pixel to fill the buffer (``cycles``); the buffer is ``2 C`` bytes (``linebuffer_bytes``).
Integer reference, HLS template (``hls/ops/shuffle.j2``, ``fp::shuffle``) and RTL values
(``rtl/shuffle.v.j2``) are here. Lowering is O(C).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from fpgaplace.hw import reference
from fpgaplace.hw.elementwise import Elementwise, lane_geometry
from fpgaplace.hw.geometry import Fill, Folding, Geometry, RtlUnit, Unsupported
from fpgaplace.hw.islands import Island, islands
from fpgaplace.hw.kernel import tensor_shape, unit_fill
from fpgaplace.hw.lowering import Layer
from fpgaplace.hw.rtl_values import PORT_IN, PORT_OUT, check_int8_members, const_requant, index_bits, int_members
from fpgaplace.hw.table import island_source
from fpgaplace.util.errors import FpgaplaceError

if TYPE_CHECKING:
    from fpgaplace.board.model import FpgaCore
    from fpgaplace.hw.lowering import LayerContext
    from fpgaplace.model.ir import Op, OpGraph


class Shuffle(Elementwise):
    """The last op of a channel-permutation chain: each pixel's C channels out in ``perm`` order."""

    name, template, inputs = "shuffle", "hls/ops/shuffle.j2", 1

    def geometry(self, op: Op, graph: OpGraph) -> Geometry | Unsupported:
        island = islands(graph.model, graph.tensors).exit_op(op.name)
        if island is None or island.kernel != self.name:
            return Unsupported("not the last op of a channel-permutation chain")
        out = tensor_shape(graph, op.outputs[0])
        if out is None:
            return Unsupported("unknown shapes")
        return self.channels_geometry(out)

    def channels_geometry(self, out: tuple[int, ...]) -> Geometry:
        """The geometry of a permutation of the channels of ``out`` (NCHW, or [N, C]): a two-pixel buffer."""
        g = lane_geometry(self.name, out, out[1], {"CHANNELS": [out[1]]})
        return replace(g, linebuffer_bytes=2 * out[1])

    def pixel_widths(self, g: Geometry, pe: int) -> tuple[int, ...]:
        """One pixel a cycle at most: the buffer turns over once a pixel."""
        return (1,)

    def cycles(self, g: Geometry, fold: Folding) -> int:
        """The lane rule (``C / PE`` beats a pixel) plus one pixel's beats to fill the buffer."""
        return super().cycles(g, fold) + math.ceil(g.channels / fold.pe)

    def fill(self, g: Geometry, fold: Folding) -> Fill:
        """A pixel whole in its buffer before its outputs (``unit_fill``, a pixel a unit)."""
        beats = math.ceil(g.channels / fold.pe)
        return unit_fill(self.cycles(g, fold), g.pixels, beats, 0, beats)

    def reference(self, config: dict, arrays: dict, inputs: list[np.ndarray], rows: int = 1) -> np.ndarray:
        c = config
        x = np.asarray(inputs[0]).reshape(-1, c["C"])[:, np.asarray(arrays["perm"]).astype(np.int64)]
        return reference.requant(x.reshape(-1), zx=c["ZX"], m=c["M"], s=c["S"], zy=c["ZY"], lo=c["LO"], hi=c["HI"])

    def lower(self, ctx: LayerContext, op: Op, shape: dict) -> Layer:
        """The chain's layer: its source, its output, the permutation and ``sx / sy``."""
        channels = shape["CHANNELS"][0]
        pixels = shape["PIXELS"] // ctx.batch()
        layer, island = self.chain_layer(ctx, op, {"SIZE": pixels * channels, "PIXELS": pixels, "C": channels})
        layer.arrays = {"perm": np.asarray(island.permutation, dtype=np.int16)}
        return layer

    def chain_layer(self, ctx: LayerContext, op: Op, config: dict) -> tuple[Layer, Island]:
        """The layer of the chain ``op`` ends (its source requantized to its output, ``sx / sy``,
        with ``config``) and the chain; a one-line error where ``op`` ends no chain of this kernel."""
        island = islands(ctx.graph.model, ctx.graph.tensors).exit_op(op.name)
        if island is None or island.kernel != self.name:
            raise FpgaplaceError(f"op '{op.name}': not the last op of a {self.name} chain (data movement)")
        return ctx.rescale(op, island_source(ctx, op, island), ctx.sink(op), self.name, config), island

    def rtl(self, config: dict[str, Any], arrays: dict[str, Any], fold: Folding, top: str, model_cycles: int,
            macs_per_dsp: int = 1, core: FpgaCore | None = None) -> RtlUnit:
        """``rtl/shuffle.v.j2``: PE elements a beat, the permutation wired when a pixel is taken."""
        c = int_members(config)
        perm = [int(v) for v in np.asarray(arrays.get("perm", ()), dtype=np.int64).reshape(-1)]
        channels, pe = c["C"], fold.pe
        if sorted(perm) != list(range(channels)) or channels % pe:
            raise FpgaplaceError(f"rtl {top}: perm must be a permutation of the {channels} channels and PE={pe} "
                                 "divide them")
        check_int8_members(c, ("ZX", "ZY"), self.name)
        rq = const_requant(f"{top}_requantize", [("a", 10, c["M"])], c["S"], c["ZY"], c["LO"], c["HI"])
        values = c | {"name": top, "PE": pe, "BEATS": channels // pe, "BEAT_BITS": index_bits(channels // pe),
                      "perm": perm, "rq": rq}
        size = c["SIZE"]
        return RtlUnit("rtl/shuffle.v.j2", values, {}, ((PORT_IN, pe, size),), (PORT_OUT, pe, size))
