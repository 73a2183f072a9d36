"""ONNX front end: an ONNX file or ModelProto -> ``OpGraph`` with shapes, bytes and MACs.

Steps: read (with external data from the file's folder), sort the nodes topologically (a cycle
is an error naming an op on it), bind the graph inputs' dims (those ``input_shapes`` gives, then
the symbolic batch dim of every other input to ``batch``; any other dim left unbound is an error
naming it), check with ``onnx.checker``, run onnx
shape inference (strict off, with data propagation; contrib ops stand in as the default-domain
ops ``fpgaplace.model.ops`` names; the large weights stay out of it, ``fpgaplace.model.passes.inference``),
then build the ops. Nodes whose inputs are all constant
(initializers or outputs of other such nodes) are folded into parameters rather than kept as
ops (see ``fpgaplace.model.ir``).

Each op's MACs, FPGA support and foldability come from its class in ``fpgaplace.model.ops``, whose
docstring states what counts as a MAC. A control-flow op (If, Loop, Scan) is costed from its
bodies (``fpgaplace.model.ops.control_flow_cost``, given the top-level shapes, element types and small
constants such as a Loop's trip count), and the graph's notes say which branch or trip count was
used. The published 4.09 G for ResNet-50 and 19.6 G for VGG-19
count conv and FC MACs only; ``dot_product_macs`` gives that figure, ``OpGraph.total_macs``
adds the (small) rest.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import helper, numpy_helper, shape_inference

from fpgaplace.model import ops
from fpgaplace.model.ir import Op, OpGraph, TensorInfo, outer_references, unique_op_names
from fpgaplace.model.ops import STANDARD_DOMAINS
from fpgaplace.model.passes import inference, qonnx
from fpgaplace.util import graphs, onnxrt  # onnxrt: imported first, it quiets onnxruntime's logger
from fpgaplace.util.errors import FpgaplaceError, first_line

MIN_OPSET, MAX_OPSET = 9, 21
MAX_DIM = 2**31 - 1
"""The largest dim ``input_shapes`` may give (ONNX runtimes index with 32-bit ints)."""
MAX_INPUT_ELEMENTS = 2**40
"""The most elements ``input_shapes`` may give one input (a larger tensor is surely a typo)."""
MAX_TENSOR_BYTES = 2**32
"""The most bytes one tensor may have (4 GiB): beyond it a dim is surely wrong, and splitting or
profiling the model would try to allocate it."""

InputShapes = Mapping[str, Sequence[int]]

QONNX_DOMAINS = qonnx.QONNX_DOMAINS
QONNX_QUANTIZERS = qonnx.QONNX_QUANTIZERS
"""QONNX ops that quantize a tensor to a grid of some bits and keep its shape: read as the bit width
of their output (``TensorInfo.quant_bits``), not costed as work (arXiv:2206.07527, the QONNX spec),
and run by onnxruntime as the model-local functions ``fpgaplace.model.passes.qonnx`` adds."""

FPGA_OPS: frozenset[str] = ops.op_types(lambda op_class: op_class.fpga)
"""Op types the FPGA cores can run (a view of ``fpgaplace.model.ops``, which decides)."""


def dot_product_macs(graph: OpGraph) -> int:
    """MACs of the dot-product ops only: convolution, matrix-product, attention and recurrent ops,
    those in control-flow bodies included (the published convention counts conv and FC layers)."""
    return sum(op.macs if ops.is_dot_product(op.op_type, op.domain) else op.body_dot_product_macs
               for op in graph.ops.values())


# ---- loading -------------------------------------------------------------------------------


def load_onnx(path: str | Path, batch: int = 1, input_shapes: InputShapes | None = None) -> OpGraph:
    """Load the ONNX file ``path`` (external data from its folder) as an ``OpGraph``.

    ``input_shapes`` maps graph input names to their dims (see ``from_model``)."""
    path = Path(path)
    source = str(path)
    _check_batch(batch, source)
    _check_input_shapes(input_shapes, source)
    if not path.exists():
        raise FpgaplaceError(f"{source}: no such file; expected an ONNX model")
    if not path.is_file():
        raise FpgaplaceError(f"{source}: is not a file; expected an ONNX model")
    if path.stat().st_size == 0:
        raise FpgaplaceError(f"{source}: the file is empty; expected an ONNX model")
    try:
        model = onnx.load(source, load_external_data=False)
    except (DecodeError, ValueError, TypeError, RuntimeError, OSError) as exc:
        raise FpgaplaceError(f"{source}: not a valid ONNX protobuf ({first_line(exc)})") from None
    _check_proto(model, source)
    try:
        from onnx.external_data_helper import load_external_data_for_model

        load_external_data_for_model(model, str(path.parent))
    except (OSError, ValueError, RuntimeError, onnx.checker.ValidationError) as exc:
        raise FpgaplaceError(f"{source}: cannot read the model's external data ({first_line(exc)})") from None
    return from_model(model, batch=batch, source=source, input_shapes=input_shapes)


def from_model(
    model: onnx.ModelProto, batch: int = 1, source: str = "<model>", input_shapes: InputShapes | None = None
) -> OpGraph:
    """Build the ``OpGraph`` of an in-memory model (not modified). ``source`` names it in errors.

    ``input_shapes`` maps graph input names to their dims: symbolic or unknown dims take the
    given values (the same symbol elsewhere in the graph too), a fixed dim must agree, and
    ``batch`` binds only the inputs it does not name: their symbolic axis 0. An input whose batch is
    fixed keeps it when ``batch`` is 1 (the default); another ``batch`` is a ``FixedBatchError``."""
    _check_batch(batch, source)
    given = _check_input_shapes(input_shapes, source)
    _check_proto(model, source)
    _check_text(model, source)
    work = onnx.ModelProto()
    work.CopyFrom(model)
    notes: list[str] = []
    positions = _sort_nodes(work, source)
    if _upgrade_old_opset(work, source, notes):
        positions = list(range(len(work.graph.node)))  # the converter rebuilt the node list
    _check_element_types(work, source)
    _attach_qonnx_functions(work, source, notes)
    _bind_inputs(work, batch, given, source, notes)
    _run_checker(work, source, notes)
    work = _infer_shapes(work, source, notes)
    work, positions = _resolve_shapes(work, positions, source, notes)
    _check_strictly(work, source)
    return _build(work, positions, source, notes)


def _check_batch(batch: int, source: str) -> None:
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_DIM:
        raise FpgaplaceError(f"{source}: batch must be an integer in 1..{MAX_DIM}, got {batch!r}")


def _check_input_shapes(input_shapes: InputShapes | None, source: str) -> dict[str, tuple[int, ...]]:
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


def _check_element_types(model: onnx.ModelProto, source: str) -> None:
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
                                     f"expected a size >= 0 or a symbolic name")


def _check_tensor_bytes(name: str, shape: Sequence[int], elem_type: int, source: str) -> None:
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


def _check_strictly(model: onnx.ModelProto, source: str) -> None:
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
        if value.type.HasField("tensor_type") and _fully_known(tensor):
            _check_tensor_bytes(value.name, [d.dim_value for d in tensor.shape.dim], tensor.elem_type, source)
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
        if value.type.HasField("tensor_type") and _fully_known(value.type.tensor_type):
            shapes.setdefault(value.name, tuple(d.dim_value for d in value.type.tensor_type.shape.dim))
    return shapes


def _check_text(message, source: str) -> None:
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


def _check_proto(model: onnx.ModelProto, source: str) -> None:
    if not isinstance(model, onnx.ModelProto):
        raise FpgaplaceError(f"{source}: expected an onnx.ModelProto, got {type(model).__name__}")
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise FpgaplaceError(f"{source}: not an ONNX model (no IR version or no graph)")
    if not model.graph.node or not model.graph.output:
        raise FpgaplaceError(f"{source}: the ONNX graph has no nodes or no outputs")


def _sort_nodes(model: onnx.ModelProto, source: str) -> list[int]:
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


def _default_opset(model: onnx.ModelProto) -> int:
    for opset in model.opset_import:
        if opset.domain in STANDARD_DOMAINS:
            return opset.version
    return 0


def _upgrade_old_opset(model: onnx.ModelProto, source: str, notes: list[str]) -> bool:
    """Accept opsets 9..21 (newer with a note); upgrade older ones to 9 with onnx's version
    converter (a QONNX model to ``qonnx.MIN_FUNCTION_OPSET``, the oldest its quantizers' functions
    run on). Returns whether the model was converted."""
    version = _default_opset(model)
    if version == 0:
        raise FpgaplaceError(f"{source}: the model imports no default-domain opset")
    if version > MAX_OPSET:
        notes.append(f"opset {version} is newer than the tested range {MIN_OPSET}-{MAX_OPSET}")
    target = qonnx.MIN_FUNCTION_OPSET if any(_is_qonnx_quantizer(node) for node in model.graph.node) else MIN_OPSET
    if version >= target:
        return False
    try:
        from onnx import version_converter

        upgraded = version_converter.convert_version(model, target)
    except Exception as exc:  # the converter raises bare RuntimeErrors and C++ errors alike
        raise FpgaplaceError(
            f"{source}: opset {version} is older than {MIN_OPSET} and cannot be upgraded ({first_line(exc)})"
        ) from None
    model.CopyFrom(upgraded)
    notes.append(f"upgraded from opset {version} to {target}")
    return True


def _initializer_names(graph: onnx.GraphProto) -> set[str]:
    return {t.name for t in graph.initializer} | {t.values.name for t in graph.sparse_initializer}


def _bind_inputs(
    model: onnx.ModelProto, batch: int, given: dict[str, tuple[int, ...]], source: str, notes: list[str]
) -> None:
    """Bind the graph inputs' dims, in place: first the inputs ``given`` names (checked against
    their fixed dims), then axis 0 of the rest with ``_bind_batch``; their other dims must be
    bound by then (``_check_bound``). The bound symbols are replaced
    everywhere else too (outputs, value_info) so shape inference sees consistent shapes."""
    graph = model.graph
    params = _initializer_names(graph)
    inputs = {v.name: v for v in graph.input if v.name not in params and v.type.HasField("tensor_type")}
    for name in given:
        if name not in inputs:
            names = ", ".join(f"'{n}'" for n in inputs) or "none"
            raise FpgaplaceError(
                f"{source}: input_shapes names '{name}', which is not a graph input; expected one of {names}"
            )
    symbols: dict[str, int] = {}
    for name, shape in given.items():
        _bind_given_input(inputs[name], shape, symbols, source)
    free = [value for name, value in inputs.items() if name not in given]
    bound_any = False
    for value in free:  # the batch symbols first, wherever else they appear
        bound_any = _bind_batch(value, batch, symbols) or bound_any
    _check_fixed_batch(free, batch, bound_any, source, notes)
    for value in free:
        _check_bound(value, symbols, source)
    for value in inputs.values():
        tensor = value.type.tensor_type
        _check_tensor_bytes(value.name, [d.dim_value for d in tensor.shape.dim], tensor.elem_type, source)
    for value in [*graph.output, *graph.value_info]:
        if value.type.HasField("tensor_type"):
            for dim in value.type.tensor_type.shape.dim:
                if dim.HasField("dim_param") and dim.dim_param in symbols:
                    dim.dim_value = symbols[dim.dim_param]


def _dims_text(value: onnx.ValueInfoProto) -> str:
    dims = value.type.tensor_type.shape.dim
    return "[" + ", ".join(d.dim_param or (str(d.dim_value) if d.dim_value > 0 else "?") for d in dims) + "]"


def _bind_given_input(value: onnx.ValueInfoProto, shape: tuple[int, ...], symbols: dict[str, int], source: str) -> None:
    """Set input ``value``'s dims to ``shape``; record the symbols it binds in ``symbols``."""
    name = value.name
    tensor_type = value.type.tensor_type
    if not tensor_type.HasField("shape"):  # rank unknown: the given dims define it
        tensor_type.shape.dim.extend(onnx.TensorShapeProto.Dimension(dim_value=d) for d in shape)
        return
    dims = tensor_type.shape.dim
    if len(dims) != len(shape):
        raise FpgaplaceError(
            f"{source}: input_shapes['{name}'] = {shape} has {len(shape)} dims; "
            f"expected {len(dims)} (input '{name}' is {_dims_text(value)})"
        )
    for axis, (dim, wanted) in enumerate(zip(dims, shape, strict=True)):
        if dim.HasField("dim_value") and dim.dim_value > 0 and dim.dim_value != wanted:
            raise FpgaplaceError(
                f"{source}: input_shapes['{name}'] dim {axis} is {wanted}; expected {dim.dim_value}, "
                f"the input's fixed dim"
            )
        if dim.HasField("dim_param") and dim.dim_param:
            bound = symbols.setdefault(dim.dim_param, wanted)
            if bound != wanted:
                raise FpgaplaceError(
                    f"{source}: input_shapes['{name}'] dim {axis} ('{dim.dim_param}') is {wanted}; "
                    f"expected {bound}, the value '{dim.dim_param}' is bound to elsewhere in input_shapes"
                )
        dim.dim_value = wanted


