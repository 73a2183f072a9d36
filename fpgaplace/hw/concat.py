"""Concatenation in stream order (ONNX Concat, QLinearConcat): PE elements a cycle from each
input in turn, each requantized to the output scale by its own constant multiplier.

In stream order every concat a core runs is the same pattern: ``ROWS`` times, a run of ``C_0``
elements of input 0, then ``C_1`` of input 1, ... (``stream_parts``). A channel concat (axis 1) of
NCHW tensors streamed channels last has a row per pixel and the channels as runs; a concat along
any axis but the batch of a tensor of rank 2 or 3 (streamed in natural order, e.g. a detector
head's ``Concat(axis=2)`` of ``[N, C, A_i]``) has a row per index of the axes before it and the
elements from the axis on as runs.

Everything about the op is here: geometry (``Concat.geometry``: PE divides every input's run),
foldings (one pixel a cycle: MMV 1), cycles and resources (the lane rules of
``fpgaplace.hw.kernel``), the integer reference (``fpgaplace.hw.reference.concat``), the C++
configs of ``hls/ops/concat.j2`` (n inputs as n - 1 chained two-input concats,
``hls_part_configs``) and the RTL values (``rtl/concat.v.j2``: a constant input, a class token, is a
ROM of its requantized values). O(inputs), O(constant size) for a constant input.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from fpgaplace.hw import reference
from fpgaplace.hw.elementwise import Elementwise
from fpgaplace.hw.geometry import Folding, Geometry, Rom, RtlUnit, Unsupported
from fpgaplace.hw.kernel import activation_inputs, probe, tensor_shape
from fpgaplace.hw.lowering import Layer, bounds, multipliers
from fpgaplace.hw.permutation import stream_order
from fpgaplace.hw.quant import quantize_multiplier
from fpgaplace.hw.rtl_values import PORT_OUT, check_int8_members, const_requant, index_bits, int_members
from fpgaplace.util.errors import FpgaplaceError

if TYPE_CHECKING:
    from fpgaplace.board.model import FpgaCore
    from fpgaplace.hw.lowering import LayerContext
    from fpgaplace.model.ir import Op, OpGraph

IDENTITY = quantize_multiplier(1.0)  # the rescale of a chain's partial result, already at the output scale


def stream_parts(shapes: list[tuple[int, ...]], axis: int) -> tuple[int, list[int]] | None:
    """(rows of one sample, each input's run of elements a row) of a concat of ``shapes`` along
    ``axis`` (>= 0) in stream order, or None where it is not such a pattern: a 4-D tensor streams
    channels last, so only axis 1 (a row per pixel); a tensor of rank 2 or 3 streams in natural
    order, so any axis but the batch (a row per index of the axes before it). O(rank x inputs)."""
    rank = len(shapes[0])
    if axis == 0 or (rank == 4 and axis != 1) or rank not in (2, 3, 4):
        return None
    if rank == 4:
        return shapes[0][2] * shapes[0][3], [s[1] for s in shapes]
    return math.prod(shapes[0][1:axis]), [math.prod(s[axis:]) for s in shapes]


def constant_parts(arrays: dict[str, np.ndarray], pixels: int) -> dict[int, np.ndarray]:
    """Each constant input of a concat layer by its position: its int8 values of one sample (a
    run of ``channels[j]`` elements for each of the ``pixels`` rows), from ``arrays``' ``constant``
    and ``constant_at``. O(constant size)."""
    at = [int(j) for j in arrays.get("constant_at", ())]
    sizes = [pixels * int(arrays["channels"][j]) for j in at]
    ends = np.cumsum([0, *sizes])
    return {j: np.asarray(arrays["constant"])[ends[k]:ends[k + 1]] for k, j in enumerate(at)}


def with_constants(arrays: dict[str, np.ndarray], inputs: list[np.ndarray], pixels: int) -> list[np.ndarray]:
    """The concat's inputs in order: the streamed ``inputs`` (one sample each, in stream order)
    with the constant inputs in their places (``constant_parts``)."""
    streamed = iter(inputs)
    constants = constant_parts(arrays, pixels)
    return [constants[j] if j in constants else next(streamed) for j in range(len(arrays["channels"]))]


class Concat(Elementwise):
    """Concatenation of any number of inputs, as runs of each input in turn (``stream_parts``)."""

    name, template, inputs = "concat", "hls/ops/concat.j2", None

    def check(self, op: Op, shapes: list[tuple[int, ...]], out: tuple[int, ...]) -> Unsupported | None:
        if stream_parts(shapes, int(op.attrs.get("axis", 1)) % len(out)) is None:
            return Unsupported("only a concat of runs in stream order: axis 1 of a 4-D tensor (channels), or any "
                               "axis but the batch of a tensor of rank 2 or 3")
        return None

    def geometry(self, op: Op, graph: OpGraph) -> Geometry | Unsupported:
        """The lane geometry with a pixel per row of the stream pattern and PE folding the runs'
        common divisor (``stream_parts``)."""
        g = super().geometry(op, graph)
        if isinstance(g, Unsupported):
            return g
        out = tensor_shape(graph, op.outputs[0])
        shapes = [tensor_shape(graph, t) for t in op.inputs if t]
        if any(s is None for s in shapes):
            return Unsupported("unknown shapes")
        if len(activation_inputs(op, graph)) < len(shapes) and out[0] != 1:  # type: ignore[index]
            return Unsupported("a concat of a constant at a batch other than 1 (the constant is one sample's)")
        rows, parts = stream_parts(shapes, int(op.attrs.get("axis", 1)) % len(out))  # type: ignore[arg-type,misc]
        pixels = out[0] * rows  # type: ignore[index]
        return replace(g, pixels=pixels, channels=math.gcd(*parts), shape={**g.shape, "PIXELS": pixels,
                                                                            "CHANNELS": parts})

    def pixel_widths(self, g: Geometry, pe: int) -> tuple[int, ...]:
        """One pixel a cycle: a beat of PE channels comes from one input."""
        return (1,)

    def reference(self, config: dict, arrays: dict, inputs: list[np.ndarray], rows: int = 1) -> np.ndarray:
        c = config
        pixels = c["PIXELS"]
        xs = [x.reshape(pixels, -1) for x in with_constants(arrays, inputs, pixels)]
        y = reference.concat([x.reshape(pixels, 1, -1) for x in xs], zxs=arrays["zero_points"].tolist(),
                             ms=arrays["mult"].tolist(), ss=arrays["shift"].tolist(), zy=c["ZY"], lo=c["LO"],
                             hi=c["HI"])
        return y.reshape(-1)

    def lower(self, ctx: LayerContext, op: Op, shape: dict) -> Layer:
        """The layer of ``op``: its config members and arrays from the QDQ graph (``fpgaplace.hw.lowering``)."""
        names = [t for t in op.inputs if t]
        constants = {j: ctx.index.constant_int8(t) for j, t in enumerate(names) if t in ctx.graph.params}
        xs = [constants[j][1] if j in constants else ctx.source(op, t) for j, t in enumerate(names)]
        out = ctx.sink(op)
        y = out.tensor
        lo, hi = bounds(ctx.index, out.activations, y.scale, y.zero_point)
        mult, shift = multipliers(np.array([x.scale / y.scale for x in xs]), f"op '{op.name}'")
        config = {"PIXELS": shape["PIXELS"] // ctx.batch(), "ZY": y.zero_point, "LO": lo, "HI": hi}
        arrays = {"channels": np.array(shape["CHANNELS"], dtype=np.int64), "zero_points":
                  np.array([x.zero_point for x in xs], dtype=np.int64), "mult": mult.astype(np.int64),
                  "shift": shift.astype(np.int64)}
        if constants:  # a class token: streamed by a constant stage of the core (codegen) in its place
            arrays["constant_at"] = np.array(sorted(constants), dtype=np.int64)
            arrays["constant"] = np.concatenate([stream_order(constants[j][0]) for j in sorted(constants)])
        return Layer(op.name, "concat", [x.name for j, x in enumerate(xs) if j not in constants], y.name, config,
                     arrays)
    def turn_elements(self, layer: Layer) -> int:
        """A turn reads one row's run of every input (``stream_parts``): a pixel's channels on a
        channel concat, the whole sample where the runs are whole tensors. O(inputs)."""
        return int(np.asarray(layer.arrays["channels"]).sum())

    # ---- HLS ----

    def output_size(self, config: dict[str, int], arrays: dict[str, np.ndarray], rows: int = 1) -> int:
        return config["PIXELS"] * int(arrays["channels"].sum())

    def hls_part_configs(self, config: dict[str, int], arrays: dict[str, np.ndarray], fold: Folding) -> list[dict]:
        """The configs of the chain of two-input concats that joins the inputs in order: part
        ``j`` joins the result so far (already at the output scale: identity rescale) and input
        ``j + 1``."""
        a = arrays
        width = fold.pe
        left_c, left_z, left_m, left_s = int(a["channels"][0]), int(a["zero_points"][0]), int(a["mult"][0]), int(
            a["shift"][0])
        parts = []
        for j in range(1, len(a["channels"])):
            parts.append({"PIXELS": config["PIXELS"], "C0": left_c, "C1": int(a["channels"][j]), "Z0": left_z,
                          "M0": left_m, "S0": left_s, "Z1": int(a["zero_points"][j]), "M1": int(a["mult"][j]),
                          "S1": int(a["shift"][j]), "ZY": config["ZY"], "LO": config["LO"], "HI": config["HI"],
                          "L": width})
            left_c, left_z = left_c + int(a["channels"][j]), config["ZY"]
            left_m, left_s = IDENTITY
        return parts

    # ---- RTL ----

    def channels_geometry(self, pixels: tuple[int, ...], channels: list[int]) -> Geometry:
        """The geometry of a one-sample channel Concat of NCHW inputs ``(1, C_i, *pixels)``
        (``pixels`` empty for 2-D ``[1, C_i]`` inputs)."""
        names = [f"x{i}" for i in range(len(channels))]
        shapes = {name: (1, ch, *pixels) for name, ch in zip(names, channels, strict=True)}
        shapes["y"] = (1, sum(channels), *pixels)
        return probe(self, "Concat", {"axis": 1}, names, shapes)

    def rtl(self, config: dict[str, Any], arrays: dict[str, Any], fold: Folding, top: str, model_cycles: int,
            macs_per_dsp: int = 1, core: FpgaCore | None = None) -> RtlUnit:
        """PE elements a beat, each input requantized to the output scale by its own constant
        multiplier; ``arrays`` as layers.npz holds them: ``channels``, ``zero_points``, ``mult``,
        ``shift`` per input, and ``constant_at``/``constant`` for constant inputs (a class token):
        those are requantized here and read from a ROM of ``PIXELS * C_j / PE`` words in their
        turn, so only the streamed inputs are ports (``s0_axis``... in operand order)."""
        c = int_members(config)
        missing = [a for a in ("channels", "zero_points", "mult", "shift") if a not in arrays]
        if missing:
            raise FpgaplaceError(f"rtl {top}: arrays lack {', '.join(missing)}")
        channels = [int(v) for v in np.asarray(arrays["channels"]).reshape(-1)]
        pe, pixels = fold.pe, c["PIXELS"]
        if any(ch % pe for ch in channels):
            raise FpgaplaceError(f"rtl {top}: PE={pe} must divide every input's channels {channels}")
        check_int8_members(c, ("ZY",), "concat")
        constants, roms = constant_parts(arrays, pixels), {}
        parts, ports = [], []
        for i, (ch, zx, m, shift) in enumerate(zip(channels, *(np.asarray(arrays[a]).reshape(-1) for a in
                                                              ("zero_points", "mult", "shift")), strict=True)):
            if not -128 <= int(zx) <= 127:
                raise FpgaplaceError(f"rtl {top}: input {i}'s zero point {zx} is not int8")
            part = {"index": i, "Z": int(zx), "BEATS": ch // pe}
            if i in constants:  # its output values, one word of PE a beat
                y = reference.requant(np.asarray(constants[i], dtype=np.int8), zx=int(zx), m=int(m), s=int(shift),
                                      zy=c["ZY"], lo=c["LO"], hi=c["HI"])
                words = pixels * ch // pe
                roms[f"{top}_const{i}.mem"] = Rom(y.reshape(words, pe))
                part |= {"rom": f"{top}_const{i}.mem", "WORDS": words, "ADDR_BITS": index_bits(words)}
            else:
                part |= {"port": len(ports), "rq": const_requant(f"{top}_requantize{i}", [("a", 10, int(m))],
                                                                  int(shift), c["ZY"], c["LO"], c["HI"])}
                ports.append((f"s{len(ports)}_axis", pe, pixels * ch))
            parts.append(part)
        if not ports:
            raise FpgaplaceError(f"rtl {top}: a concat of constants only; expected at least one streamed input")
        values = c | {"name": top, "PE": pe, "INPUTS": len(parts), "CHANNELS": channels, "parts": parts,
                      "SEL_BITS": index_bits(len(parts)), "BEAT_BITS": index_bits(max(ch // pe for ch in channels))}
        return RtlUnit("rtl/concat.v.j2", values, roms, tuple(ports), (PORT_OUT, pe, pixels * sum(channels)))
