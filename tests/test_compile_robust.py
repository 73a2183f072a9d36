"""compile never refuses a model place accepts (issue 18, item 4): every cut of a placement is
one design.json can describe; the placement compile makes is one a core can build."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from test_cli import assert_one_line_error, run

from fpgaplace import Design
from fpgaplace.flow.settle import is_free, settled_devices
from fpgaplace.place.solvers.problem import Placement
from fpgaplace.sim.csim import run_csim


def _conv(nodes: list, inits: list, rng, x: str, name: str, cin: int, cout: int) -> str:
    """A 3x3 convolution (padding 1) of ``x`` followed by a Relu; returns the Relu's output."""
    inits += [onnx.numpy_helper.from_array((rng.standard_normal((cout, cin, 3, 3)) / (3 * cin ** 0.5))
                                           .astype(np.float32), f"{name}_w"),
              onnx.numpy_helper.from_array((rng.standard_normal(cout) * 0.1).astype(np.float32), f"{name}_b")]
    nodes += [onnx.helper.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [f"{name}_c"], name=name, pads=[1] * 4),
              onnx.helper.make_node("Relu", [f"{name}_c"], [f"{name}_r"], name=f"{name}_relu")]
    return f"{name}_r"


@pytest.fixture(scope="module")
def concat_qdq() -> onnx.ModelProto:
    """Two conv branches joined by a Concat (which heads no fused group, so its QuantizeLinear is
    free to go elsewhere) read by a conv and a max pool, quantized to int8 QDQ (2 random samples)."""
    rng = np.random.default_rng(7)
    nodes: list = []
    inits: list = []
    a, b = (_conv(nodes, inits, rng, "x", name, 4, 8) for name in ("conv_a", "conv_b"))
    nodes.append(onnx.helper.make_node("Concat", [a, b], ["joined"], name="concat", axis=1))
    c = _conv(nodes, inits, rng, "joined", "conv_c", 16, 8)
    nodes.append(onnx.helper.make_node("MaxPool", ["joined"], ["pooled"], name="pool", kernel_shape=[2, 2],
                                       strides=[2, 2]))
    graph = onnx.helper.make_graph(
        nodes, "concat_branches", [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4, 8, 8])],
        [onnx.helper.make_tensor_value_info(c, onnx.TensorProto.FLOAT, [1, 8, 8, 8]),
         onnx.helper.make_tensor_value_info("pooled", onnx.TensorProto.FLOAT, [1, 16, 4, 4])], inits)
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    return Design(model, "zcu104", profile_cpu=False).quantized(random_samples=2).graph.model


def _place(design: Design, on_core) -> None:
    """The ops ``on_core(name, op)`` says on core0, every other op on cpu0."""
    names, graph = design.device_names(), design.graph
    device = np.array([names.index("core0" if on_core(name, graph.ops[name]) else "cpu0")
                       for name in design.problem.names])
    design.set_placement(Placement(device=device, method="given"))


def _fused_with(head: str):
    from fpgaplace.model.passes.fuse import fused_head

    return lambda name, op: name == head or fused_head(op.node) == head


CUTS = {
    # The branches and the Concat on the core, the Concat's QuantizeLinear on the CPU: the float
    # Concat result before its QuantizeLinear crosses (as concat_120 of the YOLO-style model did).
    "float before its quantizer": lambda name, op: name == "concat" or any(
        _fused_with(head)(name, op) for head in ("conv_a", "conv_b")),
    # conv_c on the core with the Concat's DequantizeLinear, the Concat and its QuantizeLinear on
    # the CPU: the DequantizeLinear of a tensor the core only receives, also read by the pool on
    # the CPU, crosses (as hardswish_58.tmp_0_DequantizeLinear_Output did).
    "view of a received tensor": lambda name, op: name == "joined_DequantizeLinear" or _fused_with("conv_c")(
        name, op),
}


