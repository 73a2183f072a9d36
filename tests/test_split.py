"""Per-device ONNX split: the pieces run in manifest order reproduce the whole model."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from fpgaplace import models
from fpgaplace.errors import FpgaplaceError
from fpgaplace.passes import fuse_elementwise, name_nodes
from fpgaplace.passes.graph_tools import topological_order
from fpgaplace.split import (
    MANIFEST_NAME,
    Manifest,
    check_split,
    random_inputs,
    run_model,
    run_split,
    split_model,
)


def node_names(model: onnx.ModelProto) -> list[str]:
    """Node names (after the naming rule) in topological order."""
    named = onnx.ModelProto()
    named.CopyFrom(model)
    name_nodes(named)
    return [n.name for n in topological_order(named.graph)]


def chunked(model: onnx.ModelProto, devices: list[str], seed: int) -> dict[str, str]:
    """Cut the topological order at random points into len(devices) chunks, one per device."""
    names = node_names(model)
    cuts = sorted(random.Random(seed).sample(range(1, len(names)), len(devices) - 1))
    bounds = [0, *cuts, len(names)]
    return {name: devices[k] for k in range(len(devices))
            for name in names[bounds[k]:bounds[k + 1]]}


def assert_manifest_consistent(manifest: Manifest, out: Path) -> None:
    order = {s.name: i for i, s in enumerate(manifest.submodels)}
    for sub in manifest.submodels:
        assert (out / sub.file).is_file()
        for tensor, source in sub.sources.items():
            assert source == "" or order[source] < order[sub.name], (tensor, source)
    seen = set()
    for transfer in manifest.transfers:
        assert order[transfer.source] < order[transfer.target]
        assert transfer.source_device != transfer.target_device
        assert (transfer.tensor, transfer.target_device) not in seen
        seen.add((transfer.tensor, transfer.target_device))
    on_disk = Manifest.load(out)
    assert on_disk.to_dict() == manifest.to_dict()


MODELS = {
    "cnn_residual": models.cnn_residual,
    "bert_encoder_layer": models.bert_encoder_layer,
    "multi_io": models.multi_io,
}


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize(("devices", "seed"), [(["fpga0", "fpga1"], 1), (["fpga0", "fpga1", "cpu0"], 2),
                                               (["A", "B", "A"], 3)])
def test_split_reproduces_the_model(tmp_path, name, devices, seed):
    model = MODELS[name]()
    assignment = chunked(model, devices, seed)
    out = tmp_path / "split"
    manifest = split_model(model, assignment, out)
    assert_manifest_consistent(manifest, out)
    errors = check_split(model, out)
    assert set(errors) == {o.name for o in model.graph.output}
    assert max(errors.values()) <= 1e-5
    assert {s.device for s in manifest.submodels} == set(devices)


def test_non_contiguous_assignment_gives_one_submodel_per_piece(tmp_path):
    model = models.cnn_residual()
    assignment = chunked(model, ["A", "B", "A"], seed=5)
    manifest = split_model(model, assignment, tmp_path / "out")
    assert [s.device for s in manifest.submodels] == ["A", "B", "A"]
    assert manifest.devices == ["A", "B"]
    check_split(model, tmp_path / "out")


def test_light_resnet50_split_in_three(tmp_path):
    model = onnx.load(models.light_model_path("resnet50"))
    for devices, seed in ((["fpga0", "fpga1", "fpga2"], 11), (["fpga0", "cpu0", "fpga0"], 12)):
        out = tmp_path / "-".join(devices)
        manifest = split_model(model, chunked(model, devices, seed), out)
        assert_manifest_consistent(manifest, out)
        assert max(check_split(model, out).values()) <= 1e-5
        stats = manifest.stats
        assert stats["transfers_after"]["count"] <= stats["transfers_before"]["count"]
        assert stats["transfers_after"]["bytes"] == sum(t.nbytes for t in manifest.transfers)


def test_outputs_of_run_split_match_onnxruntime_on_the_whole_model(tmp_path):
    model = models.multi_io()
    split_model(model, chunked(model, ["A", "B"], 4), tmp_path / "out")
    inputs = random_inputs(model, seed=9)
    got = run_split(tmp_path / "out", inputs)
    want = run_model(model, inputs)
    assert set(got) == {"y1", "y2"}
    for name in got:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6)


def branchy_model() -> onnx.ModelProto:
    """x -> a=Relu(x); b=Exp(a); c=Neg(a); y=b+c: 'a' is read by two nodes."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("Exp", ["a"], ["b"], name="exp"),
             helper.make_node("Neg", ["a"], ["c"], name="neg"),
             helper.make_node("Add", ["b", "c"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "branchy",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_tensor_goes_once_to_each_device_and_sync_points_merge(tmp_path):
    model = branchy_model()
    # exp and neg both on B, in separate stages only if nothing merged them
    manifest = split_model(model, {"relu": "A", "exp": "B", "neg": "B", "add": "A"},
                           tmp_path / "out")
    assert [s.device for s in manifest.submodels] == ["A", "B", "A"]
    assert [t.tensor for t in manifest.transfers if t.target_device == "B"] == ["a"]
    check_split(model, tmp_path / "out")
    data = json.loads((tmp_path / "out" / MANIFEST_NAME).read_text())
    assert data["stats"]["transfers_after"]["count"] == 3  # a to B, b and c back to A
    assert data["stats"]["transfers_after"]["bytes"] == 3 * 16


def test_pieces_on_one_device_without_a_dependency_merge(tmp_path):
    # relu(x) on A, exp(x) on B, neg(exp) and add on A: the stage rule gives A, B, A, but
    # relu waits for nothing on B, so both A pieces run as one submodel after B
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("Exp", ["x"], ["b"], name="exp"),
             helper.make_node("Neg", ["b"], ["c"], name="neg"),
             helper.make_node("Add", ["a", "c"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "two_branches",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assignment = {"relu": "A", "exp": "B", "neg": "A", "add": "A"}
    merged = split_model(model, assignment, tmp_path / "m")
    assert [s.device for s in merged.submodels] == ["B", "A"]
    assert merged.submodels[1].nodes == ["relu", "neg", "add"]
    assert merged.stats["sync_points_removed"] == 1
    assert merged.stats["pieces_before_merge"] == 3
    check_split(model, tmp_path / "m")
    plain = split_model(model, assignment, tmp_path / "p", merge_sync=False)
    assert [s.device for s in plain.submodels] == ["A", "B", "A"]
    check_split(model, tmp_path / "p")


def test_fused_groups_stay_on_one_device(tmp_path):
    model, _ = fuse_elementwise(models.cnn_residual())
    names = node_names(model)
    assignment = {name: ("A" if i % 2 else "B") for i, name in enumerate(names)}
    manifest = split_model(model, assignment, tmp_path / "out")
    assert manifest.stats["fused_nodes_moved"] > 0
    assert manifest.stats["transfers_after_fusion"]["count"] < \
        manifest.stats["transfers_before"]["count"]
    check_split(model, tmp_path / "out")


def test_missing_op_is_an_error_and_nothing_is_written(tmp_path):
    model = models.multi_io()
    assignment = chunked(model, ["A", "B"], 1)
    missing = sorted(assignment)[0]
    del assignment[missing]
    with pytest.raises(FpgaplaceError, match=f"node '{missing}'"):
        split_model(model, assignment, tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_requested_device_without_nodes_is_an_error(tmp_path):
    model = models.multi_io()
    assignment = {name: "A" for name in node_names(model)}
    with pytest.raises(FpgaplaceError, match="device 'B'"):
        split_model(model, assignment, tmp_path / "out", devices=["A", "B"])
    split_model(model, assignment, tmp_path / "out", devices=["A"])


def test_op_onnxruntime_cannot_run_names_the_submodel(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("Mystery", ["a"], ["y"], name="mystery", domain="com.example")]
    graph = helper.make_graph(nodes, "odd",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
                              value_info=[helper.make_tensor_value_info("a", TensorProto.FLOAT, [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.example", 1)])
    with pytest.raises(FpgaplaceError, match="submodel 'sub01_B'.*onnxruntime cannot run"):
        split_model(model, {"relu": "A", "mystery": "B"}, tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_run_split_needs_every_graph_input(tmp_path):
    model = models.multi_io()
    split_model(model, chunked(model, ["A", "B"], 1), tmp_path / "out")
    with pytest.raises(FpgaplaceError, match="graph input 'b'"):
        run_split(tmp_path / "out", {"a": np.zeros((1, 8), np.float32)})


def test_split_refuses_to_overwrite_a_folder_that_is_not_a_split(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "precious.txt").write_text("keep me")
    model = models.multi_io()
    with pytest.raises(FpgaplaceError, match="not a split folder"):
        split_model(model, chunked(model, ["A", "B"], 1), tmp_path / "out")
    assert (tmp_path / "out" / "precious.txt").read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
