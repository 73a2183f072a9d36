from __future__ import annotations

from pathlib import Path

import onnx
from google.protobuf.message import DecodeError

from fpgaplace.model.frontend.bind import bind_inputs
from fpgaplace.model.frontend.build import build
from fpgaplace.model.frontend.checks import (
    InputShapes,
    check_batch,
    check_element_types,
    check_input_shapes,
    check_proto,
    check_strictly,
    check_text,
    read_unknown_dims,
    sort_nodes,
)
from fpgaplace.model.frontend.shapes import attach_qonnx_functions, infer_shapes, is_qonnx_quantizer, resolve_shapes
from fpgaplace.model.ir import OpGraph
from fpgaplace.model.ops import STANDARD_DOMAINS
from fpgaplace.model.passes import qonnx
from fpgaplace.util.errors import FpgaplaceError, first_line

MIN_OPSET, MAX_OPSET = 9, 21



def load_onnx(path: str | Path, batch: int = 1, input_shapes: InputShapes | None = None) -> OpGraph:
    """Load the ONNX file ``path`` (external data from its folder) as an ``OpGraph``.

    ``input_shapes`` maps graph input names to their dims (see ``from_model``)."""
    path = Path(path)
    source = str(path)
    check_batch(batch, source)
    check_input_shapes(input_shapes, source)
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
    check_proto(model, source)
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
    check_batch(batch, source)
    given = check_input_shapes(input_shapes, source)
    check_proto(model, source)
    check_text(model, source)
    work = onnx.ModelProto()
    work.CopyFrom(model)
    notes: list[str] = []
    positions = sort_nodes(work, source)
    if upgrade_old_opset(work, source, notes):
        positions = list(range(len(work.graph.node)))  # the converter rebuilt the node list
    read_unknown_dims(work, notes)
    check_element_types(work, source)
    attach_qonnx_functions(work, source, notes)
    bind_inputs(work, batch, given, source, notes)
    _run_checker(work, source, notes)
    work = infer_shapes(work, source, notes)
    work, positions = resolve_shapes(work, positions, source, notes)
    check_strictly(work, source)
    return build(work, positions, source, notes)


def _default_opset(model: onnx.ModelProto) -> int:
    for opset in model.opset_import:
        if opset.domain in STANDARD_DOMAINS:
            return opset.version
    return 0


def upgrade_old_opset(model: onnx.ModelProto, source: str, notes: list[str]) -> bool:
    """Accept opsets 9..21 (newer with a note); upgrade older ones to 9 with onnx's version
    converter (a QONNX model to ``qonnx.MIN_FUNCTION_OPSET``, the oldest its quantizers' functions
    run on). Returns whether the model was converted."""
    version = _default_opset(model)
    if version == 0:
        raise FpgaplaceError(f"{source}: the model imports no default-domain opset")
    if version > MAX_OPSET:
        notes.append(f"opset {version} is newer than the tested range {MIN_OPSET}-{MAX_OPSET}")
    target = qonnx.MIN_FUNCTION_OPSET if any(is_qonnx_quantizer(node) for node in model.graph.node) else MIN_OPSET
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
