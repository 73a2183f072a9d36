"""Data-movement chains: Reshape/Transpose chains of a QDQ model that permute the channels of each
pixel, or transpose a whole sample's stream.

ShuffleNet's channel shuffle arrives as ``x[N,C,H,W] -> Reshape [N,g,C/g,H,W] -> Transpose(0,2,1,3,4)
-> Reshape [N,C,H,W]``, each op between a DequantizeLinear and a QuantizeLinear. A core streams a
4-D tensor channels last (per pixel its C channels), so whatever the chain's ops are, when its
overall effect is ``y[n,c,h,w] = x[n,perm[c],h,w]`` it is one lane stage with a one-pixel buffer
(``fpgaplace.hw.shuffle``).

A *chain* (found backwards from a per-tensor int8 QuantizeLinear, its *exit*):

* its ops are data-movement ops of ``MOVE_OPS`` one after another, each reading a
  DequantizeLinear and read only by the next op's QuantizeLinear (and not a graph output);
* an int8 tensor between two ops is *inside* when a QuantizeLinear of a chain op made it, one
  DequantizeLinear reads it and nothing else, and both carry the scale and zero point of the
  chain's source (onnxruntime's ``QDQDirect8BitOp`` keeps them), so the chain rounds once;
* the first op's DequantizeLinear reads the *source*, a per-tensor int8 tensor;
* the output has rank 2 or 4, and the effect, found by pushing the source's element indices
  through the ops with numpy (so any equivalent chain is found, not one pattern), is in stream
  order a permutation of each pixel's channels (a channel shuffle), or the identity (a Transpose
  of [N, C, 1, 1] to [N, 1, 1, C]); a flatten of a feature map is neither (its stream order is
  the dense layers' business: ``fpgaplace.hw.dense.flattened_from``);
* or, for an output of rank 3 (never a flatten to [N, K], which stays the dense layers'), the
  effect is in stream order the same transpose of blocks of every sample, ``[R, C, E] -> [C, R,
  E]`` (``stream_transpose``; E = 1 a 2-D transpose): a YOLO head's ``Reshape [N, C, H, W] -> [N,
  C, H*W]`` turns the HWC stream into CHW order (E = 1), and attention's split of ``[B, S, H*D]``
  into heads ``[B*H, S, D]`` (Reshape, Transpose perm [0, 2, 1, 3], Reshape: ``model.passes.heads``)
  moves blocks of D elements (R = S, C = H), as its merge does back (R = H, C = S). It runs as a
  reorder buffer of a whole sample (``fpgaplace.hw.reorder``);
  any other order a chain leaves is not generated (no index ROM), and the chain is refused;
* or, for an output of rank 3, the stream order is kept (a ViT's patch tokens, ``Reshape [B, C,
  H, W] -> [B, C, H*W] -> Transpose(0, 2, 1)``): an ``alias``, the output the source's int8
  stream (or its requantization where the exit's scale differs) at no cost;
* at least one op would not run alone (a Transpose, or a reshape that changes the stream order:
  ``fpgaplace.hw.free.changes_stream_order``), so order-keeping reshapes stay free aliases.

The chain's last op carries the stage; its other ops and inside Q/DQ are free members. O(chain
length x tensor size) per exit, in numpy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from fpgaplace.hw.free import changes_stream_order
from fpgaplace.hw.qdq import QdqIndex

MOVE_OPS = frozenset({"Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Identity"})
"""Op types a chain may hold: each moves elements and computes nothing."""


@dataclass(frozen=True)
class Chain:
    """A data-movement chain: its int8 ``source``, exit QuantizeLinear and its int8 ``output``, the
    ``last_op`` carrying the stage, its nodes in topological order (the source's DequantizeLinear
    first, the exit last), and its effect: ``permutation[c]``, the source channel of output
    channel ``c`` (a channel shuffle), or ``transpose`` = (R, C, E), every sample's stream read
    as ``[R, C, E]`` and written as ``[C, R, E]`` (a reorder)."""

    source: str
    exit: str
    output: str
    last_op: str
    nodes: tuple[str, ...]
    permutation: tuple[int, ...] = ()
    transpose: tuple[int, int, int] = ()

    @property
    def kernel(self) -> str:
        """The kernel of its stage: ``reorder`` for a transpose, ``shuffle`` for a channel
        permutation, else ``alias`` (the stream order kept: the chain's output is its source)."""
        return "reorder" if self.transpose else "shuffle" if self.permutation else "alias"


def _int8_params(index: QdqIndex, node: onnx.NodeProto) -> tuple[float, int] | None:
    """(scale, zero point) of a per-tensor int8 Q/DQ node, or None."""
    params = index.qparams(node)
    if params is None or params[0].size != 1 or params[1].dtype != np.int8:
        return None
    return float(params[0].reshape(-1)[0]), int(params[1].reshape(-1)[0])


def _sole_reader(index: QdqIndex, tensor: str, outputs: set[str]) -> onnx.NodeProto | None:
    readers = index.consumers.get(tensor, [])
    return readers[0] if len(readers) == 1 and tensor not in outputs else None


def _walk(index: QdqIndex, exit_q: onnx.NodeProto, outputs: set[str]) -> tuple[list[onnx.NodeProto], str] | None:
    """(the chain's nodes from the exit back to the source's DequantizeLinear, the source), or None."""
    nodes: list[onnx.NodeProto] = [exit_q]
    inside: list[tuple[float, int] | None] = []  # the (scale, zero point) of each tensor inside
    op = index.producer.get(exit_q.input[0])
    while True:
        if op is None or op.op_type not in MOVE_OPS or _sole_reader(index, op.output[0], outputs) is not nodes[-1]:
            return None
        dq = index.producer.get(op.input[0])
        if dq is None or dq.op_type != "DequantizeLinear" or _int8_params(index, dq) is None:
            return None
        nodes += [op, dq]
        maker = index.producer.get(dq.input[0])
        inner = (maker is not None and maker.op_type == "QuantizeLinear" and _sole_reader(index, dq.input[0], outputs)
                 is dq and _sole_reader(index, dq.output[0], outputs) is op)
        next_op = index.producer.get(maker.input[0]) if inner else None
        if next_op is None or next_op.op_type not in MOVE_OPS:
            source = _int8_params(index, dq)
            return (nodes, dq.input[0]) if all(params == source for params in inside) else None
        inside += [_int8_params(index, maker), _int8_params(index, dq)]
        nodes.append(maker)
        op = next_op


def _attr(node: onnx.NodeProto, name: str, default: Any = None) -> Any:
    found = next((a for a in node.attribute if a.name == name), None)
    return onnx.helper.get_attribute_value(found) if found is not None else default


def _moved(index: QdqIndex, op: onnx.NodeProto, x: np.ndarray) -> np.ndarray | None:
    """``x`` moved as ``op`` moves its input (numpy), or None for an operand that is not constant."""
    kind = op.op_type
    if kind == "Identity":
        return x
    if kind == "Transpose":
        return np.transpose(x, _attr(op, "perm"))
    if kind == "Flatten":
        axis = int(_attr(op, "axis", 1))
        axis = axis + x.ndim if axis < 0 else axis
        return x.reshape(int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:])))
    if kind == "Reshape":
        shape = index.constant(op.input[1]) if len(op.input) > 1 else None
        if shape is None:
            return None
        dims = [int(d) for d in shape.reshape(-1)]
        if not _attr(op, "allowzero", 0):
            dims = [x.shape[i] if d == 0 else d for i, d in enumerate(dims)]
        return x.reshape(dims)
    axes = _attr(op, "axes")
    if axes is None and len(op.input) > 1 and op.input[1]:
        value = index.constant(op.input[1])
        if value is None:
            return None
        axes = value.reshape(-1).tolist()
    if kind == "Squeeze":
        return np.squeeze(x, tuple(int(a) for a in axes)) if axes is not None else np.squeeze(x)
    if axes is None:
        return None  # an Unsqueeze needs its axes
    rank = x.ndim + len(axes)
    return np.expand_dims(x, tuple(sorted(int(a) % rank for a in axes)))


