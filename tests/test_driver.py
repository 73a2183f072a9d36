"""The generated PYNQ driver (``host/``) run with the real pynq 4.0 package on a stand-in board.

pynq lives in its own environment (``scripts/setup_pynq_env.sh`` makes ``.venv-pynq``; the
session fixture runs it, quick when it is done). The stand-in (``tests/pynq_standin``) is a
``pynq.Device`` whose AXI DMA and HLS registers are simulated and whose cores compute with the
C-simulation libraries, so the driver takes the code path it takes on a board: pynq's Overlay,
HWH parser, DMA driver and ``allocate``. Its outputs must equal ``fpgaplace csim``'s on the same
inputs (csim's seeded random inputs are the samples the project carries).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import FAST_CLUSTER

from fpgaplace import Design
from fpgaplace.codegen.blockdesign.plan import plan_nodes
from fpgaplace.hw.quant import dequantize, quantize_float
from fpgaplace.model import zoo as models
from fpgaplace.project.layout import core_ip_instance, dma_instance
from fpgaplace.project.record import DesignRecord
from fpgaplace.sim import csim
from fpgaplace.util.onnxrt import random_inputs

REPO = Path(__file__).resolve().parents[1]
STANDIN = REPO / "tests" / "pynq_standin"
PYNQ_PYTHON = REPO / ".venv-pynq" / "bin" / "python"
sys.path.insert(0, str(STANDIN))
from hwh import write_standin_bitstream  # noqa: E402

SAMPLES = 4


def load_driver_module(project: Path):
    """The project's host/driver.py as a module (it needs only numpy to import)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"driver_{project.parent.name}", project / "host" / "driver.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class Project:
    """A compiled project and its stand-in bitstream; ``on_board()`` builds its C-simulation libraries."""

    def __init__(self, model, folder: Path, board: str = "zcu104", batch: int = 1) -> None:
        design = Design(model, board, profile_cpu=False, batch=batch).quantized(random_samples=2)
        design.place()
        design.compile(folder)
        self.folder = folder
        self.doc = json.loads((folder / "design.json").read_text())
        write_standin_bitstream(folder)

    def on_board(self) -> Project:
        for record in DesignRecord.from_json(self.doc).cores:
            csim.build_core(self.folder, record)  # not rebuilt when unchanged
        return self


