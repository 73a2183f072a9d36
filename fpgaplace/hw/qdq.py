"""Reading a QDQ model in the integer terms the cores compute in.

In a QDQ model (onnxruntime's static quantization) every int8 tensor ``q`` appears to float ops
as ``DequantizeLinear(q, scale, zero_point)``, and every op's float output is turned back into
int8 by a ``QuantizeLinear``. A core runs an op on ``q`` directly, so an op is *lowerable* when
each activation input resolves to an int8 tensor (through a DequantizeLinear, and through
reshapes that keep the stream order) and its output reaches exactly one QuantizeLinear (maybe
through ReLU/Clip, which become the output's clamp bounds). Weights are DequantizeLinear of
constant int8 tensors with a zero point of 0. All lookups are O(1) after an O(nodes) index.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import numpy_helper

from fpgaplace.util.errors import FpgaplaceError

PASS_THROUGH = frozenset({"Flatten", "Reshape", "Squeeze", "Unsqueeze", "Identity", "Dropout"})
ACTIVATIONS = frozenset({"Relu", "Clip"})
EVERY_OUTPUT_INT8 = frozenset({"Split"})  # ops a core runs only when each output reaches its own QuantizeLinear


@dataclass(frozen=True)
class QTensor:
    """An int8 tensor as a core sees it: its name in the model, scale and zero point."""

    name: str
    scale: float
    zero_point: int


@dataclass(frozen=True)
class QuantizedOutput:
    tensor: QTensor
    activations: tuple[onnx.NodeProto, ...]  # ReLU/Clip between the op and its QuantizeLinear
    quantize: onnx.NodeProto


@dataclass(frozen=True)
class ThresholdSink:
    """A dot product's output on its way to a QuantizeLinear through float steps no rescaling
    computes exactly (a BatchNormalization, a bipolar quantizer's sign test and its two levels;
    ``fpgaplace.hw.threshold`` turns them into thresholds on the accumulator)."""

    tensor: QTensor  # the int8 tensor written, with its QuantizeLinear's scale and zero point
    steps: tuple[onnx.NodeProto, ...]  # BatchNormalization, Relu, Clip, GreaterOrEqual, Where, in order
    quantize: onnx.NodeProto


THRESHOLD_STEPS = frozenset({"BatchNormalization", *ACTIVATIONS})
SIGN_STEPS = ("GreaterOrEqual", "Where")  # a bipolar quantizer (``fpgaplace.model.qonnx_qdq``)


@dataclass(frozen=True)
class QuantizedWeight:
    values: np.ndarray  # int8 as stored
    scale: np.ndarray  # float, per output channel (length 1 when per tensor)
    axis: int


class QdqIndex:
    """Producers, consumers and constants of one ONNX model."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.model = model
        self.producer: dict[str, onnx.NodeProto] = {}
        self.by_name = {node.name: node for node in model.graph.node}
        self.consumers: dict[str, list[onnx.NodeProto]] = {}
        for node in model.graph.node:
            for t in node.output:
                self.producer[t] = node
            for t in node.input:
                self.consumers.setdefault(t, []).append(node)
        self.initializers = {t.name: t for t in model.graph.initializer}
        self.graph_outputs = {o.name for o in model.graph.output}

    def constant(self, tensor: str) -> np.ndarray | None:
        """The value of an initializer or a Constant node's output."""
        if tensor in self.initializers:
            return numpy_helper.to_array(self.initializers[tensor])
        node = self.producer.get(tensor)
        if node is not None and node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value":
                    return numpy_helper.to_array(attr.t)
        return None

    def qparams(self, node: onnx.NodeProto) -> tuple[np.ndarray, np.ndarray] | None:
        """Scale and zero point of a Q/DQ node when both are constants."""
        scale = self.constant(node.input[1]) if len(node.input) > 1 else None
        zero = self.constant(node.input[2]) if len(node.input) > 2 and node.input[2] else None
        if scale is None or zero is None:
            return None
        return scale.astype(np.float64), zero

    def int_source(self, tensor: str) -> QTensor | None:
        """The per-tensor int8 tensor a float activation is the dequantized view of."""
        node = self.producer.get(tensor)
        while node is not None and node.op_type in PASS_THROUGH:
            node = self.producer.get(node.input[0])
        if node is None or node.op_type != "DequantizeLinear":
            return None
        params = self.qparams(node)
        if params is None or params[0].size != 1 or params[1].dtype != np.int8:
            return None
        return QTensor(node.input[0], float(params[0].reshape(-1)[0]), int(params[1].reshape(-1)[0]))

    def int_sink(self, tensor: str) -> QuantizedOutput | None:
        """The QuantizeLinear an op's float output reaches (through ReLU/Clip only)."""
        chain: list[onnx.NodeProto] = []
        while True:
            readers = self.consumers.get(tensor, [])
            if len(readers) != 1 or tensor in self.graph_outputs:
                return None
            node = readers[0]
            if node.op_type == "QuantizeLinear":
                params = self.qparams(node)
                if params is None or params[0].size != 1 or params[1].dtype != np.int8:
                    return None
                q = QTensor(node.output[0], float(params[0].reshape(-1)[0]), int(params[1].reshape(-1)[0]))
                return QuantizedOutput(q, tuple(chain), node)
            if node.op_type not in ACTIVATIONS:
                return None
            chain.append(node)
            tensor = node.output[0]

    def _only_reader(self, tensor: str) -> onnx.NodeProto | None:
        readers = self.consumers.get(tensor, [])
        return readers[0] if len(readers) == 1 and tensor not in self.graph_outputs else None

    def threshold_sink(self, tensor: str) -> ThresholdSink | None:
        """The QuantizeLinear an op's float output reaches through at most one BatchNormalization
        of constant parameters, Relu/Clip, and a bipolar quantizer's ``GreaterOrEqual`` (a constant
        edge) and ``Where`` (two constant levels), when a BatchNormalization or the sign test is among them (else
        ``int_sink`` reads it). O(chain)."""
        steps: list[onnx.NodeProto] = []
        node = self._only_reader(tensor)
        while node is not None and node.op_type in THRESHOLD_STEPS and not (
                node.op_type == "BatchNormalization" and any(s.op_type == node.op_type for s in steps)):
            if any(self.constant(t) is None for t in node.input[1:] if t):
                return None
            steps.append(node)
            node = self._only_reader(node.output[0])
        if node is not None and node.op_type == SIGN_STEPS[0] and self.constant(node.input[1]) is not None:
            where = self._only_reader(node.output[0])
            if where is None or where.op_type != SIGN_STEPS[1] or where.input[0] != node.output[0] or any(
                    self.constant(t) is None for t in where.input[1:3]):
                return None
            steps += [node, where]
            node = self._only_reader(where.output[0])
        if node is None or node.op_type != "QuantizeLinear" or not any(
                s.op_type in ("BatchNormalization", SIGN_STEPS[0]) for s in steps):
            return None
        params = self.qparams(node)
        if params is None or params[0].size != 1 or params[1].dtype != np.int8:
            return None
        q = QTensor(node.output[0], float(params[0].reshape(-1)[0]), int(params[1].reshape(-1)[0]))
        return ThresholdSink(q, tuple(steps), node)

    def weight(self, tensor: str) -> QuantizedWeight | None:
        """A DequantizeLinear of a constant int8 tensor with zero point 0."""
        node = self.producer.get(tensor)
        if node is None or node.op_type != "DequantizeLinear":
            return None
        values = self.constant(node.input[0])
        params = self.qparams(node)
        if values is None or params is None or values.dtype != np.int8 or np.any(params[1] != 0):
            return None
        axis = 1
        for attr in node.attribute:
            if attr.name == "axis":
                axis = attr.i
        return QuantizedWeight(values, params[0].reshape(-1), axis % max(values.ndim, 1))

    def constant_int8(self, tensor: str) -> tuple[np.ndarray, QTensor] | None:
        """A constant activation operand: DequantizeLinear of a constant int8 tensor with one
        scale and zero point; its values and quantization."""
        node = self.producer.get(tensor)
        if node is None or node.op_type != "DequantizeLinear":
            return None
        values, params = self.constant(node.input[0]), self.qparams(node)
        if values is None or params is None or values.dtype != np.int8 or params[0].size != 1:
            return None
        scale, zero = float(params[0].reshape(-1)[0]), int(params[1].reshape(-1)[0])
        return values, QTensor(node.input[0], scale, zero)

    def bias(self, tensor: str) -> np.ndarray | None:
        """A bias as float (DequantizeLinear of int32, or a float constant)."""
        node = self.producer.get(tensor)
        if node is not None and node.op_type == "DequantizeLinear":
            values, params = self.constant(node.input[0]), self.qparams(node)
            if values is None or params is None:
                return None
            axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
            scale = params[0] if params[0].size == 1 else params[0].reshape([-1 if i == axis else 1
                                                                               for i in range(values.ndim)])
            return (values.astype(np.float64) - params[1].astype(np.float64)) * scale
        value = self.constant(tensor)
        return value.astype(np.float64) if value is not None else None