def stream_order(x: np.ndarray) -> np.ndarray:
    """``x``'s elements in the order a core streams them: NHWC for a 4-D tensor, else as stored."""
    return (x.transpose(0, 2, 3, 1) if x.ndim == 4 else x).reshape(-1)


def stream_permutation(source_shape: tuple[int, ...], moved: np.ndarray) -> np.ndarray:
    """For each stream position of the output, the stream position in the source it takes, for
    ``moved``: the source's element indices (as stored) after the chain. O(elements)."""
    position = np.empty(moved.size, dtype=np.int64)  # stored index -> stream position in the source
    position[stream_order(np.arange(moved.size).reshape(source_shape))] = np.arange(moved.size)
    return position[stream_order(moved)]


def stream_transpose(source_shape: tuple[int, ...], moved: np.ndarray) -> tuple[int, int, int] | None:
    """(R, C, E) when the output stream of every sample is its source stream read as ``[R, C, E]``
    and written as ``[C, R, E]`` (R, C > 1; E = 1 a 2-D transpose), else None (``moved`` as for
    ``stream_permutation``). The samples are the common divisor of the source's and the output's
    axis 0 (attention's heads split ``[B, S, H*D]`` into ``[B*H, S, D]``: B samples). O(elements)."""
    samples = math.gcd(source_shape[0], moved.shape[0]) if source_shape and moved.ndim else 1
    size = moved.size // max(1, samples)
    if size < 4 or moved.size != samples * size:
        return None
    taken = stream_permutation(source_shape, moved).reshape(samples, size) - np.arange(samples)[:, None] * size
    steps = np.flatnonzero(taken[0] != np.arange(size))  # the output's first block is the source's
    block = int(steps[0]) if steps.size else size
    columns = int(taken[0, block]) // block if block < size else 0  # the next block is source row 1's first
    if columns < 2 or size % (columns * block) or size // (columns * block) < 2:
        return None
    rows = size // (columns * block)
    transposed = np.arange(size).reshape(rows, columns, block).transpose(1, 0, 2).reshape(-1)
    return (rows, columns, block) if np.array_equal(taken, np.broadcast_to(transposed, taken.shape)) else None


