"""Nearest upsampling at integer scales (ONNX Resize with mode nearest, Upsample): each input row
gives ``RH`` output rows of each pixel repeated ``RW`` times (the x2 of YOLO necks and FPNs).

Resize maps an output index to an input one through its ``coordinate_transformation_mode`` and
``nearest_mode``; a core replicates pixels, so it takes a Resize only where that mapping is
``o // scale`` on both spatial axes for the op's sizes (``replicates``: asymmetric with floor,
PyTorch's export; half_pixel with round_prefer_floor at x2, ONNX's default; ...), and refuses
the others with the index where they differ. The batch and channel scales must be 1.

Everything about the op is here: geometry, foldings (PE channels of one pixel a cycle: MMV 1),
cycles (the lane rule over the output, the busiest stream: ``HO*WO*C/PE``; the next input row
is read into a second buffer while the current one is repeated), resources (the lane rules plus the row buffers: two
of ``W*C`` elements), the integer reference (``fpgaplace.hw.reference.upsample``), the C++ config
of ``hls/ops/upsample.j2`` and the RTL values (``rtl/upsample.v.j2``). The check is O(HO + WO).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from fpgaplace.hw import reference
from fpgaplace.hw.geometry import Folding, Geometry, RtlUnit, Unsupported
from fpgaplace.hw.kernel import Kernel, probe, tensor_shape
from fpgaplace.hw.qdq import qdq_index
from fpgaplace.hw.rtl_values import PORT_IN, PORT_OUT, check_int8_members, const_requant, index_bits, int_members
from fpgaplace.util.errors import FpgaplaceError

if TYPE_CHECKING:
    from fpgaplace.board.model import FpgaCore
    from fpgaplace.hw.lowering import Layer, LayerContext
    from fpgaplace.model.ir import Op, OpGraph

TRANSFORMS = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn")
ROUNDINGS = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
MAX_FACTOR = 64  # largest upsampling factor a core takes (each input beat is written this many times squared)


def source_coordinate(o: int, scale: float, size: int, out_size: int, transform: str) -> float:
    """The input coordinate ONNX Resize gives output index ``o`` of an axis of ``size`` resized
    to ``out_size`` at ``scale`` (the spec's coordinate_transformation_mode formulas)."""
    if transform == "half_pixel":
        return (o + 0.5) / scale - 0.5
    if transform == "pytorch_half_pixel":
        return (o + 0.5) / scale - 0.5 if out_size > 1 else 0.0
    if transform == "align_corners":
        return o * (size - 1) / (out_size - 1) if out_size > 1 else 0.0
    if transform == "asymmetric":
        return o / scale
    return (o + 0.5) / scale  # tf_half_pixel_for_nn


def nearest_index(coordinate: float, rounding: str, size: int) -> int:
    """The input index ``nearest_mode`` picks for ``coordinate``, clamped to the axis."""
    if rounding == "floor":
        index = math.floor(coordinate)
    elif rounding == "ceil":
        index = math.ceil(coordinate)
    else:
        low = math.floor(coordinate)
        if coordinate - low == 0.5:
            index = low if rounding == "round_prefer_floor" else low + 1
        else:
            index = math.floor(coordinate + 0.5)
    return min(max(index, 0), size - 1)


def replicates(size: int, repeat: int, scale: float, transform: str, rounding: str) -> int | None:
    """The first output index of an axis where Resize's nearest mapping differs from pixel
    replication ``o // repeat``, or None where it is replication throughout. O(size * repeat)."""
    out_size = size * repeat
    return next((o for o in range(out_size)
                 if nearest_index(source_coordinate(o, scale, size, out_size, transform), rounding, size)
                 != o // repeat), None)


def resize_scales(op: Op, graph: OpGraph, x: tuple[int, ...], out: tuple[int, ...]) -> list[float]:
    """The per-axis scales Resize computes with: its constant ``scales`` input (or an Upsample's),
    else the output over the input size (a ``sizes`` input)."""
    index = qdq_index(graph.model) if graph.model is not None else None
    candidates = [op.inputs[2] if op.op_type == "Resize" and len(op.inputs) > 2 else "",
                  op.inputs[1] if op.op_type == "Upsample" and len(op.inputs) > 1 else ""]
    for tensor in candidates:
        value = index.constant(tensor) if tensor and index is not None else None
        if value is not None and value.size == len(x):
            return [float(v) for v in value.reshape(-1)]
    if op.op_type == "Upsample" and op.attrs.get("scales"):
        return [float(v) for v in op.attrs["scales"]]
    return [o / i for o, i in zip(out, x, strict=True)]


class Upsample(Kernel):
    """Nearest upsampling by integer factors RH x RW, through a buffer of one input row."""

    name, template = "upsample", "hls/ops/upsample.j2"
    uses_dsp = False

    def geometry(self, op: Op, graph: OpGraph) -> Geometry | Unsupported:
        x = tensor_shape(graph, op.inputs[0]) if op.inputs else None
        out = tensor_shape(graph, op.outputs[0]) if op.outputs else None
        if x is None or out is None or len(x) != 4 or len(out) != 4 or min(x) < 1:
            return Unsupported("only 4-D NCHW tensors of known shape")
        reason = self.refusal(op, graph, x, out)
        if reason:
            return Unsupported(reason)
        n, c, h, w = x
        ho, wo = out[2], out[3]
        shape = {"H": h, "W": w, "C": c, "RH": ho // h, "RW": wo // w}
        return Geometry(self.name, n * ho * wo, c, 1, stream_elements=n * ho * wo * c, row=wo,
                        linebuffer_bytes=2 * w * c, shape=shape)

    def refusal(self, op: Op, graph: OpGraph, x: tuple[int, ...], out: tuple[int, ...]) -> str:
        """Why a core cannot replicate pixels for this Resize / Upsample ("" when it can)."""
        mode = str(op.attrs.get("mode", "nearest"))
        if mode != "nearest":
            return f"{op.op_type} mode {mode!r} (only nearest runs on a core)"
        if out[:2] != x[:2]:
            return "a Resize of the batch or channel axis"
        if any(o % i or o < i for o, i in zip(out[2:], x[2:], strict=True)):
            return f"a Resize from {x[2]}x{x[3]} to {out[2]}x{out[3]} (only integer upsampling factors)"
        if any(o // i > MAX_FACTOR for o, i in zip(out[2:], x[2:], strict=True)):
            return f"an upsampling factor above {MAX_FACTOR} ({x[2]}x{x[3]} to {out[2]}x{out[3]})"
        transform = "asymmetric" if op.op_type == "Upsample" else str(
            op.attrs.get("coordinate_transformation_mode", "half_pixel"))
        rounding = "floor" if op.op_type == "Upsample" else str(op.attrs.get("nearest_mode", "round_prefer_floor"))
        if transform not in TRANSFORMS or rounding not in ROUNDINGS:
            return f"coordinate_transformation_mode {transform!r} with nearest_mode {rounding!r}"
        scales = resize_scales(op, graph, x, out)
        for axis in (2, 3):
            first = replicates(x[axis], out[axis] // x[axis], scales[axis], transform, rounding)
            if first is not None:
                return (f"{transform} with {rounding} at scale {scales[axis]:g} does not repeat pixels (axis {axis}, "
                        f"output index {first})")
        return ""

    def pixel_widths(self, g: Geometry, pe: int) -> tuple[int, ...]:
        """One output pixel a cycle."""
        return (1,)

    def reference(self, config: dict, arrays: dict, inputs: list[np.ndarray], rows: int = 1) -> np.ndarray:
        c = config
        y = reference.upsample(inputs[0].reshape(c["H"], c["W"], c["C"]), c["RH"], c["RW"])
        return reference.requant(y, zx=c["ZX"], m=c["M"], s=c["S"], zy=c["ZY"], lo=c["LO"], hi=c["HI"]).reshape(-1)

    def lower(self, ctx: LayerContext, op: Op, shape: dict) -> Layer:
        """The layer of ``op``: its repeat factors and the rescale of its input to its output."""
        x = ctx.source(op, op.inputs[0])
        return ctx.rescale(op, x, ctx.sink(op), self.name, {k: shape[k] for k in ("H", "W", "C", "RH", "RW")})

    # ---- HLS ----

    def output_size(self, config: dict[str, int], arrays: dict[str, np.ndarray], rows: int = 1) -> int:
        return config["H"] * config["RH"] * config["W"] * config["RW"] * config["C"]

    # ---- RTL ----

    def repeat_geometry(self, c: dict[str, Any]) -> Geometry:
        """The geometry of a one-sample Upsample with the config members ``c``."""
        x, y = (1, c["C"], c["H"], c["W"]), (1, c["C"], c["H"] * c["RH"], c["W"] * c["RW"])
        return probe(self, "Upsample", {"mode": "nearest", "scales": [1.0, 1.0, c["RH"], c["RW"]]}, ["x"],
                     {"x": x, "y": y})

    def rtl(self, config: dict[str, Any], arrays: dict[str, Any], fold: Folding, top: str, model_cycles: int,
            macs_per_dsp: int = 1, core: FpgaCore | None = None) -> RtlUnit:
        """PE channels a beat; input rows go to two row buffers of W*C/PE beats (the row being
        repeated and the next, read ahead so the producer never waits for the copies)."""
        c = int_members(config)
        pe = fold.pe
        if c["C"] % pe:
            raise FpgaplaceError(f"rtl {top}: PE={pe} must divide C={c['C']}")
        check_int8_members(c, ("ZX", "ZY"), self.name)
        rq = const_requant(f"{top}_requantize", [("a", 10, c["M"])], c["S"], c["ZY"], c["LO"], c["HI"])
        beats = c["W"] * c["C"] // pe
        values = c | {"name": top, "PE": pe, "rq": rq, "CB": c["C"] // pe, "CB_BITS": index_bits(c["C"] // pe + 1),
                      "ROW_BEATS": beats, "ADDR_BITS": index_bits(2 * beats + 1), "H_BITS": index_bits(c["H"] + 1),
                      "RH_BITS": index_bits(c["RH"] + 1), "RW_BITS": index_bits(c["RW"] + 1)}
        size = c["H"] * c["W"] * c["C"]
        return RtlUnit("rtl/upsample.v.j2", values, {}, ((PORT_IN, pe, size),),
                       (PORT_OUT, pe, size * c["RH"] * c["RW"]))
