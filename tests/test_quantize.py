"""Static int8 QDQ quantization (onnxruntime), QDQ checks, drift, calibration inputs, files."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from fpgaplace.model import zoo as models
from fpgaplace.model.passes.graph_tools import copy_model, node_metadata, producers
from fpgaplace.model.qdq import QDQ_OPS, is_qdq
from fpgaplace.model.quantize import (
    ABSORBED_KEY,
    MAX_RANDOM_SAMPLES,
    SETTINGS_KEY,
    Drift,
    absorbed_nodes,
    calibration_inputs,
    check_qdq,
    measure_drift,
    quantize_file,
    quantize_model,
)
from fpgaplace.util.errors import FpgaplaceError

CALIBRATION_SAMPLES = 32
# Drift bounds on 32 held-out random samples. Each int8 requantization adds at most half a step,
# range/510 (~0.2% of a tensor's range), and per-channel int8 weights about as much; cnn_residual
# chains ~9 such steps (mlp ~4), so worst-case errors of a few percent of the output's range are
# expected. Measured with onnxruntime 1.23: cnn_residual 1.8%, mlp 1.5% (top-1 1.0 and 0.97).
# The bound leaves ~2.5x margin; a wrong scale, zero point or per-channel axis gives > 20%.
MAX_RELATIVE_DRIFT = 0.05
MIN_TOP1_AGREEMENT = 0.9


def qdq_free_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.op_type not in QDQ_OPS]


def initializers(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def weight_dequantizer(model: onnx.ModelProto, node: onnx.NodeProto, position: int) -> onnx.NodeProto:
    producer = producers(model.graph)[node.input[position]]
    assert producer.op_type == "DequantizeLinear", f"{node.name} input {position} is not dequantized"
    return producer


def attr(node: onnx.NodeProto, name: str, default=None):
    found = [helper.get_attribute_value(a) for a in node.attribute if a.name == name]
    return found[0] if found else default


def folded_conv_weights(float_model: onnx.ModelProto, conv: onnx.NodeProto) -> tuple[np.ndarray, np.ndarray]:
    """Weights and bias of a float Conv with its following BatchNormalization folded in (numpy)."""
    values = initializers(float_model)
    weight = values[conv.input[1]].astype(np.float64)
    bias = values[conv.input[2]].astype(np.float64) if len(conv.input) > 2 else np.zeros(weight.shape[0])
    readers = [n for n in float_model.graph.node if conv.output[0] in n.input]
    if len(readers) == 1 and readers[0].op_type == "BatchNormalization":
        bn = readers[0]
        gamma, beta, mean, var = (values[name].astype(np.float64) for name in bn.input[1:5])
        factor = gamma / np.sqrt(var + attr(bn, "epsilon", 1e-5))
        weight = weight * factor[:, None, None, None]
        bias = (bias - mean) * factor + beta
    return weight, bias


@pytest.fixture(scope="module")
def cnn() -> onnx.ModelProto:
    return models.cnn_residual(batch=1)


@pytest.fixture(scope="module")
def mlp() -> onnx.ModelProto:
    return models.mlp(batch=1, sizes=(16, 64, 32, 5))


@pytest.fixture(scope="module")
def cnn_qdq(cnn: onnx.ModelProto) -> onnx.ModelProto:
    return quantize_model(cnn, calibration_inputs(cnn, random_samples=CALIBRATION_SAMPLES, seed=0))


@pytest.fixture(scope="module")
def mlp_qdq(mlp: onnx.ModelProto) -> onnx.ModelProto:
    return quantize_model(mlp, calibration_inputs(mlp, random_samples=CALIBRATION_SAMPLES, seed=0))


# ----------------------------------------------------------------------------- quantize_model


@pytest.mark.parametrize("name", ["cnn", "mlp"])
def test_quantized_model_runs_with_small_drift(name: str, request: pytest.FixtureRequest) -> None:
    float_model = request.getfixturevalue(name)
    qdq = request.getfixturevalue(f"{name}_qdq")
    held_out = calibration_inputs(float_model, random_samples=32, seed=1)
    drift = measure_drift(float_model, qdq, held_out)
    assert drift.samples == 32
    [output] = drift.outputs
    assert output.name == float_model.graph.output[0].name
    assert 0 < output.max_relative_error < MAX_RELATIVE_DRIFT
    assert output.max_abs_error > 0
    assert output.top1_agreement is not None and output.top1_agreement >= MIN_TOP1_AGREEMENT


@pytest.mark.parametrize("name", ["cnn", "mlp"])
def test_quantized_model_is_valid_qdq(name: str, request: pytest.FixtureRequest) -> None:
    qdq = request.getfixturevalue(f"{name}_qdq")
    assert is_qdq(qdq)
    check_qdq(qdq)
    onnx.checker.check_model(qdq)
    assert [o.domain for o in qdq.opset_import] == [""]
    settings = json.loads({e.key: e.value for e in qdq.metadata_props}[SETTINGS_KEY])
    assert settings["samples"] == CALIBRATION_SAMPLES and "per-channel" in settings["weights"]
    assert not is_qdq(request.getfixturevalue(name))


def test_cnn_node_names_kept_and_folded_nodes_recorded(cnn: onnx.ModelProto, cnn_qdq: onnx.ModelProto) -> None:
    original = {n.name: n for n in cnn.graph.node}
    kept = {n.name for n in qdq_free_nodes(cnn_qdq)}
    assert kept <= set(original)
    gone = set(original) - kept
    assert {original[name].op_type for name in gone} == {"BatchNormalization", "Relu"}
    assert {original[name].op_type for name in kept} == {"Conv", "MaxPool", "Add", "GlobalAveragePool", "Flatten",
                                                         "Gemm"}
    absorbed = absorbed_nodes(cnn_qdq)
    assert sorted(name for names in absorbed.values() for name in names) == sorted(gone)
    prods = producers(cnn.graph)
    for head, names in absorbed.items():
        first = original[names[0]]
        assert prods[first.input[0]].name == head  # each chain starts right after its head
        # the head now writes the last absorbed node's output tensor
        assert {n.name: n for n in cnn_qdq.graph.node}[head].output[0] == original[names[-1]].output[0]


def test_relu_disappears_into_a_minus_128_zero_point(cnn: onnx.ModelProto, cnn_qdq: onnx.ModelProto) -> None:
    """Conv+BN+Relu is Conv -> QuantizeLinear -> DequantizeLinear, with the Relu in the int8 clamp."""
    values = initializers(cnn_qdq)
    readers = {t: [n for n in cnn_qdq.graph.node if t in n.input] for n in cnn_qdq.graph.node for t in n.output}
    relu_outputs = {n.output[0] for n in cnn.graph.node if n.op_type == "Relu"}
    checked = 0
    for node in qdq_free_nodes(cnn_qdq):
        if node.output[0] not in relu_outputs:
            continue
        [quantize] = readers[node.output[0]]
        assert quantize.op_type == "QuantizeLinear"
        assert values[quantize.input[2]].item() == -128
        assert [n.op_type for n in readers[quantize.output[0]]] == ["DequantizeLinear"]
        checked += 1
    assert checked == sum(n.op_type == "Relu" for n in cnn.graph.node)
    assert not any(n.op_type in ("Relu", "BatchNormalization") for n in cnn_qdq.graph.node)


def test_maxpool_and_flatten_share_input_qparams(cnn_qdq: onnx.ModelProto) -> None:
    readers = {t: [n for n in cnn_qdq.graph.node if t in n.input] for n in cnn_qdq.graph.node for t in n.output}
    prods = producers(cnn_qdq.graph)
    for node in qdq_free_nodes(cnn_qdq):
        dequantize = prods.get(node.input[0])
        if node.op_type not in ("MaxPool", "Flatten", "GlobalAveragePool", "Add") or dequantize is None:
            continue
        [quantize] = readers[node.output[0]]
        shared = list(quantize.input[1:3]) == list(dequantize.input[1:3])
        assert shared == (node.op_type in ("MaxPool", "Flatten")), node.name


def test_conv_and_gemm_weights_are_int8_per_channel_symmetric(cnn: onnx.ModelProto,
                                                                cnn_qdq: onnx.ModelProto) -> None:
    values = initializers(cnn_qdq)
    floats = {n.name: n for n in cnn.graph.node}
    float_values = initializers(cnn)
    prods = producers(cnn_qdq.graph)
    for node in qdq_free_nodes(cnn_qdq):
        if node.op_type not in ("Conv", "Gemm"):
            continue
        dequantize = weight_dequantizer(cnn_qdq, node, 1)
        weight, scale, zero_point = (values[name] for name in dequantize.input)
        channels = weight.shape[0]
        assert weight.dtype == np.int8 and zero_point.dtype == np.int8
        assert scale.shape == (channels,) and attr(dequantize, "axis", 1) == 0
        assert np.all(zero_point == 0) and weight.min() >= -127
        if node.op_type == "Conv":
            expected, expected_bias = folded_conv_weights(cnn, floats[node.name])
        else:
            expected, expected_bias = (float_values[name] for name in floats[node.name].input[1:3])
        per_channel_max = np.abs(expected.reshape(channels, -1)).max(axis=1)
        np.testing.assert_allclose(scale, per_channel_max / 127, rtol=1e-5)
        dequantized = weight.astype(np.float64) * scale.reshape(-1, *[1] * (weight.ndim - 1))
        step = scale.reshape(dequantized.shape[0], *[1] * (weight.ndim - 1))
        assert np.all(np.abs(dequantized - expected) <= step / 2 + 1e-7)
        # bias: int32, scale = input scale * weight scale per channel, zero point 0
        bias_dq = weight_dequantizer(cnn_qdq, node, 2)
        bias, bias_scale, bias_zero = (values[name] for name in bias_dq.input)
        input_scale = values[prods[node.input[0]].input[1]]
        assert bias.dtype == np.int32 and np.all(bias_zero == 0)
        np.testing.assert_allclose(bias_scale, input_scale * scale, rtol=1e-5)
        np.testing.assert_allclose(bias * bias_scale, expected_bias, atol=float(bias_scale.max()))


def test_mlp_gemms_softmax_and_names(mlp: onnx.ModelProto, mlp_qdq: onnx.ModelProto) -> None:
    assert [n.name for n in qdq_free_nodes(mlp_qdq)] == ["gemm_1", "gemm_3", "gemm_5", "softmax_6"]
    assert absorbed_nodes(mlp_qdq) == {"gemm_1": ["relu_2"], "gemm_3": ["relu_4"]}
    values = initializers(mlp_qdq)
    for gemm in (n for n in mlp_qdq.graph.node if n.op_type == "Gemm"):
        weight_scale = values[weight_dequantizer(mlp_qdq, gemm, 1).input[1]]
        assert weight_scale.shape == (values[weight_dequantizer(mlp_qdq, gemm, 1).input[0]].shape[0],)
    softmax = next(n for n in mlp_qdq.graph.node if n.op_type == "Softmax")
    [quantize] = [n for n in mlp_qdq.graph.node if softmax.output[0] in n.input]
    assert values[quantize.input[1]].item() == pytest.approx(1 / 255)
    assert values[quantize.input[2]].item() == -128


def test_per_tensor_weights(mlp: onnx.ModelProto) -> None:
    qdq = quantize_model(mlp, calibration_inputs(mlp, random_samples=8), per_channel=False)
    values = initializers(qdq)
    for gemm in (n for n in qdq.graph.node if n.op_type == "Gemm"):
        assert values[weight_dequantizer(qdq, gemm, 1).input[1]].size == 1
    check_qdq(qdq)


def test_metadata_and_unnamed_nodes(mlp: onnx.ModelProto) -> None:
    model = copy_model(mlp)
    for node in model.graph.node:
        node.metadata_props.add(key="fpgaplace.test", value=node.name)
    model.graph.node[4].name = ""  # the last Gemm: gets the IR name Gemm_4
    model.metadata_props.add(key="owner", value="tests")
    qdq = quantize_model(model, calibration_inputs(model, random_samples=4))
    names = [n.name for n in qdq_free_nodes(qdq)]
    assert names == ["gemm_1", "gemm_3", "Gemm_4", "softmax_6"]
    for node in qdq_free_nodes(qdq):
        assert node_metadata(node, "fpgaplace.test") == ("gemm_5" if node.name == "Gemm_4" else node.name)
    assert node_metadata(qdq_free_nodes(qdq)[0], ABSORBED_KEY) == "relu_2"
    assert {e.key: e.value for e in qdq.metadata_props}["owner"] == "tests"
    assert model.graph.node[4].name == "" and not is_qdq(model)  # the caller's model is untouched


def test_dead_nodes_are_dropped_not_absorbed(mlp: onnx.ModelProto) -> None:
    model = copy_model(mlp)
    model.graph.node.append(helper.make_node("Relu", ["gemm_1"], ["unused"], name="dead_relu"))
    qdq = quantize_model(model, calibration_inputs(model, random_samples=4))
    assert "dead_relu" not in {n.name for n in qdq.graph.node}
    assert absorbed_nodes(qdq) == {"gemm_1": ["relu_2"], "gemm_3": ["relu_4"]}


def test_multi_input_model_and_clip_concat() -> None:
    """Two inputs; and a Conv -> Clip(0, 6) -> Concat -> AveragePool graph, Clip folded away."""
    rng = np.random.default_rng(3)
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv_a", pads=[1, 1, 1, 1]),
        helper.make_node("Clip", ["c1", "lo", "hi"], ["r1"], name="clip_a"),
        helper.make_node("Conv", ["x", "w2"], ["c2"], name="conv_b"),
        helper.make_node("Concat", ["r1", "c2"], ["cat"], name="concat", axis=1),
        helper.make_node("AveragePool", ["cat"], ["y"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
    ]
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32) / 5, "w1"),
             numpy_helper.from_array(rng.standard_normal((4, 3, 1, 1)).astype(np.float32), "w2"),
             numpy_helper.from_array(np.array(0, np.float32), "lo"),
             numpy_helper.from_array(np.array(6, np.float32), "hi")]
    graph = helper.make_graph(nodes, "clip_concat",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 4, 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    qdq = quantize_model(model, calibration_inputs(model, random_samples=16))
    assert [n.name for n in qdq_free_nodes(qdq)] == ["conv_a", "conv_b", "concat", "pool"]
    assert absorbed_nodes(qdq) == {"conv_a": ["clip_a"]}
    drift = measure_drift(model, qdq, calibration_inputs(model, random_samples=8, seed=5))
    assert drift.output("y").max_relative_error < MAX_RELATIVE_DRIFT

    two_inputs = models.multi_io()
    qdq2 = quantize_model(two_inputs, calibration_inputs(two_inputs, random_samples=8))
    check_qdq(qdq2)
    assert [o.name for o in measure_drift(two_inputs, qdq2, calibration_inputs(two_inputs, random_samples=4)).outputs] \
        == ["y1", "y2"]


def test_quantization_leaves_no_files(mlp: onnx.ModelProto, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scratch, cwd = tmp_path / "tmp", tmp_path / "cwd"
    scratch.mkdir()
    cwd.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.chdir(cwd)
    quantize_model(mlp, calibration_inputs(mlp, random_samples=2))
    assert list(scratch.iterdir()) == [] and list(cwd.iterdir()) == []


def test_quantize_model_errors(mlp: onnx.ModelProto, mlp_qdq: onnx.ModelProto) -> None:
    samples = calibration_inputs(mlp, random_samples=2)
    with pytest.raises(FpgaplaceError, match="already has QuantizeLinear"):
        quantize_model(mlp_qdq, samples)
    wrong_shape = r"calibration sample 0: input 'x' is float32\[1,8\], expected float32\[1,16\]"
    with pytest.raises(FpgaplaceError, match=wrong_shape):
        quantize_model(mlp, [{"x": np.zeros((1, 8), np.float32)}])
    with pytest.raises(FpgaplaceError, match=r"calibration sample 1: has keys \['y'\]"):
        quantize_model(mlp, [samples[0], {"y": samples[1]["x"]}])
    with pytest.raises(FpgaplaceError, match="non-empty list"):
        quantize_model(mlp, [])


def test_onnxruntime_failure_is_one_line_error() -> None:
    node = helper.make_node("NoSuchOp", ["x"], ["y"], name="mystery", domain="example.custom")
    graph = helper.make_graph([node], "custom", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("example.custom", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    with pytest.raises(FpgaplaceError) as caught:
        quantize_model(model, calibration_inputs(model, random_samples=1))
    message = str(caught.value)
    assert message.startswith("model 'custom': onnxruntime") and "\n" not in message


# ----------------------------------------------------------------------------- check_qdq


def corrupt(model: onnx.ModelProto, node_name: str, position: int, value: np.ndarray | None) -> onnx.ModelProto:
    """A copy whose named Q/DQ node reads ``value`` as input ``position`` (None removes the input)."""
    broken = copy_model(model)
    node = next(n for n in broken.graph.node if n.name == node_name)
    if value is None:
        del node.input[position:]
        return broken
    name = f"corrupt_{position}"
    broken.graph.initializer.append(numpy_helper.from_array(value, name))
    node.input[position] = name
    return broken


@pytest.mark.parametrize(("position", "value", "expected"), [
    (1, np.array(0.0, np.float32), "scale has value 0.0, expected finite values > 0"),
    (1, np.array(-0.5, np.float32), "scale has value -0.5"),
    (1, np.array(np.nan, np.float32), "scale has value nan"),
    (1, np.array(np.inf, np.float32), "scale has value inf"),
    (1, np.array(1, np.int32), "expected a non-empty float"),
    (2, None, "has no zero point, expected an int8 zero point"),
    (2, np.array(0, np.uint8), "zero point is uint8, expected int8"),
    (2, np.array(0, np.int32), "zero point is int32, expected int8"),
    (2, np.zeros(3, np.int8), "zero point has 3 values and scale 1"),
])
def test_check_qdq_rejects_corrupt_qparams(cnn_qdq: onnx.ModelProto, position: int, value, expected: str) -> None:
    broken = corrupt(cnn_qdq, "relu_3_QuantizeLinear", position, value)
    assert is_qdq(broken)
    with pytest.raises(FpgaplaceError, match="^QuantizeLinear 'relu_3_QuantizeLinear': ") as caught:
        check_qdq(broken)
    assert expected in str(caught.value)


def test_check_qdq_rejects_non_constant_scale_and_bad_bias(cnn_qdq: onnx.ModelProto) -> None:
    broken = copy_model(cnn_qdq)
    broken.graph.input.append(helper.make_tensor_value_info("free_scale", TensorProto.FLOAT, []))
    next(n for n in broken.graph.node if n.name == "logits_DequantizeLinear").input[1] = "free_scale"
    with pytest.raises(FpgaplaceError, match="DequantizeLinear 'logits_DequantizeLinear': scale 'free_scale' is not a"):
        check_qdq(broken)
    bias_dq = next(n for n in cnn_qdq.graph.node if n.name == "fc_b_DequantizeLinear")
    nonzero = np.ones(initializers(cnn_qdq)[bias_dq.input[2]].shape, np.int32)
    with pytest.raises(FpgaplaceError, match="fc_b_DequantizeLinear': int32 bias zero point is not 0"):
        check_qdq(corrupt(cnn_qdq, "fc_b_DequantizeLinear", 2, nonzero))
    with pytest.raises(FpgaplaceError, match="has no QuantizeLinear/DequantizeLinear nodes"):
        check_qdq(models.mlp(batch=1))


# ----------------------------------------------------------------------------- drift


def test_drift_of_a_model_against_itself_is_zero(mlp: onnx.ModelProto) -> None:
    drift = measure_drift(mlp, mlp, calibration_inputs(mlp, random_samples=4))
    assert drift.to_json() == {"samples": 4, "outputs": [
        {"name": "y", "max_abs_error": 0.0, "max_relative_error": 0.0, "top1_agreement": 1.0}]}
    assert json.loads(json.dumps(drift.to_json())) == drift.to_json()
    assert isinstance(drift, Drift)


def test_drift_is_computed_as_defined() -> None:
    """y = x against y = x + [0.5, 0, -2]: abs error 2, relative 2 / max|x|; [3, 1, 0] keeps its
    argmax, [0, 1, 2.5] -> [0.5, 1, 0.5] loses it."""
    def model(offset: np.ndarray) -> onnx.ModelProto:
        graph = helper.make_graph(
            [helper.make_node("Add", ["x", "offset"], ["y"], name="add")], "shift",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
            [numpy_helper.from_array(offset.astype(np.float32), "offset")])
        built = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        built.ir_version = 8
        return built

    samples = [{"x": np.array([[3.0, 1.0, 0.0]], np.float32)}, {"x": np.array([[0.0, 1.0, 2.5]], np.float32)}]
    drift = measure_drift(model(np.zeros(3)), model(np.array([0.5, 0.0, -2.0])), samples)
    output = drift.output("y")
    assert output.max_abs_error == pytest.approx(2.0)
    assert output.max_relative_error == pytest.approx(2.0 / 3.0)
    assert output.top1_agreement == pytest.approx(0.5)


def test_drift_detects_a_wrong_output_scale(mlp: onnx.ModelProto, mlp_qdq: onnx.ModelProto) -> None:
    broken = copy_model(mlp_qdq)
    dequantize = next(n for n in broken.graph.node if n.op_type == "DequantizeLinear" and n.output[0] == "y")
    scale = initializers(broken)[dequantize.input[1]]
    broken.graph.initializer.append(numpy_helper.from_array((scale * 2).astype(np.float32), "doubled"))
    dequantize.input[1] = "doubled"
    check_qdq(broken)  # still well formed
    drift = measure_drift(mlp, broken, calibration_inputs(mlp, random_samples=8, seed=2))
    assert drift.output("y").max_relative_error > 0.2


def test_drift_errors(mlp: onnx.ModelProto, cnn_qdq: onnx.ModelProto) -> None:
    samples = calibration_inputs(mlp, random_samples=1)
    with pytest.raises(FpgaplaceError, match=r"outputs \['logits'\] differ from the float model's \['y'\]"):
        measure_drift(mlp, cnn_qdq, samples)
    with pytest.raises(FpgaplaceError, match="non-empty list"):
        measure_drift(mlp, mlp, [])


# ----------------------------------------------------------------------------- calibration_inputs


def test_random_calibration(cnn: onnx.ModelProto) -> None:
    samples = calibration_inputs(cnn, random_samples=3, seed=4)
    assert len(samples) == 3
    assert all(list(s) == ["image"] and s["image"].shape == (1, 3, 32, 32) and s["image"].dtype == np.float32
               for s in samples)
    again = calibration_inputs(cnn, random_samples=3, seed=4)
    other = calibration_inputs(cnn, random_samples=3, seed=5)
    assert np.array_equal(samples[2]["image"], again[2]["image"])
    assert not np.array_equal(samples[0]["image"], other[0]["image"])
    assert not np.array_equal(samples[0]["image"], samples[1]["image"])
    assert 0.9 < float(np.std(np.concatenate([s["image"] for s in samples]))) < 1.1  # standard normal


@pytest.mark.parametrize("count", [0, -1, MAX_RANDOM_SAMPLES + 1, True, 2.0])
def test_random_count_must_be_sensible(mlp: onnx.ModelProto, count) -> None:
    with pytest.raises(FpgaplaceError, match=r"random_samples: expected an integer in \[1, 100000\]"):
        calibration_inputs(mlp, random_samples=count)


def test_random_calibration_needs_fixed_shapes() -> None:
    with pytest.raises(FpgaplaceError, match=r"input 'image' has shape float32\[N,3,32,32\] with symbolic dims"):
        calibration_inputs(models.cnn_residual(), random_samples=2)


def test_exactly_one_calibration_source(mlp: onnx.ModelProto, tmp_path: Path) -> None:
    for kwargs in ({}, {"calib_dir": tmp_path, "random_samples": 2}):
        with pytest.raises(FpgaplaceError, match="give exactly one of calib_dir"):
            calibration_inputs(mlp, **kwargs)


def test_folder_of_npy_files(mlp: onnx.ModelProto, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    single = rng.standard_normal((1, 16)).astype(np.float32)
    batch_new_axis = rng.standard_normal((3, 1, 16))  # float64: cast to float32
    batch_leading = rng.standard_normal((2, 16)).astype(np.float32)  # the leading 1 replaced by 2
    np.save(tmp_path / "a.npy", single)
    np.save(tmp_path / "b.npy", batch_new_axis)
    np.save(tmp_path / "c.npy", batch_leading)
    (tmp_path / "README.txt").write_text("not a sample")
    samples = calibration_inputs(mlp, calib_dir=tmp_path)
    assert len(samples) == 6
    assert all(s["x"].shape == (1, 16) and s["x"].dtype == np.float32 for s in samples)
    np.testing.assert_array_equal(samples[0]["x"], single)
    np.testing.assert_allclose(samples[3]["x"], batch_new_axis[2].astype(np.float32))
    np.testing.assert_array_equal(samples[5]["x"], batch_leading[1:2])
    quantize_model(mlp, samples)  # the samples are what quantize_model accepts


def test_symbolic_batch_model_from_a_folder(tmp_path: Path) -> None:
    """A symbolic batch takes a whole file as one sample; quantization keeps the symbolic dim."""
    model = models.cnn_residual()  # image: [N, 3, 32, 32]
    np.save(tmp_path / "batch.npy", np.random.default_rng(2).standard_normal((4, 3, 32, 32)).astype(np.float32))
    [sample] = calibration_inputs(model, calib_dir=tmp_path)
    assert sample["image"].shape == (4, 3, 32, 32)
    qdq = quantize_model(model, [sample])
    assert qdq.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"
    drift = measure_drift(model, qdq, [sample])
    assert drift.output("logits").max_relative_error < MAX_RELATIVE_DRIFT


def test_folder_of_npz_files_for_two_inputs(tmp_path: Path) -> None:
    model = models.multi_io()
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((4, 1, 8)).astype(np.float32), rng.standard_normal((4, 1, 8)).astype(np.float32)
    np.savez(tmp_path / "batch.npz", a=a, b=b)
    samples = calibration_inputs(model, calib_dir=tmp_path)
    assert len(samples) == 4
    np.testing.assert_array_equal(samples[1]["b"], b[1])
    with pytest.raises(FpgaplaceError, match=r"batch.npz: has arrays \['a', 'c'\], expected exactly the model inputs"):
        np.savez(tmp_path / "batch.npz", a=a, c=b)
        calibration_inputs(model, calib_dir=tmp_path)
    with pytest.raises(FpgaplaceError, match=r"batch.npz: arrays hold different sample counts"):
        np.savez(tmp_path / "batch.npz", a=a, b=b[:2])
        calibration_inputs(model, calib_dir=tmp_path)
    (tmp_path / "batch.npz").unlink()
    np.save(tmp_path / "one.npy", a)
    with pytest.raises(FpgaplaceError, match=r"one.npy: a .npy file holds one input, but the model has inputs"):
        calibration_inputs(model, calib_dir=tmp_path)


@pytest.mark.parametrize(("content", "expected"), [
    (np.zeros((1, 15), np.float32), r"array 'x' has shape \[1,15\], expected float32\[1,16\]"),
    (np.zeros((2, 3, 16), np.float32), r"array 'x' has shape \[2,3,16\]"),
    (np.zeros((1, 16), np.int64), r"array 'x' is int64, expected float32"),
    (np.full((1, 16), np.nan, np.float32), "array 'x' has NaN or infinite values"),
    (b"definitely not numpy", "cannot read it as a numpy .npy file"),
])
def test_bad_calibration_files(mlp: onnx.ModelProto, tmp_path: Path, content, expected: str) -> None:
    path = tmp_path / "sample.npy"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        np.save(path, content)
    with pytest.raises(FpgaplaceError, match=f"^{re.escape(str(path))}: {expected}") as caught:
        calibration_inputs(mlp, calib_dir=tmp_path)
    assert "\n" not in str(caught.value)


def test_bad_calibration_folders(mlp: onnx.ModelProto, tmp_path: Path) -> None:
    with pytest.raises(FpgaplaceError, match="missing: calibration folder not found"):
        calibration_inputs(mlp, calib_dir=tmp_path / "missing")
    with pytest.raises(FpgaplaceError, match="no .npy or .npz files"):
        calibration_inputs(mlp, calib_dir=tmp_path)
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(FpgaplaceError, match="no .npy or .npz files"):
        calibration_inputs(mlp, calib_dir=tmp_path)
    (tmp_path / "broken.npz").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(FpgaplaceError, match="broken.npz: cannot read it as a numpy .npz file"):
        calibration_inputs(mlp, calib_dir=tmp_path)


# ----------------------------------------------------------------------------- quantize_file


def test_quantize_file(mlp: onnx.ModelProto, tmp_path: Path) -> None:
    source, target = tmp_path / "mlp.onnx", tmp_path / "out" / "mlp_q.onnx"
    onnx.save(mlp, source)
    target.parent.mkdir()
    drift, path = quantize_file(source, target, random_samples=16, seed=3)
    assert path == target and sorted(p.name for p in target.parent.iterdir()) == ["mlp_q.onnx"]
    written = onnx.load(target)
    check_qdq(written)
    assert drift.samples == 16 and drift.output("y").max_relative_error < MAX_RELATIVE_DRIFT
    assert measure_drift(mlp, written, calibration_inputs(mlp, random_samples=16, seed=3)) == drift

    folder = tmp_path / "calib"
    folder.mkdir()
    np.save(folder / "batch.npy", np.random.default_rng(0).standard_normal((5, 1, 16)).astype(np.float32))
    drift, _ = quantize_file(source, target, calib_dir=folder)  # overwrites
    assert drift.samples == 5 and is_qdq(onnx.load(target))


def test_quantize_file_errors(mlp: onnx.ModelProto, tmp_path: Path) -> None:
    source = tmp_path / "mlp.onnx"
    onnx.save(mlp, source)
    with pytest.raises(FpgaplaceError, match="does not exist, expected an existing folder"):
        quantize_file(source, tmp_path / "nowhere" / "q.onnx", random_samples=2)
    with pytest.raises(FpgaplaceError, match="is a folder, expected a file path"):
        quantize_file(source, tmp_path, random_samples=2)
    with pytest.raises(FpgaplaceError, match="absent.onnx: model file not found"):
        quantize_file(tmp_path / "absent.onnx", tmp_path / "q.onnx", random_samples=2)
    (tmp_path / "garbage.onnx").write_bytes(b"\xff\xfe not protobuf")
    with pytest.raises(FpgaplaceError, match="garbage.onnx: cannot read it as an ONNX model"):
        quantize_file(tmp_path / "garbage.onnx", tmp_path / "q.onnx", random_samples=2)
    with pytest.raises(FpgaplaceError, match="random_samples"):
        quantize_file(source, tmp_path / "q.onnx", random_samples=0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["garbage.onnx", "mlp.onnx"]


# ---- onnxruntime's per-channel weight quantization, vectorised (quantize._vectorised_weight_quantization) ----


def _channels(rng: np.random.Generator) -> list[np.ndarray]:
    """Weight channels of every kind the scale rule distinguishes: tiny to huge, one-signed, all
    zero, negative zero, below float32's smallest normal, at float32's largest."""
    scaled = [rng.standard_normal(50).astype(np.float32) * s for s in (1e-3, 1.0, 1e3, 1e-39, 1e-45)]
    return [*scaled, np.abs(rng.standard_normal(9)).astype(np.float32),
            -np.abs(rng.standard_normal(9)).astype(np.float32), np.zeros(3, np.float32),
            np.array([-0.0], np.float32), np.array([3e38, -3.4e38], np.float32)]


def test_vectorised_weight_params_and_values_are_onnxruntimes_bit_for_bit():
    from onnxruntime.quantization import quant_utils

    from fpgaplace.model.quantize import _fast_data_quant_params, _fast_quantize_initializer

    rng = np.random.default_rng(0)
    params = _fast_data_quant_params(quant_utils.compute_data_quant_params)
    for data in _channels(rng):
        expected = quant_utils.compute_data_quant_params(data, TensorProto.INT8, True)
        got = params(data, TensorProto.INT8, True)
        assert [(a.dtype, a.shape, a.tobytes()) for a in got] == [(a.dtype, a.shape, a.tobytes()) for a in expected]
    quantize = _fast_quantize_initializer(quant_utils.quantize_onnx_initializer)
    for shape, axis in [((16, 3, 5, 5), 0), ((40, 24), 0), ((24, 40), 1)]:
        weights = (rng.standard_normal(shape) * rng.uniform(1e-3, 10)).astype(np.float32)
        np.moveaxis(weights, axis, 0)[1] = 0  # an all-zero channel: scale 1.0
        tensor = numpy_helper.from_array(weights, "w")
        zero_points, scales = zip(*[quant_utils.compute_data_quant_params(weights.take(i, axis).ravel(),
                                                                          TensorProto.INT8, True)
                                    for i in range(shape[axis])], strict=True)
        zero_points, scales = np.asarray(zero_points), np.asarray(scales)
        expected = quant_utils.quantize_onnx_initializer(tensor, TensorProto.INT8, zero_points, scales, axis)
        got = quantize(tensor, TensorProto.INT8, zero_points, scales, axis)
        assert got.SerializeToString() == expected.SerializeToString()
        assert np.abs(numpy_helper.to_array(got)).max() == 127  # each channel's largest weight maps to +-127


@pytest.mark.parametrize("build", [lambda: models.cnn_residual(batch=1), lambda: models.mlp(batch=1),
                                   lambda: models.mobilenet_v2(batch=1, image=32, classes=10)])
def test_vectorised_weight_quantization_gives_onnxruntimes_qdq_model_byte_for_byte(build, monkeypatch):
    import contextlib

    from onnxruntime.quantization import qdq_quantizer

    from fpgaplace.model import quantize as module

    originals = (qdq_quantizer.compute_data_quant_params, qdq_quantizer.quantize_onnx_initializer)
    model = build()
    samples = calibration_inputs(model, random_samples=2, seed=0)
    fast_channels = []
    params = module._symmetric_int8_params
    monkeypatch.setattr(module, "_symmetric_int8_params", lambda data: fast_channels.append(data.size) or params(data))
    fast = quantize_model(model, samples)
    assert len(fast_channels) >= 10  # the stand-in did the work (a channel each)
    assert (qdq_quantizer.compute_data_quant_params, qdq_quantizer.quantize_onnx_initializer) == originals
    monkeypatch.setattr(module, "_vectorised_weight_quantization", contextlib.nullcontext)
    plain = quantize_model(model, samples)
    assert fast.SerializeToString(deterministic=True) == plain.SerializeToString(deterministic=True)
