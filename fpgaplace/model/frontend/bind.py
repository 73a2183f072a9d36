"""Binding a model's graph inputs: the dims ``input_shapes`` gives (the same symbol elsewhere in
the graph too), then the symbolic batch axis of every other input; a fixed dim must agree and an
unbound one is an error naming the input, axis and dim. O(inputs x rank).
"""

from __future__ import annotations

import onnx

from fpgaplace.model.frontend.checks import check_tensor_bytes
from fpgaplace.util.errors import FpgaplaceError


def initializer_names(graph: onnx.GraphProto) -> set[str]:
    return {t.name for t in graph.initializer} | {t.values.name for t in graph.sparse_initializer}


def bind_inputs(
    model: onnx.ModelProto, batch: int, given: dict[str, tuple[int, ...]], source: str, notes: list[str]
) -> None:
    """Bind the graph inputs' dims, in place: first the inputs ``given`` names (checked against
    their fixed dims), then axis 0 of the rest with ``_bind_batch``; their other dims must be
    bound by then (``_check_bound``). The bound symbols are replaced
    everywhere else too (outputs, value_info) so shape inference sees consistent shapes."""
    graph = model.graph
    params = initializer_names(graph)
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
        check_tensor_bytes(value.name, [d.dim_value for d in tensor.shape.dim], tensor.elem_type, source)
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
