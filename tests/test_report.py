"""The project report (``fpgaplace.report``, ``fpgaplace report``).

Each project is compiled once per module (analytic CPU costs, two calibration samples) and its
report written once; tests read the page. The page is also opened in headless Chromium: a
screenshot that is not blank, and over the DevTools protocol (``--remote-debugging-pipe``, no
websocket library) no console error, every image and figure drawn, nothing fetched but the page.
"""

from __future__ import annotations

import base64
import json
import os
import re
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from collections import Counter
from html import escape, unescape
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import FAST_CLUSTER
from onnx import TensorProto, helper

from fpgaplace import Design
from fpgaplace.model import zoo as models
from fpgaplace.report import figures, sections, units
from fpgaplace.report import page as report
from fpgaplace.sim.event import build_pipeline, simulate
from fpgaplace.util import files as util_files
from fpgaplace.util.errors import FpgaplaceError

CHROMIUM = shutil.which("chromium") or "chromium"
COLLAPSED = {"QuantizeLinear", "DequantizeLinear", "Constant"}


class Project:
    """A compiled project with its design.json and its report (written once)."""

    def __init__(self, model: onnx.ModelProto, board: str, folder: Path) -> None:
        design = Design(model, board, profile_cpu=False).quantized(random_samples=2)
        design.place()
        design.compile(folder)
        self.folder = folder
        self.doc = json.loads((folder / "design.json").read_text())
        self.result = report.write_report(folder)
        self.html = self.result.report.read_text()


@pytest.fixture(scope="module")
def cnn(tmp_path_factory) -> Project:
    return Project(models.cnn_residual(batch=1), "zcu104-dpu", tmp_path_factory.mktemp("cnn") / "project")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Project:
    return Project(models.cnn_residual(batch=1), FAST_CLUSTER, tmp_path_factory.mktemp("cluster") / "project")


@pytest.fixture(scope="module")
def mlp(tmp_path_factory) -> Project:
    """An MLP ending in a LogSoftmax, which no core runs: it runs on a CPU."""
    model = models.mlp(batch=1)
    next(node for node in model.graph.node if node.op_type == "Softmax").op_type = "LogSoftmax"
    return Project(model, "zcu104-dpu", tmp_path_factory.mktemp("mlp") / "project")


def section(html: str, name: str) -> str:
    match = re.search(rf'<section id="{name}">(.*?)</section>', html, re.S)
    assert match, f"no section {name}"
    return match.group(1)


def row(html: str, attribute: str, value: str) -> str:
    match = re.search(rf'<tr {attribute}="{re.escape(escape(value))}"[^>]*>(.*?)</tr>', html, re.S)
    assert match, f"no row {attribute}={value}"
    return match.group(1)


def cell_texts(row_html: str) -> list[str]:
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row_html, re.S)
    return [unescape(re.sub(r"<[^>]+>", "", cell)).strip() for cell in cells]


def graph_ops(folder: Path) -> list[onnx.NodeProto]:
    model = onnx.load(str(folder / "model.qdq.onnx"))
    return [node for node in model.graph.node if node.op_type not in COLLAPSED]


# --------------------------------------------------------------------------- the page


def test_report_is_written_to_the_project_with_its_sections(cnn):
    assert cnn.result.report == cnn.folder / "report.html"
    assert cnn.result.sections[:3] == ["summary", "graph", "schedule"]
    for name in cnn.result.sections:
        assert f'<section id="{name}">' in cnn.html
    assert {"placement", "resources", "memory", "transfers"} <= set(cnn.result.sections)
    for absent in ("csim", "rtl", "synthesis", "saved_sim"):  # no results/ in a fresh project
        assert absent not in cnn.result.sections and f'<section id="{absent}">' not in cnn.html
    document = cnn.result.to_json()
    assert document["report"] == str(cnn.folder / "report.html") and document["bytes"] == len(cnn.html.encode())
    assert not list(cnn.folder.glob(".report.html.*"))  # the temporary file was renamed


