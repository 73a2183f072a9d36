"""Channel shuffles: Reshape/Transpose chains of a QDQ model that permute each pixel's channels,
found by their effect (not one pattern), run on a core as one shuffle stage, bit-exact in C
simulation and RTL simulation and within 1 LSB of onnxruntime's QDQ model."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_rtl_ops import assert_verilog_2005_clean, check_cycles, render_op, simulate_case

from fpgaplace.flow.design import Design
from fpgaplace.hw import KERNELS, plan_op
from fpgaplace.hw.geometry import Folding
from fpgaplace.hw.islands import islands
from fpgaplace.model.frontend.load import from_model
from fpgaplace.model.quantize import calibration_inputs, quantize_model
from fpgaplace.model.zoo import light_model_path
from fpgaplace.sim.csim import run_csim
from fpgaplace.sim.rtl_project import simulate_project_rtl
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.onnxrt import run_model

C, G, H, W = 12, 3, 6, 6


def _ints(name: str, values) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, dtype=np.int64), name)


def _shuffle_nodes(kind: str, x: str) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto], str]:
    """A channel shuffle of ``x`` [1, C, H, W] in groups of G as exporters write it."""
    n = helper.make_node
    if kind == "shufflenet":  # [N,g,C/g,H,W] -> swap the group axes -> [N,C,H,W]
        return ([n("Reshape", [x, "s1"], ["r1"]), n("Transpose", ["r1"], ["t"], perm=[0, 2, 1, 3, 4]),
                 n("Reshape", ["t", "s2"], ["y"])], [_ints("s1", [1, G, C // G, H, W]), _ints("s2", [1, C, H, W])], "y")
    if kind == "flat_pixels":  # the same shuffle through [N,g,C/g,H*W] and a 0 / -1 in the shapes
        return ([n("Reshape", [x, "s1"], ["r1"]), n("Transpose", ["r1"], ["t"], perm=[0, 2, 1, 3]),
                 n("Reshape", ["t", "s2"], ["y"])], [_ints("s1", [0, G, C // G, -1]), _ints("s2", [1, -1, H, W])], "y")
    if kind == "channels_last":  # NHWC, shuffle the last axis, back to NCHW
        return ([n("Transpose", [x], ["a"], perm=[0, 2, 3, 1]), n("Reshape", ["a", "s1"], ["r1"]),
                 n("Transpose", ["r1"], ["t"], perm=[0, 1, 2, 4, 3]), n("Reshape", ["t", "s2"], ["r2"]),
                 n("Transpose", ["r2"], ["y"], perm=[0, 3, 1, 2])],
                [_ints("s1", [1, H, W, G, C // G]), _ints("s2", [1, H, W, C])], "y")
    if kind == "swap_hw":  # not a channel permutation: rows and columns change places
        return [n("Transpose", [x], ["y"], perm=[0, 1, 3, 2])], [], "y"
    raise ValueError(kind)


def conv_shuffle_conv(kind: str, seed: int = 0) -> onnx.ModelProto:
    """Conv -> Relu -> channel shuffle -> Conv on a [1, 4, H, W] input."""
    rng = np.random.default_rng(seed)
    shuffle, consts, out = _shuffle_nodes(kind, "c1")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c0"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c0"], ["c1"]), *shuffle,
             helper.make_node("Conv", [out, "w2"], ["z"], kernel_shape=[1, 1])]
    for i, node in enumerate(nodes):
        node.name = f"{node.op_type.lower()}_{i}"
    weights = [numpy_helper.from_array(rng.normal(0, 0.4, shape).astype(np.float32), name)
               for name, shape in (("w1", (C, 4, 3, 3)), ("w2", (6, C, 1, 1)))]
    graph = helper.make_graph(nodes, kind, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, H, W])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 6, H, W])],
                              weights + consts)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def quantized(model: onnx.ModelProto) -> onnx.ModelProto:
    return quantize_model(model, calibration_inputs(model, random_samples=8))


def _expected_permutation(kind: str) -> list[int]:
    """The shuffle's source channel of each output channel, from its definition (groups of C/G
    channels dealt out one at a time), independently of the chain's ops."""
    return [(c % G) * (C // G) + c // G for c in range(C)]


@pytest.mark.parametrize("kind", ["shufflenet", "flat_pixels", "channels_last"])
def test_a_shuffle_chain_is_found_with_its_permutation(kind):
    model = quantized(conv_shuffle_conv(kind))
    graph = from_model(model)
    (chain,) = [i for i in islands(model, graph.tensors).islands if i.kernel == "shuffle"]
    assert list(chain.permutation) == _expected_permutation(kind)
    # onnxruntime on the QDQ model: the chain's int8 output is its int8 source with channels permuted
    x = np.random.default_rng(3).normal(0, 1, (1, 4, H, W)).astype(np.float32)
    values = run_model(model, {"x": x}, [chain.source, chain.output])
    np.testing.assert_array_equal(values[chain.source][:, list(chain.permutation)], values[chain.output])
    planned = {name: plan_op(graph.ops[name], graph)[0].name for name in chain.nodes}
    first, *members, last = chain.nodes
    assert (planned[first], planned[last], planned[chain.exit_op]) == ("dequantize", "quantize", "shuffle")
    assert [planned[name] for name in members if name != chain.exit_op] == ["island"] * (len(members) - 1)


def test_a_chain_that_would_round_twice_is_not_a_shuffle():
    """An inside Q/DQ pair at a scale other than the source's rounds once more: not one stage."""
    model = quantized(conv_shuffle_conv("shufflenet"))
    transpose = next(n for n in model.graph.node if n.op_type == "Transpose")
    dq = next(n for n in model.graph.node if n.output[0] == transpose.input[0])
    q = next(n for n in model.graph.node if n.output[0] == dq.input[0])
    model.graph.initializer.append(numpy_helper.from_array(np.array(0.37, np.float32), "other_scale"))
    q.input[1] = dq.input[1] = "other_scale"
    graph = from_model(model)
    assert not any(i.kernel == "shuffle" for i in islands(model, graph.tensors).islands)


def test_a_transpose_of_rows_and_columns_is_not_a_shuffle():
    model = quantized(conv_shuffle_conv("swap_hw"))
    graph = from_model(model)
    assert not any(i.kernel == "shuffle" for i in islands(model, graph.tensors).islands)
    transpose = next(op for op in graph.ops.values() if op.op_type == "Transpose")
    assert not plan_op(transpose, graph)


@pytest.mark.parametrize("kind", ["shufflenet", "channels_last"])
def test_a_conv_shuffle_conv_runs_on_the_cores_bit_exact(kind, tmp_path):
    result = Design(conv_shuffle_conv(kind, seed=len(kind)), "zcu104", profile_cpu=False).compile(
        tmp_path / "project", random_samples=8)
    kernels = [layer["kernel"] for core in result.design["cores"] for layer in core["layers"]]
    assert "shuffle" in kernels and result.cpu_ops == [], (kernels, result.cpu_ops)
    check = run_csim(tmp_path / "project", samples=4)
    assert check.ok and all(c.bit_exact for c in check.cores)
    assert all(o.max_abs_diff_lsb is not None and o.max_abs_diff_lsb <= 1 for o in check.outputs)


def pooled_channels_last(seed: int = 0) -> onnx.ModelProto:
    """Conv -> GlobalAveragePool -> Transpose to NHWC -> Reshape [1, C] -> MatMul: a Transpose
    whose effect in stream order is the identity (the chain ends at the Reshape, with C channels)."""
    rng = np.random.default_rng(seed)
    n = helper.make_node
    nodes = [n("Conv", ["x", "w1"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("GlobalAveragePool", ["c"], ["g"]), n("Transpose", ["g"], ["t"], perm=[0, 2, 3, 1]),
             n("Reshape", ["t", "s"], ["f"]), n("MatMul", ["f", "w2"], ["z"])]
    for i, node in enumerate(nodes):
        node.name = f"{node.op_type.lower()}_{i}"
    inits = [numpy_helper.from_array(rng.normal(0, 0.4, shape).astype(np.float32), name)
             for name, shape in (("w1", (C, 4, 3, 3)), ("w2", (C, 5)))] + [_ints("s", [1, C])]
    graph = helper.make_graph(nodes, "pooled", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, H, W])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 5])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_transpose_to_channels_last_after_pooling_runs_on_the_cores(tmp_path):
    model = quantized(pooled_channels_last())
    graph = from_model(model)
    (chain,) = [i for i in islands(model, graph.tensors).islands if i.kernel == "shuffle"]
    assert chain.permutation == tuple(range(C)) and graph.ops[chain.exit_op].op_type == "Reshape"
    result = Design(pooled_channels_last(), "zcu104", profile_cpu=False).compile(tmp_path / "project",
                                                                                 random_samples=8)
    assert result.cpu_ops == [], result.cpu_ops
    check = run_csim(tmp_path / "project", samples=4)
    assert check.ok and all(c.bit_exact for c in check.cores)
    assert all(o.max_abs_diff_lsb is not None and o.max_abs_diff_lsb <= 1 for o in check.outputs)


def test_a_flatten_of_a_feature_map_before_a_dense_layer_is_not_a_shuffle():
    """Its elements change order, but not within the source's pixels: the dense layer takes the
    stream order (hw.dense.flattened_from) and the flatten stays a free reshape."""
    rng = np.random.default_rng(4)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Flatten", ["c"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "w2"], ["z"], name="gemm", transB=1)]
    inits = [numpy_helper.from_array(rng.normal(0, 0.3, shape).astype(np.float32), name)
             for name, shape in (("w1", (C, 4, 3, 3)), ("w2", (5, C * H * W)))]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, H, W])
    graph_proto = helper.make_graph(nodes, "flat", [x], [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 5])],
                                    inits)
    model = quantized(helper.make_model(graph_proto, opset_imports=[helper.make_opsetid("", 17)]))
    graph = from_model(model)
    assert not any(i.kernel == "shuffle" for i in islands(model, graph.tensors).islands)
    assert plan_op(graph.ops["flatten"], graph)[0].name == "reshape"


