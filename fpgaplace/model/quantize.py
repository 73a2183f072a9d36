"""Static int8 quantization of a float ONNX model into QDQ form, checks of QDQ models, and drift.

The FPGA flow computes in int8 (see the integer conventions in ``fpgaplace/hw``); this module
turns a float model into the QDQ model those kernels are lowered from, with onnxruntime's
``quantize_static``: ``QuantFormat.QDQ``, activations ``QInt8`` asymmetric, weights ``QInt8``
symmetric (per output channel by default), MinMax calibration over the caller's samples.

Pipeline (``quantize_model``), all inside one temporary folder that is removed afterwards:

1. unnamed nodes get the IR's names (``passes.graph_tools.name_nodes``), so the names the
   placement uses exist before onnxruntime sees the model;
2. constant subgraphs are folded into initializers (``passes.constant.fold_constants``: the
   ``ConstantOfShape`` weights of the onnx package's light models become weights, quantized as
   such), and BatchNormalization is folded into the preceding Conv/Gemm by the project's own pass
   (``passes.fold.fold_batchnorm``: the Conv keeps its name and produces the BatchNormalization's
   output tensor), LSTM and GRU are written out step by step (``passes.recurrent.unroll_recurrent``,
   then ``collapse_reshape_chains`` so a reshape of their 4-D output reads the steps directly), a
   layer norm written out in elementary ops becomes one LayerNormalization
   (``passes.layernorm.fuse_layernorm``: onnxruntime quantizes that op, not the chain), then dead
   nodes and constants are dropped;
3. what ``quant_pre_process`` with ``skip_optimization=True`` and ``skip_symbolic_shape=True``
   does, i.e. onnx shape inference only and its pre-processing mark, done in memory (the same bytes,
   without writing and reading the model twice more). Not onnxruntime's optimizer: it also folds
   Conv+BatchNorm, but it renames what it fuses (MatMul+Add becomes a Gemm named ``matmul_1/MatMulAddFusion``, 3-D
   MatMuls get new ``gemm_input_reshape*`` nodes), which breaks placement by node name, and it
   drops every node's ``metadata_props``. Symbolic shape inference needs sympy, which the
   project does not install, and onnx shape inference suffices for these graphs;
4. ``quantize_static``, its per-channel weight loops vectorised (``_vectorised_weight_quantization``: the
   same model, byte for byte, in a fraction of the time);
5. node ``metadata_props`` are copied back by node name where missing (``quantize_static`` keeps
   them today), every survivor records the original nodes folded into it under
   ``ABSORBED_KEY``, the model records the settings under ``SETTINGS_KEY``, unused opset domains
   are removed, and ``check_qdq`` runs on the result.

What onnxruntime 1.23 emits (measured on ``models.cnn_residual(batch=1)`` and
``models.mlp(batch=1, sizes=(16, 64, 32, 5))``; the tests pin these facts):

* Every graph input gets ``QuantizeLinear -> DequantizeLinear`` (per-tensor int8 scale and
  zero point); every graph output is ``... -> QuantizeLinear -> DequantizeLinear -> output``
  (the output keeps its name; the producing node's output becomes ``<name>_QuantizeLinear_Input``).
  Node names of every compute node are unchanged; only the folded BatchNormalization and the
  removed Relu/Clip nodes disappear.
* Conv and Gemm read ``DequantizeLinear`` of int8 weight initializers: per-channel along the
  output channel (axis 0 for Conv and for Gemm with transB=1), scale > 0, zero point 0, values
  in [-127, 127] (symmetric range); ``per_channel=False`` gives one scale per tensor. Their
  bias is an int32 initializer behind a ``DequantizeLinear`` with scale = input scale * weight
  scale (per channel) and zero point 0: the int32 bias the hardware adds to its accumulator.
* Relu and Clip that follow a quantized op are removed (``QDQRemovableActivation``: activations
  are asymmetric and ``QDQKeepRemovableActivations`` is off): the producer writes the activation's
  output tensor directly and the following QuantizeLinear carries the activation's calibrated
  range. For Relu that range starts at 0, so the zero point is -128 and the int8 clamp is the
  ReLU (lo = max(-128, zp) in the integer spec); Clip(0, 6) likewise clamps through the range.
  So Conv+BatchNorm+Relu becomes one ``Conv -> QuantizeLinear -> DequantizeLinear``, and so do
  Gemm+Relu and Add+Relu (the residual Add of cnn_residual).
* MaxPool, Flatten, AveragePool (and Reshape/Transpose/Squeeze/Unsqueeze/Slice) are
  ``QDQDirect8BitOp``: their output QuantizeLinear reuses the input's scale and zero point
  initializers (same names), so on hardware they need no rescale (m = 2**30, s = 30).
* Add, Concat and GlobalAveragePool are quantized with their own calibrated output qparams; their
  inputs keep the qparams of their producers (so Add and Concat rescale each input).
* Softmax gets the fixed output range [0, 1]: scale 1/255, zero point -128.
* A MatMul of two activations (attention's ``Q Kᵀ`` and ``softmax(.) V``) reads a DequantizeLinear on
  both operands and writes a QuantizeLinear with its own calibrated qparams (MatMul is in onnxruntime's
  QDQ registry whichever operand is constant); a Transpose between (``Kᵀ``) is ``QDQDirect8BitOp``.
* LayerNormalization (``QDQNormalization``) reads a DequantizeLinear of its input and of its int8
  scale (a weight, per tensor), its bias an int32 DequantizeLinear (scale = input scale * scale's
  scale), and writes a QuantizeLinear with its own calibrated output qparams.
* LRN is in neither of onnxruntime's registries; ``op_types_to_quantize`` adds it
  (``EXTRA_QUANTIZED_OPS``), so it reads a DequantizeLinear and writes a QuantizeLinear with its own
  calibrated output qparams, and the MaxPool after it is quantized too (else both stay float).

``check_qdq`` accepts exactly these forms: int8 zero points everywhere, except int32 zero points
of value 0 on a ``DequantizeLinear`` of an int32 constant (a quantized bias).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import tempfile
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

from fpgaplace.model.passes.constant import fold_constants
from fpgaplace.model.passes.eliminate import eliminate_dead_code
from fpgaplace.model.passes.fold import fold_batchnorm
from fpgaplace.model.passes.graph_tools import (
    constant_initializers,
    constant_value,
    consumers,
    copy_model,
    name_nodes,
    node_metadata,
    output_names,
    producers,
    set_node_metadata,
    topological_order,
)
from fpgaplace.model.passes.inference import infer_shapes
from fpgaplace.model.passes.layernorm import fuse_layernorm
from fpgaplace.model.passes.recurrent import fold_constant_if, unroll_recurrent
from fpgaplace.model.passes.simplify import collapse_reshape_chains
from fpgaplace.model.qdq import is_qdq, qdq_nodes, write_widths
from fpgaplace.util import onnxrt
from fpgaplace.util.errors import FpgaplaceError, first_line
from fpgaplace.util.files import write_with  # imported before onnxruntime.quantization: it quiets the default logger

Sample = dict[str, np.ndarray]
"""One calibration or test sample: graph input name -> array of that input's dtype and shape."""

