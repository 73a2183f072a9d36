"""The kernel registry: every kernel of the op library by name, and the kernel of an op.

The op registry (``fpgaplace.model.ops``) names each op type's kernel (``OpClass.kernel``); this
is the one list of those names and the objects behind them. ``plan_op`` is what the front end,
the cost model and the lowering ask: the kernel and geometry of an op, or why no core runs it
(where the named kernel refuses an op's shapes, the kernel ``BROADER`` names for it may take them:
an Add of two activations with one broadcast is ``add_broadcast``'s, a Mul by a constant and an
unfolded batch norm ``affine``'s, a MatMul of two activations ``matmul``'s).
The ``*_geometry`` helpers cost a one-sample op from its config members, for the RTL tests and
benches. Each look-up is O(1); ``plan_op`` is the kernel's geometry plus, for a QDQ model, the
QDQ check of the op's tensors.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from fpgaplace.hw import qdq
from fpgaplace.hw.affine import Affine
from fpgaplace.hw.alias import Alias
from fpgaplace.hw.binary import Binary
from fpgaplace.hw.concat import Concat
from fpgaplace.hw.conv import Conv2d
from fpgaplace.hw.dense import Dense, flatten_readers
from fpgaplace.hw.elementwise import Add, Requant
from fpgaplace.hw.free import Free
from fpgaplace.hw.gather import Embedding
from fpgaplace.hw.geometry import Fill, Geometry, Unsupported
from fpgaplace.hw.islands import islands
from fpgaplace.hw.kernel import Kernel, activation_inputs, dataflow_latency
from fpgaplace.hw.layernorm import LayerNorm
from fpgaplace.hw.lrn import Lrn
from fpgaplace.hw.lstm_cell import LstmCell
from fpgaplace.hw.matmul import MatMul
from fpgaplace.hw.onehot import OneHot
from fpgaplace.hw.pad import Pad
from fpgaplace.hw.pool import Pool
from fpgaplace.hw.reorder import Reorder
from fpgaplace.hw.shuffle import Shuffle
from fpgaplace.hw.slice import Slice
from fpgaplace.hw.softmax import Softmax
from fpgaplace.hw.table import Table
from fpgaplace.hw.upsample import Upsample
from fpgaplace.model import ops as op_registry

if TYPE_CHECKING:
    from collections.abc import Sequence

    from fpgaplace.hw.lowering import Layer
    from fpgaplace.model.ir import Op, OpGraph

KERNELS: dict[str, Kernel] = {
    kernel.name: kernel
    for kernel in (
        Conv2d(),
        Dense(),
        MatMul(),
        Pool("maxpool", average=False, global_=False),
        Pool("avgpool", average=True, global_=False),
        Pool("globalavgpool", average=True, global_=True),
        Add(),
        Requant(),
        *(Binary(op) for op in ("sub", "mul", "max", "min")),
        Binary("add", "add_broadcast"),
        Affine(),
        Concat(),
        Slice(),
        Upsample(),
        Pad(),
        Table(),
        Embedding(),
        OneHot(),
        Shuffle(),
        Reorder(),
        Lrn(),
        Softmax(),
        LayerNorm(),
        LstmCell(),
        Free("reshape"),
        Free("quantize"),
        Free("dequantize"),
        Free("batchnorm"),
        Free("island"),
        Alias(),
        Free("activation"),
    )
}

ISLAND_KERNELS = frozenset({"table", "shuffle", "reorder", "island", "alias"})
"""Kernels no op class names: ``plan_op`` gives them to the ops of an island (``hw.islands``: a table
island, a channel-permutation chain, a chain transposing the stream)."""

CONTEXT_KERNELS = ISLAND_KERNELS | {"activation"}
"""Kernels ``plan_op`` gives by an op's place in the graph rather than by its op class: the island
kernels, and ``activation`` (a Relu, Clip, batch norm or sign step its producer's output stage takes,
``qdq.absorbed_activation``)."""

REWRITE_KERNELS = frozenset({"lstm_cell"})
"""Kernels no op is planned onto: a rewrite of a core's lowered layers makes their layers
(``hw.lstm_cell.widen_cell_states``: an LSTM step's cell update with its state in int16)."""

BROADER = {"add": "add_broadcast", "mul": "affine", "batchnorm": "affine", "dense": "matmul"}
"""The kernel that takes the ops a kernel refuses: an Add of two activations, one broadcast; a Mul by
a constant and a batch norm not folded into a convolution (a per-channel affine map); a MatMul whose
second operand is an activation."""


def kernel_for(op: Op) -> Kernel | None:
    """The kernel the op registry names for ``op``'s type, if any."""
    op_class = op_registry.lookup(op.op_type, op.domain)
    name = op_class.kernel if op_class is not None else None
    return KERNELS.get(name) if name else None


def plan_op(op: Op, graph: OpGraph) -> tuple[Kernel, Geometry] | Unsupported:
    """The kernel and geometry of ``op`` on a core, or why no core can run it. In a QDQ model an
    op of an island (``fpgaplace.hw.islands``) is the island's stage (a table, a channel shuffle) or a
    free member of it."""
    island = islands(graph.model, graph.tensors).of_node.get(op.name) if graph.is_qdq else None
    if island is not None:
        kernel = KERNELS[island.kernel if island.exit_op == op.name else "island"]
        geometry = kernel.geometry(op, graph)
        return geometry if isinstance(geometry, Unsupported) else (kernel, geometry)
    kernel = KERNELS["activation"] if graph.is_qdq and op.node is not None and qdq.absorbed_activation(
        op.node, graph.model) else kernel_for(op)
    if kernel is None:
        return Unsupported(f"no hardware kernel for {op.op_type}")
    strings = any(graph.tensors[t].dtype == "object" for t in [*op.all_inputs(), *op.outputs] if t in graph.tensors)
    if strings:
        return Unsupported("string tensors")
    geometry = kernel.geometry(op, graph)
    if isinstance(geometry, Unsupported) and kernel.name in BROADER:
        broader = KERNELS[BROADER[kernel.name]]
        other = broader.geometry(op, graph)
        kernel, geometry = (broader, other) if isinstance(other, Geometry) else (
            kernel, Unsupported(f"{geometry.reason}; nor {broader.name}'s: {other.reason}"))
    if isinstance(geometry, Unsupported):
        return geometry
    if graph.is_qdq and kernel.name not in ("quantize", "dequantize", "activation"):
        weights = [op.inputs[1]] if kernel.uses_dsp and op.inputs[1] in graph.params else []
        constants = [t for t in op.inputs if t and t in graph.params] if kernel.name in ("add", "concat") else []
        activations = [] if isinstance(kernel, Embedding) else activation_inputs(op, graph)  # integer indices
        reason = qdq.unlowerable(op.op_type, activations, op.outputs, weights, graph.model, constants)
        if reason is not None:
            return Unsupported(reason)
    return kernel, geometry


def core_latency(layers: Sequence[Layer], outputs: Sequence[str], interval: int) -> int:
    """Cycles from a sample's first input beat to its last output beat on a core running the
    folded ``layers`` (each with its geometry and folding) as one dataflow: their kernels' fills
    overlapped, at least the core's ``interval`` (``dataflow_latency``, which the placement's
    latency objective reads too). O(layers + edges)."""
    return math.ceil(dataflow_latency(layer_stages(layers), outputs, interval))


def layer_stages(layers: Sequence[Layer]) -> list[tuple[list[str], str, Fill]]:
    """``(input tensors, output tensor, fill)`` of each folded layer (``Kernel.layer_fill``), the
    stages ``core_latency`` and ``hw.buffers.reader_buffers`` read. O(layers)."""
    return [(layer.inputs, layer.output, KERNELS[layer.kernel].layer_fill(layer))
            for layer in layers if layer.geometry is not None]


def layer_turns(layers: Sequence[Layer]) -> dict[str, int]:
    """By output tensor, the turn of each folded layer that reads its inputs in turn
    (``Kernel.turn_elements``), which ``hw.buffers.reader_buffers`` adds in front of its inputs. O(layers)."""
    return {layer.output: turn for layer in layers if layer.geometry is not None
            and (turn := KERNELS[layer.kernel].turn_elements(layer)) > 0}


def colocated_groups(graph: OpGraph) -> list[list[str]]:
    """Ops that must share a device for their kernels to be right: an island's ops, and a
    flatten of a feature map with the path to the dense layers that read it in channels-last
    order. O(n) over the graph's ops."""
    groups = [list(island.members) for island in islands(graph.model, graph.tensors).islands] if graph.is_qdq else []
    for op in graph.ops.values():
        x = graph.tensors.get(op.inputs[0]) if op.inputs else None
        if kernel_for(op) is KERNELS["reshape"] and x is not None and len(x.shape) == 4 and x.shape[1] > 1 \
                and x.shape[2] * x.shape[3] > 1:
            readers = flatten_readers(graph, op)
            if readers:
                groups.append([op.name, *readers])
    return [[name for name in group if name in graph.ops] for group in groups]


def rtl_kernels() -> list[str]:
    """Names of the kernels the RTL op library renders."""
    return [name for name, kernel in KERNELS.items() if type(kernel).rtl is not Kernel.rtl]


def window_geometry(kernel: str, config: dict[str, Any]) -> Geometry:
    """The geometry of a one-sample conv2d / maxpool / avgpool / globalavgpool with ``config``'s
    members, made by ``KERNELS[kernel]`` (so cycles and resources are its own)."""
    return KERNELS[kernel].config_geometry(config)  # type: ignore[attr-defined]


def dense_geometry(k: int, n: int) -> Geometry:
    """The geometry of a ``[1, K] x [K, N]`` MatMul, made by ``KERNELS["dense"]``."""
    return KERNELS["dense"].config_geometry({"K": k, "N": n})  # type: ignore[attr-defined]


def elementwise_geometry(kernel: str, shape: tuple[int, ...], constant: tuple[int, ...] | None = None) -> Geometry:
    """The geometry of a one-sample Add (two inputs, or one and a ``constant`` of that shape) or
    Relu of an NCHW ``shape``."""
    return KERNELS[kernel].shape_geometry(shape, constant)  # type: ignore[attr-defined]


def concat_geometry(pixels: tuple[int, ...], channels: list[int]) -> Geometry:
    """The geometry of a one-sample channel Concat of NCHW inputs ``(1, C_i, *pixels)``."""
    return KERNELS["concat"].channels_geometry(pixels, channels)  # type: ignore[attr-defined]


def slice_geometry(config: dict[str, Any]) -> Geometry:
    """The geometry of a one-sample Slice (a window of rows, pixels and channels) with ``config``'s members."""
    return KERNELS["slice"].window_geometry(config)  # type: ignore[attr-defined]


def upsample_geometry(config: dict[str, Any]) -> Geometry:
    """The geometry of a one-sample nearest upsampling by ``RH`` x ``RW`` with ``config``'s members."""
    return KERNELS["upsample"].repeat_geometry(config)  # type: ignore[attr-defined]


def pad_geometry(config: dict[str, Any]) -> Geometry:
    """The geometry of a one-sample constant Pad of rows and pixels with ``config``'s members."""
    return KERNELS["pad"].pads_geometry(config)  # type: ignore[attr-defined]
