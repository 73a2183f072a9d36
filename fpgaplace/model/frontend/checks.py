"""The front end's checks of a model and of what the user gives with it: one-line errors naming the
file, node, tensor or input and what was expected (limits on dims, elements and bytes; element
types; protobuf and text fields; a topological order of the nodes; onnx's strict check).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import helper, shape_inference

from fpgaplace.model.frontend.shapes import fully_known
from fpgaplace.model.ir import outer_references
from fpgaplace.model.ops import STANDARD_DOMAINS
from fpgaplace.model.passes import inference
from fpgaplace.util import graphs
from fpgaplace.util.errors import FpgaplaceError, first_line

InputShapes = Mapping[str, Sequence[int]]

MAX_DIM = 2**31 - 1
"""The largest dim ``input_shapes`` may give (ONNX runtimes index with 32-bit ints)."""


MAX_INPUT_ELEMENTS = 2**40
"""The most elements ``input_shapes`` may give one input (a larger tensor is surely a typo)."""


MAX_TENSOR_BYTES = 2**32
"""The most bytes one tensor may have (4 GiB): beyond it a dim is surely wrong, and splitting or
profiling the model would try to allocate it."""


def check_batch(batch: int, source: str) -> None:
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_DIM:
        raise FpgaplaceError(f"{source}: batch must be an integer in 1..{MAX_DIM}, got {batch!r}")


def check_input_shapes(input_shapes: InputShapes | None, source: str) -> dict[str, tuple[int, ...]]:
    """``input_shapes`` as a dict of int tuples; an error names the entry and dim that is not a
    whole number in 1..MAX_DIM, or an input with more than MAX_INPUT_ELEMENTS elements."""
    if input_shapes is None:
        return {}
    if not isinstance(input_shapes, Mapping):
        raise FpgaplaceError(
            f"{source}: input_shapes must map input names to dims, got {type(input_shapes).__name__}"
        )
    checked = {}
    for name, dims in input_shapes.items():
        if not isinstance(name, str) or not name:
            raise FpgaplaceError(f"{source}: input_shapes key {name!r} is not an input name; expected a string")
        if isinstance(dims, str | bytes) or not isinstance(dims, Sequence | np.ndarray):
            raise FpgaplaceError(f"{source}: input_shapes['{name}'] is {dims!r}; expected a tuple of dims")
        for axis, dim in enumerate(dims):
            if isinstance(dim, bool) or not isinstance(dim, int | np.integer) or not 1 <= dim <= MAX_DIM:
                raise FpgaplaceError(
                    f"{source}: input_shapes['{name}'] dim {axis} is {dim!r}; expected a whole number in 1..{MAX_DIM}"
                )
        shape = tuple(int(dim) for dim in dims)
        if math.prod(shape) > MAX_INPUT_ELEMENTS:
            raise FpgaplaceError(
                f"{source}: input_shapes['{name}'] = {shape} has {math.prod(shape)} elements; "
                f"expected at most 2**40 = {MAX_INPUT_ELEMENTS}"
            )
        checked[name] = shape
    return checked


UNKNOWN_DIM = -1  # how some exporters (paddle2onnx) write a dim they do not know


def read_unknown_dims(model: onnx.ModelProto, notes: list[str]) -> None:
    """A declared dim of -1 (``UNKNOWN_DIM``) is read as unknown, in place: the batch or
    ``input_shapes`` then binds it as it binds a symbolic dim. Noted once per tensor. O(dims)."""
    graph = model.graph
    inputs = {value.name for value in graph.input}
    for value in [*graph.input, *graph.output, *graph.value_info]:
        dims = value.type.tensor_type.shape.dim if value.type.HasField("tensor_type") else []
        unknown = [axis for axis, dim in enumerate(dims) if dim.HasField("dim_value") and dim.dim_value == UNKNOWN_DIM]
        for axis in unknown:
            dims[axis].ClearField("dim_value")
        if unknown and value.name in inputs:
            notes.append(f"input '{value.name}' declares dim {', '.join(map(str, unknown))} as -1; read as symbolic")


def check_element_types(model: onnx.ModelProto, source: str) -> None:
    """Every declared tensor (input, output, value_info, initializer) has an element type ONNX
    defines and no negative dim; an error names the tensor and the type number or dim."""
    graph = model.graph
    defined = set(onnx.TensorProto.DataType.values())
    declared = [(v.name, v.type.tensor_type.elem_type) for v in [*graph.input, *graph.output, *graph.value_info]
                if v.type.HasField("tensor_type")]
    declared += [(t.name, t.data_type) for t in graph.initializer]
    for name, elem_type in declared:
        if elem_type not in defined:
            raise FpgaplaceError(f"{source}: tensor '{name}' has element type {elem_type}, which ONNX does not "
                                 f"define; expected one of onnx.TensorProto's data types")
    for value in [*graph.input, *graph.output, *graph.value_info]:
        dims = value.type.tensor_type.shape.dim if value.type.HasField("tensor_type") else []
        for axis, dim in enumerate(dims):
            if dim.HasField("dim_value") and dim.dim_value < 0:
                raise FpgaplaceError(f"{source}: tensor '{value.name}' dim {axis} is {dim.dim_value}; "
                                     f"expected a size >= 0, -1 (unknown) or a symbolic name")


def check_tensor_bytes(name: str, shape: Sequence[int], elem_type: int, source: str) -> None:
    """A tensor of ``shape`` stays within ``MAX_TENSOR_BYTES`` (checked before anything allocates it)."""
    try:
        itemsize = np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).itemsize
    except (KeyError, TypeError, ValueError):
        itemsize = 1
    size = math.prod(shape) * itemsize
    if size > MAX_TENSOR_BYTES:
        raise FpgaplaceError(
            f"{source}: tensor '{name}' of shape {list(shape)} takes {size} bytes; expected at most "
            f"2**32 = {MAX_TENSOR_BYTES} (MAX_TENSOR_BYTES), so a dim is surely wrong"
        )


def check_strictly(model: onnx.ModelProto, source: str) -> None:
    """onnx shape inference in strict mode, types checked, over the resolved model: an op whose
    attributes, input types or shapes it rejects (zero strides, an int4 Conv input, mismatched dims)
    or a declared shape contradicting the inferred one is an error naming the op. Then every tensor
    is checked against ``MAX_TENSOR_BYTES``."""
    try:
        inference.inferred_view(model, check_type=True, strict_mode=True, data_prop=True)
    except shape_inference.InferenceError as exc:
        reason = _inference_error(exc)
        if "Inferred elem type differs" not in reason:  # a stale declared type: the code generator names it
            raise FpgaplaceError(f"{source}: {reason}; expected shapes onnx shape inference accepts") from None
    except (ValueError, RuntimeError):
        pass  # over the protobuf limit, or inference itself failing: the notes already say so
    graph = model.graph
    for value in [*graph.input, *graph.value_info, *graph.output]:
        tensor = value.type.tensor_type
        if value.type.HasField("tensor_type") and fully_known(tensor):
            check_tensor_bytes(value.name, [d.dim_value for d in tensor.shape.dim], tensor.elem_type, source)
    _check_conv_channels(model, source)


_INFERENCE_ERROR = re.compile(r"\(op_type:(?P<type>[^,]*), node name: (?P<name>[^)]*)\): (?P<reason>.*)")


def _inference_error(exc: Exception) -> str:
    """An onnx ``InferenceError`` as "op 'conv' (Conv): reason" (its first error)."""
    text = first_line(exc)
    for prefix in ("[ShapeInferenceError] Inference error(s): ", "[ShapeInferenceError] ", "[TypeInferenceError] "):
        text = text.replace(prefix, "")
    match = _INFERENCE_ERROR.search(text)
    return f"op '{match['name']}' ({match['type']}): {match['reason']}" if match else text


def _check_conv_channels(model: onnx.ModelProto, source: str) -> None:
    """A ``Conv``'s input channels equal its weight's input channels times ``group`` (onnx shape
    inference does not check it; onnxruntime fails on the first run)."""
    shapes = _known_value_shapes(model)
    for node in model.graph.node:
        if node.op_type != "Conv" or node.domain not in STANDARD_DOMAINS or len(node.input) < 2:
            continue
        x, w = shapes.get(node.input[0]), shapes.get(node.input[1])
        group = next((a.i for a in node.attribute if a.name == "group"), 1)
        if x and w and len(x) >= 2 and len(w) >= 2 and x[1] != w[1] * group:
            raise FpgaplaceError(
                f"{source}: op '{node.name or node.output[0]}' (Conv): input '{node.input[0]}' has {x[1]} channels; "
                f"expected {w[1] * group} (weight '{node.input[1]}' {list(w)}, group {group})"
            )


def _known_value_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    graph = model.graph
    shapes = {t.name: tuple(t.dims) for t in graph.initializer}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        if value.type.HasField("tensor_type") and fully_known(value.type.tensor_type):
            shapes.setdefault(value.name, tuple(d.dim_value for d in value.type.tensor_type.shape.dim))
    return shapes


def check_text(message, source: str) -> None:
    """Every string field of ``message`` and the messages in it (names, op types, domains, ...) is
    valid UTF-8: protobuf hands an invalid one over as bytes, which would fail deep inside a pass.
    An error names the field. O(messages in the model); tensor payloads are not walked."""
    from google.protobuf.descriptor import FieldDescriptor

    stack = [message]
    while stack:
        current = stack.pop()
        for field, value in current.ListFields():
            repeated = field.is_repeated if hasattr(field, "is_repeated") else field.label == field.LABEL_REPEATED
            values = value if repeated else [value]
            if field.type == FieldDescriptor.TYPE_MESSAGE:
                stack.extend(values)
            elif field.type == FieldDescriptor.TYPE_STRING and any(not isinstance(v, str) for v in values):
                bad = next(v for v in values if not isinstance(v, str))
                raise FpgaplaceError(f"{source}: a string in the model is not valid UTF-8 ({type(current).__name__}."
                                     f"{field.name} = {bytes(bad)[:40]!r}); expected ONNX names and attributes as text")


def check_proto(model: onnx.ModelProto, source: str) -> None:
    if not isinstance(model, onnx.ModelProto):
        raise FpgaplaceError(f"{source}: expected an onnx.ModelProto, got {type(model).__name__}")
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise FpgaplaceError(f"{source}: not an ONNX model (no IR version or no graph)")
    if not model.graph.node or not model.graph.output:
        raise FpgaplaceError(f"{source}: the ONNX graph has no nodes or no outputs")


def sort_nodes(model: onnx.ModelProto, source: str) -> list[int]:
    """Order ``model``'s nodes topologically (stable); a cycle is an error naming an op on it.

    Returns each sorted node's position in the original node list.
    """
    nodes = list(model.graph.node)
    producer: dict[str, int] = {}
    for i, node in enumerate(nodes):
        for t in node.output:
            if t and t in producer:
                raise FpgaplaceError(
                    f"{source}: tensor '{t}' is produced by two nodes ('{_label(nodes, producer[t])}' "
                    f"and '{_label(nodes, i)}'); expected one producer per tensor"
                )
            if t:
                producer[t] = i
    edges = [(producer[t], i) for i, node in enumerate(nodes)
             for t in [*node.input, *outer_references(node)] if t in producer]
    try:
        order = graphs.topological_order(len(nodes), edges)
    except graphs.CycleError as cycle:
        raise FpgaplaceError(
            f"{source}: the graph has a cycle through node '{_label(nodes, cycle.node)}'; expected a DAG"
        ) from None
    if order != list(range(len(nodes))):
        sorted_nodes = [nodes[i] for i in order]
        del model.graph.node[:]
        model.graph.node.extend(sorted_nodes)
    return order


def _label(nodes: list[onnx.NodeProto], i: int) -> str:
    return nodes[i].name or f"{nodes[i].op_type}_{i}"