SETTINGS_KEY = "fpgaplace.quantization"
"""Model ``metadata_props`` key of a QDQ model: the quantization settings, as JSON."""

ABSORBED_KEY = "fpgaplace.quant_absorbed"
"""Node ``metadata_props`` key on a QDQ model's node listing (comma-separated, in topological
order) the original nodes folded into it during quantization: BatchNormalization (by
``fold_batchnorm``), Relu and Clip (removed by onnxruntime)."""

MAX_RANDOM_SAMPLES = 100_000


# ----------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class InputSpec:
    """A graph input: name, numpy dtype and shape (a dim is an int, or a str/None when symbolic)."""

    name: str
    dtype: np.dtype
    shape: tuple[int | str | None, ...]

    def fixed_shape(self) -> tuple[int, ...] | None:
        if all(isinstance(d, int) for d in self.shape):
            return tuple(int(d) for d in self.shape)
        return None

    def accepts_shape(self, shape: tuple[int, ...]) -> bool:
        """Same rank, and every fixed dim equal (symbolic dims take any size)."""
        return len(shape) == len(self.shape) and all(
            not isinstance(want, int) or want == got for want, got in zip(self.shape, shape, strict=True))

    def describe(self) -> str:
        return f"{self.dtype}{_shape_text(self.shape)}"


def _shape_text(shape: Sequence[int | str | None]) -> str:
    """``[1,3,32,32]``; an unknown dim is ``?``."""
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def input_specs(model: onnx.ModelProto) -> list[InputSpec]:
    """The model's graph inputs that are not initializers (defaults), in order."""
    initializers = {t.name for t in model.graph.initializer}
    specs = []
    for info in model.graph.input:
        if info.name in initializers:
            continue
        tensor = info.type.tensor_type
        if not info.type.HasField("tensor_type") or not tensor.elem_type:
            raise FpgaplaceError(f"model input '{info.name}': expected a tensor with a known element type")
        shape = tuple(
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor.shape.dim)
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type))
        specs.append(InputSpec(info.name, dtype, shape))
    if not specs:
        raise FpgaplaceError(f"model '{model.graph.name}': has no graph inputs to calibrate")
    return specs


def check_samples(model: onnx.ModelProto, samples: Sequence[Sample], what: str = "sample") -> None:
    """Raise ``FpgaplaceError`` unless ``samples`` is a non-empty list of dicts whose keys are
    exactly the model's inputs and whose arrays have each input's dtype and (fixed dims of) shape."""
    specs = input_specs(model)
    if not isinstance(samples, Sequence) or len(samples) == 0:
        raise FpgaplaceError(f"{what}s: expected a non-empty list of {{input name: array}} dicts")
    names = [spec.name for spec in specs]
    for index, sample in enumerate(samples):
        if not isinstance(sample, dict) or set(sample) != set(names):
            keys = sorted(sample) if isinstance(sample, dict) else type(sample).__name__
            raise FpgaplaceError(f"{what} {index}: has keys {keys}, expected exactly {names}")
        for spec in specs:
            value = sample[spec.name]
            if not isinstance(value, np.ndarray) or value.dtype != spec.dtype or not spec.accepts_shape(value.shape):
                got = f"{value.dtype}{_shape_text(value.shape)}" if isinstance(value, np.ndarray) \
                    else type(value).__name__
                raise FpgaplaceError(f"{what} {index}: input '{spec.name}' is {got}, expected {spec.describe()}")


InputRanges = dict[str, tuple[float, float]]
"""Graph input name -> (low, high) of its random calibration values (integers: both included)."""

DEFAULT_INTEGER_RANGE = (0, 1)
"""The random values of an integer or boolean input that no Gather reads as indices: a mask's or
a flag's range. Anything else needs its range given (``input_ranges``)."""

VALUE_KEEPING = ("Cast", "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze")
"""Ops through which an input still holds the same values (indices cast or reshaped on the way
to a Gather)."""


def calibration_inputs(
    model: onnx.ModelProto,
    *,
    calib_dir: Path | str | None = None,
    random_samples: int | None = None,
    seed: int = 0,
    input_ranges: InputRanges | None = None,
) -> list[Sample]:
    """Calibration samples for ``model``: from a folder of ``.npy``/``.npz`` files (``calib_dir``),
    or ``random_samples`` random samples (seeded) for models whose input shapes are fixed.

    Random values: a float input standard-normal, or uniform in its ``input_ranges`` entry; an
    integer or boolean input uniform in its entry (both ends included), by default in the range
    its use allows (``default_range``: the indices of the Gather that reads it).

    Folder rules (files taken in name order; other suffixes are ignored): a ``.npy`` file is for
    single-input models and holds one sample of the input's shape, or a batch whose leading dim is
    split into samples (shape ``[n, *input_shape]``, or ``input_shape`` with n in place of a fixed
    leading 1; an array that fits a symbolic leading dim is one sample of that batch); a ``.npz``
    file has one array per input name (same rules, same n for all).
    Float files of another precision are cast to the input's float type. Exactly one of
    ``calib_dir`` and ``random_samples`` must be given.
    """
    if (calib_dir is None) == (random_samples is None):
        raise FpgaplaceError("calibration: give exactly one of calib_dir (a folder of .npy/.npz files) "
                             "and random_samples (a count)")
    specs = input_specs(model)
    if random_samples is not None:
        ranges = {spec.name: default_range(model, spec) for spec in specs}
        ranges.update(check_input_ranges(input_ranges or {}, specs))
        return _random_samples(specs, random_samples, seed, ranges)
    if input_ranges:
        raise FpgaplaceError("input_ranges: apply to random_samples; calib_dir gives the inputs themselves")
    return _folder_samples(specs, Path(calib_dir))