@pytest.mark.parametrize("cut", list(CUTS))
def test_a_cut_that_stopped_compile_builds_bit_exact(concat_qdq, tmp_path, cut):
    """These cuts used to stop compile ("design.json: transfer of ... names core0, which has no
    output port carrying it"); now every tensor leaving the core is one of its output ports or a
    view of one, and the placed model is bit-exact against onnxruntime on the whole QDQ model."""
    design = Design(concat_qdq, "zcu104", profile_cpu=False)
    assert "joined_DequantizeLinear" in design.graph.ops  # the names the cuts use
    _place(design, CUTS[cut])
    result = design.compile(tmp_path / "project")
    document = json.loads((tmp_path / "project" / "design.json").read_text())
    [core] = document["cores"]
    ports = {name for t in core["outputs"] for name in [t["name"], *(v["name"] for v in t["views"])]}
    leaving = {t["tensor"] for t in document["transfers"] if t["from_device"] == "core0"}
    assert leaving <= ports
    manifest = json.loads((tmp_path / "project" / "split" / "manifest.json").read_text())
    split = {node: sub["device"] for sub in manifest["submodels"] for node in sub["nodes"]}
    placed = document["placement"]["devices"]
    assert {op: split[op] for op in placed} == placed  # the record places every op where the split runs it
    assert result.design["placement"]["devices"] == placed
    check = run_csim(tmp_path / "project", samples=2)
    assert [c.bit_exact for c in check.cores] == [True]
    assert [o.max_abs_diff_lsb for o in check.outputs] == [0.0, 0.0]


def test_settling_moves_fused_ops_to_their_head_and_free_ops_to_their_source(concat_qdq):
    """On random placements, every op that moves is a fused member now on its head's device (as
    the split puts it) or a Q/DQ or order-keeping reshape now on the device of the op it reads;
    no other op moves, and settling a settled placement changes nothing."""
    from fpgaplace.model.passes.fuse import fused_head

    design = Design(concat_qdq, "zcu104", profile_cpu=False)
    graph, problem = design.graph, design.problem
    rng = np.random.default_rng(0)
    index = {name: v for v, name in enumerate(problem.names)}
    cpu0 = design.device_names().index("cpu0")
    runs = problem.latency[:, problem.device_kinds()]  # (ops, devices): finite where an op may run
    for _ in range(20):
        device = rng.integers(0, len(design.device_names()), problem.n)
        device[~np.isfinite(runs[np.arange(problem.n), device])] = cpu0
        settled = settled_devices(problem, graph, device)
        for v in np.flatnonzero(settled != device):
            op = graph.ops[problem.names[v]]
            head = fused_head(op.node)
            reads = index[head] if head in index else index[graph.producer(op.inputs[0])]
            assert head in index or is_free(op, graph)
            assert settled[v] == settled[reads]
        assert np.array_equal(settled_devices(problem, graph, settled), settled)


# --------------------------------------------------------------------------- a constant read on two devices


def _hardswish(nodes: list, x: str, name: str) -> str:
    """HardSwish as MobileNetV3 exports it, ``x * Clip(x + 3, 0, 6) * (1 / 6)``, on the shared constants."""
    nodes += [onnx.helper.make_node("Add", [x, "three"], [f"{name}_p"], name=f"{name}_add"),
              onnx.helper.make_node("Clip", [f"{name}_p", "zero", "six"], [f"{name}_c"], name=f"{name}_clip"),
              onnx.helper.make_node("Mul", [x, f"{name}_c"], [f"{name}_m"], name=f"{name}_mul"),
              onnx.helper.make_node("Mul", [f"{name}_m", "sixth"], [f"{name}_o"], name=f"{name}_scale")]
    return f"{name}_o"


@pytest.fixture(scope="module")
def hardswish_qdq() -> onnx.ModelProto:
    """x -> conv_a -> HardSwish -> conv_b -> HardSwish, int8 QDQ: the quantizer gives the constant
    3 one DequantizeLinear that both HardSwish islands read."""
    rng = np.random.default_rng(3)
    nodes: list = []
    inits = [onnx.numpy_helper.from_array(np.array(value, np.float32), name)
             for name, value in (("zero", 0.0), ("three", 3.0), ("six", 6.0), ("sixth", 1 / 6))]
    a = _hardswish(nodes, _conv(nodes, inits, rng, "x", "conv_a", 4, 8), "hs_a")
    b = _hardswish(nodes, _conv(nodes, inits, rng, a, "conv_b", 8, 8), "hs_b")
    value = onnx.helper.make_tensor_value_info
    graph = onnx.helper.make_graph(nodes, "hardswish_twice", [value("x", onnx.TensorProto.FLOAT, [1, 4, 8, 8])],
                                   [value(b, onnx.TensorProto.FLOAT, [1, 8, 8, 8])], inits)
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    return Design(model, "zcu104", profile_cpu=False).quantized(random_samples=2).graph.model


