"""The `fpgaplace` command as a user runs it: real processes, real files, JSON and errors."""

import json
import re
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from conftest import FAST_CLUSTER, WORKLOADS
from onnx import TensorProto, helper

from fpgaplace.model.zoo import cnn_residual, light_model_path

ANALYTIC = ("--cpu-cost", "analytic")
"""CPU op times from the board's figures: no profiling (fast, and the same on every host)."""


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fpgaplace.cli.app", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


def assert_one_line_error(result: subprocess.CompletedProcess, *names: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1 and lines[-1] == errors[0], result.stderr
    for name in names:
        assert name in errors[0], (name, errors[0])


@pytest.fixture(scope="module")
def cnn_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("models") / "cnn.onnx"
    onnx.save(cnn_residual(), path)
    return path


def test_help_teaches():
    result = run("--help")
    assert result.returncode == 0
    for command in ("inspect", "boards", "board", "cost", "place", "evaluate", "split", "search", "quantize",
                    "compile", "csim", "demo"):
        assert command in result.stdout
    place_help = run("place", "--help").stdout
    assert "--objective" in place_help and "--method" in place_help and "Example" in place_help


@pytest.mark.parametrize("command", ["inspect", "cost", "place", "evaluate", "split", "search", "compile"])
def test_every_model_command_takes_the_model_flags(command):
    text = " ".join(run(command, "--help").stdout.replace("│", " ").split())  # rich boxes the help
    for flag in ("--no-optimize", "--input-shape", "--batch"):
        assert flag in text, (command, flag)
    if command in ("place", "split", "search", "compile"):
        assert "--time-limit" in text and "Total seconds" in text, command


def test_the_shared_flags_are_declared_once():
    """The model and placement flags come from one declaration (cli/options.py's flag groups):
    every command that takes one has the same names, help and default; a group's flags stand
    where its parameter stands and come back as one value; a flag the group lacks is refused."""
    import inspect
    from typing import Annotated

    import typer.main

    from fpgaplace.cli.app import app
    from fpgaplace.cli.options import ModelFlags, Only, PlacementFlags, flag_groups

    commands = typer.main.get_command(app).commands

    def declared(command: str) -> dict:
        return {p.name: (p.opts, p.secondary_opts, p.help, p.default) for p in commands[command].params}

    grouped = {field for group in (ModelFlags, PlacementFlags) for field in group.__dataclass_fields__}
    place = declared("place")
    assert grouped <= set(place)
    for command in ("inspect", "cost", "evaluate", "split", "quantize", "compile"):
        shared = grouped & set(declared(command))
        assert shared and all(declared(command)[flag] == place[flag] for flag in shared), command

    def command(model: Path, flags: Annotated[ModelFlags, Only("batch", "optimized")] = ModelFlags(),
                as_json: bool = False) -> ModelFlags:
        return flags

    spread = flag_groups(command)
    assert list(inspect.signature(spread).parameters) == ["model", "optimized", "batch", "as_json"]
    assert spread(model=Path("m.onnx"), optimized=False, batch=4, as_json=False) == ModelFlags(optimized=False,
                                                                                             batch=4)

    def wrong(flags: Annotated[ModelFlags, Only("gap")] = ModelFlags()) -> None: ...

    with pytest.raises(TypeError, match="gap"):
        flag_groups(wrong)


def test_the_time_limit_counts_from_the_commands_start():
    import time

    from fpgaplace.cli.options import PlacementFlags

    flags = PlacementFlags(time_limit=5.0)
    assert 4.0 < flags.counted_from(time.perf_counter() - 0.5).time_limit <= 4.5  # half a second read
    assert flags.counted_from(time.perf_counter() - 60).time_limit == 0.5  # a tenth is kept
    assert flags.time_limit == 5.0


def test_inspect_json_totals(cnn_file):
    result = run("inspect", str(cnn_file), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["totals"]["ops"] == len(data["ops"]) > 0
    assert data["totals"]["macs"] == sum(op["macs"] for op in data["ops"])


def test_inspect_resnet50_macs_within_one_percent():
    data = json.loads(run("inspect", str(light_model_path("resnet50")), "--json").stdout)
    assert abs(data["totals"]["macs"] - 4.09e9) / 4.09e9 < 0.01


def test_inspect_no_optimize_shows_the_graph_as_loaded(cnn_file):
    optimized = json.loads(run("inspect", str(cnn_file), "--json").stdout)
    raw = json.loads(run("inspect", str(cnn_file), "--no-optimize", "--json").stdout)
    assert optimized["optimized"] and not raw["optimized"] and raw["optimizer"] is None
    assert "BatchNormalization" in {op["type"] for op in raw["ops"]}
    assert "BatchNormalization" not in {op["type"] for op in optimized["ops"]}
    assert optimized["optimizer"]["nodes_after"] == optimized["totals"]["ops"] < raw["totals"]["ops"]


def test_input_shape_fixes_an_input(cnn_file):
    data = json.loads(run("inspect", str(cnn_file), "--input-shape", "image=2x3x32x32", "--json").stdout)
    assert data["ops"][0]["output_shape"][0] == 2


@pytest.mark.parametrize("shape", ["image=1x0x32x32", "image", "=1x3", "image=1xax32x32", "y=1x3"])
def test_bad_input_shape(cnn_file, shape):
    assert_one_line_error(run("inspect", str(cnn_file), "--input-shape", shape), "--input-shape")


def test_bad_precision(cnn_file):
    assert_one_line_error(run("cost", str(cnn_file), "--precision", "int3", *ANALYTIC), "--precision", "int8")


def test_inspect_table(cnn_file):
    result = run("inspect", str(cnn_file))
    assert result.returncode == 0
    assert "Conv" in result.stdout and "MACs" in result.stdout


def test_boards_and_board():
    listed = json.loads(run("boards", "--json").stdout)
    names = {b["name"] for b in listed}
    assert {"pynq-z1", "pynq-z2", "ultra96-v2", "kv260", "zcu102", "zcu104"} <= names
    one = json.loads(run("board", "zcu104", "--json").stdout)
    assert one["name"] == "zcu104" and one["cores"] and one["cpus"]
    assert "zcu104" in run("board", "zcu104").stdout


def test_cost_json(cnn_file):
    result = run("cost", str(cnn_file), "--board", "kv260", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["board"] == "kv260" and data["unit"] == "us"
    assert all(op["transfer_us"] >= 0 for op in data["ops"])


def test_demo_places_every_op():
    result = run("demo", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    placed = [n for device in data["fpgas"] + data["cpus"] for n in device["nodes"]]
    assert sorted(placed) == sorted(int(i) for i in data["nodeNames"])
    # transfers cost by link: the DP's split, scored by link, within 10% of the bound the DP of
    # the problem at the cheapest links proves
    assert data["maxLoad"] > 0 and 0 <= data["gap"] < 0.1
    cores = {core["name"] for core in data["compile"]["cores"]}
    assert cores and cores <= set(data["deviceNames"][: len(data["fpgas"])])
    assert data["compile"]["quantized_here"]
    assert data["csim"]["ok"] and {core["name"] for core in data["csim"]["cores"]} == cores


def test_place_workload_json_and_out(tmp_path):
    workload = WORKLOADS / "throughput" / "layer-bert24_inference.json"
    out_file = tmp_path / "placement.json"
    result = run("place", str(workload), "--method", "dp", "--json", "--out", str(out_file))
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert printed == json.loads(out_file.read_text())
    assert abs(printed["maxLoad"] - 17.78990625) / 17.78990625 < 1e-6
    again = run("evaluate", str(workload), "--split", str(out_file), "--json")
    assert abs(json.loads(again.stdout)["maxLoad"] - printed["maxLoad"]) < 1e-9


# --------------------------------------------------------------------------- bad input


def _cycle_model(path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    nodes = [
        helper.make_node("Add", ["x", "b"], ["a"], name="first"),
        helper.make_node("Relu", ["a"], ["b"], name="second"),
        helper.make_node("Relu", ["a"], ["y"], name="out"),
    ]
    model = helper.make_model(helper.make_graph(nodes, "cyclic", [x], [y]))
    path.write_bytes(model.SerializeToString())


@pytest.mark.parametrize(
    "case",
    ["missing", "empty", "truncated", "not-onnx", "cycle"],
)
def test_bad_model_files(tmp_path, cnn_file, case):
    path = tmp_path / f"{case}.onnx"
    if case == "empty":
        path.write_bytes(b"")
    elif case == "truncated":
        path.write_bytes(cnn_file.read_bytes()[:200])
    elif case == "not-onnx":
        path.write_text("this is a text file, not a model\n" * 10)
    elif case == "cycle":
        _cycle_model(path)
    assert_one_line_error(run("inspect", str(path)), path.name)


def test_unknown_board(cnn_file):
    assert_one_line_error(run("cost", str(cnn_file), "--board", "no-such-board"), "no-such-board")


def test_malformed_and_negative_board_files(tmp_path, cnn_file):
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\nfabric: [unclosed\n")
    assert_one_line_error(run("board", str(broken)), "broken.yaml")
    zcu = (Path(__file__).resolve().parents[1] / "boards" / "zcu104.yaml").read_text()
    negative = tmp_path / "negative.yaml"
    negative.write_text(zcu.replace("dsp: 1728", "dsp: -5", 1))
    assert "dsp: -5" in negative.read_text()
    assert_one_line_error(run("board", str(negative)), "negative.yaml", "dsp")


def test_dangling_edge_workload(tmp_path):
    data = json.loads((WORKLOADS / "throughput" / "layer-bert24_inference.json").read_text())
    data["edges"].append({"sourceId": 1, "destId": 9999, "cost": 0.0})
    path = tmp_path / "dangling.json"
    path.write_text(json.dumps(data))
    assert_one_line_error(run("place", str(path)), "dangling.json", "9999")


def test_bad_method_and_objective():
    workload = str(WORKLOADS / "throughput" / "layer-bert24_inference.json")
    assert_one_line_error(run("place", workload, "--method", "magic"), "--method")
    assert_one_line_error(run("place", workload, "--objective", "speed"), "--objective")


def test_out_file_not_half_written(tmp_path):
    workload = str(WORKLOADS / "throughput" / "layer-bert24_inference.json")
    target = tmp_path / "missing-dir" / "placement.json"
    assert_one_line_error(run("place", workload, "--out", str(target)), "placement.json")
    assert not target.parent.exists()


# --------------------------------------------------------------------------- split, search, run-cluster


def test_split_matches_whole_model(tmp_path, cnn_file):
    out_dir = tmp_path / "split"
    result = run("split", str(cnn_file), "--board", "kv260", "--out", str(out_dir), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    manifest = json.loads((out_dir / "manifest.json").read_text())
    assert [s["name"] for s in data["submodels"]] == [s["name"] for s in manifest["submodels"]]
    assert all((out_dir / s["file"]).is_file() for s in manifest["submodels"])
    assert data["max_relative_error"] <= 1e-5


def test_place_value_is_the_value_of_the_split(tmp_path, cnn_file):
    """place and split cost the same graph (they once did not: 9,905 vs 6,263 us on ResNet-50)."""
    placed = run("place", str(cnn_file), *ANALYTIC, "--json", "--out", str(tmp_path / "placement.json"))
    assert placed.returncode == 0, placed.stderr
    split_dir = tmp_path / "split"
    written = run("split", str(cnn_file), *ANALYTIC, "--out", str(split_dir), "--json")
    assert written.returncode == 0, written.stderr
    value = json.loads(placed.stdout)["maxLoad"]
    assert abs(json.loads(written.stdout)["value"] - value) <= 1e-9 * value
    again = run("evaluate", str(cnn_file), *ANALYTIC, "--split", str(tmp_path / "placement.json"), "--json")
    assert abs(json.loads(again.stdout)["maxLoad"] - value) <= 1e-9 * value


def test_cluster_devices_by_board_identity(tmp_path, cnn_file):
    result = run("place", str(cnn_file), "--board", FAST_CLUSTER, *ANALYTIC, "--json")
    assert result.returncode == 0, result.stderr
    names = json.loads(result.stdout)["deviceNames"]
    assert names[:4] == ["node0.core0", "node0.core1", "node1.core0", "node1.core1"]
    table = run("place", str(cnn_file), "--board", FAST_CLUSTER, *ANALYTIC).stdout
    assert "node1.core" in table and "core3" not in table


def test_split_refuses_a_foreign_folder(tmp_path, cnn_file):
    out_dir = tmp_path / "not-a-split"
    out_dir.mkdir()
    (out_dir / "notes.txt").write_text("keep me\n")
    assert_one_line_error(run("split", str(cnn_file), "--out", str(out_dir)), "not-a-split")
    assert (out_dir / "notes.txt").read_text() == "keep me\n"
    assert sorted(p.name for p in out_dir.iterdir()) == ["notes.txt"]


def test_search_ranks_and_writes_the_best(tmp_path, cnn_file):
    out_dir = tmp_path / "best"
    result = run("search", str(cnn_file), "--board", "zcu104", "--time-limit", "40", "--out", str(out_dir), "--json")
    assert result.returncode == 0, result.stderr
    ranked = json.loads(result.stdout)["ranked"]
    scores = [row["us_per_sample_pipelined"] for row in ranked]
    assert scores == sorted(scores) and len(ranked) >= 4
    assert {row["optimized"] for row in ranked} == {True, False}
    best = json.loads((out_dir / "placement.json").read_text())
    assert abs(best["maxLoad"] - scores[0]) <= 1e-9 * max(1.0, scores[0])
    assert (out_dir / "split" / "manifest.json").is_file()


def test_search_bad_batch(cnn_file):
    assert_one_line_error(run("search", str(cnn_file), "--batch", "1,x"), "--batch")


def test_run_cluster_streams_samples(tmp_path, cnn_file):
    out_dir = tmp_path / "split"
    assert run("split", str(cnn_file), "--board", "zcu104", "--out", str(out_dir)).returncode == 0
    result = run("run-cluster", str(out_dir), "-n", "6", "--compare", str(cnn_file), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["samples"] == 6 and data["samples_per_s"] > 0 and data["whole_samples_per_s"] > 0
    assert set(data["devices"]) <= {
        s["device"] for s in json.loads((out_dir / "manifest.json").read_text())["submodels"]
    }


def test_run_cluster_unreachable_address(tmp_path, cnn_file):
    out_dir = tmp_path / "split"
    assert run("split", str(cnn_file), "--out", str(out_dir)).returncode == 0
    assert_one_line_error(run("run-cluster", str(out_dir), "--address", "127.0.0.1:9", "-n", "2"), "127.0.0.1:9")


@pytest.mark.parametrize("command", ["split", "search"])
def test_out_path_that_is_a_file(tmp_path, cnn_file, command):
    target = tmp_path / "taken"
    target.write_text("keep me\n")
    assert_one_line_error(run(command, str(cnn_file), "--out", str(target)), "taken", "file")
    assert target.read_text() == "keep me\n"


# --------------------------------------------------------------------------- quantize, compile, csim


@pytest.fixture(scope="module")
def fixed_cnn_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("models") / "cnn1.onnx"
    onnx.save(cnn_residual(batch=1), path)
    return path


def test_quantize_writes_a_qdq_model_and_prints_its_drift(tmp_path, fixed_cnn_file):
    from fpgaplace.model.qdq import is_qdq

    target = tmp_path / "cnn.int8.onnx"
    result = run("quantize", str(fixed_cnn_file), "--out", str(target), "--random", "4", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["out"] == str(target) and is_qdq(onnx.load(target))
    [logits] = data["drift"]["outputs"]
    assert logits["name"] == "logits" and 0 <= logits["max_relative_error"] < 0.2
    table = run("quantize", str(fixed_cnn_file), "--out", str(tmp_path / "again.onnx"), "--random", "4").stdout
    assert "top-1 agreement" in table and "logits" in table
    placed = run("place", str(target), *ANALYTIC, "--json")  # a QDQ model places like any other
    assert placed.returncode == 0 and json.loads(placed.stdout)["feasible"], placed.stderr


def test_quantize_binds_a_symbolic_batch_first(tmp_path, cnn_file):
    target = tmp_path / "cnn.int8.onnx"
    result = run("quantize", str(cnn_file), "--out", str(target), "--random", "2", "--input-shape", "image=2x3x32x32")
    assert result.returncode == 0, result.stderr
    [image] = [i for i in onnx.load(target).graph.input if i.name == "image"]
    assert [d.dim_value for d in image.type.tensor_type.shape.dim] == [2, 3, 32, 32]


@pytest.mark.parametrize("flags", [[], ["--random", "2", "--calib", "."], ["--random", "0"], ["--calib", "nowhere"]])
def test_quantize_needs_one_calibration(tmp_path, fixed_cnn_file, flags):
    target = tmp_path / "q.onnx"
    result = run("quantize", str(fixed_cnn_file), "--out", str(target), *flags)
    assert_one_line_error(result, "--random" if "--random" in flags else "--calib")
    assert not target.exists()


def test_compile_refuses_an_out_path_that_is_a_file(tmp_path, fixed_cnn_file):
    target = tmp_path / "taken"
    target.write_text("keep me\n")
    assert_one_line_error(run("compile", str(fixed_cnn_file), "--out", str(target)), "taken", "--out")
    assert target.read_text() == "keep me\n"


def test_csim_needs_a_project_folder(tmp_path):
    assert_one_line_error(run("csim", str(tmp_path / "no-project")), "no-project")
    assert_one_line_error(run("csim", str(tmp_path), "--samples", "0"), "--samples", "positive")


def test_compile_then_csim_is_bit_exact(tmp_path, fixed_cnn_file):
    project = tmp_path / "project"
    result = run("compile", str(fixed_cnn_file), "--out", str(project), "--random", "4", *ANALYTIC, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["quantized_here"] and data["project"] == str(project) and (project / "design.json").is_file()
    assert data["cores"] and {core["name"] for core in data["cores"]} <= {"core0", "core1"}
    for core in data["cores"]:
        assert {"name", "ops", "dsp", "bram36", "uram", "lut", "cycles"} <= set(core) and core["cycles"] > 0
        assert set(core["binding"]) <= {"dsp", "bram36", "uram", "lut", "ff", "dram"}
    rounds = data["refinement"]["rounds"]  # the placements compile tried, the kept one fastest
    assert rounds and rounds[data["refinement"]["chosen"]]["interval_us"] == min(r["interval_us"] for r in rounds)
    simulated = run("csim", str(project), "--json")
    assert simulated.returncode == 0, simulated.stderr
    report = json.loads(simulated.stdout)
    assert report["ok"] and all(core["bit_exact"] for core in report["cores"])
    assert [entry["name"] for entry in report["outputs"]] == ["logits"]
    weights = project / "cores" / data["cores"][0]["name"] / "weights.h"
    text = weights.read_text()
    first_bias = re.search(r"_bias\[\d+\] = \{(-?\d+)", text)
    assert first_bias is not None
    start, end = first_bias.span(1)
    weights.write_text(text[:start] + str(int(first_bias.group(1)) + 1000) + text[end:])
    broken = run("csim", str(project))
    assert broken.returncode == 1 and "no" in broken.stdout and "not exact" in broken.stdout


def test_compile_takes_a_qdq_model_as_it_is(tmp_path, fixed_cnn_file):
    from fpgaplace.model.quantize import quantize_file

    _, qdq_file = quantize_file(fixed_cnn_file, tmp_path / "cnn.int8.onnx", random_samples=4)
    result = run("compile", str(qdq_file), "--out", str(tmp_path / "project"), *ANALYTIC)
    assert result.returncode == 0, result.stderr
    assert "quantized" not in result.stdout
    assert "DSP" in result.stdout and "fps" in result.stdout and "CPU ops" in result.stdout
    design = json.loads((tmp_path / "project" / "design.json").read_text())
    for core in design["cores"]:  # each core's folded interval against its plan, and what binds it
        gap = core["interval_us"] / core["planned_compute_us"] - 1
        line = f"{core['name']}: folded interval {core['interval_us']:.4g} us, {gap:+.0%} against the plan; bound by"
        assert line in result.stdout


def test_csim_of_a_folder_without_design_json(tmp_path):
    assert_one_line_error(run("csim", str(tmp_path)), "design.json")


def test_version_prints_the_package_version():
    from fpgaplace import __version__

    result = run("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"fpgaplace {__version__}"


def test_inspect_prints_the_front_ends_notes_and_the_input_shapes(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "fixed",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "fixed.onnx"
    onnx.save(model, path)
    result = run("inspect", str(path))  # batch 1, the default, keeps the fixed batch with a note
    assert result.returncode == 0, result.stderr
    assert "note: input 'x' has a fixed batch of 4" in result.stderr
    assert "inputs: x 4x8" in result.stdout
    refused = run("inspect", str(path), "--batch", "2")  # another batch is an error naming both
    assert refused.returncode != 0 and "--batch 2" in refused.stderr and "fixed batch of 4" in refused.stderr
    assert "Traceback" not in refused.stderr and len(refused.stderr.strip().splitlines()) <= 2
    document = json.loads(run("inspect", str(path), "--json").stdout)
    assert document["inputs"] == {"x": [4, 8]}


def test_an_unbound_height_and_width_name_the_flag_to_give_them(tmp_path):
    graph = helper.make_graph(
        [helper.make_node("Conv", ["images", "w"], ["y"], pads=[1, 1, 1, 1])], "detector",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 3, "height", "width"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8, "height", "width"])],
        [helper.make_tensor("w", TensorProto.FLOAT, [8, 3, 3, 3], [0.5] * 216)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "detector.onnx"
    onnx.save(model, path)
    assert_one_line_error(run("inspect", str(path)), str(path), "input 'images'", "axis 2", "'height'",
                          "--input-shape images=1x3x<height>x<width>")
    for text in ("images=1x3x320x320", "images=1,3,320,320"):
        result = run("inspect", str(path), "--input-shape", text, "--json")
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["totals"]["macs"] == 8 * 3 * 3 * 3 * 320 * 320


def test_cpu_cost_chooses_profiled_or_analytic_cpu_times_and_the_old_flag_still_works(cnn_file):
    analytic = json.loads(run("cost", str(cnn_file), "--cpu-cost", "analytic", "--json").stdout)
    assert analytic["ops"] and not any(op["cpu_measured"] for op in analytic["ops"])
    old = json.loads(run("cost", str(cnn_file), "--no-profile", "--json").stdout)
    assert [op["latency_us"] for op in old["ops"]] == [op["latency_us"] for op in analytic["ops"]]
    profiled = json.loads(run("cost", str(cnn_file), "--cpu-cost", "profile", "--json").stdout)
    assert any(op["cpu_measured"] for op in profiled["ops"])
    assert_one_line_error(run("cost", str(cnn_file), "--cpu-cost", "guess"), "--cpu-cost", "'guess'", "analytic")
    assert_one_line_error(run("cost", str(cnn_file), "--cpu-cost", "analytic", "--profile"), "--profile")


@pytest.mark.parametrize("command", ["cost", "place", "evaluate", "split", "search", "compile"])
def test_every_costing_command_takes_cpu_cost(command):
    text = " ".join(run(command, "--help").stdout.replace("│", " ").split())
    assert "--cpu-cost" in text and "analytic" in text, command
