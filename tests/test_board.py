"""Tests of fpgaplace.board.model: shipped boards against the vendor reference, core splitting,
heterogeneous cores, clusters, and every kind of bad board file."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from board_reference import BOARD_PARTS, CLUSTERS, PARTS
from hypothesis import given
from hypothesis import strategies as st

from fpgaplace.board.load import list_boards, load_board, split_equal, usable_fabric
from fpgaplace.board.model import BRAM36_BYTES, RESOURCES, URAM_BYTES, FpgaCore, Link
from fpgaplace.util.errors import FpgaplaceError

REQUIRED_BOARDS = {
    "pynq-z1", "pynq-z2", "ultra96-v2", "kv260", "zcu102", "zcu104",
    "alveo-u50", "alveo-u250", "alveo-u280",
}

# A small valid single board; tests copy it and break one field.
VALID: dict[str, Any] = {
    "name": "tiny",
    "part": "xc7z020clg400-1",
    "fabric": {"lut": 53200, "ff": 106400, "dsp": 220, "bram36": 140, "uram": 0, "slrs": 1},
    "clock_mhz": 100,
    "macs_per_dsp": 1,
    "utilisation_cap": 0.8,
    "shell": {"lut": 4000, "bram36": 4},
    "cores": 2,
    "cpu": {"kind": "cortex-a9", "count": 2, "ghz": 0.65, "gflops": 2.6},
    "dram": {"type": "ddr3", "gbytes": 0.5, "gbps": 2.1, "latency_us": 0.3},
    "stream": {"gbps": 0.8, "latency_us": 0.05},
}


ECP5 = {"device": "85k", "package": "CABGA381", "speed": 6, "clock_pin": "G2", "clock_mhz": 25, "uart_tx": "L4",
        "uart_rx": "M1", "baud": 3000000, "latency_us": 1000}


def write_board(tmp_path: Path, data: Any, name: str = "bad-board.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data), encoding="utf-8")
    return path


def with_change(path_in_dict: str, value: Any, delete: bool = False) -> dict[str, Any]:
    """A copy of VALID with the dotted field set to ``value`` (or removed); a host link is set on
    an ECP5 board (``ECP5``), to show that it is refused there, as is a CPU (VALID's, kept)."""
    data = copy.deepcopy(VALID) | ({"ecp5": ECP5} if path_in_dict in ("host", "cpu.kind") else {})
    *parents, last = path_in_dict.split(".")
    target = data
    for key in parents:
        target = target[key]
    if delete:
        del target[last]
    else:
        target[last] = value
    return data


def expect_error(path: Path, *fragments: str) -> str:
    with pytest.raises(FpgaplaceError) as info:
        load_board(path)
    message = str(info.value)
    assert "\n" not in message
    assert path.name in message
    for fragment in fragments:
        assert fragment in message, message
    return message


# ---------------------------------------------------------------------------------------------
# Shipped boards


def test_required_boards_are_shipped() -> None:
    shipped = set(list_boards())
    assert REQUIRED_BOARDS <= shipped
    assert any(load_board(name).is_cluster for name in shipped)


@pytest.mark.parametrize("name", list_boards())
def test_every_shipped_board_loads_and_is_named_after_its_file(name: str) -> None:
    board = load_board(name)
    assert board.name == name
    assert Path(board.source).name == f"{name}.yaml"
    assert board.cores and (board.cpus or board.ecp5 is not None)  # an ECP5 board has no CPU
    assert board.dram.kind == "dram" and board.stream.kind == "stream"
    json.dumps(board.summary())  # JSON-ready
    first_lines = Path(board.source).read_text(encoding="utf-8").splitlines()[:3]
    assert any("source" in line.lower() or "see " in line.lower() for line in first_lines)


@pytest.mark.parametrize("name", sorted(BOARD_PARTS))
def test_fabric_matches_vendor_reference(name: str) -> None:
    board = load_board(name)
    assert board.part == BOARD_PARTS[name]
    assert board.fabric == PARTS[board.part]


@pytest.mark.parametrize("name", sorted(CLUSTERS))
def test_cluster_fabric_is_its_nodes_reference_summed(name: str) -> None:
    member, count = CLUSTERS[name]
    board = load_board(name)
    reference = PARTS[BOARD_PARTS[member]]
    assert board.fabric == {key: count * value for key, value in reference.items()}


def test_every_shipped_board_is_in_the_reference() -> None:
    assert set(list_boards()) == set(BOARD_PARTS) | set(CLUSTERS)


@pytest.mark.parametrize("name", list_boards())
def test_cores_fit_in_the_capped_fabric(name: str) -> None:
    board = load_board(name)
    for key in RESOURCES:
        capped = sum(
            int(b.utilisation_cap[key] * b.fabric[key])
            for b in (board.node_boards.values() if board.is_cluster else [board])
        )
        used = sum(getattr(core, key) for core in board.cores)
        assert used <= board.usable[key] <= capped, key
    assert all(0 <= core.region < board.fabric["slrs"] for core in board.cores)


# ---------------------------------------------------------------------------------------------
# Splitting into cores


def test_zcu104_without_cores_is_one_core_the_tool_may_cut() -> None:
    board = load_board("zcu104")
    assert not board.fixed_cores and board.summary()["fixed_cores"] is False
    assert [core.dsp for core in board.cores] == [1382] and [core.name for core in board.cores] == ["core0"]


def test_zcu104_dpu_splits_into_two_equal_cores() -> None:
    board = load_board("zcu104-dpu")
    assert board.fixed_cores
    # usable dsp = floor(0.8 * (1728 - 0)) = 1382; two cores get 691 each.
    assert board.usable["dsp"] == 1382
    assert [core.dsp for core in board.cores] == [691, 691]
    assert board.cores[0].kind_key == board.cores[1].kind_key
    assert len(board.core_groups()) == 1
    assert [core.name for core in board.cores] == ["core0", "core1"]


def test_one_core_per_slr_on_u250() -> None:
    board = load_board("alveo-u250")
    assert [core.region for core in board.cores] == [0, 1, 2, 3]
    assert len({core.kind_key for core in board.cores}) == 1


def test_usable_fabric_floors_without_float_noise() -> None:
    fabric = {key: 100 for key in RESOURCES}
    shell = dict.fromkeys(RESOURCES, 0)
    # 0.29 * 100 is 28.999999999999996 in floating point; the usable count is 29.
    assert usable_fabric(fabric, shell, dict.fromkeys(RESOURCES, 0.29)) == dict.fromkeys(RESOURCES, 29)
    shell["dsp"] = 10
    assert usable_fabric(fabric, shell, dict.fromkeys(RESOURCES, 0.5))["dsp"] == 45


@given(
    usable=st.fixed_dictionaries({key: st.integers(64, 10**6) for key in RESOURCES}),
    count=st.integers(1, 64),
    slrs=st.integers(1, 4),
)
def test_split_equal_never_exceeds_usable_and_lays_cores_over_slrs(
    usable: dict[str, int], count: int, slrs: int
) -> None:
    cores = split_equal(usable, count, slrs, clock_mhz=300.0)
    assert len(cores) == count
    for key in RESOURCES:
        assert sum(core[key] for core in cores) <= usable[key]
        assert usable[key] - sum(core[key] for core in cores) < count  # floor loses < 1 each
        assert len({core[key] for core in cores}) == 1
    regions = [core["slr"] for core in cores]
    assert regions == sorted(regions) and 0 <= regions[0] and regions[-1] < slrs
    if count % slrs == 0:
        assert all(regions.count(r) == count // slrs for r in range(slrs))


def test_onchip_bytes_counts_bram_and_uram() -> None:
    core = FpgaCore("c", dsp=1, bram36=10, uram=2, lut=1, ff=1, clock_mhz=100, macs_per_dsp=1,
                    region=0, node="node0")
    assert core.onchip_bytes == 10 * 4608 + 2 * 36864 == 10 * BRAM36_BYTES + 2 * URAM_BYTES


def test_heterogeneous_u280() -> None:
    board = load_board("alveo-u280")
    assert [core.name for core in board.cores] == ["slr0", "slr1", "slr2"]
    assert [core.region for core in board.cores] == [0, 1, 2]
    groups = board.core_groups()
    assert [[core.name for core in group] for group in groups] == [["slr0"], ["slr1", "slr2"]]


def test_heterogeneous_list_with_defaults(tmp_path: Path) -> None:
    cores = [
        {"name": "big", "lut": 20000, "ff": 40000, "dsp": 120, "bram36": 60, "clock_mhz": 150},
        {"lut": 10000, "ff": 20000, "dsp": 50, "bram36": 40},
    ]
    board = load_board(write_board(tmp_path, with_change("cores", cores), "hetero.yaml"))
    big, small = board.cores
    assert (big.name, big.clock_mhz, big.uram) == ("big", 150.0, 0)
    assert (small.name, small.clock_mhz, small.region) == ("core1", 100.0, 0)
    assert big.kind_key != small.kind_key


def test_per_resource_cap_mapping(tmp_path: Path) -> None:
    data = with_change("utilisation_cap", {"dsp": 0.5})
    board = load_board(write_board(tmp_path, data, "capmap.yaml"))
    assert board.utilisation_cap["dsp"] == 0.5 and board.utilisation_cap["lut"] == 1.0
    assert board.usable["dsp"] == 110 and board.usable["lut"] == 53200 - 4000


def test_link_transfer_time() -> None:
    link = Link("dram", gbps=2.0, latency_us=1.0)
    assert link.transfer_us(4000) == pytest.approx(1.0 + 4000 / 2000)


# ---------------------------------------------------------------------------------------------
# Clusters


def test_two_node_cluster() -> None:
    board = load_board("cluster-2x-zcu104")
    single = load_board("zcu104")
    assert board.is_cluster and board.nodes == ["node0", "node1"]
    assert board.network is not None and board.network.kind == "network"
    assert board.network.gbps < board.dram.gbps
    assert [core.name for core in board.cores] == [
        "node0.core0", "node0.core1", "node1.core0", "node1.core1"]
    assert [core.node for core in board.cores] == ["node0", "node0", "node1", "node1"]
    assert len(board.cpus) == 2 * len(single.cpus)
    assert board.cpus[-1].name == "node1.cpu3" and board.cpus[-1].node == "node1"
    assert len(board.core_groups()) == 1  # the same core on both nodes is one device kind
    assert board.node_board("node1").cores[0].name == "node1.core0"
    assert board.summary()["links"]["network"]["gbps"] == board.network.gbps


def test_cluster_of_local_files(tmp_path: Path) -> None:
    write_board(tmp_path, VALID, "tiny.yaml")
    cluster = {"name": "mix", "nodes": [{"board": "tiny.yaml", "count": 1}, {"board": "kv260"}],
               "network": {"gbps": 1.25, "latency_us": 10}}
    board = load_board(write_board(tmp_path, cluster, "mix.yaml"))
    assert board.nodes == ["node0", "node1"]
    assert board.cores[0].clock_mhz == 100.0 and board.cores[-1].clock_mhz == 300.0
    assert len(board.core_groups()) == 2
    assert board.dram.gbps == 2.1  # the slowest node's DRAM


# ---------------------------------------------------------------------------------------------
# Bad input


def test_unknown_board_name_lists_known_boards() -> None:
    with pytest.raises(FpgaplaceError, match="unknown board 'zcu999'.*zcu104"):
        load_board("zcu999")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FpgaplaceError, match="nothere.yaml: board file not found"):
        load_board(tmp_path / "nothere.yaml")


def test_malformed_yaml_names_the_line(tmp_path: Path) -> None:
    path = write_board(tmp_path, "name: x\nfabric: {lut: 1, dsp: [\ncores: 2\n")
    expect_error(path, "malformed YAML", "line")


def test_duplicate_key_is_rejected(tmp_path: Path) -> None:
    path = write_board(tmp_path, "name: x\ncores: 2\ncores: 3\n")
    expect_error(path, "duplicate key 'cores'", "line 3")


@pytest.mark.parametrize("text", ["", "- just\n- a list\n", "42\n"])
def test_empty_or_non_mapping_file(tmp_path: Path, text: str) -> None:
    expect_error(write_board(tmp_path, text))


BAD_FIELDS = [
    # (dotted field, value or DELETE, fragments the message must contain)
    ("fabric", "DELETE", ["fabric is required"]),
    ("fabric.dsp", "DELETE", ["fabric.dsp is required"]),
    ("cpu.gflops", "DELETE", ["cpu.gflops is required"]),
    ("dram.gbytes", "DELETE", ["dram.gbytes is required"]),
    ("fabric.dsp", -5, ["fabric.dsp must be", "got -5"]),
    ("fabric.dsp", 0, ["fabric.dsp must be a positive integer", "got 0"]),
    ("fabric.uram", -1, ["fabric.uram must be a non-negative integer"]),
    ("fabric.lut", "many", ["fabric.lut must be a positive integer", "'many'"]),
    ("fabric.bram36", 1.5, ["fabric.bram36 must be a positive integer"]),
    ("fabric.slrs", True, ["fabric.slrs must be a positive integer"]),
    ("fabric", [1, 2], ["fabric must be a mapping", "list"]),
    ("clock_mhz", "fast", ["clock_mhz must be a positive number"]),
    ("clock_mhz", 0, ["clock_mhz must be a positive number"]),
    ("macs_per_dsp", 0, ["macs_per_dsp must be a positive integer"]),
    ("utilisation_cap", 0, ["utilisation_cap must be a number in (0, 1]"]),
    ("utilisation_cap", 1.5, ["utilisation_cap must be a number in (0, 1]", "1.5"]),
    ("utilisation_cap", {"dsp": 2}, ["utilisation_cap.dsp must be a number in (0, 1]"]),
    ("utilisation_cap", {"dsps": 0.5}, ["utilisation_cap.dsps is not a known field", "dsp"]),
    ("cores", 0, ["cores must be a positive integer", "got 0"]),
    ("cores", -3, ["cores must be a positive integer"]),
    ("cores", [], ["cores must be a positive integer or a non-empty list"]),
    ("cores", 500, ["cores: 500 leaves each core 0 dsp"]),
    ("cores", [{"lut": 1000, "ff": 1000, "dsp": 200, "bram36": 10}],
     ["cores need 200 dsp", "176 usable"]),
    ("cores", [{"lut": 1000, "ff": 1000, "dsp": 10, "bram36": 10, "slr": 1}],
     ["cores[0].slr must be an SLR index below fabric.slrs (1)"]),
    ("cores", [{"lut": 1000, "ff": 1000, "dsp": 10, "bram36": 10, "dsps": 3}],
     ["cores[0].dsps is not a known field", "expected one of: lut, ff, dsp, bram36"]),
    ("cores", [{"lut": 1000, "ff": 1000, "dsp": 10}], ["cores[0].bram36 is required"]),
    ("cores", [{"name": "a", "lut": 1, "ff": 1, "dsp": 1, "bram36": 1},
               {"name": "a", "lut": 1, "ff": 1, "dsp": 1, "bram36": 1}],
     ["cores[1].name must be a name no other core has"]),
    ("shell.dsp", 300, ["shell.dsp must not exceed fabric.dsp (220)", "300"]),
    ("shell.luts", 10, ["shell.luts is not a known field"]),
    ("clock_mhzz", 100, ["clock_mhzz is not a known field", "clock_mhz"]),
    ("fabric.dsps", 220, ["fabric.dsps is not a known field", "expected one of: lut, ff, dsp"]),
    ("cpu.count", 0, ["cpu.count must be a positive integer"]),
    ("dram.gbps", -1, ["dram.gbps must be a positive number"]),
    ("stream.latency_us", -0.1, ["stream.latency_us must be a non-negative number"]),
    ("stream", 5, ["stream must be a mapping, got int"]),
    ("part", "", ["part must be a non-empty string"]),
    ("vivado", {"board_part": "a:b:part0:*", "carrier": "c:d:part0:*"},
     ["vivado.carrier and vivado.connector come together"]),
    ("vivado", {"part": "x"}, ["vivado.part is not a known field", "board_part"]),
    ("vitis", {"platform": "p", "memory": "SRAM", "banks": 2}, ["vitis.memory must be one of HBM, DDR", "SRAM"]),
    ("vitis", {"platform": "p", "memory": "HBM", "banks": 0}, ["vitis.banks must be a positive integer"]),
    ("vitis", {"platform": "p", "memory": "DDR"}, ["vitis.banks is required"]),
    ("ecp5", {**ECP5, "device": "100k"}, ["ecp5.device must be one of", "85k", "'100k'"]),
    ("ecp5", {**ECP5, "speed": 9}, ["ecp5.speed must be one of 6, 7, 8", "9"]),
    ("ecp5", {**ECP5, "baud": 0}, ["ecp5.baud must be a positive integer"]),
    ("ecp5", {k: v for k, v in ECP5.items() if k != "uart_rx"}, ["ecp5.uart_rx is required"]),
    ("host", {"gbps": 1, "latency_us": 1}, ["host must be left out on an ECP5 board", "ecp5.baud"]),
    ("cpu", "DELETE", ["cpu is required"]),
    ("cpu.kind", "cortex-a9", ["cpu must be left out on an ECP5 board", "no CPU"]),
]


@pytest.mark.parametrize(("field_name", "value", "fragments"), BAD_FIELDS,
                         ids=[f"{f}={v!r}"[:40] for f, v, _ in BAD_FIELDS])
def test_bad_field_names_file_and_field(
    tmp_path: Path, field_name: str, value: Any, fragments: list[str]
) -> None:
    data = with_change(field_name, None, delete=True) if value == "DELETE" else with_change(field_name, value)
    expect_error(write_board(tmp_path, data), *fragments)


def test_shipped_boards_name_their_vendor_flow() -> None:
    """Zynq boards carry the Vivado board part, PCIe cards (a PCIe host link) the Vitis platform and
    banks, ECP5 boards the open flow's device and a UART host link of their baud rate."""
    for name in list_boards():
        board = load_board(name)
        if board.is_cluster:
            assert board.vivado is None and board.vitis is None
            continue
        flows = [flow for flow in (board.vivado, board.vitis, board.ecp5) if flow is not None]
        assert len(flows) == 1, name
        card = board.host is not None and board.ecp5 is None
        assert (board.vitis is not None) == card, name
        if board.ecp5 is not None:
            assert board.host.gbps * 1e9 == board.ecp5.baud / 10 and board.host.type.startswith("uart"), name
            assert all(core.family == "ecp5" and core.macs_per_dsp == 1 for core in board.cores), name
    kv260 = load_board("kv260").vivado
    assert kv260.carrier.startswith("xilinx.com:kv260_carrier") and kv260.connector == "som240_1_connector"
    assert (load_board("alveo-u250").vitis.memory, load_board("alveo-u280").vitis.banks) == ("DDR", 32)


def test_valid_template_loads(tmp_path: Path) -> None:
    """The template the bad-input tests break is itself valid (so each error is the one change)."""
    board = load_board(write_board(tmp_path, VALID, "tiny.yaml"))
    assert [core.dsp for core in board.cores] == [88, 88]


BAD_CLUSTERS = [
    ({"name": "c", "nodes": [{"board": "nosuch"}], "network": {"gbps": 1, "latency_us": 1}},
     ["nodes[0].board", "unknown board 'nosuch'"]),
    ({"name": "c", "nodes": [{"board": "zcu104", "count": 0}], "network": {"gbps": 1, "latency_us": 1}},
     ["nodes[0].count must be a positive integer"]),
    ({"name": "c", "nodes": [], "network": {"gbps": 1, "latency_us": 1}},
     ["nodes must be a non-empty list"]),
    ({"name": "c", "nodes": [{"board": "zcu104"}]}, ["network is required"]),
    ({"name": "c", "nodes": [{"board": "zcu104"}], "network": {"gbps": 0, "latency_us": 1}},
     ["network.gbps must be a positive number"]),
    ({"name": "c", "nodes": [{"board": "cluster-2x-zcu104"}], "network": {"gbps": 1, "latency_us": 1}},
     ["nodes[0].board must name a single board"]),
    ({"name": "c", "nodes": [{"board": "zcu104", "cnt": 2}], "network": {"gbps": 1, "latency_us": 1}},
     ["nodes[0].cnt is not a known field"]),
]


@pytest.mark.parametrize(("data", "fragments"), BAD_CLUSTERS, ids=range(len(BAD_CLUSTERS)))
def test_bad_cluster_names_file_and_field(tmp_path: Path, data: dict, fragments: list[str]) -> None:
    expect_error(write_board(tmp_path, data, "bad-cluster.yaml"), *fragments)