def test_shufflenet_channel_shuffles_plan_on_the_cores():
    """The light-zoo ShuffleNet: every Reshape and Transpose of its 16 channel shuffles is the
    shuffle stage or a free member of it (none is refused any more)."""
    graph = Design(light_model_path("shufflenet"), "zcu104", profile_cpu=False).quantized(random_samples=1).graph
    moves = [op for op in graph.ops.values() if op.op_type in ("Reshape", "Transpose")]
    planned = [plan_op(op, graph) for op in moves]
    names = [p[0].name if p else p.reason for p in planned]
    assert names.count("shuffle") == 16 and names.count("island") == len(moves) - 17, sorted(set(names))


@pytest.mark.parametrize(("channels", "pixels", "folding", "rescale"), [
    (12, 16, Folding(3, 1, 1), False), (8, 20, Folding(8, 1, 1), True), (6, 12, Folding(1, 1, 1), True)])
def test_shuffle_rtl_bit_exact_and_cycles(tmp_path, channels, pixels, folding, rescale):
    rng = np.random.default_rng(channels * pixels)
    m, s = (1 << 30, 30) if not rescale else (int(rng.integers(1 << 29, 1 << 30)), 30)
    config = {"SIZE": channels * pixels, "PIXELS": pixels, "C": channels, "ZX": int(rng.integers(-20, 20)), "M": m,
              "S": s, "ZY": int(rng.integers(-20, 20)), "LO": -128, "HI": 127}
    arrays = {"perm": rng.permutation(channels).astype(np.int16)}
    inputs = [rng.integers(-128, 128, (3, channels * pixels), dtype=np.int8)]
    geometry = KERNELS["shuffle"].channels_geometry((1, channels, pixels, 1))
    result = simulate_case("shuffle", (config, arrays, inputs, folding), tmp_path, geometry=geometry)
    check_cycles(result, f"shuffle C={channels} pixels={pixels} {folding}")
    (tmp_path / "lint").mkdir()
    assert_verilog_2005_clean(render_op("shuffle", config, arrays, folding, 100), tmp_path / "lint")


