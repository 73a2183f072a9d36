"""scripts/bench_realmodels.py: one small model on one board through the real CLI, its row checked
against the kept project (ops counted in its QDQ model, MACs by onnx-tool on the float model, csim
run again); a failing step's one-line error in the row; bad arguments."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
import real_models

from fpgaplace.sim.csim import run_csim

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench_realmodels.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_realmodels", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_realmodels"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("bench_realmodels", None)


def run_script(*argv: str) -> list[dict]:
    done = subprocess.run([sys.executable, str(SCRIPT), *argv, "--json"], capture_output=True, text=True,
                          timeout=900, check=True)
    return json.loads(done.stdout)


def placed_ops(qdq: onnx.ModelProto) -> int:
    """Ops a placement sees in a QDQ model: every node but the DequantizeLinear of a constant weight
    (folded into the op that reads it)."""
    constants = {t.name for t in qdq.graph.initializer}
    return sum(1 for node in qdq.graph.node if not (node.op_type == "DequantizeLinear" and node.input[0] in constants))


@pytest.fixture(scope="module")
def mobilenet_row(tmp_path_factory) -> tuple[dict, Path]:
    keep = tmp_path_factory.mktemp("bench")
    rows = run_script("--models", "mobilenetv3", "--boards", "zcu104", "--random", "2", "--keep", str(keep))
    assert len(rows) == 1
    return rows[0], keep / "mobilenetv3"


def test_a_row_counts_every_op_of_the_project_model_once(mobilenet_row):
    row, folder = mobilenet_row
    assert (row["model"], row["board"]) == ("mobilenetv3", "zcu104")
    assert not row["notes"], row["notes"]
    project = folder / "mobilenetv3-zcu104"
    assert row["ops_cores"] + row["ops_cpus"] == placed_ops(onnx.load(project / "model.qdq.onnx"))
    record = json.loads((project / "design.json").read_text())
    assert row["ops_cpus"] == sum(1 for device in record["placement"]["devices"].values()
                                  if not device.startswith("core"))


def test_a_row_gives_the_mac_share_onnx_tool_counts_on_the_float_model(mobilenet_row):
    row, folder = mobilenet_row
    record = json.loads((folder / "mobilenetv3-zcu104" / "design.json").read_text())
    cores = {core["name"] for core in record["cores"]}
    model, shapes = real_models.build("mobilenetv3")
    macs = real_models.macs_by_node(model, shapes)
    on_cores = sum(value for name, value in macs.items() if record["placement"]["devices"].get(name) in cores)
    assert 0 < row["macs_cores_pct"] <= 100
    assert row["macs_cores_pct"] == pytest.approx(100 * on_cores / sum(macs.values()), abs=0.01)


def test_a_row_has_positive_rates_none_faster_than_its_slowest_core(mobilenet_row):
    row, folder = mobilenet_row
    assert row["compile_s"] > 0 and row["fps_compile"] > 0 and row["fps_sim"] > 0
    assert row["fps_compile"] <= row["fps_slowest_core"] * (1 + 1e-9)
    assert row["fps_sim"] <= row["fps_slowest_core"] * (1 + 1e-6)
    record = json.loads((folder / "mobilenetv3-zcu104" / "design.json").read_text())
    assert row["fps_slowest_core"] == pytest.approx(1e6 / max(core["interval_us"] for core in record["cores"]))


def test_a_row_gives_the_verdict_csim_gives_again(mobilenet_row):
    row, folder = mobilenet_row
    again = run_csim(folder / "mobilenetv3-zcu104", samples=2)
    assert row["csim"].startswith("ok") == again.ok
    if not again.ok:
        assert "LSB" in row["csim"] or "bit-exact" in row["csim"]


def test_a_failing_step_puts_its_one_line_error_in_the_row(bench, tmp_path):
    step = bench.run_cli(["compile", str(tmp_path / "missing.onnx"), "--board", "zcu104", "--out",
                          str(tmp_path / "p")], timeout=120)
    assert step.error.startswith("error:") and "missing.onnx" in step.error and "\n" not in step.error
    args = bench.parse_args(["--models", "mobilenetv3", "--boards", "kv260", "--step-timeout", "0.01"])
    [row] = bench.model_rows("mobilenetv3", args)
    assert (row.model, row.board) == ("mobilenetv3", "kv260") and row.notes == ["compile: timed out after 0 s"]
    assert row.ops_cores is None and row.fps_sim is None and row.csim == "—"
    assert "compile: timed out" in bench.table([row])
    args.via_quantize = True
    [row] = bench.model_rows("mobilenetv3", args)
    assert row.notes == ["quantize: timed out after 0 s (compiled the float model)", "compile: timed out after 0 s"]


@pytest.mark.parametrize("argv", [["--models", "resnet"], ["--boards", "zcu999"], ["--models", ","],
                                  ["--random", "0"], ["--samples", "-1"]])
def test_bad_arguments_exit_with_one_line(bench, argv):
    with pytest.raises(SystemExit) as exit_info:
        bench.parse_args(argv)
    message = str(exit_info.value.code)
    assert argv[0] in message and "\n" not in message


def test_defaults_are_every_model_on_zcu104_and_kv260(bench):
    args = bench.parse_args([])
    assert args.boards == ["zcu104", "kv260"] and len(args.models) == 17  # 4 built, 4 zoo, 9 light-zoo
    assert {"yolo", "yolox", "dbnet", "mobilenetv3", "crnn_lstm", "byte_classifier", "resnet50",
            "bvlc_alexnet"} <= set(args.models)
    assert (args.random, args.samples, args.full, args.json, args.via_quantize) == (8, 2, False, False, False)