_CACHED_INDEXES = 8
_INDEXES: dict[int, tuple[onnx.ModelProto, QdqIndex]] = {}


def qdq_index(model: onnx.ModelProto) -> QdqIndex:
    """The index of ``model``, built once per model object."""
    cached = _INDEXES.get(id(model))
    if cached is None or cached[0] is not model:
        if len(_INDEXES) >= _CACHED_INDEXES:
            _INDEXES.pop(next(iter(_INDEXES)))
        cached = (model, QdqIndex(model))
        _INDEXES[id(model)] = cached
    return cached[1]


THRESHOLD_HEADS = frozenset({"Conv", "Gemm", "MatMul"})
"""Ops whose accumulator a threshold output stage compares (``ThresholdSink``)."""


def absorbed_activation(node: onnx.NodeProto, model: onnx.ModelProto) -> bool:
    """Whether ``node`` is a Relu or Clip on the way from a computing op (not a DequantizeLinear)
    to the QuantizeLinear it reaches, or a step of a dot product's ``ThresholdSink``: the op's
    lowering takes it as its output's clamp bounds (``int_sink``'s activations) or into its
    thresholds, so it costs nothing of its own (a QONNX quantizer's narrowed range, a batch norm
    before it, a bipolar quantizer, ``fpgaplace.model.qonnx_qdq``). O(chain)."""
    chain = THRESHOLD_STEPS | set(SIGN_STEPS)
    if node.op_type not in chain:
        return False
    index = qdq_index(model)
    head = index.producer.get(node.input[0])
    while head is not None and head.op_type in chain:
        head = index.producer.get(head.input[0])
    if head is None or head.op_type in ("DequantizeLinear", "QuantizeLinear", *PASS_THROUGH):
        return False
    out = index.int_sink(head.output[0])
    steps = out.activations if out is not None else ()
    if out is None and head.op_type in THRESHOLD_HEADS and (sink := index.threshold_sink(head.output[0])):
        steps = sink.steps
    return any(a.output[0] == node.output[0] for a in steps)