class FixedBatchError(FpgaplaceError):
    """``batch`` asks for a batch other than the fixed one of a model's input (``input``, ``fixed``):
    the model cannot run it, so nothing may be costed or divided by it."""

    def __init__(self, source: str, input_name: str, fixed: int, batch: int) -> None:
        default = "" if fixed == 1 else ", or 1 (the default), which keeps it"
        super().__init__(f"{source}: batch {batch} differs from the fixed batch of {fixed} of input "
                         f"'{input_name}'; expected batch {fixed}{default}")
        self.input_name, self.fixed, self.batch = input_name, fixed, batch


def _bind_batch(value: onnx.ValueInfoProto, batch: int, symbols: dict[str, int]) -> bool:
    """Bind one input's symbolic or unknown axis 0: a symbol ``symbols`` knows takes its value,
    another takes ``batch`` (its symbol is recorded). Returns whether it bound anything."""
    dims = value.type.tensor_type.shape.dim
    if not dims:
        return False
    dim = dims[0]
    if dim.HasField("dim_value") and dim.dim_value > 0:
        return False
    symbol = dim.dim_param if dim.HasField("dim_param") else ""
    if symbol:
        dim.dim_value = symbols.setdefault(symbol, batch)
    else:
        dim.dim_value = batch
    return True


