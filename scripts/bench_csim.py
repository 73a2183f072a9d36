"""C simulation side by side: fpgaplace (int8, g++) against hls4ml 1.3.0 (ap_fixed, g++), same models.

    .venv/bin/python scripts/bench_csim.py [--models mlp,cnn,attention]
                                           [--tools hls4ml,hls4ml-hgq2,fpgaplace,onnxruntime-qdq]
                                           [--samples 1000] [--repeats 1] [--json]

For each model and tool it measures:

* build s: time to turn the ONNX model into a callable C simulation. hls4ml: qonnx clean-up,
  conversion and ``compile()`` (C++ written and built with g++ into a shared library).
  fpgaplace: ``fpgaplace compile MODEL --board B --out DIR --json`` reports ``build_seconds``.
* N-sample s: time to run the N samples through it. hls4ml: one ``predict()``; fpgaplace:
  ``fpgaplace csim DIR --samples N --json`` reports ``run_seconds``.
* errors against the float model run by onnxruntime (max abs, max relative = per sample the
  largest |difference| over that sample's largest |reference| output, top-1 agreement) and the
  same against the int8 QDQ model run by onnxruntime (``fpgaplace.model.quantize.quantize_model`` when
  it exists, else onnxruntime's ``quantize_static``: QDQ, int8 activations, per-channel int8 weights,
  calibrated on 256 seeded samples that are not the measured ones).

A third row per model, onnxruntime-qdq, is the reference itself: the QDQ model in onnxruntime
(session creation as build, one single-threaded run per sample), so its error against the float
model is the int8 quantization's own error, the floor an int8 tool can reach.

Models (built here with onnx.helper, seeded weights, batch 1, NCHW, every Conv/MaxPool attribute
explicit as hls4ml's ONNX frontend requires):
  mlp          Gemm-Relu-Gemm-Relu-Gemm, 16-64-32-5, logits out
  mlp_softmax  fpgaplace.model.zoo.mlp(batch=1, sizes=(16, 64, 32, 5)): the same layers ending in Softmax
  cnn          1x3x16x16: Conv3x3(8)-Relu-MaxPool2-Conv3x3(16)-Relu-MaxPool2-Flatten-Gemm(10)
  attention    one self-attention layer, 1x8x32, 2 heads: Q/K/V projections, Q·Kᵀ/√d, Softmax, ·V,
               output projection; errors and top-1 are per token (rows of 32)
  attention_1head  the same with one head: no head split, Kᵀ a single Transpose

hls4ml 1.3's ONNX frontend parses the attention graphs but its optimizer cannot convert a MatMul of
two activations (Q·Kᵀ, probs·V): the row says so with hls4ml's own warning. Its only attention layer
is HGQ2's QMultiHeadAttention on Keras 3: tool hls4ml-hgq2 (attention models only) rebuilds the same
layer with the same weights as that Keras layer, every quantizer fixed<16,6>-like (kif, i=5, f=10,
saturating; its softmax tables of 12-bit entries), and times hls4ml's Keras 3 conversion and
compile() the same way (hgq2, keras and jax go into the same hls4ml venv on first use).

hls4ml runs in its own venv (created once at --venv, reused after; never fpgaplace's .venv) through
scripts/bench_hls4ml_worker.py with io_parallel and ap_fixed<16,6> by default. Every figure is the
median of --repeats runs, each building from scratch in a fresh folder under --workdir. A tool that
is missing or fails gives a row saying so instead of figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parents[1]
WORKER = ROOT / "scripts" / "bench_hls4ml_worker.py"
DEFAULT_VENV = ROOT / ".bench" / "hls4ml-venv"
DEFAULT_WORKDIR = ROOT / ".bench" / "csim"
DEFAULT_FPGAPLACE = ROOT / ".venv" / "bin" / "fpgaplace"
# The set that was installed and run together (hls4ml's ONNX path needs qonnx; qonnx pulls the rest).
HLS4ML_REQUIREMENTS = ("hls4ml==1.3.0", "qonnx==1.0.0", "onnx==1.23.2", "onnxruntime==1.32.0")
# hls4ml's only multi-head attention is HGQ2's Keras 3 QMultiHeadAttention: the hgq2 release whose
# module path hls4ml 1.3.0's handler names (hgq.layers.multi_head_attention, moved after 0.1.6), the
# Keras whose EinsumDense still has full_output_shape (3.11; hgq2 0.1.6 wants >=3.11) and JAX as the backend.
HGQ2_REQUIREMENTS = ("hgq2==0.1.6", "keras==3.11.3", "jax[cpu]==0.10.2")
ATTENTION_MODELS = ("attention", "attention_1head")
TOOLS = ("hls4ml", "hls4ml-hgq2", "fpgaplace", "onnxruntime-qdq")
SAMPLE_SEED = 1234
CALIBRATION_SEED = 4321
CALIBRATION_SAMPLES = 256
TOOL_TIMEOUT_SECONDS = 1800


# ---------------------------------------------------------------- models


def _float_value(name: str, shape: list[int]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def mlp_logits(sizes: tuple[int, ...] = (16, 64, 32, 5), seed: int = 0) -> onnx.ModelProto:
    """Gemm/Relu layers of ``sizes`` without the final Softmax (same weights as fpgaplace.model.zoo.mlp)."""
    from fpgaplace.model.zoo import _Builder

    b = _Builder(seed)
    x = "x"
    for i, (fan_in, fan_out) in enumerate(zip(sizes, sizes[1:], strict=False)):
        last = i == len(sizes) - 2
        w = b.weight(f"fc{i}_w", (fan_out, fan_in))
        bias = b.weight(f"fc{i}_b", (fan_out,), scale=0.1)
        x = b.node("Gemm", [x, w, bias], output="y" if last else None, transB=1)
        if not last:
            x = b.node("Relu", [x])
    return b.model("mlp", [_float_value("x", [1, sizes[0]])], [_float_value("y", [1, sizes[-1]])])


def mlp_softmax(sizes: tuple[int, ...] = (16, 64, 32, 5)) -> onnx.ModelProto:
    """The project's own MLP, Softmax included."""
    from fpgaplace.model.zoo import mlp

    return mlp(batch=1, sizes=sizes)