def gather_rows(model: onnx.ModelProto, name: str) -> int | None:
    """The fewest rows (entries along the gathered axis) of the tables that Gather ops index with
    tensor ``name`` (or the depth of a OneHot of it), directly or through ``VALUE_KEEPING`` ops; None
    when no Gather or OneHot does or no table size is known. O(nodes)."""
    readers = consumers(model.graph)
    shapes = {t.name: list(t.dims) for t in model.graph.initializer}
    for value in [*model.graph.input, *model.graph.value_info, *model.graph.output]:
        dims = value.type.tensor_type.shape.dim
        shapes.setdefault(value.name, [d.dim_value if d.HasField("dim_value") else 0 for d in dims])
    rows, frontier, seen = [], [name], {name}
    while frontier:
        tensor = frontier.pop()
        for node in readers.get(tensor, []):
            if node.op_type == "Gather" and node.input[1] == tensor:
                table = shapes.get(node.input[0], [])
                axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
                if -len(table) <= axis < len(table) and table[axis] > 0:
                    rows.append(table[axis])
            elif node.op_type == "OneHot" and node.input[0] == tensor:
                depth = constant_value(model, node.input[1])
                if depth is not None and depth.size == 1 and int(depth.reshape(-1)[0]) > 0:
                    rows.append(int(depth.reshape(-1)[0]))
            elif node.op_type in VALUE_KEEPING and node.input[0] == tensor and node.output[0] not in seen:
                seen.add(node.output[0])
                frontier.append(node.output[0])
    return min(rows) if rows else None


def default_range(model: onnx.ModelProto, spec: InputSpec) -> tuple[float, float] | None:
    """The random values of input ``spec`` when none are given: None (standard normal) for a
    float; for integers the indices 0..rows-1 of the Gather that reads it (``gather_rows``), else
    ``DEFAULT_INTEGER_RANGE``."""
    if np.issubdtype(spec.dtype, np.floating):
        return None
    rows = gather_rows(model, spec.name)
    return (0, rows - 1) if rows else DEFAULT_INTEGER_RANGE


def check_input_ranges(ranges: InputRanges, specs: list[InputSpec]) -> InputRanges:
    """``ranges`` checked against the inputs ``specs``: each names an input and holds finite
    low <= high, whole numbers within the input's type for an integer or boolean input."""
    names = {spec.name: spec for spec in specs}
    for name, bounds in ranges.items():
        if name not in names:
            known = ", ".join(f"'{n}'" for n in names)
            raise FpgaplaceError(f"input_ranges names '{name}', which is not a graph input; expected one of {known}")
        spec = names[name]
        low, high = bounds
        if not (math.isfinite(low) and math.isfinite(high) and low <= high):
            raise FpgaplaceError(f"input_ranges['{name}'] = ({low}, {high}): expected finite numbers low <= high")
        if np.issubdtype(spec.dtype, np.floating):
            continue
        info = np.iinfo(np.uint8 if spec.dtype == np.bool_ else spec.dtype)
        top = 1 if spec.dtype == np.bool_ else info.max
        if not (float(low).is_integer() and float(high).is_integer() and info.min <= low and high <= top):
            raise FpgaplaceError(f"input_ranges['{name}'] = ({low}, {high}): input '{name}' is {spec.describe()}; "
                                 f"expected whole numbers from {info.min} to {top}")
    return dict(ranges)


def _random_samples(specs: list[InputSpec], count: int, seed: int,
                    ranges: dict[str, tuple[float, float] | None]) -> list[Sample]:
    """``count`` samples of random values, each input's in its range of ``ranges`` (None: standard normal)."""
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_RANDOM_SAMPLES:
        raise FpgaplaceError(f"random_samples: expected an integer in [1, {MAX_RANDOM_SAMPLES}], got {count!r}")
    shapes, types = {}, {}
    for spec in specs:
        shape = spec.fixed_shape()
        if shape is None:
            raise FpgaplaceError(f"input '{spec.name}' has shape {spec.describe()} with symbolic dims: random "
                                 "calibration needs fixed shapes (bind the batch dim first, or give calib_dir)")
        if not (np.issubdtype(spec.dtype, np.number) or spec.dtype == np.bool_):
            raise FpgaplaceError(f"input '{spec.name}' is {spec.describe()}: random calibration makes numbers "
                                 "only (give calib_dir)")
        shapes[spec.name], types[spec.name] = shape, helper.np_dtype_to_tensor_dtype(spec.dtype)
    rng = np.random.default_rng(seed)
    return [{spec.name: onnxrt.random_values(rng, shapes[spec.name], types[spec.name],
                                             value_range=ranges.get(spec.name))
             for spec in specs} for _ in range(count)]


def _folder_samples(specs: list[InputSpec], folder: Path) -> list[Sample]:
    if not folder.is_dir():
        raise FpgaplaceError(f"{folder}: calibration folder not found (expected a folder of .npy/.npz files)")
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in (".npy", ".npz"))
    if not files:
        raise FpgaplaceError(f"{folder}: no .npy or .npz files (expected calibration samples)")
    samples: list[Sample] = []
    for path in files:
        samples.extend(_file_samples(specs, path))
    return samples


def _file_samples(specs: list[InputSpec], path: Path) -> list[Sample]:
    """The samples one calibration file holds (see ``calibration_inputs``)."""
    arrays = _read_arrays(specs, path)
    names = [spec.name for spec in specs]
    if set(arrays) != set(names):
        raise FpgaplaceError(f"{path}: has arrays {sorted(arrays)}, expected exactly the model inputs {names}")
    per_input = {spec.name: _split_batch(spec, _as_input_dtype(spec, arrays[spec.name], path), path)
                 for spec in specs}
    counts = {name: len(parts) for name, parts in per_input.items()}
    if len(set(counts.values())) != 1:
        raise FpgaplaceError(f"{path}: arrays hold different sample counts {counts}, expected one count")
    return [{name: parts[i] for name, parts in per_input.items()} for i in range(next(iter(counts.values())))]