def _check_fixed_batch(free: list[onnx.ValueInfoProto], batch: int, bound_any: bool, source: str,
                       notes: list[str]) -> None:
    """When ``batch`` binds no input's axis 0 (each is fixed), the model runs its own batch: with
    ``batch`` 1 (the default) it is kept and noted, another ``batch`` that some input's fixed
    axis 0 differs from is a ``FixedBatchError`` naming that input."""
    if bound_any:
        return
    for value in free:
        dims = value.type.tensor_type.shape.dim
        fixed = dims[0].dim_value if dims else batch
        if fixed == batch:
            continue
        if batch != 1:
            raise FixedBatchError(source, value.name, fixed, batch)
        notes.append(f"input '{value.name}' has a fixed batch of {fixed}; kept")


def _check_bound(value: onnx.ValueInfoProto, symbols: dict[str, int], source: str) -> None:
    """Give ``value``'s symbolic dims the values ``symbols`` binds; a dim still unknown (other than
    the batch, which ``_bind_batch`` bound) is an error naming the input, axis, dim and parameter."""
    dims = value.type.tensor_type.shape.dim
    for axis, dim in enumerate(dims):
        if dim.HasField("dim_value") and dim.dim_value > 0:
            continue
        symbol = dim.dim_param if dim.HasField("dim_param") else ""
        if symbol in symbols:
            dim.dim_value = symbols[symbol]
            continue
        described = f"the symbolic dim '{symbol}'" if symbol else "an unknown dim"
        wanted = ", ".join(str(d.dim_value) if d.dim_value > 0 else (d.dim_param or "?") for d in dims)
        raise FpgaplaceError(
            f"{source}: input '{value.name}' axis {axis} is {described}, which nothing binds; "
            f"expected its value in input_shapes={{'{value.name}': ({wanted})}}"
        )


