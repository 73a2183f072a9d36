"""Lowering: the ops a placement puts on one FPGA core -> integer layers with their folding.

Input: the QDQ ``OpGraph`` of a design, the ops of one core in topological order and where every
op runs. Output: a ``CoreDesign`` — the core's layers (kernel, C++ config members, int8/int32
arrays, folding, cycles, resources), the int8 tensors entering and leaving it, and how the host
turns the tensors around it into those int8 tensors and back. QuantizeLinear and
DequantizeLinear nodes on the core disappear into the layers; a reshape that keeps the stream
order is an alias (or a requantization where its two scales differ).

Each op's layer is made by its kernel (``Kernel.lower``, with the QDQ reading of
``fpgaplace.hw.lowering``); this module orders them, folds the core and finds its boundary
tensors. O(ops + weights) per core.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from fpgaplace.board.model import BRAM36_BYTES, URAM_BYTES, FpgaCore, Link
from fpgaplace.hw import KERNELS, plan_op
from fpgaplace.hw.buffers import buffer_memory, producer_widths, reader_buffers
from fpgaplace.hw.folding import CoreFolding, DoesNotFit, Stage, fold_core
from fpgaplace.hw.geometry import Folding, Resources, core_budget
from fpgaplace.hw.kernel import NARROW_LANE_KINDS, lane_choice, open_lane_choice
from fpgaplace.hw.lowering import Layer, LayerContext
from fpgaplace.hw.lstm_cell import wide_cells, widen_cell_states
from fpgaplace.hw.qdq import QdqIndex
from fpgaplace.hw.registry import layer_stages, layer_turns
from fpgaplace.model.ir import Op, OpGraph
from fpgaplace.util.errors import FpgaplaceError


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
    # elements the FIFO in front of each reader of a tensor holds (hw.buffers.reader_buffers)
    buffers: dict[str, list[int]] = field(default_factory=dict)
    fifo_uram: bool = False  # deep FIFOs packed into URAM (hw.buffers.fifo_storage)

    @property
    def input_sizes(self) -> dict[str, int]:
        """Elements a sample of each core input."""
        return {t.name: numel(per_sample_shape(t, self.batch)) for t in self.inputs}

    @property
    def fifo_resources(self) -> Resources:
        """The memory of the core's FIFOs deeper than two beats (``hw.buffers.buffer_memory``)."""
        return fifo_memory(self.layers, self.buffers, self.core, self.input_sizes, self.fifo_uram)


def _lower(ctx: LayerContext, op: Op) -> Layer | list[Layer] | tuple[str, str] | None:
    """A layer (several for an op of several outputs, such as a Split), an alias (output int8
    tensor, input int8 tensor) or None (absorbed): the kernel's ``lower``."""
    planned = plan_op(op, ctx.graph)
    if not planned:
        raise FpgaplaceError(f"op '{op.name}' ({op.op_type}) cannot run on an FPGA core: {planned.reason}")
    kernel, geometry = planned
    return kernel.lower(ctx, op, geometry.shape)


def _views(index: QdqIndex, q: str) -> list[str]:
    """Float tensors that are the dequantized view of int8 tensor ``q`` (DQ outputs and the
    order-keeping reshapes of them), and the float ``q`` was quantized from when its readers are
    all QuantizeLinear nodes with ``q``'s own scale and zero point (``_requantized_only``): they
    make ``q`` again from its dequantized view, so the host may hand that view over in its stead
    (a layer on a core absorbs its QuantizeLinear, which the placement may put on a CPU)."""
    views, frontier = [], [n for n in index.consumers.get(q, []) if n.op_type == "DequantizeLinear"]
    while frontier:
        node = frontier.pop()
        views.append(node.output[0])
        frontier += [n for n in index.consumers.get(node.output[0], []) if n.op_type in ("Flatten", "Reshape",
                     "Squeeze", "Unsqueeze", "Identity", "Dropout")]
    producer = index.producer.get(q)
    if producer is not None and producer.op_type == "QuantizeLinear" and _requantized_only(index, producer):
        views.append(producer.input[0])
    return views