def _read_arrays(specs: list[InputSpec], path: Path) -> dict[str, np.ndarray]:
    try:
        if path.suffix.lower() == ".npy":
            if len(specs) != 1:
                raise FpgaplaceError(f"{path}: a .npy file holds one input, but the model has inputs "
                                     f"{[s.name for s in specs]}; expected .npz files keyed by input name")
            return {specs[0].name: np.load(path, allow_pickle=False)}
        with np.load(path, allow_pickle=False) as archive:
            return {key: archive[key] for key in archive.files}
    except FpgaplaceError:
        raise
    except Exception as exc:  # noqa: BLE001 - numpy raises OSError, ValueError, BadZipFile, EOFError, ...
        raise FpgaplaceError(f"{path}: cannot read it as a numpy {path.suffix} file: {first_line(exc)}") from exc


def _as_input_dtype(spec: InputSpec, array: np.ndarray, path: Path) -> np.ndarray:
    same_float_kind = np.issubdtype(spec.dtype, np.floating) and np.issubdtype(array.dtype, np.floating)
    if array.dtype != spec.dtype and not same_float_kind:
        raise FpgaplaceError(f"{path}: array '{spec.name}' is {array.dtype}, expected {spec.dtype}")
    array = array.astype(spec.dtype, copy=False)
    if np.issubdtype(array.dtype, np.floating) and not np.all(np.isfinite(array)):
        raise FpgaplaceError(f"{path}: array '{spec.name}' has NaN or infinite values, expected finite numbers")
    return array


def _split_batch(spec: InputSpec, array: np.ndarray, path: Path) -> list[np.ndarray]:
    """One sample, or the samples of a batch along the leading dim (see ``calibration_inputs``)."""
    shape = tuple(array.shape)
    if spec.accepts_shape(shape):
        return [array]
    if len(shape) == len(spec.shape) + 1 and spec.accepts_shape(shape[1:]) and shape[0] >= 1:
        return [np.ascontiguousarray(array[i]) for i in range(shape[0])]
    if shape and spec.shape and spec.shape[0] == 1 and spec.accepts_shape((1, *shape[1:])) and shape[0] >= 1:
        return [np.ascontiguousarray(array[i:i + 1]) for i in range(shape[0])]
    raise FpgaplaceError(f"{path}: array '{spec.name}' has shape {_shape_text(shape)}, expected {spec.describe()} "
                         "or a batch of those along a new leading dim")


# ----------------------------------------------------------------------------- quantization


class _SampleReader:
    """An onnxruntime ``CalibrationDataReader`` (duck-typed: it needs ``get_next``) over samples."""

    def __init__(self, samples: Sequence[Sample]) -> None:
        self._samples: Iterator[Sample] = iter(samples)

    def get_next(self) -> Sample | None:
        return next(self._samples, None)


def quantize_model(
    model: onnx.ModelProto, calibration: Sequence[Sample], *, per_channel: bool = True
) -> onnx.ModelProto:
    """The QDQ int8 model of float ``model`` calibrated (MinMax) on ``calibration``; see the
    module docstring for what onnxruntime emits. The caller's model is not changed. Node names
    of surviving compute nodes are kept; nodes folded away are listed under ``ABSORBED_KEY``.
    Cost: one onnxruntime run per calibration sample of the model with all tensors as outputs."""
    what = f"model '{model.graph.name}'"
    if is_qdq(model):
        raise FpgaplaceError(f"{what}: already has QuantizeLinear/DequantizeLinear nodes, expected a float model")
    check_samples(model, calibration, "calibration sample")
    original = _constant_weights(_with_opset(copy_model(model), QDQ_MIN_OPSET, what), model.ir_version)
    name_nodes(original)
    with tempfile.TemporaryDirectory(prefix="fpgaplace-quant-") as folder:
        prepared_path, qdq_path = Path(folder) / "prepared.onnx", Path(folder) / "qdq.onnx"
        folded_away, prepared_names = _preprocess(original, prepared_path, what)
        _quantize_static(prepared_path, qdq_path, calibration, per_channel, what)
        quantized = onnx.load(qdq_path)
    removed_by_onnxruntime = prepared_names - {node.name for node in quantized.graph.node}
    _restore_metadata(original, quantized, folded_away | removed_by_onnxruntime)
    settings = {"format": "QDQ", "activations": "int8 asymmetric per-tensor",
                "weights": f"int8 symmetric {'per-channel' if per_channel else 'per-tensor'}",
                "calibration": "MinMax", "samples": len(calibration), "onnxruntime": ort.__version__}
    quantized.metadata_props.add(key=SETTINGS_KEY, value=json.dumps(settings))
    _prune_opsets(quantized)
    try:
        onnx.checker.check_model(quantized)
    except onnx.checker.ValidationError as exc:
        raise FpgaplaceError(f"{what}: onnxruntime's QDQ model is not valid ONNX: {first_line(exc)}") from exc
    check_qdq(quantized)
    return quantized


QDQ_MIN_OPSET = 13  # per-channel DequantizeLinear (its axis attribute) needs opset 13


def _constant_weights(model: onnx.ModelProto, ir_version: int) -> onnx.ModelProto:
    """``model`` (changed in place) with its initializers no longer listed as graph inputs when
    it came with IR version ``ir_version`` below 4, where every initializer must be listed so and
    is a constant all the same; its IR version is raised to 7 (as ``_with_opset`` does), where
    a listed one would be a default the caller may override, which neither constant folding nor
    the quantizer would treat as a weight."""
    if ir_version < 4:
        names = {t.name for t in model.graph.initializer}
        kept = [value for value in model.graph.input if value.name not in names]
        del model.graph.input[:]
        model.graph.input.extend(kept)
        model.ir_version = max(model.ir_version, 7)
    return model


def _with_opset(model: onnx.ModelProto, minimum: int, what: str) -> onnx.ModelProto:
    """``model`` converted to default-domain opset ``minimum`` when it is older (onnx's version
    converter), so that the quantizer may emit per-channel Q/DQ; node names are kept."""
    version = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if version >= minimum:
        return model
    from fpgaplace.model.passes.inference import convert_version

    try:
        converted = convert_version(model, minimum)  # the weights stay out of the round trip
    except Exception as exc:  # the converter raises bare RuntimeErrors and C++ errors alike
        raise FpgaplaceError(f"{what}: opset {version} cannot be upgraded to {minimum} for quantization "
                             f"({first_line(exc)})") from None
    converted.ir_version = max(converted.ir_version, 7)
    return converted


