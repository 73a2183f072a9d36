"""Lowering: what a kernel needs to turn an op of a QDQ graph into an integer layer.

A ``Layer`` is one dataflow stage of a core: its kernel, C++ config members (shape and
quantization), int8/int32 arrays, and once folded its folding, cycles and resources. Each kernel
makes its own (``Kernel.lower``, in the kernel's module) from a ``LayerContext``: the int8
tensors around the op (``source``, ``sink``), the activation bounds and the multipliers of
their rescaling (``fpgaplace.hw.quant``): conv/dense ``sx * sw[c] / sy`` per output channel,
pools ``sx / (sy * window)``, add one shift shared by ``sa / sy`` and ``sb / sy``, requantize and
concat ``sx / sy`` per input. O(weights) per op.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fpgaplace.hw import threshold
from fpgaplace.hw.geometry import Folding, Geometry, Resources
from fpgaplace.hw.qdq import THRESHOLD_HEADS, QdqIndex, QTensor, check_scale, qdq_index
from fpgaplace.hw.quant import activation_bounds, quantize_multiplier
from fpgaplace.model.ir import Op, OpGraph
from fpgaplace.model.passes.recurrent import time_major_inputs
from fpgaplace.model.qdq import read_widths
from fpgaplace.util.errors import FpgaplaceError


@dataclass
class Layer:
    """One dataflow stage of a core, ready to render and to run in the integer reference."""

    op: str
    kernel: str
    inputs: list[str]  # int8 tensor names
    output: str
    config: dict[str, int]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    folding: Folding = Folding()
    cycles: int = 0
    resources: Resources = Resources()
    resident: bool = True
    rows: int = 1  # dense: vectors per sample
    geometry: Geometry | None = None  # the op in its kernel's terms (set with the folding)
    widths: dict | None = None  # bits of its weights, inputs and output, and its output stage (``LayerContext.widths``)


def bounds(index: QdqIndex, activations, scale: float, zero_point: int) -> tuple[int, int]:
    """The int8 output range [LO, HI] the fused ``activations`` (Relu, Clip, ...) leave at the
    output's ``scale`` and ``zero_point``."""
    lo, hi = -128, 127
    for node in activations:
        attrs = {a.name: a.f for a in node.attribute if a.name in ("min", "max")}
        if node.op_type == "Clip" and len(node.input) > 1:
            attrs = {key: float(v.reshape(-1)[0]) for key, t in zip(("min", "max"), node.input[1:3], strict=False)
                     if t and (v := index.constant(t)) is not None}
        a, b = activation_bounds(node.op_type, attrs, scale, zero_point)
        lo, hi = max(lo, a), min(hi, b)
    return lo, hi