def small_cnn(channels: int = 3, image: int = 16, filters: tuple[int, int] = (8, 16), classes: int = 10,
              seed: int = 5) -> onnx.ModelProto:
    """Two Conv3x3-Relu-MaxPool2 stages, Flatten, Gemm; NCHW input, all attributes explicit."""
    from fpgaplace.model.zoo import _Builder

    b = _Builder(seed)
    x, cin = "x", channels
    for i, cout in enumerate(filters):
        w = b.weight(f"conv{i}_w", (cout, cin, 3, 3))
        bias = b.weight(f"conv{i}_b", (cout,), scale=0.1)
        x = b.node("Conv", [x, w, bias], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1],
                   dilations=[1, 1], group=1)
        x = b.node("MaxPool", [b.node("Relu", [x])], kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 0, 0])
        cin = cout
    side = image // 2 ** len(filters)
    x = b.node("Flatten", [x], axis=1)
    w = b.weight("fc_w", (classes, cin * side * side))
    bias = b.weight("fc_b", (classes,), scale=0.1)
    b.node("Gemm", [x, w, bias], output="y", transB=1)
    return b.model("cnn", [_float_value("x", [1, channels, image, image])], [_float_value("y", [1, classes])])


def self_attention(seq: int = 8, hidden: int = 32, heads: int = 2, seed: int = 7) -> onnx.ModelProto:
    """One multi-head self-attention layer on ``x [1, seq, hidden]``, no residual or norm: Q, K, V
    projections (MatMul + Add, fpgaplace.model.zoo's dense), Q·Kᵀ scaled by 1/√(hidden/heads),
    Softmax over the keys, ·V, heads merged, output projection. With heads > 1 the heads are split
    as exporters write them (Reshape to [1, S, H, D], Transpose); with one head there is no split
    (Kᵀ is one Transpose), the plainest graph a frontend could meet. O(seq² hidden) MACs."""
    from fpgaplace.model.zoo import _Builder, _dense

    if hidden % heads:
        raise ValueError(f"self_attention: hidden={hidden} must be a multiple of heads={heads}")
    b = _Builder(seed)
    head_dim = hidden // heads
    q, k, v = (_dense(b, "x", name, hidden, hidden) for name in ("query", "key", "value"))
    if heads == 1:
        k = b.node("Transpose", [k], perm=[0, 2, 1])
    else:
        split = b.const("split_heads_shape", np.array([1, seq, heads, head_dim], np.int64))
        q, k, v = (b.node("Transpose", [b.node("Reshape", [t, split])], perm=perm)
                   for t, perm in ((q, [0, 2, 1, 3]), (k, [0, 2, 3, 1]), (v, [0, 2, 1, 3])))
    scale = b.const("attention_scale", np.array(1.0 / np.sqrt(head_dim), np.float32))
    probs = b.node("Softmax", [b.node("Mul", [b.node("MatMul", [q, k]), scale])], axis=-1)
    context = b.node("MatMul", [probs, v])
    if heads > 1:
        merge = b.const("merge_heads_shape", np.array([1, seq, hidden], np.int64))
        context = b.node("Reshape", [b.node("Transpose", [context], perm=[0, 2, 1, 3]), merge])
    w, bias = b.weight("attn_out_w", (hidden, hidden)), b.weight("attn_out_b", (hidden,), scale=0.02)
    b.node("Add", [b.node("MatMul", [context, w]), bias], output="y")
    name = f"attention_{heads}head"
    return b.model(name, [_float_value("x", [1, seq, hidden])], [_float_value("y", [1, seq, hidden])])


