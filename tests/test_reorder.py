"""A detector head's data movement: the Reshape [N, C, H, W] -> [N, C, H*W] that turns the HWC
stream into CHW order (a reorder buffer, found by its effect in stream order), and the
Concat(axis=2) of the heads of several scales (the channel concat's stream pattern), run on a
core bit-exact in C simulation and RTL simulation and within 1 LSB of onnxruntime's QDQ model."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_rtl_ops import assert_verilog_2005_clean, check_cycles, render_op, simulate_case

from fpgaplace.board.load import load_board
from fpgaplace.codegen import rtl
from fpgaplace.flow.design import Design
from fpgaplace.hw import KERNELS, plan_op
from fpgaplace.hw.geometry import Folding
from fpgaplace.hw.islands import islands
from fpgaplace.model.frontend.load import from_model
from fpgaplace.model.quantize import calibration_inputs, quantize_model
from fpgaplace.sim import yosys
from fpgaplace.sim.csim import run_csim
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.onnxrt import run_model

C, H, W = 12, 6, 8


def _ints(name: str, values) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, dtype=np.int64), name)


def detector_head(seed: int = 0, kind: str = "reshape") -> onnx.ModelProto:
    """Two scales of a head: Conv (stride 1 and 2) -> Reshape [1, C, -1] each -> Concat(axis=2).
    With ``kind`` "transposes" the second scale's reshape is written as Transpose to [1, H, W, C]
    -> Reshape [1, H*W, C] -> Transpose(0, 2, 1): the same effect through other ops."""
    rng = np.random.default_rng(seed)
    n = helper.make_node
    nodes = [n("Conv", ["x", "w1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("Conv", ["x", "w2"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
             n("Reshape", ["c1", "s1"], ["r1"])]
    if kind == "reshape":
        nodes.append(n("Reshape", ["c2", "s2"], ["r2"]))
    else:
        nodes += [n("Transpose", ["c2"], ["t1"], perm=[0, 2, 3, 1]), n("Reshape", ["t1", "s3"], ["t2"]),
                  n("Transpose", ["t2"], ["r2"], perm=[0, 2, 1])]
    nodes.append(n("Concat", ["r1", "r2"], ["z"], axis=2))
    for i, node in enumerate(nodes):
        node.name = f"{node.op_type.lower()}_{i}"
    weights = [numpy_helper.from_array(rng.normal(0, 0.4, (C, 4, 3, 3)).astype(np.float32), name)
               for name in ("w1", "w2")]
    anchors = H * W + (H // 2) * (W // 2)
    graph = helper.make_graph(nodes, kind, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, H, W])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, C, anchors])],
                              weights + [_ints("s1", [1, C, -1]), _ints("s2", [0, C, -1]),
                                         _ints("s3", [1, -1, C])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def quantized(model: onnx.ModelProto) -> onnx.ModelProto:
    return quantize_model(model, calibration_inputs(model, random_samples=8))


@pytest.mark.parametrize("kind", ["reshape", "transposes"])
def test_a_head_reshape_is_a_reorder_with_the_transpose_onnxruntime_gives(kind):
    model = quantized(detector_head(kind=kind))
    graph = from_model(model)
    chains = [i for i in islands(model, graph.tensors).islands if i.kernel == "reorder"]
    assert len(chains) == 2
    x = np.random.default_rng(3).normal(0, 1, (1, 4, H, W)).astype(np.float32)
    for chain in chains:
        values = run_model(model, {"x": x}, [chain.source, chain.output])
        source, output = values[chain.source], values[chain.output]
        # in stream order the source is HWC ([H*W, C]); onnxruntime's output, natural order, is its transpose
        hwc = source.transpose(0, 2, 3, 1).reshape(-1, source.shape[1])
        assert chain.transpose == (*hwc.shape, 1)  # blocks of one element
        np.testing.assert_array_equal(hwc.T.reshape(-1), output.reshape(-1))
        assert plan_op(graph.ops[chain.exit_op], graph)[0].name == "reorder"
    concat = next(op for op in graph.ops.values() if op.op_type == "Concat")
    kernel, g = plan_op(concat, graph)
    assert kernel.name == "concat" and g.shape["CHANNELS"] == [H * W, H * W // 4] and g.pixels == C


def test_a_concat_along_the_last_axis_is_runs_of_each_input_per_row():
    """[N, C, A_i] along axis 2: C rows of A_0 then A_1 elements; along axis 1 of rank 3: one row."""
    from test_hw import planned, single_op, unsupported

    op, graph = single_op("Concat", {"a": (1, 5, 7), "b": (1, 5, 14)}, axis=2)
    kernel, g = planned(op, graph)
    assert kernel is KERNELS["concat"] and (g.pixels, g.channels, g.shape["CHANNELS"]) == (5, 7, [7, 14])
    op, graph = single_op("Concat", {"a": (1, 2, 6), "b": (1, 3, 6)}, axis=-2)
    assert planned(op, graph)[1].shape["CHANNELS"] == [12, 18] and planned(op, graph)[1].pixels == 1
    op, graph = single_op("Concat", {"a": (2, 3, 4), "b": (2, 3, 4)}, axis=0)
    assert "batch" in unsupported(op, graph)


@pytest.mark.parametrize("kind", ["reshape", "transposes"])
def test_a_detector_head_runs_on_the_cores_bit_exact(kind, tmp_path):
    result = Design(detector_head(seed=len(kind), kind=kind), "zcu104", profile_cpu=False).compile(
        tmp_path / "project", random_samples=8)
    kernels = [layer["kernel"] for core in result.design["cores"] for layer in core["layers"]]
    assert kernels.count("reorder") == 2 and "concat" in kernels and result.cpu_ops == [], (kernels, result.cpu_ops)
    check = run_csim(tmp_path / "project", samples=4)
    assert check.ok and all(c.bit_exact for c in check.cores)
    assert all(o.max_abs_diff_lsb is not None and o.max_abs_diff_lsb <= 1 for o in check.outputs)


def test_the_reorder_buffer_is_charged_to_the_core():
    """Two whole samples are buffered (one in, one out): their bytes are the op's fixed on-chip
    bytes (whole BRAM36 blocks) and its banks take BRAM; a sample a SIZE / L cycles."""
    kernel = KERNELS["reorder"]
    g = kernel.transpose_geometry(1, 96, 144)
    assert kernel.fixed_bytes(g) >= 2 * 96 * 144
    fold = Folding(4, 1, 1)
    assert kernel.cycles(g, fold) == 96 * 144 // 4
    assert kernel.resources(g, fold).bram36 >= 8  # one bank a lane, each 6912 bytes deep: two BRAM36 of 4096 x 9
    assert fold in kernel.foldings(g) and Folding(5, 1, 1) not in kernel.foldings(g)


@pytest.mark.parametrize(("rows", "columns", "folding", "rescale"), [
    (24, 12, Folding(4, 1, 1), False), (20, 6, Folding(2, 1, 1), True), (9, 7, Folding(1, 1, 1), True)])
def test_reorder_rtl_bit_exact_and_cycles(tmp_path, rows, columns, folding, rescale):
    rng = np.random.default_rng(rows * columns)
    m, s = (1 << 30, 30) if not rescale else (int(rng.integers(1 << 29, 1 << 30)), 30)
    config = {"SIZE": rows * columns, "XR": rows, "XC": columns, "ZX": int(rng.integers(-20, 20)), "M": m,
              "S": s, "ZY": int(rng.integers(-20, 20)), "LO": -128, "HI": 127}
    inputs = [rng.integers(-128, 128, (3, rows * columns), dtype=np.int8)]
    geometry = KERNELS["reorder"].transpose_geometry(1, rows, columns)
    result = simulate_case("reorder", (config, {}, inputs, folding), tmp_path, geometry=geometry)
    check_cycles(result, f"reorder {rows}x{columns} {folding}")
    (tmp_path / "lint").mkdir()
    assert_verilog_2005_clean(render_op("reorder", config, {}, folding, 100), tmp_path / "lint")


def test_a_bad_reorder_layer_is_a_one_line_error():
    config = {"SIZE": 24, "XR": 6, "XC": 4, "ZX": 0, "M": 1 << 30, "S": 30, "ZY": 0, "LO": -128, "HI": 127}
    with pytest.raises(FpgaplaceError, match="PE=3 divide XR=6 and XC=4"):
        render_op("reorder", config, {}, Folding(3, 1, 1), 100)


def test_a_transpose_of_rows_and_columns_of_a_feature_map_is_still_refused():
    """An order the reorder does not generate (H and W swapped in a 4-D tensor) is refused with its reason."""
    n = helper.make_node
    nodes = [n("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
             n("Transpose", ["c"], ["y"], name="swap", perm=[0, 1, 3, 2])]
    w = numpy_helper.from_array(np.random.default_rng(1).normal(0, 0.4, (C, 4, 1, 1)).astype(np.float32), "w")
    graph = helper.make_graph(nodes, "swap", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, H, W])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, C, W, H])], [w])
    model = quantized(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    graph = from_model(model)
    assert not plan_op(graph.ops["swap"], graph)


def test_a_core_with_a_detector_head_is_bit_exact_in_rtl(tmp_path):
    """The whole core (two convs, two reorders, the last-axis concat) in cocotb under backpressure:
    bit-exact, and its steady cycles within 10% of the cycle model's interval."""
    from fpgaplace.sim.rtl_project import simulate_project_rtl

    result = Design(detector_head(seed=5), "pynq-z2", profile_cpu=False).compile(tmp_path / "project",
                                                                                 random_samples=4)
    assert {"reorder", "concat"} <= {layer["kernel"] for core in result.design["cores"] for layer in core["layers"]}
    rtl = simulate_project_rtl(tmp_path / "project", samples=2)
    assert rtl.ok and rtl.cores
    for core in rtl.cores:
        assert core.bit_exact and abs(core.cycles_measured - core.cycles_model) <= 0.1 * core.cycles_model, core


