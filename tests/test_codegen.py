"""Code generation (``fpgaplace.codegen``): the project folder and its ``design.json``.

Each project is compiled once per module (CPU costs analytic, two calibration samples); the
tests read what it wrote. C simulation of the projects is in ``test_csim.py``.
"""

from __future__ import annotations

import ast
import copy
import json
import math
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import FAST_CLUSTER
from hw_spec import conv_ticks
from onnx import numpy_helper

import fpgaplace.codegen
import fpgaplace.codegen.project
from fpgaplace import Design
from fpgaplace.board.model import CpuCore, FpgaCore
from fpgaplace.model import zoo as models
from fpgaplace.place.solvers.problem import Placement
from fpgaplace.util.errors import FpgaplaceError

CODEGEN_SOURCES = Path(fpgaplace.codegen.__file__).parent
RESOURCE_KEYS = {"dsp", "bram36", "uram", "lut", "ff"}
KERNEL_CALLS = {"conv2d": "fp::conv2d<", "dense": "fp::dense<", "maxpool": "fp::maxpool<", "avgpool": "fp::avgpool<",
                "globalavgpool": "fp::avgpool<", "add": "fp::add<", "requant": "fp::requant<"}


def qdq_design(model: onnx.ModelProto, board: str = "zcu104") -> Design:
    """The int8 QDQ design of ``model`` (analytic CPU costs), placed with the defaults."""
    design = Design(model, board, profile_cpu=False).quantized(random_samples=2)
    design.place()
    return design


class Project:
    """A compiled project: the design it came from, its folder and its design.json."""

    def __init__(self, design: Design, folder: Path) -> None:
        self.design = design
        self.result = design.compile(folder)
        self.folder = folder
        self.doc = json.loads((folder / "design.json").read_text())

    def source(self, core: dict, name: str) -> str:
        return (self.folder / core["folder"] / name).read_text()


@pytest.fixture(scope="module")
def cnn(tmp_path_factory) -> Project:
    return Project(qdq_design(models.cnn_residual(batch=1)), tmp_path_factory.mktemp("cnn") / "project")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Project:
    return Project(qdq_design(models.cnn_residual(batch=1), FAST_CLUSTER),
                   tmp_path_factory.mktemp("cluster") / "project")


@pytest.fixture(scope="module")
def mlp_qdq() -> onnx.ModelProto:
    return Design(models.mlp(batch=1, sizes=(16, 64, 32, 5)), "zcu104", profile_cpu=False).quantized(
        random_samples=2).graph.model


def one_line_error(caught: pytest.ExceptionInfo) -> str:
    message = str(caught.value)
    assert message and "\n" not in message
    return message


# --------------------------------------------------------------------------- design.json


def test_design_json_records_the_board_part_clock_and_precision(cnn):
    doc, board = cnn.doc, cnn.design.board
    assert doc["board"]["name"] == "zcu104" == board.name
    assert doc["board"]["part"] == board.part and board.part in Path(doc["board"]["source"]).read_text()
    assert doc["board"]["clock_mhz"] == board.cores[0].clock_mhz
    assert doc["precision"] == "int8" and doc["model"]["batch"] == 1
    assert (cnn.folder / doc["model"]["file"]).is_file() and (cnn.folder / doc["split"]).is_file()
    assert cnn.result.project == cnn.folder and set(cnn.result.to_json()) >= {"project", "cores", "board",
                                                                             "interval_us", "fps"}


def test_placement_is_recorded_by_board_identity(cnn):
    doc, design = cnn.doc, cnn.design
    devices = design.op_devices()
    assert doc["placement"]["devices"] == {op: device.name for op, device in devices.items()}
    assert doc["placement"]["value"] == pytest.approx(design.placement.value, rel=1e-12)
    on_cores = {op for core in doc["cores"] for op in core["ops"]}
    assert on_cores == {op for op, device in devices.items() if isinstance(device, FpgaCore)}
    assert set(doc["cpu_ops"]) == {op for op, device in devices.items() if isinstance(device, CpuCore)}
    for core in doc["cores"]:
        assert all(devices[op].name == core["name"] for op in core["ops"])
        assert core["folder"] == f"cores/{core['name']}"


def test_cluster_placement_names_devices_by_node(cluster):
    doc = cluster.doc
    names = set(doc["placement"]["devices"].values())
    assert names <= set(cluster.design.device_names())
    assert all(re.fullmatch(r"node\d+\.(core|cpu)\d+", name) for name in names)
    assert any(name.startswith("node1.core") for name in names)  # both boards run part of the model
    for core in doc["cores"]:
        assert core["name"].startswith(f"{core['node']}.") and (cluster.folder / core["folder"]).is_dir()


