"""Lowering: the ops a placement puts on one FPGA core -> integer layers with their folding.

Input: the QDQ ``OpGraph`` of a design, the ops of one core in topological order and where every
op runs. Output: a ``CoreDesign`` — the core's layers (kernel, C++ config members, int8/int32
arrays, folding, cycles, resources), the int8 tensors entering and leaving it, and how the host
turns the tensors around it into those int8 tensors and back. QuantizeLinear and
DequantizeLinear nodes on the core disappear into the layers; a reshape that keeps the stream
order is an alias (or a requantization where its two scales differ).

Each layer's multipliers follow the real rescaling factor of its op (``fpgaplace.hw.quant``):
conv/dense ``sx * sw[c] / sy`` per output channel, pools ``sx / (sy * window)``, add one shift
shared by ``sa / sy`` and ``sb / sy``, requantize and concat ``sx / sy`` per input. O(ops +
weights) per core.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from fpgaplace.board.model import FpgaCore, Link
from fpgaplace.hw import Folding, Geometry, Resources, plan_op
from fpgaplace.hw.folding import CoreFolding, DoesNotFit, Stage, fold_core
from fpgaplace.hw.qdq import QdqIndex, QTensor, check_scale, qdq_index
from fpgaplace.hw.quant import activation_bounds, quantize_multiplier
from fpgaplace.model.ir import Op, OpGraph
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


@dataclass
class CoreTensor:
    """An int8 tensor at a core's boundary, with what the host needs to make or read it."""

    name: str
    shape: tuple[int, ...]  # the ONNX (NCHW) shape of one batch
    scale: float
    zero_point: int
    views: list[dict] = field(default_factory=list)  # float tensors that are its dequantized view: name, shape
    quantized_from: str | None = None  # the float tensor a QuantizeLinear on the core reads

    @property
    def channels_last(self) -> bool:
        return len(self.shape) == 4


@dataclass
class CoreDesign:
    name: str
    core: FpgaCore
    ops: list[str]
    layers: list[Layer]
    inputs: list[CoreTensor]
    outputs: list[CoreTensor]
    folding: CoreFolding
    batch: int
    aliases: dict[str, str] = field(default_factory=dict)  # int8 tensor -> the layer output it equals


def _bounds(index: QdqIndex, activations, scale: float, zero_point: int) -> tuple[int, int]:
    lo, hi = -128, 127
    for node in activations:
        attrs = {a.name: a.f for a in node.attribute if a.name in ("min", "max")}
        if node.op_type == "Clip" and len(node.input) > 1:
            attrs = {key: float(v.reshape(-1)[0]) for key, t in zip(("min", "max"), node.input[1:3], strict=False)
                     if t and (v := index.constant(t)) is not None}
        a, b = activation_bounds(node.op_type, attrs, scale, zero_point)
        lo, hi = max(lo, a), min(hi, b)
    return lo, hi


def _multipliers(real: np.ndarray, where: str) -> tuple[np.ndarray, np.ndarray]:
    pairs = []
    for value in np.asarray(real, dtype=np.float64).reshape(-1):
        try:
            pairs.append(quantize_multiplier(float(value)))
        except ValueError as error:
            raise FpgaplaceError(f"{where}: rescale factor {value:.3g} cannot be requantized ({error})") from None
    return np.array([p[0] for p in pairs], dtype=np.int32), np.array([p[1] for p in pairs], dtype=np.int8)


