"""Sub-8-bit costing: the cost model reads each tensor's bit width (a QONNX quantizer's quant_bits,
else the precision asked for) for on-chip weight bytes, transfer bytes and the MACs a DSP takes,
the figures the op library (fpgaplace.hw) gives at those widths."""

from __future__ import annotations

import copy
import dataclasses
import json
import math

import onnx
import pytest
import real_models

from fpgaplace import hw
from fpgaplace.board.load import load_board
from fpgaplace.hw.kernel import lane_choice, macs_per_dsp
from fpgaplace.model.frontend.load import from_model
from fpgaplace.place.cost.fpga import PRECISION_BITS, PRECISION_BYTES, kernel_weight_bytes, op_bits, tensor_bits
from fpgaplace.place.cost.problem import CostOptions, op_costs, output_bytes
from fpgaplace.util.errors import FpgaplaceError

ANALYTIC = {"profile_cpu": False}


@pytest.fixture(scope="module")
def zcu104():
    return load_board("zcu104")


@pytest.fixture(scope="module")
def qonnx_graph():
    model, shapes = real_models.build("qonnx")
    return from_model(model, input_shapes=shapes, source="qonnx.onnx")


def without_widths(graph):
    """The same graph with every tensor's own width forgotten (what an int8 costing sees)."""
    plain = copy.copy(graph)
    plain.tensors = {name: dataclasses.replace(info, quant_bits=None) for name, info in graph.tensors.items()}
    return plain


def by_name(costs):
    return {cost.name: cost for cost in costs}


def convs(graph):
    return [op for op in graph.ops.values() if op.op_type == "Conv"]


def test_each_op_reads_its_operands_widths(qonnx_graph):
    conv = convs(qonnx_graph)[0]
    assert op_bits(conv, qonnx_graph, 8) == (4, 8)  # 4-bit weights, the 8-bit quantized image
    assert all(op_bits(op, qonnx_graph, 8) == (4, 4) for op in convs(qonnx_graph)[1:])  # through MaxPool
    matmul = next(op for op in qonnx_graph.ops.values() if op.op_type == "MatMul")
    assert op_bits(matmul, qonnx_graph, 8) == (2, 8)  # 2-bit weights, the 8-bit Trunc through Flatten
    pool = next(op for op in qonnx_graph.ops.values() if op.op_type == "MaxPool")
    assert op_bits(pool, qonnx_graph, 16) == (4, 4) and qonnx_graph.tensors[pool.outputs[0]].quant_bits == 4
    unquantized = conv.outputs[0]
    assert tensor_bits(qonnx_graph, unquantized, 16) == 16 and tensor_bits(qonnx_graph, unquantized, 3) == 4


def test_weights_are_stored_at_their_width(qonnx_graph):
    plain = without_widths(qonnx_graph)
    for op in convs(qonnx_graph):
        planned = hw.plan_op(op, qonnx_graph)
        elements = planned[1].weights
        assert kernel_weight_bytes(op, qonnx_graph, 1) == math.ceil(elements * 4 / 8)
        assert kernel_weight_bytes(op, plain, 1) == elements
        assert kernel_weight_bytes(op, plain, PRECISION_BYTES["int2"]) == math.ceil(elements * 2 / 8)


def test_four_bit_lanes_cost_less_packed_or_on_luts_and_binary_lanes_take_no_dsp(qonnx_graph, zcu104):
    core = zcu104.cores[0]
    lanes = lane_choice(core, 4, 4)
    assert macs_per_dsp(core, 4) == (lanes.pack if lanes.kind == "dsp" else 0) and macs_per_dsp(core, 1) == 0
    quantized = by_name(op_costs(qonnx_graph, zcu104, CostOptions(**ANALYTIC)))
    plain = by_name(op_costs(without_widths(qonnx_graph), zcu104, CostOptions(**ANALYTIC)))
    four_bit = [op.name for op in convs(qonnx_graph) if op_bits(op, qonnx_graph, 8) == (4, 4)]
    assert four_bit
    for name in four_bit:
        assert not quantized[name].streamed and not plain[name].streamed
        # the 4-bit lanes (three to a DSP, or LUT tables) take less of the core than int8 ones
        assert quantized[name].latency_us["core"] < plain[name].latency_us["core"]
    binary = by_name(op_costs(without_widths(qonnx_graph), zcu104, CostOptions(precision="binary", **ANALYTIC)))
    assert all(math.isfinite(binary[name].latency_us["core"]) for name in four_bit)  # on LUT lanes


