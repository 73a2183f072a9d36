"""The reorder kernel: a whole sample's stream written out transposed, ``[R, C, E] -> [C, R, E]``.

A data-movement chain (``fpgaplace.hw.permutation``) whose effect in stream order is a transpose
of blocks of E elements of every sample (E = 1: a YOLO head's ``Reshape [N, C, H, W] -> [N, C,
H*W]`` reads the HWC stream, ``[H*W, C]``, and writes CHW order, ``[C, H*W]``; E = D: attention's
split of ``[S, H*D]`` into heads ``[H, S, D]`` and their merge) maps the stream ``x`` to
``y[(c * R + r) * E + e] = requantize(x[(r * C + c) * E + e] - ZX, M, S, ZY, LO, HI)`` (the
identity requantization, M = 2**30 and S = 30, unless the chain's exit scale differs from its
source's).

The stage buffers whole samples in L banks (L = PE lanes dividing E, or both R and C when E = 1).
Element (r, c, e) lives in bank ``(r + c + e) mod L`` at address ``((r * C + c) * E + e) / L``, so
the L elements of an input beat (one r, L consecutive c; or one block, L consecutive e) and of an
output beat (one c, L consecutive r; or L consecutive e) each sit in L different banks: the
address generator is a few counters and a rotation, no index ROM. Each bank holds two
samples (a ping-pong buffer): sample n goes out while sample n + 1 comes in, so the stage takes
``SIZE / L`` cycles a sample (``cycles``) like any lane stage and never stalls its neighbours for a
whole sample; the ``2 * SIZE`` bytes (``linebuffer_bytes``) are charged to the core's on-chip
memory (fixed bytes, BRAM), so the placement sees them. Integer reference, HLS template
(``hls/ops/reorder.j2``, ``fp::reorder``: HLS makes the banks a ping-pong buffer between its two
DATAFLOW processes) and RTL values (``rtl/reorder.v.j2``) are here. Lowering is O(1).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from fpgaplace.hw import reference
from fpgaplace.hw.geometry import Fill, Folding, Geometry, RtlUnit, Unsupported
from fpgaplace.hw.islands import islands
from fpgaplace.hw.kernel import tensor_shape, unit_fill
from fpgaplace.hw.rtl_values import PORT_IN, PORT_OUT, check_int8_members, const_requant, index_bits, int_members
from fpgaplace.hw.shuffle import Shuffle
from fpgaplace.util.errors import FpgaplaceError

if TYPE_CHECKING:
    from fpgaplace.board.model import FpgaCore
    from fpgaplace.hw.lowering import Layer, LayerContext
    from fpgaplace.model.ir import Op, OpGraph


class Reorder(Shuffle):
    """The last op of a chain that transposes each sample's stream: a whole-sample reorder buffer."""

    name, template, inputs = "reorder", "hls/ops/reorder.j2", 1

    def geometry(self, op: Op, graph: OpGraph) -> Geometry | Unsupported:
        island = islands(graph.model, graph.tensors).exit_op(op.name)
        if island is None or island.kernel != self.name:
            return Unsupported("not the last op of a chain transposing the stream")
        out = tensor_shape(graph, op.outputs[0])
        if out is None:
            return Unsupported("unknown shapes")
        rows, columns, block = island.transpose
        return self.transpose_geometry(math.prod(out) // (rows * columns * block), rows, columns, block)

    def transpose_geometry(self, samples: int, rows: int, columns: int, block: int = 1) -> Geometry:
        """The geometry of ``samples`` streams of ``[rows, columns, block]`` written as ``[columns,
        rows, block]``: PE folds the block, or the common divisor of rows and columns when a block
        is one element (a beat of either side in L different banks), two samples buffered."""
        size = rows * columns * block
        lanes = block if block > 1 else math.gcd(rows, columns)
        return Geometry(self.name, samples, lanes, 1, stream_elements=samples * size, linebuffer_bytes=2 * size,
                        shape={"SIZE": samples * size, "XR": rows, "XC": columns, "XE": block})

    def cycles(self, g: Geometry, fold: Folding) -> int:
        """A sample in while the one before goes out: ``SIZE / L`` per sample."""
        return g.stream_elements // fold.pe

    def fill(self, g: Geometry, fold: Folding) -> Fill:
        """The whole sample in before its first output; its outputs all after its last input."""
        cycles = self.cycles(g, fold)
        return unit_fill(cycles, 1, cycles, 0, cycles)

    def reference(self, config: dict, arrays: dict, inputs: list[np.ndarray], rows: int = 1) -> np.ndarray:
        c = config
        x = np.asarray(inputs[0]).reshape(c["XR"], c["XC"], c.get("XE", 1)).transpose(1, 0, 2).reshape(-1)
        return reference.requant(x, zx=c["ZX"], m=c["M"], s=c["S"], zy=c["ZY"], lo=c["LO"], hi=c["HI"])

    def lower(self, ctx: LayerContext, op: Op, shape: dict) -> Layer:
        """The chain's layer: its source, its output, the transpose's R, C and E and ``sx / sy``."""
        config = {"SIZE": shape["SIZE"] // ctx.batch(), "XR": shape["XR"], "XC": shape["XC"], "XE": shape["XE"]}
        return self.chain_layer(ctx, op, config)[0]

    def rtl(self, config: dict[str, Any], arrays: dict[str, Any], fold: Folding, top: str, model_cycles: int,
            macs_per_dsp: int = 1, core: FpgaCore | None = None) -> RtlUnit:
        """``rtl/reorder.v.j2``: PE banks, the write rotation by ``r mod L``, per bank the read
        address offset of each column phase ``c mod L`` (constants), the read rotation by ``c mod L``;
        for blocks (XE > 1, L dividing XE) lane l is bank l and the read address walks the blocks."""
        c = int_members(config)
        if c.get("XE", 1) > 1:
            return self.blocks_rtl(c, fold, top)
        rows, columns, lanes = c["XR"], c["XC"], fold.pe
        if rows * columns != c["SIZE"] or rows % lanes or columns % lanes:
            raise FpgaplaceError(f"rtl {top}: XR x XC must be SIZE={c['SIZE']} and PE={lanes} divide XR={rows} "
                                 f"and XC={columns}")
        check_int8_members(c, ("ZX", "ZY"), self.name)
        depth = c["SIZE"] // lanes
        # bank b holds, in column phase k = c mod L, lane (b - k) mod L's element: its row offset
        offsets = [[(b - k) % lanes * (columns // lanes) for k in range(lanes)] for b in range(lanes)]
        rq = const_requant(f"{top}_requantize", [("a", 10, c["M"])], c["S"], c["ZY"], c["LO"], c["HI"])
        values = c | {"name": top, "L": lanes, "DEPTH": depth, "ADDR_BITS": index_bits(depth),
                      "HALF_BITS": index_bits(depth) + 1, "LANE_BITS": index_bits(lanes),
                      "ROW_BLOCKS": rows // lanes, "COL_BLOCKS": columns // lanes, "RB_BITS": index_bits(rows // lanes),
                      "CB_BITS": index_bits(columns // lanes), "offsets": offsets, "rq": rq, "BLOCKED": False}
        return RtlUnit("rtl/reorder.v.j2", values, {}, ((PORT_IN, lanes, c["SIZE"]),), (PORT_OUT, lanes, c["SIZE"]))

    def blocks_rtl(self, c: dict[str, int], fold: Folding, top: str) -> RtlUnit:
        """``rtl/reorder.v.j2`` for a transpose of blocks of XE elements (L dividing XE): no rotation,
        the out side's address ``(r * XC + c) * W + w`` for W = XE / L words a block."""
        rows, columns, block, lanes = c["XR"], c["XC"], c["XE"], fold.pe
        if rows * columns * block != c["SIZE"] or block % lanes:
            raise FpgaplaceError(f"rtl {top}: XR x XC x XE must be SIZE={c['SIZE']} and PE={lanes} divide XE={block}")
        check_int8_members(c, ("ZX", "ZY"), self.name)
        depth, words = c["SIZE"] // lanes, block // lanes
        rq = const_requant(f"{top}_requantize", [("a", 10, c["M"])], c["S"], c["ZY"], c["LO"], c["HI"])
        values = c | {"name": top, "L": lanes, "DEPTH": depth, "ADDR_BITS": index_bits(depth),
                      "HALF_BITS": index_bits(depth) + 1, "LANE_BITS": index_bits(lanes), "ROW_BLOCKS": 1,
                      "COL_BLOCKS": 1, "RB_BITS": 1, "CB_BITS": 1, "offsets": [[0] * lanes for _ in range(lanes)],
                      "rq": rq, "BLOCKED": True, "W": words, "W_BITS": index_bits(words), "R_BITS": index_bits(rows),
                      "C_BITS": index_bits(columns)}
        return RtlUnit("rtl/reorder.v.j2", values, {}, ((PORT_IN, lanes, c["SIZE"]),), (PORT_OUT, lanes, c["SIZE"]))