MODELS: dict[str, Callable[[], onnx.ModelProto]] = {
    "mlp": mlp_logits,
    "mlp_softmax": mlp_softmax,
    "cnn": small_cnn,
    "attention": self_attention,
    "attention_1head": lambda: self_attention(heads=1),
}
DEFAULT_MODELS = ("mlp", "cnn")


def input_shape(model: onnx.ModelProto) -> tuple[int, ...]:
    """The one input's shape, batch axis included (static dims only)."""
    return tuple(d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim)


def random_samples(model: onnx.ModelProto, count: int, seed: int) -> np.ndarray:
    """``count`` standard-normal inputs of the model's per-sample shape (batch axis dropped)."""
    return np.random.default_rng(seed).standard_normal((count, *input_shape(model)[1:])).astype(np.float32)


# ---------------------------------------------------------------- references


@dataclasses.dataclass
class ToolRun:
    """What a tool reports for one build and one N-sample run."""

    build_seconds: float
    run_seconds: float
    outputs: np.ndarray
    inputs: np.ndarray | None = None  # the samples the tool used when not the ones given to it


def run_onnxruntime(model_path: Path, samples: np.ndarray) -> ToolRun:
    """Session creation (build) and one single-threaded run per sample of the batch-1 model. O(N) runs."""
    import onnxruntime as ort

    start = time.perf_counter()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    built = time.perf_counter()
    rows = [session.run(None, {name: sample[None]})[0].reshape(-1) for sample in samples]
    return ToolRun(built - start, time.perf_counter() - built, np.asarray(rows, dtype=np.float64))


def onnxruntime_outputs(model_path: Path, samples: np.ndarray) -> np.ndarray:
    """Rows of flattened outputs of the model run by onnxruntime on ``samples``."""
    return run_onnxruntime(model_path, samples).outputs


def calibration_feeds(model: onnx.ModelProto, samples: np.ndarray) -> list[dict[str, np.ndarray]]:
    """One {input name: batch-1 array} dict per sample, the form both quantizers take."""
    return [{model.graph.input[0].name: sample[None]} for sample in samples]


class _CalibrationReader:
    """onnxruntime's CalibrationDataReader protocol over a list of feeds."""

    def __init__(self, feeds: list[dict[str, np.ndarray]]) -> None:
        self._feeds = iter(feeds)

    def get_next(self) -> dict | None:
        return next(self._feeds, None)


