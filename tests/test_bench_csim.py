"""scripts/bench_csim.py: argument parsing, error figures, medians, the table and the missing-tool row.

hls4ml itself is not run here (it needs its own venv and tens of seconds of g++)."""

from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench_csim.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_csim", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_csim"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("bench_csim", None)


def test_defaults_and_lists(bench):
    args = bench.parse_args([])
    assert args.models == list(bench.DEFAULT_MODELS) and args.tools == list(bench.TOOLS)
    assert (args.samples, args.repeats, args.io_type, args.board) == (1000, 1, "io_parallel", "pynq-z2")
    args = bench.parse_args(["--models", "cnn,mlp_softmax", "--tools", "hls4ml", "--repeats", "3", "--json"])
    assert args.models == ["cnn", "mlp_softmax"] and args.tools == ["hls4ml"] and args.repeats == 3 and args.json


@pytest.mark.parametrize(
    "argv", [["--models", "resnet"], ["--tools", "vivado"], ["--models", ","], ["--repeats", "0"], ["--samples", "0"]]
)
def test_bad_arguments_exit(bench, argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench.parse_args(argv)
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_help_says_what_it_measures(bench, capsys):
    with pytest.raises(SystemExit):
        bench.parse_args(["--help"])
    text = capsys.readouterr().out
    for phrase in ("build s", "top-1", "QDQ", "hls4ml", "fpgaplace compile", "median"):
        assert phrase in text


def test_error_stats(bench):
    rng = np.random.default_rng(0)
    reference = rng.standard_normal((50, 5))
    same = bench.error_stats(reference.copy(), reference)
    assert same.max_abs == 0.0 and same.max_rel == 0.0 and same.top1 == 1.0
    shifted = reference.copy()
    shifted[7, 2] += 0.25
    flipped = reference.copy()
    flipped[:10] *= -1  # argmax becomes argmin in 10 rows
    stats = bench.error_stats(shifted, reference)
    assert stats.max_abs == pytest.approx(0.25)
    assert stats.max_rel == pytest.approx(0.25 / np.abs(reference[7]).max())
    assert bench.error_stats(flipped, reference).top1 == pytest.approx(np.mean(
        flipped.argmax(axis=1) == reference.argmax(axis=1)))
    assert bench.error_stats(flipped, reference).top1 <= 0.8


def _row(bench, tool, model, value):
    return {"tool": tool, "model": model, **{field: value for field in bench.NUMERIC_FIELDS}}


def test_summary_takes_medians_and_keeps_notes(bench):
    runs = [_row(bench, "hls4ml", "mlp", v) for v in (3.0, 1.0, 2.0, 10.0)]
    runs.append(bench.unavailable_row("fpgaplace", "mlp", "No such command 'compile'."))
    runs.append({**_row(bench, "hls4ml", "cnn", 5.0)})
    summary = bench.summarize(runs)
    assert [(row["tool"], row["model"]) for row in summary] == [("hls4ml", "mlp"), ("fpgaplace", "mlp"),
                                                                 ("hls4ml", "cnn")]
    assert summary[0]["build_seconds"] == statistics.median([3.0, 1.0, 2.0, 10.0]) and summary[0]["repeats"] == 4
    assert "build_seconds" not in summary[1] and summary[1]["repeats"] == 0
    assert summary[1]["note"] == "fpgaplace: not available (No such command 'compile'.)"
    table = bench.render_table(summary, 1000).splitlines()
    assert "1000-sample s" in table[0] and "top-1 vs QDQ" in table[0]
    assert table[1].split()[:3] == ["hls4ml", "mlp", f"{summary[0]['build_seconds']:.2f}"]
    assert table[2].endswith(summary[1]["note"])
    model_column = table[0].index("model")
    assert table[2][model_column:].startswith("mlp ") and table[3][model_column:].startswith("cnn ")
    assert len(table) == 1 + len(summary)


def test_error_summary_finds_the_error_line(bench):
    usage = "Usage: fpgaplace COMMAND\nTry 'fpgaplace --help'.\n╭─ Error ─╮\n│ No such command │\n│ 'csim'. │\n╰──╯\n"
    assert bench.error_summary(usage) == "No such command 'csim'."
    progress = "importing m.onnx\nplacing\nTraceback (most recent call last):\n  File x\nImportError: no compile\n\n"
    assert bench.error_summary(progress) == "ImportError: no compile"
    assert bench.error_summary("") == "no message"


def test_missing_fpgaplace_gives_a_row(bench, tmp_path):
    samples = np.zeros((2, 4), np.float32)
    case = bench.Case("mlp", tmp_path / "f.onnx", tmp_path / "q.onnx", tmp_path / "s.npy", samples,
                      np.zeros((2, 3)), np.zeros((2, 3)), "test", 3)
    args = bench.parse_args(["--fpgaplace", str(tmp_path / "no-such-fpgaplace")])
    row = bench.measure_tool("fpgaplace", case, tmp_path / "run", args)
    assert row["note"].startswith("fpgaplace: not available (") and "no-such-fpgaplace" in row["note"]
    assert "build_seconds" not in row


def _attention_by_numpy(model, x: np.ndarray, heads: int) -> np.ndarray:
    """softmax(Q Kᵀ / √d) V per head, heads concatenated, output projection; weights from the model."""
    from onnx import numpy_helper

    w = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    q, k, v = (x @ w[f"{n}_w"] + w[f"{n}_b"] for n in ("query", "key", "value"))
    d = x.shape[-1] // heads
    heads_out = []
    for h in range(heads):
        part = slice(h * d, (h + 1) * d)
        scores = q[:, part] @ k[:, part].T / np.sqrt(d)
        probs = np.exp(scores - scores.max(axis=1, keepdims=True))
        heads_out.append(probs / probs.sum(axis=1, keepdims=True) @ v[:, part])
    return np.concatenate(heads_out, axis=1) @ w["attn_out_w"] + w["attn_out_b"]


@pytest.mark.parametrize("heads", [1, 2])
def test_self_attention_computes_attention(bench, heads):
    import onnxruntime as ort

    model = bench.self_attention(seq=8, hidden=16, heads=heads)
    x = np.random.default_rng(0).standard_normal((1, 8, 16)).astype(np.float32)
    got = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_allclose(got[0], _attention_by_numpy(model, x[0], heads), rtol=1e-4, atol=1e-5)


def test_error_stats_by_rows(bench):
    reference = np.array([[1.0, 0.0, 0.0, 2.0]])  # one sample, two tokens of width 2
    outputs = np.array([[1.0, 0.5, 0.0, 2.0]])  # token 0 keeps its argmax, token 1 too
    stats = bench.error_stats(outputs, reference, row_width=2)
    assert stats.top1 == 1.0 and stats.max_rel == pytest.approx(0.5)
    flipped = np.array([[0.0, 1.0, 0.0, 2.0]])
    assert bench.error_stats(flipped, reference, row_width=2).top1 == 0.5


def test_worker_fixed_bits():
    spec = importlib.util.spec_from_file_location("bench_hls4ml_worker", SCRIPT.with_name("bench_hls4ml_worker.py"))
    worker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(worker)
    assert worker.fixed_bits("fixed<16,6>") == (5, 10)  # sign apart: 5 integer bits, 10 fraction bits
    assert worker.fixed_bits("ap_fixed<8,3>") == (2, 5)
