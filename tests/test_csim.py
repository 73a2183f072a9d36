"""C simulation (``fpgaplace.sim.csim.run_csim``): every core built with g++ and compared bit for
bit with the integer reference, the model's outputs with onnxruntime in LSB.

Each project is compiled and simulated once per module; tests that break a project work on a
copy of it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
import real_models
from onnx import numpy_helper

from fpgaplace import Design
from fpgaplace.model import zoo as models
from fpgaplace.place.solvers.problem import Placement
from fpgaplace.sim.csim import CsimResult, OutputComparison, lsb_difference, lsb_outside, run_csim
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.onnxrt import random_inputs, session

SAMPLES = 3


@dataclass
class Simulated:
    folder: Path
    doc: dict
    first: CsimResult  # the run that built every core


def compile_and_simulate(model, folder: Path, board: str = "zcu104") -> Simulated:
    result = Design(model, board, profile_cpu=False).compile(folder, random_samples=8)
    return Simulated(folder, result.design, run_csim(folder, samples=SAMPLES))


@pytest.fixture(scope="module")
def cnn(tmp_path_factory) -> Simulated:
    return compile_and_simulate(models.cnn_residual(batch=1), tmp_path_factory.mktemp("cnn") / "project")


@pytest.fixture(scope="module")
def mlp(tmp_path_factory) -> Simulated:
    return compile_and_simulate(models.mlp(batch=1, sizes=(16, 64, 32, 5)), tmp_path_factory.mktemp("mlp") / "project")


def copy_of(project: Simulated, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(project.folder, target)
    return target


def one_line_error(caught: pytest.ExceptionInfo) -> str:
    message = str(caught.value)
    assert message and "\n" not in message
    return message


# --------------------------------------------------------------------------- exactness


@pytest.mark.parametrize("name", ["cnn", "mlp"])
def test_cores_are_bit_exact_and_outputs_within_one_lsb(name, request):
    project: Simulated = request.getfixturevalue(name)
    report = project.first
    assert [c.name for c in report.cores] == [core["name"] for core in project.doc["cores"]]
    assert report.cores and all(c.bit_exact and c.mismatches == 0 and c.built for c in report.cores)
    assert report.outputs and all(o.max_abs_diff_lsb is not None and o.max_abs_diff_lsb <= 1 for o in report.outputs)
    assert report.ok and report.samples == SAMPLES


@pytest.mark.parametrize("name", ["cnn", "mlp"])
def test_every_stage_loops_as_many_cycles_as_the_op_library_says(name, request):
    """The C simulation counts each stage's pipelined-loop iterations (II=1 cycles): for every
    layer they equal the op library's cycles for its folding, forks and width converters stay
    within the core's interval, so the core's measured interval is the planned one."""
    project: Simulated = request.getfixturevalue(name)
    data = project.first.to_json()
    for core, record in zip(data["cores"], project.doc["cores"], strict=True):
        stages = core["stages"]
        assert len(stages) >= len(record["layers"]) and all(s["cycles_csim"] > 0 for s in stages)
        layers = {layer["op"]: layer for layer in record["layers"]}
        for stage in stages:
            if stage["op"] is not None:
                assert stage["cycles_csim"] == stage["cycles_model"] == layers[stage["op"]]["cycles"], stage
            assert stage["cycles_csim"] <= record["compute_interval_cycles"], stage
        assert core["interval_cycles_csim"] == core["interval_cycles_model"] == record["compute_interval_cycles"]


def test_a_model_of_fixed_batch_two_runs_each_core_once_per_sample(tmp_path):
    """A model whose batch is fixed at 2 (the design's batch left at 1): each core runs once per
    sample of the model's batch, and the results are still exact."""
    model = models.mlp(batch=2, sizes=(16, 64, 32, 5))
    result = compile_and_simulate(model, tmp_path / "project")
    assert result.doc["model"]["batch"] == 2
    assert result.first.ok and all(c.runs == 2 * SAMPLES for c in result.first.cores)


def test_to_json_has_the_documented_keys(mlp):
    data = mlp.first.to_json()
    assert json.loads((mlp.folder / "results" / "csim.json").read_text())["ok"] is True  # saved for the report
    json.dumps(data)  # plain JSON
    assert {"ok", "cores", "outputs", "build_seconds", "run_seconds"} <= set(data)
    assert data["ok"] is True and data["build_seconds"] > 0 and data["run_seconds"] >= 0
    assert all({"name", "bit_exact"} <= set(core) for core in data["cores"])
    assert [o["name"] for o in data["outputs"]] == ["y"]
    assert all({"name", "max_abs_diff_lsb"} <= set(o) for o in data["outputs"])


@pytest.fixture(scope="module")
def streamed(tmp_path_factory) -> Simulated:
    """An MLP whose 512 x 256 layer is too big to stay on a PYNQ-Z2 core: it reads it over m_axi."""
    return compile_and_simulate(models.mlp(batch=1, sizes=(16, 512, 256, 5)),
                                tmp_path_factory.mktemp("streamed") / "project", "pynq-z2")


def streamed_cores(project: Simulated) -> list[dict]:
    return [core for core in project.doc["cores"] if core["streamed_weight_bytes"] > 0]


def test_weights_streamed_from_dram_are_bit_exact(streamed):
    """The streamed weights exist once, as weights.bin (no C initializer of them is written)."""
    cores = streamed_cores(streamed)
    assert cores and all((streamed.folder / c["folder"] / "weights.bin").stat().st_size == c["streamed_weight_bytes"]
                         for c in cores)
    assert not list(streamed.folder.rglob("wmem.h"))
    assert streamed.first.ok and all(c.bit_exact for c in streamed.first.cores)


def test_streamed_weights_are_embedded_from_weights_bin(streamed, tmp_path):
    """g++ embeds weights.bin: changed bytes rebuild the core and make it differ from the
    reference; a missing or short weights.bin is a one-line error naming it."""
    folder = copy_of(streamed, tmp_path)
    [core] = streamed_cores(streamed)
    weights = folder / core["folder"] / "weights.bin"
    assert run_csim(folder, samples=1).ok  # built in the copy's folder (its paths are in the command)
    data = np.fromfile(weights, dtype=np.int8)
    data[:1024] = ~data[:1024]  # the first rows' weights negated (minus one)
    data.tofile(weights)
    changed = run_csim(folder, samples=1)
    [check] = [c for c in changed.cores if c.name == core["name"]]
    assert check.built and not check.bit_exact and not changed.ok
    data[:-1].tofile(weights)
    with pytest.raises(FpgaplaceError) as caught:
        run_csim(folder, samples=1)
    assert "weights.bin" in one_line_error(caught) and str(core["streamed_weight_bytes"]) in str(caught.value)
    weights.unlink()
    with pytest.raises(FpgaplaceError) as caught:
        run_csim(folder, samples=1)
    assert "weights.bin: missing" in one_line_error(caught)


def _build_entry(folder: Path, record: dict, output: Path, *defines: str) -> None:
    """The core's top and C entry built as fpgaplace csim builds them, with other defines."""
    from fpgaplace.sim.csim import CXX_FLAGS

    core = folder / record["folder"]
    sources = [core / f"{record['top']}.cpp", core / "csim_entry.cpp"]
    subprocess.run(["g++", *CXX_FLAGS, *defines, f"-I{folder / 'include'}", *map(str, sources), "-o", str(output)],
                   check=True, capture_output=True, cwd=output.parent)  # FP_WMEM_FILE: found in the cwd


def _run_entry(library: Path, record: dict, sample: np.ndarray) -> tuple[int, list[np.ndarray]]:
    import ctypes

    entry = ctypes.CDLL(str(library)).fp_run
    pointer = ctypes.POINTER(ctypes.c_int8)
    outs = [np.zeros(int(np.prod(t["sample_shape"])), dtype=np.int8) for t in record["outputs"]]
    ins = (pointer * 1)(sample.ctypes.data_as(pointer))
    status = entry(ins, (pointer * len(outs))(*[y.ctypes.data_as(pointer) for y in outs]))
    return status, outs


def test_testbench_without_fp_wmem_file_reads_weights_bin_at_run_time(streamed, tmp_path):
    """The Vitis HLS way (no FP_WMEM_FILE): the C entry reads weights.bin beside it at run time and
    computes what the embedded build computes; without the file fp_run returns 4 and runs nothing."""
    folder = copy_of(streamed, tmp_path)
    [record] = streamed_cores(streamed)
    assert len(record["inputs"]) == 1
    sample = np.random.default_rng(0).integers(-128, 128, int(np.prod(record["inputs"][0]["sample_shape"])),
                                                dtype=np.int8)
    core = folder / record["folder"]
    (tmp_path / "embedded").mkdir()
    shutil.copy(core / "weights.bin", tmp_path / "embedded" / "weights.bin")
    _build_entry(folder, record, tmp_path / "embedded" / "libembedded.so", '-DFP_WMEM_FILE="weights.bin"')
    _build_entry(folder, record, tmp_path / "librun.so")
    embedded_status, embedded = _run_entry(tmp_path / "embedded" / "libembedded.so", record, sample)
    status, read = _run_entry(tmp_path / "librun.so", record, sample)
    assert embedded_status == 0 and status == 0
    assert all(np.array_equal(a, b) for a, b in zip(embedded, read, strict=True)) and any(a.any() for a in read)
    (core / "weights.bin").unlink()
    _build_entry(folder, record, tmp_path / "libmissing.so")
    assert _run_entry(tmp_path / "libmissing.so", record, sample)[0] == 4


def wrong_reference_weight(project: Simulated, tmp_path: Path) -> tuple[Path, str]:
    """A copy of ``project`` with one weight of its first core's first dense layer changed in
    layers.npz (the reference's copy, not the C's); the copy and the core's name."""
    folder = copy_of(project, tmp_path)
    core = project.doc["cores"][0]
    i = next(i for i, layer in enumerate(core["layers"]) if layer["kernel"] == "dense")
    path = folder / core["folder"] / "layers.npz"
    arrays = dict(np.load(path))
    w = arrays[f"{i}.w"]
    w.flat[0] = 127 if w.flat[0] < 0 else -128
    np.savez(path, **arrays)
    return folder, core["name"]


def test_a_wrong_reference_weight_makes_the_core_not_bit_exact(mlp, tmp_path):
    """The check can fail: one weight changed in layers.npz (the reference's copy, not the C's)."""
    folder, name = wrong_reference_weight(mlp, tmp_path)
    report = run_csim(folder, samples=SAMPLES)
    [check] = [c for c in report.cores if c.name == name]
    assert not check.bit_exact and check.mismatches > 0 and "reference" in check.first_mismatch
    assert not report.ok and report.to_json()["ok"] is False


def test_only_the_first_checked_samples_are_checked_and_every_output_is_kept(mlp, tmp_path):
    """``checked``: the samples after the first ``checked`` are run, not checked (a wrong
    reference weight goes unseen there), and their outputs are the fully checked run's."""
    folder, name = wrong_reference_weight(mlp, tmp_path)
    full = run_csim(folder, samples=5)
    unchecked = run_csim(folder, samples=5, checked=0)
    one = run_csim(folder, samples=5, checked=1)
    assert not full.ok and full.checked == 5 and full.to_json()["checked_samples"] == 5
    assert unchecked.ok and unchecked.to_json()["checked_samples"] == 0
    [check] = [c for c in one.cores if c.name == name]
    assert not check.bit_exact and check.mismatches > 0 and one.checked == 1
    for result in (unchecked, one):
        assert result.values["y"].shape == full.values["y"].shape and len(full.values["y"]) == 5
        np.testing.assert_array_equal(result.values["y"], full.values["y"])


def test_piece_by_piece_every_layer_is_within_one_step_of_onnxruntime(cnn):
    """--layers: each core layer's integer reference fed onnxruntime's own int8 inputs to it is
    within one step of onnxruntime's output of that layer, on every sample, and the check covered
    every layer whose output onnxruntime's run has (one per conv, pool, add... of the small CNN)."""
    report = run_csim(cnn.folder, samples=2, layers=True)
    layers = report.layers
    named = sum(1 for core in cnn.doc["cores"] for layer in core["layers"] if layer["output"].endswith("Output"))
    assert layers.samples == 2 and layers.compared >= 2 * named > 0
    assert layers.worst_lsb <= 1 and not layers.unchecked and layers.within_one_step
    assert report.to_json()["layers"]["within_one_step"] is True


def test_piece_by_piece_names_a_layer_its_reference_computes_wrongly(mlp, tmp_path):
    """The same check fails where a layer itself is wrong, not merely downstream of a rounding
    step: one weight of the reference's copy of a dense layer changed names that layer's output
    (it is many steps off onnxruntime on its own inputs) and csim is not ok."""
    folder = copy_of(mlp, tmp_path)
    core = mlp.doc["cores"][0]
    i, layer = next((i, layer) for i, layer in enumerate(core["layers"]) if layer["kernel"] == "dense")
    path = folder / core["folder"] / "layers.npz"
    arrays = dict(np.load(path))
    arrays[f"{i}.w"] = np.where(arrays[f"{i}.w"] < 0, 127, -128).astype(np.int8)  # every weight flipped hard
    np.savez(path, **arrays)
    report = run_csim(folder, samples=1, layers=True)
    assert not report.ok and report.layers.worst_lsb > 1
    assert report.layers.worst == f"'{layer['output']}' in core {core['name']}"
    assert not report.layers.within_one_step


# --------------------------------------------------------------------------- builds


def test_unchanged_cores_are_not_rebuilt_and_a_touched_one_is(cnn):
    again = run_csim(cnn.folder, samples=1)
    assert again.ok and not any(c.built for c in again.cores)
    assert all(not core["rebuilt"] for core in again.to_json()["cores"])
    touched = cnn.doc["cores"][0]
    weights = cnn.folder / touched["folder"] / "weights.h"
    weights.write_text(weights.read_text() + "// touched\n")
    rebuilt = run_csim(cnn.folder, samples=1)
    assert {c.name: c.built for c in rebuilt.cores} == {core["name"]: core is touched for core in cnn.doc["cores"]}
    assert rebuilt.ok


def test_a_corrupted_source_names_the_core_the_first_error_and_the_log(mlp, tmp_path):
    folder = copy_of(mlp, tmp_path)
    core = mlp.doc["cores"][0]
    source = folder / core["folder"] / f"{core['top']}.cpp"
    text = source.read_text()
    source.write_text(text.replace("#pragma HLS DATAFLOW", "#pragma HLS DATAFLOW\n  int broken = ;", 1))
    with pytest.raises(FpgaplaceError) as caught:
        run_csim(folder)
    message = one_line_error(caught)
    log = folder / core["folder"] / "build" / "g++.log"
    assert message.startswith(f"{core['name']}:") and str(log) in message
    first_error = next(line.strip() for line in log.read_text().splitlines() if "error" in line)
    assert first_error in message and f"{core['top']}.cpp" in first_error
    assert re.search(r"expected primary-expression", message)


# --------------------------------------------------------------------------- where outputs first differ


@pytest.fixture(scope="module")
def mlp_cpu_softmax(tmp_path_factory) -> Path:
    """The MLP compiled with its Softmax placed on a CPU (a core could run it), so a CPU piece follows the core."""
    design = Design(models.mlp(batch=1, sizes=(16, 64, 32, 5)), "zcu104", profile_cpu=False).quantized(
        random_samples=8)
    device = design.placement.placement.device.copy()
    [softmax] = [v for v, name in enumerate(design.problem.names) if design.graph.ops[name].op_type == "Softmax"]
    device[softmax] = design.device_names().index("cpu0")
    design.set_placement(Placement(device=device, method="given"))
    folder = tmp_path_factory.mktemp("mlp_cpu") / "project"
    design.compile(folder)
    return folder


def test_a_changed_cpu_piece_is_named_where_the_outputs_first_differ(mlp_cpu_softmax, tmp_path):
    """A CPU piece whose output DequantizeLinear step is doubled puts the output many LSB off both
    of onnxruntime's runs: csim is not ok, the cores still bit-exact, and its one-line pointer
    names that tensor and that piece."""
    folder = tmp_path / "copy"
    shutil.copytree(mlp_cpu_softmax, folder)
    manifest = json.loads((folder / "split" / "manifest.json").read_text())
    [piece] = [sub for sub in manifest["submodels"] if not sub["device"].startswith("core")]
    path = folder / "split" / piece["file"]
    model = onnx.load(path)
    [dq] = [n for n in model.graph.node if n.op_type == "DequantizeLinear" and n.output[0] in piece["outputs"]]
    scale = next(t for t in model.graph.initializer if t.name == dq.input[1])
    model.graph.initializer.append(numpy_helper.from_array(2 * numpy_helper.to_array(scale), "doubled_step"))
    dq.input[1] = "doubled_step"
    onnx.save(model, path)
    result = run_csim(folder, samples=2)
    assert not result.ok and all(c.bit_exact for c in result.cores)
    assert all(o.max_abs_diff_lsb > 1 for o in result.outputs)
    pointer = result.first_difference
    assert pointer.startswith("sample 1: ") and "\n" not in pointer
    assert f"'{dq.output[0]}' from piece {piece['name']} on {piece['device']}" in pointer
    assert json.loads((folder / "results" / "csim.json").read_text())["first_difference"] == pointer
    # piece by piece, the changed piece itself is off onnxruntime on onnxruntime's own inputs
    assert result.layers.samples == 2 and not result.layers.within_one_step
    assert result.layers.worst == f"'{dq.output[0]}' from piece {piece['name']} on {piece['device']}"


@pytest.fixture(scope="module")
def spread_model(tmp_path_factory) -> onnx.ModelProto:
    """A small MobileNetV3 (SE blocks, HardSwish) quantized as `fpgaplace quantize --random 4` does."""
    model, shapes = real_models.build("mobilenetv3")
    path = tmp_path_factory.mktemp("spread") / "mobilenetv3.int8.onnx"
    Design(model, "zcu104", input_shapes=shapes, optimize=False, profile_cpu=False).quantize_file(
        path, random_samples=4)
    return onnx.load(path)


def test_an_output_within_one_lsb_of_either_onnxruntime_run_is_exact(spread_model):
    """On this sample onnxruntime's optimized run (Q/DQ fused into QLinear ops) and its unoptimized
    run (float ops, as ONNX defines the model) are several steps apart: a placed run equal to either
    is within 1 LSB, one off both is not, and the pointer then says where it first left them."""
    feed = random_inputs(spread_model, 0)
    optimized = session(spread_model, "optimized").run(["logits"], feed)[0]
    unoptimized = session(spread_model, "unoptimized", optimized=False).run(["logits"], feed)[0]
    [dq] = [n for n in spread_model.graph.node if n.output[0] == "logits"]
    step = float(next(numpy_helper.to_array(t) for t in spread_model.graph.initializer if t.name == dq.input[1]))
    spread = float(np.max(np.abs(np.rint(optimized / step) - np.rint(unoptimized / step))))
    assert spread > 1  # what makes the test meaningful: onnxruntime disagrees with itself here

    comparison = OutputComparison(Path("project"), spread_model, ["logits"], {"logits": "piece sub01_cpu0 on cpu0"})
    comparison.add(1, feed, {"logits": unoptimized})
    comparison.add(2, feed, {"logits": optimized})
    [check] = comparison.outputs()
    assert (check.max_abs_diff_lsb, check.max_lsb_optimized) == (0, spread)
    assert comparison.first_difference == (f"sample 1: every int8 tensor equals onnxruntime's unoptimized run; "
                                           f"onnxruntime's optimized run is {spread:g} LSB from its unoptimized one")
    comparison.add(3, feed, {"logits": unoptimized + np.float32(40 * step)})
    [check] = comparison.outputs()
    assert 40 - spread <= check.max_abs_diff_lsb <= 40 and check.max_lsb_optimized >= 40 - spread
    assert comparison.first_difference.startswith("sample 3: the first tensor off onnxruntime's unoptimized run is "
                                                  "'logits' from piece sub01_cpu0 on cpu0 (")
    assert "up to 40 LSB" in comparison.first_difference


def test_the_pointer_looks_inside_the_cores(spread_model):
    """A core's layer outputs (its integer reference's, channels last, one array per run) are read
    by the pointer too: equal to onnxruntime's unoptimized run they are passed over (the layout
    turned back to NCHW), and one value off by 1 LSB there is named, with its core and layer,
    before the outputs many layers later (ShuffleNet's first difference was a pooled value inside
    a core, reported only at the core's output 40 layers on)."""
    from fpgaplace.util.onnxrt import with_outputs

    feed = random_inputs(spread_model, 0)
    quantized = [n.output[0] for n in spread_model.graph.node if n.op_type == "QuantizeLinear"]
    probe = with_outputs(spread_model, quantized)
    names = [o.name for o in probe.graph.output]
    unoptimized = dict(zip(names, session(probe, "unoptimized", optimized=False).run(names, feed), strict=True))
    inside = next(n for n in quantized[1:] if unoptimized[n].ndim == 4 and min(unoptimized[n].shape[2:]) > 1)
    stream = unoptimized[inside][0].transpose(1, 2, 0).reshape(-1)  # one run, channels last
    origins = {"logits": "piece sub01_cpu0 on cpu0", inside: "core core0 (layer n1, conv2d)"}
    [dq] = [n for n in spread_model.graph.node if n.output[0] == "logits"]
    step = float(next(numpy_helper.to_array(t) for t in spread_model.graph.initializer if t.name == dq.input[1]))
    logits = session(spread_model, "unoptimized", optimized=False).run(["logits"], feed)[0]
    far = {"logits": logits + np.float32(40 * step)}  # the outputs far off: the pointer is written

    comparison = OutputComparison(Path("project"), spread_model, ["logits"], origins)
    comparison.add(1, feed, dict(far), {inside: [stream.copy()]})
    assert comparison.first_difference.startswith("sample 1: the first tensor off onnxruntime's unoptimized run is "
                                                  "'logits' from piece sub01_cpu0 on cpu0 (")
    moved = stream.copy()
    moved[7] = moved[7] + 1 if moved[7] < 127 else moved[7] - 1
    comparison = OutputComparison(Path("project"), spread_model, ["logits"], origins)
    comparison.add(1, feed, dict(far), {inside: [moved]})
    assert comparison.first_difference.startswith(f"sample 1: the first tensor off onnxruntime's unoptimized run is "
                                                  f"'{inside}' from core core0 (layer n1, conv2d) (1 of {stream.size} "
                                                  "values, up to 1 LSB)")


# --------------------------------------------------------------------------- refusals


def test_a_folder_without_design_json_is_a_one_line_error(tmp_path):
    with pytest.raises(FpgaplaceError) as caught:
        run_csim(tmp_path)
    assert "design.json" in one_line_error(caught) and str(tmp_path) in str(caught.value)


@pytest.mark.parametrize(("content", "word"), [("{not json", "JSON"), ('{"format": 99, "cores": []}', "format"),
                                               ("[1, 2]", "format")])
def test_a_broken_design_json_is_a_one_line_error(tmp_path, content, word):
    (tmp_path / "design.json").write_text(content)
    with pytest.raises(FpgaplaceError) as caught:
        run_csim(tmp_path)
    message = one_line_error(caught)
    assert "design.json" in message and word in message


@pytest.mark.parametrize("samples", [0, -1])
def test_samples_must_be_positive(mlp, samples):
    with pytest.raises(FpgaplaceError) as caught:
        run_csim(mlp.folder, samples=samples)
    assert "samples" in one_line_error(caught) and str(samples) in str(caught.value)


def test_an_output_is_judged_against_the_band_between_onnxruntimes_two_runs():
    """Element by element: a value between the two runs is 0 steps off, one beyond them counts
    from the nearer run; never more than its distance to either run."""
    scale = 0.0375
    got, one, other = (np.array(v, np.float32) * np.float32(scale)
                       for v in ([0, 3, -2, 7], [0, 1, 0, 5], [2, 1, -4, 9]))
    assert lsb_outside(got, one, other, scale) == 2.0  # the second element: 3 against 1 and 1
    assert lsb_outside(got[[0, 2, 3]], one[[0, 2, 3]], other[[0, 2, 3]], scale) == 0.0
    assert lsb_outside(got, one, other, scale) <= min(lsb_difference(got, one, scale),
                                                      lsb_difference(got, other, scale))