def test_page_is_self_contained(cnn):
    """Nothing is fetched: no script or stylesheet source, every link an anchor in the page."""
    assert not re.search(r"<(script|link|img|iframe)[^>]*(src|href)=", cnn.html)
    targets = re.findall(r'(?:src|href)="([^"]*)"', cnn.html)
    assert targets and all(t.startswith("#") for t in targets)
    for target in targets:
        assert f'id="{target[1:]}"' in cnn.html
    assert "url(" not in re.sub(r"url\(#\w+\)", "", cnn.html)  # only the arrow marker


def test_resources_per_core_are_design_json_numbers(cnn, cluster):
    for project in (cnn, cluster):
        table = section(project.html, "resources")
        for core in project.doc["cores"]:
            cells = cell_texts(row(table, "data-core", core["name"]))
            assert cells[:2] == [core["name"], core["node"]]
            for text, key in zip(cells[2:], sections.RESOURCE_KEYS, strict=True):
                used, available = core["resources"][key], core["budget"][key]
                assert text.startswith(f"{used:,} / {available:,} ({used / available:.1%})"), (key, text)
        total = cell_texts(row(table, "data-core", "all cores"))
        assert total[2].startswith(f"{sum(c['resources']['dsp'] for c in project.doc['cores']):,} / ")


def test_per_layer_folding_cycles_and_macs_are_shown(cnn):
    for core in cnn.doc["cores"]:
        table = re.search(rf'<table class="layers" data-core="{core["name"]}">(.*?)</table>', cnn.html, re.S).group(1)
        rows = re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1], re.S)
        assert len(rows) == len(core["layers"])
        for layer, html_row in zip(core["layers"], rows, strict=True):
            cells = cell_texts(html_row)
            assert cells[0] == layer["op"] and cells[1] == layer["kernel"]
            assert cells[2] == f"{layer['pe']} / {layer['simd']} / {layer['mmv']}"
            assert cells[3] == f"{layer['cycles']:,}"
            assert cells[4] == (f"{layer['macs']:,}" if layer["macs"] else "0")
            if layer["kernel"] in ("conv2d", "dense"):  # an int8 model's dot products requantize
                assert cells[-1] == "w8 a8 -> a8 (requantize)"


def test_memory_per_core_counts_the_weight_arrays(cnn):
    table = section(cnn.html, "memory")
    for core in cnn.doc["cores"]:
        arrays = np.load(cnn.folder / core["folder"] / "layers.npz")
        nbytes = sum(arrays[name].nbytes for name in arrays.files)
        cells = cell_texts(row(table, "data-core", core["name"]))
        assert cells[1] == units.format_bytes(nbytes) and nbytes > 0
        assert ("KiB" in cells[1]) == (nbytes >= 1024)
        ram = core["resources"]["bram36"] * 4608 + core["resources"]["uram"] * 36864
        capacity = core["budget"]["bram36"] * 4608 + core["budget"]["uram"] * 36864
        assert cells[4].startswith(f"{units.format_bytes(ram)} / {units.format_bytes(capacity)}")
        assert "MiB" in cells[4]  # 121 BRAM36 + 38 URAM per zcu104 core is 1.87 MiB


def test_summary_and_solver_rows_are_design_json_numbers(cnn):
    summary = section(cnn.html, "summary")
    interval = cnn.doc["interval_us"]
    assert f'<dd data-key="interval_us">{interval:.4g} µs ({interval / 1e3:.4g} ms)</dd>' in summary
    assert f'<dd data-key="fps">{cnn.doc["fps"]:,.0f} fps</dd>' in summary
    placement = cnn.doc["placement"]
    cells = cell_texts(row(section(cnn.html, "placement"), "data-method", placement["method"]))
    assert cells[0] == f"{placement['method']} (used)"
    assert cells[1] == units.format_us(placement["value"]) and cells[2] == units.format_us(placement["bound"])
    assert cells[3] == f"{placement['gap']:.2%}"
    for device in cnn.doc["devices"]:
        cells = cell_texts(row(section(cnn.html, "placement"), "data-device", device["name"]))
        assert cells[1:4] == [device["kind"], device["node"], str(len(device["ops"]))]
        assert cells[4] == units.format_us(device["load_us"])