def test_a_constant_read_on_two_devices_is_computed_on_each(hardswish_qdq, tmp_path):
    """The first HardSwish on cpu0, the second on core0: both read the DequantizeLinear of the
    constant 3, a node the front end folds into parameters. The split gave it to the first
    reader's device and sent it to core0, which has no port for it (compile stopped: "transfers[1].
    tensor: expected a port of core0's inputs, got 'three_DequantizeLinear_Output'", as DB's
    scalar_0 did); now each piece reading it computes it, nothing sends it, and the placed model is
    bit-exact against onnxruntime on the whole QDQ model."""
    design = Design(hardswish_qdq, "zcu104", profile_cpu=False)
    shared = "three_DequantizeLinear_Output"
    assert shared not in design.graph.ops and {"hs_a_add", "hs_b_add"} <= set(design.graph.ops)
    _place(design, lambda name, op: any(_fused_with(head)(name, op) for head in ("conv_b", "hs_b_add")))
    design.compile(tmp_path / "project")
    document = json.loads((tmp_path / "project" / "design.json").read_text())
    assert shared not in {t["tensor"] for t in document["transfers"]}
    manifest = json.loads((tmp_path / "project" / "split" / "manifest.json").read_text())
    computing = [sub["device"] for sub in manifest["submodels"] if "three_DequantizeLinear" in sub["nodes"]]
    assert sorted(computing) == ["core0", "cpu0"]
    assert not any(shared in sub["inputs"] or shared in sub["outputs"] for sub in manifest["submodels"])
    check = run_csim(tmp_path / "project", samples=2)
    assert [c.bit_exact for c in check.cores] == [True]
    assert [o.max_abs_diff_lsb for o in check.outputs] == [0.0]


# --------------------------------------------------------------------------- a dim of -1


def _minus_one_model(path: Path, dims: list[int]) -> Path:
    """A conv classifier whose input ``x`` declares ``dims`` (paddle2onnx writes -1 for a batch)."""
    rng = np.random.default_rng(3)
    w = onnx.numpy_helper.from_array((rng.standard_normal((8, 3, 3, 3)) * 0.2).astype(np.float32), "w")
    nodes = [onnx.helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1] * 4, strides=[2, 2]),
             onnx.helper.make_node("Relu", ["c"], ["r"], name="relu"),
             onnx.helper.make_node("GlobalAveragePool", ["r"], ["y"], name="gap")]
    value = onnx.helper.make_tensor_value_info
    graph = onnx.helper.make_graph(nodes, "minus_one", [value("x", onnx.TensorProto.FLOAT, dims)],
                                   [value("y", onnx.TensorProto.FLOAT, [-1, 8, 1, 1])], [w])
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)]), path)
    return path


def _input_dims(path: Path) -> list[int]:
    [value] = onnx.load(path).graph.input
    return [d.dim_value for d in value.type.tensor_type.shape.dim]


@pytest.mark.parametrize(("flags", "bound"), [(["--input-shape", "x=1,3,48,192"], [1, 3, 48, 192]),
                                              (["--input-shape", "x=2x3x48x192"], [2, 3, 48, 192]),
                                              ([], [1, 3, 48, 192])])
def test_a_dim_of_minus_one_is_symbolic_and_bound(tmp_path, flags, bound):
    """An input declared [-1, 3, 48, 192] quantizes: --input-shape binds the -1 (it used to be
    "tensor 'x' dim 0 is -1; expected a size >= 0 or a symbolic name"); without it the batch is
    1, as a symbolic batch's is. The quantized model's input has the bound dims and runs in
    onnxruntime on an input of that shape."""
    import onnxruntime as ort

    model = _minus_one_model(tmp_path / "m.onnx", [-1, 3, 48, 192])
    result = run("quantize", str(model), *flags, "--random", "2", "--out", str(tmp_path / "q.onnx"))
    assert result.returncode == 0, result.stderr
    assert "read as symbolic" in result.stderr + result.stdout
    assert _input_dims(tmp_path / "q.onnx") == bound
    session = ort.InferenceSession(str(tmp_path / "q.onnx"), providers=["CPUExecutionProvider"])
    [y] = session.run(None, {"x": np.zeros(bound, dtype=np.float32)})
    assert y.shape == (bound[0], 8, 1, 1)