def test_a_core_with_a_shuffle_is_bit_exact_in_rtl(tmp_path):
    """The whole core (conv, shuffle, conv) in cocotb under backpressure: bit-exact, and its
    steady cycles within 10% of the cycle model's interval."""
    result = Design(conv_shuffle_conv("shufflenet", seed=3), "pynq-z2", profile_cpu=False).compile(
        tmp_path / "project", random_samples=4)
    assert "shuffle" in {layer["kernel"] for core in result.design["cores"] for layer in core["layers"]}
    rtl = simulate_project_rtl(tmp_path / "project", samples=2)
    assert rtl.ok and rtl.cores
    for core in rtl.cores:
        assert core.bit_exact and abs(core.cycles_measured - core.cycles_model) <= 0.1 * core.cycles_model, core


def test_a_bad_shuffle_layer_is_a_one_line_error():
    config = {"SIZE": 24, "PIXELS": 4, "C": 6, "ZX": 0, "M": 1 << 30, "S": 30, "ZY": 0, "LO": -128, "HI": 127}
    with pytest.raises(FpgaplaceError, match="perm must be a permutation of the 6 channels"):
        render_op("shuffle", config, {"perm": np.array([0, 1, 1, 2, 3, 4], np.int16)}, Folding(2, 1, 1), 100)
