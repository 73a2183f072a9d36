"""onnxruntime in one place: quiet sessions, random inputs of a model, a run with inner tensors as
extra outputs, and the shapes of one run (what resolves a tensor shape onnx shape inference leaves unknown).

onnxruntime prints its own log lines (in red, on stderr) before raising; importing this module sets
its default logger to fatal errors only, and every session opened here logs fatal errors only, so a
user sees fpgaplace's one-line error and nothing else (a session created elsewhere with its own
``log_severity_level`` below 4 still prints its errors).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

from fpgaplace.util.errors import FpgaplaceError, first_line

MAX_RUN_INPUT_ELEMENTS = 1 << 26
"""The most input elements (all inputs together) a shape-resolving run may feed: 64 Mi, 256 MiB of
float32; a bigger model's unknown shapes are reported rather than run for."""

FATAL_ONLY = 4
"""onnxruntime's log severity that prints fatal errors only (0 verbose ... 3 error, 4 fatal)."""

ort.set_default_logger_severity(FATAL_ONLY)


def session(model: bytes | str | onnx.ModelProto, what: str, *, optimized: bool = True,
            threads: int | None = None, options: ort.SessionOptions | None = None) -> ort.InferenceSession:
    """A CPU session of ``model`` (a ModelProto, serialized bytes or a path) that logs fatal errors
    only, on ``threads`` intra- and inter-op threads (onnxruntime's choice when None), with the
    caller's ``options`` otherwise (profiling, ...). A model onnxruntime rejects is a one-line
    error naming ``what``. Every session the front end, the passes, split, quantize and the cost
    model open comes from here."""
    options = options or ort.SessionOptions()
    options.log_severity_level = FATAL_ONLY
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = threads
    if not optimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        source = model.SerializeToString() if isinstance(model, onnx.ModelProto) else model
        return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - onnxruntime (and protobuf) raise several unrelated types
        raise FpgaplaceError(f"{what}: onnxruntime cannot run it ({first_line(exc)})") from None


def graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """The graph inputs that are not initializers."""
    initializers = {t.name for t in model.graph.initializer}
    return [value for value in model.graph.input if value.name not in initializers]


def input_shape(value: onnx.ValueInfoProto) -> tuple[int, ...]:
    """The concrete shape of a bound graph input (every dim known, as the front end binds them)."""
    return tuple(d.dim_value for d in value.type.tensor_type.shape.dim)


def random_inputs(model: onnx.ModelProto, seed: int = 0, *, integer_high: int = 3) -> dict[str, np.ndarray]:
    """Random values for the model's graph inputs (symbolic dims become 1): floats from a
    standard normal, integers in [0, ``integer_high``) (token ids, indices), booleans at random."""
    rng = np.random.default_rng(seed)
    return {value.name: random_values(rng, [d.dim_value if d.HasField("dim_value") else 1
                                            for d in value.type.tensor_type.shape.dim],
                                      value.type.tensor_type.elem_type, integer_high)
            for value in graph_inputs(model)}


def random_values(rng: np.random.Generator, shape, elem_type: int, integer_high: int = 3,
                  value_range: tuple[float, float] | None = None) -> np.ndarray:
    """An array of ONNX element type ``elem_type``: floats from a standard normal, integers in
    [0, ``integer_high``) (token ids, indices), booleans at random; with ``value_range`` (low,
    high), floats uniform in [low, high) and integers and booleans uniform in low..high (both
    included)."""
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    if value_range is not None:
        low, high = value_range
        if np.issubdtype(dtype, np.floating):
            return rng.uniform(low, high, shape).astype(dtype)
        return rng.integers(int(low), int(high), shape, endpoint=True).astype(dtype)
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(shape).astype(dtype)
    if dtype == np.bool_:
        return np.asarray(rng.random(shape) < 0.5)
    return rng.integers(0, integer_high, shape).astype(dtype)


def run_shapes(model: onnx.ModelProto, names: Iterable[str],
               what: str) -> dict[str, tuple[tuple[int, ...], int] | None]:
    """The (shape, ONNX element type) of each tensor ``names`` names, from one onnxruntime run of
    ``model`` (bound inputs) on random inputs; None for one that comes back as a sequence or map.
    Cost: one run of the model with those tensors as extra outputs.

    A model with more than ``MAX_RUN_INPUT_ELEMENTS`` input elements, or one onnxruntime cannot
    load or run, is a one-line error naming ``what``."""
    elements = sum(math.prod(input_shape(value)) for value in graph_inputs(model))
    if elements > MAX_RUN_INPUT_ELEMENTS:
        raise FpgaplaceError(
            f"{what}: the model's inputs have {elements} elements; a run to resolve shapes takes at most "
            f"{MAX_RUN_INPUT_ELEMENTS}"
        )
    wanted = [name for name in dict.fromkeys(names) if name]
    probe = with_outputs(model, wanted)
    try:
        serialized = probe.SerializeToString()
    except ValueError as exc:  # over the 2 GB protobuf limit
        raise FpgaplaceError(f"{what}: cannot run the model to resolve shapes ({first_line(exc)})") from None
    runner = session(serialized, what, optimized=False)
    try:
        values = runner.run(wanted, random_inputs(model))
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises several unrelated types
        raise FpgaplaceError(f"{what}: onnxruntime cannot run the model ({first_line(exc)})") from None
    return {name: (tuple(int(d) for d in value.shape), _elem_type(value.dtype)) if isinstance(value, np.ndarray)
            else None for name, value in zip(wanted, values, strict=True)}


def with_outputs(model: onnx.ModelProto, names: Iterable[str]) -> onnx.ModelProto:
    """A copy of ``model`` that also outputs the inner tensors ``names`` (those not outputs yet)."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    present = {value.name for value in probe.graph.output}
    probe.graph.output.extend(onnx.ValueInfoProto(name=name) for name in dict.fromkeys(names) if name not in present)
    return probe


def run_model(model: onnx.ModelProto, inputs: dict[str, np.ndarray],
              extra_outputs: Iterable[str] = (), optimized: bool = True) -> dict[str, np.ndarray]:
    """Run a whole model with onnxruntime (with its graph optimizations unless not ``optimized``),
    also returning ``extra_outputs`` (inner tensors)."""
    probe = with_outputs(model, extra_outputs)
    runner = session(probe.SerializeToString(), f"model '{model.graph.name}'", optimized=optimized)
    names = [o.name for o in probe.graph.output]
    return dict(zip(names, runner.run(names, inputs), strict=True))


def _elem_type(dtype: np.dtype) -> int:
    """The ONNX element type of a run's numpy dtype (strings come back as objects)."""
    if dtype.kind in "OUS":
        return onnx.TensorProto.STRING
    try:
        return helper.np_dtype_to_tensor_dtype(dtype)
    except (KeyError, TypeError, ValueError):
        return onnx.TensorProto.UNDEFINED
