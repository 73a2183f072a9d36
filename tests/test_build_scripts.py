"""Build scripts (``fpgaplace.codegen.blockdesign``): the Vivado block design, the Vitis link
config and the Makefile, checked without vendor tools.

The generated ``create_project.tcl`` runs under tclsh with stand-ins for the Vivado commands
(``tests/tcl/vivado_standin.tcl``) that record every call; the tests read the design from that
record. ``link.cfg`` is parsed and checked against design.json; the Makefile is run with
``make -n``, with a PATH lacking the tools, and with fake tools that leave what the real ones do.
Each project is compiled once per module.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import json
import os
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import FAST_CLUSTER

from fpgaplace import Design
from fpgaplace.board.load import load_board
from fpgaplace.codegen.blockdesign.plan import FIFO_MAX_DEPTH, FIFO_MIN_DEPTH, Dma, Endpoint, _port_of, fifo_depth
from fpgaplace.codegen.blockdesign.vitis import memory_bank
from fpgaplace.codegen.blockdesign.write import write_build_scripts
from fpgaplace.model import zoo as models
from fpgaplace.project.layout import bitstream_files, core_ip_instance, dma_instance
from fpgaplace.project.record import BoundaryTensor, DesignRecord, View
from fpgaplace.util.errors import FpgaplaceError

STANDIN = Path(__file__).resolve().parent / "tcl" / "vivado_standin.tcl"
PASS_THROUGH = ("axis_data_fifo", "axis_broadcaster", "axis_dwidth_converter")


class Project:
    def __init__(self, board: str, folder: Path) -> None:
        design = Design(models.cnn_residual(batch=1), board, profile_cpu=False).quantized(random_samples=2)
        design.place()
        design.compile(folder)
        self.board = design.board
        self.folder = folder
        self.doc = json.loads((folder / "design.json").read_text())

    def cores(self, node: str | None = None) -> list[dict]:
        return [c for c in self.doc["cores"] if node is None or c["node"] == node]


def run_standin(script: Path, record: Path) -> list[list[str]]:
    done = subprocess.run(["tclsh", str(STANDIN), str(script), str(record)], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr + done.stdout
    calls = json.loads(record.read_text())
    assert calls[-1] == ["done", "0", ""]
    return calls


class Record:
    """What a stand-in run of a create_project.tcl built."""

    def __init__(self, calls: list[list[str]]) -> None:
        self.calls = calls
        self.cells = {}  # name -> vlnv
        for call in calls:
            if call[0] == "create_bd_cell":
                name = call[-1]
                assert name not in self.cells, f"{name} created twice"
                self.cells[name] = call[call.index("-vlnv") + 1]
        self.links = [(a.lstrip("/"), b.lstrip("/")) for c in calls if c[0] == "connect_bd_intf_net"
                      for a, b in [c[1:]]]
        self.nets = [[pin.lstrip("/") for pin in c[1:]] for c in calls if c[0] == "connect_bd_net"]

    def of_kind(self, ip: str) -> list[str]:
        return [name for name, vlnv in self.cells.items() if vlnv.split(":")[2] == ip]

    def pin_uses(self, pin: str) -> int:
        return sum(pin in link for link in self.links)

    def peer(self, pin: str) -> str:
        (link,) = [link for link in self.links if pin in link]
        return link[1] if link[0] == pin else link[0]

    def properties(self, cell: str) -> dict[str, str]:
        """CONFIG.* values set with ``set_property -dict [list ...]`` on ``cell``."""
        values = {}
        for call in self.calls:
            if call[0] == "set_property" and call[1] == "-dict" and call[-1].lstrip("/") == cell:
                words = call[2].split()
                pairs = zip(words[::2], words[1::2], strict=True)
                values.update({k.removeprefix("CONFIG."): v.strip("{}") for k, v in pairs})
        return values

    def core_ips(self) -> set[str]:
        return {name for name, vlnv in self.cells.items() if vlnv.startswith("fpgaplace:")
                and not vlnv.split(":")[2].startswith("fp_last_")}

    def last_markers(self) -> list[str]:
        return [name for name, vlnv in self.cells.items() if vlnv.split(":")[2].startswith("fp_last_")]

    def source_of(self, pin: str) -> str:
        """The pin a stream into ``pin`` comes from, through FIFOs, broadcasters, width converters
        and TLAST markers."""
        upstream = self.peer(pin)
        cell = upstream.split("/")[0]
        if any(cell in self.of_kind(kind) for kind in PASS_THROUGH):
            return self.source_of(f"{cell}/S_AXIS")
        if cell in self.last_markers():
            return self.source_of(f"{cell}/src")
        return upstream

    def sink_of(self, pin: str) -> str:
        """The pin a stream out of ``pin`` ends at, through FIFOs and width converters."""
        downstream = self.peer(pin)
        cell = downstream.split("/")[0]
        if cell in self.of_kind("axis_data_fifo") or cell in self.of_kind("axis_dwidth_converter"):
            return self.sink_of(f"{cell}/M_AXIS")
        return downstream

    def before(self, pin: str) -> str:
        """The cell feeding ``pin``, past a width converter."""
        cell = self.peer(pin).split("/")[0]
        return self.before(f"{cell}/S_AXIS") if cell in self.of_kind("axis_dwidth_converter") else cell


def is_fed_from_core(project: Project, core: dict, port: dict) -> bool:
    """The port's tensor comes from a core of the same node (a FIFO, not a DMA)."""
    node = {c["name"]: c["node"] for c in project.cores()}
    names = {port["name"], *(v["name"] for v in port["views"])}
    return any(t["to_device"] == core["name"] and t["tensor"] in names and node.get(t["from_device"]) == core["node"]
               for t in project.doc["transfers"])