def quantize_qdq(model: onnx.ModelProto, calibration: np.ndarray, out: Path) -> str:
    """Write the int8 QDQ model to ``out``; returns which quantizer made it (fpgaplace's once it exists)."""
    feeds = calibration_feeds(model, calibration)
    try:
        from fpgaplace.model.quantize import quantize_model
    except ImportError:
        quantize_model = None
    if quantize_model is not None:
        onnx.save(quantize_model(model, feeds), out)
        return "fpgaplace.model.quantize.quantize_model"
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    float_path = out.with_name(out.stem + "_float_for_ort.onnx")
    onnx.save(model, float_path)
    quantize_static(
        str(float_path),
        str(out),
        _CalibrationReader(feeds),
        quant_format=QuantFormat.QDQ,
        per_channel=True,
        activation_type=QuantType.QInt8,
        weight_type=QuantType.QInt8,
    )
    return "onnxruntime quantize_static (QDQ, int8, per-channel weights)"


@dataclasses.dataclass(frozen=True)
class ErrorStats:
    """How far a tool's outputs are from a reference's on the same samples."""

    max_abs: float
    max_rel: float  # per sample: max |difference| / max |reference|, then the max over samples
    top1: float  # fraction of samples whose argmax agrees


def error_stats(outputs: np.ndarray, reference: np.ndarray, row_width: int | None = None) -> ErrorStats:
    """Compare two (N, K) arrays row by row, or by rows of ``row_width`` values when given (one row
    per token of a [1, seq, hidden] output: its relative error and argmax are per token). O(N K)."""
    if row_width is not None:
        reference = np.asarray(reference).reshape(-1, row_width)
    outputs = np.asarray(outputs, dtype=np.float64).reshape(reference.shape)
    difference = np.abs(outputs - reference)
    scale = np.maximum(np.abs(reference).max(axis=1), np.finfo(np.float64).tiny)
    return ErrorStats(
        max_abs=float(difference.max()),
        max_rel=float((difference.max(axis=1) / scale).max()),
        top1=float(np.mean(outputs.argmax(axis=1) == reference.argmax(axis=1))),
    )


@dataclasses.dataclass
class Case:
    """One model with its files and reference outputs on the measured samples."""

    name: str
    float_path: Path
    qdq_path: Path
    samples_path: Path
    samples: np.ndarray
    float_outputs: np.ndarray
    qdq_outputs: np.ndarray
    quantizer: str
    row_width: int  # the output's last dim: errors and top-1 are per row of it (per token for attention)


def prepare_case(name: str, workdir: Path, count: int) -> Case:
    """Build the model, its QDQ version, the samples and both references under ``workdir/name``."""
    folder = workdir / name
    folder.mkdir(parents=True, exist_ok=True)
    model = MODELS[name]()
    float_path, qdq_path, samples_path = folder / "float.onnx", folder / "qdq.onnx", folder / "samples.npy"
    onnx.save(model, float_path)
    quantizer = quantize_qdq(model, random_samples(model, CALIBRATION_SAMPLES, CALIBRATION_SEED), qdq_path)
    samples = random_samples(model, count, SAMPLE_SEED)
    np.save(samples_path, samples)
    return Case(
        name=name,
        float_path=float_path,
        qdq_path=qdq_path,
        samples_path=samples_path,
        samples=samples,
        float_outputs=onnxruntime_outputs(float_path, samples),
        qdq_outputs=onnxruntime_outputs(qdq_path, samples),
        quantizer=quantizer,
        row_width=model.graph.output[0].type.tensor_type.shape.dim[-1].dim_value,
    )


# ---------------------------------------------------------------- tools


class ToolUnavailable(Exception):
    """A tool could not be run; the message is one line for the table."""


_BOX_CHARS = "│╭╮╰╯─┃━"