def expected_cycles(layer: dict) -> int:
    """The documented count of a dot-product layer, from its config, folding and beats: a
    conv's line buffer and MVAU (tests/hw_spec.py), a dense layer's MVAU."""
    c, pe, simd = layer["config"], layer["pe"], layer["simd"]
    if layer["kernel"] == "conv2d":
        reduction = c["KH"] * c["KW"] * c["CIN"] // c["GROUPS"]
        assert c["COUT"] % pe == 0 and reduction % simd == 0
        config = {**c, "PE": pe, "SIMD": simd, "MMV": layer["mmv"]}
        return conv_ticks(config, layer["beats"]["inputs"][0], layer["beats"]["output"])
    assert c["N"] % pe == 0 and c["K"] % simd == 0
    return layer["rows"] * (c["N"] // pe) * (c["K"] // simd)


def test_core_layers_record_folding_cycles_and_resources(cnn):
    """Each core's resources are its layers' plus the FIFOs deeper than two beats in front of its
    readers (``hw.buffers``: the residual's skip holds what its producer writes while the branch
    fills), all within the core's budget (the layers are folded around the FIFOs' memory)."""
    from fpgaplace.board.load import load_board
    from fpgaplace.hw.buffers import buffer_memory, producer_widths

    cores = {core.name: core for core in load_board("zcu104").cores}
    kernels, priced_fifos = set(), False
    for core in cnn.doc["cores"]:
        total = dict.fromkeys(RESOURCE_KEYS, 0)
        for layer in core["layers"]:
            kernels.add(layer["kernel"])
            assert layer["pe"] >= 1 and layer["simd"] >= 1 and layer["cycles"] > 0
            assert set(layer["resources"]) == RESOURCE_KEYS
            if layer["kernel"] in ("conv2d", "dense"):
                assert layer["cycles"] == expected_cycles(layer)
                assert layer["macs"] > 0 and layer["resources"]["dsp"] > 0
            for key in RESOURCE_KEYS:
                total[key] += layer["resources"][key]
        beats = producer_widths((layer["inputs"], layer["output"], layer["beats"]["inputs"], layer["beats"]["output"])
                                for layer in core["layers"])
        fifos = buffer_memory(core["buffers"], beats, cores[core["name"]]).to_json()
        assert core["resources"] == {key: total[key] + fifos[key] for key in RESOURCE_KEYS}
        assert all(core["resources"][key] <= core["budget"][key] for key in RESOURCE_KEYS)
        priced_fifos |= fifos["bram36"] + fifos["lut"] > 0
        assert core["compute_interval_cycles"] == max(layer["cycles"] for layer in core["layers"])
        assert core["interval_us"] == pytest.approx(core["interval_cycles"] / core["clock_mhz"])
    assert {"conv2d", "dense", "add"} <= kernels and priced_fifos
    intervals = [core["interval_us"] for core in cnn.doc["cores"]]
    assert cnn.doc["interval_us"] >= max(intervals)
    assert cnn.doc["fps"] == pytest.approx(1e6 / cnn.doc["interval_us"])


def quantize_params(model: onnx.ModelProto) -> dict[str, tuple[float, int]]:
    """Scale and zero point of every QuantizeLinear output of ``model``."""
    constants = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    return {node.output[0]: (float(constants[node.input[1]]), int(constants[node.input[2]]))
            for node in model.graph.node if node.op_type == "QuantizeLinear"}


def test_core_boundary_tensors_carry_the_models_scale_and_zero_point(cnn):
    params = quantize_params(onnx.load(cnn.folder / cnn.doc["model"]["file"]))
    for core in cnn.doc["cores"]:
        tensors = core["inputs"] + core["outputs"]
        assert core["inputs"] and core["outputs"]
        assert len({t["port"] for t in tensors}) == len(tensors)
        for t in tensors:
            assert t["scale"] > 0 and -128 <= t["zero_point"] <= 127
            assert (t["scale"], t["zero_point"]) == pytest.approx(params[t["name"]])
            assert math.prod(t["sample_shape"]) == math.prod(t["shape"])  # batch 1
            assert t["channels_last"] == (len(t["shape"]) == 4)


# --------------------------------------------------------------------------- the files of a core


def test_every_core_folder_has_its_sources_and_an_hls_script_for_the_part(cnn, cluster):
    for project in (cnn, cluster):
        board = project.design.board
        for core in project.doc["cores"]:
            part = board.node_board(core["node"]).part  # a cluster's part reads "2 x <part>"
            assert core["part"] == part and " " not in part
            folder = project.folder / core["folder"]
            for name in (f"{core['top']}.cpp", "weights.h", "csim_entry.cpp", "run_hls.tcl"):
                assert (folder / name).is_file(), name
            script = project.source(core, "run_hls.tcl")
            assert f"set_part {part}" in script and f"set_top {core['top']}" in script
            [period] = re.findall(r"create_clock -period ([0-9.]+)", script)
            assert float(period) == pytest.approx(1e3 / core["clock_mhz"], abs=1e-3)


def test_the_top_is_one_dataflow_with_an_axis_port_per_boundary_tensor(cnn):
    for core in cnn.doc["cores"]:
        top = cnn.source(core, f"{core['top']}.cpp")
        assert '#include "fpgaplace/kernels.h"' in top and '#include "weights.h"' in top
        assert top.count("#pragma HLS DATAFLOW") == 1
        assert re.search(rf"void {core['top']}\(", top)
        ports = [t["port"] for t in core["inputs"] + core["outputs"]]
        assert sorted(re.findall(r"#pragma HLS INTERFACE axis port=(\w+)", top)) == sorted(ports)
        calls = {kernel: sum(layer["kernel"] == kernel for layer in core["layers"]) for kernel in KERNEL_CALLS}
        for call in set(KERNEL_CALLS.values()):
            expected = sum(n for kernel, n in calls.items() if KERNEL_CALLS[kernel] == call)
            assert top.count(call) == expected, call
    kernels_h = (cnn.folder / "include" / "fpgaplace" / "kernels.h").read_text()
    for pragma in ("#pragma HLS PIPELINE II=1", "#pragma HLS UNROLL", "#pragma HLS ARRAY_PARTITION"):
        assert pragma in kernels_h


def test_weights_h_holds_each_resident_layers_folded_weights(cnn):
    for core in cnn.doc["cores"]:
        arrays = np.load(cnn.folder / core["folder"] / "layers.npz")
        header = cnn.source(core, "weights.h")
        sizes = dict(re.findall(r"static const int8_t (l\d+_w)\[(\d+)\]", header))
        for i, layer in enumerate(core["layers"]):
            if layer["kernel"] in ("conv2d", "dense") and layer["resident"]:
                assert int(sizes[f"l{i}_w"]) == arrays[f"{i}.w"].size


def string_constants_outside_messages(path: Path) -> list[tuple[int, str]]:
    """String constants of a module, leaving out docstrings and the text of errors and progress."""
    tree = ast.parse(path.read_text())
    skipped: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value,
                                                                                            ast.Constant):
            skipped.add(id(body[0].value))
        is_message = isinstance(node, ast.Raise) or (
            isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in (
                "FpgaplaceError", "say", "progress"))
        if is_message:
            skipped.update(id(child) for child in ast.walk(node))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped]