def _run_checker(model: onnx.ModelProto, source: str, notes: list[str]) -> None:
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as exc:
        raise FpgaplaceError(f"{source}: rejected by onnx.checker: {first_line(exc)}") from None
    except UnicodeDecodeError as exc:  # a name or attribute string of invalid UTF-8 (a damaged file)
        raise FpgaplaceError(f"{source}: a string in the model is not valid UTF-8 ({first_line(exc)}); "
                             f"expected ONNX names and attributes as text") from None
    except ValueError as exc:  # e.g. a model over the 2 GB protobuf limit
        notes.append(f"onnx.checker skipped: {first_line(exc)}")


def _infer_shapes(model: onnx.ModelProto, source: str, notes: list[str]) -> onnx.ModelProto:
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
    proxies = [_qonnx_shape_proxy(node) if _is_qonnx_quantizer(node) else ops.shape_proxy(node)
               for node in model.graph.node]
    if all(proxy is None for proxy in proxies):
        return None
    proxied = onnx.ModelProto()
    proxied.CopyFrom(model)
    del proxied.graph.node[:]
    for node, proxy in zip(model.graph.node, proxies, strict=True):
        proxied.graph.node.extend(proxy or [node])
    return proxied


def _is_qonnx_quantizer(node: onnx.NodeProto) -> bool:
    return qonnx.is_quantizer(node)