@pytest.mark.slow
@pytest.mark.parametrize(("board", "family"), [("pynq-z2", "xc7"), ("zcu104", "xcup")])
def test_yosys_maps_the_reorder_buffer_to_the_estimated_brams(tmp_path, board, family):
    """A YOLO head's reorder (96 pixels of 144 channels, 4 lanes): yosys maps each bank (two
    samples, 6912 bytes) to two BRAM36 and no DSP, as the op library counts them."""
    core = load_board(board).cores[0]
    config = {"SIZE": 96 * 144, "XR": 96, "XC": 144, "ZX": 3, "M": 3 << 28, "S": 30, "ZY": -2, "LO": -128, "HI": 127}
    folding = Folding(4, 1, 1)
    op = rtl.render_op("reorder", config, {}, folding, 100, macs_per_dsp=core.macs_per_dsp)
    got = yosys.synthesize(rtl.RtlModule(op.module.top, {**rtl.library(), **op.module.files}), tmp_path, family)
    estimate = KERNELS["reorder"].resources(KERNELS["reorder"].transpose_geometry(1, 96, 144), folding, core)
    assert (got.dsp, got.bram36) == (estimate.dsp, estimate.bram36) == (0, 8)


def test_the_yolo_heads_reshapes_and_concat_plan_on_the_cores():
    """tests/real_models' YOLOv8-style detector, quantized: both heads' Reshape [N, 144, H, W] ->
    [N, 144, H*W] are reorders and their Concat(axis=2) is a concat; no op but the Split and
    Resize kernels other modules add is refused."""
    from real_models import build

    model, shapes = build("yolo")
    graph = Design(model, "zcu104", input_shapes=shapes, profile_cpu=False).quantized(random_samples=2).graph
    planned = {op.name: plan_op(op, graph) for op in graph.ops.values()}
    head = {kind: [name for name, op in graph.ops.items() if op.op_type == kind
                   and len(graph.tensors[op.outputs[0]].shape) == 3] for kind in ("Reshape", "Concat")}
    assert len(head["Reshape"]) == 2 and all(planned[name][0].name == "reorder" for name in head["Reshape"])
    assert len(head["Concat"]) == 1 and planned[head["Concat"][0]][0].name == "concat"
    refused = {graph.ops[name].op_type for name, p in planned.items() if not p}
    assert refused <= {"Split", "Resize"}, refused


