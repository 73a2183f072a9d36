"""Softmax (ONNX Softmax of an int8 QDQ model) over rows that are contiguous in stream order: a
classifier's last [1, classes] layer, a detector's distribution head over a small last axis.

Integer semantics, per row of N int8 values ``x`` (input scale ``sx``, output scale ``sy``):

* ``m = max(x)``; ``e_i = EXP[m - x_i]`` from a 256-entry table ``EXP[d] = round(exp(-d * sx) *
  2**EXP_BITS)`` (so ``EXP[0] = 2**EXP_BITS``, the row's largest term);
* one division per row: ``r = round(MY * 2**EXP_BITS / sum_i e_i)`` with ``MY / 2**SY = 1 / sy``
  (``quantize_multiplier``); ``r < 2**31`` since the sum is at least ``EXP[0]``;
* ``y_i = requantize(e_i, r, SY + EXP_BITS, ZY, LO, HI)`` (the op library's rounding, half to even).

Rows: the softmax axis must be the innermost of the stream order (channels last): the last axis
below rank 4, the channels of an NCHW tensor (opset 13 and later), or for the opsets before 13
(which flatten from ``axis`` on) a trailing block that is whole samples or rows of the last axis.
A stage reads a row into a buffer finding its max, sums the exponentials, then writes the row:
``ROWS * (3 * ceil(N / L) + DIVIDER_CYCLES)`` cycles, ``L`` lanes (PE) of N. Resources: the row
buffer (N bytes), a table copy and one ``e_i * r`` multiplier per lane, a sequential divider.
O(N) per row for the reference; O(1) for everything else.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from fpgaplace.hw.geometry import Fill, Folding, Geometry, Resources, Rom, RtlUnit, Unsupported
from fpgaplace.hw.kernel import (
    LANE_FF_BASE,
    LANE_FF_PER_PE,
    LANE_LUT_BASE,
    LANE_LUT_PER_PE,
    LUTS_PER_LANE_BUDGET,
    Kernel,
    activation_inputs,
    divisors,
    multiplier_dsps,
    tensor_shape,
    unit_fill,
)
from fpgaplace.hw.lowering import Layer, bounds, multipliers
from fpgaplace.hw.memory import memory_blocks
from fpgaplace.hw.quant import requantize
from fpgaplace.hw.rtl_values import PORT_IN, PORT_OUT, check_int8_members, index_bits, int_members
from fpgaplace.util.errors import FpgaplaceError

if TYPE_CHECKING:
    from fpgaplace.board.model import FpgaCore
    from fpgaplace.hw.lowering import LayerContext
    from fpgaplace.model.ir import Op, OpGraph

EXP_BITS = 16  # fraction bits of the exponential table: EXP[0] = 2**16
PASSES = 3  # read (and max), sum, write: a row goes by three times
DIVIDER_CYCLES = 48  # a radix-2 divider of MY * 2**16 (< 2**47) by the sum: one quotient bit a cycle
DIVIDER_LUTS = 400  # 48-bit subtract-and-shift divider with its registers
EXP_LUTS_PER_LANE = 4 * (EXP_BITS + 1)  # a 256 x 17-bit ROM in LUT6
RECIPROCAL_BITS = 31  # r < 2**31: a lane's e * r multiplies it (unsigned, so 32 signed bits) by 17 bits


class RowKernel(Kernel):
    """A kernel over rows of N elements contiguous in stream order (softmax, layer norm): its
    geometry (a row buffer of N bytes) from ``rows``, and PE lanes of a row a cycle."""

    def rows(self, op: Op, graph: OpGraph, shape: tuple[int, ...]) -> tuple[int, int] | Unsupported:
        """(rows, N) of ``op`` on an input of ``shape``, or why its rows are not the stream's."""
        raise NotImplementedError

    def geometry(self, op: Op, graph: OpGraph) -> Geometry | Unsupported:
        acts = activation_inputs(op, graph)
        shape = tensor_shape(graph, acts[0]) if len(acts) == 1 else None
        if shape is None or not shape:
            return Unsupported("unknown input shape")
        rows = self.rows(op, graph, shape)
        if isinstance(rows, Unsupported):
            return rows
        count, n = rows
        return Geometry(self.name, count, n, 1, stream_elements=count * n, row=1,
                        linebuffer_bytes=n, shape={"SIZE": count * n, "N": n, "ROWS": count})

    def foldings(self, g: Geometry) -> list[Folding]:
        return [Folding(pe, 1, 1) for pe in divisors(g.channels)]

    def fill(self, g: Geometry, fold: Folding) -> Fill:
        """A row whole before its outputs: its first pass reads it into the row buffer, its last
        pass writes it, the passes between (and the divider or square root) follow the read."""
        beats = math.ceil(g.channels / fold.pe)
        per_row = self.cycles(g, fold) / g.pixels
        return unit_fill(self.cycles(g, fold), g.pixels, beats, per_row - 2 * beats, per_row - beats)