class _Lowering:
    """Lowers the ops of one graph; one instance per design."""

    def __init__(self, graph: OpGraph) -> None:
        self.graph = graph
        self.index = qdq_index(graph.model)

    def source(self, op: Op, tensor: str) -> QTensor:
        q = self.index.int_source(tensor)
        if q is None:
            raise FpgaplaceError(f"op '{op.name}': input '{tensor}' is not an int8 tensor of the QDQ model")
        check_scale(q.scale, f"op '{op.name}': input '{tensor}'")
        return q

    def sink(self, op: Op):
        out = self.index.int_sink(op.outputs[0])
        if out is None:
            raise FpgaplaceError(f"op '{op.name}': output '{op.outputs[0]}' does not reach one int8 QuantizeLinear")
        check_scale(out.tensor.scale, f"op '{op.name}': output '{op.outputs[0]}'")
        return out

    def lower(self, op: Op) -> Layer | tuple[str, str] | None:
        """A layer, an alias (output int8 tensor, input int8 tensor) or None (absorbed)."""
        planned = plan_op(op, self.graph)
        if not planned:
            raise FpgaplaceError(f"op '{op.name}' ({op.op_type}) cannot run on an FPGA core: {planned.reason}")
        kernel, geometry = planned
        if kernel.name in ("quantize", "dequantize", "batchnorm"):
            return None
        if kernel.name == "reshape":
            return self._reshape(op)
        layer = getattr(self, f"_{kernel.name}")(op, geometry.shape)
        layer.kernel = layer.kernel or kernel.name
        return layer

    def _reshape(self, op: Op) -> Layer | tuple[str, str] | None:
        out = self.index.int_sink(op.outputs[0])
        if out is None:
            return None  # a pass-through: its readers see through it
        x = self.source(op, op.inputs[0])
        if (x.scale, x.zero_point) == (out.tensor.scale, out.tensor.zero_point) and not out.activations:
            return (out.tensor.name, x.name)
        return self._rescale(op, x, out, "requant", {"SIZE": self.graph.tensors[op.outputs[0]].numel})

    def _rescale(self, op: Op, x: QTensor, out, kernel: str, config: dict) -> Layer:
        y = out.tensor
        lo, hi = _bounds(self.index, (*([op.node] if op.op_type in ("Relu", "Clip") else []), *out.activations),
                         y.scale, y.zero_point)
        (m,), (s,) = _multipliers(np.array([x.scale / y.scale]), f"op '{op.name}'")
        return Layer(op.name, kernel, [x.name], y.name,
                     {**config, "ZX": x.zero_point, "M": int(m), "S": int(s), "ZY": y.zero_point, "LO": lo, "HI": hi})

    def _requant(self, op: Op, shape: dict) -> Layer:
        x = self.source(op, op.inputs[0])
        size = shape["SIZE"] // self._batch()
        return self._rescale(op, x, self.sink(op), "requant", {"SIZE": size})

    def _batch(self) -> int:
        return graph_batch(self.graph)

    def _dot_arrays(self, op: Op, x: QTensor, out, w: np.ndarray, w_scale: np.ndarray, channels: int) -> dict:
        y = out.tensor
        scales = np.broadcast_to(w_scale.astype(np.float64), (channels,))
        if np.any(~np.isfinite(scales)) or np.any(scales <= 0):
            raise FpgaplaceError(f"op '{op.name}': weight scale {scales.min():.3g}; expected positive finite scales")
        bias_f = self.index.bias(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] else None
        bias = np.zeros(channels) if bias_f is None else np.broadcast_to(bias_f.reshape(-1), (channels,))
        acc_scale = x.scale * scales
        mult, shift = _multipliers(acc_scale / y.scale, f"op '{op.name}'")
        return {
            "w": w.astype(np.int8),
            "bias": np.clip(np.rint(bias / acc_scale), -(2**31), 2**31 - 1).astype(np.int32),
            "mult": mult,
            "shift": shift,
        }

    def _conv2d(self, op: Op, shape: dict) -> Layer:
        x, out = self.source(op, op.inputs[0]), self.sink(op)
        weight = self.index.weight(op.inputs[1])
        if weight.scale.size not in (1, shape["COUT"]) or (weight.scale.size > 1 and weight.axis != 0):
            raise FpgaplaceError(f"op '{op.name}': weight scales must be per tensor or per output channel")
        w = np.transpose(weight.values, (0, 2, 3, 1))  # [Cout, Cin/g, KH, KW] -> [Cout, KH, KW, Cin/g]
        arrays = self._dot_arrays(op, x, out, w, weight.scale, shape["COUT"])
        lo, hi = _bounds(self.index, out.activations, out.tensor.scale, out.tensor.zero_point)
        config = {k: shape[k] for k in ("H", "W", "CIN", "COUT", "KH", "KW", "SH", "SW", "PT", "PL", "PB", "PR",
                                        "DH", "DW", "GROUPS", "HO", "WO")}
        config.update(ZX=x.zero_point, ZY=out.tensor.zero_point, LO=lo, HI=hi)
        return Layer(op.name, "conv2d", [x.name], out.tensor.name, config, arrays)

    def _dense(self, op: Op, shape: dict) -> Layer:
        x, out = self.source(op, op.inputs[0]), self.sink(op)
        weight = self.index.weight(op.inputs[1])
        n_axis = 0 if shape["TRANSB"] else 1
        if weight.scale.size not in (1, shape["N"]) or (weight.scale.size > 1 and weight.axis != n_axis):
            raise FpgaplaceError(f"op '{op.name}': weight scales must be per tensor or per output column")
        w = weight.values if shape["TRANSB"] else weight.values.T  # -> [N, K]
        arrays = self._dot_arrays(op, x, out, w, weight.scale, shape["N"])
        lo, hi = _bounds(self.index, out.activations, out.tensor.scale, out.tensor.zero_point)
        config = {"K": shape["K"], "N": shape["N"], "ZX": x.zero_point, "ZY": out.tensor.zero_point, "LO": lo, "HI": hi}
        return Layer(op.name, "dense", [x.name], out.tensor.name, config, arrays, rows=shape["ROWS"] // self._batch())

    def _pool(self, op: Op, shape: dict, average: bool) -> Layer:
        x, out = self.source(op, op.inputs[0]), self.sink(op)
        window = shape["KH"] * shape["KW"] if average else 1
        layer = self._rescale(op, x, out, "avgpool" if average else "maxpool",
                              {k: shape[k] for k in ("H", "W", "C", "KH", "KW", "SH", "SW", "PT", "PL", "PB", "PR",
                                                     "HO", "WO")})
        if average:
            (m,), (s,) = _multipliers(np.array([x.scale / (out.tensor.scale * window)]), f"op '{op.name}'")
            layer.config.update(M=int(m), S=int(s))
        return layer

    def _maxpool(self, op: Op, shape: dict) -> Layer:
        return self._pool(op, shape, average=False)

    def _avgpool(self, op: Op, shape: dict) -> Layer:
        return self._pool(op, shape, average=True)

    def _globalavgpool(self, op: Op, shape: dict) -> Layer:
        return self._pool(op, shape, average=True)

    def _add(self, op: Op, shape: dict) -> Layer:
        constant = next((t for t in op.inputs if t and t in self.graph.params), None)
        a = self.source(op, next(t for t in op.inputs if t and t != constant))
        values = None
        if constant is None:
            b = self.source(op, next(t for t in op.inputs[1:] if t and t != a.name and t != op.inputs[0]))
        else:
            values, b = self.index.constant_int8(constant)
            check_scale(b.scale, f"op '{op.name}': constant '{constant}'")
        out = self.sink(op)
        y = out.tensor
        ra, rb = a.scale / y.scale, b.scale / y.scale
        _, s = quantize_multiplier(max(ra, rb))
        lo, hi = _bounds(self.index, out.activations, y.scale, y.zero_point)
        config = {"SIZE": shape["SIZE"] // self._batch(), "ZA": a.zero_point, "MA": round(ra * 2**s),
                  "ZB": b.zero_point, "MB": round(rb * 2**s), "S": s, "ZY": y.zero_point, "LO": lo, "HI": hi}
        if values is None:
            return Layer(op.name, "add", [a.name, b.name], y.name, config)
        period = shape["CONST_PERIOD"]
        arrays = {"b": np.broadcast_to(values.reshape(-1), (period,)).astype(np.int8).copy()}
        return Layer(op.name, "add", [a.name], y.name, config, arrays)

    def _concat(self, op: Op, shape: dict) -> Layer:
        xs = [self.source(op, t) for t in op.inputs if t]
        out = self.sink(op)
        y = out.tensor
        lo, hi = _bounds(self.index, out.activations, y.scale, y.zero_point)
        mult, shift = _multipliers(np.array([x.scale / y.scale for x in xs]), f"op '{op.name}'")
        config = {"PIXELS": shape["PIXELS"] // self._batch(), "ZY": y.zero_point, "LO": lo, "HI": hi}
        arrays = {"channels": np.array(shape["CHANNELS"], dtype=np.int64), "zero_points":
                  np.array([x.zero_point for x in xs], dtype=np.int64), "mult": mult.astype(np.int64),
                  "shift": shift.astype(np.int64)}
        return Layer(op.name, "concat", [x.name for x in xs], y.name, config, arrays)


def _views(index: QdqIndex, q: str) -> list[str]:
    """Float tensors that are the dequantized view of int8 tensor ``q`` (DQ outputs and the
    order-keeping reshapes of them)."""
    views, frontier = [], [n for n in index.consumers.get(q, []) if n.op_type == "DequantizeLinear"]
    while frontier:
        node = frontier.pop()
        views.append(node.output[0])
        frontier += [n for n in index.consumers.get(node.output[0], []) if n.op_type in ("Flatten", "Reshape",
                     "Squeeze", "Unsqueeze", "Identity", "Dropout")]
    return views


def _node_ops(index: QdqIndex, graph: OpGraph, tensor: str) -> list[str]:
    """Op names of the nodes reading ``tensor``."""
    return [op for node in index.consumers.get(tensor, []) if (op := graph.producer(node.output[0])) in graph.ops]


def graph_batch(graph: OpGraph) -> int:
    """Samples per run of the model: axis 0 of its first input. A core runs once per sample."""
    first = graph.inputs[0] if graph.inputs else None
    info = graph.tensors.get(first) if first else None
    return info.shape[0] if info is not None and info.shape and info.shape[0] > 0 else 1


def lower_core(name: str, core: FpgaCore, op_names: list[str], graph: OpGraph, placed: dict[str, str],
               resident: set[str], dram: Link, batch: int) -> CoreDesign | None:
    """Lower and fold the ops ``placed`` on the core called ``name`` (see the module docstring);
    None when none of them computes anything (the core is left empty, its ops run on the host)."""
    lowering = _Lowering(graph)
    index = lowering.index
    layers: list[Layer] = []
    alias: dict[str, str] = {}
    for op_name in op_names:
        result = lowering.lower(graph.ops[op_name])
        if isinstance(result, tuple):
            alias[result[0]] = alias.get(result[1], result[1])
        elif result is not None:
            result.inputs = [alias.get(t, t) for t in result.inputs]
            result.resident = op_name in resident
            layers.append(result)
    if not layers:
        return None  # only quantize/dequantize (or order-keeping reshapes) here: the host does them
    stages = [Stage(layer.op, *plan_op(graph.ops[layer.op], graph), layer.resident) for layer in layers]
    folding = _fold_streaming_if_needed(stages, layers, core, dram)
    for layer, stage, folded in zip(layers, stages, folding.stages, strict=True):
        layer.folding, layer.cycles, layer.resources = folded.folding, folded.cycles, folded.resources
        layer.geometry = stage.geometry
    produced = {layer.output for layer in layers}
    inputs: dict[str, CoreTensor] = {}
    for layer in layers:
        for q in layer.inputs:
            if q not in produced and q not in inputs:
                inputs[q] = _boundary(index, graph, q)
    outputs = [
        _boundary(index, graph, q)
        for q in dict.fromkeys(alias_of for layer in layers for alias_of in [layer.output, *(
            a for a, src in alias.items() if src == layer.output)])
        if _read_elsewhere(index, graph, q, placed, name)
    ]
    return CoreDesign(name, core, list(op_names), layers, list(inputs.values()), outputs, folding, batch, alias)


def _fold_streaming_if_needed(stages: list[Stage], layers: list[Layer], core: FpgaCore, dram: Link) -> CoreFolding:
    """The core's folding; when its on-chip memory does not hold every resident weight once
    rounded into blocks, the largest resident weights move to DRAM (m_axi), one op at a time."""
    while True:
        try:
            return fold_core(stages, core, dram)
        except DoesNotFit as error:
            movable = [i for i, s in enumerate(stages) if s.resident and s.geometry.weights]
            if error.resource not in ("bram36", "uram", "lut") or not movable:
                raise
            i = max(movable, key=lambda i: stages[i].geometry.weights)
            stages[i] = replace(stages[i], resident=False)
            layers[i].resident = False


def _boundary(index: QdqIndex, graph: OpGraph, q: str) -> CoreTensor:
    info = graph.tensors.get(q)
    producer = index.producer.get(q)
    params = index.qparams(producer) if producer is not None and producer.op_type == "QuantizeLinear" else None
    if params is None:
        reader = next((n for n in index.consumers.get(q, []) if n.op_type == "DequantizeLinear"), None)
        params = index.qparams(reader) if reader is not None else None
    if info is None or params is None:
        raise FpgaplaceError(f"tensor '{q}': no shape or quantization parameters")
    quantized_from = producer.input[0] if params is not None and producer is not None and (
        producer.op_type == "QuantizeLinear") else None
    views = [{"name": v, "shape": list(graph.tensors[v].shape)} for v in _views(index, q) if v in graph.tensors]
    return CoreTensor(q, info.shape, float(params[0].reshape(-1)[0]), int(params[1].reshape(-1)[0]), views,
                      quantized_from)


def _read_elsewhere(index: QdqIndex, graph: OpGraph, q: str, placed: dict[str, str], core: str) -> bool:
    """Whether int8 tensor ``q`` (or a float view of it) is read off this core or is a graph output."""
    tensors = [q, *_views(index, q)]
    if any(t in graph.outputs for t in tensors):
        return True
    return any(placed.get(op) != core for t in tensors for op in _node_ops(index, graph, t))


def layer_macs(layer: Layer) -> int:
    c = layer.config
    if layer.kernel == "conv2d":
        return c["HO"] * c["WO"] * c["COUT"] * c["KH"] * c["KW"] * c["CIN"] // c["GROUPS"]
    if layer.kernel == "dense":
        return layer.rows * c["N"] * c["K"]
    return 0


def per_sample_shape(tensor: CoreTensor, batch: int) -> tuple[int, ...]:
    """The shape of one sample of a boundary tensor, in stream order (channels last)."""
    shape = (tensor.shape[0] // batch if tensor.shape else 1, *tensor.shape[1:])
    if tensor.channels_last:
        shape = (shape[0], shape[2], shape[3], shape[1])
    return shape[1:] if shape and shape[0] == 1 else shape


def numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape)