def multipliers(real: np.ndarray, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Fixed-point (multiplier, shift) of each real rescaling factor (``quantize_multiplier``);
    a one-line error naming ``where`` for a factor that cannot be requantized."""
    pairs = []
    for value in np.asarray(real, dtype=np.float64).reshape(-1):
        try:
            pairs.append(quantize_multiplier(float(value)))
        except ValueError as error:
            raise FpgaplaceError(f"{where}: rescale factor {value:.3g} cannot be requantized ({error})") from None
    return np.array([p[0] for p in pairs], dtype=np.int32), np.array([p[1] for p in pairs], dtype=np.int8)


class LayerContext:
    """The QDQ reading shared by the kernels' lowering; one instance per graph."""

    def __init__(self, graph: OpGraph) -> None:
        self.graph = graph
        self.index = qdq_index(graph.model)
        widths = read_widths(graph.model)
        self.recorded = {name: int(width["bits"]) for name, width in widths.items()}
        self.signed = {name: bool(width.get("signed", True)) for name, width in widths.items()}

    def widths(self, op: Op, layer: Layer) -> dict:
        """``layer``'s widths: bits of its weights (None without a weight matrix), of each input and of
        its output (the widths the model records, ``model.qdq.read_widths``, else 8), its output
        stage: ``thresholds``, ``requantize`` for a dot product, else None, and whether each input's
        codes are signed (the recorded quantizer's ``signed``, else True). O(1)."""
        weights = None
        if "w" in layer.arrays and len(op.inputs) > 1:
            node = self.index.producer.get(op.inputs[1])
            weights = self.recorded.get(node.input[0], 8) if node is not None else 8
        stage = "thresholds" if "thresholds" in layer.arrays else "requantize" if weights is not None else None
        return {"weights": weights, "inputs": [self.recorded.get(t, 8) for t in layer.inputs],
                "output": self.recorded.get(layer.output, 8), "output_stage": stage,
                "inputs_signed": [self.signed.get(t, True) for t in layer.inputs]}

    def source(self, op: Op, tensor: str) -> QTensor:
        """The int8 tensor an input of ``op`` reads (a one-line error where there is none)."""
        q = self.index.int_source(tensor)
        if q is None:
            raise FpgaplaceError(f"op '{op.name}': input '{tensor}' is not an int8 tensor of the QDQ model")
        check_scale(q.scale, f"op '{op.name}': input '{tensor}'")
        return q

    def sink(self, op: Op, output: str | None = None):
        """The int8 QuantizeLinear ``op``'s output (its first, or ``output``) reaches, with the
        activations on the way."""
        output = output or op.outputs[0]
        out = self.index.int_sink(output)
        if out is None:
            raise FpgaplaceError(f"op '{op.name}': output '{output}' does not reach one int8 QuantizeLinear")
        check_scale(out.tensor.scale, f"op '{op.name}': output '{output}'")
        return out

    def reshape(self, op: Op, source: QTensor | None = None) -> Layer | tuple[str, str] | None:
        """A stream-order-preserving reshape (of ``source``, by default its input): nothing (a
        pass-through), an alias (output int8 tensor, input int8 tensor), or a requantization where
        its two scales differ."""
        out = self.index.int_sink(op.outputs[0])
        if out is None:
            return None  # a pass-through: its readers see through it
        x = source if source is not None else self.source(op, op.inputs[0])
        if (x.scale, x.zero_point) == (out.tensor.scale, out.tensor.zero_point) and not out.activations:
            return (out.tensor.name, x.name)
        return self.rescale(op, x, out, "requant", {"SIZE": self.graph.tensors[op.outputs[0]].numel})

    def rescale(self, op: Op, x: QTensor, out, kernel: str, config: dict) -> Layer:
        """A one-input layer of ``kernel`` requantizing ``x`` to ``out`` (``sx / sy``) with ``config``."""
        y = out.tensor
        lo, hi = bounds(self.index, (*([op.node] if op.op_type in ("Relu", "Clip") else []), *out.activations),
                        y.scale, y.zero_point)
        (m,), (s,) = multipliers(np.array([x.scale / y.scale]), f"op '{op.name}'")
        return Layer(op.name, kernel, [x.name], y.name,
                     {**config, "ZX": x.zero_point, "M": int(m), "S": int(s), "ZY": y.zero_point, "LO": lo, "HI": hi})

    def batch(self) -> int:
        """Samples per run of the graph (``graph_batch``)."""
        return graph_batch(self.graph)

    def dot_output(self, op: Op, x: QTensor, w: np.ndarray, w_scale: np.ndarray,
                   channels: int) -> tuple[QTensor, dict, dict[str, int]]:
        """A dot product's output stage: its int8 output tensor, arrays (``dot_arrays``) and config
        members ZY, LO, HI; a requantization where its output reaches a QuantizeLinear through Relu
        or Clip, else thresholds on the accumulator (``fpgaplace.hw.threshold``: a batch norm or a
        bipolar quantizer on the way, ``QdqIndex.threshold_sink``) with the member T."""
        out = self.index.int_sink(op.outputs[0])
        sink = self.index.threshold_sink(op.outputs[0]) if out is None and op.op_type in THRESHOLD_HEADS else None
        if sink is None:
            out = self.sink(op)
            arrays = self.dot_arrays(op, x, out, w, w_scale, channels)
            lo, hi = bounds(self.index, out.activations, out.tensor.scale, out.tensor.zero_point)
            return out.tensor, arrays, {"ZY": out.tensor.zero_point, "LO": lo, "HI": hi}
        return sink.tensor, *self.threshold_arrays(op, x, sink, w, w_scale, channels)

    def threshold_arrays(self, op: Op, x: QTensor, sink, w: np.ndarray, w_scale: np.ndarray,
                         channels: int) -> tuple[dict, dict[str, int]]:
        """Arrays and members of a threshold output stage: weights negated on the channels whose
        code falls with the accumulator, bias 0 (it is in the thresholds), a unit requantizer
        (unused), and ``thresholds[C][T]`` over the codes ``LO..HI`` the channels reach, each once
        where the codes written are every ``STEP``-th (``threshold.merged_steps``)."""
        scales = self.weight_scales(op, w_scale, channels)
        bias_f = self.index.bias(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] else None
        bias = np.zeros(channels) if bias_f is None else np.broadcast_to(bias_f.reshape(-1), (channels,))
        shape, w = w.shape, w.astype(np.int64).reshape(channels, -1)
        bound = np.abs(w).sum(axis=1) * 255
        if bound.max(initial=0) >= 2**31 - 1:
            raise FpgaplaceError(f"op '{op.name}': accumulators up to {bound.max()} do not fit int32 thresholds")
        table, falls = threshold.thresholds(self.index, sink, x.scale * scales, bias, bound, -128, 127)
        reached = (table <= bound.reshape(-1, 1)).sum(axis=1)  # codes above -128 each channel reaches
        floor = (table <= -bound.reshape(-1, 1)).sum(axis=1)  # codes every accumulator reaches
        lo, hi = -128 + int(floor.min()), -128 + max(int(reached.max()), int(floor.min()) + 1)
        table, step = threshold.merged_steps(np.clip(table[:, lo + 128:hi + 128], -(2**31) + 1, 2**31 - 1))
        if np.any(w[falls] == -128):
            raise FpgaplaceError(f"op '{op.name}': a weight of -128 on a channel whose thresholds fall; expected "
                                 "weights in -127..127 there")
        w[falls] = -w[falls]
        (m,), (s,) = multipliers(np.array([1.0]), f"op '{op.name}'")
        arrays = {"w": w.reshape(shape).astype(np.int8), "bias": np.zeros(channels, np.int32),
                  "mult": np.full(channels, m, np.int32), "shift": np.full(channels, s, np.int8),
                  "thresholds": table.astype(np.int32)}
        return arrays, {"ZY": lo, "LO": lo, "HI": hi, "T": (hi - lo) // step, "STEP": step}

    def weight_scales(self, op: Op, w_scale: np.ndarray, channels: int) -> np.ndarray:
        """The weight scale of each of ``channels`` output channels (one-line error if not positive)."""
        scales = np.broadcast_to(w_scale.astype(np.float64), (channels,))
        if np.any(~np.isfinite(scales)) or np.any(scales <= 0):
            raise FpgaplaceError(f"op '{op.name}': weight scale {scales.min():.3g}; expected positive finite scales")
        return scales

    def dot_arrays(self, op: Op, x: QTensor, out, w: np.ndarray, w_scale: np.ndarray, channels: int) -> dict:
        """A dot product's arrays: int8 weights, int32 bias at the accumulator's scale
        ``sx * sw[c]``, and per output channel the multiplier and shift of ``sx * sw[c] / sy``."""
        y = out.tensor
        scales = self.weight_scales(op, w_scale, channels)
        bias_f = self.index.bias(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] else None
        bias = np.zeros(channels) if bias_f is None else np.broadcast_to(bias_f.reshape(-1), (channels,))
        acc_scale = x.scale * scales
        mult, shift = multipliers(acc_scale / y.scale, f"op '{op.name}'")
        return {
            "w": w.astype(np.int8),
            "bias": np.clip(np.rint(bias / acc_scale), -(2**31), 2**31 - 1).astype(np.int32),
            "mult": mult,
            "shift": shift,
        }


def check_sequence_batch(graph: OpGraph) -> None:
    """A one-line error where a recurrence reads a graph input ``X [T, B, I]`` directly with
    ``B > 1`` (``passes.recurrent.time_major_inputs``): a core runs one sequence a run (its slice
    and gate stages take one row a step). O(inputs)."""
    for name in time_major_inputs(graph.model):
        info = graph.tensors.get(name)
        if info is not None and len(info.shape) == 3 and info.shape[1] > 1:
            raise FpgaplaceError(f"input {name} {list(info.shape)}: an LSTM/GRU reads it as [T, B, I] with batch "
                                 f"B={info.shape[1]}; compile builds one sequence a run, expected B = 1 (run the "
                                 "sequences one after another)")


def graph_batch(graph: OpGraph) -> int:
    """Samples per run of the model: axis 0 of its first input, but 1 where that axis is a
    recurrence's time (``passes.recurrent.time_major_inputs``: an LSTM's ``X [T, B, I]`` read
    directly; the run is one sample of its B sequences). A core runs once per sample."""
    first = graph.inputs[0] if graph.inputs else None
    if first is not None and first in time_major_inputs(graph.model):
        return 1
    info = graph.tensors.get(first) if first else None
    return info.shape[0] if info is not None and info.shape and info.shape[0] > 0 else 1