def test_a_dim_of_minus_one_elsewhere_needs_input_shape_and_minus_two_is_refused(tmp_path):
    """-1 on a spatial axis is unknown until --input-shape binds it (the error names the input
    and the axis); any other negative dim is refused, naming the tensor and the dim."""
    model = _minus_one_model(tmp_path / "m.onnx", [1, 3, -1, 192])
    assert_one_line_error(run("inspect", str(model)), "'x'", "axis 2", "--input-shape")
    ok = run("inspect", str(model), "--input-shape", "x=1x3x48x192")
    assert ok.returncode == 0, ok.stderr
    bad = _minus_one_model(tmp_path / "bad.onnx", [-2, 3, 48, 192])
    assert_one_line_error(run("inspect", str(bad), "--input-shape", "x=1x3x48x192"), "'x'", "dim 0 is -2")


# --------------------------------------------------------------------------- integer inputs


def _byte_classifier(path: Path, rows: int = 256, through_cast: bool = False) -> Path:
    """int32 bytes [N, 64] -> Gather from a [rows, 8] table (through a Cast to int64 when
    ``through_cast``) -> mean over the sequence -> MatMul to 4 logits."""
    rng = np.random.default_rng(11)
    table = onnx.numpy_helper.from_array(rng.standard_normal((rows, 8)).astype(np.float32), "table")
    w = onnx.numpy_helper.from_array((rng.standard_normal((8, 4)) * 0.3).astype(np.float32), "w")
    indices = "bytes64" if through_cast else "bytes"
    nodes = [onnx.helper.make_node("Cast", ["bytes"], ["bytes64"], name="cast", to=onnx.TensorProto.INT64)] \
        if through_cast else []
    nodes += [onnx.helper.make_node("Gather", ["table", indices], ["emb"], name="embed"),
              onnx.helper.make_node("ReduceMean", ["emb"], ["pooled"], name="mean", axes=[1], keepdims=0),
              onnx.helper.make_node("MatMul", ["pooled", "w"], ["logits"], name="fc")]
    value = onnx.helper.make_tensor_value_info
    graph = onnx.helper.make_graph(nodes, "bytes", [value("bytes", onnx.TensorProto.INT32, ["N", 64])],
                                   [value("logits", onnx.TensorProto.FLOAT, ["N", 4])], [table, w])
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)]), path)
    return path


@pytest.mark.parametrize(("rows", "through_cast"), [(256, False), (40, True)])
def test_random_calibration_of_an_integer_input_takes_the_gathers_indices(tmp_path, rows, through_cast):
    """An int32 input read by a Gather (directly or through a Cast) gets random indices 0..rows-1:
    every sample runs in onnxruntime (an index past the table is an error there), and the values
    reach the table's last row and its first."""
    import onnxruntime as ort

    from fpgaplace.model.quantize import calibration_inputs

    model = Design(_byte_classifier(tmp_path / "b.onnx", rows, through_cast), "zcu104").loaded.model
    samples = calibration_inputs(model, random_samples=16, seed=1)
    values = np.concatenate([s["bytes"].ravel() for s in samples])
    assert samples[0]["bytes"].dtype == np.int32 and values.min() == 0 and values.max() == rows - 1
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for sample in samples:
        session.run(None, sample)
    ranged = calibration_inputs(model, random_samples=4, input_ranges={"bytes": (3, 5)})
    assert {int(v) for s in ranged for v in s["bytes"].ravel()} == {3, 4, 5}