def test_the_yolo_head_compiles_onto_a_core_bit_exact(tmp_path):
    """The quantized YOLO on zcu104 (its Split and Resize ops on the CPU): both head reorders and the
    Concat(axis=2) are layers of a core, C simulation is bit-exact and the detections within 1 LSB
    of onnxruntime's QDQ model."""
    from real_models import build

    model, shapes = build("yolo")
    design = Design(model, "zcu104", input_shapes=shapes, profile_cpu=False).quantized(random_samples=4)
    result = design.compile(tmp_path / "project", random_samples=4)
    graph = design.graph
    head = {name: "reorder" if op.op_type == "Reshape" else "concat" for name, op in graph.ops.items()
            if op.op_type in ("Reshape", "Concat") and len(graph.tensors[op.outputs[0]].shape) == 3}
    layers = {layer["op"]: layer["kernel"] for core in result.design["cores"] for layer in core["layers"]}
    assert len(head) == 3 and all(layers.get(name) == kernel for name, kernel in head.items()), (head, layers)
    check = run_csim(tmp_path / "project", samples=2)
    assert check.ok and all(c.bit_exact for c in check.cores)
    assert all(o.max_abs_diff_lsb is not None and o.max_abs_diff_lsb <= 1 for o in check.outputs)


def test_a_row_by_row_transpose_is_refused_with_its_reason():
    """Transpose(0, 2, 1, 3) -> Reshape [1, H, C*W] transposes each row's [W, C] block: no single
    2-D transpose of the sample, which the reorder does not generate; the reason says what runs."""
    n = helper.make_node
    nodes = [n("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
             n("Transpose", ["c"], ["t"], name="rows", perm=[0, 2, 1, 3]),
             n("Reshape", ["t", "s"], ["y"], name="flat_rows")]
    w = numpy_helper.from_array(np.random.default_rng(1).normal(0, 0.4, (C, 4, 1, 1)).astype(np.float32), "w")
    graph = helper.make_graph(nodes, "rows", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, H, W])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, H, C * W])],
                              [w, _ints("s", [1, H, C * W])])
    model = quantized(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    graph = from_model(model)
    assert not any(i.kernel == "reorder" for i in islands(model, graph.tensors).islands)
    assert "transpose of each sample's stream" in plan_op(graph.ops["flat_rows"], graph).reason