@pytest.fixture(scope="session")
def pynq_env() -> Path:
    done = subprocess.run(["bash", str(REPO / "scripts" / "setup_pynq_env.sh")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return PYNQ_PYTHON


@pytest.fixture(scope="module")
def cnn(tmp_path_factory) -> Project:
    """The CNN on zcu104 cut into two cores (zcu104-dpu), so one core streams into the other."""
    return Project(models.cnn_residual(batch=1), tmp_path_factory.mktemp("cnn") / "project", board="zcu104-dpu")


@pytest.fixture(scope="module")
def mlp(tmp_path_factory) -> Project:
    """An MLP whose Softmax runs on a CPU after the core."""
    return Project(models.mlp(batch=1, sizes=(16, 64, 32, 5)), tmp_path_factory.mktemp("mlp") / "project")


@pytest.fixture(scope="module")
def mlp_batch2(tmp_path_factory) -> Project:
    """Two samples a call: the driver streams each through the core, as csim does."""
    return Project(models.mlp(batch="N", sizes=(16, 64, 32, 5)), tmp_path_factory.mktemp("mlp2") / "project",
                   batch=2)


@pytest.fixture(scope="module")
def streamed(tmp_path_factory) -> Project:
    """A Zynq-7000 board whose second core streams its weights from DRAM (128 KiB over m_axi)."""
    project = Project(models.mlp(batch=1, sizes=(128, 1024, 10)), tmp_path_factory.mktemp("streamed") / "project",
                      board="pynq-z2")
    assert any(c["streamed_weight_bytes"] > 0 for c in project.doc["cores"])
    return project


def standin_env() -> dict:
    return {**os.environ, "FPGAPLACE_PYNQ_STANDIN": "1"}


def run_in_pynq(python: Path, *args: str, cwd: Path | None = None, standin: bool = True) -> subprocess.CompletedProcess:
    env = standin_env() if standin else {k: v for k, v in os.environ.items() if k != "FPGAPLACE_PYNQ_STANDIN"}
    return subprocess.run([str(python), *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def driver_outputs(python: Path, project: Project, tmp_path: Path) -> tuple[np.lib.npyio.NpzFile, dict]:
    project.on_board()
    out_npz, out_json = tmp_path / "outputs.npz", tmp_path / "report.json"
    done = run_in_pynq(python, str(STANDIN / "run_driver.py"), str(project.folder), str(out_npz), str(out_json))
    assert done.returncode == 0, done.stderr[-3000:]
    return np.load(out_npz), json.loads(out_json.read_text())


# --------------------------------------------------------------------------- what compile writes


def test_hardware_json_names_every_core_ip_and_dma(cnn):
    hardware = json.loads((cnn.folder / "host" / "hardware.json").read_text())
    assert hardware["bitstream"] == "bitstream/design.bit"
    assert set(hardware["cores"]) == {c["name"] for c in cnn.doc["cores"]}
    for record in cnn.doc["cores"]:
        entry = hardware["cores"][record["name"]]
        assert entry["ip"] == core_ip_instance(record["name"])
        ports = [t["port"] for t in [*record["inputs"], *record["outputs"]]]
        assert entry["dma"] == {port: dma_instance(record["name"], port) for port in ports}


def test_samples_are_csims_seeded_inputs_with_the_qdq_models_outputs(mlp):
    import onnx

    from fpgaplace.util.onnxrt import run_model

    data = np.load(mlp.folder / "host" / "samples.npz")
    model = onnx.load(str(mlp.folder / "model.qdq.onnx"))
    for seed in range(SAMPLES):
        feed = random_inputs(model, seed)
        for name, value in feed.items():
            np.testing.assert_array_equal(data[f"input.{name}"][seed], value)
        for name, value in run_model(model, feed).items():
            np.testing.assert_array_equal(data[f"expected.{name}"][seed], value)


def test_driver_stream_order_and_quantization_match_csims(cnn):
    driver = load_driver_module(cnn.folder)
    rng = np.random.default_rng(3)
    for record, typed in zip(cnn.doc["cores"], DesignRecord.from_json(cnn.doc).cores, strict=True):
        for tensor, port in zip(record["inputs"], typed.inputs, strict=True):  # the driver reads the plain JSON
            q = rng.integers(-128, 128, size=tensor["shape"], dtype=np.int8)
            ours, theirs = driver.to_stream(q, tensor), csim._to_stream(q, port)
            assert len(ours) == len(theirs) and all(np.array_equal(a, b) for a, b in zip(ours, theirs, strict=True))
            np.testing.assert_array_equal(driver.from_stream(ours, tensor), csim._from_stream(theirs, port))
            x = rng.normal(size=tensor["shape"]).astype(np.float32) * 2
            scale, zero = tensor["scale"], tensor["zero_point"]
            np.testing.assert_array_equal(driver.quantize(x, scale, zero), quantize_float(x, scale, zero))
            np.testing.assert_array_equal(driver.dequantize(q, scale, zero), dequantize(q, scale, zero))


def test_standin_hwh_holds_the_block_design_the_build_scripts_plan(cnn):
    from xml.etree import ElementTree as ET

    root = ET.parse(cnn.folder / "bitstream" / "design.hwh").getroot()
    instances = {m.get("INSTANCE"): m.get("VLNV") for m in root.iter("MODULE")}
    (plan,) = plan_nodes(DesignRecord.from_json(cnn.doc), cnn.folder)
    assert plan.fifos, "the CNN's two cores stream into each other"
    assert {c.cell for c in plan.cores} | {d.name for d in plan.dmas} | {f.name for f in plan.fifos} \
        | {b.name for b in plan.fanouts} == set(instances) - {"zynq_ultra_ps_e_0"}
    assert all(instances[d.name] == "xilinx.com:ip:axi_dma:7.1" for d in plan.dmas)
    fed_by_fifo = {(f.consumer.core, f.consumer.port) for f in plan.fifos}
    for record in cnn.doc["cores"]:  # every input from outside the fabric has its DMA, the others none
        for tensor in record["inputs"]:
            has_dma = dma_instance(record["name"], tensor["port"]) in instances
            assert has_dma != ((record["name"], tensor["port"]) in fed_by_fifo)


# --------------------------------------------------------------------------- the driver under pynq


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cnn", "mlp", "mlp_batch2", "streamed"])
def test_driver_on_pynq_equals_csim(name, request, pynq_env, tmp_path):
    project: Project = request.getfixturevalue(name)
    outputs, report = driver_outputs(pynq_env, project, tmp_path)
    assert report["device"] == "StandinDevice"
    # pynq's HWH parser found every core and DMA
    (plan,) = plan_nodes(DesignRecord.from_json(project.doc), project.folder)
    assert {c.cell for c in plan.cores} | {d.name for d in plan.dmas} <= set(report["overlay_ips"])
    expected = csim.run_csim(project.folder, samples=SAMPLES, seed=0)
    assert expected.ok
    for output, values in expected.values.items():
        want = values.reshape(SAMPLES, *values.shape[1:]) if values.shape[0] == SAMPLES else values
        np.testing.assert_array_equal(outputs[f"run.{output}"].reshape(want.shape), want)
        np.testing.assert_array_equal(outputs[f"many.{output}"], outputs[f"run.{output}"])
    assert report["fps"] > 0


@pytest.mark.slow
def test_bad_inputs_are_one_line_errors(mlp, pynq_env, tmp_path):
    _, report = driver_outputs(pynq_env, mlp, tmp_path)
    missing, wrong = report["missing_input"], report["wrong_shape"]
    assert missing.startswith("DriverError: input 'x' is missing") and "\n" not in missing
    assert "[1, 16]" in missing
    assert wrong.startswith("DriverError: input 'x': shape [1, 16, 2]; expected [1, 16]") and "\n" not in wrong


@pytest.mark.slow
def test_self_test_passes_prints_fps_and_json(cnn, pynq_env):
    cnn.on_board()
    done = run_in_pynq(pynq_env, str(cnn.folder / "host" / "driver.py"), "--self-test", "--samples", "6", "--json",
                       cwd=cnn.folder.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["ok"] is True and result["samples"] == 6 and result["fps"] > 0
    assert result["max_abs_diff_lsb"] <= 1.0
    assert "6 samples in" in done.stderr and "fps" in done.stderr
    plain = run_in_pynq(pynq_env, str(cnn.folder / "host" / "driver.py"), "--self-test")
    assert plain.returncode == 0 and plain.stdout.startswith("self-test pass: 4 samples")


@pytest.mark.slow
def test_self_test_fails_on_wrong_expected_outputs(cnn, pynq_env, tmp_path):
    project = tmp_path / "project"
    shutil.copytree(cnn.on_board().folder, project)
    samples = project / "host" / "samples.npz"
    arrays = dict(np.load(samples))
    key = next(k for k in arrays if k.startswith("expected."))
    scale = json.loads((project / "host" / "hardware.json").read_text())["output_scales"][key.split(".", 1)[1]]
    arrays[key] = arrays[key] + np.float32(3 * scale)  # three quantization steps off
    np.savez(samples, **arrays)
    done = run_in_pynq(pynq_env, str(project / "host" / "driver.py"), "--self-test", "--json")
    assert done.returncode == 1
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["ok"] is False and result["max_abs_diff_lsb"] == pytest.approx(3.0)


@pytest.mark.slow
def test_missing_bitstream_is_a_one_line_error(mlp, pynq_env, tmp_path):
    project = tmp_path / "project"
    shutil.copytree(mlp.on_board().folder, project)
    shutil.rmtree(project / "bitstream")
    done = run_in_pynq(pynq_env, str(project / "host" / "driver.py"), "--self-test")
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("driver: ") and "design.bit" in lines[0]


def test_streamed_weights_are_written_for_the_driver(streamed):
    hardware = json.loads((streamed.folder / "host" / "hardware.json").read_text())
    for record in streamed.doc["cores"]:
        weights = hardware["cores"][record["name"]]["weights"]
        if record["streamed_weight_bytes"] == 0:
            assert weights is None
            continue
        data = np.fromfile(streamed.folder / "host" / weights, dtype=np.int8)
        assert data.size == record["streamed_weight_bytes"] and np.any(data != 0)
        assert 'NAME="wmem_1"' in (streamed.folder / "bitstream" / "design.hwh").read_text()


@pytest.mark.slow
def test_standin_refuses_a_weight_buffer_that_is_not_the_cores(streamed, pynq_env, tmp_path):
    project = tmp_path / "project"
    shutil.copytree(streamed.on_board().folder, project)
    hardware = json.loads((project / "host" / "hardware.json").read_text())
    name = next(c["name"] for c in streamed.doc["cores"] if c["streamed_weight_bytes"] > 0)
    path = project / "host" / hardware["cores"][name]["weights"]
    data = np.fromfile(path, dtype=np.int8)
    data[0] = ~data[0]
    data.tofile(path)
    done = run_in_pynq(pynq_env, str(project / "host" / "driver.py"), "--self-test")
    assert done.returncode != 0 and "weight pointer" in done.stderr


@pytest.mark.slow
def test_without_a_board_pynq_finds_no_device_and_the_driver_says_so(mlp, pynq_env):
    done = run_in_pynq(pynq_env, str(mlp.folder / "host" / "driver.py"), "--self-test", "--json", standin=False)
    assert done.returncode == 1
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["ok"] is False and "No Devices Found" in result["error"]
    errors = [line for line in done.stderr.splitlines() if line.startswith("driver: ")]
    assert len(errors) == 1 and "design.bit: pynq could not load it" in errors[0]


@pytest.mark.slow
@pytest.mark.parametrize("board, expected", [("alveo-u50", "is an Alveo card"), (FAST_CLUSTER, "nodes (node0, node1)")])
def test_designs_not_for_one_zynq_board_are_refused_in_one_line(board, expected, pynq_env, tmp_path):
    design = Design(models.cnn_residual(batch=1), board, profile_cpu=False).quantized(random_samples=2)
    design.place()
    design.compile(tmp_path / "project")
    done = run_in_pynq(pynq_env, str(tmp_path / "project" / "host" / "driver.py"), "--self-test")
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("driver: ") and expected in lines[0]


def test_run_many_runs_the_cpu_piece_of_one_sample_while_the_fabric_has_the_next(mlp):
    """The pipeline of run_many, with stages that record what they do: a core stage then a CPU stage."""
    module = load_driver_module(mlp.folder)
    events: list[tuple[str, int]] = []

    class RecordingFabric(module.FabricStage):
        def launch(self, values):
            events.append(("fabric starts", values["sample"]))

        def complete(self, values):
            events.append(("fabric done", values["sample"]))
            values["mid"] = values["sample"]

    class RecordingSession:
        def run(self, names, feed):
            events.append(("cpu", feed["mid"]))
            return [np.float32(feed["mid"])]

    driver = object.__new__(module.Driver)
    driver.graph_inputs = [{"name": "sample", "dtype": "int64", "shape": []}]
    driver.graph_outputs = ["out"]
    driver.design = {"model": {"batch": 1}}
    driver.stages = [RecordingFabric([]), module.CpuStage(RecordingSession(), ["mid"], ["out"])]
    results = driver.run_many([{"sample": k} for k in range(3)], report=False)
    assert [r["out"] for r in results] == [0, 1, 2]
    for k in range(2):  # the CPU works on sample k between the start and the end of sample k + 1 on the fabric
        assert events.index(("fabric starts", k + 1)) < events.index(("cpu", k)) < events.index(("fabric done", k + 1))
    assert driver.fps > 0


STANDIN_PROBE = """
import sys
import numpy as np
import pynq

project, dma_in, dma_out, size_in = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
overlay = pynq.Overlay(project + "/bitstream/design.bit")
core = [name for name, ip in overlay.ip_dict.items() if ip["type"].startswith("xilinx.com:hls:")][0]
getattr(overlay, core).write(0x0, 0x81)
send, recv = getattr(overlay, dma_in).sendchannel, getattr(overlay, dma_out).recvchannel
short = pynq.allocate((2,), dtype=np.int8)
recv.transfer(short)
data = pynq.allocate((size_in,), dtype=np.int8)
send.transfer(data)
send.wait()
try:
    recv.wait()
except RuntimeError as error:
    print(error)
"""


@pytest.mark.slow
def test_standin_dma_refuses_a_receive_buffer_shorter_than_the_packet(mlp, pynq_env):
    """pynq's own DMA driver reports the S2MM error the stand-in raises, as on a board."""
    mlp.on_board()
    (record,) = mlp.doc["cores"]
    dma_in = dma_instance(record["name"], record["inputs"][0]["port"])
    dma_out = dma_instance(record["name"], record["outputs"][0]["port"])
    size = int(np.prod(record["inputs"][0]["sample_shape"]))
    done = run_in_pynq(pynq_env, "-c", STANDIN_PROBE, str(mlp.folder), dma_in, dma_out, str(size))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "DMA Internal Error" in done.stdout
