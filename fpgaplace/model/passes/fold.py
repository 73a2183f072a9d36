"""Fold per-channel affine ops (BatchNormalization, Mul/Add by a constant) into the producer.

Inference BatchNormalization is ``y = s * x + t`` per channel with
``s = scale / sqrt(var + eps)`` and ``t = bias - mean * s``. When ``x`` is the output of a
linear op with constant weights and nobody else reads ``x``, the affine map moves into the
weights (the standard folding used by TensorRT, onnxruntime and FINN's ``BatchNormToAffine``):

* ``Conv(X, W, B)``: ``W'[c] = s[c] * W[c]``, ``B' = s * B + t`` (channel axis 1 of the output);
* ``ConvTranspose(X, W, B)`` of one group: the same with ``W'[:, c] = s[c] * W[:, c]`` (its weight
  is ``[Cin, Cout, KH, KW]``);
* ``Gemm(A, B, C)``: columns of the weight scaled by ``s``; ``C' = s * beta * C + t``, beta 1;
* ``MatMul(X, W)`` with 2-D constant ``W``, optionally followed by ``Add(., b)``: columns of
  ``W`` scaled, ``b' = s * b + t`` (a missing bias becomes a new ``Add``). BatchNormalization
  normalises axis 1, which is the last axis only for rank-2 outputs, so MatMul takes a BN only
  when shape inference says the output has rank 2.

A ``Mul``/``Add`` whose other operand is a constant that only varies along the producer's
channel axis is the same affine map with ``t = 0`` / ``s = 1``; one after a BatchNormalization
(that it alone reads) moves into the batch norm's scale and bias. Each fold removes one node;
a pass is one sweep over the nodes, O(n + total weight size).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import numpy_helper

from fpgaplace.model.passes.graph_tools import (
    add_initializer,
    attribute,
    constant_value,
    consumers,
    output_names,
    producers,
    rewrites_a_copy,
    set_attribute,
    tensor_types,
)


@dataclass
class _Linear:
    """A producer that can absorb a per-channel affine map on its output."""

    node: onnx.NodeProto
    weight_input: int  # which input of ``node`` holds the weight
    weight_axis: int  # axis of the weight indexed by output channel
    output_channel_axis: int  # 1 (Conv) or -1 (Gemm/MatMul): axis of the output it scales
    output_rank: int | None
    bias_node: onnx.NodeProto | None = None  # Add(b) after a MatMul, if any


def _fresh_name(model: onnx.ModelProto, base: str) -> str:
    taken = {t.name for t in model.graph.initializer} | {
        o for n in model.graph.node for o in n.output}
    k = 0
    while f"{base}_folded{k}" in taken:
        k += 1
    return f"{base}_folded{k}"


def _store(model: onnx.ModelProto, base: str, value: np.ndarray) -> str:
    name = _fresh_name(model, base)
    add_initializer(model, numpy_helper.from_array(value, name))
    return name


def _sole_reader(model: onnx.ModelProto, tensor: str) -> bool:
    return len(consumers(model.graph).get(tensor, [])) == 1 and tensor not in output_names(
        model.graph)


def _as_linear(model: onnx.ModelProto, tensor: str, types: dict) -> _Linear | None:
    """The foldable linear producer of ``tensor`` (read by one node only), or None."""
    if not _sole_reader(model, tensor):
        return None
    node = producers(model.graph).get(tensor)
    if node is None or node.domain not in ("", "ai.onnx"):
        return None
    known = types.get(tensor)
    rank = len(known.shape) if known is not None and known.shape is not None else None
    if node.op_type == "Conv":
        weight = constant_value(model, node.input[1])
        has_bias = len(node.input) > 2 and node.input[2]
        if weight is None or (has_bias and constant_value(model, node.input[2]) is None):
            return None
        return _Linear(node, 1, 0, 1, weight.ndim)
    if node.op_type == "ConvTranspose" and attribute(node, "group", 1) == 1:
        weight = constant_value(model, node.input[1])
        has_bias = len(node.input) > 2 and node.input[2]
        if weight is None or (has_bias and constant_value(model, node.input[2]) is None):
            return None
        return _Linear(node, 1, 1, 1, weight.ndim)
    if node.op_type == "Gemm":
        weight = constant_value(model, node.input[1])
        has_c = len(node.input) > 2 and node.input[2]
        if weight is None or (has_c and constant_value(model, node.input[2]) is None):
            return None
        return _Linear(node, 1, 0 if attribute(node, "transB", 0) else 1, -1, 2)
    if node.op_type == "MatMul":
        weight = constant_value(model, node.input[1])
        if weight is None or weight.ndim != 2:
            return None
        return _Linear(node, 1, 1, -1, rank)
    if node.op_type == "Add":
        inner = _as_linear(model, node.input[0], types)
        bias = constant_value(model, node.input[1])
        if inner is None or inner.node.op_type != "MatMul" or bias is None:
            return None
        if _channel_vector(bias, -1, rank, inner_size(model, inner)) is None:
            return None
        inner.bias_node = node
        inner.output_rank = rank
        return inner
    return None


def inner_size(model: onnx.ModelProto, linear: _Linear) -> int:
    """Number of output channels of a linear producer (from its weight)."""
    weight = constant_value(model, linear.node.input[linear.weight_input])
    return int(weight.shape[linear.weight_axis])


def _channel_vector(const: np.ndarray, axis: int, rank: int | None,
                    channels: int) -> np.ndarray | None:
    """``const`` as a length-``channels`` vector if broadcasting it against an output of rank
    ``rank`` only varies along ``axis`` (1 or -1) and never enlarges the output; else None."""
    const = np.asarray(const)
    if const.size == 1:
        return np.full(channels, const.reshape(()).item(), dtype=np.float64)
    if rank is None or const.ndim > rank:
        return None
    padded = (1,) * (rank - const.ndim) + const.shape
    channel_axis = axis % rank
    if any(d != 1 for i, d in enumerate(padded) if i != channel_axis):
        return None
    if padded[channel_axis] != channels:
        return None
    return const.reshape(-1).astype(np.float64)


def _bias_input(model: onnx.ModelProto, node: onnx.NodeProto, channels: int) -> np.ndarray:
    """The bias a Conv or Gemm adds (Gemm: times ``beta``) as float64; zeros without one."""
    if len(node.input) <= 2 or not node.input[2]:
        return np.zeros(channels)
    bias = constant_value(model, node.input[2])
    if node.op_type == "Gemm":
        bias = bias * attribute(node, "beta", 1.0)
    return bias.astype(np.float64)


def _absorb(model: onnx.ModelProto, linear: _Linear, scale: np.ndarray,
            shift: np.ndarray, consumer: onnx.NodeProto) -> None:
    """Move ``y = scale * x + shift`` (per channel) into ``linear``; drop ``consumer``."""
    node = linear.node
    weight = constant_value(model, node.input[linear.weight_input])
    dtype = weight.dtype
    shape = [1] * weight.ndim
    shape[linear.weight_axis] = -1
    new_weight = (weight.astype(np.float64) * scale.reshape(shape)).astype(dtype)
    node.input[linear.weight_input] = _store(model, node.input[linear.weight_input], new_weight)
    if node.op_type in ("Conv", "ConvTranspose", "Gemm"):
        bias = (_bias_input(model, node, len(scale)) * scale + shift).astype(dtype)
        name = _store(model, f"{node.name or node.output[0]}_bias", bias)
        if len(node.input) > 2:
            node.input[2] = name
        else:
            node.input.append(name)
        if node.op_type == "Gemm":
            set_attribute(node, "beta", 1.0)
    elif linear.bias_node is not None:
        old = constant_value(model, linear.bias_node.input[1]).astype(np.float64)
        bias = (old * scale + shift).astype(dtype) if old.size == len(scale) else \
            (np.full(len(scale), old.reshape(()).item()) * scale + shift).astype(dtype)
        linear.bias_node.input[1] = _store(model, linear.bias_node.input[1], bias)
    last = linear.bias_node or node
    if node.op_type == "MatMul" and linear.bias_node is None and np.any(shift != 0):
        # no bias to absorb the shift: the consumer becomes Add(x, shift)
        shift_name = _store(model, f"{node.name or node.output[0]}_shift", shift.astype(dtype))
        del consumer.input[:]
        consumer.input.extend([last.output[0], shift_name])
        del consumer.attribute[:]
        consumer.op_type, consumer.domain = "Add", ""
        return
    last.output[0] = consumer.output[0]
    model.graph.node.remove(consumer)


def _batchnorm_affine(model: onnx.ModelProto, node: onnx.NodeProto):
    values = [constant_value(model, name) for name in node.input[1:5]]
    if any(v is None for v in values) or attribute(node, "spatial", 1) != 1:
        return None
    if any(name for name in node.output[1:]) or attribute(node, "training_mode", 0):
        return None
    scale, bias, mean, var = (np.asarray(v, dtype=np.float64) for v in values)
    s = scale / np.sqrt(var + attribute(node, "epsilon", 1e-5))
    return s, bias - mean * s


@rewrites_a_copy
def fold_batchnorm(model: onnx.ModelProto) -> int:
    """Fold inference BatchNormalization into the preceding Conv / ConvTranspose / Gemm / MatMul(+Add)."""
    types = tensor_types(model)
    changes = 0
    for node in list(model.graph.node):
        if node.op_type != "BatchNormalization" or node.domain not in ("", "ai.onnx"):
            continue
        affine = _batchnorm_affine(model, node)
        linear = _as_linear(model, node.input[0], types)
        if affine is None or linear is None:
            continue
        if linear.output_channel_axis == -1 and linear.output_rank != 2:
            continue
        if len(affine[0]) != inner_size(model, linear):
            continue
        _absorb(model, linear, affine[0], affine[1], node)
        changes += 1
    return changes


def _into_batchnorm(model: onnx.ModelProto, consumer: onnx.NodeProto, data_pos: int, const: np.ndarray,
                    types: dict) -> bool:
    """Fold ``consumer`` (a Mul or Add of the per-channel constant ``const``) into the inference
    BatchNormalization whose output only it reads (DenseNet's BN -> Mul -> Add, Caffe's BatchNorm +
    Scale): a Mul by ``v`` multiplies the batch norm's scale and bias by ``v``, an Add of ``v`` adds
    ``v`` to its bias. Whether it folded. O(C)."""
    tensor = consumer.input[data_pos]
    norm = producers(model.graph).get(tensor)
    if norm is None or norm.op_type != "BatchNormalization" or norm.domain not in ("", "ai.onnx") \
            or not _sole_reader(model, tensor) or _batchnorm_affine(model, norm) is None:
        return False
    known, out = types.get(tensor), types.get(consumer.output[0])
    if known is None or known.shape is None or out is None or out.shape != known.shape:
        return False
    scale, bias = (np.asarray(constant_value(model, name)) for name in norm.input[1:3])
    vector = _channel_vector(const, 1, len(known.shape), scale.size)
    if vector is None:
        return False
    if consumer.op_type == "Mul":
        scale, bias = scale * vector, bias * vector
    else:
        bias = bias + vector
    norm.input[1] = _store(model, norm.input[1], scale.astype(const.dtype))
    norm.input[2] = _store(model, norm.input[2], bias.astype(const.dtype))
    norm.output[0] = consumer.output[0]
    model.graph.node.remove(consumer)
    return True


@rewrites_a_copy
def fold_channel_affine(model: onnx.ModelProto) -> int:
    """Fold ``Mul``/``Add`` by a per-output-channel constant into Conv / Gemm / MatMul(+Add), or
    into a BatchNormalization (``_into_batchnorm``)."""
    types = tensor_types(model)
    changes = 0
    for node in list(model.graph.node):
        if node.op_type not in ("Mul", "Add") or node.domain not in ("", "ai.onnx"):
            continue
        for data_pos in (0, 1):
            const = constant_value(model, node.input[1 - data_pos])
            if const is None or not np.issubdtype(np.asarray(const).dtype, np.floating):
                continue
            if _into_batchnorm(model, node, data_pos, np.asarray(const), types):
                changes += 1
                break
            linear = _as_linear(model, node.input[data_pos], types)
            if linear is None or (node.op_type == "Add" and linear.node.op_type == "MatMul"
                                  and linear.bias_node is None):
                continue  # MatMul followed by Add(bias) is the MatMul+Add form; keep it
            channels = inner_size(model, linear)
            vector = _channel_vector(const, linear.output_channel_axis, linear.output_rank,
                                     channels)
            out_type = types.get(node.output[0])
            in_type = types.get(node.input[data_pos])
            if vector is None or out_type is None or in_type is None or \
                    out_type.shape != in_type.shape:
                continue
            if node.op_type == "Mul":
                _absorb(model, linear, vector, np.zeros(channels), node)
            else:
                _absorb(model, linear, np.ones(channels), vector, node)
            changes += 1
            break
    return changes

