"""onnx shape inference without the weights: the same result, a fraction of the time.

``onnx.shape_inference.infer_shapes`` serializes the whole model, parses it in C++, serializes the
inferred model and parses that back: four passes over every weight byte (about 100 MB for ResNet-50
in float), where inference needs only each weight's element type and dims. Here inference runs on a
*view* of the model in which every large initializer whose values no shape or type inference can
read is declared as a graph input of the same type and dims instead; the result gets the original
initializers back.

Which initializers may go: onnx's inference functions read constant input values only for
shape-like operands (Reshape's shape, Slice's starts, Resize's scales, Range's scalars, a Pad's
pads...) and data propagation only for int32/int64 ones, all of them small. So a tensor goes when
it is not int32/int64 and has more than ``SHAPE_DATA_MAX_ELEMENTS`` elements. To keep inference
exactly as it was, a weight stays when declaring it as an input could change what inference sees:
below IR 4 an initializer that is not also a graph input (inference gives it no type there), or
one whose graph-input declaration is not exactly its own type and dims (inference would check or
merge the two).

Cost: O(nodes + small initializers) serialized instead of O(model bytes), plus one copy of the
weights into the result (``infer_shapes``; ``tensor_types``-style callers that only read types use
``inferred_view`` and skip it).

``convert_version`` does the same for onnx's opset converter, whose adapters rewrite nodes and read
only small constants; it converts the full model instead whenever the converter added, dropped,
moved or re-encoded an initializer or graph input of the view (then it might have touched a weight).
"""

from __future__ import annotations

import onnx
from google.protobuf.message import Message
from onnx import helper, shape_inference, version_converter

SHAPE_DATA_MAX_ELEMENTS = 64
"""An initializer with more elements than this (and not int32/int64) is never read by shape inference."""

SHAPE_LIKE_TYPES = frozenset({onnx.TensorProto.INT64, onnx.TensorProto.INT32})


def _copy_fields_except(source: Message, target: Message, skipped: str) -> None:
    """Copy every set field of ``source`` but ``skipped`` into ``target`` (same message type)."""
    for descriptor, value in source.ListFields():
        if descriptor.name == skipped:
            continue
        if descriptor.is_repeated:
            getattr(target, descriptor.name).extend(value)
        elif descriptor.message_type is not None:
            getattr(target, descriptor.name).CopyFrom(value)
        else:
            setattr(target, descriptor.name, value)


def _declares_exactly(value: onnx.ValueInfoProto, tensor: onnx.TensorProto) -> bool:
    """``value`` (a graph input) has exactly ``tensor``'s element type and concrete dims."""
    if not value.type.HasField("tensor_type"):
        return False
    declared = value.type.tensor_type
    if declared.elem_type != tensor.data_type or not declared.HasField("shape"):
        return False
    dims = declared.shape.dim
    return len(dims) == len(tensor.dims) and all(
        d.HasField("dim_value") and d.dim_value == size for d, size in zip(dims, tensor.dims, strict=True))


def _strippable(model: onnx.ModelProto) -> list[onnx.TensorProto]:
    """The initializers the view declares as inputs (module docstring), in graph order."""
    declared = {value.name: value for value in model.graph.input}
    chosen = []
    for tensor in model.graph.initializer:
        if tensor.data_type in SHAPE_LIKE_TYPES or _numel(tensor) <= SHAPE_DATA_MAX_ELEMENTS:
            continue
        value = declared.get(tensor.name)
        if value is None and model.ir_version < 4:
            continue
        if value is not None and not _declares_exactly(value, tensor):
            continue
        chosen.append(tensor)
    return chosen


def _numel(tensor: onnx.TensorProto) -> int:
    count = 1
    for size in tensor.dims:
        count *= size
    return count


def weightless_view(model: onnx.ModelProto) -> tuple[onnx.ModelProto, int]:
    """A model that shape inference treats exactly as ``model``, without its large weights, and
    how many weights it declares as inputs (0: ``model`` itself is returned, not a copy)."""
    stripped = _strippable(model)
    if not stripped:
        return model, 0
    names = {tensor.name for tensor in stripped}
    view = onnx.ModelProto()
    _copy_fields_except(model, view, "graph")
    _copy_fields_except(model.graph, view.graph, "initializer")
    view.graph.initializer.extend(t for t in model.graph.initializer if t.name not in names)
    inputs = {value.name for value in model.graph.input}
    view.graph.input.extend(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                            for t in stripped if t.name not in inputs)
    return view, len(stripped)


def inferred_view(model: onnx.ModelProto, **options) -> onnx.ModelProto:
    """``onnx.shape_inference.infer_shapes(model, **options)`` run on ``weightless_view(model)``:
    its nodes, value_info and outputs are those of the full inference; its graph inputs may have
    extra entries (the weights) after the model's own, and it lacks the large initializers."""
    view, _ = weightless_view(model)
    return shape_inference.infer_shapes(view, **options)


def infer_shapes(model: onnx.ModelProto, **options) -> onnx.ModelProto:
    """``onnx.shape_inference.infer_shapes(model, **options)`` (same result, same errors), with the
    large weights left out of the round trip through C++ (module docstring)."""
    view, stripped = weightless_view(model)
    inferred = shape_inference.infer_shapes(view, **options)
    return _with_model_weights(model, inferred) if stripped else inferred


def _with_model_weights(model: onnx.ModelProto, result: onnx.ModelProto) -> onnx.ModelProto:
    """``result`` (computed from ``weightless_view(model)``) with ``model``'s graph inputs count and
    its initializers back in their order, the ones the view kept taken from ``result``."""
    graph = result.graph
    inputs = list(graph.input[: len(model.graph.input)])
    del graph.input[:]
    graph.input.extend(inputs)
    computed = {tensor.name: tensor for tensor in graph.initializer}
    ordered = [computed.get(tensor.name, tensor) for tensor in model.graph.initializer]
    del graph.initializer[:]
    graph.initializer.extend(ordered)
    return result


def convert_version(model: onnx.ModelProto, target: int) -> onnx.ModelProto:
    """``onnx.version_converter.convert_version(model, target)`` (same result, same errors), the
    large weights left out of the round trip unless the converter changes an initializer (module
    docstring)."""
    view, stripped = weightless_view(model)
    converted = version_converter.convert_version(view, target)
    if not stripped:
        return converted
    if not all(_same_messages(getattr(view.graph, field), getattr(converted.graph, field))
               for field in ("initializer", "input")):
        return version_converter.convert_version(model, target)
    return _with_model_weights(model, converted)


def _same_messages(first, second) -> bool:
    """Two repeated message fields hold the same messages in the same order."""
    return [m.SerializeToString() for m in first] == [m.SerializeToString() for m in second]