def _preprocess(model: onnx.ModelProto, target: Path, what: str) -> tuple[set[str], set[str]]:
    """Fold constant subgraphs into initializers (``passes.constant``: a weight computed from
    constants is then quantized as a weight, not as an activation) and BatchNormalization into
    its Conv/Gemm with the project's own passes (names and metadata stay), drop dead nodes and
    constants (the folded BN's among them), then what onnxruntime's
    ``quant_pre_process(skip_optimization=True, skip_symbolic_shape=True)`` does to a model of
    opset 11 or later, in memory: onnx shape inference with its defaults (here with the weights
    left out of the round trip, ``passes.inference``) and the pre-processing mark in
    ``metadata_props``; write the result to ``target``. Returns the names of the folded nodes
    and the node names of the prepared model."""
    from onnxruntime.quantization.quant_utils import add_pre_process_metadata

    constant, _ = fold_constants(model)  # weights computed from constants (the light zoo's) become initializers
    _drop_unread_masks(constant)
    unrolled, recurrences = unroll_recurrent(fold_constant_if(constant)[0])
    if recurrences:  # a reshape of Y [T, D, B, H] reads the steps' concat: no rank-4 view of a row-major stream
        unrolled, _ = collapse_reshape_chains(unrolled)
    prepared, _ = fuse_layernorm(fold_batchnorm(unrolled)[0])
    folded_names = _node_names(prepared)
    eliminate_dead_code.in_place(prepared)
    try:
        inferred = infer_shapes(prepared)
    except Exception as exc:  # noqa: BLE001 - onnx raises InferenceError, ValueError or RuntimeError
        raise FpgaplaceError(f"{what}: quantization pre-processing (onnx shape inference) failed: "
                             f"{first_line(exc)}") from exc
    add_pre_process_metadata(inferred)
    onnx.save(inferred, target)
    return _node_names(model) - folded_names, _node_names(prepared)


def _drop_unread_masks(model: onnx.ModelProto) -> None:
    """Drop the mask output of every Dropout that nothing reads, in place: its type changed from
    float to bool at opset 10, and a model upgraded from before keeps the float, which
    onnxruntime's calibration model then refuses ("does not match expected type (tensor(bool))").
    O(nodes)."""
    read = {name for node in model.graph.node for name in node.input} | output_names(model.graph)
    for node in model.graph.node:
        if node.op_type == "Dropout" and len(node.output) > 1 and node.output[1] not in read:
            del node.output[1:]


def _node_names(model: onnx.ModelProto) -> set[str]:
    return {node.name for node in model.graph.node}


def _quantize_static(source: Path, target: Path, calibration: Sequence[Sample], per_channel: bool,
                     what: str) -> None:
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # the quantizer warns on the root logger (e.g. 1-D weights it leaves per tensor)
    try:
        with _vectorised_weight_quantization():
            quantize_static(
                str(source), str(target), _SampleReader(calibration),
                quant_format=QuantFormat.QDQ,
                per_channel=per_channel,
                activation_type=QuantType.QInt8,
                weight_type=QuantType.QInt8,
                calibrate_method=CalibrationMethod.MinMax,
                extra_options={"WeightSymmetric": True, "ActivationSymmetric": False,
                               "ForceQuantizeNoInputCheck": True},
                op_types_to_quantize=_op_types_to_quantize(),
            )
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises many unrelated types
        raise FpgaplaceError(f"{what}: onnxruntime quantize_static failed: {first_line(exc)}") from exc
    finally:
        root.setLevel(level)


EXTRA_QUANTIZED_OPS = ("LRN",)
"""Op types onnxruntime's registries leave in float that the cores run in int8: given in
``op_types_to_quantize``, the quantizer puts a Q/DQ pair on their inputs and outputs
(``QDQOperatorBase``), so the MaxPool after a LocalResponseNormalization gets its own too."""


def _op_types_to_quantize() -> list[str]:
    """onnxruntime's default op types for ``quantize_static`` (its QLinear and QDQ registries) and
    ``EXTRA_QUANTIZED_OPS``."""
    from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry

    return sorted({*QLinearOpsRegistry, *QDQRegistry, *EXTRA_QUANTIZED_OPS})


# onnxruntime's QDQ quantizer handles per-channel weights one channel at a time in Python: for ResNet-50's
# 27,560 output channels, ``compute_data_quant_params`` (scale and zero point) and ``quantize_nparray`` (the
# int8 values) take about 5 s of numpy scalar work. Within ``_vectorised_weight_quantization`` the quantizer
# calls the two stand-ins below instead: for the case this module asks for (int8, symmetric, no range
# overrides, float32 weights) they compute the same numbers with the same IEEE operations, the scale in
# Python floats and the values over the whole tensor at once; any other call goes to onnxruntime's own
# function. tests/test_quantize.py checks that whole QDQ models come out byte for byte the same.


FLOAT32_TINY = float(np.finfo(np.float32).tiny)  # onnxruntime's smallest usable float32 scale


