"""MatMul of two int8 activations (ONNX MatMul of a QDQ model whose second operand is not a
constant): ``Y[h] = A[h] @ B[h]`` for ``A [H, M, K]``, ``B [H, K, N]``, the heads ``H`` (every
axis before the last two, batch included) a batch dimension; attention's ``Q Kᵀ`` (B is the
output of a Transpose, which runs as its own reorder stage, ``fpgaplace.hw.reorder``) and
``softmax(.) V``.

Integer semantics (``matmul_int8``), with zero points ``ZA``, ``ZB`` and ``MQ * 2**-SQ ~ sa * sb
/ sy`` (``quantize_multiplier``)::

    y[h, m, n] = requantize(sum_k (a[h, m, k] - ZA) * (b[h, k, n] - ZB), MQ, SQ, ZY, LO, HI)

the float QDQ model's ``(sa (a - ZA)) @ (sb (b - ZB))`` quantized at ``sy``, up to the float32
rounding of onnxruntime's product: within 1 LSB of it. ``|a - ZA|, |b - ZB| <= 255``, so the sum
stays below ``K * 2**16`` (int32 for ``K < 2**15``).

Stream order: both operands and the output go by rows (the last axis innermost), head after
head. The stage folds like dense (PE output columns x SIMD reduction elements a cycle), and both
operands of a head are buffered whole: ``B`` because every output row reads all of it, ``A``
because a head's two operands may arrive in either order (``Q`` straight from its projection
while ``Kᵀ`` still fills the reorder buffer, or ``V`` long before the softmax's rows), so the stage
takes beats of both streams as they come (``A`` SIMD elements a beat, ``B`` PE) and never stalls a
producer that a shared fork feeds. Per head: ``max(M K / SIMD, K N / PE)`` load cycles, then
``M * N/PE * K/SIMD`` compute cycles (``cycles``), the buffers ``M K + K N`` bytes
(``Geometry.linebuffer_bytes``: BRAM in ``resources``, on-chip bytes in ``fixed_bytes``, so the
cost model and the memory limit see them). A's buffer is one bank of SIMD bytes a word; B's is
SIMD banks of PE bytes (row k of B in bank ``k mod SIMD``), so one cycle reads the SIMD x PE
operands it multiplies. DSPs: a MAC lane multiplies two 9-bit offsets (``a - ZA`` by ``b - ZB``);
on a DSP48E2 the two lanes of a column pair share ``a - ZA`` in one 27 x 9 multiplier
(``(b1 << 18) + b0``, as dense's WP486 packing), so ``ceil(PE / 2) * SIMD`` DSPs; the one
requantizer multiplies by the constant ``MQ`` in shift-and-add LUTs (no DSP). Geometry, cycles
and resources are O(1); the reference is O(H M N K).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from fpgaplace.board.model import BRAM36_BYTES
from fpgaplace.hw.geometry import Fill, Folding, Geometry, Resources, RtlUnit, Unsupported
from fpgaplace.hw.kernel import (
    DOT_FF_BASE,
    DOT_FF_PER_LANE,
    DOT_LUT_BASE,
    DOT_LUT_PER_LANE,
    Kernel,
    activation_inputs,
    macs_per_dsp,
    probe,
    tensor_shape,
    unit_fill,
)
from fpgaplace.hw.lowering import Layer, bounds, multipliers
from fpgaplace.hw.memory import memory_blocks
from fpgaplace.hw.quant import requantize
from fpgaplace.hw.rtl_values import PORT_OUT, check_int8_members, const_requant, index_bits, int_members, signed_bits
from fpgaplace.util.errors import FpgaplaceError

if TYPE_CHECKING:
    from fpgaplace.board.model import FpgaCore
    from fpgaplace.hw.lowering import LayerContext
    from fpgaplace.model.ir import Op, OpGraph

OFFSET_MAGNITUDE = 255  # largest |a - ZA| (or |b - ZB|) of int8 values and zero points
REQUANT_LUTS = 400  # the constant requantizer: a shift-and-add multiplier, rounding and clamp
MAX_REDUCTION = (2**31 - 1) // OFFSET_MAGNITUDE**2  # K whose sum still fits int32


def dot_width(k: int) -> int:
    """Signed bits of a sum of ``k`` products of two 9-bit offsets (at most ``k * 255**2``)."""
    return signed_bits(k * OFFSET_MAGNITUDE**2)


class MatMul(Kernel):
    """``[H, M, K] x [H, K, N]`` of two activations, both operands of a head buffered."""

    name, template, uses_dsp = "matmul", "hls/ops/matmul.j2", True

    def geometry(self, op: Op, graph: OpGraph) -> Geometry | Unsupported:
        acts = activation_inputs(op, graph)
        if op.op_type != "MatMul" or len(acts) != 2 or acts != list(op.inputs[:2]):
            return Unsupported("not a MatMul of two activations")
        shapes = [tensor_shape(graph, t) for t in (*op.inputs[:2], op.outputs[0])]
        if any(s is None for s in shapes):
            return Unsupported("unknown shapes")
        return self.shapes_geometry(*shapes)  # type: ignore[arg-type]

    def shapes_geometry(self, a: tuple[int, ...], b: tuple[int, ...], y: tuple[int, ...]) -> Geometry | Unsupported:
        """The geometry of ``a @ b = y`` (equal head axes, no broadcast), or why not. O(rank)."""
        if not 2 <= len(a) == len(b) == len(y) <= 4 or a[:-2] != b[:-2] or a[-1] != b[-2] \
                or y != (*a[:-1], b[-1]):
            return Unsupported(f"operands {list(a)} x {list(b)}: expected [..., M, K] x [..., K, N] with equal heads")
        if len(a) == 4 and a[1] > 1:
            return Unsupported(f"operands {list(a)}: a rank-4 tensor streams channels last, so heads on axis 1 "
                               "are not contiguous rows")
        (m, k), n = a[-2:], b[-1]
        if k > MAX_REDUCTION:
            return Unsupported(f"reduction K={k} overflows the int32 sum (at most {MAX_REDUCTION})")
        heads = math.prod(a[:-2])
        return Geometry(self.name, heads * m, n, k, stream_elements=heads * max(m * k, k * n, m * n),
                        linebuffer_bytes=m * k + k * n, macs=heads * m * n * k,
                        shape={"HEADS": heads, "M": m, "K": k, "N": n})

    def config_geometry(self, config: dict[str, Any]) -> Geometry:
        """The geometry of one sample of a lowered layer's HEADS, M, K, N."""
        h, m, k, n = (int(config[key]) for key in ("HEADS", "M", "K", "N"))
        return probe(self, "MatMul", {}, ["a", "b"], {"a": (h, m, k), "b": (h, k, n), "y": (h, m, n)})

    # ---- cost ----

    def cycles(self, g: Geometry, fold: Folding) -> int:
        """Per head: the load of both buffers (A at SIMD, B at PE elements a beat, side by side),
        then ``M * N/PE * K/SIMD`` MAC steps."""
        s = g.shape
        m, k, n = s["M"], s["K"], s["N"]
        load = max(m * k // fold.simd, k * n // fold.pe)
        return s["HEADS"] * (load + m * (n // fold.pe) * (k // fold.simd))

    def fill(self, g: Geometry, fold: Folding) -> Fill:
        """A head's operands whole in their buffers before its outputs (``unit_fill``, a head a
        unit): the load, then one fold (K/SIMD steps) to the first PE outputs; all M rows' steps
        follow the last operand beat."""
        s = g.shape
        load = max(s["M"] * s["K"] // fold.simd, s["K"] * s["N"] // fold.pe)
        steps = s["M"] * (s["N"] // fold.pe) * (s["K"] // fold.simd)
        return unit_fill(self.cycles(g, fold), s["HEADS"], load, s["K"] // fold.simd, steps)

    def fill_factor(self, g: Geometry) -> float:
        """How much longer than its MACs a head takes for loading its buffers, at one lane:
        ``1 + max(M K, K N) / (M N K)`` (about ``1 + 1 / min(M, N)`` at any balanced folding)."""
        s = g.shape
        return 1 + max(s["M"] * s["K"], s["K"] * s["N"]) / (s["M"] * s["N"] * s["K"])

    def ideal_cycles(self, g: Geometry, core: FpgaCore) -> float:
        """Its share of the core's DSPs: ``MACs / (DSPs * macs_per_dsp)`` (no requantizer DSPs),
        times ``fill_factor``."""
        per_dsp = macs_per_dsp(core, g.lane_bits)
        if per_dsp == 0:
            return super().ideal_cycles(g, core)
        return g.macs / (core.dsp * per_dsp) * self.fill_factor(g)

    def requantizer_dsps(self, g: Geometry, fold: Folding, core: FpgaCore | None) -> int:
        """None: the per-tensor multiplier is a constant, built from shifts and adds."""
        return 0

    def buffer_blocks(self, g: Geometry, fold: Folding) -> tuple[int, int]:
        """(BRAM36, LUTRAM LUTs) of the two operand buffers (module docstring)."""
        s = g.shape
        a = memory_blocks(8 * fold.simd, s["M"] * s["K"] // fold.simd)
        b = memory_blocks(8 * fold.pe, s["K"] * s["N"] // (fold.pe * fold.simd))
        return a[0] + fold.simd * b[0], a[2] + fold.simd * b[2]

    def resources(self, g: Geometry, fold: Folding, core: FpgaCore | None = None, resident: bool = True) -> Resources:
        bram, lutram = self.buffer_blocks(g, fold)
        lanes = fold.lanes
        return Resources(self.dsps(g, fold, core), bram, 0,
                         DOT_LUT_BASE + DOT_LUT_PER_LANE * lanes + REQUANT_LUTS + lutram,
                         DOT_FF_BASE + DOT_FF_PER_LANE * lanes)

    def fixed_bytes(self, g: Geometry, core: FpgaCore | None = None) -> int:
        """The operand buffers, charged in whole BRAM36 blocks as they occupy them (byte-wide)."""
        blocks, _, _ = memory_blocks(8, g.linebuffer_bytes)
        return max(g.linebuffer_bytes, blocks * BRAM36_BYTES)

    # ---- integer layer and reference ----

    def lower(self, ctx: LayerContext, op: Op, shape: dict) -> Layer:
        """The layer of ``op``: inputs ``[a, b]``, ``sa * sb / sy`` as MQ, SQ, one head per
        HEADS of a sample."""
        a, b = (ctx.source(op, t) for t in op.inputs[:2])
        out = ctx.sink(op)
        if shape["HEADS"] % ctx.batch():
            raise FpgaplaceError(f"op '{op.name}': {shape['HEADS']} heads are not whole samples of a batch of "
                                 f"{ctx.batch()}; expected the batch on the operands' first axis")
        y = out.tensor
        (mq,), (sq,) = multipliers(np.array([a.scale * b.scale / y.scale]), f"op '{op.name}'")
        lo, hi = bounds(ctx.index, out.activations, y.scale, y.zero_point)
        config = {"HEADS": shape["HEADS"] // ctx.batch(), "M": shape["M"], "K": shape["K"], "N": shape["N"],
                  "ZA": a.zero_point, "ZB": b.zero_point, "MQ": int(mq), "SQ": int(sq), "ZY": y.zero_point,
                  "LO": lo, "HI": hi}
        return Layer(op.name, self.name, [a.name, b.name], y.name, config)

    def config_macs(self, config: dict[str, int], rows: int = 1) -> int:
        return config["HEADS"] * config["M"] * config["N"] * config["K"]

    def reference(self, config: dict, arrays: dict, inputs: list[np.ndarray], rows: int = 1) -> np.ndarray:
        return matmul_int8(inputs[0], inputs[1], **{key.lower(): int(config[key]) for key in CONFIG_MEMBERS})

    def output_size(self, config: dict[str, int], arrays: dict[str, np.ndarray], rows: int = 1) -> int:
        return config["HEADS"] * config["M"] * config["N"]

    # ---- HLS ----

    def stream_widths(self, g: Geometry, fold: Folding, inputs: int) -> tuple[list[int], int]:
        """A: SIMD elements of a row a beat; B: PE elements of a row; out: PE results."""
        return [fold.simd, fold.pe], fold.pe

    def hls_config(self, config: dict[str, int], g: Geometry, fold: Folding) -> dict[str, int]:
        return {**config, "PE": fold.pe, "SIMD": fold.simd}

    # ---- RTL ----

    def rtl(self, config: dict[str, Any], arrays: dict[str, Any], fold: Folding, top: str, model_cycles: int,
            macs_per_dsp: int = 1, core: FpgaCore | None = None) -> RtlUnit:
        """``rtl/matmul.v.j2``: the two buffers, PE x SIMD MAC lanes (column pairs in one
        multiplier when ``macs_per_dsp == 2``), SIMD adder trees, PE accumulators and a constant
        requantizer a lane, an output FIFO."""
        c = int_members(config)
        check_int8_members(c, ("ZA", "ZB", "ZY"), self.name)
        h, m, k, n, pe, simd = c["HEADS"], c["M"], c["K"], c["N"], fold.pe, fold.simd
        if min(h, m, k, n, pe, simd) < 1 or n % pe or k % simd or macs_per_dsp not in (1, 2):
            raise FpgaplaceError(f"rtl {top}: PE={pe} must divide N={n}, SIMD={simd} K={k}, macs_per_dsp be 1 or 2")
        nf, sf = n // pe, k // simd
        dot = dot_width(k)
        values = c | {"name": top, "PE": pe, "SIMD": simd, "NF": nf, "SF": sf, "DOT_W": dot,
                      "PACKED_PE": pe // 2 * 2 if macs_per_dsp == 2 else 0, "macs_per_dsp": macs_per_dsp,
                      "A_DEPTH": m * sf, "B_DEPTH": (k // simd) * nf, "A_BITS": index_bits(m * sf + 1),
                      "B_BITS": index_bits(k * nf + 1), "M_BITS": index_bits(m), "NF_BITS": index_bits(nf),
                      "SF_BITS": index_bits(sf), "SIMD_BITS": index_bits(simd), "H_BITS": index_bits(h),
                      "rq": const_requant(f"{top}_rq", [("p", dot, c["MQ"])], c["SQ"], c["ZY"], c["LO"], c["HI"])}
        return RtlUnit("rtl/matmul.v.j2", values, {}, (("s0_axis", simd, h * m * k), ("s1_axis", pe, h * k * n)),
                       (PORT_OUT, pe, h * m * n))


CONFIG_MEMBERS = ("HEADS", "M", "K", "N", "ZA", "ZB", "MQ", "SQ", "ZY", "LO", "HI")


def matmul_int8(a: np.ndarray, b: np.ndarray, *, heads: int, m: int, k: int, n: int, za: int, zb: int, mq: int,
                sq: int, zy: int, lo: int = -128, hi: int = 127) -> np.ndarray:
    """The integer MatMul of the module docstring, int8 ``a`` (HEADS*M*K) and ``b`` (HEADS*K*N) in
    stream order to HEADS*M*N int8 outputs. O(HEADS M N K)."""
    x = np.asarray(a).astype(np.int64).reshape(heads, m, k) - za
    w = np.asarray(b).astype(np.int64).reshape(heads, k, n) - zb
    return requantize(np.matmul(x, w), mq, sq, zy, lo, hi).reshape(-1)