def _attach_qonnx_functions(model: onnx.ModelProto, source: str, notes: list[str]) -> None:
    """Give a QONNX model the functions that let onnxruntime run its quantizers (in place, noted;
    ``_upgrade_old_opset`` has brought its opset to the functions' oldest)."""
    added = qonnx.attach_functions(model, source)
    if added:
        notes.append(f"QONNX: {added} quantizer types run in onnxruntime as model-local functions")


def _qonnx_shape_proxy(node: onnx.NodeProto) -> list[onnx.NodeProto]:
    """A QONNX quantizer keeps its input's shape and type: an Identity stands in for inference."""
    return [helper.make_node("Identity", [node.input[0]], [node.output[0]])]


def _qonnx_bits(node: onnx.NodeProto, values: Mapping[str, np.ndarray]) -> int | None:
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


# ---- shapes onnx inference leaves unknown ----------------------------------------------------


def _resolve_shapes(model: onnx.ModelProto, positions: list[int], source: str,
                    notes: list[str]) -> tuple[onnx.ModelProto, list[int]]:
    """Make every top-level tensor shape concrete after binding: fold the static Shape-driven
    subgraphs to constants (``passes.shapes``) and infer again, to a fixpoint; then take the
    shapes still unknown from one onnxruntime run of the bound model (``onnxrt.run_shapes``) and
    fold again. A shape still unknown is an error naming the op that produces it.

    Returns the model and each remaining node's position in the original node list."""
    from fpgaplace.model.passes.shapes import fold_static_shapes_to_fixpoint

    position_of = {_node_key(node): position for node, position in zip(model.graph.node, positions, strict=True)}

    def infer(candidate: onnx.ModelProto) -> onnx.ModelProto:
        return _infer_shapes(candidate, source, notes)

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
            elif value.type.HasField("tensor_type") and not _fully_known(value.type.tensor_type):
                unknown.append(t)
    return unknown