def _symmetric_int8_params(data: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """onnxruntime's ``compute_scale_zp`` for symmetric int8 ([-127, 127]) on finite float32 ``data``:
    absmax = max(|min(data, 0)|, |max(data, 0)|), scale = float32(2 absmax / 254 in float64), or
    1.0 when that is below float32's smallest normal; zero point 0. None for another input."""
    if data.dtype != np.float32 or data.size == 0:
        return None
    low, high = min(float(data.min()), 0.0), max(float(data.max()), 0.0)
    if not (math.isfinite(low) and math.isfinite(high)):
        return None
    absmax = max(abs(low), abs(high))
    scale = (absmax - -absmax) / 254.0  # float64, as onnxruntime's dr / dq
    stored = 1.0 if scale < FLOAT32_TINY else scale  # a Python float on both sides: compared in float64
    return np.array(0, dtype=np.int8), np.array(stored, dtype=np.float32)


def _fast_data_quant_params(original):
    """``compute_data_quant_params`` with the symmetric int8 case done in Python floats."""

    def compute_data_quant_params(data, quant_type, symmetric, reduce_range=False, min_real_range=None,
                                  rmin_override=None, rmax_override=None):
        if (quant_type == onnx.TensorProto.INT8 and symmetric and not reduce_range and min_real_range is None
                and rmin_override is None and rmax_override is None and isinstance(data, np.ndarray)):
            params = _symmetric_int8_params(data)
            if params is not None:
                return params
        return original(data, quant_type, symmetric, reduce_range=reduce_range, min_real_range=min_real_range,
                        rmin_override=rmin_override, rmax_override=rmax_override)

    return compute_data_quant_params


def _fast_quantize_initializer(original):
    """``quantize_onnx_initializer`` with per-channel int8 weights quantized over the whole tensor:
    round(w / scale[c]) + zero_point[c] clipped to [-128, 127], element by element as onnxruntime's
    ``quantize_nparray`` does it channel by channel."""
    from onnxruntime.quantization.quant_utils import TENSOR_NAME_QUANT_SUFFIX

    def quantize_onnx_initializer(weight, quant_type, zero_point, scale, axis=None, quant_weight_name=None,
                                  block_size=0):
        values = onnx.numpy_helper.to_array(weight) if weight.data_type == onnx.TensorProto.FLOAT else None
        if (values is None or axis is None or block_size or quant_type != onnx.TensorProto.INT8
                or not isinstance(scale, np.ndarray) or scale.dtype != np.float32
                or not isinstance(zero_point, np.ndarray) or zero_point.dtype != np.int8
                or not -values.ndim <= axis < values.ndim
                or scale.shape != (values.shape[axis],) or zero_point.shape != scale.shape
                or not np.isfinite(scale).all() or not np.isfinite(values).all()):
            return original(weight, quant_type, zero_point, scale, axis, quant_weight_name, block_size=block_size)
        shape = [1] * values.ndim
        shape[axis] = -1
        quantized = (values.astype(np.float32) / scale.reshape(shape)).round() + zero_point.reshape(shape)
        np.clip(quantized, -128, 127, out=quantized)
        name = quant_weight_name if quant_weight_name else f"{weight.name}{TENSOR_NAME_QUANT_SUFFIX}"
        return onnx.numpy_helper.from_array(quantized.astype(np.int8).reshape(weight.dims), name)

    return quantize_onnx_initializer


@contextlib.contextmanager
def _vectorised_weight_quantization() -> Iterator[None]:
    """onnxruntime's QDQ quantizer with the two stand-ins above (see there); restored on exit.
    Nothing changes when this onnxruntime's quantizer does not use those two functions."""
    from onnxruntime.quantization import qdq_quantizer

    names = ("compute_data_quant_params", "quantize_onnx_initializer")
    originals = {name: getattr(qdq_quantizer, name, None) for name in names}
    if any(function is None for function in originals.values()):
        yield
        return
    qdq_quantizer.compute_data_quant_params = _fast_data_quant_params(originals["compute_data_quant_params"])
    qdq_quantizer.quantize_onnx_initializer = _fast_quantize_initializer(originals["quantize_onnx_initializer"])
    try:
        yield
    finally:
        for name, function in originals.items():
            setattr(qdq_quantizer, name, function)


def _restore_metadata(original: onnx.ModelProto, quantized: onnx.ModelProto, removed: set[str]) -> None:
    """Copy node metadata_props (by node name) and model metadata_props that onnxruntime dropped,
    and record under ``ABSORBED_KEY`` which ``removed`` nodes every survivor absorbed."""
    by_name = {node.name: node for node in original.graph.node}
    for node in quantized.graph.node:
        source = by_name.get(node.name)
        if source is None:
            continue
        for entry in source.metadata_props:
            if node_metadata(node, entry.key) is None:
                set_node_metadata(node, entry.key, entry.value)
    absorbed = _absorbed_into(original, _node_names(quantized), removed)
    for node in quantized.graph.node:
        if node.name in absorbed:
            set_node_metadata(node, ABSORBED_KEY, ",".join(absorbed[node.name]))
    present = {entry.key for entry in quantized.metadata_props}
    for entry in original.metadata_props:
        if entry.key not in present:
            quantized.metadata_props.add(key=entry.key, value=entry.value)


def _absorbed_into(original: onnx.ModelProto, kept: set[str], removed: set[str]) -> dict[str, list[str]]:
    """Survivor name -> original nodes folded into it: a ``removed`` node belongs to the survivor
    that owns the producer of its first non-constant input. O(n + e)."""
    prods = producers(original.graph)
    constants = set(constant_initializers(original))
    owner: dict[str, str] = {}
    groups: dict[str, list[str]] = defaultdict(list)
    for node in topological_order(original.graph):
        if node.name in kept or node.name not in removed:
            continue
        data = next((t for t in node.input if t and t not in constants), None)
        source = prods.get(data) if data else None
        if source is None:
            continue
        head = source.name if source.name in kept else owner.get(source.name)
        if head is not None:
            owner[node.name] = head
            groups[head].append(node.name)
    return dict(groups)


def absorbed_nodes(qdq_model: onnx.ModelProto) -> dict[str, list[str]]:
    """Node name -> the original nodes folded into it, as ``quantize_model`` recorded them."""
    result = {}
    for node in qdq_model.graph.node:
        value = node_metadata(node, ABSORBED_KEY)
        if value:
            result[node.name] = value.split(",")
    return result


def _prune_opsets(model: onnx.ModelProto) -> None:
    """Drop opset imports of domains no node or function uses (onnxruntime may add some)."""
    used = {node.domain or "" for node in model.graph.node} | {""}
    used |= {function.domain for function in model.functions}
    kept = [opset for opset in model.opset_import if (opset.domain or "") in used]
    del model.opset_import[:]
    model.opset_import.extend(kept)


# ----------------------------------------------------------------------------- QDQ checks


def check_qdq(model: onnx.ModelProto) -> None:
    """Raise ``FpgaplaceError`` naming the first QuantizeLinear/DequantizeLinear node whose scale
    is not a constant, positive, finite float, or whose zero point is missing, not constant, not
    int8 (int32 0 for a DequantizeLinear of an int32 constant bias), or not one per scale value.
    A model with no such nodes is an error too. O(n + size of the qparams)."""
    nodes = qdq_nodes(model)
    if not nodes:
        raise FpgaplaceError(f"model '{model.graph.name}': has no QuantizeLinear/DequantizeLinear nodes, "
                             "expected a QDQ model")
    inits = constant_initializers(model)
    prods = producers(model.graph)
    for node in nodes:
        _check_qdq_node(model, node, inits, prods)


def _check_qdq_node(model: onnx.ModelProto, node: onnx.NodeProto, inits: dict, prods: dict) -> None:
    label = f"{node.op_type} '{node.name}'" if node.name else f"{node.op_type} writing '{node.output[0]}'"
    inputs = list(node.input) + [""] * (3 - len(node.input))
    scale = constant_value(model, inputs[1], inits, prods) if inputs[1] else None
    if scale is None:
        raise FpgaplaceError(f"{label}: scale '{inputs[1]}' is not a constant, expected a constant float scale")
    if not np.issubdtype(scale.dtype, np.floating) or scale.size == 0:
        raise FpgaplaceError(f"{label}: scale is {scale.dtype}{_shape_text(scale.shape)}, expected a non-empty float")
    if not np.all(np.isfinite(scale)) or not np.all(scale > 0):
        bad = scale.ravel()[~(np.isfinite(scale.ravel()) & (scale.ravel() > 0))][0]
        raise FpgaplaceError(f"{label}: scale has value {bad}, expected finite values > 0")
    if not inputs[2]:
        raise FpgaplaceError(f"{label}: has no zero point, expected an int8 zero point")
    zero_point = constant_value(model, inputs[2], inits, prods)
    if zero_point is None:
        raise FpgaplaceError(f"{label}: zero point '{inputs[2]}' is not a constant, expected a constant int8")
    if zero_point.size != scale.size:
        raise FpgaplaceError(f"{label}: zero point has {zero_point.size} values and scale {scale.size}, "
                             "expected one zero point per scale")
    if zero_point.dtype == np.int8:
        return
    quantized = constant_value(model, inputs[0], inits, prods) if node.op_type == "DequantizeLinear" else None
    is_bias = quantized is not None and quantized.dtype == np.int32 and zero_point.dtype == np.int32
    if not is_bias:
        raise FpgaplaceError(f"{label}: zero point is {zero_point.dtype}, expected int8 "
                             "(int32 only for a dequantized int32 constant bias)")
    if np.any(zero_point != 0):
        raise FpgaplaceError(f"{label}: int32 bias zero point is not 0, expected 0")


# ----------------------------------------------------------------------------- drift


@dataclass(frozen=True)
class OutputDrift:
    """How far one output of the QDQ model is from the float model's over the samples."""

    name: str
    max_abs_error: float
    max_relative_error: float  # max |q - f| / max |f| over all samples (max |q - f| if f is all 0)
    top1_agreement: float | None  # fraction of rows (last dim > 1) whose argmax agrees; else None

    def to_json(self) -> dict:
        return {"name": self.name, "max_abs_error": self.max_abs_error,
                "max_relative_error": self.max_relative_error, "top1_agreement": self.top1_agreement}


@dataclass(frozen=True)
class Drift:
    """Per-output drift of a QDQ model from its float model over ``samples`` inputs."""

    samples: int
    outputs: tuple[OutputDrift, ...]

    def output(self, name: str) -> OutputDrift:
        for entry in self.outputs:
            if entry.name == name:
                return entry
        raise KeyError(name)

    def to_json(self) -> dict:
        """A JSON-ready dict (``json.dumps`` it)."""
        return {"samples": self.samples, "outputs": [entry.to_json() for entry in self.outputs]}


def _run(session: ort.InferenceSession, names: list[str], sample: Sample, what: str) -> list[np.ndarray]:
    try:
        return session.run(names, sample)
    except Exception as exc:  # noqa: BLE001
        raise FpgaplaceError(f"{what}: onnxruntime failed: {first_line(exc)}") from exc


def measure_drift(float_model: onnx.ModelProto, qdq_model: onnx.ModelProto, samples: Sequence[Sample]) -> Drift:
    """Run both models on every sample and compare each graph output: max abs error, max relative
    error (max |diff| / max |float|, both over all samples), and top-1 agreement over every row of
    outputs whose last dim is > 1. O(samples * (cost of both models))."""
    check_samples(float_model, samples)
    names = [o.name for o in float_model.graph.output]
    qdq_names = [o.name for o in qdq_model.graph.output]
    if sorted(qdq_names) != sorted(names):
        raise FpgaplaceError(f"model '{qdq_model.graph.name}': outputs {qdq_names} differ from the float "
                             f"model's {names}, expected the same outputs")
    float_session = onnxrt.session(float_model, f"float model '{float_model.graph.name}'", threads=1)
    qdq_session = onnxrt.session(qdq_model, f"QDQ model '{qdq_model.graph.name}'", threads=1)
    expected: dict[str, list[np.ndarray]] = defaultdict(list)
    actual: dict[str, list[np.ndarray]] = defaultdict(list)
    for sample in samples:
        for name, value in zip(names, _run(float_session, names, sample, "float model"), strict=True):
            expected[name].append(np.asarray(value, np.float64))
        for name, value in zip(names, _run(qdq_session, names, sample, "QDQ model"), strict=True):
            actual[name].append(np.asarray(value, np.float64))
    outputs = tuple(_output_drift(name, expected[name], actual[name]) for name in names)
    return Drift(len(samples), outputs)


def _output_drift(name: str, expected: list[np.ndarray], actual: list[np.ndarray]) -> OutputDrift:
    worst_diff, worst_value = 0.0, 0.0
    agree, rows = 0, 0
    for want, got in zip(expected, actual, strict=True):
        if want.shape != got.shape:
            raise FpgaplaceError(f"output '{name}': QDQ shape {_shape_text(got.shape)} differs from float "
                                 f"{_shape_text(want.shape)}, expected equal shapes")
        if want.size == 0:
            continue
        diff = np.abs(got - want)
        worst_diff = max(worst_diff, float(np.nan_to_num(diff, nan=math.inf).max()))
        worst_value = max(worst_value, float(np.abs(want).max()))
        if want.ndim >= 1 and want.shape[-1] > 1:
            agree += int(np.sum(want.argmax(axis=-1) == got.argmax(axis=-1)))
            rows += want.size // want.shape[-1]
    relative = worst_diff / worst_value if worst_value > 0 else worst_diff
    return OutputDrift(name, worst_diff, relative, agree / rows if rows else None)


# ----------------------------------------------------------------------------- files


def quantize_file(
    model_path: Path | str,
    out_path: Path | str,
    *,
    calib_dir: Path | str | None = None,
    random_samples: int | None = None,
    seed: int = 0,
    input_ranges: InputRanges | None = None,
    weight_bits: int = 8,
) -> tuple[Drift, Path]:
    """Quantize the ONNX file ``model_path`` (calibrated on ``calib_dir`` or on ``random_samples``
    random inputs in ``input_ranges``, ``calibration_inputs``; weights narrowed to ``weight_bits``
    below 8, ``narrow_weights``), write the QDQ model to ``out_path`` atomically (a temporary file
    in the same folder, then a rename) and return its drift over the calibration samples and the path."""
    model_path, out_path = Path(model_path), Path(out_path)
    if not out_path.parent.is_dir():
        raise FpgaplaceError(f"{out_path}: folder {out_path.parent} does not exist, expected an existing folder")
    if out_path.is_dir():
        raise FpgaplaceError(f"{out_path}: is a folder, expected a file path for the QDQ model")
    model = _load_model(model_path)
    samples = calibration_inputs(model, calib_dir=calib_dir, random_samples=random_samples, seed=seed,
                                 input_ranges=input_ranges)
    quantized = quantize_model(model, samples)
    if weight_bits != 8:
        quantized = narrow_weights(quantized, weight_bits)
    drift = measure_drift(model, quantized, samples)
    _write_atomically(quantized, out_path)
    return drift, out_path


def _load_model(path: Path) -> onnx.ModelProto:
    if not path.is_file():
        raise FpgaplaceError(f"{path}: model file not found")
    try:
        return onnx.load(path)
    except Exception as exc:  # noqa: BLE001 - protobuf and onnx raise several types
        raise FpgaplaceError(f"{path}: cannot read it as an ONNX model: {first_line(exc)}") from exc


def _write_atomically(model: onnx.ModelProto, out_path: Path) -> None:
    try:
        write_with(out_path, lambda temporary: onnx.save(model, str(temporary)))
    except (OSError, ValueError) as exc:
        raise FpgaplaceError(f"{out_path}: cannot write the QDQ model: {first_line(exc)}") from exc


WEIGHT_HEADS = ("Conv", "Gemm", "MatMul")
"""Ops whose second input is a weight ``narrow_weights`` requantizes."""


def _per_axis(values: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    """Per-channel ``values`` shaped to broadcast along ``axis`` of an ``ndim``-D tensor."""
    return values.reshape([-1 if a == axis else 1 for a in range(ndim)]) if values.size > 1 else values.reshape(())


def narrow_weights(model: onnx.ModelProto, bits: int, layer_bits: dict[str, int] | None = None) -> onnx.ModelProto:
    """``model`` (an int8 QDQ model; not changed) with the weights of every Conv, Gemm and MatMul
    requantized to ``bits`` bits (``layer_bits`` overrides a node's by name; 8 keeps it), symmetric
    as onnxruntime's int8 weights are: per scale (per channel or per tensor) ``s' = s * max|q| /
    (2^(bits-1) - 1)`` and codes ``clip(round_half_even(q * s / s'), -(2^(bits-1) - 1), 2^(bits-1) -
    1)``, stored in int8 (an INT4 element type needs opset 21, which the quantizer's opset-13 models
    and the cores' int8 reading of weights do not have), the int32 bias requantized to the new
    accumulator scale ``s_bias * s' / s``. The widths go into the model's metadata
    (``fpgaplace.model.qdq.write_widths``), so the front end costs the weights at them. O(weights)."""
    layer_bits = layer_bits or {}
    result = copy_model(model)
    graph = result.graph
    inits = {t.name: t for t in graph.initializer}
    prods = producers(graph)
    widths = {}
    for node in graph.node:
        width = layer_bits.get(node.name, bits)
        if node.op_type not in WEIGHT_HEADS or len(node.input) < 2 or width == 8:
            continue
        if not 2 <= width <= 7:
            raise FpgaplaceError(f"node '{node.name}': weight bits {width}; expected 2 to 8")
        dq = prods.get(node.input[1])
        if dq is None or dq.op_type != "DequantizeLinear" or dq.input[0] not in inits:
            continue
        codes = onnx.numpy_helper.to_array(inits[dq.input[0]])
        if codes.dtype != np.int8 or dq.input[1] not in inits:
            continue
        high = 2 ** (width - 1) - 1
        scale = onnx.numpy_helper.to_array(inits[dq.input[1]]).astype(np.float32)
        axis = next((a.i for a in dq.attribute if a.name == "axis"), 1) % codes.ndim
        others = tuple(a for a in range(codes.ndim) if a != axis or scale.size == 1)
        peak = np.abs(codes.astype(np.int32)).max(axis=others).reshape(scale.shape)
        narrowed = np.where(peak > 0, scale * peak / np.float32(high), scale).astype(np.float32)
        real = codes.astype(np.float32) * _per_axis(scale, axis, codes.ndim)
        new_codes = np.clip(np.rint(real / _per_axis(narrowed, axis, codes.ndim)), -high, high).astype(np.int8)
        inits[dq.input[0]].CopyFrom(onnx.numpy_helper.from_array(new_codes, dq.input[0]))
        dq.input[1] = _add_initializer(graph, f"{dq.input[1]}_int{width}", narrowed)
        if len(node.input) > 2 and node.input[2]:
            _rescale_bias(graph, inits, prods.get(node.input[2]), narrowed / scale, width)
        widths[dq.input[0]] = {"bits": width, "signed": True, "bipolar": False, "node": node.name}
    write_widths(result, widths)
    return result


def _add_initializer(graph: onnx.GraphProto, name: str, values: np.ndarray) -> str:
    graph.initializer.append(onnx.numpy_helper.from_array(values, name))
    return name


def _rescale_bias(graph: onnx.GraphProto, inits: dict, dq: onnx.NodeProto | None, ratio: np.ndarray,
                  width: int) -> None:
    """The int32 bias behind ``dq`` requantized to its scale times ``ratio`` (per channel)."""
    if dq is None or dq.op_type != "DequantizeLinear" or dq.input[0] not in inits or dq.input[1] not in inits:
        return
    values = onnx.numpy_helper.to_array(inits[dq.input[0]]).astype(np.float64)
    scale = onnx.numpy_helper.to_array(inits[dq.input[1]]).astype(np.float32)
    narrowed = (scale * ratio.reshape(scale.shape) if ratio.size == scale.size else scale * ratio).astype(np.float32)
    rescaled = np.clip(np.rint(values * scale / narrowed), -(2**31), 2**31 - 1).astype(np.int32)
    inits[dq.input[0]].CopyFrom(onnx.numpy_helper.from_array(rescaled, dq.input[0]))
    dq.input[1] = _add_initializer(graph, f"{dq.input[1]}_int{width}", narrowed)
