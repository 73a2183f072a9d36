"""How much of a real CNN `compile` puts on the FPGA cores, and how fast and exact the result is.

    python scripts/bench_realmodels.py [--models yolo,dbnet,...] [--boards zcu104,kv260] [--full]
                                       [--random 8] [--samples 2] [--via-quantize] [--keep DIR]
                                       [--step-timeout 1800] [--json]

Models: the detectors and classifiers built in tests/real_models.py (yolo, yolox, dbnet,
mobilenetv3; test sizes, or the issue's full sizes with ``--full``), the recurrent, embedding and
transformer models of ``fpgaplace.model.zoo`` (``ZOO_BUILT``: crnn_lstm, byte_classifier, bert_layer, vit4;
fixed sizes) and the nine CNNs of the onnx
package's light model zoo (their ConstantOfShape weights replaced by seeded random ones, as
``fpgaplace.model.zoo.with_random_weights`` does; their sizes are fixed). Each model goes through
the real CLI in a temporary folder, one subprocess per step:

    compile MODEL --random N --board B (per board; quantizes after its graph optimizer, as the issue
                                        measured; timed: wall seconds of the subprocess)
    inspect PROJECT/model.qdq.onnx     (the MACs of every op, for the share on the cores)
    sim PROJECT                        (event simulation: fps)
    csim PROJECT --samples S           (every core bit-exact, outputs within 1 LSB)

With ``--via-quantize``, ``quantize MODEL --random N`` writes the int8 QDQ model first (once per
model; it quantizes the model as loaded, batch norms unfolded) and compile takes that file; if
quantize fails, the float model is compiled as above and the row says so. A failing step puts its
one-line error in the row and the row's later steps are skipped; the other rows still run.

One row per model and board: ops on the cores and on the CPUs (from compile's JSON), the
dot-product MACs on the cores (%), compile seconds, fps from compile and from sim, the slowest
core's own fps (what the cores alone would give), and csim's verdict.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import real_models  # noqa: E402 - the builders live with the tests

from fpgaplace.board.load import list_boards  # noqa: E402
from fpgaplace.model import zoo  # noqa: E402

BUILT = ("yolo", "yolox", "dbnet", "mobilenetv3")
ZOO_BUILT = {"crnn_lstm": zoo.crnn_lstm, "byte_classifier": zoo.byte_classifier,
             "bert_layer": lambda: zoo.bert_encoder_layer(batch=1), "vit4": zoo.vit_encoder}
"""Models of the zoo at fixed sizes: an LSTM CRNN, a GRU byte classifier with an int32 input, a BERT layer at
batch 1 x 16 tokens x 64, a 4-layer ViT on 32x32."""
MODELS = BUILT + tuple(ZOO_BUILT) + zoo.LIGHT_MODELS
BOARDS = ("zcu104", "kv260")
PROJECT_MODEL = "model.qdq.onnx"
"""The QDQ model compile writes into a project (what its placement names)."""


@dataclass
class Step:
    """One CLI run: its JSON document (None when the output was not JSON), the one-line error of
    a failure, wall seconds."""

    document: dict | None
    error: str
    seconds: float


@dataclass
class Row:
    """One model on one board; a number is None when its step did not run."""

    model: str
    board: str
    ops_cores: int | None = None
    ops_cpus: int | None = None
    macs_cores_pct: float | None = None
    compile_s: float | None = None
    fps_compile: float | None = None
    fps_sim: float | None = None
    fps_slowest_core: float | None = None
    csim: str = "—"
    notes: list[str] = field(default_factory=list)


def error_line(stderr: str, code: int) -> str:
    """The one-line error a failed CLI run printed (its last ``error:`` line), else its last line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    return errors[-1] if errors else (lines[-1] if lines else f"exit code {code}")


def run_cli(argv: list[str], timeout: float) -> Step:
    """``fpgaplace ARGV --json`` in a subprocess. The document is read even on a non-zero exit
    (csim prints its report, then exits 1 when not exact); the error is empty only on exit 0."""
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-m", "fpgaplace.cli.app", *argv, "--json"], capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Step(None, f"timed out after {timeout:.0f} s", time.perf_counter() - start)
    seconds = time.perf_counter() - start
    try:
        document = json.loads(done.stdout)
    except ValueError:
        document = None
    return Step(document, "" if done.returncode == 0 else error_line(done.stderr, done.returncode), seconds)


