"""Slicing (ONNX Split and Slice): channel ranges (the inverse of concat, YOLOv8's C2f split) and
strided spatial windows (every s-th row and pixel from an offset, YOLOX's space-to-depth Focus).

A slice stage reads every beat of its input (PE channels of one pixel, channels innermost) and
passes on, requantized to its output's scale, the beats inside its window: rows ``H0 + i*SH``
(``i < HN``), pixels ``W0 + j*SW`` (``j < WN``), channels ``[C0, C0 + CN)``. A Split of k outputs
lowers to k slice stages, one per output, each reading the input (the code generator forks it),
each requantized to its own output's QuantizeLinear.

Everything about the op is here: geometry (axis 1 with step 1 for channels; axes 2 and 3 with
any positive step; the batch axis whole; PE divides the input's channels and every window's
channel bounds), foldings (one pixel a cycle: MMV 1), cycles (the lane rule over the input: every
input beat takes a cycle), resources (the lane rules of ``fpgaplace.hw.kernel``; a Split's share of
the core's budget counts each of its stages), the integer reference (``fpgaplace.hw.reference.slice_window``),
the C++ config of ``hls/ops/slice.j2`` and the RTL values (``rtl/slice.v.j2``). O(outputs).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from fpgaplace.hw import reference
from fpgaplace.hw.geometry import Fill, Folding, Geometry, RtlUnit, Unsupported
from fpgaplace.hw.kernel import Kernel, probe, tensor_shape
from fpgaplace.hw.qdq import qdq_index
from fpgaplace.hw.rtl_values import PORT_IN, PORT_OUT, check_int8_members, const_requant, index_bits, int_members
from fpgaplace.util.errors import FpgaplaceError

if TYPE_CHECKING:
    from fpgaplace.board.model import FpgaCore
    from fpgaplace.hw.lowering import Layer, LayerContext
    from fpgaplace.model.ir import Op, OpGraph

WINDOW_MEMBERS = ("H0", "HN", "SH", "W0", "WN", "SW", "C0", "CN")  # one output's window, config members


def nchw(shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    """(N, C, H, W) of a 4-D NCHW or a 2-D ``[N, C]`` shape (a vector is one pixel)."""
    return (shape[0], shape[1], shape[2], shape[3]) if len(shape) == 4 else (shape[0], shape[1], 1, 1)


def axis_range(start: int, end: int, step: int, size: int) -> tuple[int, int]:
    """(first index, count) ONNX Slice keeps of an axis of ``size`` for a positive ``step``
    (negative bounds count from the end, then both are clamped to the axis). O(1)."""
    first = min(max(start + size if start < 0 else start, 0), size)
    last = min(max(end + size if end < 0 else end, 0), size)
    return first, max(0, -(-(last - first) // step))


def slice_parameters(op: Op, graph: OpGraph) -> tuple[list[int], list[int], list[int], list[int]] | Unsupported:
    """(starts, ends, axes, steps) of a Slice: constant inputs 1-4 (opset 10+), else its
    attributes (opset 1-9, where a ``steps`` attribute is read too, as the probes give it)."""
    if len(op.inputs) == 1:
        values = [op.attrs.get(name) for name in ("starts", "ends", "axes", "steps")]
    else:
        index = qdq_index(graph.model)
        values = []
        for tensor in [*op.inputs[1:5], *[""] * (5 - len(op.inputs))]:
            value = index.constant(tensor) if tensor else None
            if tensor and value is None:
                return Unsupported(f"Slice bound '{tensor}' is not a constant")
            values.append(None if value is None else value.reshape(-1).tolist())
    starts, ends, axes, steps = values
    if starts is None or ends is None:
        return Unsupported("a Slice without starts and ends")
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps):
        return Unsupported("Slice starts, ends, axes and steps of different lengths")
    return [int(v) for v in starts], [int(v) for v in ends], [int(v) for v in axes], [int(v) for v in steps]


def slice_window(op: Op, graph: OpGraph, x: tuple[int, ...]) -> dict[str, int] | Unsupported:
    """The window a Slice keeps of its NCHW (or ``[N, C]``) input ``x``, or why no core runs it."""
    params = slice_parameters(op, graph)
    if isinstance(params, Unsupported):
        return params
    n, c, h, w = nchw(x)
    window = {"H0": 0, "HN": h, "SH": 1, "W0": 0, "WN": w, "SW": 1, "C0": 0, "CN": c}
    for start, end, axis, step in zip(*params, strict=True):
        axis = axis + len(x) if axis < 0 else axis
        if not 0 <= axis < len(x):
            return Unsupported(f"Slice axis {axis} outside the input's {len(x)} axes")
        if step == 0:
            return Unsupported("a Slice step of 0")
        if step < 0:
            return Unsupported("a Slice with a negative step (it reverses the stream)")
        first, count = axis_range(start, end, step, x[axis])
        if axis == 0:
            if (first, count, step) != (0, n, 1):
                return Unsupported("a Slice of the batch axis")
        elif axis == 1:
            if step != 1:
                return Unsupported("a strided channel Slice")
            window["C0"], window["CN"] = first, count
        else:
            key = "H" if axis == 2 else "W"
            window[f"{key}0"], window[f"{key}N"], window[f"S{key}"] = first, count, step
    return window


def split_windows(op: Op, x: tuple[int, ...], outs: list[tuple[int, ...]]) -> list[dict[str, int]] | Unsupported:
    """One channel window per output of a Split along axis 1, from the outputs' shapes."""
    axis = int(op.attrs.get("axis", 0))
    axis = axis + len(x) if axis < 0 else axis
    if axis != 1:
        return Unsupported("only a channel Split (axis 1) runs on a core")
    n, c, h, w = nchw(x)
    windows, first = [], 0
    for out in outs:
        if len(out) != len(x) or out[:1] + out[2:] != x[:1] + x[2:] or out[1] < 1:
            return Unsupported(f"Split output shape {out} does not follow from the input's {x}")
        windows.append({"H0": 0, "HN": h, "SH": 1, "W0": 0, "WN": w, "SW": 1, "C0": first, "CN": out[1]})
        first += out[1]
    if first != c:
        return Unsupported(f"Split outputs of {first} channels from an input of {c}")
    return windows