def test_compared_solvers_are_a_table_with_bound_and_gap(cnn, tmp_path):
    folder = tmp_path / "project"
    shutil.copytree(cnn.folder, folder)
    document = json.loads((folder / "design.json").read_text())
    document["placement"]["compared"] = [
        {"method": "greedy", "value": 4.5, "bound": float("-inf"), "gap": float("inf"), "seconds": 0.002},
        {"method": "dp", "value": 3.0, "bound": 3.0, "gap": 0.0, "seconds": 0.01},
    ]
    (folder / "design.json").write_text(json.dumps(document))
    html = report.write_report(folder).report.read_text()
    chosen = document["placement"]
    assert f'<dd data-key="placement">{chosen["method"]}: {units.format_us(chosen["value"])}</dd>' in html
    table = section(html, "placement")
    assert cell_texts(row(table, "data-method", "greedy"))[1:5] == [units.format_us(4.5), "none proven",
                                                                     "none proven", "0.002"]
    assert cell_texts(row(table, "data-method", "dp"))[3] == "0.00%"


def test_simulated_numbers_are_the_event_simulators(cnn):
    result = simulate(cnn.folder, report.SIM_SAMPLES)
    summary = section(cnn.html, "summary")
    assert f'<dd data-key="sim_latency">{units.format_us(result.latency_us)}</dd>' in summary
    assert f'<dd data-key="sim_fps">{units.format_fps(result.fps)}</dd>' in summary
    assert cnn.result.to_json()["sim"]["fps"] == pytest.approx(result.fps)
    for device in result.devices:
        cells = cell_texts(row(section(cnn.html, "schedule"), "data-device", device.name))
        assert cells[3] == f"{device.utilisation:.1%}"


def test_gantt_bars_are_the_simulators_schedule(cnn, mlp):
    """One bar per stage and sample, each server busy as long per sample as the simulator says."""
    for project in (cnn, mlp):
        servers, bars = figures.traced_schedule(project.folder, report.GANTT_SAMPLES)
        pipeline = build_pipeline(project.folder)
        assert len(bars) == len(pipeline.stages) * report.GANTT_SAMPLES
        sim = {d.name: d for d in simulate(project.folder, report.GANTT_SAMPLES).devices}
        for index, (name, _) in enumerate(servers):
            busy = sum(b.end - b.start for b in bars if b.server == index)
            assert busy == pytest.approx(sim[name].per_sample_us * report.GANTT_SAMPLES)
        for index, _ in enumerate(servers):  # a server never holds two samples of one stage at once
            mine = sorted((b for b in bars if b.server == index), key=lambda b: b.start)
            assert all(a.end <= b.start + 1e-9 for a, b in zip(mine, mine[1:], strict=False))
        svg = section(project.html, "schedule")
        assert svg.count('<g class="bar">') == len(bars)


def test_graph_nodes_are_coloured_by_their_device(cnn, cluster, mlp):
    for project in (cnn, cluster, mlp):
        placed = project.doc["placement"]["devices"]
        expected = Counter(placed.get(node.name, "") for node in graph_ops(project.folder))
        figure = section(project.html, "graph")
        drawn = Counter(re.findall(r'<g class="node" data-device="([^"]*)">', figure))
        drawn.pop("", None)  # the model's inputs and outputs
        expected.pop("", None)
        assert drawn == expected and drawn
        legend = dict(re.findall(r'<span class="swatch" style="background: (#\w+)"></span>([^<]+)<small>', figure))
        legend = {name.strip(): colour for colour, name in legend.items()}
        for device in drawn:
            fills = set(re.findall(rf'<g class="node" data-device="{re.escape(device)}"><title>.*?</title>'
                                   r'<rect [^>]*fill="(#\w+)"', figure))
            assert fills == {legend[device]}
        assert len(set(legend.values())) == len(legend)


def test_cpu_ops_and_cluster_devices_show_in_the_graph(mlp, cluster):
    cpu_ops = [op for op in mlp.doc["cpu_ops"] if op in {n.name for n in graph_ops(mlp.folder)}]
    assert cpu_ops  # the LogSoftmax
    figure = section(mlp.html, "graph")
    for op in cpu_ops:
        device = mlp.doc["placement"]["devices"][op]
        assert re.search(rf'data-device="{device}"><title>{op} \(\w+ · {device}\)', figure)
    assert re.search(r"cpu\d</span>|cpu\d <small>cpu", figure)
    nodes = {d["node"] for d in cluster.doc["devices"] if d["ops"]}
    assert len(nodes) == 2
    for node in nodes:
        assert f"fpga, {node}</small>" in section(cluster.html, "graph")


