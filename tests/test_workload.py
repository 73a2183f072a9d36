"""Tests for the paper workload JSON loader/saver and its split format."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest
from conftest import WORKLOADS

from fpgaplace.place.solvers.evaluate import evaluate
from fpgaplace.place.solvers.problem import DeviceKind, Placement, PlacementProblem
from fpgaplace.place.workload import load_split, load_workload, placement_to_json, save_workload
from fpgaplace.util.errors import FpgaplaceError


def tiny() -> dict:
    return {
        "maxSizePerFPGA": 100.0, "maxFPGAs": 2, "maxCPUs": 1,
        "nodes": [
            {"id": 10, "supportedOnFpga": 1, "cpuLatency": 5, "fpgaLatency": 1,
             "isBackwardNode": 0, "colorClass": 0, "size": 10},
            {"id": 20, "supportedOnFpga": False, "cpuLatency": 3, "fpgaLatency": 0,
             "isBackwardNode": 0, "size": 0},
            {"id": 30, "supportedOnFpga": True, "cpuLatency": 7, "fpgaLatency": 2,
             "isBackwardNode": 1, "colorClass": 0, "size": 5},
        ],
        "edges": [
            {"sourceId": 10, "destId": 20, "cost": 0.5},
            {"sourceId": 10, "destId": 30, "cost": 0.5},
            {"sourceId": 20, "destId": 30, "cost": 0.25},
        ],
    }


def write(tmp_path: Path, data, name: str = "w.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_load_tiny(tmp_path: Path) -> None:
    p = load_workload(write(tmp_path, tiny()))
    assert p.ids == [10, 20, 30]
    assert [k.name for k in p.kinds] == ["fpga", "cpu"]
    assert p.kinds[0].count == 2 and p.kinds[0].memory == 100.0 and not p.kinds[0].is_cpu
    assert p.kinds[1].count == 1 and math.isinf(p.kinds[1].memory) and p.kinds[1].is_cpu
    assert p.latency[0].tolist() == [1.0, 5.0]
    assert math.isinf(p.latency[1, 0]) and p.latency[1, 1] == 3.0
    assert p.transfer.tolist() == [0.5, 0.25, 0.0]
    assert p.backward.tolist() == [False, False, True]
    assert p.color.tolist() == [0, -1, 0]
    assert p.edges == [(0, 1), (0, 2), (1, 2)]
    assert p.cpu_overlap_unlimited and p.source.endswith("w.json")


def test_mixed_edge_costs_take_max(tmp_path: Path) -> None:
    data = tiny()
    data["edges"][1]["cost"] = 0.75
    p = load_workload(write(tmp_path, data))
    assert p.transfer[0] == 0.75
    assert p.meta["mixed_edge_costs"] == [10]


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda d: d["edges"].append({"sourceId": 10, "destId": 99, "cost": 1}), "dangling"),
        (lambda d: d["nodes"].append(dict(d["nodes"][0])), "duplicate node id 10"),
        (lambda d: d["nodes"][0].pop("cpuLatency"), "cpuLatency"),
        (lambda d: d["nodes"][1].update(cpuLatency=-1), "node 20 field 'cpuLatency'"),
        (lambda d: d["nodes"][0].update(size=-3), "node 10 field 'size'"),
        (lambda d: d["edges"].append({"sourceId": 30, "destId": 10, "cost": 1}), "cycle"),
        (lambda d: d.pop("maxFPGAs"), "maxFPGAs"),
        (lambda d: d["nodes"][0].update(supportedOnFpga=3), "supportedOnFpga"),
        (lambda d: d["edges"][0].pop("cost"), "edge #0"),
        (lambda d: d["edges"][0].update(sourceId=[10]), r"edge #0: node id \[10\]; expected an integer id"),
        (lambda d: d["edges"][0].update(destId={"id": 20}), "edge #0: node id .*expected an integer id"),
    ],
)
def test_bad_files(tmp_path: Path, mutate, needle: str) -> None:
    data = tiny()
    mutate(data)
    with pytest.raises(FpgaplaceError, match=needle) as info:
        load_workload(write(tmp_path, data))
    assert "\n" not in str(info.value) and "w.json" in str(info.value)


@pytest.mark.parametrize(("text", "needle"), [("", "empty"), ("{", "not valid JSON"),
                                               ("[1, 2]", "expected a JSON object")])
def test_unreadable(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(FpgaplaceError, match=needle):
        load_workload(write(tmp_path, text))


def test_the_numpy_nesting_depth_agrees_with_the_regular_expressions() -> None:
    from fpgaplace.place import workload

    def by_regex(text: str) -> int:
        depth = deepest = 0
        for bracket in workload._BRACKETS.findall(workload._STRINGS.sub("", text)):
            depth += 1 if bracket in "[{" else -1
            deepest = max(deepest, depth)
        return deepest

    rng = random.Random(0)
    texts = ['{"a[": [[1]]}', '[[["]]]"]]]', '"{{{{"', '', '[[["open']
    texts += ["".join(rng.choice('[]{}"a,:\u00e9') for _ in range(rng.randrange(40))) for _ in range(3000)]
    for text in texts:
        assert workload._plain_nesting_depth(text) == by_regex(text), text


def test_the_column_reader_agrees_with_the_field_by_field_one_on_the_paper_workloads() -> None:
    from fpgaplace.place import workload

    for path in [path for kind in ("throughput", "latency") for path in sorted((WORKLOADS / kind).glob("*.json"))[:3]]:
        data = json.loads(path.read_text())
        fast, checked = workload._fast_nodes(data["nodes"]), workload._checked_nodes(path, data["nodes"])
        assert fast is not None
        for a, b in zip(fast, checked, strict=True):
            assert np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b
        index = {node_id: i for i, node_id in enumerate(fast[0])}
        edges, transfer, mixed = workload._fast_edges(data["edges"], index)
        assert (edges, mixed) == workload._checked_edges(path, data["edges"], index)[::2]
        assert np.array_equal(transfer, workload._checked_edges(path, data["edges"], index)[1])


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FpgaplaceError, match="not found"):
        load_workload(tmp_path / "nope.json")


def test_cycle_names_a_node_on_it(tmp_path: Path) -> None:
    data = tiny()
    data["nodes"].append({"id": 40, "supportedOnFpga": 1, "cpuLatency": 1, "fpgaLatency": 1,
                          "isBackwardNode": 0})
    data["edges"] += [{"sourceId": 30, "destId": 40, "cost": 1},
                      {"sourceId": 40, "destId": 20, "cost": 1}]
    with pytest.raises(FpgaplaceError, match=r"cycle through node (20|30|40)\b"):
        load_workload(write(tmp_path, data))


@pytest.mark.parametrize("path", sorted((WORKLOADS / "throughput").glob("*.json"))
                         + sorted((WORKLOADS / "latency").glob("*.json")), ids=lambda p: p.name)
def test_round_trip_paper_workloads(tmp_path: Path, path: Path) -> None:
    first = load_workload(path)
    save_workload(first, tmp_path / "copy.json")
    second = load_workload(tmp_path / "copy.json")
    assert first.ids == second.ids and first.edges == second.edges
    assert first.names == second.names and first.kinds == second.kinds
    for name in ("latency", "size", "transfer", "backward", "color"):
        np.testing.assert_array_equal(getattr(first, name), getattr(second, name))


def test_save_refuses_heterogeneous(tmp_path: Path) -> None:
    p = load_workload(write(tmp_path, tiny()))
    p.kinds = [DeviceKind("big", 1, 100, False), DeviceKind("small", 1, 50, False), p.kinds[1]]
    p.latency = np.column_stack([p.latency[:, 0], p.latency[:, 0], p.latency[:, 1]])
    with pytest.raises(FpgaplaceError, match="2 accelerator kinds"):
        save_workload(p, tmp_path / "out.json")


def test_split_fills_backward_from_colour_class(tmp_path: Path) -> None:
    p = load_workload(write(tmp_path, tiny()))
    split = write(tmp_path, {"fpgas": [{"nodes": []}, {"nodes": [10]}],
                             "cpus": [{"nodes": [20]}]}, "s.json")
    placement = load_split(split, p)
    assert placement.device.tolist() == [1, 2, 1]


@pytest.mark.parametrize(
    ("split", "needle"),
    [
        ({"fpgas": [{"nodes": [10]}], "cpus": [{"nodes": []}]}, "not listed.*20"),
        ({"fpgas": [{"nodes": [10, 20]}], "cpus": [{"nodes": [20]}]}, "listed twice"),
        ({"fpgas": [{"nodes": [10, 77]}], "cpus": [{"nodes": [20]}]}, "node 77"),
        ({"fpgas": [{"nodes": []}, {"nodes": []}, {"nodes": [10]}], "cpus": [{"nodes": [20]}]},
         "only 2"),
        ({"fpgas": [{"nodes": [10]}, {"nodes": [30]}], "cpus": [{"nodes": [20]}]}, None),
    ],
)
def test_bad_splits(tmp_path: Path, split: dict, needle: str | None) -> None:
    p = load_workload(write(tmp_path, tiny()))
    path = write(tmp_path, split, "s.json")
    if needle is None:  # a listed colour split loads; evaluate reports it
        placement = load_split(path, p)
        assert any("colour class 0" in v for v in evaluate(p, placement).violations)
        return
    with pytest.raises(FpgaplaceError, match=needle):
        load_split(path, p)


def test_expert_split_on_training_graph() -> None:
    inference = load_workload(WORKLOADS / "throughput/layer-resnet50_inference.json")
    training = load_workload(WORKLOADS / "throughput/layer-resnet50_training.json")
    split = WORKLOADS / "expert-splits/resnet50_inference_expert.json"
    inf_place, train_place = load_split(split, inference), load_split(split, training)
    assert (train_place.device >= 0).all()
    by_id = dict(zip(inference.ids, inf_place.device.tolist(), strict=True))
    colour_dev = {int(inference.color[v]): by_id[i] for v, i in enumerate(inference.ids)}
    for v in range(training.n):
        assert train_place.device[v] == colour_dev[int(training.color[v])]
    result = evaluate(training, train_place)
    assert result.feasible and result.contiguous
    assert result.max_load > evaluate(inference, inf_place).max_load


def test_placement_to_json(tmp_path: Path) -> None:
    p = load_workload(write(tmp_path, tiny()))
    placement = Placement(device=np.array([0, 2, 0]), method="test", value=1.0, bound=0.5,
                          status="heuristic")
    result = evaluate(p, placement)
    out = placement_to_json(p, placement, result)
    assert out["fpgas"] == [{"nodes": [10, 30], "load": result.loads[0]}, {"nodes": [], "load": 0.0}]
    assert out["cpus"] == [{"nodes": [20], "load": 3.0}]
    assert out["maxLoad"] == result.max_load and out["latency"] == result.latency
    assert out["bound"] == 0.5 and out["gap"] == 0.5 and out["method"] == "test"
    assert "devices" not in out
    json.dumps(out)


def test_placement_to_json_heterogeneous() -> None:
    p = PlacementProblem(
        names=["a", "b"], ids=[5, 6], edges=[(0, 1)],
        kinds=[DeviceKind("big", 1, 10, False), DeviceKind("small", 1, 1, False),
               DeviceKind("cpu", 1, math.inf, True)],
        latency=np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]), size=np.zeros(2),
        transfer=np.array([0.5, 0.0]), backward=np.zeros(2, bool), color=np.full(2, -1))
    placement = Placement(device=np.array([0, 1]))
    out = placement_to_json(p, placement, evaluate(p, placement))
    assert [d["name"] for d in out["devices"]] == ["big0", "small0", "cpu0"]
    assert out["devices"][1] == {"name": "small0", "kind": "small", "nodes": [6], "load": 2.5}
    assert len(out["fpgas"]) == 2 and out["maxLoad"] == 2.5