def output_scales(model: onnx.ModelProto) -> dict[str, float]:
    """Quantization step of every graph output that is a dequantized int8 tensor (C simulation
    and the host driver compare outputs in these steps)."""
    index = qdq_index(model)
    sources = {o.name: index.int_source(o.name) for o in model.graph.output}
    return {name: q.scale for name, q in sources.items() if q is not None}


def check_scale(value: float, where: str) -> float:
    if not np.isfinite(value) or value <= 0:
        raise FpgaplaceError(f"{where}: scale {value!r}; expected a positive finite number")
    return value


def unlowerable(op_type: str, inputs: list[str], outputs: list[str], weight_inputs: list[str],
                model: onnx.ModelProto, constant_inputs: list[str] = ()) -> str | None:
    """Why an op of a QDQ model cannot run on a core in int8, or None when it can."""
    index = qdq_index(model)
    for tensor in constant_inputs:
        if index.constant_int8(tensor) is None:
            return f"constant '{tensor}' is not a per-tensor int8 DequantizeLinear of a constant"
    if op_type in ("QuantizeLinear", "DequantizeLinear"):
        return None
    for tensor in inputs:
        if index.int_source(tensor) is None:
            return f"input '{tensor}' is not a per-tensor int8 DequantizeLinear"
    for tensor in weight_inputs:
        if index.weight(tensor) is None:
            return f"weight '{tensor}' is not a DequantizeLinear of int8 with zero point 0"
    if op_type in PASS_THROUGH:
        return None
    for tensor in [t for t in outputs if t] if op_type in EVERY_OUTPUT_INT8 else outputs[:1]:
        if index.int_sink(tensor) is None and not (op_type in THRESHOLD_HEADS and index.threshold_sink(tensor)):
            return f"output '{tensor}' does not reach exactly one int8 QuantizeLinear"
    return None