def error_summary(text: str) -> str:
    """One line saying why a tool failed, from its stderr (progress lines come first, the error last):
    the text inside a rich error box if there is one (typer's usage errors), else the last non-blank
    line (a traceback's exception line, or the CLI's 'error: ...' line)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    boxed = [line.strip(_BOX_CHARS + " ") for line in lines if line.startswith("│")]
    if boxed:
        return " ".join(part for part in boxed if part)
    return lines[-1] if lines else "no message"


def run_logged(command: Sequence[str], log: Path, timeout: float = TOOL_TIMEOUT_SECONDS) -> str:
    """Run ``command``; stdout is returned, both streams appended to ``log``. Raises ToolUnavailable."""
    try:
        done = subprocess.run(list(command), capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError as error:
        raise ToolUnavailable(f"{command[0]}: {error.strerror}") from None
    except subprocess.TimeoutExpired:
        raise ToolUnavailable(f"{Path(command[0]).name} did not finish in {timeout:.0f} s") from None
    with log.open("a") as stream:
        stream.write(f"$ {' '.join(map(str, command))}\n{done.stdout}\n{done.stderr}\n")
    if done.returncode != 0:
        raise ToolUnavailable(error_summary(done.stderr or done.stdout))
    return done.stdout


def ensure_hls4ml_venv(venv: Path, extra: tuple[str, ...] = ()) -> Path:
    """Create ``venv`` with HLS4ML_REQUIREMENTS (and ``extra``) once; reuse it while its marker lists
    every requirement wanted (installing ``extra`` later adds them to the marker)."""
    python, marker = venv / "bin" / "python", venv / "bench-requirements.txt"
    requirements = (*HLS4ML_REQUIREMENTS, *extra)
    have = marker.read_text().splitlines() if marker.exists() else []
    if python.exists() and set(requirements) <= set(have):
        return python
    requirements = tuple(dict.fromkeys((*requirements, *have)))
    wanted = "\n".join(requirements) + "\n"
    print(f"installing into {venv}: {' '.join(requirements)} (once)", file=sys.stderr, flush=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    log = venv.parent / "hls4ml-venv-install.log"
    run_logged([sys.executable, "-m", "venv", str(venv)], log)
    run_logged([str(python), "-m", "pip", "install", "--quiet", *requirements], log)
    marker.write_text(wanted)
    return python


@dataclasses.dataclass(frozen=True)
class Hls4mlSettings:
    python: Path
    io_type: str
    precision: str
    backend: str
    frontend: str = "onnx"  # or "hgq2": the attention models as one HGQ2 QMultiHeadAttention (Keras 3)


def run_hls4ml(case: Case, folder: Path, settings: Hls4mlSettings) -> ToolRun:
    """Build and run the float model with hls4ml in its own venv (scripts/bench_hls4ml_worker.py)."""
    folder.mkdir(parents=True, exist_ok=True)
    request = {
        "model": str(case.float_path),
        "samples": str(case.samples_path),
        "output_dir": str(folder / "project"),
        "io_type": settings.io_type,
        "precision": settings.precision,
        "backend": settings.backend,
        "frontend": settings.frontend,
    }
    request_path, result_path = folder / "request.json", folder / "result.json"
    request_path.write_text(json.dumps(request, indent=2))
    run_logged([str(settings.python), str(WORKER), str(request_path), str(result_path)], folder / "log.txt")
    result = json.loads(result_path.read_text())
    return ToolRun(result["build_seconds"], result["run_seconds"], np.asarray(result["outputs"]))


def _json_document(stdout: str, command: str) -> dict:
    try:
        return json.loads(stdout)
    except json.JSONDecodeError:
        raise ToolUnavailable(f"fpgaplace {command} --json printed no JSON") from None


def run_fpgaplace(case: Case, folder: Path, fpgaplace: Path, board: str, model: str = "qdq") -> ToolRun:
    """``fpgaplace compile`` then ``fpgaplace csim --inputs samples.npy --save-outputs``.

    Build seconds: the compile command's wall time (import, placement, code generation) plus the
    g++ build csim reports; run seconds: csim's ``run_seconds`` (the placed model only, cores in
    C and CPU pieces in onnxruntime; its bit-exact checks are timed apart).
    """
    folder.mkdir(parents=True, exist_ok=True)
    log, out, saved = folder / "log.txt", folder / "project", folder / "outputs.npz"
    model_path = case.qdq_path if model == "qdq" else case.float_path
    start = time.perf_counter()
    _json_document(
        run_logged([str(fpgaplace), "compile", str(model_path), "--board", board, "--out", str(out), "--json"], log),
        "compile",
    )
    compile_seconds = time.perf_counter() - start
    command = [str(fpgaplace), "csim", str(out), "--inputs", str(case.samples_path), "--save-outputs", str(saved),
               "--json"]
    simulated = _json_document(run_logged(command, log), "csim")
    try:
        with np.load(saved) as arrays:
            outputs = np.asarray(arrays[arrays.files[0]], dtype=np.float64).reshape(len(case.samples), -1)
        build = compile_seconds + float(simulated["build_seconds"])
        return ToolRun(build, float(simulated["run_seconds"]), outputs)
    except (KeyError, TypeError, ValueError, OSError) as error:
        raise ToolUnavailable(f"fpgaplace csim outputs: {type(error).__name__}: {error}") from None


# ---------------------------------------------------------------- measuring and summarising


NUMERIC_FIELDS = (
    "build_seconds",
    "run_seconds",
    "float_max_abs",
    "float_max_rel",
    "float_top1",
    "qdq_max_abs",
    "qdq_max_rel",
    "qdq_top1",
)


def measured_row(tool: str, case: Case, run: ToolRun) -> dict:
    """One table row of figures for one tool run on one case."""
    if run.inputs is None:
        float_ref, qdq_ref = case.float_outputs, case.qdq_outputs
    else:
        float_ref = onnxruntime_outputs(case.float_path, run.inputs)
        qdq_ref = onnxruntime_outputs(case.qdq_path, run.inputs)
    against_float, against_qdq = (error_stats(run.outputs, ref, case.row_width) for ref in (float_ref, qdq_ref))
    return {
        "tool": tool,
        "model": case.name,
        "build_seconds": run.build_seconds,
        "run_seconds": run.run_seconds,
        **{f"float_{k}": v for k, v in dataclasses.asdict(against_float).items()},
        **{f"qdq_{k}": v for k, v in dataclasses.asdict(against_qdq).items()},
    }


def unavailable_row(tool: str, model: str, reason: str) -> dict:
    return {"tool": tool, "model": model, "note": f"{tool}: not available ({reason})"}


def summarize(runs: list[dict]) -> list[dict]:
    """One row per (tool, model), in first-seen order: the median of each figure over the runs that
    produced figures, ``repeats`` how many did, and the first note of those that did not."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in runs:
        groups.setdefault((row["tool"], row["model"]), []).append(row)
    summary = []
    for (tool, model), rows in groups.items():
        measured = [row for row in rows if "note" not in row]
        row = {"tool": tool, "model": model, "repeats": len(measured)}
        if measured:
            row.update({field: statistics.median(r[field] for r in measured) for field in NUMERIC_FIELDS})
        notes = [r["note"] for r in rows if "note" in r]
        if notes:
            row["note"] = notes[0]
        summary.append(row)
    return summary