def test_quantize_and_compile_take_an_integer_input(tmp_path):
    """quantize --random on the byte classifier used to stop ("random calibration makes float
    inputs only"); it now writes the model, and compile --random --input-range builds it."""
    model = _byte_classifier(tmp_path / "b.onnx")
    result = run("quantize", str(model), "--random", "4", "--out", str(tmp_path / "q.onnx"))
    assert result.returncode == 0, result.stderr
    compiled = run("compile", str(model), "--random", "2", "--input-range", "bytes=0,255", "--out",
                   str(tmp_path / "project"), "--json")
    assert compiled.returncode == 0, compiled.stderr
    document = json.loads(compiled.stdout)
    assert document["quantized_here"] is True
    from fpgaplace import hw

    graph = Design(tmp_path / "project" / "model.qdq.onnx", "zcu104").graph
    groups = {op: group for group in document["left_on_cpus"]["groups"] for op in group["ops"]}
    assert sorted(groups) == sorted(document["cpu_ops"])
    for op, group in groups.items():  # an op no core can run says why, as the op library does
        planned = hw.plan_op(graph.ops[op], graph)
        assert bool(planned) or group["reason"] == planned.reason


@pytest.mark.parametrize(("flags", "names"), [
    (["--input-range", "bytes=3"], ["--input-range 'bytes=3'", "NAME=LO,HI"]),
    (["--input-range", "bytes=5,1"], ["--input-range 'bytes=5,1'", "LO <= HI"]),
    (["--input-range", "bytes=0,x"], ["--input-range 'bytes=0,x'"]),
    (["--input-range", "ids=0,3"], ["'ids'", "not a graph input", "'bytes'"]),
    (["--input-range", "bytes=0.5,3"], ["'bytes'", "whole numbers"]),
    (["--input-range", "bytes=0,1", "--input-range", "bytes=0,2"], ["given twice"]),
])
def test_a_bad_input_range_is_one_line(tmp_path, flags, names):
    model = _byte_classifier(tmp_path / "b.onnx")
    result = run("quantize", str(model), "--random", "2", *flags, "--out", str(tmp_path / "q.onnx"))
    assert_one_line_error(result, *names)
    assert not (tmp_path / "q.onnx").exists()


# --------------------------------------------------------------------------- what is left on the CPUs


def test_compile_says_what_is_left_on_the_cpus_and_what_it_costs(concat_qdq, tmp_path):
    """With the branches on core0 and the rest on cpu0: every CPU op of design.json is in exactly
    one group; conv_c and the pool (a core could run them) say the placement kept them, their
    Q/DQ that they follow the op they read, the input's QuantizeLinear that it reads a model
    input; the fps as placed is design.json's, and the cores alone run at the batch over the
    slowest core's interval, set by the device with the largest load."""
    from fpgaplace.flow.compile import FOLLOWS_REASON, INPUT_REASON, PLACED_REASON

    design = Design(concat_qdq, "zcu104", profile_cpu=False)
    _place(design, CUTS["float before its quantizer"])
    left = design.compile(tmp_path / "project").to_json()["left_on_cpus"]
    document = json.loads((tmp_path / "project" / "design.json").read_text())
    grouped = [op for group in left["groups"] for op in group["ops"]]
    assert sorted(grouped) == sorted(document["cpu_ops"]) and left["ops"] == len(grouped)
    assert all(group["count"] == len(group["ops"]) for group in left["groups"])
    reason = {op: group["reason"] for group in left["groups"] for op in group["ops"]}
    assert reason["conv_c"] == reason["pool"] == PLACED_REASON
    assert reason["x_QuantizeLinear"] == INPUT_REASON
    assert reason["conv_c_r_QuantizeLinear"] == reason["pooled_DequantizeLinear"] == FOLLOWS_REASON
    [core] = document["cores"]
    assert left["fps"] == document["fps"]
    assert left["cores_alone_fps"] == pytest.approx(document["model"]["batch"] * 1e6 / core["interval_us"])
    loads = {d["name"]: d["load_us"] for d in document["devices"] if d["ops"] and d["kind"] == "cpu"}
    binding = max([*loads.items(), (core["name"], core["interval_us"])], key=lambda item: item[1])[0]
    assert left["binding"] == binding and left["slowest_core"] == "core0"


