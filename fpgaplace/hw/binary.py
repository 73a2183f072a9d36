"""Elementwise ops of two int8 activations (ONNX Mul, Sub, Max, Min of a QDQ model, and an Add the
Add kernel refuses for its broadcast: ``add_broadcast``), one operand broadcast as numpy does: the
same shape, one value per channel (``x[N,C,H,W] * s[N,C,1,1]``, a squeeze-excite gate) or one value
per pixel (``x[N,C,H,W] * m[N,1,H,W]``, a spatial gate).

Integer semantics (``fpgaplace.hw.reference.binary``), with ``dx = SX * (x - ZX)`` and
``dg = SG * (g - ZG)`` for the full operand ``x`` and the other operand ``g`` (signs -1 for the
subtracted operand of a Sub):

* ``mul``: ``requantize(dx * dg, MX, S, ZY, LO, HI)``, ``MX * 2**-S ~ sx * sg / sy``
  (``quantize_multiplier``: one rounding of the exact product, as QLinearMul's float path does up
  to float32 rounding);
* ``sub`` (and ``add`` semantics): ``requantize2(dx, MX, dg, MG, S, ...)`` with one shift shared by
  ``sx / sy`` and ``sg / sy``, as the Add kernel;
* ``max``/``min``: each operand requantized to the output scale with its clamp, then the larger
  (smaller): exact, since rounding and clamping are monotone, ``max(round(a), round(b)) =
  round(max(a, b))``.

The stage (C++ ``fp::binary``, RTL ``rtl/binary.v.j2``) reads the full operand ``x`` and the other
``g`` in stream order (channels last). Same shape: a beat of each a cycle, ``SIZE / L`` cycles.
Broadcast: ``g`` may be computed from ``x`` itself (the gate of a squeeze-excite block is known only
after the whole plane of ``x`` has gone by), so ``x`` waits in a plane buffer inside the stage
(``buffer_planes``: two planes per channel, one per pixel, of ``SIZE`` bytes), counted as its line
buffer (``Geometry.linebuffer_bytes``: BRAM in ``Kernel.resources``, on-chip bytes in
``Kernel.fixed_bytes``, so the cost model and the memory limit see it). Per channel,
the stage first reads the ``C`` gate values (``C / PE`` beats of PE) and then streams the plane:
``C / PE + SIZE / L`` cycles; per pixel, it reads one gate beat of MMV values with each pixel
group's first beat: ``SIZE / L`` cycles. A Mul's lane multiplier takes a DSP; the others take LUTs.
Geometry and cycles are O(1); the reference and the RTL values O(SIZE).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from fpgaplace.hw import reference
from fpgaplace.hw.elementwise import Elementwise
from fpgaplace.hw.geometry import Fill, Folding, Geometry, Resources, RtlUnit, Unsupported
from fpgaplace.hw.kernel import STAGE_DELAY, probe
from fpgaplace.hw.lowering import Layer, bounds, multipliers
from fpgaplace.hw.memory import memory_blocks
from fpgaplace.hw.rtl_values import PORT_OUT, check_int8_members, const_requant, index_bits, int_members
from fpgaplace.util.errors import FpgaplaceError

if TYPE_CHECKING:
    from fpgaplace.board.model import FpgaCore
    from fpgaplace.hw.lowering import LayerContext
    from fpgaplace.model.ir import Op

SAME, PER_CHANNEL, PER_PIXEL = 0, 1, 2  # MODE: how the second operand g lines up with x
OPS = ("add", "sub", "mul", "max", "min")  # OP codes of the C++ and RTL templates, in this order


def buffer_planes(mode: int) -> int:
    """Planes of x a stage of ``mode`` buffers: none for the same shape; per pixel one; per channel
    two, since the gate comes a gate-path latency after the plane's end (pool, convs) and the second
    plane keeps x's producer going meanwhile (with one, the stage would idle that latency every sample)."""
    return {SAME: 0, PER_CHANNEL: 2, PER_PIXEL: 1}[mode]