def float_model(name: str, full: bool, folder: Path) -> tuple[Path, list[str]]:
    """The float model ``name`` saved in ``folder``, and the --input-shape flags binding its dims."""
    if name in BUILT:
        model, shapes = real_models.build(name, full)
    elif name in ZOO_BUILT:
        model, shapes = ZOO_BUILT[name](), {}
    elif name in zoo.LIGHT_MODELS:
        model, shapes = zoo.with_random_weights(onnx.load(str(zoo.light_model_path(name)))), {}
    else:
        raise SystemExit(f"--models: unknown model {name!r}; expected some of {', '.join(MODELS)}")
    path = folder / f"{name}.onnx"
    onnx.save(model, path)
    return path, real_models.input_shape_flags(shapes)


def compile_inputs(path: Path, shape_flags: list[str], args: argparse.Namespace) -> tuple[list[str], str]:
    """What compile is given: the float model with ``--random`` and its flags; with ``--via-quantize``
    the int8 QDQ model ``quantize`` wrote, unless quantize fails. And a note on that failure."""
    from_float = [str(path), "--random", str(args.random), *shape_flags]
    if not args.via_quantize:
        return from_float, ""
    out = path.with_suffix(".int8.onnx")
    step = run_cli(["quantize", str(path), "--out", str(out), "--random", str(args.random), *shape_flags],
                   args.step_timeout)
    return ([str(out)], "") if not step.error else (from_float, f"quantize: {step.error} (compiled the float model)")


def record_compile(row: Row, document: dict) -> dict[str, str]:
    """Fill ``row`` from compile's JSON; each op's device (core names) is returned for the MACs."""
    row.ops_cores = sum(core["ops"] for core in document["cores"])
    row.ops_cpus = len(document["cpu_ops"])
    row.fps_compile = document["fps"]
    row.fps_slowest_core = min((core["fps"] for core in document["cores"]), default=None)
    record = json.loads((Path(document["project"]) / "design.json").read_text())
    return record["placement"]["devices"]


def mac_share(project: Path, devices: dict[str, str], cores: set[str], timeout: float) -> tuple[float | None, str]:
    """Percent of the project model's dot-product MACs (Conv, Gemm, ...: ``inspect``'s count per op)
    placed on ``cores``; an error line instead when inspect fails or names other ops."""
    step = run_cli(["inspect", str(project / PROJECT_MODEL)], timeout)
    if step.error or step.document is None:
        return None, f"inspect: {step.error or 'no JSON output'}"
    macs = {op["name"]: op["macs"] for op in step.document["ops"] if op["type"] in real_models.DOT_PRODUCT_OPS}
    unknown = set(devices) - {op["name"] for op in step.document["ops"]}
    if unknown:
        return None, f"inspect: {len(unknown)} placed ops not in the project model (e.g. {min(unknown)!r})"
    total = sum(macs.values())
    on_cores = sum(value for name, value in macs.items() if devices.get(name) in cores)
    return (100.0 * on_cores / total if total else None), ""


def csim_verdict(document: dict | None, error: str) -> str:
    """``ok`` (with the LSB from onnxruntime's optimized run when more than 1: csim then matched its
    unoptimized run), or what is wrong: cores not bit-exact, outputs more than 1 LSB off (the worst)."""
    if document is None:
        return "error"
    outputs = document.get("outputs", [])
    if document.get("ok"):
        optimized = max((o.get("max_lsb_optimized") or 0 for o in outputs), default=0)
        lsb = max((o.get("max_abs_diff_lsb") or 0 for o in outputs), default=0)
        if lsb > 1:
            return f"ok ({lsb:.0f} LSB off; every layer within 1 on onnxruntime's inputs)"
        return f"ok ({optimized:.0f} LSB from optimized)" if optimized > 1 else "ok"
    wrong = [core["name"] for core in document.get("cores", []) if not core.get("bit_exact")]
    lsb = max((o.get("max_abs_diff_lsb") or 0 for o in outputs), default=0)
    parts = ([f"{', '.join(wrong)} not bit-exact"] if wrong else []) + ([f"{lsb:.0f} LSB off"] if lsb > 1 else [])
    return "; ".join(parts) or (error or "not ok")