def _requantized_only(index: QdqIndex, quantizer) -> bool:
    """Whether every reader of the float that QuantizeLinear ``quantizer`` reads is a
    QuantizeLinear with the same constant scale and zero point: Q(DQ(q)) = q for those, exactly."""
    params = index.qparams(quantizer)
    readers = index.consumers.get(quantizer.input[0], [])
    return params is not None and all(
        node.op_type == "QuantizeLinear" and (other := index.qparams(node)) is not None
        and all(np.array_equal(a, b) for a, b in zip(params, other, strict=True)) for node in readers)


def _node_ops(index: QdqIndex, graph: OpGraph, tensor: str) -> list[str]:
    """Op names of the nodes reading ``tensor``."""
    return [op for node in index.consumers.get(tensor, []) if (op := graph.producer(node.output[0])) in graph.ops]


def lower_core(name: str, core: FpgaCore, op_names: list[str], graph: OpGraph, placed: dict[str, str],
               resident: set[str], dram: Link, batch: int) -> CoreDesign | None:
    """Lower and fold the ops ``placed`` on the core called ``name`` (see the module docstring);
    None when none of them computes anything (the core is left empty, its ops run on the host)."""
    lowering = LayerContext(graph)
    index = lowering.index
    layers: list[Layer] = []
    alias: dict[str, str] = {}
    for op_name in op_names:
        result = _lower(lowering, graph.ops[op_name])
        if isinstance(result, tuple):
            alias[result[0]] = alias.get(result[1], result[1])
            continue
        for layer in [result] if isinstance(result, Layer) else result or []:
            layer.inputs = [alias.get(t, t) for t in layer.inputs]
            layer.resident = op_name in resident
            layer.widths = lowering.widths(graph.ops[op_name], layer)
            layers.append(layer)
    if not layers:
        return None  # only quantize/dequantize (or order-keeping reshapes) here: the host does them
    if wide_cells(graph.model):
        geometries = {k: _stage(layer, graph).geometry for k, layer in enumerate(layers)}
        layers = widen_cell_states(layers, index, geometries)
    stages = [_stage(layer, graph) for layer in layers]
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
    sizes = {t.name: numel(per_sample_shape(t, batch)) for t in inputs.values()}
    read_out = [alias.get(t.name, t.name) for t in outputs]
    folding, buffers, fifo_uram = _fold_with_fifos(stages, layers, core, dram, sizes, read_out)
    return CoreDesign(name, folding.core, list(op_names), layers, list(inputs.values()), outputs, folding, batch,
                      alias, buffers, fifo_uram)


FIFO_FOLDS = 4  # foldings tried with the FIFOs' memory set aside before a core is said not to fit
FIFO_STORES = (False, True)  # where a core's deep FIFOs may live: BRAM (False), packed into URAM (True)


@dataclass
class _Folded:
    """A core's folding with its FIFOs (``_fold_with_fifos``): each layer's folding, cycles and
    resources, the FIFOs' depths and memory, and whether its deep FIFOs are packed into URAM (the
    folding's core says how its narrow lanes are built, ``FpgaCore.narrow_lanes``)."""

    folding: CoreFolding
    layers: list[tuple[Folding, int, Resources]]
    buffers: dict[str, list[int]]
    fifos: Resources
    uram: bool
    squeezed: bool = False  # the layers folded in less than the core's budget (room left for the FIFOs)

    def apply(self, layers: list[Layer], stages: list[Stage]) -> None:
        for layer, stage, (folding, cycles, resources) in zip(layers, stages, self.layers, strict=True):
            layer.folding, layer.cycles, layer.resources, layer.geometry = folding, cycles, resources, stage.geometry