def channel_permutation(source_shape: tuple[int, ...], moved: np.ndarray) -> tuple[int, ...] | None:
    """``perm`` with output channel ``c`` of every pixel = source channel ``perm[c]`` of the same
    pixel, for ``moved``: the source's element indices (as stored) after the chain; None when the
    effect is not such a permutation of the source's channels, or the identity in stream order (a
    Transpose of [N, C, 1, 1] to [N, 1, 1, C]: pixels of one channel). A flatten of a feature map
    permutes its elements too, but not within the source's pixels: it is not one. O(elements)."""
    if moved.ndim not in (2, 4):
        return None
    channels = moved.shape[1]
    taken = stream_permutation(source_shape, moved).reshape(-1, channels)
    base = np.arange(taken.shape[0])[:, None] * channels
    perm = taken[0] - base[0]
    if not np.array_equal(taken, base + perm[None, :]) or not np.array_equal(np.sort(perm), np.arange(channels)):
        return None
    source_channels = source_shape[1] if len(source_shape) > 1 else source_shape[0]
    if channels != source_channels and not np.array_equal(perm, np.arange(channels)):
        return None  # pixels of the output that are not the source's (a flatten of a feature map)
    return tuple(int(c) for c in perm)


def _keeps_order(source_shape: tuple[int, ...], moved: np.ndarray) -> bool:
    """Whether the chain leaves every element where it was in stream order (a ViT's patches,
    ``Reshape [B, C, H, W] -> [B, C, H*W]`` then ``Transpose(0, 2, 1)``, read the HWC stream as it
    is). O(elements)."""
    return bool(np.array_equal(stream_permutation(source_shape, moved), np.arange(moved.size)))


def find_chain(index: QdqIndex, exit_q: onnx.NodeProto, outputs: set[str],
               shapes: Mapping[str, Any]) -> Chain | None:
    """The channel-permutation chain ending at ``exit_q`` (see the module docstring), or None.
    ``shapes``: tensor name -> an object with a ``shape`` (the graph's tensors)."""
    if _int8_params(index, exit_q) is None:
        return None
    walked = _walk(index, exit_q, outputs)
    if walked is None or walked[1] not in shapes:
        return None
    nodes, source = walked
    source_shape = tuple(int(d) for d in shapes[source].shape)
    ops = [n for n in reversed(nodes) if n.op_type in MOVE_OPS]
    x = np.arange(int(np.prod(source_shape)), dtype=np.int64).reshape(source_shape)
    stays = True
    for op in ops:
        before = x.shape
        try:
            x = _moved(index, op, x)
        except (ValueError, TypeError):  # a shape or permutation that does not fit the tensor
            return None
        if x is None:
            return None
        stays = stays and op.op_type != "Transpose" and not changes_stream_order(before, x.shape)
    if stays:
        return None
    perm = channel_permutation(source_shape, x)
    transpose = stream_transpose(source_shape, x) if perm is None and x.ndim == 3 else None
    if perm is None and transpose is None and not (x.ndim == 3 and _keeps_order(source_shape, x)):
        return None
    return Chain(source, exit_q.name, exit_q.output[0], ops[-1].name, tuple(n.name for n in reversed(nodes)),
                 perm or (), transpose or ())