def board_row(name: str, board: str, compile_from: list[str], folder: Path, args: argparse.Namespace) -> Row:
    """Compile ``compile_from`` for ``board`` into ``folder``, then inspect, sim and csim the project;
    the first failing step's error ends the row."""
    row = Row(name, board)
    project = folder / f"{name}-{board}"
    step = run_cli(["compile", *compile_from, "--board", board, "--out", str(project)], args.step_timeout)
    row.compile_s = step.seconds
    if step.error or step.document is None:
        row.notes.append(f"compile: {step.error or 'no JSON output'}")
        return row
    devices = record_compile(row, step.document)
    cores = {core["name"] for core in step.document["cores"]}
    row.macs_cores_pct, problem = mac_share(project, devices, cores, args.step_timeout)
    row.notes += [problem] if problem else []
    step = run_cli(["sim", str(project)], args.step_timeout)
    if step.error or step.document is None:
        row.notes.append(f"sim: {step.error or 'no JSON output'}")
        return row
    row.fps_sim = step.document["fps"]
    step = run_cli(["csim", str(project), "--samples", str(args.samples)], args.step_timeout)
    row.csim = csim_verdict(step.document, step.error)
    if step.document is None:
        row.notes.append(f"csim: {step.error or 'no JSON output'}")
    elif not step.document.get("ok") and step.document.get("first_difference"):
        row.notes.append(f"csim: {step.document['first_difference']}")
    return row


def model_rows(name: str, args: argparse.Namespace) -> list[Row]:
    """Every board's row for the model ``name`` (quantized once), in a temporary folder (or in
    ``--keep``/``name``, kept)."""
    if args.keep is not None:
        folder = args.keep / name
        folder.mkdir(parents=True, exist_ok=True)
        return board_rows(name, folder, args)
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp:
        return board_rows(name, Path(tmp), args)


def board_rows(name: str, folder: Path, args: argparse.Namespace) -> list[Row]:
    """The model ``name`` saved and quantized in ``folder``, then its row on every board."""
    path, shape_flags = float_model(name, args.full, folder)
    compile_from, note = compile_inputs(path, shape_flags, args)
    rows = [board_row(name, board, compile_from, folder, args) for board in args.boards]
    for row in rows:
        row.notes[:0] = [note] if note else []
    return rows


def shortened(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def number(value: float | None, digits: int = 4) -> str:
    if value is None:
        return "—"
    return f"{value:,.0f}" if abs(value) >= 10**digits else f"{value:.{digits}g}"


def table(rows: list[Row], note_width: int = 160) -> str:
    """The rows as a plain-text table, the notes in the last column cut to ``note_width``
    characters (the JSON has them whole)."""
    header = ["model", "board", "ops cores", "ops CPUs", "MACs cores", "compile s", "fps compile", "fps sim",
              "slowest core fps", "csim", "notes"]
    cells = [[r.model, r.board, number(r.ops_cores), number(r.ops_cpus),
              "—" if r.macs_cores_pct is None else f"{r.macs_cores_pct:.1f} %", number(r.compile_s, 3),
              number(r.fps_compile), number(r.fps_sim), number(r.fps_slowest_core), r.csim,
              shortened(" | ".join(r.notes), note_width)]
             for r in rows]
    widths = [max(len(row[i]) for row in [header, *cells]) for i in range(len(header))]
    lines = [" | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
             for row in [header, *cells]]
    lines.insert(1, "-+-".join("-" * width for width in widths))
    return "\n".join(lines)


def names(text: str, known: tuple[str, ...], flag: str) -> list[str]:
    """A comma-separated list of ``known`` names, checked."""
    chosen = [item.strip() for item in text.split(",") if item.strip()]
    wrong = [item for item in chosen if item not in known]
    if wrong or not chosen:
        raise SystemExit(f"{flag} {text!r}: expected a comma-separated list of {', '.join(known)}")
    return chosen


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated models (default: all)")
    parser.add_argument("--boards", default=",".join(BOARDS), help="comma-separated boards (default: zcu104,kv260)")
    parser.add_argument("--full", action="store_true", help="the built models at the issue's full sizes")
    parser.add_argument("--random", type=int, default=8, help="random calibration samples (default 8)")
    parser.add_argument("--samples", type=int, default=2, help="csim samples (default 2)")
    parser.add_argument("--step-timeout", type=float, default=1800.0, help="seconds per CLI step (default 1800)")
    parser.add_argument("--via-quantize", action="store_true",
                        help="quantize with `fpgaplace quantize` first and compile its QDQ model")
    parser.add_argument("--keep", type=Path, help="keep the models and projects in this folder (one per model)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    for flag, value in (("--random", args.random), ("--samples", args.samples), ("--step-timeout", args.step_timeout)):
        if value <= 0:
            raise SystemExit(f"{flag} {value}: expected a positive number")
    args.models = names(args.models, MODELS, "--models")
    args.boards = names(args.boards, tuple(list_boards()), "--boards")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    rows = []
    for name in args.models:
        rows += model_rows(name, args)
        print(table(rows[-len(args.boards):]), end="\n\n", file=sys.stderr, flush=True)  # progress
    if args.json:
        print(json.dumps([asdict(row) for row in rows], indent=2))
    else:
        print(table(rows))


if __name__ == "__main__":
    main()