def test_transfers_move_each_tensor_at_its_width(qonnx_graph, zcu104):
    quant = next(op for op in qonnx_graph.ops.values() if op.op_type == "Quant")  # 8-bit image
    relu_quant = [op for op in qonnx_graph.ops.values() if op.op_type == "Quant"][1]  # 4-bit activation
    numel = qonnx_graph.tensors[relu_quant.outputs[0]].numel
    assert output_bytes(relu_quant, qonnx_graph, PRECISION_BYTES["float32"]) == math.ceil(numel * 4 / 8)
    assert output_bytes(quant, qonnx_graph, 1) == qonnx_graph.tensors[quant.outputs[0]].numel
    conv = convs(qonnx_graph)[0]  # its output is not quantized: the precision asked for decides
    elements = qonnx_graph.tensors[conv.outputs[0]].numel
    assert output_bytes(conv, qonnx_graph, PRECISION_BYTES["int4"]) == math.ceil(elements / 2)
    assert output_bytes(conv, qonnx_graph, PRECISION_BYTES["int16"]) == 2 * elements
    costs = by_name(op_costs(qonnx_graph, zcu104, CostOptions(**ANALYTIC)))
    assert costs[relu_quant.name].output_bytes == math.ceil(numel / 2)


def test_a_float_model_costed_at_int4_and_binary(zcu104):
    model, shapes = real_models.build("yolo")
    graph = from_model(model, input_shapes=shapes)
    int8, int4, binary = (by_name(op_costs(graph, zcu104, CostOptions(precision=p, **ANALYTIC)))
                          for p in ("int8", "int4", "binary"))
    conv = max(convs(graph), key=lambda op: op.macs).name
    assert int4[conv].output_bytes == math.ceil(int8[conv].output_bytes / 2)
    assert binary[conv].output_bytes == math.ceil(int8[conv].output_bytes / 8)
    assert int4[conv].latency_us["core"] < int8[conv].latency_us["core"]
    assert sum(c.onchip_bytes for c in int4.values()) < sum(c.onchip_bytes for c in int8.values())
    assert set(PRECISION_BITS) >= {"int4", "int2", "binary"} and PRECISION_BITS["binary"] == 1


def test_an_unknown_precision_is_a_one_line_error_listing_the_new_ones(zcu104, qonnx_graph):
    with pytest.raises(FpgaplaceError, match=r"precision: expected one of binary, int2, int4, int8"):
        op_costs(qonnx_graph, zcu104, CostOptions(precision="int3", **ANALYTIC))


def test_cost_command_takes_precision_int4(tmp_path):
    model, shapes = real_models.build("ocr")
    path = tmp_path / "ocr.onnx"
    onnx.save(model, path)
    flags = real_models.input_shape_flags(shapes)
    documents = {}
    for precision in ("int8", "int4"):
        code, stdout, stderr = real_models.run_cli(["cost", str(path), "--cpu-cost", "analytic", *flags,
                                                    "--precision", precision, "--json"])
        assert code == 0, stderr
        documents[precision] = json.loads(stdout)
    assert documents["int4"]["precision"] == "int4"
    int8_bytes = sum(op["onchip_bytes"] for op in documents["int8"]["ops"])
    assert sum(op["onchip_bytes"] for op in documents["int4"]["ops"]) < int8_bytes