def window_offset(c: dict[str, Any]) -> int:
    """Input elements before a window's first kept element (channels innermost). O(1)."""
    return (c["H0"] * c["W"] + c["W0"]) * c["C"] + c["C0"]


class Slice(Kernel):
    """A window of rows, pixels and channels of one stream; a Split is one per output."""

    name, template = "slice", "hls/ops/slice.j2"
    uses_dsp = False

    def geometry(self, op: Op, graph: OpGraph) -> Geometry | Unsupported:
        x = tensor_shape(graph, op.inputs[0]) if op.inputs else None
        outs = [tensor_shape(graph, t) for t in op.outputs if t]
        if x is None or not outs or any(o is None for o in outs):
            return Unsupported("unknown shapes")
        if len(x) not in (2, 4) or any(d < 1 for d in x):
            return Unsupported("only 2-D [N, C] and 4-D NCHW tensors")
        windows = split_windows(op, x, outs) if op.op_type == "Split" else slice_window(op, graph, x)
        if isinstance(windows, Unsupported):
            return windows
        windows = windows if isinstance(windows, list) else [windows]
        for window, out in zip(windows, outs, strict=True):
            kept = (x[0], window["CN"], window["HN"], window["WN"])[:len(x)]
            if 0 in kept:
                return Unsupported("an empty Slice")
            if tuple(kept) != tuple(out):
                return Unsupported(f"output shape {out}, expected {tuple(kept)} from the slice bounds")
        n, c, h, w = nchw(x)
        pe = math.gcd(c, *(v for window in windows for v in (window["C0"], window["CN"])))
        shape = {"H": h, "W": w, "C": c, "windows": windows}
        return Geometry(self.name, n * h * w, pe, 1, stream_elements=n * h * w * c, row=w, shape=shape)

    def pixel_widths(self, g: Geometry, pe: int) -> tuple[int, ...]:
        """One pixel a cycle: a beat of PE channels is kept or dropped whole."""
        return (1,)

    def cycles(self, g: Geometry, fold: Folding) -> int:
        """Every input beat takes a cycle, kept or dropped: ``N*H*W*C / PE``."""
        return g.stream_elements // fold.pe

    def layer_fill(self, layer: Layer) -> Fill:
        """A slice reads every beat but passes on only its window's: its first output waits for
        the beats before its window (``window_offset``), then it streams (``Kernel.fill``). O(1)."""
        fill = self.fill(layer.geometry, layer.folding)
        c = layer.config
        beats = math.ceil(c["H"] * c["W"] * c["C"] / layer.folding.pe)
        offset = window_offset(c) / layer.folding.pe
        return replace(fill, needs=offset / max(1, beats), lead=offset, work=fill.work - offset)

    def ideal_cycles(self, g: Geometry, core: FpgaCore) -> float:
        """The lane share of each of its stages (a Split of k outputs reads its input k times)."""
        return super().ideal_cycles(g, core) * len(g.shape["windows"])

    def reference(self, config: dict, arrays: dict, inputs: list[np.ndarray], rows: int = 1) -> np.ndarray:
        c = config
        x = inputs[0].reshape(c["H"], c["W"], c["C"])
        kept = reference.slice_window(x, *(c[k] for k in WINDOW_MEMBERS))
        return reference.requant(kept, zx=c["ZX"], m=c["M"], s=c["S"], zy=c["ZY"], lo=c["LO"],
                                 hi=c["HI"]).reshape(-1)

    def lower(self, ctx: LayerContext, op: Op, shape: dict) -> list[Layer]:
        """One layer per output: its window and the rescale of the input to that output's
        QuantizeLinear (``fpgaplace.hw.lowering``)."""
        x = ctx.source(op, op.inputs[0])
        return [ctx.rescale(op, x, ctx.sink(op, t), self.name, {"H": shape["H"], "W": shape["W"], "C": shape["C"],
                                                                 **window})
                for t, window in zip([t for t in op.outputs if t], shape["windows"], strict=True)]

    # ---- HLS ----

    def output_size(self, config: dict[str, int], arrays: dict[str, np.ndarray], rows: int = 1) -> int:
        return config["HN"] * config["WN"] * config["CN"]

    # ---- RTL ----

    def window_geometry(self, c: dict[str, Any]) -> Geometry:
        """The geometry of a one-sample Slice with the config members ``c`` (NCHW, ``H``/``W`` 1
        for vectors), made as the placement makes it."""
        x = (1, c["C"], c["H"], c["W"])
        ends = [c["C0"] + c["CN"], c["H0"] + (c["HN"] - 1) * c["SH"] + 1, c["W0"] + (c["WN"] - 1) * c["SW"] + 1]
        attrs = {"starts": [c["C0"], c["H0"], c["W0"]], "ends": ends, "axes": [1, 2, 3], "steps": [1, c["SH"], c["SW"]]}
        return probe(self, "Slice", attrs, ["x"], {"x": x, "y": (1, c["CN"], c["HN"], c["WN"])})

    def rtl(self, config: dict[str, Any], arrays: dict[str, Any], fold: Folding, top: str, model_cycles: int,
            macs_per_dsp: int = 1, core: FpgaCore | None = None) -> RtlUnit:
        """PE channels a beat in, the kept beats out, each requantized by a constant multiplier."""
        c = int_members(config)
        pe = fold.pe
        if any(c[k] % pe for k in ("C", "C0", "CN")):
            raise FpgaplaceError(f"rtl {top}: PE={pe} must divide C={c['C']}, C0={c['C0']} and CN={c['CN']}")
        check_int8_members(c, ("ZX", "ZY"), self.name)
        rq = const_requant(f"{top}_requantize", [("a", 10, c["M"])], c["S"], c["ZY"], c["LO"], c["HI"])
        values = c | {"name": top, "PE": pe, "rq": rq, "CB": c["C"] // pe, "CB_BITS": index_bits(c["C"] // pe + 1),
                      "W_BITS": index_bits(c["W"] + 1), "H_BITS": index_bits(c["H"] + 1),
                      "SW_BITS": index_bits(c["SW"] + 1), "SH_BITS": index_bits(c["SH"] + 1)}
        return RtlUnit("rtl/slice.v.j2", values, {}, ((PORT_IN, pe, c["H"] * c["W"] * c["C"]),),
                       (PORT_OUT, pe, c["HN"] * c["WN"] * c["CN"]))