def test_the_terminal_shows_the_largest_groups_and_counts_the_rest(capsys):
    """Twenty groups print as the first CPU_GROUPS_SHOWN and one line counting the others."""
    from fpgaplace.cli.output import CPU_GROUPS_SHOWN, print_left_on_cpus

    groups = [{"op_type": f"Op{i}", "count": 40 - i, "reason": "no hardware kernel", "ops": []} for i in range(20)]
    print_left_on_cpus({"ops": sum(g["count"] for g in groups), "groups": groups, "fps": 12.5,
                        "binding": "cpu1", "cores_alone_fps": 2000.0, "slowest_core": "core1"})
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 + CPU_GROUPS_SHOWN + 1 + 1
    assert "Op0" in lines[1] and f"Op{CPU_GROUPS_SHOWN - 1}" in lines[CPU_GROUPS_SHOWN]
    rest = sum(g["count"] for g in groups[CPU_GROUPS_SHOWN:])
    assert f"{rest} more in {20 - CPU_GROUPS_SHOWN} groups" in lines[-2]
    assert "12.5" in lines[-1] and "cpu1" in lines[-1] and "2 k" in lines[-1] and "core1" in lines[-1]


# --------------------------------------------------------------------------- one piece per core


@pytest.fixture(scope="module")
def two_branches_qdq() -> onnx.ModelProto:
    """x -> conv_a -> pool_a (output a); x -> conv_b -> pool_b -> conv_d (output d), int8 QDQ."""
    rng = np.random.default_rng(5)
    nodes: list = []
    inits: list = []
    a = _conv(nodes, inits, rng, "x", "conv_a", 4, 8)
    b = _conv(nodes, inits, rng, "x", "conv_b", 4, 8)
    for name, source in (("pool_a", a), ("pool_b", b)):
        nodes.append(onnx.helper.make_node("MaxPool", [source], [f"{name}_out"], name=name, kernel_shape=[2, 2],
                                           strides=[2, 2]))
    d = _conv(nodes, inits, rng, "pool_b_out", "conv_d", 8, 8)
    value = onnx.helper.make_tensor_value_info
    graph = onnx.helper.make_graph(nodes, "two_branches", [value("x", onnx.TensorProto.FLOAT, [1, 4, 8, 8])],
                                   [value("pool_a_out", onnx.TensorProto.FLOAT, [1, 8, 4, 4]),
                                    value(d, onnx.TensorProto.FLOAT, [1, 8, 4, 4])], inits)
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    return Design(model, "zcu104", profile_cpu=False).quantized(random_samples=2).graph.model


def test_a_convex_core_set_is_one_piece_whatever_runs_beside_it(two_branches_qdq, tmp_path):
    """core0 runs conv_a and conv_d (no path joins them); cpu0 runs both pools: pool_a after
    conv_a, pool_b before conv_d. Every device's set is convex, but the stage rule put the two
    pools in one cpu0 piece, which core0 then both fed and waited for: compile refused ("core0:
    its ops form 2 separate pieces"). Now core0 is one piece, cpu0 two, and the placed model is
    bit-exact against onnxruntime on the whole QDQ model."""
    from fpgaplace.model.passes.fuse import fused_head

    design = Design(two_branches_qdq, "zcu104-dpu", profile_cpu=False)
    where = {"conv_a": "core0", "conv_d": "core0", "pool_a": "cpu0", "pool_b": "cpu0", "conv_b": "cpu1"}
    names, graph = design.device_names(), design.graph
    device = [names.index(where.get(fused_head(graph.ops[n].node) or n, "cpu2")) for n in design.problem.names]
    design.set_placement(Placement(device=np.array(device), method="given"))
    assert design.placement.evaluation.contiguous
    design.compile(tmp_path / "project")
    manifest = json.loads((tmp_path / "project" / "split" / "manifest.json").read_text())
    pieces = [sub["device"] for sub in manifest["submodels"]]
    assert pieces.count("core0") == 1 and pieces.count("cpu0") == 2
    check = run_csim(tmp_path / "project", samples=2)
    assert [c.bit_exact for c in check.cores] == [True]
    assert [o.max_abs_diff_lsb for o in check.outputs] == [0.0, 0.0]


def _crossed_cores(design: Design) -> np.ndarray:
    """conv_a and conv_d on core0, the two pools on core1, the rest on cpu0: each core's set is
    convex, but core0 feeds core1 (conv_a -> pool_a) and core1 feeds core0 (pool_b -> conv_d), so
    no order runs either core as one piece."""
    from fpgaplace.model.passes.fuse import fused_head

    where = {"conv_a": "core0", "conv_d": "core0", "pool_a": "core1", "pool_b": "core1"}
    names, graph = design.device_names(), design.graph
    return np.array([names.index(where.get(fused_head(graph.ops[n].node) or n, "cpu0")) for n in design.problem.names])