COLUMNS = (
    ("tool", "tool", str),
    ("model", "model", str),
    ("build s", "build_seconds", lambda v: f"{v:.2f}"),
    ("{n}-sample s", "run_seconds", lambda v: f"{v:.3f}"),
    ("max abs err vs float", "float_max_abs", lambda v: f"{v:.3g}"),
    ("max rel err vs float", "float_max_rel", lambda v: f"{v:.3g}"),
    ("top-1 vs float", "float_top1", lambda v: f"{v:.1%}"),
    ("max abs err vs QDQ", "qdq_max_abs", lambda v: f"{v:.3g}"),
    ("top-1 vs QDQ", "qdq_top1", lambda v: f"{v:.1%}"),
)


def table_cells(row: dict) -> list[str]:
    """A summary row as table cells; a row without figures puts its note after tool and model."""
    if "build_seconds" not in row:
        return [row["tool"], row["model"], row.get("note", "no runs")] + [""] * (len(COLUMNS) - 3)
    return [fmt(row[key]) for _, key, fmt in COLUMNS]


def render_table(summary: list[dict], samples: int) -> str:
    """The summary as plain fixed-width text: a header line, then one line per row."""
    headers = [title.format(n=samples) for title, _, _ in COLUMNS]
    rows = [table_cells(row) if "build_seconds" in row else table_cells(row)[:2] for row in summary]
    widths = [max(len(cells[i]) for cells in [headers, *rows] if i < len(cells)) for i in range(len(headers))]

    def line(cells: list[str]) -> str:
        return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=False))

    lines = [line(headers)]
    for row, cells in zip(summary, rows, strict=True):
        lines.append(line(cells) if "build_seconds" in row else f"{line(cells)}  {row.get('note', 'no runs')}")
    return "\n".join(text.rstrip() for text in lines)