def broadcast_mode(shape: tuple[int, ...], out: tuple[int, ...]) -> int | None:
    """How an operand of ``shape`` broadcasts against the output ``out``: ``SAME``, ``PER_CHANNEL``
    (``[N, C, 1, 1]`` against NCHW, or ``[C, 1, 1]`` for one sample), ``PER_PIXEL`` (``[N, 1, H, W]``),
    else None (a gate shared by the samples of a batch included: the core reads one per sample)."""
    if tuple(shape) == tuple(out):
        return SAME
    if len(out) != 4:
        return None
    dims = (1,) * (4 - len(shape)) + tuple(shape) if len(shape) <= 4 else tuple(shape)
    if dims[0] != out[0]:  # every sample has its own gate
        return None
    if dims[1:] == (out[1], 1, 1):
        return PER_CHANNEL
    if dims[1:] == (1, *out[2:]):
        return PER_PIXEL
    return None


class Binary(Elementwise):
    """``op`` (one of ``OPS``) of two int8 activations, one possibly broadcast per channel or per
    pixel (see the module docstring), as the kernel ``name`` (``op`` unless given: an Add of the
    same shape is the Add kernel's, a broadcast one this kernel's ``add_broadcast``)."""

    template, inputs = "hls/ops/binary.j2", 2

    def __init__(self, op: str, name: str | None = None) -> None:
        if op not in OPS:
            raise ValueError(f"binary kernel: op {op!r}; expected one of {', '.join(OPS)}")
        self.op = op
        self.name = name or op

    # ---- geometry and cost ----

    def check(self, op: Op, shapes: list[tuple[int, ...]], out: tuple[int, ...]) -> Unsupported | None:
        modes = [broadcast_mode(s, out) for s in shapes]
        if None in modes or modes.count(SAME) == 0:
            return Unsupported(f"{op.op_type} of {shapes} to {out}: expected the same shape, or one operand "
                               "broadcast per channel [N,C,1,1] or per pixel [N,1,H,W]")
        return None

    def geometry(self, op: Op, graph) -> Geometry | Unsupported:
        """``Elementwise.geometry`` plus MODE, SWAP (the full operand is the op's second input) and
        the plane buffer a broadcast needs (``linebuffer_bytes``)."""
        g = super().geometry(op, graph)
        if not isinstance(g, Geometry):
            return g
        out = graph.tensors[op.outputs[0]].shape
        shapes = [graph.tensors[t].shape for t in op.inputs if t and t not in graph.params]
        modes = [broadcast_mode(s, out) for s in shapes]
        swap = int(modes[0] != SAME)
        mode = modes[1 - swap]
        g.shape.update({"MODE": mode, "SWAP": swap, "C": g.channels})
        buffer = buffer_planes(mode) * g.stream_elements
        return Geometry(g.kernel, g.pixels, g.channels, 1, g.stream_elements, g.row,
                        linebuffer_bytes=buffer, shape=g.shape)

    def gate_width(self, g: Geometry, fold: Folding) -> int:
        """Elements per beat of the second operand: the lanes (same shape), PE channels (per
        channel) or MMV pixels (per pixel)."""
        return {SAME: fold.pe * fold.mmv, PER_CHANNEL: fold.pe, PER_PIXEL: fold.mmv}[g.shape["MODE"]]

    def cycles(self, g: Geometry, fold: Folding) -> int:
        """The lane rule over the plane, plus the ``C / PE`` gate beats a per-channel stage reads
        before the plane's first output."""
        gate = g.channels // fold.pe if g.shape["MODE"] == PER_CHANNEL else 0
        return super().cycles(g, fold) + gate

    def fill(self, g: Geometry, fold: Folding) -> Fill:
        """A per-channel stage (squeeze-excite) holds x's plane until its gate has come whole (the
        gate follows the plane's end), then streams the plane: it needs all its inputs, and the
        plane's beats follow the gate's last; other modes stream (``Kernel.fill``)."""
        if g.shape["MODE"] != PER_CHANNEL:
            return super().fill(g, fold)
        gate, cycles = g.channels // fold.pe, self.cycles(g, fold)
        rest = cycles - gate + STAGE_DELAY
        return Fill(needs=1.0, lead=gate, reading=gate, first=STAGE_DELAY, work=rest, tail=rest)

    def resources(self, g: Geometry, fold: Folding, core: FpgaCore | None = None, resident: bool = True) -> Resources:
        """The lane rules (the plane buffer in ``_memory``) plus one DSP a lane for a Mul's 10 x
        10-bit product."""
        base = super().resources(g, fold, core, resident)
        return Resources(fold.pe * fold.mmv if self.op == "mul" else 0, *base.as_tuple()[1:])

    def _memory(self, g: Geometry, fold: Folding, core: FpgaCore | None, resident: bool) -> tuple[int, int, int]:
        """The plane buffer as one FIFO of PE x MMV lanes a word (how the RTL builds it and yosys
        maps it): ``memory_blocks`` of its width and depth."""
        lanes = fold.pe * fold.mmv
        return memory_blocks(g.activation_bits * lanes, g.linebuffer_bytes // lanes)

    def stream_widths(self, g: Geometry, fold: Folding, inputs: int) -> tuple[list[int], int]:
        lanes = fold.pe * fold.mmv
        return [lanes, self.gate_width(g, fold)], lanes

    def hls_config(self, config: dict[str, int], g: Geometry, fold: Folding) -> dict[str, int]:
        """The layer's members, its lanes ``L``, gate beat ``G``, plane buffer ``BUFFER`` (beats) and
        the op's code ``OP``."""
        lanes = fold.pe * fold.mmv
        return {**config, "OP": OPS.index(self.op), "L": lanes, "G": self.gate_width(g, fold),
                "BUFFER": buffer_planes(g.shape["MODE"]) * config["SIZE"] // lanes}

    def shape_geometry(self, shape: tuple[int, ...], other: tuple[int, ...] | None = None) -> Geometry:
        """The geometry of a one-sample op of an NCHW ``shape`` input and a second one of shape
        ``other`` (the same when None)."""
        op_type = {"sub": "Sub", "mul": "Mul", "max": "Max", "min": "Min", "add": "Add"}[self.op]
        return probe(self, op_type, {}, ["a", "b"], {"a": shape, "b": other or shape, "y": shape})

    # ---- integer layer and reference ----

    def lower(self, ctx: LayerContext, op: Op, shape: dict) -> Layer:
        """The layer of ``op``: inputs ``[x, g]`` (full operand first), the rescale of ``sx * sg /
        sy`` (mul) or of ``sx / sy`` and ``sg / sy`` with one shift (the others), signs of a Sub."""
        first, second = (ctx.source(op, t) for t in op.inputs[:2])
        x, g = (second, first) if shape["SWAP"] else (first, second)
        out = ctx.sink(op)
        y = out.tensor
        where = f"op '{op.name}'"
        if self.op == "mul":
            (m,), (s,) = multipliers(np.array([x.scale * g.scale / y.scale]), where)
            mx, mg = int(m), 0
        else:
            rx, rg = x.scale / y.scale, g.scale / y.scale
            (_,), (s,) = multipliers(np.array([max(rx, rg)]), where)
            mx, mg = round(rx * 2 ** int(s)), round(rg * 2 ** int(s))
        sx, sg = (1, 1) if self.op != "sub" else ((-1, 1) if shape["SWAP"] else (1, -1))
        lo, hi = bounds(ctx.index, out.activations, y.scale, y.zero_point)
        size = shape["SIZE"] // ctx.batch()
        config = {"SIZE": size, "C": shape["C"], "MODE": shape["MODE"], "ZX": x.zero_point, "MX": mx, "SX": sx,
                  "ZG": g.zero_point, "MG": mg, "SG": sg, "S": int(s), "ZY": y.zero_point, "LO": lo, "HI": hi}
        return Layer(op.name, self.name, [x.name, g.name], y.name, config)

    def reference(self, config: dict, arrays: dict, inputs: list[np.ndarray], rows: int = 1) -> np.ndarray:
        """The int8 output of one sample from ``x`` (SIZE elements) and ``g`` (SIZE, C or SIZE / C)
        in stream order: ``g`` spread to x's elements, then ``reference.binary``."""
        c = config
        x, g = inputs[0].reshape(-1), inputs[1].reshape(-1)
        index = np.arange(x.size)
        spread = {SAME: index, PER_CHANNEL: index % c["C"], PER_PIXEL: index // c["C"]}[int(c["MODE"])]
        return reference.binary(self.op, x, g[spread], zx=c["ZX"], mx=c["MX"], sx=c["SX"], zg=c["ZG"],
                                mg=c["MG"], sg=c["SG"], s=c["S"], zy=c["ZY"], lo=c["LO"], hi=c["HI"])

    # ---- RTL ----

    def rtl(self, config: dict[str, Any], arrays: dict[str, Any], fold: Folding, top: str, model_cycles: int,
            macs_per_dsp: int = 1, core: FpgaCore | None = None) -> RtlUnit:
        """``rtl/binary.v.j2``: E elements of x a beat and EG of g (the folding's lanes and gate
        beat), x's ``buffer_planes`` in a FIFO of SIZE / E words each when g is broadcast."""
        c = int_members(config)
        check_int8_members(c, ("ZX", "ZG", "ZY"), self.name)
        size, channels, mode = c["SIZE"], c["C"], c["MODE"]
        elems = fold.pe * fold.mmv
        gate = {SAME: elems, PER_CHANNEL: fold.pe, PER_PIXEL: fold.mmv}[mode]
        if size % elems or channels % fold.pe or (fold.mmv > 1 and fold.pe != channels):
            raise FpgaplaceError(f"rtl {top}: PE={fold.pe} x MMV={fold.mmv} lanes must divide SIZE={size} and "
                                 f"PE the C={channels} channels (MMV > 1 only with PE = C)")
        gate_length = {SAME: size, PER_CHANNEL: channels, PER_PIXEL: size // channels}[mode]
        beats, planes = size // elems, buffer_planes(mode)
        values = c | {"name": top, "op": self.op, "E": elems, "EG": gate, "BEATS": beats,
                      "BEAT_BITS": index_bits(beats), "GATE_BEATS": gate_length // gate,
                      "GATE_BITS": index_bits(gate_length // gate), "PLANES": planes,
                      "PLANE_BITS": index_bits(planes * beats), "PIXEL_BEATS": max(1, channels // elems),
                      "rq": self._requantizers(c, top)}
        return RtlUnit("rtl/binary.v.j2", values, {}, (("s0_axis", elems, size), ("s1_axis", gate, gate_length)),
                       (PORT_OUT, elems, size))

    def _requantizers(self, c: dict[str, int], top: str) -> list[dict[str, Any]]:
        """The constant requantizers (``const_requant``): of the product (mul), of both operands
        in one sum (sub, add), or of each operand alone (max, min)."""
        if self.op == "mul":
            return [const_requant(f"{top}_rq", [("p", 18, c["MX"])], c["S"], c["ZY"], c["LO"], c["HI"])]
        if self.op in ("add", "sub"):
            return [const_requant(f"{top}_rq", [("a", 10, c["MX"]), ("b", 10, c["MG"])], c["S"], c["ZY"], c["LO"],
                                  c["HI"])]
        return [const_requant(f"{top}_rq{k}", [("a", 10, m)], c["S"], c["ZY"], c["LO"], c["HI"])
                for k, m in enumerate((c["MX"], c["MG"]))]