def test_codegen_builds_no_cpp_in_python():
    """C++ lives in the templates and headers: no string in codegen/*.py holds C++ syntax."""
    syntax = re.compile(r"[;{}()\[\]]|#\s*(pragma|include)|::|<<|\s[+*]\s")
    modules = sorted(CODEGEN_SOURCES.glob("*.py"))
    assert len(modules) >= 3
    for path in modules:
        found = [(line, text) for line, text in string_constants_outside_messages(path) if syntax.search(text)]
        assert not found, f"{path.name}: {found}"


# --------------------------------------------------------------------------- refusals and failures


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_compile_refuses_a_folder_that_is_not_a_project(mlp_qdq, tmp_path):
    design = Design(mlp_qdq, "zcu104", profile_cpu=False)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me\n")
    with pytest.raises(FpgaplaceError) as caught:
        design.compile(foreign)
    assert "foreign" in one_line_error(caught) and "project" in str(caught.value)
    assert leftovers(foreign) == ["notes.txt"] and leftovers(tmp_path) == ["foreign"]
    design.split(tmp_path / "split")  # a split folder is not a project either
    with pytest.raises(FpgaplaceError, match="not a project"):
        design.compile(tmp_path / "split")
    assert (tmp_path / "split" / "manifest.json").is_file() and not (tmp_path / "split" / "design.json").exists()
    taken = tmp_path / "taken"
    taken.write_text("a file\n")
    with pytest.raises(FpgaplaceError, match="is a file"):
        design.compile(taken)


