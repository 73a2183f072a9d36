"""Real model structures (tests/real_models.py: a YOLO-style detector and a BERT encoder with dynamic
axes, an OCR recognizer with attention over a reshaped feature map, a CRNN with an LSTM, a model
whose body sits in an If, a QDQ CNN and a QONNX CNN): MACs within 1 % of an independent count
(onnx-tool, qonnx's inference_cost), every shape equal to an onnxruntime run's, and inspect, cost,
place and split through the CLI with exit 0 and the right shapes. Small sizes; full sizes (YOLO at
320 x 320, BERT-base) are marked slow."""

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


@pytest.mark.slow
@pytest.mark.parametrize("name", ["yolo", "bert"])
def test_full_size_macs_are_within_one_percent_of_an_independent_count(name):
    model, shapes = real_models.build(name, full=True)
    graph = from_model(model, input_shapes=shapes, source=f"{name}.onnx")
    theirs, _ = real_models.independent_macs(model, shapes)
    assert abs(dot_product_macs(graph) - theirs) <= 0.01 * theirs
    assert dot_product_macs(graph) > (5e8 if name == "yolo" else 1e10)  # YOLO at 320 px, BERT-base at 128 tokens


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
