"""Elementwise ops (ONNX Add, QLinearAdd; Relu, Clip and the requantizations a reshape or a
QDQ pair leaves): lane kernels moving PE x MMV elements a cycle.

Everything about the ops is here: geometry (an Add of a constant repeats it per channel or
for all, ``per_channel_period``), foldings and cycles (the lane rules of ``fpgaplace.hw.kernel``),
resources, the integer reference (``fpgaplace.hw.reference.add``/``requant``), the C++ config of
``hls/ops/add.j2``/``requant.j2`` and the RTL values (``rtl/elementwise.v.j2``: ``requantize2`` of
both inputs, or of one input and a ROM of the constant's offsets, or ``requantize`` of one, with
constant multipliers as shift-and-add sums). The RTL values are O(SIZE) at most.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from fpgaplace.hw import reference
from fpgaplace.hw.geometry import Folding, Geometry, Rom, RtlUnit, Unsupported
from fpgaplace.hw.kernel import Kernel, activation_inputs, probe, tensor_shape
from fpgaplace.hw.lowering import Layer, bounds
from fpgaplace.hw.qdq import check_scale
from fpgaplace.hw.quant import quantize_multiplier
from fpgaplace.hw.rtl_values import (
    PORT_OUT,
    check_int8_members,
    const_requant,
    index_bits,
    int_members,
    pack_lanes,
    signed_bits,
    smallest_divisor,
)
from fpgaplace.util.errors import FpgaplaceError

if TYPE_CHECKING:
    from fpgaplace.board.model import FpgaCore
    from fpgaplace.hw.lowering import LayerContext
    from fpgaplace.model.ir import Op, OpGraph


class Elementwise(Kernel):
    """A lane kernel over whole streams: the base of ``Add``, ``Requant`` and ``Concat``
    (``inputs``: the operands it takes, None for any number)."""

    uses_dsp = False
    inputs: int | None = None

    def constants(self, op: Op, graph: OpGraph) -> list[str]:
        """The constant operands it streams itself (none but an Add's)."""
        return []

    def check(self, op: Op, shapes: list[tuple[int, ...]], out: tuple[int, ...]) -> Unsupported | None:
        """Why it cannot run ``op`` with these input and output shapes, if it cannot."""
        return None

    def stage_channels(self, shapes: list[tuple[int, ...]], channels: int) -> int:
        """The channels PE folds (the output's ``channels``)."""
        return channels

    def geometry(self, op: Op, graph: OpGraph) -> Geometry | Unsupported:
        acts = activation_inputs(op, graph)
        shapes = [tensor_shape(graph, t) for t in acts]
        out = tensor_shape(graph, op.outputs[0])
        if out is None or any(s is None for s in shapes) or not acts:
            return Unsupported("unknown shapes")
        consts = self.constants(op, graph)
        if self.inputs is not None and len(acts) + len(consts) != self.inputs:
            return Unsupported(f"expected {self.inputs} input(s) of which at most one constant, got {len(acts)} "
                               f"activations and {len(consts)} constants")
        if op.op_type == "Clip" and any(t and t not in graph.params for t in op.inputs[1:]):
            return Unsupported("Clip bounds must be constant")
        reason = self.check(op, shapes, out)  # type: ignore[arg-type]
        if reason is not None:
            return reason
        period = per_channel_period(tensor_shape(graph, consts[0]), out) if consts else 0
        if period is None:
            return Unsupported("Add of a constant that is not one value per channel (or one in all)")
        channels = self.stage_channels(shapes, out[1] if len(out) >= 2 else out[0])  # type: ignore[arg-type]
        return lane_geometry(self.name, out, channels, {
            "CHANNELS": [s[1] if len(s) > 1 else s[0] for s in shapes], "CONST_PERIOD": period})

    def rtl(self, config: dict[str, Any], arrays: dict[str, Any], fold: Folding, top: str, model_cycles: int,
            macs_per_dsp: int = 1, core: FpgaCore | None = None) -> RtlUnit:
        """``rtl/elementwise.v.j2``, E elements a beat: the smallest divisor of SIZE whose beats
        fit in the model's cycles; the kernel's ``rtl_kind`` gives its requantizer and inputs."""
        c = int_members(config)
        size = c["SIZE"]
        elems = smallest_divisor(size, lambda d: size // d <= model_cycles)
        roms: dict[str, Rom] = {}
        kind, values, rq, inputs = self.rtl_kind(c, arrays, elems, top, roms)
        values = c | values | {"name": top, "kind": kind, "E": elems, "INPUTS": inputs, "rq": rq}
        return RtlUnit("rtl/elementwise.v.j2", values, roms, tuple((f"s{i}_axis", elems, size) for i in range(inputs)),
                       (PORT_OUT, elems, size))

    def rtl_kind(self, c: dict[str, int], arrays: dict[str, Any], elems: int, top: str,
                 roms: dict[str, Rom]) -> tuple[str, dict[str, Any], dict[str, Any], int]:
        """(template kind, extra values, requantizer values, input streams) of the RTL unit."""
        raise NotImplementedError


class Add(Elementwise):
    """Add of two streams, or of one and a constant that repeats per channel or for all."""

    name, template, inputs = "add", "hls/ops/add.j2", 2

    def constants(self, op: Op, graph: OpGraph) -> list[str]:
        return [t for t in op.inputs if t and t in graph.params]

    def check(self, op: Op, shapes: list[tuple[int, ...]], out: tuple[int, ...]) -> Unsupported | None:
        return Unsupported("Add with broadcasting") if any(s != out for s in shapes) else None

    def reference(self, config: dict, arrays: dict, inputs: list[np.ndarray], rows: int = 1) -> np.ndarray:
        c = config
        other = inputs[1] if len(inputs) > 1 else np.tile(arrays["b"], c["SIZE"] // arrays["b"].size)
        return reference.add(inputs[0], other.reshape(inputs[0].shape), za=c["ZA"], ma=c["MA"], zb=c["ZB"],
                             mb=c["MB"], s=c["S"], zy=c["ZY"], lo=c["LO"], hi=c["HI"])

    def lower(self, ctx: LayerContext, op: Op, shape: dict) -> Layer:
        """The layer of ``op``: its config members (and its constant) from the QDQ graph
        (``fpgaplace.hw.lowering``); one shift shared by ``sa / sy`` and ``sb / sy``."""
        constant = next((t for t in op.inputs if t and t in ctx.graph.params), None)
        a = ctx.source(op, next(t for t in op.inputs if t and t != constant))
        values = None
        if constant is None:
            b = ctx.source(op, next(t for t in op.inputs[1:] if t and t != a.name and t != op.inputs[0]))
        else:
            values, b = ctx.index.constant_int8(constant)
            check_scale(b.scale, f"op '{op.name}': constant '{constant}'")
        out = ctx.sink(op)
        y = out.tensor
        ra, rb = a.scale / y.scale, b.scale / y.scale
        _, s = quantize_multiplier(max(ra, rb))
        lo, hi = bounds(ctx.index, out.activations, y.scale, y.zero_point)
        config = {"SIZE": shape["SIZE"] // ctx.batch(), "ZA": a.zero_point, "MA": round(ra * 2**s),
                  "ZB": b.zero_point, "MB": round(rb * 2**s), "S": s, "ZY": y.zero_point, "LO": lo, "HI": hi}
        if values is None:
            return Layer(op.name, "add", [a.name, b.name], y.name, config)
        period = shape["CONST_PERIOD"]
        arrays = {"b": np.broadcast_to(values.reshape(-1), (period,)).astype(np.int8).copy()}
        return Layer(op.name, "add", [a.name], y.name, config, arrays)

    def shape_geometry(self, shape: tuple[int, ...], constant: tuple[int, ...] | None = None) -> Geometry:
        """The geometry of a one-sample Add of two NCHW ``shape`` inputs, or of one and a
        ``constant`` of that shape."""
        shapes = {"a": shape, "b": shape, "y": shape} | ({"b": constant} if constant else {})
        return probe(self, "Add", {}, ["a", "b"], shapes, ("b",) if constant else ())

    def rtl(self, config: dict[str, Any], arrays: dict[str, Any], fold: Folding, top: str, model_cycles: int,
            macs_per_dsp: int = 1, core: FpgaCore | None = None) -> RtlUnit:
        if int(config.get("CONST_PERIOD", 0)) and "b" not in arrays:
            raise FpgaplaceError(f"rtl {top}: an Add of a constant needs the constant (arrays lack b)")
        return super().rtl(config, arrays, fold, top, model_cycles, macs_per_dsp, core)

    def rtl_kind(self, c: dict[str, int], arrays: dict[str, Any], elems: int, top: str,
                 roms: dict[str, Rom]) -> tuple[str, dict[str, Any], dict[str, Any], int]:
        """``requantize2`` of both inputs, or of one input and a ROM of the constant's offsets."""
        check_int8_members(c, ("ZA", "ZB", "ZY"), self.name)
        if arrays and "b" in arrays:
            values, offset_bits = _constant_offsets(c, np.asarray(arrays["b"]), elems, top, roms)
            rq = const_requant(f"{top}_requantize", [("a", 10, c["MA"]), ("c", offset_bits, 1)], c["S"], c["ZY"],
                               c["LO"], c["HI"])
            return "add_const", values, rq, 1
        rq = const_requant(f"{top}_requantize", [("a", 10, c["MA"]), ("b", 10, c["MB"])], c["S"], c["ZY"], c["LO"],
                           c["HI"])
        return "add", {}, rq, 2


class Requant(Elementwise):
    """Requantization of one stream (ReLU, Clip, and a reshape or QDQ pair between two scales)."""

    name, template, inputs = "requant", "hls/ops/requant.j2", 1

    def reference(self, config: dict, arrays: dict, inputs: list[np.ndarray], rows: int = 1) -> np.ndarray:
        c = config
        return reference.requant(inputs[0].reshape(-1), zx=c["ZX"], m=c["M"], s=c["S"], zy=c["ZY"], lo=c["LO"],
                                 hi=c["HI"])

    def lower(self, ctx: LayerContext, op: Op, shape: dict) -> Layer:
        """The layer of ``op``: ``sx / sy`` and the activation's bounds (``fpgaplace.hw.lowering``)."""
        x = ctx.source(op, op.inputs[0])
        size = shape["SIZE"] // ctx.batch()
        return ctx.rescale(op, x, ctx.sink(op), "requant", {"SIZE": size})

    def shape_geometry(self, shape: tuple[int, ...], constant: tuple[int, ...] | None = None) -> Geometry:
        """The geometry of a one-sample Relu of an NCHW ``shape``."""
        return probe(self, "Relu", {}, ["a"], {"a": shape, "y": shape})

    def rtl_kind(self, c: dict[str, int], arrays: dict[str, Any], elems: int, top: str,
                 roms: dict[str, Rom]) -> tuple[str, dict[str, Any], dict[str, Any], int]:
        """``requantize`` of one input."""
        check_int8_members(c, ("ZX", "ZY"), self.name)
        return "requant", {}, const_requant(f"{top}_requantize", [("a", 10, c["M"])], c["S"], c["ZY"], c["LO"],
                                            c["HI"]), 1


def lane_geometry(kernel: str, out: tuple[int, ...], channels: int, shape: dict[str, Any]) -> Geometry:
    """The geometry of a lane stage writing the tensor ``out`` (NCHW, or channels last below rank
    4) with PE folding ``channels``; ``shape`` adds the kernel's members to SIZE and PIXELS. O(rank)."""
    size = math.prod(out)
    pixels = size // (out[1] if len(out) >= 2 else out[0])
    return Geometry(kernel, pixels, channels, 1, stream_elements=size, row=out[3] if len(out) == 4 else 1,
                    shape={"SIZE": size, "PIXELS": pixels, **shape})


def _constant_offsets(c: dict[str, int], constant: np.ndarray, elems: int, top: str,
                      roms: dict[str, Rom]) -> tuple[dict[str, Any], int]:
    """The ROM of an Add of a constant: ``(b - ZB) * MB`` of element ``k`` of a beat's lane, for
    the lcm(E, period) / E beat phases (the constant repeats every ``period`` elements); its
    template values and the offsets' bit width."""
    period = constant.size
    if period < 1 or c["SIZE"] % period:
        raise FpgaplaceError(f"rtl {top}: the constant's {period} values do not repeat evenly in SIZE={c['SIZE']}")
    words = math.lcm(elems, period) // elems
    offsets = (constant.astype(np.int64).reshape(-1) - c["ZB"]) * c["MB"]
    bits = signed_bits(int(np.abs(offsets).max()) if offsets.size else 0)
    lanes = [[int(offsets[(t * elems + j) % period]) for j in range(elems)] for t in range(words)]
    roms[f"{top}_offsets.mem"] = Rom([pack_lanes(word, bits) for word in lanes], bits * elems)
    return {"PERIOD": period, "WORDS": words, "WORD_BITS": index_bits(words), "OFF_W": bits,
            "offsets_file": f"{top}_offsets.mem"}, bits


def per_channel_period(constant: tuple[int, ...] | None, out: tuple[int, ...]) -> int | None:
    """How many values a broadcast constant repeats in stream order: 1 for one value, the channel
    count for one value per channel (``[C, 1, 1]`` against NCHW, ``[C]`` against the last axis of
    a tensor of rank 3 or less), the constant's size for one of a sample's trailing axes of a tensor
    of rank 3 or less (a ViT's position embedding ``[1, T, C]`` against ``[B, T, C]``); None for any
    other broadcast."""
    if constant is None:
        return None
    dims = list(constant)
    while dims and dims[0] == 1:
        dims.pop(0)
    if math.prod(dims) == 1:
        return 1
    if len(out) == 4:
        return out[1] if dims == [out[1], 1, 1] else None
    return math.prod(dims) if dims == list(out[len(out) - len(dims):]) and len(dims) < len(out) else None