def test_compile_again_into_a_project_replaces_it(mlp_qdq, tmp_path):
    design = Design(mlp_qdq, "zcu104", profile_cpu=False)
    first = design.compile(tmp_path / "project")
    (tmp_path / "project" / "stale.txt").write_text("from before\n")
    second = design.compile(tmp_path / "project")
    before, after = dict(first.design["placement"]), dict(second.design["placement"])
    refined_before, refined_after = before.pop("refinement"), after.pop("refinement")
    assert after == before  # the same placement, the one the first compile kept
    assert refined_after["rounds"][0] == refined_before["rounds"][refined_before["chosen"]]
    assert not (tmp_path / "project" / "stale.txt").exists() and leftovers(tmp_path) == ["project"]


def mlp_with_log_softmax_on_a_core(model: onnx.ModelProto) -> tuple[Design, str]:
    """The quantized MLP with its Softmax turned into a LogSoftmax (no core runs it), placed on core0."""
    model = copy.deepcopy(model)
    next(node for node in model.graph.node if node.op_type == "Softmax").op_type = "LogSoftmax"
    design = Design(model, "zcu104", profile_cpu=False)
    device = design.placement.placement.device.copy()
    [op] = [v for v, name in enumerate(design.problem.names) if design.graph.ops[name].op_type == "LogSoftmax"]
    device[op] = design.device_names().index("core0")
    design.set_placement(Placement(device=device))
    return design, design.problem.names[op]


def test_a_failing_compile_names_the_op_and_leaves_no_folder(mlp_qdq, tmp_path):
    design, op = mlp_with_log_softmax_on_a_core(mlp_qdq)
    with pytest.raises(FpgaplaceError) as caught:
        design.compile(tmp_path / "project")
    message = one_line_error(caught)
    assert f"'{op}'" in message and "LogSoftmax" in message
    assert leftovers(tmp_path) == []


def test_a_failure_while_writing_leaves_no_temporary_folder(mlp_qdq, tmp_path, monkeypatch):
    def broken_render(*args, **kwargs):
        raise FpgaplaceError("rendering failed")

    monkeypatch.setattr(fpgaplace.codegen.project, "render_core", broken_render)
    with pytest.raises(FpgaplaceError, match="rendering failed"):
        Design(mlp_qdq, "zcu104", profile_cpu=False).compile(tmp_path / "project")
    assert leftovers(tmp_path) == []


def with_bad_qparams(model: onnx.ModelProto, node_name: str, zero_scale: bool) -> onnx.ModelProto:
    broken = onnx.ModelProto()
    broken.CopyFrom(model)
    node = next(n for n in broken.graph.node if n.name == node_name)
    if zero_scale:
        broken.graph.initializer.append(numpy_helper.from_array(np.array(0.0, np.float32), "zero_scale"))
        node.input[1] = "zero_scale"
    else:
        del node.input[2:]
    return broken


@pytest.mark.parametrize("zero_scale", [True, False], ids=["scale 0", "no zero point"])
def test_a_qdq_model_with_bad_qparams_is_a_one_line_error_naming_the_node(mlp_qdq, tmp_path, zero_scale):
    design = Design(mlp_qdq, "zcu104", profile_cpu=False)
    on_core = {op for core in design.compile(tmp_path / "good").design["cores"] for op in core["ops"]}
    quantizers = sorted(name for name in on_core if name.endswith("QuantizeLinear"))
    assert quantizers
    node_name = quantizers[0]
    broken = with_bad_qparams(mlp_qdq, node_name, zero_scale)
    with pytest.raises(FpgaplaceError) as caught:
        Design(broken, "zcu104", profile_cpu=False).compile(tmp_path / "bad")
    message = one_line_error(caught)
    assert f"'{node_name}'" in message
    assert ("scale" if zero_scale else "zero point") in message
    assert leftovers(tmp_path) == ["good"]


def test_c_literals_round_trip_every_int8_and_wide_ints():
    from fpgaplace.codegen.render import c_literals

    every = np.arange(-128, 128, dtype=np.int8)
    assert [int(v) for v in c_literals(every).split(",")] == every.tolist()
    wide = np.array([-(2**31), 0, 2**31 - 1], dtype=np.int32)
    assert [int(v) for v in c_literals(wide).split(",")] == wide.tolist()