def _fully_known(tensor_type: onnx.TypeProto.Tensor) -> bool:
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
    producer = {t: node for node in model.graph.node for t in node.output if t}
    node = producer[unknown[0]]
    label = node.name or f"{node.op_type} producing '{unknown[0]}'"
    others = f" (and {len(unknown) - 1} more tensors)" if len(unknown) > 1 else ""
    return (f"{source}: op '{label}' ({node.op_type}): the shape of its output '{unknown[0]}'{others} is unknown to "
            f"onnx shape inference, and {reason}; expected static shapes once the inputs are bound")


# ---- building the OpGraph ------------------------------------------------------------------


def _tensor_infos(model: onnx.ModelProto, notes: list[str]) -> dict[str, TensorInfo]:
    graph = model.graph
    infos: dict[str, TensorInfo] = {}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        info = _info_from_value(value, notes)
        if info is not None:
            infos[value.name] = info
    for tensor in graph.initializer:
        dtype = _dtype_name(tensor.data_type)
        infos[tensor.name] = TensorInfo(tensor.name, tuple(tensor.dims), dtype, tensor.data_type)
    return infos


def _dtype_name(elem_type: int) -> str:
    if elem_type == onnx.TensorProto.STRING:
        return "object"
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name
    except (KeyError, TypeError, ValueError):
        return helper.tensor_dtype_to_string(elem_type).removeprefix("TensorProto.").lower()


def _info_from_value(value: onnx.ValueInfoProto, notes: list[str]) -> TensorInfo | None:
    if not value.type.HasField("tensor_type"):
        return None
    tensor_type = value.type.tensor_type
    if tensor_type.elem_type == onnx.TensorProto.UNDEFINED or not tensor_type.HasField("shape"):
        return None
    shape = []
    unknown = []
    for axis, dim in enumerate(tensor_type.shape.dim):
        if dim.HasField("dim_value") and dim.dim_value > 0:
            shape.append(dim.dim_value)
        elif dim.HasField("dim_value") and dim.dim_value == 0:
            shape.append(0)  # a genuinely empty dimension
        else:
            shape.append(1)
            unknown.append(axis)
    if unknown:
        notes.append(f"tensor '{value.name}' dims {unknown} unknown, taken as 1")
    return TensorInfo(value.name, tuple(shape), _dtype_name(tensor_type.elem_type), tensor_type.elem_type)


def _is_constant_node(node: onnx.NodeProto, constants: set[str]) -> bool:
    """A deterministic standard node without subgraphs (or a QONNX quantizer: a quantized weight)
    whose inputs are all constant."""
    if _is_qonnx_quantizer(node):
        return all(t in constants for t in node.input if t)
    if node.domain not in STANDARD_DOMAINS or not ops.is_deterministic(node.op_type, node.domain):
        return False
    if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
        return False
    return all(t in constants for t in node.input if t)


def _param_storage(constant_nodes: list[onnx.NodeProto], infos: dict[str, TensorInfo]) -> dict[str, int]:
    """Stored bytes of each constant tensor: a dequantized weight is stored quantized, a QONNX
    quantized one at its bit width."""
    storage = {}
    for node in constant_nodes:
        for t in node.output:
            if not t or t not in infos:
                continue
            if infos[t].quant_bits is not None:
                storage[t] = (infos[t].numel * infos[t].quant_bits + 7) // 8
            elif node.op_type == "DequantizeLinear" and node.input[0] in storage:
                storage[t] = storage[node.input[0]]
            elif node.op_type == "DequantizeLinear" and node.input[0] in infos:
                storage[t] = infos[node.input[0]].nbytes
            else:
                storage[t] = infos[t].nbytes
    return storage