def test_collapsed_qdq_and_capped_graph():
    """Q/DQ fold into the edges; a 600-op chain is cut to the limit, its output left out."""
    def tensor(name):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 4])

    scale = helper.make_tensor("s", TensorProto.FLOAT, [], [0.1])
    zero = helper.make_tensor("z", TensorProto.INT8, [], [0])
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q"),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], name="d"),
             helper.make_node("Relu", ["d"], ["r0"], name="relu0")]
    nodes += [helper.make_node("Relu", [f"r{i}"], [f"r{i + 1}"], name=f"relu{i + 1}") for i in range(599)]
    model = helper.make_model(helper.make_graph(nodes, "chain", [tensor("x")], [tensor("r599")], [scale, zero]))
    drawn, total = figures.model_graph(model, {"relu0": "core0"}, limit=300)
    assert total == 600
    ops = [n for n in drawn if n.role == "op"]
    assert len(ops) == 300 and ops[0].name == "relu0" and ops[0].preds == [0] and drawn[0].role == "input"
    assert ops[0].device == "core0" and ops[1].device is None
    assert not [n for n in drawn if n.role == "output"]
    full, _ = figures.model_graph(model, {}, limit=1000)
    assert full[-1].role == "output" and full[-1].preds == [len(full) - 2]
    svg = figures.graph_svg(drawn, {"core0": "#123456"})
    height = float(re.search(r'height="(\d+)"', svg).group(1))
    assert height < 301 * (figures.GRAPH_NODE_H + figures.GRAPH_GAP_Y) + 2 * figures.GRAPH_MARGIN


def test_cap_is_said_on_the_page(cnn, tmp_path, monkeypatch):
    folder = tmp_path / "project"
    shutil.copytree(cnn.folder, folder)
    monkeypatch.setattr(report, "MAX_GRAPH_NODES", 5)
    result = report.write_report(folder)
    total = len(graph_ops(folder))
    assert result.graph_nodes == 5 and result.graph_ops == total
    assert any(f"5 of {total} ops drawn" in note for note in result.notes)
    assert f"5 of {total} ops drawn (the first in topological order)" in result.report.read_text()


# --------------------------------------------------------------------------- results of other stages


def write_results(folder: Path, cores: list[str]) -> None:
    results = folder / "results"
    results.mkdir(exist_ok=True)
    (results / "csim.json").write_text(json.dumps({
        "ok": False, "cores": [{"name": name, "bit_exact": index == 0} for index, name in enumerate(cores)],
        "outputs": [{"name": "logits", "max_abs_diff_lsb": 1}], "build_seconds": 12.5, "run_seconds": 0.25}))
    (results / "rtl.json").write_text(json.dumps({
        "ok": True, "cores": [{"name": name, "bit_exact": True, "cycles_measured": 1111 + i, "cycles_model": 1000}
                              for i, name in enumerate(cores)]}))
    (results / "resources.json").write_text(json.dumps({
        "cores": {name: {"yosys": {"lut": 777, "ff": 888, "dsp": 99, "bram36": 0}, "estimate": {"lut": 700}}
                  for name in cores}}))


