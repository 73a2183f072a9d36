"""Per-device ONNX split: the pieces run in manifest order reproduce the whole model."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from fpgaplace.flow.split import check_split, run_split, split_model
from fpgaplace.model import zoo as models
from fpgaplace.model.passes import fuse_elementwise, name_nodes
from fpgaplace.model.passes.graph_tools import topological_order
from fpgaplace.project.layout import MANIFEST_FILE
from fpgaplace.project.manifest import Manifest
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.onnxrt import random_inputs, run_model


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
    data = json.loads((tmp_path / "out" / MANIFEST_FILE).read_text())
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


def constant_read_twice_model() -> onnx.ModelProto:
    """y = (x + k) * k with k = Reshape(DequantizeLinear(3 as int8)): a constant (no op of a
    placement) computed by two nodes, read by the Add and by the Mul; z = Identity(the
    DequantizeLinear's output) a constant that is a graph output, so computed once."""
    init = [helper.make_tensor("k_q", TensorProto.INT8, [], [3]),
            helper.make_tensor("k_s", TensorProto.FLOAT, [], [1.0]),
            helper.make_tensor("shape", TensorProto.INT64, [1], [1])]
    nodes = [helper.make_node("DequantizeLinear", ["k_q", "k_s"], ["k_dq"], name="k_dq"),
             helper.make_node("Reshape", ["k_dq", "shape"], ["k"], name="k_reshape"),
             helper.make_node("Add", ["x", "k"], ["a"], name="add"),
             helper.make_node("Mul", ["a", "k"], ["y"], name="mul"),
             helper.make_node("Identity", ["k_dq"], ["z"], name="z")]
    value = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "constant_read_twice", [value("x", TensorProto.FLOAT, [4])],
                              [value("y", TensorProto.FLOAT, [4]), value("z", TensorProto.FLOAT, [])], init)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_constant_read_on_two_devices_is_computed_on_each_not_sent(tmp_path):
    """The constant's nodes are assigned to A; the Mul on B reads it too. It used to cross from A
    to B as a transfer (which no FPGA core has a port for); now B's piece computes it as A's does,
    only the Add's result crosses, and the split equals the whole model."""
    model = constant_read_twice_model()
    assignment = {"k_dq": "A", "k_reshape": "A", "add": "A", "mul": "B", "z": "A"}
    manifest = split_model(model, assignment, tmp_path / "out")
    assert [(s.device, s.nodes) for s in manifest.submodels] == [
        ("A", ["k_dq", "k_reshape", "add", "z"]), ("B", ["k_dq", "k_reshape", "mul"])]
    assert [t.tensor for t in manifest.transfers] == ["a"]
    assert manifest.submodels[1].inputs == ["a"] and manifest.submodels[0].outputs == ["a", "z"]
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


# ---- the split check compares like numpy.allclose, scaled to each tensor's range ---------------------