def leaves_fabric(project: Project, core: dict, port: dict) -> bool:
    """The port's tensor goes to a CPU, another node or the model's output (or nowhere listed)."""
    node = {c["name"]: c["node"] for c in project.cores()}
    names = {port["name"], *(v["name"] for v in port["views"])}
    outgoing = [t for t in project.doc["transfers"] if t["from_device"] == core["name"] and t["tensor"] in names]
    manifest = json.loads((project.folder / "split" / "manifest.json").read_text())
    is_model_output = bool(names & {o["name"] for o in manifest["graph_outputs"]})
    return not outgoing or is_model_output or any(node.get(t["to_device"]) != core["node"] for t in outgoing)


def expected_dmas(project: Project, node: str) -> set[str]:
    dmas = set()
    for core in project.cores(node):
        entering = [p for p in core["inputs"] if not is_fed_from_core(project, core, p)]
        leaving = [p for p in core["outputs"] if leaves_fabric(project, core, p)]
        dmas |= {dma_instance(core["name"], p["port"]) for p in entering + leaving}
    return dmas


@pytest.fixture(scope="module")
def zcu104(tmp_path_factory) -> Project:
    return Project("zcu104-dpu", tmp_path_factory.mktemp("zcu104") / "project")


@pytest.fixture(scope="module")
def pynq(tmp_path_factory) -> Project:
    return Project("pynq-z2", tmp_path_factory.mktemp("pynq") / "project")


@pytest.fixture(scope="module")
def u280(tmp_path_factory) -> Project:
    return Project("alveo-u280", tmp_path_factory.mktemp("u280") / "project")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Project:
    return Project(FAST_CLUSTER, tmp_path_factory.mktemp("cluster") / "project")


@pytest.fixture(scope="module")
def zcu104_record(zcu104, tmp_path_factory) -> Record:
    return Record(run_standin(zcu104.folder / "vivado" / "create_project.tcl",
                              tmp_path_factory.mktemp("record") / "zcu104.json"))


@pytest.fixture(scope="module")
def cluster_records(cluster, tmp_path_factory) -> dict[str, Record]:
    folder = tmp_path_factory.mktemp("records")
    return {node: Record(run_standin(cluster.folder / "vivado" / node / "create_project.tcl", folder / f"{node}.json"))
            for node in ("node0", "node1")}


# --------------------------------------------------------------------------- the cycle model's FIFO depths


def test_fifo_depth_holds_the_backlog_of_a_faster_producer_as_a_power_of_two():
    # 4096 beats made in 256 cycles, read in 1024: 3072 beats wait at the end of the sample
    assert fifo_depth(4096, 256, 1024) == 4096
    assert fifo_depth(1000, 100, 200) == 512  # backlog 500
    assert fifo_depth(4096, 1024, 256) == FIFO_MIN_DEPTH  # the consumer is faster: nothing waits
    assert fifo_depth(10, 1, 1000) == FIFO_MIN_DEPTH
    assert fifo_depth(10**7, 1, 10**6) == FIFO_MAX_DEPTH  # capped at Vivado's largest axis_data_fifo