class Softmax(RowKernel):
    """Softmax of rows of N int8 values, PE of a row a cycle."""

    name, template = "softmax", "hls/ops/softmax.j2"

    def rows(self, op: Op, graph: OpGraph, shape: tuple[int, ...]) -> tuple[int, int] | Unsupported:
        return softmax_rows(shape, op.attrs.get("axis"), opset(graph))

    def cycles(self, g: Geometry, fold: Folding) -> int:
        return g.pixels * (PASSES * math.ceil(g.channels / fold.pe) + DIVIDER_CYCLES)

    def ideal_cycles(self, g: Geometry, core: FpgaCore) -> float:
        """Its share of the core's lane budget: three passes over every element."""
        return PASSES * g.stream_elements / max(1, core.lut // LUTS_PER_LANE_BUDGET)

    def resources(self, g: Geometry, fold: Folding, core: FpgaCore | None = None, resident: bool = True) -> Resources:
        lanes = fold.pe
        bram, _, lutram = memory_blocks(8 * lanes, math.ceil(g.channels / lanes))
        return Resources(lanes * multiplier_dsps(RECIPROCAL_BITS + 1, core), bram, 0,
                         LANE_LUT_BASE + DIVIDER_LUTS + (LANE_LUT_PER_PE + EXP_LUTS_PER_LANE) * lanes + lutram,
                         LANE_FF_BASE + 2 * 64 + LANE_FF_PER_PE * lanes)

    def reference(self, config: dict, arrays: dict, inputs: list[np.ndarray], rows: int = 1) -> np.ndarray:
        c = config
        return softmax_rows_int8(inputs[0], arrays["exp"], n=c["N"], my=c["MY"], sy=c["SY"], zy=c["ZY"], lo=c["LO"],
                                 hi=c["HI"])

    def lower(self, ctx: LayerContext, op: Op, shape: dict) -> Layer:
        """The layer of ``op``: the exponential table at the input's scale, ``1 / sy`` as MY, SY."""
        x, out = ctx.source(op, op.inputs[0]), ctx.sink(op)
        y = out.tensor
        (my,), (sy,) = multipliers(np.array([1.0 / y.scale]), f"op '{op.name}': 1 / output scale")
        lo, hi = bounds(ctx.index, out.activations, y.scale, y.zero_point)
        config = {"SIZE": shape["SIZE"] // ctx.batch(), "N": shape["N"], "MY": int(my), "SY": int(sy),
                  "ZY": y.zero_point, "LO": lo, "HI": hi}
        return Layer(op.name, self.name, [x.name], y.name, config, {"exp": exp_table(x.scale)})

    def hls_config(self, config: dict[str, int], g: Geometry, fold: Folding) -> dict[str, int]:
        return {**config, "L": fold.pe, "DIV": DIVIDER_CYCLES}

    def rtl(self, config: dict[str, Any], arrays: dict[str, Any], fold: Folding, top: str, model_cycles: int,
            macs_per_dsp: int = 1, core: FpgaCore | None = None) -> RtlUnit:
        """``rtl/softmax.v.j2``: a row buffer, an exponential ROM per lane, a restoring divider of
        ``DIVIDER_CYCLES`` steps and a requantizer per lane; L = PE elements a beat."""
        c = int_members(config)
        n, size, lanes = c["N"], c["SIZE"], fold.pe
        if n < 1 or size % n or n % lanes:
            raise FpgaplaceError(f"rtl {top}: PE={lanes} must divide N={n}, and N the SIZE={size}")
        check_int8_members(c, ("ZY",), self.name)
        table = np.asarray(arrays.get("exp", ()), dtype=np.int64).reshape(-1)
        if table.size != 256 or table.min() < 0 or table.max() > 2**EXP_BITS:
            raise FpgaplaceError(f"rtl {top}: the exponential table needs 256 values in [0, 2**{EXP_BITS}]")
        exp_file = f"{top}_exp.mem"
        values = c | {"name": top, "L": lanes, "ROWS": size // n, "EXP_W": EXP_BITS + 1, "DIV_BITS": DIVIDER_CYCLES,
                      "SUM_W": (n * 2**EXP_BITS).bit_length(), "SHIFT": c["SY"] + EXP_BITS,
                      "BEAT_BITS": index_bits(n // lanes), "DIV_COUNT_BITS": index_bits(DIVIDER_CYCLES),
                      "LO_BITS": f"8'h{c['LO'] & 0xFF:02x}", "HI_BITS": f"8'h{c['HI'] & 0xFF:02x}",
                      "exp_file": exp_file}
        return RtlUnit("rtl/softmax.v.j2", values, {exp_file: Rom([int(v) for v in table], EXP_BITS + 1)},
                       ((PORT_IN, lanes, size),), (PORT_OUT, lanes, size))


def opset(graph: OpGraph) -> int:
    """The default-domain opset of the graph's model (13 when unknown)."""
    model = getattr(graph, "model", None)
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] if model is not None else []
    return versions[0] if versions else 13


def softmax_rows(shape: tuple[int, ...], axis: int | None, version: int) -> tuple[int, int] | Unsupported:
    """(rows, N) of a softmax over ``axis`` of a tensor of ``shape`` whose rows are contiguous in
    stream order (channels last for rank 4), or why not (see the module docstring)."""
    rank = len(shape)
    axis = (-1 if version >= 13 else 1) if axis is None else int(axis)
    if not -rank <= axis < rank:
        return Unsupported(f"axis {axis} out of range for rank {rank}")
    axis %= rank
    size = math.prod(shape)
    if version >= 13:
        if rank == 4 and axis == 1:
            return size // shape[1], shape[1]
        if rank < 4 and axis == rank - 1:
            return size // shape[-1], shape[-1]
        return Unsupported(f"a softmax over axis {axis} of a rank-{rank} tensor: not the stream's innermost axis")
    n = math.prod(shape[axis:])
    if rank == 4 and axis >= 2 and shape[1] > 1:
        return Unsupported(f"a softmax flattening from axis {axis} of NCHW mixes the stream's channel order")
    return size // n, n


def exp_table(scale: float) -> np.ndarray:
    """``round(exp(-d * scale) * 2**EXP_BITS)`` for d = 0..255, int32."""
    d = np.arange(256, dtype=np.float64)
    return np.rint(np.exp(-d * scale) * 2**EXP_BITS).astype(np.int32)


def softmax_rows_int8(x: np.ndarray, table: np.ndarray, *, n: int, my: int, sy: int, zy: int, lo: int = -128,
                      hi: int = 127) -> np.ndarray:
    """The integer softmax of the module docstring over rows of ``n`` of int8 ``x``. O(size)."""
    rows = np.asarray(x).astype(np.int64).reshape(-1, n)
    e = np.asarray(table).astype(np.int64)[rows.max(axis=1, keepdims=True) - rows]
    total = e.sum(axis=1, keepdims=True)
    recip = ((np.int64(my) << EXP_BITS) + total // 2) // total
    return requantize(e, recip, sy + EXP_BITS, zy, lo, hi).reshape(-1)