def _build(model: onnx.ModelProto, positions: list[int], source: str, notes: list[str]) -> OpGraph:
    graph = model.graph
    infos = _tensor_infos(model, notes)
    constants = _initializer_names(graph)
    initializer_names = set(constants)
    constant_nodes: list[onnx.NodeProto] = []
    compute: list[tuple[int, onnx.NodeProto]] = []
    for index, node in zip(positions, graph.node, strict=True):
        if _is_constant_node(node, constants):
            constant_nodes.append(node)
            constants.update(t for t in node.output if t)
        else:
            compute.append((index, node))
    _read_qonnx_bits(graph, infos, notes)
    storage = _param_storage(constant_nodes, infos)
    scope = _outer_scope(model, constant_nodes, [node for _, node in compute], infos)
    graph_ops = []
    for (index, node), name in zip(compute, unique_op_names(compute), strict=True):
        proto = onnx.NodeProto()
        proto.CopyFrom(node)
        proto.name = name
        op = Op(
            name=name,
            op_type=node.op_type,
            domain=node.domain,
            attrs=ops.attribute_values(node),
            inputs=list(node.input),
            outputs=list(node.output),
            index=index,
            implicit_inputs=outer_references(node),
            node=proto,
        )
        _fill_costs(op, scope, infos, constants, storage, notes)
        graph_ops.append(op)
    inputs = [v.name for v in graph.input if v.name not in initializer_names]
    outputs = [v.name for v in graph.output]
    built = OpGraph(
        graph.name or Path(source).stem,
        graph_ops,
        infos,
        constants,
        inputs,
        outputs,
        model,
        constant_nodes=constant_nodes,
        param_storage_bytes=storage,
        notes=notes,
    )
    from fpgaplace.hw import plan_op  # the op library decides what a core can run

    for op in built.ops.values():
        op.fpga_supported = op.fpga_supported and bool(plan_op(op, built))
    return built


def _read_qonnx_bits(graph: onnx.GraphProto, infos: dict[str, TensorInfo], notes: list[str]) -> None:
    """Set ``quant_bits`` on every QONNX quantizer's output (in ``infos``, in place) and note the
    widths found; a width that is not a constant scalar in 1..64 is noted and left unset."""
    values = {t.name: numpy_helper.to_array(t) for t in graph.initializer if math.prod(t.dims) == 1}
    values.update(ops.constant_node_values(graph.node))
    widths: dict[str, int] = {}
    for node in graph.node:
        if not _is_qonnx_quantizer(node) or node.output[0] not in infos:
            continue
        bits = _qonnx_bits(node, values)
        if bits is None:
            notes.append(f"QONNX {node.op_type} '{node.name or node.output[0]}': its bit width is not a constant; "
                         f"its output keeps its element type's width")
            continue
        infos[node.output[0]] = dataclasses.replace(infos[node.output[0]], quant_bits=bits)
        widths[node.output[0]] = bits
    if widths:
        notes.append(f"QONNX: {len(widths)} quantized tensors, {min(widths.values())} to "
                     f"{max(widths.values())} bits")
        carried = _carry_bits(graph, infos)
        if carried:
            notes.append(f"QONNX: {carried} more tensors keep a quantized input's width through ops that move or "
                         f"select values (MaxPool, Reshape, Concat, Relu, ...)")


WIDTH_PRESERVING_OPS = frozenset({
    "MaxPool", "GlobalMaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Identity", "Concat",
    "Split", "Slice", "Gather", "Relu", "DepthToSpace", "SpaceToDepth", "Expand", "Tile",
})
"""Ops whose outputs hold only values of their data inputs (or zero, for Relu), so they stay on a
quantized input's grid and keep its bit width (as qonnx's InferDataTypes carries datatypes)."""


def _carry_bits(graph: onnx.GraphProto, infos: dict[str, TensorInfo]) -> int:
    """Give the outputs of width-preserving ops whose data inputs all have ``quant_bits`` the widest
    of them (in ``infos``, in place, in topological order; Concat reads all its inputs, the others
    their first). Returns how many tensors got a width. O(nodes)."""
    carried = 0
    for node in graph.node:
        if node.op_type not in WIDTH_PRESERVING_OPS or node.domain not in STANDARD_DOMAINS or not node.input:
            continue
        data = [t for t in node.input if t] if node.op_type == "Concat" else node.input[:1]
        widths = [infos[t].quant_bits if t in infos else None for t in data]
        if not widths or None in widths:
            continue
        for t in node.output:
            if t in infos and infos[t].quant_bits is None:
                infos[t] = dataclasses.replace(infos[t], quant_bits=max(widths))
                carried += 1
    return carried


