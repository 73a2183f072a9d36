"""The LSTM cell state in a 16-bit fixed point: ``c_t = f * c_{t-1} + i * g`` as one stage.

Why: unrolled (``fpgaplace.model.passes.recurrent``), an LSTM step's cell update is three int8
ops of onnxruntime's QDQ model, ``Q(Q(f * c) + Q(i * g))``: three roundings a step, each to the
int8 step of a tensor whose range is the cell state's, so over a long sequence the state drifts
from the float one (a forget gate near 1 keeps the rounding errors; an ``i * g`` under half a step
is lost). Here the state a step hands to the next is an int16 of scale ``s_c / 128`` (``s_c``: the
int8 scale the QDQ model gives that step's ``c``; ``WIDE_SHIFT`` = 7 bits finer, and the largest
int8 value of that scale, ``255 * s_c`` from the zero point, still fits int16), updated with one
rounding. The int8 ``c`` the step's ``tanh(c)`` table reads (and anything else reading it) is the
wide state narrowed by a shift, at the QDQ model's scale and zero point.

Why int16 and not wider: the stream carries int8 elements, so the wide state travels as two bytes
an element (little-endian: the low byte first); 16 bits keep every product in int64 (``|f - zf| *
|w| < 2**24`` times a 31-bit multiplier) and two bytes is the smallest carrier over 8 bits.

Integer semantics, per element (``cell_state``), with ``w`` the int16 state:

* MODE 0 (the first step, no previous state): ``w = clip16(rhe(mb * (i - zi) * (g - zg) * 2**-S))``;
* MODE 1: ``w = clip16(rhe((ma * (f - zf) * w_prev + mb * (i - zi) * (g - zg)) * 2**-S))`` with
  ``ma * 2**-S ~ s_f * s_w_prev / s_w`` and ``mb * 2**-S ~ s_i * s_g / s_w`` (one shift, as ``requantize2``);
* MODE 2 (narrow): ``c = clip(rhe(w * 2**-7) + zc, LO, HI)``, the QDQ model's int8 ``c``.

rhe: round half to even, as every requantization of ``fpgaplace.hw.quant``. This is not onnxruntime's
QDQ arithmetic (which rounds three times in int8): the model's outputs differ from it by a bound
``csim`` measures, and sit closer to the float LSTM. Measured (``scripts/bench_recurrent.py
--cell-bits 8|16 --samples 300``, zcu104): one LSTM of 32 steps x 16, RMS error against the float
model 0.0089 (int8) -> 0.0078 (int16), up to 37 LSB from the QDQ model; the CRNN 0.0068 -> 0.0063,
4 LSB, top-1 against the float model 98.75% -> 98.83% of 2,400 steps.

``widen_cell_states`` rewrites a core's lowered layers (when the model asks, ``CELL_BITS_KEY``):
each LSTM step's ``_fc``/``_ig`` Mul and ``_c`` Add layers (the recurrent pass's names; the step's
``_ig`` alone for the first) become one MODE 0/1 stage and one MODE 2 stage, where the previous
step's state is wide on the same core. Cost: a lane stage (``SIZE / L`` cycles), two multipliers a
lane for MODE 1 (one for MODE 0), none to narrow. HLS: ``hls/ops/lstm_cell.j2`` (``fp::lstm_cell_first``,
``_step``, ``_narrow``); RTL ``rtl/lstm_cell.v.j2``. O(layers).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from fpgaplace.hw.elementwise import Elementwise
from fpgaplace.hw.geometry import Folding, Geometry, Resources, RtlUnit
from fpgaplace.hw.lowering import Layer, multipliers
from fpgaplace.hw.quant import shift_round_clip
from fpgaplace.hw.rtl_values import PORT_OUT, check_int8_members, const_requant, int_members, smallest_divisor
from fpgaplace.util.errors import FpgaplaceError

if TYPE_CHECKING:
    from fpgaplace.board.model import FpgaCore
    from fpgaplace.hw.qdq import QdqIndex

CELL_BITS_KEY = "fpgaplace.lstm_cell_bits"
"""Model ``metadata_props`` key of the LSTM cell state's bits: ``8`` (the QDQ model's int8, the
default) or ``16`` (the wide state). Opt-in for now: the outputs then differ from onnxruntime's
QDQ model by more than its own rounding (its int8 state drifts; see the module docstring).
``quantize`` and ``compile --lstm-cell-bits`` write it (``set_cell_bits``)."""
CELL_BITS = (8, 16)
WIDE_SHIFT = 7  # the wide state's scale is the int8 state's over 2**7
FIRST, STEP, NARROW = 0, 1, 2  # MODE
INT16_MIN, INT16_MAX = -(2**15), 2**15 - 1


def cell_bits(model) -> int:
    """The LSTM cell state's bits ``model`` (an ONNX model, or None) asks for (``CELL_BITS_KEY``;
    8 where it says nothing); a one-line error for any other value. O(metadata)."""
    values = [p.value.strip() for p in model.metadata_props if p.key == CELL_BITS_KEY] if model is not None else []
    if not values:
        return 8
    if values[-1] not in {str(bits) for bits in CELL_BITS}:
        raise FpgaplaceError(f"model metadata {CELL_BITS_KEY}={values[-1]!r}: expected one of "
                             f"{', '.join(map(str, CELL_BITS))} (the LSTM cell state's bits)")
    return int(values[-1])


def wide_cells(model) -> bool:
    """Whether ``model`` (an ONNX model, or None) asks for the 16-bit cell state (``cell_bits``)."""
    return cell_bits(model) == 16


def set_cell_bits(model, bits: int) -> None:
    """Write ``bits`` (one of ``CELL_BITS``) as ``model``'s ``CELL_BITS_KEY``, in place; a one-line
    error for any other value. O(metadata)."""
    if bits not in CELL_BITS:
        raise FpgaplaceError(f"lstm_cell_bits: expected one of {', '.join(map(str, CELL_BITS))}, got {bits!r}")
    kept = [p for p in model.metadata_props if p.key != CELL_BITS_KEY]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    model.metadata_props.add(key=CELL_BITS_KEY, value=str(bits))


def wide_bytes(w: np.ndarray) -> np.ndarray:
    """int16 values as the stream carries them: two int8 elements each, the low byte first."""
    return np.asarray(w, dtype="<i2").reshape(-1).view(np.int8)


def wide_values(b: np.ndarray) -> np.ndarray:
    """The int16 values of a stream of byte pairs (``wide_bytes``' inverse)."""
    return np.ascontiguousarray(np.asarray(b, dtype=np.int8).reshape(-1)).view("<i2").astype(np.int64)


def cell_state(config: dict[str, int], inputs: list[np.ndarray]) -> np.ndarray:
    """One sample's output (see the module docstring): byte pairs of the int16 state (MODE 0, 1)
    or the int8 ``c`` (MODE 2). O(SIZE)."""
    c = config
    if c["MODE"] == NARROW:
        return shift_round_clip(wide_values(inputs[0]), WIDE_SHIFT, c["ZY"], c["LO"], c["HI"])
    *state, i, g = inputs
    product = (i.reshape(-1).astype(np.int64) - c["ZI"]) * (g.reshape(-1).astype(np.int64) - c["ZG"]) * c["MB"]
    if c["MODE"] == STEP:
        f, w = state
        product = product + (f.reshape(-1).astype(np.int64) - c["ZF"]) * wide_values(w) * c["MA"]
    return wide_bytes(shift_round_clip(product, c["S"], 0, INT16_MIN, INT16_MAX, dtype=np.int16))


class LstmCell(Elementwise):
    """The three stages of ``widen_cell_states`` (MODE 0, 1, 2), lanes of PE elements."""

    name, template, inputs = "lstm_cell", "hls/ops/lstm_cell.j2", None

    def stream_widths(self, g: Geometry, fold: Folding, inputs: int) -> tuple[list[int], int]:
        """Int8 operands of L elements a beat; the wide state of 2L (two bytes an element)."""
        lanes = fold.pe * fold.mmv
        mode = g.shape["MODE"]
        ins = {FIRST: [lanes, lanes], STEP: [lanes, 2 * lanes, lanes, lanes], NARROW: [2 * lanes]}[mode]
        return ins, lanes if mode == NARROW else 2 * lanes

    def resources(self, g: Geometry, fold: Folding, core: FpgaCore | None = None, resident: bool = True) -> Resources:
        """The lane rules plus a multiplier a lane for each product (``i * g``; ``f * w``)."""
        base = super().resources(g, fold, core, resident)
        products = {FIRST: 1, STEP: 2, NARROW: 0}[g.shape["MODE"]]
        return Resources(products * fold.pe * fold.mmv, *base.as_tuple()[1:])

    def output_size(self, config: dict[str, int], arrays: dict[str, np.ndarray], rows: int = 1) -> int:
        return config["SIZE"] * (1 if config["MODE"] == NARROW else 2)

    def reference(self, config: dict, arrays: dict, inputs: list[np.ndarray], rows: int = 1) -> np.ndarray:
        return cell_state(config, inputs)

    def rtl(self, config: dict[str, Any], arrays: dict[str, Any], fold: Folding, top: str, model_cycles: int,
            macs_per_dsp: int = 1, core: FpgaCore | None = None) -> RtlUnit:
        """``rtl/lstm_cell.v.j2``, E elements a beat (the smallest divisor of SIZE whose beats fit in
        the model's cycles): the products in multipliers, the rescale a ``const_requant`` of 16
        output bits (MODE 0, 1) or the narrowing one of 8 (MODE 2). O(1)."""
        c = int_members(config)
        size, mode = c["SIZE"], c["MODE"]
        elems = smallest_divisor(size, lambda d: size // d <= model_cycles)
        if mode == NARROW:
            check_int8_members(c, ("ZY",), self.name)
            rq = const_requant(f"{top}_narrow", [("w", 16, 1)], WIDE_SHIFT, c["ZY"], c["LO"], c["HI"])
            bits, out = [16], 8
        else:
            check_int8_members(c | {"LO": 0, "HI": 0}, ("ZI", "ZG", *(("ZF",) if mode == STEP else ())), self.name)
            terms = [("kept", 26, c["MA"])] if mode == STEP else []
            rq = const_requant(f"{top}_cell", [*terms, ("fresh", 20, c["MB"])], c["S"], 0, INT16_MIN, INT16_MAX,
                               out_bits=16)
            bits, out = ([8, 16, 8, 8] if mode == STEP else [8, 8]), 16
        values = c | {"name": top, "E": elems, "IN_BITS": bits, "OUT_BITS": out, "rq": rq}
        ports = tuple((f"s{k}_axis", elems * b // 8, size * b // 8) for k, b in enumerate(bits))
        return RtlUnit("rtl/lstm_cell.v.j2", values, {}, ports, (PORT_OUT, elems * out // 8, size * out // 8))


def wide_anchors(layers: list, anchors: dict[str, list[np.ndarray]]) -> dict[str, list[np.ndarray]]:
    """The wide states as onnxruntime's QDQ model would hand them on: each narrowing stage's input
    from its output's anchor (per run, stream order), ``(c - ZY) * 2**7``, so that a cell stage
    checked alone runs on onnxruntime's int8 state (``fpgaplace.sim.csim.LayerCheck``). O(states)."""
    return {layer.inputs[0]: [wide_bytes((part.astype(np.int64) - layer.config["ZY"]) << WIDE_SHIFT)
                              for part in anchors[layer.output]]
            for layer in layers if layer.kernel == "lstm_cell" and layer.config["MODE"] == NARROW
            and layer.output in anchors}


def _scale(index: QdqIndex, tensor: str) -> tuple[float, int]:
    """(scale, zero point) of the int8 tensor ``tensor`` (a QuantizeLinear's output)."""
    node = index.producer.get(tensor)
    params = index.qparams(node) if node is not None and node.op_type == "QuantizeLinear" else None
    if params is None:
        raise ValueError(f"tensor '{tensor}': not the output of a QuantizeLinear with constant parameters")
    return float(params[0].reshape(-1)[0]), int(params[1].reshape(-1)[0])


def _cell_layers(index: QdqIndex, op: str, state: tuple[str, float] | None, f: str | None, i: str, g: str,
                 c: Layer, geometry: Geometry) -> tuple[Layer, Layer, tuple[str, float]]:
    """The wide stage (MODE 1 with ``state`` (its wide tensor and scale) and ``f``, else 0) and the
    narrowing stage writing ``c``'s output, and the new wide state."""
    c_scale, c_zero = _scale(index, c.output)
    wide_scale = c_scale / 2**WIDE_SHIFT
    (si, zi), (sg, zg) = _scale(index, i), _scale(index, g)
    ratios = [si * sg / wide_scale]
    if state is not None:
        sf, zf = _scale(index, f)
        ratios.append(sf * state[1] / wide_scale)
    (_,), (shift,) = multipliers(np.array([max(ratios)]), f"op '{op}': the wide cell state")
    ms = [round(r * 2 ** int(shift)) for r in ratios]
    size = c.config["SIZE"]
    config = {"SIZE": size, "MODE": FIRST, "ZI": zi, "ZG": zg, "MB": ms[0], "S": int(shift)}
    ins = [i, g]
    if state is not None:
        config |= {"MODE": STEP, "ZF": zf, "MA": ms[1]}
        ins = [f, state[0], i, g]
    wide = f"{c.output}_wide"
    cell = Layer(op, "lstm_cell", ins, wide, config)
    lo, hi = c.config["LO"], c.config["HI"]
    narrow = Layer(op, "lstm_cell", [wide], c.output, {"SIZE": size, "MODE": NARROW, "ZY": c_zero, "LO": lo, "HI": hi})
    for layer, mode in ((cell, config["MODE"]), (narrow, NARROW)):
        layer.geometry = replace(geometry, kernel="lstm_cell", shape={**geometry.shape, "MODE": mode})
        layer.resident = c.resident
        layer.widths = {"weights": None, "inputs": [8] * len(layer.inputs), "output": 8, "output_stage": None}
    return cell, narrow, (wide, wide_scale)


def _step_of(name: str, suffix: str) -> str | None:
    """The step prefix of a recurrent-pass op name ``<prefix>_d<d>_t<t>_<suffix>``, or None."""
    return name[: -len(suffix)] if name.endswith(f"_{suffix}") and "_t" in name else None


def widen_cell_states(layers: list[Layer], index: QdqIndex, geometries: dict[int, Geometry]) -> list[Layer]:
    """A core's layers with each LSTM step's cell update in the wide fixed point (the module
    docstring); ``geometries``: each layer's geometry by position. Steps whose previous state is
    not wide on this core (another core made it) stay int8. O(layers)."""
    made = {layer.output: k for k, layer in enumerate(layers)}
    readers: dict[str, list[int]] = {}
    for k, layer in enumerate(layers):
        for t in layer.inputs:
            readers.setdefault(t, []).append(k)
    wide: dict[str, tuple[str, float]] = {}  # int8 c -> its wide state (tensor, scale)
    replaced: dict[int, list[Layer]] = {}
    for k, layer in enumerate(layers):
        step = _step_of(layer.op, "ig") if layer.kernel == "mul" else None
        if step is not None and any(_step_of(layers[r].op, "fc") for r in readers.get(layer.output, [])):
            i, g = layer.inputs  # the first step: its c is i * g
            *pair, wide[layer.output] = _cell_layers(index, layer.op, None, None, i, g, layer, geometries[k])
            replaced[k] = pair
            continue
        if layer.kernel != "add" or _step_of(layer.op, "c") is None or len(layer.inputs) != 2:
            continue
        parts = [made.get(t) for t in layer.inputs]
        if None in parts or any(len(readers[t]) != 1 for t in layer.inputs):
            continue
        fc, ig = sorted(parts, key=lambda p: 0 if _step_of(layers[p].op, "fc") else 1)
        if layers[fc].kernel != "mul" or layers[ig].kernel != "mul" or not _step_of(layers[fc].op, "fc"):
            continue
        f, state = layers[fc].inputs
        if state not in wide:
            f, state = state, f
        if state not in wide:
            continue
        i, g = layers[ig].inputs
        *pair, wide[layer.output] = _cell_layers(index, layer.op, wide[state], f, i, g, layer, geometries[k])
        replaced |= {fc: [], ig: [], k: pair}
    return [new for k, layer in enumerate(layers) for new in replaced.get(k, [layer])]