def test_fifo_depths_in_the_block_design_follow_the_layers_cycles(zcu104, zcu104_record):
    cores = {c["name"]: c for c in zcu104.cores()}
    fifos = zcu104_record.of_kind("axis_data_fifo")
    assert fifos
    for fifo in fifos:
        depth = int(zcu104_record.properties(fifo)["FIFO_DEPTH"])
        consumer_cell, consumer_port = zcu104_record.sink_of(f"{fifo}/M_AXIS").split("/")
        producer_cell, producer_port = zcu104_record.source_of(f"{fifo}/S_AXIS").split("/")
        producer = next(c for c in cores.values() if core_ip_instance(c["name"]) == producer_cell)
        consumer = next(c for c in cores.values() if core_ip_instance(c["name"]) == consumer_cell)
        out = next(t for t in producer["outputs"] if t["port"] == producer_port)
        into = next(t for t in consumer["inputs"] if t["port"] == consumer_port)
        made = next(layer["cycles"] for layer in producer["layers"] if layer["output"] == out["name"])
        read = max(layer["cycles"] for layer in consumer["layers"] if into["name"] in layer["inputs"])
        elements = 1
        for n in out["sample_shape"]:
            elements *= n
        assert depth == fifo_depth(-(-elements // out.get("beat", 1)), made, read)
        assert FIFO_MIN_DEPTH <= depth <= FIFO_MAX_DEPTH and depth & (depth - 1) == 0


# --------------------------------------------------------------------------- Zynq block design


def test_every_core_ip_is_instantiated_once_by_its_vlnv(zcu104, zcu104_record):
    for core in zcu104.cores():
        cell = core_ip_instance(core["name"])
        assert zcu104_record.cells[cell] == f"fpgaplace:hls:{core['top']}:1.0"
        assert list(zcu104_record.cells.values()).count(f"fpgaplace:hls:{core['top']}:1.0") == 1
    assert zcu104_record.core_ips() == {core_ip_instance(c["name"]) for c in zcu104.cores()}


def test_every_s2mm_channel_is_fed_through_a_tlast_marker_of_its_sample_size(zcu104, zcu104_record):
    cores = {core_ip_instance(c["name"]): c for c in zcu104.cores()}
    s2mm = [d for d in zcu104_record.of_kind("axi_dma") if zcu104_record.properties(d)["c_include_s2mm"] == "1"]
    assert s2mm
    for dma in s2mm:
        marker = zcu104_record.before(f"{dma}/S_AXIS_S2MM")
        assert marker in zcu104_record.last_markers()
        cell, port = zcu104_record.peer(f"{marker}/src").split("/")
        (tensor,) = [t for t in cores[cell]["outputs"] if t["port"] == port]
        elements = 1
        for n in tensor["sample_shape"]:
            elements *= n
        beat = tensor.get("beat", 1)
        top = f"fp_last_{-(-elements // beat)}x{beat}"
        assert zcu104_record.cells[marker] == f"fpgaplace:hls:{top}:1.0"
        source = (zcu104.folder / "vivado" / "ip" / top / f"{top}.cpp").read_text()
        beats = -(-elements // beat)
        assert f"i < {beats}u" in source and f"beat.last = i == {beats - 1}u" in source
        assert f"ap_uint<{8 * beat}>" in source


def test_every_core_stream_port_is_connected_exactly_once(zcu104, zcu104_record):
    for core in zcu104.cores():
        for port in core["inputs"] + core["outputs"]:
            assert zcu104_record.pin_uses(f"{core_ip_instance(core['name'])}/{port['port']}") == 1, port["port"]


def test_every_tensor_between_cores_runs_through_one_fifo(zcu104, zcu104_record):
    cores = {c["name"]: c for c in zcu104.cores()}
    crossing = [t for t in zcu104.doc["transfers"] if t["from_device"] in cores and t["to_device"] in cores]
    assert crossing
    for transfer in crossing:
        source, target = cores[transfer["from_device"]], cores[transfer["to_device"]]
        out = next(p for p in source["outputs"] if transfer["tensor"] in {p["name"], *(v["name"] for v in p["views"])})
        into = next(p for p in target["inputs"] if transfer["tensor"] in {p["name"], *(v["name"] for v in p["views"])})
        consumer_pin = f"{core_ip_instance(target['name'])}/{into['port']}"
        assert zcu104_record.before(consumer_pin) in zcu104_record.of_kind("axis_data_fifo")
        assert zcu104_record.source_of(consumer_pin) == f"{core_ip_instance(source['name'])}/{out['port']}"


def test_one_dma_per_stream_entering_or_leaving_the_fabric(zcu104, zcu104_record):
    dmas = set(zcu104_record.of_kind("axi_dma"))
    assert dmas == expected_dmas(zcu104, "node0") and len(dmas) == 2  # the model's input and output
    for dma in dmas:
        properties = zcu104_record.properties(dma)
        assert properties["c_include_sg"] == "0"
        stream = f"{dma}/M_AXIS_MM2S" if properties["c_include_mm2s"] == "1" else f"{dma}/S_AXIS_S2MM"
        core_pin = zcu104_record.source_of(stream) if stream.endswith("S2MM") else zcu104_record.sink_of(stream)
        core, port = core_pin.split("/")
        assert dma == dma_instance(next(c["name"] for c in zcu104.cores() if core_ip_instance(c["name"]) == core), port)
        lite = zcu104_record.peer(f"{dma}/S_AXI_LITE")
        assert lite.startswith("axi_ctrl/M")
        memory = f"{dma}/M_AXI_MM2S" if stream.endswith("MM2S") else f"{dma}/M_AXI_S2MM"
        assert zcu104_record.peer(memory).startswith("axi_mem0/S")
    assert zcu104_record.peer("axi_mem0/M00_AXI") == "zynq_ps/S_AXI_HP0_FPD"


def test_part_board_preset_and_board_clock(zcu104, zcu104_record):
    board = load_board("zcu104")
    (create,) = [c for c in zcu104_record.calls if c[0] == "create_project"]
    assert create[create.index("-part") + 1] == board.part
    patterns = [c[-1] for c in zcu104_record.calls if c[0] == "get_board_parts"]
    assert patterns == ["xilinx.com:zcu104:part0:*"]
    assert zcu104_record.cells["zynq_ps"].startswith("xilinx.com:ip:zynq_ultra_ps_e:")
    ps = zcu104_record.properties("zynq_ps")
    assert float(ps["PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ"]) == board.cores[0].clock_mhz == 300
    (clock,) = [net for net in zcu104_record.nets if net[0] == "zynq_ps/pl_clk0"]
    for cell in zcu104_record.cells:  # every cell but the PS runs on the one PL clock
        assert cell == "zynq_ps" or any(pin.startswith(f"{cell}/") for pin in clock), cell
    (reset,) = [net for net in zcu104_record.nets if net[0] == "rst_pl/peripheral_aresetn"]
    assert {f"{core_ip_instance(c['name'])}/ap_rst_n" for c in zcu104.cores()} <= set(reset)


def test_every_axi_lite_port_is_on_the_control_interconnect(zcu104, zcu104_record):
    count = int(zcu104_record.properties("axi_ctrl")["NUM_MI"])
    lite = [zcu104_record.peer(f"axi_ctrl/M{i:02d}_AXI") for i in range(count)]
    expected = {f"{core_ip_instance(c['name'])}/s_axi_control" for c in zcu104.cores()}
    expected |= {f"{d}/S_AXI_LITE" for d in expected_dmas(zcu104, "node0")}
    assert sorted(lite) == sorted(expected)
    assert zcu104_record.peer("axi_ctrl/S00_AXI") == "zynq_ps/M_AXI_HPM0_FPD"


def test_the_script_leaves_the_bitstream_and_handoff_where_the_driver_looks(zcu104, zcu104_record):
    for name in bitstream_files(1, "node0", alveo=False):
        assert (zcu104.folder / name).is_file(), name


def test_zynq_7000_boards_get_processing_system7_at_their_clock(pynq, tmp_path):
    record = Record(run_standin(pynq.folder / "vivado" / "create_project.tcl", tmp_path / "pynq.json"))
    assert record.cells["zynq_ps"].startswith("xilinx.com:ip:processing_system7:")
    ps = record.properties("zynq_ps")
    assert float(ps["PCW_FPGA0_PERIPHERAL_FREQMHZ"]) == load_board("pynq-z2").cores[0].clock_mhz == 100
    assert [c[-1] for c in record.calls if c[0] == "get_board_parts"] == ["tul.com.tw:pynq-z2:part0:*"]
    assert set(record.of_kind("axi_dma")) == expected_dmas(pynq, "node0")
    assert record.peer("axi_mem0/M00_AXI") == "zynq_ps/S_AXI_HP0"


def test_streamed_weights_read_the_ps_ddr(zcu104, tmp_path):
    document = copy.deepcopy(zcu104.doc)
    document["cores"][0]["streamed_weight_bytes"] = 1234
    shutil.copytree(zcu104.folder / "split", tmp_path / "split")
    write_build_scripts(DesignRecord.from_json(document), tmp_path)
    record = Record(run_standin(tmp_path / "vivado" / "create_project.tcl", tmp_path / "record.json"))
    cell = core_ip_instance(document["cores"][0]["name"])
    assert record.peer(f"{cell}/m_axi_gmem").startswith("axi_mem0/S")
    assert int(record.properties("axi_mem0")["NUM_SI"]) == len(record.of_kind("axi_dma")) + 1


# --------------------------------------------------------------------------- clusters: one block design per node


def test_a_cluster_gets_one_script_per_node_with_that_nodes_cores(cluster, cluster_records):
    assert sorted(p.parent.name for p in (cluster.folder / "vivado").glob("*/create_project.tcl")) == ["node0", "node1"]
    for node, record in cluster_records.items():
        assert record.core_ips() == {core_ip_instance(c["name"]) for c in cluster.cores(node)}
        assert set(record.of_kind("axi_dma")) == expected_dmas(cluster, node)
        for name in bitstream_files(2, node, alveo=False):
            assert (cluster.folder / name).is_file(), name


def test_a_tensor_over_the_network_leaves_one_node_and_enters_the_other_by_dma(cluster, cluster_records):
    cores = {c["name"]: c for c in cluster.cores()}
    network = [t for t in cluster.doc["transfers"] if t.get("link") == "network"]
    names = lambda p: {p["name"], *(v["name"] for v in p["views"])}  # noqa: E731
    ends = 0  # the core ends of network transfers (the other end may be a CPU of the other node)
    for transfer in network:
        source, target = cores.get(transfer["from_device"]), cores.get(transfer["to_device"])
        if source is not None:
            out = next(p for p in source["outputs"] if transfer["tensor"] in names(p))
            assert dma_instance(source["name"], out["port"]) in cluster_records[source["node"]].cells
            ends += 1
        if target is not None:
            into = next(p for p in target["inputs"] if transfer["tensor"] in names(p))
            assert dma_instance(target["name"], into["port"]) in cluster_records[target["node"]].cells
            ends += 1
    assert network and ends


def test_an_output_read_by_a_fifo_and_a_dma_goes_through_a_broadcaster(cluster, cluster_records):
    fanouts = {node: record.of_kind("axis_broadcaster") for node, record in cluster_records.items()}
    assert any(fanouts.values())  # node1's first core feeds its neighbour and node0 (over the network)
    for node, cells in fanouts.items():
        record = cluster_records[node]
        for cell in cells:
            count = int(record.properties(cell)["NUM_MI"])
            assert count >= 2
            sinks = [record.peer(f"{cell}/M{i:02d}_AXIS").split("/")[0] for i in range(count)]
            assert all(s in record.of_kind("axis_data_fifo") + record.last_markers() for s in sinks)


# --------------------------------------------------------------------------- Alveo: the Vitis link config


def parse_link_cfg(path: Path) -> dict[str, list[str]]:
    entries: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            entries.setdefault(key, []).append(value)
    return entries


def test_alveo_link_config_matches_the_placement(u280):
    config = parse_link_cfg(u280.folder / "vitis" / "link.cfg")
    assert config["platform"] == [load_board("alveo-u280").vitis.platform]
    units = {cu: kernel for value in config["nk"] for kernel, count, names in [value.split(":")]
             for cu in names.split(".")}
    for value in config["nk"]:
        kernel, count, names = value.split(":")
        assert int(count) == len(names.split("."))
    slr = dict(value.split(":") for value in config["slr"])
    assert set(slr) == set(units)
    for core in u280.cores():
        cell = core_ip_instance(core["name"])
        assert units[cell] == core["top"]
        assert slr[cell] == f"SLR{core['slr']}"
    streams = [value.split(":")[:2] for value in config["sc"]]
    for core in u280.cores():
        for port in core["inputs"] + core["outputs"]:
            pin = f"{core_ip_instance(core['name'])}.{port['port']}"
            assert sum(pin in pair for pair in streams) == 1, pin
    movers = {cu for cu, kernel in units.items() if kernel.startswith(("fp_mm2s_", "fp_s2mm_"))}
    assert movers == expected_dmas(u280, "node0")
    checked = 0
    for core in u280.cores():  # each mover moves beats of its port's width (a core-to-core port has none)
        for port in core["inputs"] + core["outputs"]:
            mover = dma_instance(core["name"], port["port"])
            if mover in movers:
                kind = "mm2s" if port in core["inputs"] else "s2mm"
                assert units[mover] == f"fp_{kind}_{port.get('beat', 1)}"
                checked += 1
    assert checked == len(movers)
    banks = dict(value.split(":") for value in config["sp"])
    assert set(banks) == {f"{cu}.mem" for cu in movers}
    assert all(bank.startswith("HBM[") for bank in banks.values())
    assert len(set(banks.values())) == len(banks)  # spread over the pseudo-channels
    kernels = (u280.folder / "vitis" / "movers.cpp").read_text()
    assert all(f"void {kernel}(" in kernels for kernel in set(units.values()) - {c["top"] for c in u280.cores()})


def test_alveo_streamed_weights_get_a_memory_bank(u280, tmp_path):
    document = copy.deepcopy(u280.doc)
    document["cores"][0]["streamed_weight_bytes"] = 99
    write_build_scripts(DesignRecord.from_json(document), tmp_path)
    banks = dict(value.split(":") for value in parse_link_cfg(tmp_path / "vitis" / "link.cfg")["sp"])
    assert f"{core_ip_instance(document['cores'][0]['name'])}.wmem" in banks


# --------------------------------------------------------------------------- the Makefile


def make(folder: Path, *goals: str, path: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": path} if path is not None else None
    return subprocess.run([shutil.which("make"), "-C", str(folder), *goals], capture_output=True, text=True,
                          env=env, check=False)


@pytest.fixture
def zcu104_copy(zcu104, tmp_path) -> Path:
    folder = tmp_path / "project"
    shutil.copytree(zcu104.folder, folder, ignore=shutil.ignore_patterns("prj", "bitstream"))
    return folder


def test_make_n_lists_hls_per_core_then_vivado(zcu104, zcu104_copy):
    done = make(zcu104_copy, "-n", "bitstream")
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if not line.startswith("make")]
    hls = [f"cd {c['folder']} && vitis_hls -f run_hls.tcl" for c in zcu104.cores()]
    hls += [f"cd vivado/ip/{ip.name} && vitis_hls -f run_hls.tcl" for ip in (zcu104_copy / "vivado" / "ip").iterdir()]
    assert len(hls) > len(zcu104.cores())  # the TLAST markers are HLS IPs too
    vivado = "vivado -mode batch -nojournal -log vivado/vivado.log -source vivado/create_project.tcl"
    assert sorted(lines[:-2]) == sorted(hls) and lines[-2] == vivado
    assert lines[-1] == "touch " + " ".join(bitstream_files(1, "node0", alveo=False))
    clean = make(zcu104_copy, "-n", "clean").stdout
    assert "rm -rf" in clean and "bitstream" in clean and all(f"{c['top']}_prj" in clean for c in zcu104.cores())


def test_make_n_xclbin_compiles_every_kernel_and_links_with_the_config(u280):
    done = make(u280.folder, "-n", "xclbin")
    assert done.returncode == 0, done.stderr
    compiles = [line for line in done.stdout.splitlines() if line.startswith("v++ -c")]
    kernels = {line.split(" -k ")[1].split()[0] for line in compiles}
    config = parse_link_cfg(u280.folder / "vitis" / "link.cfg")
    assert kernels == {value.split(":")[0] for value in config["nk"]}
    assert {c["top"] for c in u280.cores()} < kernels
    (link,) = [line for line in done.stdout.splitlines() if line.startswith("v++ -l")]
    assert "--config vitis/link.cfg" in link and "-o bitstream/design.xclbin" in link
    assert f"--platform {load_board('alveo-u280').vitis.platform}" in link


def test_a_missing_tool_stops_make_with_status_2_and_one_line(zcu104_copy, tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    done = make(zcu104_copy, "hls", path=str(empty))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "vitis_hls not found on PATH" in line and "settings64.sh" in line


def test_make_runs_hls_in_parallel_then_vivado_with_fake_tools(zcu104, zcu104_copy, tmp_path):
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "vitis_hls").write_text(
        '#!/bin/sh\ntop=$(sed -n "s/^set_top //p" run_hls.tcl)\n'
        'mkdir -p "${top}_prj/solution1/impl/ip" && touch "${top}_prj/solution1/impl/ip/component.xml"\n')
    (tools / "vivado").write_text(
        f'#!/bin/sh\nwhile [ "$1" != "-source" ]; do shift; done\nexec tclsh {STANDIN} "$2" vivado/record.json\n')
    for tool in tools.iterdir():
        tool.chmod(0o755)
    path = f"{tools}:{os.environ['PATH']}"
    hls = make(zcu104_copy, "-j2", "hls", path=path)
    assert hls.returncode == 0, hls.stderr
    for core in zcu104.cores():
        assert (zcu104_copy / core["folder"] / f"{core['top']}_prj/solution1/impl/ip/component.xml").is_file()
    done = make(zcu104_copy, "bitstream", path=path)
    assert done.returncode == 0, done.stderr
    for name in bitstream_files(1, "node0", alveo=False):
        assert (zcu104_copy / name).is_file()
    assert "Nothing to be done for 'bitstream'" in make(zcu104_copy, "-n", "bitstream").stdout
    assert make(zcu104_copy, "clean").returncode == 0
    assert not (zcu104_copy / "bitstream").exists()
    assert (zcu104_copy / "vivado" / "create_project.tcl").is_file()


def test_without_vivado_make_bitstream_names_it(zcu104, zcu104_copy, tmp_path):
    for script in zcu104_copy.rglob("run_hls.tcl"):  # HLS already done, for the cores and the TLAST markers
        (top,) = [line.split()[1] for line in script.read_text().splitlines() if line.startswith("set_top ")]
        ip = script.parent / f"{top}_prj/solution1/impl/ip/component.xml"
        ip.parent.mkdir(parents=True)
        ip.touch()
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    done = make(zcu104_copy, "bitstream", path=str(empty))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "vivado not found on PATH" in line and "VIVADO=" in line


# --------------------------------------------------------------------------- hand-made documents


def test_a_design_without_cores_gets_a_makefile_that_builds_nothing(zcu104, tmp_path):
    document = {**copy.deepcopy(zcu104.doc), "cores": [], "transfers": []}
    write_build_scripts(DesignRecord.from_json(document), tmp_path)
    assert not (tmp_path / "vivado").exists()
    done = make(tmp_path, "-n", "bitstream")
    assert done.returncode == 0 and "vivado" not in done.stdout and "vitis_hls" not in done.stdout


def test_a_transfer_naming_a_port_the_core_lacks_is_a_one_line_error(zcu104, tmp_path):
    document = copy.deepcopy(zcu104.doc)
    core = zcu104.cores()[0]["name"]
    document["transfers"].append({"tensor": "no_such_tensor", "from_device": "cpu0", "to_device": core})
    with pytest.raises(FpgaplaceError) as caught:
        write_build_scripts(DesignRecord.from_json(document), tmp_path)
    message = str(caught.value)
    assert "\n" not in message and "no_such_tensor" in message and core in message


def test_the_kv260_som_is_joined_to_its_carrier_card(zcu104, tmp_path):
    board = load_board("kv260")
    document = copy.deepcopy(zcu104.doc)
    document["board"] = {**document["board"], "name": board.name, "part": board.part, "source": board.source}
    for core in document["cores"]:
        core["part"] = board.part
    write_build_scripts(DesignRecord.from_json(document), tmp_path)
    record = Record(run_standin(tmp_path / "vivado" / "create_project.tcl", tmp_path / "record.json"))
    (connections,) = [c for c in record.calls if c[:2] == ["set_property", "board_connections"]]
    assert connections[2] == "som240_1_connector xilinx.com:kv260_carrier:som240_1_connector:1.1"
    assert record.cells["zynq_ps"].startswith("xilinx.com:ip:zynq_ultra_ps_e:")


def test_memory_banks_are_hbm_channels_in_turn_or_the_ddr_of_the_slr():
    u280, u250 = load_board("alveo-u280").vitis, load_board("alveo-u250").vitis
    assert [memory_bank(u280, i, 2) for i in (0, 1, 33)] == [("HBM", 0), ("HBM", 1), ("HBM", 1)]
    assert [memory_bank(u250, i, slr) for i, slr in ((0, 3), (1, 3), (2, 0))] == [
        ("DDR", 3), ("DDR", 3), ("DDR", 0)]


def test_streams_of_other_widths_meet_through_width_converters(zcu104, tmp_path):
    """A model input of 3-byte beats: an 8-bit DMA and a 1 -> 3 converter; a core-to-core tensor
    written in 2-byte and read in 4-byte beats: a 2 -> 4 converter after the FIFO; a 16-byte
    output: a 128-bit DMA, no converter."""
    document = copy.deepcopy(zcu104.doc)
    cores = {c["name"]: c for c in document["cores"]}
    cores_by_cell = {core_ip_instance(name): c for name, c in cores.items()}
    shutil.copytree(zcu104.folder / "split", tmp_path / "split")
    transfer = next(t for t in document["transfers"] if t["from_device"] in cores and t["to_device"] in cores)
    for core in document["cores"]:
        for port in core["inputs"]:
            port["beat"] = 4 if core["name"] == transfer["to_device"] else 3
        for port in core["outputs"]:
            port["beat"] = 2 if core["name"] == transfer["from_device"] else 16
    write_build_scripts(DesignRecord.from_json(document), tmp_path)
    record = Record(run_standin(tmp_path / "vivado" / "create_project.tcl", tmp_path / "record.json"))
    widths = {cell: (int(props["S_TDATA_NUM_BYTES"]), int(props["M_TDATA_NUM_BYTES"]))
              for cell in record.of_kind("axis_dwidth_converter") for props in [record.properties(cell)]}
    assert sorted(widths.values()) == [(1, 3), (2, 4)]
    for dma in record.of_kind("axi_dma"):
        properties = record.properties(dma)
        if properties["c_include_mm2s"] == "1":
            core, port = record.sink_of(f"{dma}/M_AXIS_MM2S").split("/")
            beat = next(t["beat"] for t in cores_by_cell[core]["inputs"] if t["port"] == port)
            assert properties["c_m_axis_mm2s_tdata_width"] == ("8" if beat == 3 else str(8 * beat))
            assert (record.peer(f"{dma}/M_AXIS_MM2S").split("/")[0] in widths) == (beat == 3)
        else:
            core, port = record.source_of(f"{dma}/S_AXIS_S2MM").split("/")
            beat = next(t["beat"] for t in cores_by_cell[core]["outputs"] if t["port"] == port)
            assert beat == 16 and record.before(f"{dma}/S_AXIS_S2MM") in record.last_markers()
            assert record.peer(f"{dma}/S_AXIS_S2MM").split("/")[0] not in widths


def test_an_s2mm_stream_of_odd_beats_is_counted_in_its_beats_and_narrowed_to_bytes():
    dma = Dma("dma_c_out0", Endpoint("c", "out0"), "t", to_fabric=False, bytes_per_sample=30, stream_bytes=3)
    assert (dma.beats_per_sample, dma.dma_bytes, dma.last_top) == (10, 1, "fp_last_10x3")
    assert dma.converter == "width_dma_c_out0"
    wide = Dma("dma_c_out1", Endpoint("c", "out1"), "t", to_fabric=False, bytes_per_sample=640, stream_bytes=64)
    assert (wide.beats_per_sample, wide.dma_bytes, wide.converter) == (10, 64, "")


def test_alveo_cores_of_different_beats_meet_through_a_regroup_kernel(zcu104, tmp_path):
    board = load_board("alveo-u280")
    document = copy.deepcopy(zcu104.doc)
    document["board"] = {**document["board"], "name": board.name, "part": board.part, "source": board.source}
    for slr, core in enumerate(document["cores"]):
        core.update(part=board.part, slr=slr + 1)
    cores = {c["name"]: c for c in document["cores"]}
    transfer = next(t for t in document["transfers"] if t["from_device"] in cores and t["to_device"] in cores)
    cores[transfer["from_device"]]["outputs"][0]["beat"] = 8
    cores[transfer["to_device"]]["inputs"][0]["beat"] = 2
    write_build_scripts(DesignRecord.from_json(document), tmp_path)
    config = parse_link_cfg(tmp_path / "vitis" / "link.cfg")
    producer = f"{core_ip_instance(transfer['from_device'])}.{cores[transfer['from_device']]['outputs'][0]['port']}"
    consumer = f"{core_ip_instance(transfer['to_device'])}.{cores[transfer['to_device']]['inputs'][0]['port']}"
    (first,) = [v.split(":") for v in config["sc"] if v.startswith(producer + ":")]
    regroup = first[1].split(".")[0]
    assert first[1] == f"{regroup}.src" and int(first[2]) >= FIFO_MIN_DEPTH
    assert f"{regroup}.dst:{consumer}" in config["sc"]
    assert f"fp_regroup_8_2:1:{regroup}" in config["nk"]
    assert f"{regroup}:SLR{cores[transfer['to_device']]['slr']}" in config["slr"]
    assert "void fp_regroup_8_2(" in (tmp_path / "vitis" / "movers.cpp").read_text()


# --------------------------------------------------------------------------- scripts/count_build_cells.py


@pytest.fixture(scope="module")
def counter():
    script = Path(__file__).resolve().parents[1] / "scripts" / "count_build_cells.py"
    spec = importlib.util.spec_from_file_location("count_build_cells", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cell_counter_counts_what_the_record_and_the_config_hold(counter, zcu104, zcu104_record, u280):
    counts = counter.count_vivado(zcu104_record.calls)
    assert counts["cells"] == len(zcu104_record.cells)
    assert counts["connections"] == len(zcu104_record.links) + len(zcu104_record.nets)
    assert counts["dmas"] == len(expected_dmas(zcu104, "node0"))
    assert counts["fifos"] == len(zcu104_record.of_kind("axis_data_fifo"))
    config = parse_link_cfg(u280.folder / "vitis" / "link.cfg")
    counts = counter.count_vitis(counter.parse_link_cfg((u280.folder / "vitis" / "link.cfg").read_text()))
    assert counts["connections"] == len(config["sc"]) + len(config["sp"])
    assert counts["dmas"] == len(expected_dmas(u280, "node0"))
    assert counts["cells"] == sum(int(value.split(":")[1]) for value in config["nk"])


def test_a_sample_longer_than_an_axi_dma_moves_stops_the_script_not_the_compile(zcu104, tmp_path):
    document = copy.deepcopy(zcu104.doc)
    port = document["cores"][0]["outputs"][0]
    port["sample_shape"] = [1 << 26]
    port["shape"] = [1, 1 << 26]  # the record's rules: a sample is a part of the tensor, its views as big
    for view in port["views"]:
        view["shape"] = port["shape"]
    write_build_scripts(DesignRecord.from_json(document), tmp_path)
    done = subprocess.run(["tclsh", str(STANDIN), str(tmp_path / "vivado" / "create_project.tcl"),
                           str(tmp_path / "record.json")], capture_output=True, text=True, check=False)
    assert done.returncode == 1
    (last,) = json.loads((tmp_path / "record.json").read_text())
    assert last[0] == "done" and port["name"] in last[2] and "AXI DMA" in last[2]


def test_a_float_tensor_a_core_quantizes_on_arrival_is_carried_by_that_input_port():
    """A core that reads a float tensor from a CPU and quantizes it (the port's ``quantized_from``;
    the benchmark's small CNN with measured CPU costs places its Flatten so) is fed through that
    port; an output port never stands for the float tensor it was quantized from."""
    port = BoundaryTensor("f_QuantizeLinear_Output", "in0_f", 1, [1], [1], False, 1.0, 0,
                          [View("f_DequantizeLinear_Output", [1])], quantized_from="f")
    core = SimpleNamespace(name="core0", inputs=[port], outputs=[dataclasses.replace(port, port="out0_f")])
    assert _port_of(core, "inputs", "f") is port
    assert _port_of(core, "inputs", "f_DequantizeLinear_Output") is port
    assert _port_of(core, "outputs", "f") is None