def _fold_with_fifos(stages: list[Stage], layers: list[Layer], core: FpgaCore, dram: Link, sizes: dict[str, int],
                     outputs: list[str]) -> tuple[CoreFolding, dict[str, list[int]], bool]:
    """The core's folding, its FIFOs (``hw.buffers.reader_buffers``) and where its deep FIFOs are
    kept, together within the core's budget: the FIFOs' depths follow from the folding (its
    interval and the stages' fills), so the layers are folded again in the budget less the FIFOs'
    memory until both fit (ResNet-50 on zcu104: its residual skips take 215 BRAM36 beside the
    layers'). On a core with URAM both stores are tried, the deep FIFOs in BRAM and packed into URAM
    (``hw.buffers.fifo_storage``) when BRAM alone squeezes the layers. A core with 2-4-bit lanes
    is folded with them as ``lane_choice`` prices them and with each kind it did not choose
    everywhere (``lane_cores``): that price weighs a lane against the core's whole budget, while
    the layers' other LUTs (threshold tables, line buffers) may leave the DSPs the better home
    (MobileNetV1 w4a4 on zcu104: 2,930 fps on packed DSP lanes against 1,660 on LUT lanes); only
    where LUTs or DSPs bind the priced folding (``CoreFolding.binding``). The
    folding of the least interval is kept (on a tie: BRAM, then the priced lanes).
    Sets each layer's folding, cycles, resources and geometry. Raises ``DoesNotFit`` naming the core
    and the resource when no folding leaves room for its FIFOs (so ``flow.refine`` places fewer ops
    on it). O(2 x ``FIFO_FOLDS`` foldings for each of at most three lane kinds)."""
    tried, refused = [], None
    for rank, lanes in enumerate(lane_cores(core, stages)):
        if rank and tried and not {"lut", "dsp"} & set(tried[0][0].folding.binding()):
            break  # neither budget holds the priced lanes' interval: the other kinds cannot shorten it
        for uram in [store for store in FIFO_STORES if not store or core.uram > 0]:
            try:
                tried.append((_fold_in_room(stages, layers, lanes, dram, sizes, outputs, uram), rank))
            except DoesNotFit as error:
                refused = refused or error
                continue
            if not tried[-1][0].squeezed:
                break  # the FIFOs fit beside the layers' best folding: no store does better
    if not tried:
        raise refused
    best, _ = min(tried, key=lambda pair: (pair[0].folding.interval, pair[0].uram, pair[1]))
    best.apply(layers, stages)
    return best.folding, best.buffers, best.uram


def lane_cores(core: FpgaCore, stages: list[Stage]) -> list[FpgaCore]:
    """``core`` and, where its dot products have lanes of 2-4 bits both (``hw.kernel.lane_choice``'s
    open choice), the core with all of them packed into DSPs and with all on LUTs, each only where
    it differs from the priced choice. O(stages)."""
    pairs = {(s.geometry.weight_bits, s.geometry.activation_bits) for s in stages if s.kernel.uses_dsp}
    narrow = [pair for pair in pairs if open_lane_choice(*pair)]
    return [core] + [replace(core, narrow_lanes=kind) for kind in NARROW_LANE_KINDS
                     if any(lane_choice(core, *pair).kind != kind for pair in narrow)]


def _fold_in_room(stages: list[Stage], layers: list[Layer], core: FpgaCore, dram: Link, sizes: dict[str, int],
                  outputs: list[str], uram: bool) -> _Folded:
    """``_fold_with_fifos`` with the deep FIFOs in one store (``uram``): up to ``FIFO_FOLDS``
    foldings, each in the budget less the largest FIFO memory seen so far. O(``FIFO_FOLDS`` foldings)."""
    budget, reserved = core_budget(core), Resources(0, 0, 0, 0, 0)
    for _ in range(FIFO_FOLDS):
        room = replace(core, bram36=core.bram36 - reserved.bram36, uram=core.uram - reserved.uram,
                       lut=core.lut - reserved.lut)
        if min(room.bram36, room.uram, room.lut) < 0:
            break
        folding = replace(_fold_streaming_if_needed(stages, layers, room, dram), core=core)
        folded = _Folded(folding, [(f.folding, f.cycles, f.resources) for f in folding.stages], {}, reserved, uram,
                         reserved != Resources(0, 0, 0, 0, 0))
        folded.apply(layers, stages)
        folded.buffers = core_buffers(layers, sizes, outputs, folding.interval)
        folded.fifos = fifo_memory(layers, folded.buffers, core, sizes, uram)
        if not (folding.resources + folded.fifos).over(budget):
            return folded
        reserved = Resources(0, max(reserved.bram36, folded.fifos.bram36), max(reserved.uram, folded.fifos.uram),
                             max(reserved.lut, folded.fifos.lut), 0)
    fifos, used = folded.fifos, folding.resources + folded.fifos
    over = used.over(budget)[0]
    needed, available = getattr(used, over), getattr(budget, over)
    raise DoesNotFit(f"{core.name}: the FIFOs in front of its stages' readers need {getattr(fifos, over)} {over} "
                     f"beside the layers' {getattr(folding.resources, over)}, over the core's {available} at "
                     "every folding tried; place fewer ops on it", over, core.name, needed, available,
                     fifo_bytes_by_op(layers, folded.buffers, fifos.bram36 * BRAM36_BYTES + fifos.uram * URAM_BYTES))