def test_results_sections_appear_with_their_files(cnn, tmp_path):
    folder = tmp_path / "project"
    shutil.copytree(cnn.folder, folder)
    names = [c["name"] for c in cnn.doc["cores"]]
    write_results(folder, names)
    saved = simulate(folder, 8).to_json()
    (folder / "results" / "sim.json").write_text(json.dumps(saved))
    result = report.write_report(folder)
    assert result.sections[-4:] == ["csim", "rtl", "synthesis", "saved_sim"]
    html = result.report.read_text()
    saved_section = section(html, "saved_sim")
    assert f"<dt>fps</dt><dd>{units.format_number(saved['fps'])}</dd>" in saved_section
    assert all(f"<td>{escape(d['name'])}</td>" in saved_section for d in saved["devices"])
    csim = section(html, "csim")
    assert '<span class="status failed">FAILED</span>' in csim and "12.5" in csim
    assert all(name in csim for name in names) and '<td class="fail">NO</td>' in csim
    rtl = section(html, "rtl")
    assert '<span class="status passed">passed</span>' in rtl
    assert "<th>cycles_measured</th>" in rtl and "1,111" in rtl and "1,000" in rtl
    assert "<th>measured / model</th>" in rtl and "<td>1.111</td>" in rtl
    synthesis = section(html, "synthesis")
    assert "<th>yosys.lut</th>" in synthesis and "<th>estimate.lut</th>" in synthesis
    assert synthesis.count("<td>777</td>") == len(names)


def test_a_broken_results_file_is_noted_and_left_out(cnn, tmp_path):
    folder = tmp_path / "project"
    shutil.copytree(cnn.folder, folder)
    (folder / "results").mkdir()
    (folder / "results" / "csim.json").write_text("{")
    result = report.write_report(folder)
    assert "csim" not in result.sections
    assert any("results/csim.json: not readable JSON" in note for note in result.notes)
    assert "results/csim.json: not readable JSON" in section(result.report.read_text(), "summary")


# --------------------------------------------------------------------------- errors, output path, CLI


def test_a_project_the_simulator_cannot_read_is_reported_without_the_schedule(cnn, tmp_path):
    folder = tmp_path / "project"
    shutil.copytree(cnn.folder, folder)
    (folder / "split" / "manifest.json").unlink()
    result = report.write_report(folder)
    assert "schedule" not in result.sections and result.to_json()["sim"] is None
    assert any(note.startswith("event simulation: ") for note in result.notes)
    assert {"graph", "resources", "memory"} <= set(result.sections)


def test_errors_name_the_project_and_what_was_expected(cnn, tmp_path):
    with pytest.raises(FpgaplaceError, match=r"no design\.json; expected a folder written by `fpgaplace compile`"):
        report.write_report(tmp_path)
    with pytest.raises(FpgaplaceError, match="not a folder"):
        report.write_report(tmp_path / "missing")
    folder = tmp_path / "project"
    shutil.copytree(cnn.folder, folder)
    (folder / "design.json").write_text(json.dumps({"format": 99, "cores": []}))
    with pytest.raises(FpgaplaceError, match=r"design\.json: not a design\.json of format 1"):
        report.write_report(folder)
    with pytest.raises(FpgaplaceError, match="folder .* does not exist"):
        report.write_report(cnn.folder, tmp_path / "nowhere" / "r.html")
    with pytest.raises(FpgaplaceError, match="is a folder"):
        report.write_report(cnn.folder, tmp_path)


def test_a_failed_write_keeps_the_previous_report(cnn, tmp_path, monkeypatch):
    target = tmp_path / "r.html"
    target.write_text("previous")

    def refuse(source, destination):
        raise OSError("disk full")

    monkeypatch.setattr(util_files.os, "replace", refuse)  # the one atomic writer the report uses
    with pytest.raises(OSError):
        report.write_report(cnn.folder, target)
    assert target.read_text() == "previous" and [p.name for p in tmp_path.iterdir()] == ["r.html"]


def cli(*args: str) -> subprocess.CompletedProcess:
    """The installed ``fpgaplace`` command, as a user runs it."""
    command = Path(sys.executable).parent / "fpgaplace"
    return subprocess.run([str(command), *args], capture_output=True, text=True, timeout=300)


def test_cli_writes_the_report_and_json(cnn, tmp_path):
    target = tmp_path / "page.html"
    done = cli("report", str(cnn.folder), "--out", str(target), "--json", "--samples", "16")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["report"] == str(target) and target.is_file() and document["sim"]["samples"] == 16
    assert document["sections"] == cnn.result.sections
    done = cli("report", str(tmp_path / "missing"))
    assert done.returncode == 1 and done.stderr.startswith("error: ") and "Traceback" not in done.stderr
    assert "Example: fpgaplace report" in cli("report", "--help").stdout


# --------------------------------------------------------------------------- in Chromium


