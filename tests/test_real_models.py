"""Real model structures (tests/real_models.py: a YOLO-style detector and a BERT encoder with dynamic
axes, an OCR recognizer with attention over a reshaped feature map, a CRNN with an LSTM, a model
whose body sits in an If, a QDQ CNN, a QONNX CNN, a YOLOX-style detector, a DB text detector and a
MobileNetV3-small classifier): MACs within 1 % of an independent count (onnx-tool, qonnx's
inference_cost), every shape equal to an onnxruntime run's, the structures the exporters write,
and inspect, cost, place and split through the CLI with exit 0 and the right shapes. Small sizes;
full sizes (YOLO at 320 x 320, BERT-base, YOLOX-s at 416, DB at 640, MobileNetV3-small at 224) are
marked slow and checked against published MAC counts where there is one."""

from __future__ import annotations

import json
import math

import numpy as np
import onnx
import pytest
import real_models

from fpgaplace.model.frontend.build import dot_product_macs
from fpgaplace.model.frontend.load import from_model

NAMES = sorted(real_models.REAL_MODELS)


@pytest.fixture(scope="module", params=NAMES)
def built(request) -> tuple[str, onnx.ModelProto, dict[str, tuple[int, ...]]]:
    model, shapes = real_models.build(request.param)
    return request.param, model, shapes


def test_macs_are_within_one_percent_of_an_independent_count(built):
    name, model, shapes = built
    graph = from_model(model, input_shapes=shapes or None, source=f"{name}.onnx")
    theirs, tool = real_models.independent_macs(model, shapes)
    assert theirs > 0 and tool in ("onnx-tool", "qonnx inference_cost")
    assert abs(dot_product_macs(graph) - theirs) <= 0.01 * theirs, (name, dot_product_macs(graph), theirs)


def test_every_tensor_shape_equals_an_onnxruntime_run(built):
    name, model, shapes = built
    graph = from_model(model, input_shapes=shapes or None, source=f"{name}.onnx")
    run = real_models.onnxruntime_shapes(model, shapes)
    produced = [t for op in graph.ops.values() for t in op.outputs if t in run]
    assert len(produced) >= len(graph.ops)  # every op's outputs are top-level tensors of the run
    wrong = {t: (graph.tensors[t].shape, run[t]) for t in produced if graph.tensors[t].shape != tuple(run[t])}
    assert not wrong


def test_inspect_cost_place_and_split_run_with_the_right_shapes(built, tmp_path):
    name, model, shapes = built
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, path)
    cpu_cost = "profile" if name == "qonnx" else "analytic"  # QONNX quantizers run in onnxruntime's profiler
    runs = {run.command: run for run in real_models.run_commands(path, shapes, tmp_path, cpu_cost)}
    assert {command: run.exit_code for command, run in runs.items()} == dict.fromkeys(real_models.COMMANDS, 0), \
        {command: run.stderr[-500:] for command, run in runs.items() if run.exit_code}
    inspected = runs["inspect"].document
    if shapes:  # the QDQ CNN has fixed input shapes
        assert {k: tuple(v) for k, v in inspected["inputs"].items()} == shapes
    compared, wrong = real_models.shape_mismatches(model, shapes, inspected)
    assert compared >= len(inspected["ops"]) // 2 and not wrong
    assert len(runs["cost"].document["ops"]) == len(inspected["ops"])
    placed = runs["place"].document
    assert placed["feasible"] and math.isfinite(placed["maxLoad"]) and placed["maxLoad"] > 0
    split = runs["split"].document
    assert split["max_relative_error"] <= 1e-4
    manifest = json.loads((tmp_path / "split" / "manifest.json").read_text())
    run = real_models.onnxruntime_shapes(model, shapes)
    assert {o["name"]: tuple(o["shape"]) for o in manifest["graph_outputs"]} == \
        {o.name: tuple(run[o.name]) for o in model.graph.output}


def test_qonnx_bit_widths_and_weight_bits_match_qonnx_inference_cost():
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.util.inference_cost import inference_cost

    model, shapes = real_models.build("qonnx")
    graph = from_model(model, input_shapes=shapes, source="qonnx.onnx")
    widths = {node.output[0]: int(np.asarray(onnx.numpy_helper.to_array(
        next(t for t in model.graph.initializer if t.name == node.input[3]))))
        for node in model.graph.node if node.op_type == "Quant"}
    widths |= {node.output[0]: 1 for node in model.graph.node if node.op_type == "BipolarQuant"}
    widths |= {node.output[0]: 8 for node in model.graph.node if node.op_type == "Trunc"}
    assert {t: graph.tensors[t].quant_bits for t in widths} == widths
    assert sorted(set(widths.values())) == [1, 2, 4, 8]
    cost = inference_cost(ModelWrapper(onnx.ModelProto.FromString(model.SerializeToString())),
                          discount_sparsity=False)["total_cost"]
    weight_bits = sum(op.param_bytes for op in graph.ops.values() if op.op_type in ("Conv", "MatMul")) * 8
    assert cost["total_mem_w_bits"] <= weight_bits < cost["total_mem_w_bits"] + 8 * 4  # whole bytes per tensor