def fifo_bytes_by_op(layers: list[Layer], buffers: dict[str, list[int]], priced_bytes: float) -> dict[str, float]:
    """The on-chip bytes of the FIFOs in front of each op's layers: ``priced_bytes`` (the FIFOs'
    blocks) shared by the elements each holds (``buffers``: readers in stage order, as
    ``reader_buffers`` lists them), so the placement can charge each op its own. O(edges)."""
    read = dict.fromkeys(buffers, 0)
    held: dict[str, int] = {}
    for layer in layers:
        for tensor in layer.inputs:
            readers, k = buffers.get(tensor, []), read.get(tensor, 0)
            read[tensor] = k + 1
            held[layer.op] = held.get(layer.op, 0) + (readers[k] if k < len(readers) else 0)
    total = sum(held.values())
    return {op: priced_bytes * elements / total for op, elements in held.items() if elements} if total else {}


def layer_widths(layer: Layer) -> tuple[list[int], int]:
    """Elements per beat of each input and of the output of a stage, from its folding (the
    kernel's ``stream_widths``)."""
    return KERNELS[layer.kernel].stream_widths(layer.geometry, layer.folding, len(layer.inputs))


def tensor_sizes(layers: list[Layer], input_sizes: dict[str, int]) -> dict[str, int]:
    """Elements a sample of every tensor of a core: its inputs' (``input_sizes``) and its layers'
    outputs. O(layers)."""
    return input_sizes | {layer.output: KERNELS[layer.kernel].output_size(layer.config, layer.arrays, layer.rows)
                          for layer in layers}


def core_buffers(layers: list[Layer], input_sizes: dict[str, int], outputs: list[str], interval: int
                 ) -> dict[str, list[int]]:
    """``hw.buffers.reader_buffers`` of a core's folded ``layers`` (``input_sizes``: elements a
    sample of each core input; ``outputs``: the layer outputs the core sends out). O(layers + edges)."""
    return reader_buffers(layer_stages(layers), outputs, tensor_sizes(layers, input_sizes), interval,
                          layer_turns(layers))


def fifo_memory(layers: list[Layer], buffers: dict[str, list[int]], core: FpgaCore, input_sizes: dict[str, int],
                uram: bool) -> Resources:
    """The memory of ``buffers``' FIFOs, each at its producer's beat (``layer_widths``), the deep
    ones packed into URAM where ``uram`` (``hw.buffers.fifo_storage``). O(edges)."""
    return buffer_memory(buffers, producer_widths((layer.inputs, layer.output, *layer_widths(layer))
                                                  for layer in layers), core,
                         sizes=tensor_sizes(layers, input_sizes), uram=uram)


def _stage(layer: Layer, graph: OpGraph) -> Stage:
    """The folding's stage of ``layer``: the layer's own kernel and geometry where a rewrite of the
    lowered layers made it (``hw.lstm_cell``), else its op's, at the widths its RTL lanes take
    (``Kernel.priced_geometry``: a low-bit dense layer is priced at its own lanes, not int8's)."""
    if layer.geometry is not None:
        return Stage(layer.op, KERNELS[layer.kernel], layer.geometry, layer.resident)
    kernel, geometry = plan_op(graph.ops[layer.op], graph)
    return Stage(layer.op, kernel, kernel.priced_geometry(geometry, layer.widths, layer.arrays), layer.resident)


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
    if params is None and info is not None and np.issubdtype(np.dtype(info.dtype), np.integer):
        params = (np.ones(1), np.zeros(1, np.int64))  # integer indices (an embedding's): bytes, as they are
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
    return KERNELS[layer.kernel].config_macs(layer.config, layer.rows)


def per_sample_shape(tensor: CoreTensor, batch: int) -> tuple[int, ...]:
    """The shape of one sample of a boundary tensor, in stream order (channels last)."""
    shape = (tensor.shape[0] // batch if tensor.shape else 1, *tensor.shape[1:])
    if tensor.channels_last:
        shape = (shape[0], shape[2], shape[3], shape[1])
    return shape[1:] if shape and shape[0] == 1 else shape


def numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape)
