"""Every tensor's shape and element type: onnx shape inference (strict off, with data propagation;
contrib and QONNX ops stand in as default-domain proxies; the large weights stay out,
``fpgaplace.model.passes.inference``), then one onnxruntime run for what inference leaves unknown
(``fpgaplace.util.onnxrt.run_shapes``).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx
from onnx import helper

from fpgaplace.model import ops
from fpgaplace.model.passes import inference, qonnx
from fpgaplace.model.passes.graph_tools import producers
from fpgaplace.util import onnxrt  # onnxrt: imported first, it quiets onnxruntime's logger
from fpgaplace.util.errors import FpgaplaceError, first_line

QONNX_DOMAINS = qonnx.QONNX_DOMAINS


QONNX_QUANTIZERS = qonnx.QONNX_QUANTIZERS
"""QONNX ops that quantize a tensor to a grid of some bits and keep its shape: read as the bit width
of their output (``TensorInfo.quant_bits``), not costed as work (arXiv:2206.07527, the QONNX spec),
and run by onnxruntime as the model-local functions ``fpgaplace.model.passes.qonnx`` adds."""


def infer_shapes(model: onnx.ModelProto, source: str, notes: list[str]) -> onnx.ModelProto:
    """onnx shape inference, strict off; data propagation first, plain inference as fallback.

    onnx infers no shapes for contrib ops, so inference runs first on a copy in which each
    contrib node with a shape proxy (``fpgaplace.model.ops.shape_proxy``, e.g. FusedConv -> Conv) is
    replaced by it; the types found there are put on ``model``. If that copy fails, ``model``
    itself is inferred."""
    proxied = _with_shape_proxies(model)
    failure = ""
    for candidate in ([proxied] if proxied is not None else []) + [model]:
        for data_prop in (True, False):
            try:
                infer = inference.infer_shapes if candidate is model else inference.inferred_view  # types only
                inferred = infer(candidate, check_type=False, strict_mode=False, data_prop=data_prop)
            except Exception as exc:  # inference raises InferenceError, ValueError or RuntimeError
                failure = first_line(exc)
                continue
            return inferred if candidate is model else _with_types_of(model, inferred)
    notes.append(f"shape inference failed ({failure}); only declared shapes are known")
    return model


def _with_shape_proxies(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """A copy of ``model`` with its top-level contrib nodes replaced by their shape proxies;
    None if no node has one."""
    proxies = [_qonnx_shape_proxy(node) if is_qonnx_quantizer(node) else ops.shape_proxy(node)
               for node in model.graph.node]
    if all(proxy is None for proxy in proxies):
        return None
    proxied = onnx.ModelProto()
    proxied.CopyFrom(model)
    del proxied.graph.node[:]
    for node, proxy in zip(model.graph.node, proxies, strict=True):
        proxied.graph.node.extend(proxy or [node])
    return proxied


def is_qonnx_quantizer(node: onnx.NodeProto) -> bool:
    return qonnx.is_quantizer(node)


def attach_qonnx_functions(model: onnx.ModelProto, source: str, notes: list[str]) -> None:
    """Give a QONNX model the functions that let onnxruntime run its quantizers (in place, noted;
    ``upgrade_old_opset`` has brought its opset to the functions' oldest)."""
    added = qonnx.attach_functions(model, source)
    if added:
        notes.append(f"QONNX: {added} quantizer types run in onnxruntime as model-local functions")


def _qonnx_shape_proxy(node: onnx.NodeProto) -> list[onnx.NodeProto]:
    """A QONNX quantizer keeps its input's shape and type: an Identity stands in for inference."""
    return [helper.make_node("Identity", [node.input[0]], [node.output[0]])]


def qonnx_bits(node: onnx.NodeProto, values: Mapping[str, np.ndarray]) -> int | None:
    """The bit width a QONNX quantizer's output has: 1 for BipolarQuant, else its ``bitwidth``
    (Quant, input 3) or ``out_bitwidth`` (Trunc, input 4, or 5 in Trunc version 2 with its
    ``out_scale`` input) when that is a constant scalar."""
    if node.op_type == "BipolarQuant":
        return 1
    position = 3 if node.op_type == "Quant" else 4 + (len(node.input) > 5)
    value = values.get(node.input[position]) if len(node.input) > position else None
    if value is None or value.size != 1 or not np.isfinite(value).all() or not 1 <= float(value.flat[0]) <= 64:
        return None
    return int(round(float(value.flat[0])))


def _with_types_of(model: onnx.ModelProto, inferred: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` (its own nodes) with the value_info and output types of ``inferred``, a model
    with the same tensors plus, maybe, the proxies' own (which are left out)."""
    result = onnx.ModelProto()
    result.CopyFrom(model)
    produced = {t for node in model.graph.node for t in node.output}
    del result.graph.value_info[:]
    result.graph.value_info.extend(v for v in inferred.graph.value_info if v.name in produced)
    for output, typed in zip(result.graph.output, inferred.graph.output, strict=True):
        output.type.CopyFrom(typed.type)
    return result


def resolve_shapes(model: onnx.ModelProto, positions: list[int], source: str,
                    notes: list[str]) -> tuple[onnx.ModelProto, list[int]]:
    """Make every top-level tensor shape concrete after binding: fold the static Shape-driven
    subgraphs to constants (``passes.shapes``) and infer again, to a fixpoint; then take the
    shapes still unknown from one onnxruntime run of the bound model (``onnxrt.run_shapes``) and
    fold again. A shape still unknown is an error naming the op that produces it.

    Returns the model and each remaining node's position in the original node list."""
    from fpgaplace.model.passes.shapes import fold_static_shapes_to_fixpoint

    position_of = {_node_key(node): position for node, position in zip(model.graph.node, positions, strict=True)}

    def infer(candidate: onnx.ModelProto) -> onnx.ModelProto:
        return infer_shapes(candidate, source, notes)

    model, folded = fold_static_shapes_to_fixpoint(model, infer)
    unknown = _unknown_tensors(model)
    if unknown:
        try:
            found = onnxrt.run_shapes(model, unknown, source)
        except FpgaplaceError as error:
            reason = str(error).removeprefix(f"{source}: ")
            raise FpgaplaceError(_unresolved_message(model, unknown, source, reason)) from None
        _set_tensor_types(model, found)
        notes.append(f"the shapes of {len(found)} tensors onnx shape inference left unknown are those of an "
                     f"onnxruntime run of the bound model (e.g. '{next(iter(found), '')}')")
        model, more = fold_static_shapes_to_fixpoint(model, infer)
        folded += more
        left = [t for t in _unknown_tensors(model) if t not in found]
        if left:
            raise FpgaplaceError(_unresolved_message(model, left, source, "an onnxruntime run does not give it"))
    if folded:
        notes.append(f"{folded} nodes computing static shapes (Shape, Gather, Concat, ...) folded to constants")
    return model, [position_of.get(_node_key(node), -1) for node in model.graph.node]


def _node_key(node: onnx.NodeProto) -> tuple[str, ...]:
    return (node.op_type, *node.output)


def _unknown_tensors(model: onnx.ModelProto) -> list[str]:
    """The outputs of top-level nodes whose type is missing or is a tensor with an unknown rank
    or dim (a sequence or map type counts as known)."""
    values = {v.name: v for v in [*model.graph.input, *model.graph.value_info, *model.graph.output]}
    unknown = []
    for node in model.graph.node:
        for t in node.output:
            value = values.get(t)
            if not t:
                continue
            if value is None or not value.type.WhichOneof("value"):
                unknown.append(t)
            elif value.type.HasField("tensor_type") and not fully_known(value.type.tensor_type):
                unknown.append(t)
    return unknown


def fully_known(tensor_type: onnx.TypeProto.Tensor) -> bool:
    return (tensor_type.elem_type != onnx.TensorProto.UNDEFINED and tensor_type.HasField("shape")
            and all(d.HasField("dim_value") for d in tensor_type.shape.dim))


def _set_tensor_types(model: onnx.ModelProto, found: dict[str, tuple[tuple[int, ...], int] | None]) -> None:
    """Record the shapes and element types a run found as value_info (or on the graph outputs)."""
    graph = model.graph
    outputs = {v.name: v for v in graph.output}
    typed = {t: helper.make_tensor_value_info(t, elem_type, list(shape))
             for t, known in found.items() if known is not None for shape, elem_type in [known]}
    kept = [v for v in graph.value_info if v.name not in typed]
    del graph.value_info[:]
    graph.value_info.extend(kept)
    for t, value in typed.items():
        if t in outputs:
            outputs[t].type.CopyFrom(value.type)
        else:
            graph.value_info.append(value)


def _unresolved_message(model: onnx.ModelProto, unknown: list[str], source: str, reason: str) -> str:
    node = producers(model.graph)[unknown[0]]
    label = node.name or f"{node.op_type} producing '{unknown[0]}'"
    others = f" (and {len(unknown) - 1} more tensors)" if len(unknown) > 1 else ""
    return (f"{source}: op '{label}' ({node.op_type}): the shape of its output '{unknown[0]}'{others} is unknown to "
            f"onnx shape inference, and {reason}; expected static shapes once the inputs are bound")