FULL_SIZE_MIN_MACS = {"yolo": 5e8, "bert": 1e10, "yolox": 5e9, "dbnet": 5e9, "mobilenetv3": 5e7}
"""A floor for each full-size model: YOLO at 320 px, BERT-base at 128 tokens, ..."""

PUBLISHED_MACS = {
    "yolox": 26.8e9 / 2 * (416 / 640) ** 2,  # YOLOX-s: 26.8 GFLOPs (2 per MAC) at 640 x 640 (Ge et al. 2021)
    "mobilenetv3": 56e6,  # MobileNetV3-small 1.0 at 224 x 224: 56 M MAdds (Howard et al. 2019, table 3)
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FULL_SIZE_MIN_MACS))
def test_full_size_macs_are_within_one_percent_of_an_independent_count(name):
    model, shapes = real_models.build(name, full=True)
    graph = from_model(model, input_shapes=shapes or None, source=f"{name}.onnx")
    theirs, _ = real_models.independent_macs(model, shapes)
    assert abs(dot_product_macs(graph) - theirs) <= 0.01 * theirs
    assert dot_product_macs(graph) > FULL_SIZE_MIN_MACS[name]
    if name in PUBLISHED_MACS:
        assert abs(dot_product_macs(graph) / PUBLISHED_MACS[name] - 1) <= 0.03


def _run_values(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]]) -> tuple[dict, dict]:
    """Every node by its first output, and the shape of every tensor in one onnxruntime run."""
    return {node.output[0]: node for node in model.graph.node}, real_models.onnxruntime_shapes(model, shapes)


def test_yolox_focus_stem_is_four_stride_two_slices_concatenated_on_channels():
    model, shapes = real_models.build("yolox")
    nodes, run = _run_values(model, shapes)
    slices = [node for node in model.graph.node if node.op_type == "Slice"]
    steps = {init.name: onnx.numpy_helper.to_array(init).tolist() for init in model.graph.initializer}
    assert len(slices) == 4 and all(steps[node.input[4]] == [2, 2] for node in slices)
    concat = next(node for node in model.graph.node
                  if node.op_type == "Concat" and node.input[0] == slices[0].output[0])
    assert [nodes[t] for t in concat.input] == slices
    assert run[concat.output[0]] == (1, 12, 32, 32)  # 3 channels x 4 patches at half the 64 x 64 input
    assert {node.op_type for node in model.graph.node} >= {"Resize", "MaxPool", "Sigmoid", "Mul", "Transpose"}


def test_dbnet_has_squeeze_excite_gates_hardswish_formula_and_transposed_upsampling():
    model, shapes = real_models.build("dbnet")
    nodes, run = _run_values(model, shapes)
    gates = [node for node in model.graph.node if node.op_type == "Mul" and node.input[1] in nodes
             and nodes[node.input[1]].op_type == "HardSigmoid"]
    assert gates
    for gate in gates:  # the [N, C, 1, 1] gate broadcast over the [N, C, H, W] plane
        plane, scale = run[gate.input[0]], run[gate.input[1]]
        assert scale == (*plane[:2], 1, 1) and plane[2] * plane[3] > 1
    clips = [node for node in model.graph.node if node.op_type == "Clip"]
    assert clips and all(nodes[node.input[0]].op_type == "Add" for node in clips)
    ups = [node for node in model.graph.node if node.op_type == "ConvTranspose"]
    assert len(ups) == 2 and run["maps"] == (1, 1, 64, 64) == run["x"][:1] + (1,) + run["x"][2:]
    assert {node.op_type for node in model.graph.node} >= {"Resize", "Concat", "GlobalAveragePool", "Div",
                                                            "Sigmoid"}


def test_mobilenetv3_declares_a_symbolic_batch_and_ends_in_flatten_and_gemm():
    model, _ = real_models.build("mobilenetv3")
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "batch" and not dims[0].HasField("dim_value")
    order = [node.op_type for node in model.graph.node]
    assert order[-5:] == ["GlobalAveragePool", "Flatten", "Gemm", "HardSwish", "Gemm"]
    assert "HardSigmoid" in order


def test_a_qonnx_cnn_stays_on_the_fpga_cores():
    """QONNX quantizers are requantization stages a core runs, so no op is left to a CPU."""
    model, shapes = real_models.build("qonnx")
    graph = from_model(model, input_shapes=shapes, source="qonnx.onnx")
    quantizers = [op for op in graph.ops.values() if op.op_type in ("Quant", "BipolarQuant", "Trunc")]
    assert len(quantizers) >= 5 and all(op.fpga_supported for op in graph.ops.values())
    from fpgaplace import Design

    design = Design(model, "zcu104", input_shapes=shapes, profile_cpu=False)
    placement = design.place().placement
    names = design.device_names()
    assert {names[device].rstrip("0123456789") for device in placement.device} == {"core"}