def test_compile_places_again_when_its_own_placement_parts_a_core(two_branches_qdq, tmp_path):
    """A solved placement (as the integer program may give past the DP's state space) with both
    cores convex but crossed: compile places it again with the DP instead of refusing it, and
    every core of the project is one piece of the split."""
    design = Design(two_branches_qdq, "zcu104-dpu", profile_cpu=False)
    design.place(time_limit=5)
    crossed = Placement(device=_crossed_cores(design), method="ip")
    design.set_placement(crossed, design._place_args)
    assert design.placement.evaluation.contiguous and max(design.core_pieces().values()) == 2
    design.compile(tmp_path / "project")
    assert set(design.core_pieces().values()) <= {1}
    manifest = json.loads((tmp_path / "project" / "split" / "manifest.json").read_text())
    pieces = [sub["device"] for sub in manifest["submodels"]]
    assert all(pieces.count(core) == 1 for core in pieces if core.startswith("core"))


def test_a_given_placement_that_parts_a_core_is_refused_before_anything_is_written(two_branches_qdq, tmp_path):
    """The same crossed placement given by the user (nothing to solve again) is one error
    naming the core, and no project folder is left behind."""
    from fpgaplace.util.errors import FpgaplaceError

    design = Design(two_branches_qdq, "zcu104-dpu", profile_cpu=False)
    design.set_placement(Placement(device=_crossed_cores(design), method="given"))
    with pytest.raises(FpgaplaceError, match=r"^core1: its ops form 2 separate pieces") as caught:
        design.compile(tmp_path / "project")
    assert "\n" not in str(caught.value) and not (tmp_path / "project").exists()


# --------------------------------------------------------------------------- models as the light zoo writes them


def _light_style(path: Path) -> Path:
    """IR 3, opset 9, as the onnx package's light models: the conv weight computed by a
    ConstantOfShape (its shape an initializer listed as a graph input, as IR 3 requires), and a
    Dropout whose float mask nothing reads."""
    shape = onnx.numpy_helper.from_array(np.array([8, 3, 3, 3], dtype=np.int64), "w_shape")
    nodes = [onnx.helper.make_node("ConstantOfShape", ["w_shape"], ["w"], name="weight",
                                   value=onnx.helper.make_tensor("v", onnx.TensorProto.FLOAT, [1], [0.05])),
             onnx.helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1] * 4),
             onnx.helper.make_node("Relu", ["c"], ["r"], name="relu"),
             onnx.helper.make_node("Dropout", ["r"], ["y", "mask"], name="dropout", ratio=0.5)]
    value = onnx.helper.make_tensor_value_info
    graph = onnx.helper.make_graph(nodes, "light_style", [value("x", onnx.TensorProto.FLOAT, [1, 3, 8, 8]),
                                                          value("w_shape", onnx.TensorProto.INT64, [4])],
                                   [value("y", onnx.TensorProto.FLOAT, [1, 8, 8, 8])], [shape])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 9)])
    model.ir_version = 3
    onnx.save(model, path)
    return path


def test_a_light_zoo_style_model_quantizes_with_its_computed_weight_as_a_weight(tmp_path):
    """The ConstantOfShape weight becomes an int8 weight a core's conv reads (it was quantized as
    an activation, so the conv stayed on a CPU: "weight ... is not a DequantizeLinear of int8"),
    and the unread float mask of the Dropout no longer stops onnxruntime's calibration."""
    from fpgaplace import hw

    model = _light_style(tmp_path / "light.onnx")
    result = run("quantize", str(model), "--random", "2", "--out", str(tmp_path / "q.onnx"))
    assert result.returncode == 0, result.stderr
    graph = Design(tmp_path / "q.onnx", "zcu104").graph
    assert hw.plan_op(graph.ops["conv"], graph), hw.plan_op(graph.ops["conv"], graph).reason
    weights = [list(t.dims) for t in graph.model.graph.initializer if t.data_type == onnx.TensorProto.INT8]
    assert [8, 3, 3, 3] in weights
