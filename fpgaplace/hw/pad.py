"""Constant padding (ONNX Pad, mode constant) of rows and pixels: the input's pixels, requantized
to the output's scale, inside a border of ``PT``/``PB`` rows and ``PL``/``PR`` pixels of one int8
value, the pad value quantized at the output's scale (the zero point for the default value 0).

Everything about the op is here: geometry (pads on H and W only, none negative; the pad value a
constant), foldings (PE channels of one pixel a cycle: MMV 1), cycles (the lane rule over the
output, the busiest stream: ``HO*WO*C/PE``), resources (the lane rules of ``fpgaplace.hw.kernel``
and an input FIFO of the longest run of border pixels, ``border_run``), the integer reference
(``fpgaplace.hw.reference.pad``), the C++ config of ``hls/ops/pad.j2`` and the RTL values
(``rtl/pad.v.j2``). O(1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from fpgaplace.hw import reference
from fpgaplace.hw.geometry import Folding, Geometry, RtlUnit, Unsupported
from fpgaplace.hw.kernel import Kernel, probe, tensor_shape
from fpgaplace.hw.qdq import qdq_index
from fpgaplace.hw.quant import quantize_float
from fpgaplace.hw.rtl_values import PORT_IN, PORT_OUT, check_int8_members, const_requant, index_bits, int_members
from fpgaplace.util.errors import FpgaplaceError

if TYPE_CHECKING:
    from fpgaplace.board.model import FpgaCore
    from fpgaplace.hw.lowering import Layer, LayerContext
    from fpgaplace.model.ir import Op, OpGraph

PAD_MEMBERS = ("PT", "PL", "PB", "PR")


def pad_amounts(op: Op, graph: OpGraph, rank: int) -> list[int] | Unsupported:
    """The ONNX pads of ``op`` (``[begin per axis..., end per axis...]``, every axis of a tensor of
    ``rank``): its constant ``pads`` input (with ``axes``, opset 18), else its ``pads`` attribute."""
    if len(op.inputs) > 1 and op.inputs[1]:
        index = qdq_index(graph.model) if graph.model is not None else None
        value = index.constant(op.inputs[1]) if index is not None else None
        if value is None:
            return Unsupported(f"Pad amounts '{op.inputs[1]}' are not a constant")
        pads = [int(v) for v in value.reshape(-1)]
        axes_input = op.inputs[3] if len(op.inputs) > 3 and op.inputs[3] else ""
        if axes_input:
            axes = index.constant(axes_input)
            if axes is None:
                return Unsupported(f"Pad axes '{axes_input}' are not a constant")
            full = [0] * (2 * rank)
            for k, axis in enumerate(int(a) % rank for a in axes.reshape(-1)):
                full[axis], full[rank + axis] = pads[k], pads[len(pads) // 2 + k]
            pads = full
    else:
        pads = [int(v) for v in op.attrs.get("pads", [])]
    if len(pads) != 2 * rank:
        return Unsupported(f"{len(pads)} Pad amounts for a tensor of {rank} axes")
    return pads


def pad_value(op: Op, graph: OpGraph) -> float | None:
    """The float pad value: the constant ``constant_value`` input (a DequantizeLinear of int8
    or a float constant), the ``value`` attribute (opset 2-10), or 0; None when not constant."""
    tensor = op.inputs[2] if len(op.inputs) > 2 else ""
    if not tensor:
        return float(op.attrs.get("value", 0.0))
    index = qdq_index(graph.model) if graph.model is not None else None
    if index is None:
        return None
    quantized = index.constant_int8(tensor)
    if quantized is not None:
        values, q = quantized
        return float((int(values.reshape(-1)[0]) - q.zero_point) * q.scale)
    value = index.constant(tensor)
    return float(value.reshape(-1)[0]) if value is not None and value.size == 1 else None


def border_run(shape: dict[str, int]) -> int:
    """Output pixels of the longest run without an input pixel: the bottom rows of a sample, the
    top rows of the next and the side pixels around them (an input FIFO this deep keeps the
    producer going while the border goes out)."""
    wo = shape["W"] + shape["PL"] + shape["PR"]
    return (shape["PT"] + shape["PB"]) * wo + shape["PL"] + shape["PR"]


class Pad(Kernel):
    """A border of constant rows and pixels around one stream."""

    name, template = "pad", "hls/ops/pad.j2"
    uses_dsp = False

    def geometry(self, op: Op, graph: OpGraph) -> Geometry | Unsupported:
        x = tensor_shape(graph, op.inputs[0]) if op.inputs else None
        out = tensor_shape(graph, op.outputs[0]) if op.outputs else None
        if x is None or out is None or len(x) != 4 or min(x) < 1:
            return Unsupported("only 4-D NCHW tensors of known shape")
        mode = str(op.attrs.get("mode", "constant"))
        if mode != "constant":
            return Unsupported(f"Pad mode {mode!r} (only constant runs on a core)")
        pads = pad_amounts(op, graph, 4)
        if isinstance(pads, Unsupported):
            return pads
        if any(pads[a] or pads[4 + a] for a in (0, 1)):
            return Unsupported("a Pad of the batch or channel axis")
        if any(p < 0 for p in pads):
            return Unsupported("a negative Pad (a crop)")
        if pad_value(op, graph) is None:
            return Unsupported("a Pad value that is not a constant")
        n, c, h, w = x
        shape = {"H": h, "W": w, "C": c, "PT": pads[2], "PL": pads[3], "PB": pads[6], "PR": pads[7]}
        ho, wo = h + pads[2] + pads[6], w + pads[3] + pads[7]
        if (ho, wo) != tuple(out[2:]):
            return Unsupported(f"output shape {out}, expected {(n, c, ho, wo)} from the pads")
        return Geometry(self.name, n * ho * wo, c, 1, stream_elements=n * ho * wo * c, row=wo,
                        linebuffer_bytes=border_run(shape) * c, shape=shape)

    def pixel_widths(self, g: Geometry, pe: int) -> tuple[int, ...]:
        """One output pixel a cycle."""
        return (1,)

    def reference(self, config: dict, arrays: dict, inputs: list[np.ndarray], rows: int = 1) -> np.ndarray:
        c = config
        inner = reference.requant(inputs[0].reshape(c["H"], c["W"], c["C"]), zx=c["ZX"], m=c["M"], s=c["S"],
                                  zy=c["ZY"], lo=c["LO"], hi=c["HI"])
        return reference.pad(inner, tuple(c[k] for k in PAD_MEMBERS), c["PAD"]).reshape(-1)

    def lower(self, ctx: LayerContext, op: Op, shape: dict) -> Layer:
        """The layer of ``op``: its pads, the rescale of its input to its output, and the pad
        value quantized at the output's scale and clamped by the activations after it."""
        x, out = ctx.source(op, op.inputs[0]), ctx.sink(op)
        layer = ctx.rescale(op, x, out, self.name, {k: shape[k] for k in ("H", "W", "C", *PAD_MEMBERS)})
        value = pad_value(op, ctx.graph)
        code = int(quantize_float(np.float32(value or 0.0), out.tensor.scale, out.tensor.zero_point))
        layer.config["PAD"] = min(max(code, layer.config["LO"]), layer.config["HI"])
        return layer

    # ---- HLS ----

    def output_size(self, config: dict[str, int], arrays: dict[str, np.ndarray], rows: int = 1) -> int:
        c = config
        return (c["H"] + c["PT"] + c["PB"]) * (c["W"] + c["PL"] + c["PR"]) * c["C"]

    # ---- RTL ----

    def pads_geometry(self, c: dict[str, Any]) -> Geometry:
        """The geometry of a one-sample Pad with the config members ``c``."""
        x = (1, c["C"], c["H"], c["W"])
        y = (1, c["C"], c["H"] + c["PT"] + c["PB"], c["W"] + c["PL"] + c["PR"])
        pads = [0, 0, c["PT"], c["PL"], 0, 0, c["PB"], c["PR"]]
        return probe(self, "Pad", {"mode": "constant", "pads": pads}, ["x"], {"x": x, "y": y})

    def rtl(self, config: dict[str, Any], arrays: dict[str, Any], fold: Folding, top: str, model_cycles: int,
            macs_per_dsp: int = 1, core: FpgaCore | None = None) -> RtlUnit:
        """PE channels a beat; an inner beat is taken from the input and requantized, a border
        beat is the pad value."""
        c = int_members(config)
        pe = fold.pe
        if c["C"] % pe:
            raise FpgaplaceError(f"rtl {top}: PE={pe} must divide C={c['C']}")
        check_int8_members(c, ("ZX", "ZY", "PAD"), self.name)
        rq = const_requant(f"{top}_requantize", [("a", 10, c["M"])], c["S"], c["ZY"], c["LO"], c["HI"])
        ho, wo = c["H"] + c["PT"] + c["PB"], c["W"] + c["PL"] + c["PR"]
        values = c | {"name": top, "PE": pe, "rq": rq, "CB": c["C"] // pe, "HO": ho, "WO": wo,
                      "SKID_BITS": index_bits(border_run(c) * c["C"] // pe + 1),
                      "CB_BITS": index_bits(c["C"] // pe + 1), "W_BITS": index_bits(wo + 1),
                      "H_BITS": index_bits(ho + 1), "PAD_BITS": f"8'h{c['PAD'] & 0xFF:02x}"}
        return RtlUnit("rtl/pad.v.j2", values, {}, ((PORT_IN, pe, c["H"] * c["W"] * c["C"]),),
                       (PORT_OUT, pe, ho * wo * c["C"]))