def png_pixels(data: bytes) -> np.ndarray:
    """The pixels of an 8-bit, non-interlaced grey, RGB or RGBA PNG (height, width, channels).

    Unfiltering (PNG specification, section 9) makes a pixel depend on its left, upper and
    upper-left neighbours, so the pixels of one anti-diagonal are independent: they are decoded
    together, every filter type at once, in H + W - 1 vectorised steps."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, chunks, header = 8, [], None
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        body = data[position + 8:position + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            chunks.append(body)
        position += 12 + length
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and interlace == 0, header
    channels = {0: 1, 2: 3, 4: 2, 6: 4}[colour]
    raw = np.frombuffer(zlib.decompress(b"".join(chunks)), np.uint8).reshape(height, 1 + width * channels)
    filters = raw[:, 0].astype(np.int32)
    assert filters.max() <= 4, "unknown PNG filter type"
    filtered = raw[:, 1:].reshape(height, width, channels).astype(np.int32)
    pixels = np.zeros((height + 1, width + 1, channels), np.int32)  # a zero row above and column left
    for diagonal in range(height + width - 1):
        ys = np.arange(max(0, diagonal - width + 1), min(height, diagonal + 1))
        xs = diagonal - ys
        left, up, upper_left = pixels[ys + 1, xs], pixels[ys, xs + 1], pixels[ys, xs]
        estimate = left + up - upper_left
        pa, pb, pc = abs(estimate - left), abs(estimate - up), abs(estimate - upper_left)
        paeth = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, up, upper_left))
        kind = filters[ys][:, None]
        predictor = np.choose(kind, [np.zeros_like(left), left, up, (left + up) // 2, paeth])
        pixels[ys + 1, xs + 1] = (filtered[ys, xs] + predictor) % 256
    return pixels[1:, 1:].astype(np.uint8)


def distinct_colours(png: bytes) -> int:
    pixels = png_pixels(png).astype(np.uint32)
    packed = sum(pixels[:, :, channel] << (8 * channel) for channel in range(pixels.shape[2]))  # one int a colour
    return len(np.unique(packed))


def screenshot(page: Path, folder: Path) -> bytes:
    target = folder / "shot.png"
    subprocess.run([CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu",
                    f"--user-data-dir={folder / 'profile'}", f"--screenshot={target}", "--window-size=1000,1400",
                    page.as_uri()],
                   capture_output=True, timeout=120, check=True)
    return target.read_bytes()


def test_screenshot_is_not_blank(cnn, tmp_path):
    colours = distinct_colours(screenshot(cnn.result.report, tmp_path))
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>")
    assert distinct_colours(screenshot(blank, tmp_path / "b")) == 1  # the checker sees a blank page as blank
    assert colours > 20  # header, text, device colours, bars


class DevTools:
    """Headless Chromium driven over ``--remote-debugging-pipe``: requests go to its fd 3 and
    replies come from its fd 4, each a JSON message ended by a NUL byte."""

    def __init__(self, profile: Path) -> None:
        to_browser, self._input = os.pipe()
        self._output, from_browser = os.pipe()

        def wire() -> None:  # in the child: the pipe ends at fds 3 and 4, inheritable
            read, write = os.dup(to_browser), os.dup(from_browser)
            os.dup2(read, 3)
            os.dup2(write, 4)

        self.process = subprocess.Popen(
            [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             f"--user-data-dir={profile}", "--window-size=1000,1400", "about:blank"],
            preexec_fn=wire, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser)
        os.close(from_browser)
        self.buffer, self.ident, self.events, self.session = b"", 0, [], None

    def _receive(self, deadline: float) -> dict:
        while b"\0" not in self.buffer:
            ready, _, _ = select.select([self._output], [], [], max(0.0, deadline - time.time()))
            assert ready, "Chromium did not answer in time"
            chunk = os.read(self._output, 1 << 16)
            assert chunk, "Chromium closed the DevTools pipe"
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, params: dict | None = None, timeout: float = 30.0) -> dict:
        self.ident += 1
        message = {"id": self.ident, "method": method, "params": params or {}}
        if self.session and not method.startswith(("Target.", "Browser.")):
            message["sessionId"] = self.session
        os.write(self._input, json.dumps(message).encode() + b"\0")
        deadline = time.time() + timeout
        while True:
            reply = self._receive(deadline)
            if reply.get("id") == self.ident:
                assert "error" not in reply, reply["error"]
                return reply["result"]
            self.events.append(reply)

    def open(self, url: str, timeout: float = 30.0) -> None:
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page", "Network"):
            self.call(f"{domain}.enable")
        self.call("Page.navigate", {"url": url})
        deadline = time.time() + timeout
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            self.events.append(self._receive(deadline))

    def evaluate(self, expression: str):
        return self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})["result"]["value"]

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=10)
        except (AssertionError, OSError):
            pass
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)
        os.close(self._input)
        os.close(self._output)


FIGURES_JS = """JSON.stringify({
  images: [...document.images].map(i => ({src: i.src, complete: i.complete, width: i.naturalWidth})),
  svgs: [...document.querySelectorAll('svg')].map(s => { const r = s.getBoundingClientRect();
    return {width: r.width, height: r.height, shapes: s.querySelectorAll('rect, path').length}; })
})"""


def page_problems(page: Path) -> tuple[list[str], dict]:
    """Open ``page`` in Chromium: its console errors, uncaught exceptions, error log entries,
    broken images, empty figures and requests for anything but the page; and the figures."""
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:  # Chromium helpers may still write
        browser = DevTools(Path(profile))
        try:
            browser.open(page.as_uri())
            figures = json.loads(browser.evaluate(FIGURES_JS))
            screenshot_data = base64.b64decode(browser.call("Page.captureScreenshot", {"format": "png"})["data"])
        finally:
            browser.close()
    problems = []
    for event in browser.events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
            problems.append(f"console {params['type']}: {params.get('args')}")
        elif method == "Runtime.exceptionThrown":
            problems.append(f"exception: {params['exceptionDetails'].get('text')}")
        elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
            problems.append(f"log: {params['entry']['text']}")
        elif method == "Network.requestWillBeSent" and params["request"]["url"] != page.as_uri():
            problems.append(f"fetched {params['request']['url']}")
    problems += [f"image not loaded: {i['src']}" for i in figures["images"] if not i["complete"] or i["width"] <= 0]
    problems += [f"empty figure {n}" for n, s in enumerate(figures["svgs"]) if s["width"] <= 0 or s["height"] <= 0
                 or not s["shapes"]]
    figures["screenshot_colours"] = distinct_colours(screenshot_data)
    return problems, figures


def test_page_opens_in_chromium_without_errors(cnn, mlp):
    for project in (cnn, mlp):
        problems, figures = page_problems(project.result.report)
        assert problems == []
        assert len(figures["svgs"]) == 2  # the graph and the Gantt chart, both drawn
        assert figures["screenshot_colours"] > 20


def test_chromium_check_catches_a_broken_page(cnn, tmp_path):
    broken = tmp_path / "broken.html"
    broken.write_text(cnn.html.replace("</main>", '<img src="missing.png" alt="x"><svg width="0" height="0"></svg>'
                                                  '<script>console.error("boom"); noSuchFunction();</script></main>'))
    problems, _ = page_problems(broken)
    joined = "\n".join(problems)
    assert "image not loaded: " in joined and "missing.png" in joined
    assert "console error" in joined and "boom" in joined
    assert "exception: " in joined
    assert f"fetched {(tmp_path / 'missing.png').as_uri()}" in joined
    assert "empty figure 2" in joined


def test_schedule_shows_the_mac_efficiency_and_the_stages_losing_most(cnn):
    html = section(cnn.html, "schedule")
    match = re.search(r'<p id="mac-efficiency">MAC efficiency: ([0-9.]+)% of the cores\' DSP roofline,\s*'
                      r'([0-9.]+)% of the chip\'s', html)
    assert match, "no MAC efficiency line"
    assert 0 < float(match.group(2)) < float(match.group(1)) <= 100  # the chip has more DSPs than the cores' budget
    stages = re.findall(r"<li>(core\d) (\S+) \(conv2d|dense", html)
    assert 1 <= len(re.findall(r"<li>core\d ", html)) <= 3 and stages