def tiny_output_model(channels: int = 8, size: int = 8, offset: float = 7e-4) -> onnx.ModelProto:
    """y = BatchNorm(Conv(x, w)) - Conv(x, w_folded, b_folded + offset * noise): two O(1) branches
    that cancel to outputs below 1e-3. onnxruntime folds the BatchNorm into the Conv only when
    both are in one model, so a split between them rounds the O(1) values differently."""
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((channels, channels, 3, 3)) / np.sqrt(channels * 9)).astype(np.float32)
    gamma = rng.uniform(0.5, 2, channels).astype(np.float32)
    beta = rng.standard_normal(channels).astype(np.float32)
    mean = (0.1 * rng.standard_normal(channels)).astype(np.float32)
    var = rng.uniform(0.5, 2, channels).astype(np.float32)
    scale = gamma / np.sqrt(var + 1e-5)
    folded_w = (w * scale[:, None, None, None]).astype(np.float32)
    folded_b = (beta - mean * scale + offset * rng.standard_normal(channels)).astype(np.float32)
    arrays = {"w": w, "gamma": gamma, "beta": beta, "mean": mean, "var": var, "w2": folded_w, "b2": folded_b}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["n"], name="bn"),
             helper.make_node("Conv", ["x", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
             helper.make_node("Sub", ["n", "c2"], ["y"], name="sub")]
    shape = [1, channels, size, size]
    graph = helper.make_graph(nodes, "tiny_outputs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
                              initializer=[onnx.numpy_helper.from_array(a, n) for n, a in arrays.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


TINY_ASSIGNMENT = {"conv": "A", "bn": "B", "conv2": "B", "sub": "B"}


def test_tiny_outputs_that_failed_the_norm_wise_check_now_agree(tmp_path):
    from fpgaplace.util.compare import relative_error

    model = tiny_output_model()
    split_model(model, TINY_ASSIGNMENT, tmp_path / "out")
    inputs = random_inputs(model, seed=0)
    got, want = run_split(tmp_path / "out", inputs)["y"], run_model(model, inputs)["y"]
    peak = float(np.abs(want).max())
    assert peak < 2e-3
    assert 0 < float(np.abs(got - want).max()) < 1e-5  # float32 rounding of the O(1) branches
    assert relative_error(got, want) > 1e-5  # what the old check (norm-wise, rtol 1e-5) rejected
    errors = check_split(model, tmp_path / "out")  # passes now
    assert set(errors) == {"y"} and errors["y"] > 1e-5  # the old check raised on this figure


def perturb_initializer(folder: Path, initializer: str, change) -> str:
    """Apply ``change`` to ``initializer`` in the one submodel file that holds it; its name."""
    for path in sorted(folder.glob("sub*.onnx")):
        sub = onnx.load(path)
        for tensor in sub.graph.initializer:
            if tensor.name == initializer:
                values = change(onnx.numpy_helper.to_array(tensor).copy())
                tensor.CopyFrom(onnx.numpy_helper.from_array(values.astype(np.float32), initializer))
                onnx.save(sub, path)
                return path.stem
    raise AssertionError(f"no submodel holds {initializer}")


def test_a_real_difference_on_tiny_outputs_still_fails(tmp_path):
    """Shifting one channel's bias by 5e-5, about 5% of the outputs' range (and over six times the
    float32 floor), is a real difference: the check names the submodel and the tensor."""
    model = tiny_output_model()
    split_model(model, TINY_ASSIGNMENT, tmp_path / "out")

    def shift_one_channel(bias):
        bias[3] += 5e-5
        return bias

    changed = perturb_initializer(tmp_path / "out", "b2", shift_one_channel)
    with pytest.raises(FpgaplaceError, match=f"submodel '{changed}'.*differs from the whole model at index"):
        check_split(model, tmp_path / "out")


def test_a_slightly_changed_weight_fails_on_an_ordinary_model(tmp_path):
    model = models.cnn_residual()
    manifest = split_model(model, chunked(model, ["A", "B"], 1), tmp_path / "out")
    check_split(model, tmp_path / "out")
    last = onnx.load(tmp_path / "out" / manifest.submodels[-1].file)
    weight = max(last.graph.initializer, key=lambda t: np.prod(t.dims))
    changed = perturb_initializer(tmp_path / "out", weight.name, lambda w: w * (1 + 1e-3))
    with pytest.raises(FpgaplaceError, match=f"submodel '{changed}'"):
        check_split(model, tmp_path / "out")


def test_the_tolerance_rule_at_its_boundary():
    """|a - b| <= atol + rtol * |b| with atol = range_rtol * max|b| + floor_ulps * eps, per element."""
    from fpgaplace.util.compare import Tolerance, compare_tensors

    expected = np.array([[1e-3, -0.5], [0.25, 0.0]], dtype=np.float32)
    tolerance = Tolerance()
    atol = tolerance.range_rtol * 0.5 + tolerance.floor_ulps * np.finfo(np.float32).eps
    assert tolerance.atol(expected) == pytest.approx(atol)
    allowed = atol + tolerance.rtol * np.abs(expected.astype(np.float64))
    for share, agrees in ((0.9, True), (1.1, False)):
        for index in np.ndindex(expected.shape):
            actual = expected.astype(np.float64).copy()
            actual[index] += share * allowed[index]
            comparison = compare_tensors(actual, expected, tolerance)
            assert comparison.agrees == agrees, (index, share)
            assert comparison.index == index
    assert compare_tensors(expected, expected).used == 0.0
    assert not compare_tensors(expected * 1.01, expected).agrees  # a 1% change is a real difference


def test_the_tolerance_is_scaled_to_each_tensor_and_its_float_type():
    from fpgaplace.util.compare import Tolerance, compare_tensors

    tiny = np.full(4, 7e-4, dtype=np.float32)
    big = np.full(4, 7e3, dtype=np.float32)
    assert compare_tensors(tiny + 1e-6, tiny).agrees  # below the float32 floor (7.6e-6)
    assert not compare_tensors(tiny + 1e-5, tiny).agrees
    assert compare_tensors(big + 0.1, big).agrees  # within 1e-5 of the range and of the value
    assert not compare_tensors(big + 0.2, big).agrees
    exact = np.full(4, 7e-4, dtype=np.float64)
    assert compare_tensors((tiny + 1e-7).astype(np.float32), tiny).agrees
    assert not compare_tensors(exact + 1e-7, exact).agrees  # float64 floor is 64 * 2.2e-16
    assert compare_tensors(exact + 1e-7, exact, Tolerance(floor_ulps=1e9)).agrees


def test_special_values_and_exact_types():
    from fpgaplace.util.compare import compare_tensors

    floats = np.array([np.inf, -np.inf, np.nan, 1.0], dtype=np.float32)
    assert compare_tensors(floats.copy(), floats).agrees  # NaN equals NaN, infinities themselves
    assert not compare_tensors(np.array([-np.inf, -np.inf, np.nan, 1.0], np.float32), floats).agrees
    stray_nan = compare_tensors(np.array([np.inf, -np.inf, np.nan, np.nan], np.float32), floats)
    assert not stray_nan.agrees and stray_nan.index == (3,)
    ints = np.array([1, 2, 3], dtype=np.int64)
    assert compare_tensors(ints.copy(), ints).agrees
    off_by_one = compare_tensors(np.array([1, 2, 4]), ints)
    assert not off_by_one.agrees and "index (2,): 4 vs 3" in off_by_one.describe()
    assert not compare_tensors(np.array([True, False]), np.array([True, True])).agrees
    mismatch = compare_tensors(np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32))
    assert not mismatch.agrees and "shape [2, 3] where [3, 2] was expected" in mismatch.describe()
    assert compare_tensors(np.zeros((0, 4), np.float32), np.zeros((0, 4), np.float32)).agrees


def test_each_piece_dequantizes_a_graph_input_itself(tmp_path):
    """x -> Q -> DQ on core A, read on A and on B: B reads x, not A's dequantized copy (a core that
    only receives the quantized input has no port to pass it on); on a CPU A hands it on."""
    scale, zero = (helper.make_tensor(n, t, [], [v]) for n, t, v in (("s", TensorProto.FLOAT, 0.05),
                                                                      ("z", TensorProto.INT8, 3)))
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="quant"),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="dequant"),
             helper.make_node("Relu", ["xd"], ["a"], name="relu"),
             helper.make_node("Neg", ["xd"], ["b"], name="neg"),
             helper.make_node("Add", ["a", "b"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "input_views", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [scale, zero])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assignment = {"quant": "A", "dequant": "A", "relu": "A", "neg": "B", "add": "A"}
    manifest = split_model(model, assignment, tmp_path / "core", whole=["A"])
    assert [t.tensor for t in manifest.transfers if t.target_device == "B"] == []
    pieces = {s.device: s for s in manifest.submodels if s.device == "B"}
    assert pieces["B"].inputs == ["x"] and {"quant", "dequant", "neg"} <= set(pieces["B"].nodes)
    check_split(model, tmp_path / "core")
    on_cpu = split_model(model, assignment, tmp_path / "cpu")
    assert [t.tensor for t in on_cpu.transfers if t.target_device == "B"] == ["xd"]