def _outer_scope(model: onnx.ModelProto, constant_nodes: list[onnx.NodeProto], compute: list[onnx.NodeProto],
                 infos: dict[str, TensorInfo]) -> ops.Scope:
    """What control-flow bodies read from the top-level graph: shapes, element types, the values
    of small initializers and Constant nodes, and of the small constant tensors other constant
    nodes compute for control-flow ops (a Loop's trip count as Cast(Constant), ...), and the opsets."""
    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer
              if math.prod(t.dims) <= ops.SMALL_CONSTANT}
    values.update(ops.constant_node_values(constant_nodes))
    produced = {t for node in constant_nodes for t in node.output if t}
    wanted = {t for node in compute if ops.is_control_flow(node.op_type, node.domain) for t in node.input
              if t in produced and t not in values and t in infos and infos[t].numel <= ops.SMALL_CONSTANT}
    values.update(_evaluated_constants(model, constant_nodes, wanted))
    return ops.Scope(
        {name: info.shape for name, info in infos.items()},
        {name: info.elem_type for name, info in infos.items()},
        values,
        tuple(model.opset_import),
    )


def _evaluated_constants(model: onnx.ModelProto, constant_nodes: list[onnx.NodeProto],
                         wanted: set[str]) -> dict[str, np.ndarray]:
    """The values of the constant tensors ``wanted``, by onnx's reference evaluator over only the
    constant nodes producing them (transitively; O(those nodes)); {} if it cannot run them."""
    if not wanted:
        return {}
    producer = {t: i for i, node in enumerate(constant_nodes) for t in node.output if t}
    needed: set[int] = set()
    stack = [producer[t] for t in wanted]
    while stack:
        i = stack.pop()
        if i not in needed:
            needed.add(i)
            stack += [producer[t] for t in constant_nodes[i].input if t in producer]
    nodes = [constant_nodes[i] for i in sorted(needed)]
    reads = {t for node in nodes for t in node.input if t}
    names = sorted(wanted)
    graph = helper.make_graph(nodes, "constants", [], [helper.make_empty_tensor_value_info(t) for t in names],
                              initializer=[t for t in model.graph.initializer if t.name in reads])
    try:
        from onnx.reference import ReferenceEvaluator

        results = ReferenceEvaluator(helper.make_model(graph, opset_imports=list(model.opset_import))).run(names, {})
    except Exception:  # the evaluator raises whatever its op implementations raise
        return {}
    return {t: np.asarray(value) for t, value in zip(names, results, strict=True)}


def _fill_costs(
    op: Op, scope: ops.Scope, infos: dict[str, TensorInfo], params: set[str], storage: dict[str, int],
    notes: list[str],
) -> None:
    """Set ``op``'s MACs, byte counts and FPGA support flag; a control-flow op's costing is noted."""
    reads = op.all_inputs()
    if ops.is_control_flow(op.op_type, op.domain):
        cost = ops.control_flow_cost(op, scope)
        op.macs, op.body_dot_product_macs = cost.macs, cost.dot_product_macs
        notes.append(cost.note)
    else:
        op.macs = ops.count_macs(op, scope.shapes)
    op.param_bytes = sum(storage.get(t, infos[t].nbytes if t in infos else 0) for t in reads if t in params)
    op.input_bytes = sum(infos[t].nbytes for t in reads if t not in params and t in infos)
    op.output_bytes = sum(infos[t].nbytes for t in op.outputs if t in infos)
    strings = any(infos[t].dtype == "object" for t in [*reads, *op.outputs] if t in infos)
    op.fpga_supported = ops.is_fpga(op.op_type, op.domain) and not strings