# ---------------------------------------------------------------- command line


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS),
                        help=f"comma-separated, from {', '.join(MODELS)} (default: %(default)s)")
    parser.add_argument("--tools", default=",".join(TOOLS), help="comma-separated (default: %(default)s)")
    parser.add_argument("--samples", type=int, default=1000, help="samples run through each C simulation")
    parser.add_argument("--repeats", type=int, default=1, help="runs per (tool, model); figures are medians")
    parser.add_argument("--io-type", choices=("io_parallel", "io_stream"), default="io_parallel", help="hls4ml")
    parser.add_argument("--precision", default="fixed<16,6>", help="hls4ml default precision")
    parser.add_argument("--backend", default="Vitis", help="hls4ml backend (only its g++ C simulation is used)")
    parser.add_argument("--board", default="pynq-z2", help="fpgaplace board")
    parser.add_argument("--fpgaplace-model", choices=("qdq", "float"), default="qdq",
                        help="which model file `fpgaplace compile` gets")
    parser.add_argument("--fpgaplace", type=Path, default=DEFAULT_FPGAPLACE, help="the fpgaplace executable")
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV, help="hls4ml's own venv (made once)")
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR, help="models, projects and logs")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    args.models = [m for m in args.models.split(",") if m]
    args.tools = [t for t in args.tools.split(",") if t]
    for value, known, flag in ((args.models, MODELS, "--models"), (args.tools, TOOLS, "--tools")):
        unknown = [v for v in value if v not in known]
        if unknown or not value:
            parser.error(f"{flag}: expected names from {', '.join(known)}, got {','.join(value) or 'nothing'}")
    if args.samples < 1 or args.repeats < 1:
        parser.error("--samples and --repeats must be at least 1")
    return args


def measure_tool(tool: str, case: Case, folder: Path, args: argparse.Namespace) -> dict:
    """One run of one tool on one case, as a row (figures or a note)."""
    try:
        if tool == "hls4ml":
            settings = Hls4mlSettings(ensure_hls4ml_venv(args.venv), args.io_type, args.precision, args.backend)
            run = run_hls4ml(case, folder, settings)
        elif tool == "hls4ml-hgq2":
            python = ensure_hls4ml_venv(args.venv, HGQ2_REQUIREMENTS)
            settings = Hls4mlSettings(python, args.io_type, args.precision, args.backend, frontend="hgq2")
            run = run_hls4ml(case, folder, settings)
        elif tool == "fpgaplace":
            run = run_fpgaplace(case, folder, args.fpgaplace, args.board, args.fpgaplace_model)
        else:
            run = run_onnxruntime(case.qdq_path, case.samples)
    except ToolUnavailable as error:
        return unavailable_row(tool, case.name, str(error))
    return measured_row(tool, case, run)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    runs_dir = args.workdir / "runs"
    shutil.rmtree(runs_dir, ignore_errors=True)
    cases = [prepare_case(name, args.workdir / "models", args.samples) for name in args.models]
    runs = []
    for repeat in range(args.repeats):
        for case in cases:
            for tool in (t for t in args.tools if t != "hls4ml-hgq2" or case.name in ATTENTION_MODELS):
                row = measure_tool(tool, case, runs_dir / f"{repeat}" / case.name / tool, args)
                runs.append({**row, "repeat": repeat})
                progress = row.get("note") or f"build {row['build_seconds']:.2f} s, run {row['run_seconds']:.3f} s"
                print(f"run {repeat + 1}/{args.repeats} {tool} {case.name}: {progress}", file=sys.stderr, flush=True)
    summary = summarize(runs)
    settings = {
        "samples": args.samples,
        "repeats": args.repeats,
        "hls4ml": {"requirements": list(HLS4ML_REQUIREMENTS), "io_type": args.io_type,
                   "precision": args.precision, "backend": args.backend},
        "fpgaplace": {"board": args.board, "model": args.fpgaplace_model},
        "quantizer": {case.name: case.quantizer for case in cases},
    }
    if args.json:
        print(json.dumps({"settings": settings, "summary": summary, "runs": runs}, indent=2))
        return
    print(render_table(summary, args.samples))
    print(f"\nmedians of {args.repeats} run(s); hls4ml {args.io_type} {args.precision}; "
          f"QDQ from {', '.join(sorted(set(settings['quantizer'].values())))}")


if __name__ == "__main__":
    main()
