"""The hardware op library (``fpgaplace.hw``): each kernel's geometry, cycles and resources, the
balanced folding of a core, and the agreement of the folded cores with the placement's plan.

Expected values are computed here from the shapes each test builds (output size from the
window formula, cycles from the documented MVAU/lane formulas), never copied from a run.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from importlib.resources import files
from pathlib import Path

import numpy as np
import onnx
import pytest
import yaml
from hw_spec import conv_ticks, sliding_ticks
from onnx import TensorProto, helper, numpy_helper

from fpgaplace import Design, load_board
from fpgaplace.board.load import list_boards
from fpgaplace.board.model import FpgaCore
from fpgaplace.codegen.project import CompileResult
from fpgaplace.flow.refine import REFINE_ROUNDS
from fpgaplace.hw import KERNELS, Folding, Geometry, Kernel, Unsupported, cycles_to_us, kernel_for, plan_op
from fpgaplace.hw.folding import Stage, fold_core, least_interval, streamed_cycles
from fpgaplace.hw.geometry import core_budget
from fpgaplace.hw.kernel import MAX_LINE_WIDTH
from fpgaplace.hw.registry import BROADER, CONTEXT_KERNELS, REWRITE_KERNELS
from fpgaplace.model import ops as op_registry
from fpgaplace.model import zoo as models
from fpgaplace.model.frontend.load import from_model
from fpgaplace.model.ir import Op, OpGraph
from fpgaplace.place.cost.fpga import PRECISION_BYTES, on_chip_plan, resident_ops
from fpgaplace.project.board import project_board
from fpgaplace.project.record import load as load_record
from fpgaplace.util.errors import FpgaplaceError

# --------------------------------------------------------------------------- building small graphs


def graph_of(nodes: list[onnx.NodeProto], inputs: dict[str, tuple[int, ...]], outputs: list[str],
             constants: dict[str, np.ndarray] | None = None) -> OpGraph:
    """The ``OpGraph`` of a hand-made model (float inputs, constants as initializers; the
    outputs' types and shapes by onnx shape inference)."""
    initializers = [numpy_helper.from_array(value, name) for name, value in (constants or {}).items()]
    graph = helper.make_graph(nodes, "hand_made",
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in inputs.items()],
                              [helper.make_empty_tensor_value_info(n) for n in outputs], initializer=initializers)
    model = onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    del model.graph.value_info[:]
    return from_model(model)


def single_op(op_type: str, inputs: dict[str, tuple[int, ...]], constants: dict[str, tuple[int, ...]] | None = None,
              **attrs) -> tuple[Op, OpGraph]:
    """One node named "op" reading the activations ``inputs`` then the zero constants ``constants``."""
    constants = constants or {}
    node = helper.make_node(op_type, [*inputs, *constants], ["y"], name="op", **attrs)
    graph = graph_of([node], inputs, ["y"], {n: np.zeros(s, np.float32) for n, s in constants.items()})
    return graph.ops["op"], graph


def planned(op: Op, graph: OpGraph) -> tuple[Kernel, Geometry]:
    result = plan_op(op, graph)
    assert not isinstance(result, Unsupported), result.reason
    return result


def unsupported(op: Op, graph: OpGraph) -> str:
    result = plan_op(op, graph)
    assert isinstance(result, Unsupported), f"{op.op_type} was planned on a core"
    assert result.reason
    return result.reason


def window_out(size: int, kernel: int, stride: int, begin: int, end: int, dilation: int = 1) -> int:
    """ONNX's output size of a window op with explicit pads."""
    return (size + begin + end - dilation * (kernel - 1) - 1) // stride + 1


def same_pads(size: int, kernel: int, stride: int, upper: bool) -> tuple[int, int, int]:
    """ONNX auto_pad SAME_UPPER/SAME_LOWER: output ceil(size / stride), the odd pad at the end
    (UPPER) or the beginning (LOWER). Returns (output, begin, end)."""
    out = math.ceil(size / stride)
    total = max(0, (out - 1) * stride + kernel - size)
    small, big = total // 2, total - total // 2
    return (out, small, big) if upper else (out, big, small)


def shipped_core(board: str) -> FpgaCore:
    return load_board(board).cores[0]


# --------------------------------------------------------------------------- geometry: conv

CONV_CASES = {
    # name: (H, W, Cin, Cout, (KH, KW), (SH, SW), (PT, PL, PB, PR), (DH, DW), groups)
    "strided with uneven pads": (10, 12, 8, 16, (3, 3), (2, 1), (1, 0, 1, 2), (1, 1), 1),
    "dilated": (10, 11, 4, 8, (3, 3), (1, 1), (0, 0, 0, 0), (2, 2), 1),
    "grouped": (8, 8, 8, 4, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 2),
    "depthwise strided": (9, 8, 8, 8, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 8),
    "pointwise": (6, 5, 16, 32, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),
}


def conv_op(case: tuple) -> tuple[Op, OpGraph]:
    h, w, cin, cout, (kh, kw), strides, pads, dilations, groups = case
    return single_op("Conv", {"x": (1, cin, h, w)}, {"w": (cout, cin // groups, kh, kw)}, kernel_shape=[kh, kw],
                     strides=list(strides), pads=list(pads), dilations=list(dilations), group=groups)


def conv_dims(case: tuple) -> dict[str, int]:
    """Output size, reduction length and MACs of a conv case, from ONNX's definitions."""
    h, w, cin, cout, (kh, kw), (sh, sw), (pt, pl, pb, pr), (dh, dw), groups = case
    ho, wo = window_out(h, kh, sh, pt, pb, dh), window_out(w, kw, sw, pl, pr, dw)
    reduction = kh * kw * cin // groups
    return {"HO": ho, "WO": wo, "COUT": cout, "REDUCTION": reduction, "MACS": ho * wo * cout * reduction}


@pytest.mark.parametrize("name", CONV_CASES)
def test_conv_geometry_follows_strides_pads_dilation_and_groups(name):
    case = CONV_CASES[name]
    h, w, cin, cout, (kh, kw), (sh, sw), (pt, pl, pb, pr), (dh, dw), groups = case
    op, graph = conv_op(case)
    kernel, g = planned(op, graph)
    dims = conv_dims(case)
    assert kernel is KERNELS["conv2d"] and g.kernel == "conv2d"
    assert graph.tensors["y"].shape == (1, cout, dims["HO"], dims["WO"])  # onnx agrees with the formula
    expected = {"H": h, "W": w, "CIN": cin, "COUT": cout, "KH": kh, "KW": kw, "SH": sh, "SW": sw, "PT": pt,
                "PL": pl, "PB": pb, "PR": pr, "DH": dh, "DW": dw, "GROUPS": groups, "HO": dims["HO"],
                "WO": dims["WO"]}
    assert {k: g.shape[k] for k in expected} == expected
    assert (g.channels, g.reduction) == (cout, dims["REDUCTION"])
    assert (g.pixels, g.row) == (dims["HO"] * dims["WO"], dims["WO"])
    assert g.macs == dims["MACS"] == op.macs  # the op registry counts the same MACs
    assert g.weights == cout * cin // groups * kh * kw
    assert (g.linebuffer_bytes > 0) == (kh > 1)


@pytest.mark.parametrize("upper", [True, False], ids=["SAME_UPPER", "SAME_LOWER"])
def test_conv_auto_pad_same_puts_the_odd_pad_where_onnx_does(upper):
    h, w, (kh, kw), (sh, sw) = 8, 7, (3, 4), (2, 1)
    op, graph = single_op("Conv", {"x": (1, 3, h, w)}, {"w": (4, 3, kh, kw)}, kernel_shape=[kh, kw],
                          strides=[sh, sw], auto_pad="SAME_UPPER" if upper else "SAME_LOWER")
    _, g = planned(op, graph)
    ho, pt, pb = same_pads(h, kh, sh, upper)
    wo, pl, pr = same_pads(w, kw, sw, upper)
    assert (pt + pb, pl + pr) == (1, 3)  # odd totals: the two modes differ
    assert {k: g.shape[k] for k in ("HO", "WO", "PT", "PB", "PL", "PR")} == {
        "HO": ho, "WO": wo, "PT": pt, "PB": pb, "PL": pl, "PR": pr}


def test_conv_with_non_constant_weights_is_unsupported():
    op, graph = single_op("Conv", {"x": (1, 3, 8, 8), "w": (4, 3, 3, 3)}, kernel_shape=[3, 3])
    assert "constant" in unsupported(op, graph)


# --------------------------------------------------------------------------- geometry: dense


@pytest.mark.parametrize("trans_b", [1, 0])
def test_gemm_geometry_reads_k_and_n_through_trans_b(trans_b):
    k, n = 32, 10
    op, graph = single_op("Gemm", {"a": (1, k)}, {"b": (n, k) if trans_b else (k, n), "c": (n,)}, transB=trans_b)
    kernel, g = planned(op, graph)
    assert kernel is KERNELS["dense"]
    assert (g.shape["K"], g.shape["N"], g.shape["TRANSB"]) == (k, n, trans_b)
    assert (g.channels, g.reduction, g.pixels) == (n, k, 1)
    assert g.macs == k * n == op.macs and g.weights == k * n


def test_gemm_with_trans_a_is_unsupported():
    op, graph = single_op("Gemm", {"a": (32, 1)}, {"b": (32, 10)}, transA=1)
    assert "transA" in unsupported(op, graph)


def test_matmul_with_a_constant_matrix_is_a_dense_per_row():
    rows, k, n = 4, 32, 8
    op, graph = single_op("MatMul", {"a": (1, rows, k)}, {"b": (k, n)})
    kernel, g = planned(op, graph)
    assert kernel is KERNELS["dense"]
    assert (g.shape["K"], g.shape["N"], g.shape["ROWS"]) == (k, n, rows)
    assert (g.pixels, g.channels, g.reduction) == (rows, n, k)
    assert g.macs == rows * k * n == op.macs


def test_matmul_of_two_activations_goes_to_the_matmul_kernel():
    op, graph = single_op("MatMul", {"a": (2, 4, 32), "b": (2, 32, 8)})
    kernel, geometry = planned(op, graph)
    assert kernel.name == "matmul" and geometry.shape == {"HEADS": 2, "M": 4, "K": 32, "N": 8}
    assert geometry.linebuffer_bytes == 4 * 32 + 32 * 8 and geometry.macs == 2 * 4 * 32 * 8
    op, graph = single_op("MatMul", {"a": (1, 64, 64), "b": (1, 64, 64)})  # the cost model sees both buffers
    assert on_chip_plan(op, graph, 1, True).resident_bytes >= 2 * 64 * 64
    op, graph = single_op("MatMul", {"a": (2, 4, 32), "b": (1, 32, 8)})  # heads broadcast: neither kernel
    reason = unsupported(op, graph)
    assert "constant" in reason and "equal heads" in reason


# --------------------------------------------------------------------------- geometry: pools


@pytest.mark.parametrize(("op_type", "kernel_name"), [("MaxPool", "maxpool"), ("AveragePool", "avgpool")])
def test_window_pool_geometry(op_type, kernel_name):
    c, h, w, k, s, p = 4, 8, 9, 3, 2, 1
    op, graph = single_op(op_type, {"x": (1, c, h, w)}, kernel_shape=[k, k], strides=[s, s], pads=[p] * 4,
                          **({"count_include_pad": 1} if op_type == "AveragePool" else {}))
    kernel, g = planned(op, graph)
    ho, wo = window_out(h, k, s, p, p), window_out(w, k, s, p, p)
    assert kernel is KERNELS[kernel_name]
    assert {key: g.shape[key] for key in ("C", "KH", "KW", "SH", "SW", "HO", "WO")} == {
        "C": c, "KH": k, "KW": k, "SH": s, "SW": s, "HO": ho, "WO": wo}
    assert (g.channels, g.reduction, g.pixels, g.row) == (c, 1, ho * wo, wo)
    assert g.stream_elements == c * h * w


def test_global_average_pool_is_a_window_over_the_whole_plane():
    c, h, w = 16, 5, 7
    op, graph = single_op("GlobalAveragePool", {"x": (1, c, h, w)})
    kernel, g = planned(op, graph)
    assert kernel is KERNELS["globalavgpool"]
    assert {key: g.shape[key] for key in ("KH", "KW", "HO", "WO", "PT", "PR")} == {
        "KH": h, "KW": w, "HO": 1, "WO": 1, "PT": 0, "PR": 0}
    assert (g.pixels, g.channels) == (1, c)


@pytest.mark.parametrize(("op_type", "attrs", "word"), [  # padded averages without count_include_pad: test_movement
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}, "ceil_mode"),
])
def test_pools_the_kernels_cannot_run(op_type, attrs, word):
    op, graph = single_op(op_type, {"x": (1, 4, 8, 8)}, **attrs)
    assert word in unsupported(op, graph)


# --------------------------------------------------------------------------- geometry: add, concat, reshape


def test_add_of_equal_shapes_and_add_with_broadcast():
    op, graph = single_op("Add", {"a": (1, 8, 4, 5), "b": (1, 8, 4, 5)})
    kernel, g = planned(op, graph)
    assert kernel is KERNELS["add"] and g.shape["SIZE"] == 8 * 4 * 5 and (g.pixels, g.channels) == (20, 8)
    op, graph = single_op("Add", {"a": (1, 8, 4, 5), "b": (1, 8, 1, 1)})  # per channel: fpgaplace.hw.binary
    kernel, g = planned(op, graph)
    assert kernel is KERNELS["add_broadcast"] and g.linebuffer_bytes == 2 * 8 * 4 * 5
    op, graph = single_op("Add", {"a": (1, 8, 4, 5), "b": (1, 8, 4, 1)})
    assert "broadcast" in unsupported(op, graph)


@pytest.mark.parametrize("axis", [1, -3])
def test_concat_along_channels(axis):
    op, graph = single_op("Concat", {"a": (1, 3, 4, 5), "b": (1, 5, 4, 5)}, axis=axis)
    kernel, g = planned(op, graph)
    assert kernel is KERNELS["concat"]
    # PE channels a cycle come from one input at a time, so PE folds the parts' common divisor
    assert g.shape["CHANNELS"] == [3, 5] and g.channels == 1 and g.pixels == 20


def test_concat_of_vectors_and_concat_along_a_spatial_axis():
    op, graph = single_op("Concat", {"a": (1, 3), "b": (1, 6)}, axis=1)
    assert planned(op, graph)[1].channels == 3  # PE folds the parts' common divisor
    op, graph = single_op("Concat", {"a": (1, 3, 4, 5), "b": (1, 3, 2, 5)}, axis=2)
    assert "channel" in unsupported(op, graph)


def test_flatten_after_global_pooling_is_free_but_flatten_of_a_feature_map_is_not():
    pool = helper.make_node("GlobalAveragePool", ["x"], ["p"], name="pool")
    flatten = helper.make_node("Flatten", ["p"], ["y"], name="flatten", axis=1)
    graph = graph_of([pool, flatten], {"x": (1, 8, 4, 4)}, ["y"])
    kernel, g = planned(graph.ops["flatten"], graph)
    assert kernel.free and kernel.cycles(g, Folding()) == 0 and kernel.resources(g, Folding()).as_tuple() == (0,) * 5
    op, graph = single_op("Flatten", {"x": (1, 8, 4, 4)}, axis=1)
    assert "stream order" in unsupported(op, graph)
    op, graph = single_op("Flatten", {"x": (1, 1, 4, 4)}, axis=1)  # one channel: the order is kept
    assert planned(op, graph)[0].free


# --------------------------------------------------------------------------- which kernel


def test_kernel_for_follows_the_op_registry():
    broader = set(BROADER.values())  # reached through the kernel an op class names (plan_op)
    named = {c.kernel for c in op_registry.all_classes() if c.kernel}
    assert set(KERNELS) - CONTEXT_KERNELS - REWRITE_KERNELS == named | broader
    assert all(name in KERNELS for name in BROADER)
    for op_class in op_registry.all_classes():
        for domain in op_class.domains:
            op = Op(name="v", op_type=op_class.name, domain=domain, attrs={}, inputs=[], outputs=[], index=0)
            expected = KERNELS[op_class.kernel] if op_class.kernel else None
            assert kernel_for(op) is expected, op_class.name
    assert kernel_for(Op("v", "Conv", "com.example", {}, [], [], 0)) is None  # unknown domain


@pytest.mark.parametrize(("op_type", "attrs", "extra_inputs"), [
    ("Sigmoid", {}, {}),
    ("LogSoftmax", {"axis": -1}, {}),
    ("TopK", {}, {"k": np.array([2], np.int64)}),
])
def test_ops_without_a_kernel_are_unsupported_with_a_reason(op_type, attrs, extra_inputs):
    outputs = ["y", "indices"] if op_type == "TopK" else ["y"]
    node = helper.make_node(op_type, ["x", *extra_inputs], outputs, name="op", **attrs)
    graph = graph_of([node], {"x": (1, 10)}, outputs, extra_inputs)
    assert unsupported(graph.ops["op"], graph) == f"no hardware kernel for {op_type}"


def qdq_graph() -> OpGraph:
    """x -> Q -> DQ -> Conv(DQ(int8 w)) -> Q -> DQ, then Add of that and the float ``x`` itself
    (an input with no DequantizeLinear) -> Q -> DQ -> y."""
    rng = np.random.default_rng(0)
    constants = {
        "sx": np.array(0.05, np.float32), "zx": np.array(3, np.int8),
        "wq": rng.integers(-127, 128, (4, 4, 3, 3)).astype(np.int8), "sw": np.array(0.01, np.float32),
        "zw": np.array(0, np.int8), "sc": np.array(0.1, np.float32), "zc": np.array(-2, np.int8),
        "sa": np.array(0.2, np.float32), "za": np.array(0, np.int8),
    }
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"], name="x_q"),
        helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"], name="x_dq"),
        helper.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wd"], name="w_dq"),
        helper.make_node("Conv", ["xd", "wd"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("QuantizeLinear", ["c", "sc", "zc"], ["cq"], name="c_q"),
        helper.make_node("DequantizeLinear", ["cq", "sc", "zc"], ["cd"], name="c_dq"),
        helper.make_node("Add", ["cd", "x"], ["a"], name="add"),
        helper.make_node("QuantizeLinear", ["a", "sa", "za"], ["aq"], name="a_q"),
        helper.make_node("DequantizeLinear", ["aq", "sa", "za"], ["y"], name="a_dq"),
    ]
    return graph_of(nodes, {"x": (1, 4, 6, 6)}, ["y"], constants)


def test_in_a_qdq_graph_an_input_without_dequantize_linear_is_unsupported():
    graph = qdq_graph()
    assert planned(graph.ops["conv"], graph)[0] is KERNELS["conv2d"]
    reason = unsupported(graph.ops["add"], graph)
    assert "'x'" in reason and "DequantizeLinear" in reason


# --------------------------------------------------------------------------- cycles and resources


def lane_cycles(out_rows: int, out_row: int, busiest_stream: int, fold: Folding) -> int:
    """The documented lane-kernel count: rows * ceil(row / MMV) * ceil(elements per pixel / PE)."""
    per_pixel = busiest_stream // (out_rows * out_row)
    return out_rows * math.ceil(out_row / fold.mmv) * math.ceil(per_pixel / fold.pe)


@pytest.mark.parametrize("name", CONV_CASES)
def test_conv_cycles_are_the_line_buffer_and_mvau_count_for_every_folding(name):
    """The count kernels.h documents (and tests/test_hls_kernels.py measures in C): the rows the
    first output row needs, then per output row the MVAU's WO/MMV x COUT/PE x KKG/SIMD steps or
    the refill of the next row's input rows, whichever is longer; plus a reorder buffer's drain."""
    case = CONV_CASES[name]
    kernel, g = planned(*conv_op(case))
    h, w, cin, *_ = case
    dims = conv_dims(case)
    foldings = kernel.foldings(g)
    assert len({(f.pe, f.simd, f.mmv) for f in foldings}) > 4
    assert any(f.mmv > 1 and f.pe < dims["COUT"] for f in foldings)  # pixels side by side through a buffer
    if name == "dilated":  # WO = 7: widths 2, 3 and 4 leave a short last group, through the reorder buffer
        assert {2, 3, 4} <= {f.mmv for f in foldings if kernel.reorders(g, f)}
    for fold in foldings:
        width = kernel.input_width(g, fold)
        assert (w * cin) % width == 0 and width <= MAX_LINE_WIDTH
        config = {**g.shape, "PE": fold.pe, "SIMD": fold.simd, "MMV": fold.mmv}
        assert kernel.cycles(g, fold) == conv_ticks(config, width, kernel.output_width(g, fold)), fold
        steps = math.ceil(dims["WO"] / fold.mmv) * (dims["COUT"] // fold.pe) * (dims["REDUCTION"] // fold.simd)
        assert kernel.cycles(g, fold) >= dims["HO"] * steps  # never below the MVAU count
    assert kernel.cycles(g, Folding()) >= dims["MACS"]  # unfolded: one MAC per cycle and the line buffer's fill


def test_dense_cycles_are_the_mvau_count_for_every_folding():
    rows, k, n = 3, 24, 12
    kernel, g = planned(*single_op("MatMul", {"a": (1, rows, k)}, {"b": (k, n)}))
    for fold in kernel.foldings(g):
        assert kernel.cycles(g, fold) == rows * (n // fold.pe) * (k // fold.simd), fold


@pytest.mark.parametrize("op_type", ["MaxPool", "Add", "Concat", "Relu", "GlobalAveragePool"])
def test_lane_kernel_cycles_for_every_folding(op_type):
    c, h, w = 6, 8, 10
    if op_type == "MaxPool":
        op, graph = single_op(op_type, {"x": (1, c, h, w)}, kernel_shape=[2, 2], strides=[2, 2])
        out_rows, out_row, busiest = h // 2, w // 2, c * h * w  # reads 4 inputs per output pixel
    elif op_type == "GlobalAveragePool":
        op, graph = single_op(op_type, {"x": (1, c, h, w)})
        out_rows, out_row, busiest = 1, 1, c * h * w
    elif op_type == "Concat":
        op, graph = single_op(op_type, {"a": (1, c, h, w), "b": (1, 2, h, w)}, axis=1)
        out_rows, out_row, busiest = h, w, (c + 2) * h * w
    else:
        inputs = {"a": (1, c, h, w), "b": (1, c, h, w)} if op_type == "Add" else {"a": (1, c, h, w)}
        op, graph = single_op(op_type, inputs)
        out_rows, out_row, busiest = h, w, c * h * w
    kernel, g = planned(op, graph)
    assert not kernel.uses_dsp
    for fold in kernel.foldings(g):
        lanes = fold.pe * fold.mmv
        if op_type == "MaxPool":  # rows through a line buffer, PE x MMV lanes a cycle (kernels.h)
            steps = out_row // fold.mmv * (c // fold.pe)
            assert kernel.cycles(g, fold) == sliding_ticks(g.shape, c, lanes, 2, steps), fold
        elif op_type == "GlobalAveragePool":  # reads the plane, then writes the channels
            assert kernel.cycles(g, fold) == (h * w + 1) * c // lanes, fold
        else:
            assert kernel.cycles(g, fold) == lane_cycles(out_rows, out_row, busiest, fold), fold


def dot_and_lane_geometries() -> list[tuple[str, Kernel, Geometry]]:
    cases = [(name, *planned(*conv_op(case))) for name, case in CONV_CASES.items()]
    cases.append(("gemm", *planned(*single_op("Gemm", {"a": (1, 48)}, {"b": (20, 48)}, transB=1))))
    cases.append(("maxpool", *planned(*single_op("MaxPool", {"x": (1, 12, 8, 8)}, kernel_shape=[2, 2],
                                                 strides=[2, 2]))))
    cases.append(("add", *planned(*single_op("Add", {"a": (1, 10, 3, 7), "b": (1, 10, 3, 7)}))))
    return cases


@pytest.mark.parametrize(("name", "kernel", "g"), dot_and_lane_geometries(), ids=lambda v: v if isinstance(v, str)
                         else "")
def test_every_folding_divides_channels_and_reduction(name, kernel, g):
    foldings = kernel.foldings(g)
    assert foldings and len(set(foldings)) == len(foldings)
    for fold in foldings:
        assert g.channels % fold.pe == 0 and g.reduction % fold.simd == 0 and 1 <= fold.mmv <= g.row, fold
        assert kernel.uses_dsp or fold.simd == 1
    assert {f.pe for f in foldings} == {d for d in range(1, g.channels + 1) if g.channels % d == 0}
    if kernel.uses_dsp:
        assert {f.simd for f in foldings} == {d for d in range(1, g.reduction + 1) if g.reduction % d == 0}


def multipliers_built(kernel: Kernel, g: Geometry, fold: Folding, core: FpgaCore) -> int:
    """An independent count of the DSPs the RTL op library builds: every MAC lane (m, p, i) takes
    a multiplier, except that on a DSP48E2 (two int8 MACs a DSP) the second lane of a pair sharing
    an operand rides on the first's (pixels m, m+1 share the weight; channels p, p+1 of an
    ungrouped layer share the input); plus two partial products (m split at bit 17) per
    requantization unit, each one DSP while the dot product fits the A port (25 / 27 bits), both
    on one multiplier in a two-cycle unit where its results come at most every other cycle and
    that takes fewer multipliers."""
    if not kernel.uses_dsp:
        return 0
    pixel_pairs = core.macs_per_dsp == 2 and fold.mmv >= 2
    channel_pairs = (core.macs_per_dsp == 2 and not pixel_pairs and fold.pe >= 2
                     and g.shape.get("GROUPS", 1) == 1)
    macs = 0
    for m in range(fold.mmv):
        for p in range(fold.pe):
            rides = (pixel_pairs and m % 2 == 1) or (channel_pairs and p % 2 == 1)
            macs += 0 if rides else fold.simd
    folds = g.reduction // fold.simd
    results = fold.pe * fold.mmv
    units = min(u for u in range(1, results + 1) if results % u == 0 and u * folds >= results)
    serial = min(u for u in range(1, results + 1) if results % u == 0 and u * folds >= 2 * results) \
        if folds >= 2 else results + units * 2
    products = serial if serial < 2 * units else 2 * units
    dot_width = (g.reduction * 128 * 128).bit_length() + 1
    a_port = 27 if core.macs_per_dsp == 2 else 25
    assert dot_width <= a_port + 17, "the cases' dot products take at most two DSPs a partial product"
    return macs + products * (1 if dot_width <= a_port else 2)


@pytest.mark.parametrize("board", ["pynq-z2", "zcu104"])  # 1 and 2 int8 MACs per DSP
def test_dsps_are_the_multipliers_the_rtl_builds(board):
    core = shipped_core(board)
    for name, kernel, g in dot_and_lane_geometries():
        for fold in kernel.foldings(g):
            used = kernel.resources(g, fold, core)
            assert used.dsp == multipliers_built(kernel, g, fold, core), (name, fold)


def test_resources_grow_with_pe_and_simd():
    core = shipped_core("pynq-z2")
    kernel, g = planned(*conv_op(CONV_CASES["strided with uneven pads"]))  # 16 channels, reduction 72
    steps = [Folding(1, 1), Folding(2, 1), Folding(2, 2), Folding(4, 2), Folding(4, 8), Folding(16, 72)]
    used = [kernel.resources(g, fold, core) for fold in steps]
    for smaller, larger in zip(used, used[1:], strict=False):
        assert larger.dsp > smaller.dsp and larger.lut > smaller.lut and larger.ff > smaller.ff
    lane_kernel, lane_g = planned(*single_op("Add", {"a": (1, 8, 4, 4), "b": (1, 8, 4, 4)}))
    luts = [lane_kernel.resources(lane_g, Folding(pe), core).lut for pe in (1, 2, 4, 8)]
    assert luts == sorted(set(luts))


def test_free_kernels_cost_nothing():
    pool = helper.make_node("GlobalAveragePool", ["x"], ["p"], name="pool")
    flatten = helper.make_node("Flatten", ["p"], ["y"], name="flatten", axis=1)
    graph = graph_of([pool, flatten], {"x": (1, 8, 4, 4)}, ["y"])
    kernel, g = planned(graph.ops["flatten"], graph)
    core = shipped_core("zcu104")
    assert kernel.foldings(g) == [Folding()]
    assert kernel.ideal_cycles(g, core) == 0 and kernel.cycles(g, Folding()) == 0


@pytest.fixture(scope="module")
def placed_qdq_cnn() -> Design:
    return Design(models.cnn_residual(batch=1), "zcu104", profile_cpu=False).quantized(random_samples=2)


def test_ideal_cycles_of_a_cores_dot_products_are_its_macs_over_its_dsps(placed_qdq_cnn):
    design, graph = placed_qdq_cnn, placed_qdq_cnn.graph
    on = design.op_devices()
    checked = 0
    for core in design.board.cores:
        dot = [graph.ops[name] for name, device in on.items() if device is core
               and op_registry.is_dot_product(graph.ops[name].op_type)]
        if not dot:
            continue
        plans = [planned(op, graph) for op in dot]
        ideal = sum(kernel.ideal_cycles(g, core) for kernel, g in plans)
        # each MAC's share of the DSPs and of its stage's requantizers (one unit per `reduction`
        # lanes), stretched by the stage's unoverlapped line-buffer fill
        from fpgaplace.hw.kernel import requantizer_dsps

        share = sum(op.macs * kernel.fill_factor(g) * (1 / core.macs_per_dsp + requantizer_dsps(g.reduction, core, g)
                                                       / g.reduction)
                    for op, (kernel, g) in zip(dot, plans, strict=True))
        assert ideal == pytest.approx(share / core.dsp, rel=1e-12)
        assert ideal > sum(op.macs * kernel.fill_factor(g) for op, (kernel, g) in zip(dot, plans, strict=True)) / (
            core.dsp * core.macs_per_dsp)  # the requantizers cost DSPs too
        assert all(kernel.fill_factor(g) >= 1 for kernel, g in plans)
        checked += 1
    assert checked >= 1


def test_the_cost_models_fpga_latency_is_the_kernels_share_in_microseconds(placed_qdq_cnn):
    design, graph, board = placed_qdq_cnn, placed_qdq_cnn.graph, placed_qdq_cnn.board
    problem, core = design.problem, board.cores[0]
    kind = problem.accelerator_kinds()[0]
    resident = resident_ops(graph, board, PRECISION_BYTES["int8"])
    finite = 0
    for v, name in enumerate(problem.names):
        result = plan_op(graph.ops[name], graph)
        if not result:
            assert problem.latency[v, kind] == math.inf, name
            continue
        kernel, g = result
        streamed = 0 if name in resident else kernel.weight_bytes(g, 1)
        expected = cycles_to_us(max(kernel.ideal_cycles(g, core), streamed_cycles(streamed, core, board.dram)), core)
        if math.isfinite(problem.latency[v, kind]):
            assert problem.latency[v, kind] == pytest.approx(expected, rel=1e-12), name
            finite += 1
    assert finite > 10
    assert cycles_to_us(300, core) == pytest.approx(300 / core.clock_mhz)


# --------------------------------------------------------------------------- folding a core


def stages_of(graph: OpGraph) -> list[Stage]:
    """Every op of ``graph`` that a core computes (free ops left out), weights resident."""
    stages = []
    for name, op in graph.ops.items():
        result = plan_op(op, graph)
        if result and not result[0].free:
            stages.append(Stage(name, *result))
    return stages


@pytest.fixture(scope="module")
def cnn_stages() -> list[Stage]:
    return stages_of(from_model(models.cnn_residual(batch=1)))


def board_file(tmp_path: Path, name: str, base: str = "pynq-z2", **fabric: int) -> Path:
    """A copy of a shipped single board with one core and the given fabric overrides."""
    data = yaml.safe_load(files("fpgaplace.boards").joinpath(f"{base}.yaml").read_text())
    data.update(name=name, cores=1)
    data["fabric"].update(fabric)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_folding_interval_is_the_slowest_stage_within_the_budget(cnn_stages):
    board = load_board("pynq-z2")
    core = board.cores[0]
    folded = fold_core(cnn_stages, core, board.dram)
    assert [f.stage for f in folded.stages] == cnn_stages
    for f in folded.stages:
        assert f.cycles == f.stage.kernel.cycles(f.stage.geometry, f.folding)
        assert f.resources == f.stage.kernel.resources(f.stage.geometry, f.folding, core, True)
    assert folded.compute_interval == max(f.cycles for f in folded.stages)
    assert folded.dram_cycles == 0 and folded.interval == folded.compute_interval
    total = folded.stages[0].resources
    for f in folded.stages[1:]:
        total += f.resources
    assert folded.resources == total and not total.over(core_budget(core))
    ideal = sum(s.kernel.ideal_cycles(s.geometry, core) for s in cnn_stages)
    assert folded.interval >= 0.9 * ideal  # no folding beats the core's budget share by much


def test_a_smaller_core_folds_to_a_longer_interval(cnn_stages, tmp_path):
    big_board = load_board(board_file(tmp_path, "big"))
    small_board = load_board(board_file(tmp_path, "small", dsp=40))
    big, small = big_board.cores[0], small_board.cores[0]
    assert small.dsp < big.dsp and small.bram36 == big.bram36
    big_fold = fold_core(cnn_stages, big, big_board.dram)
    small_fold = fold_core(cnn_stages, small, small_board.dram)
    assert small_fold.interval > big_fold.interval
    assert small_fold.resources.dsp <= small.dsp and not small_fold.resources.over(core_budget(small))


def test_streamed_weights_bound_the_interval_by_the_dram_port(cnn_stages):
    board = load_board("pynq-z2")
    core = board.cores[0]
    streamed = [Stage(s.op, s.kernel, s.geometry, resident=s.geometry.weights == 0) for s in cnn_stages]
    folded = fold_core(streamed, core, board.dram)
    weight_bytes = sum(s.geometry.weights for s in cnn_stages)
    bytes_per_cycle = board.dram.gbps * 1e3 / core.clock_mhz
    assert folded.dram_cycles == math.ceil(weight_bytes / bytes_per_cycle)
    assert folded.interval == max(folded.compute_interval, folded.dram_cycles)
    assert all(f.resources.bram36 + f.resources.uram == 0 for f in folded.stages if f.stage.geometry.weights
               and not f.stage.geometry.linebuffer_bytes)  # streamed weights take no on-chip memory


def test_weights_that_fit_no_folding_name_the_core_and_the_resource(tmp_path):
    board = load_board(board_file(tmp_path, "little-bram", bram36=12))  # floor(0.8 * (12 - 4)) = 6 BRAM36
    core = board.cores[0]
    kernel, g = planned(*single_op("Conv", {"x": (1, 64, 8, 8)}, {"w": (64, 64, 3, 3)}, kernel_shape=[3, 3],
                                   pads=[1, 1, 1, 1]))
    assert g.weights * 8 > core.bram36 * 36 * 1024  # more bits than the core's BRAM holds
    with pytest.raises(FpgaplaceError) as caught:
        fold_core([Stage("big_conv", kernel, g)], core, board.dram)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{core.name}:")
    assert "big_conv" in message and "bram36" in message


# --------------------------------------------------------------------------- planned share vs folded interval

FIXTURE_BOARDS = Path(__file__).resolve().parent / "boards"
TOO_SMALL_FOR_THE_CNN = (str(FIXTURE_BOARDS / "ulx3s-45f-small.yaml"),)  # 13 DSPs a core, no CPU (see below)
KV260_TWO_CORES = str(FIXTURE_BOARDS / "kv260-two-cores.yaml")  # the cut the refinement tests were written for


AGREEMENT_BOARDS = ("pynq-z2", "ultra96-v2", "kv260", "zcu104")
AGREEING = [("cnn_residual", image, board) for image in (32, 64) for board in AGREEMENT_BOARDS]
AGREEMENT_MODELS = {"cnn_residual": models.cnn_residual, "mobilenet_v2": models.mobilenet_v2}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Callable[..., CompileResult]:
    """A model of ``AGREEMENT_MODELS`` at ``image`` pixels compiled for a board (each once per module)."""
    cache: dict[tuple[str, int, str], CompileResult] = {}

    def compile_case(board: str, image: int, model: str = "cnn_residual") -> CompileResult:
        if (board, image, model) not in cache:
            design = Design(AGREEMENT_MODELS[model](batch=1, image=image), board, profile_cpu=False)
            folder = tmp_path_factory.mktemp(f"{model}-{Path(board).stem}-{image}") / "project"
            cache[board, image, model] = design.compile(folder, random_samples=2)
        return cache[board, image, model]

    return compile_case


@pytest.mark.parametrize(("model", "image", "board"), [*AGREEING, ("mobilenet_v2", 96, KV260_TWO_CORES)])
def test_folded_interval_agrees_with_the_plan_and_no_folding_does_better(compiled, model, image, board):
    """Each core's folded interval is within 10% of its planned compute (the sum of the kept
    placement's per-op latencies on it: compile refines the placement where the first one's
    folding disagrees, ``flow.refine``), and the folder's heuristic choice is within 2% of the
    least interval any choice of the stages' foldings reaches within every resource of the core
    its FIFOs leave (``least_interval``, proven by SCIP)."""
    result = compiled(board, image, model)
    graph = from_model(onnx.load(result.project / result.design["model"]["file"]))
    cores = {c.name: c for c in project_board(load_record(result.project)).cores}  # the cut compile chose
    assert result.design["cores"]
    for record in result.design["cores"]:
        planned_cycles = record["planned_compute_us"] * record["clock_mhz"]
        assert abs(record["interval_cycles"] - planned_cycles) <= 0.1 * planned_cycles, (record["name"], planned_cycles)
        stages = [Stage(layer["op"], *planned(graph.ops[layer["op"]], graph), layer["resident"])
                  for layer in record["layers"]]
        fifos = record["fifo_resources"]  # the folder folds the layers in the room its FIFOs leave
        core = cores[record["name"]]
        room = replace(core, bram36=core.bram36 - fifos["bram36"], uram=core.uram - fifos["uram"],
                       lut=core.lut - fifos["lut"])
        least = least_interval(stages, room)
        assert least.proven, record["name"]
        assert least.interval <= record["compute_interval_cycles"] <= 1.02 * least.interval, record["name"]


@pytest.mark.parametrize(("image", "board"), [(32, b) for b in list_boards()] + [(64, b) for b in AGREEMENT_BOARDS])
def test_no_folding_beats_the_planned_compute_by_much(compiled, image, board):
    for core in compiled(board, image).design["cores"]:
        assert core["interval_us"] >= 0.9 * core["planned_compute_us"], core["name"]
        assert core["interval_cycles"] == max(core["compute_interval_cycles"], core["dram_cycles"])
        assert core["compute_interval_cycles"] == max(layer["cycles"] for layer in core["layers"])


@pytest.mark.parametrize("board", TOO_SMALL_FOR_THE_CNN)
def test_a_core_too_small_for_its_ops_is_one_line_naming_the_resource(compiled, board):
    """On a board without CPUs nothing can move off the cores: where a core's ops need more DSPs
    at their smallest folding than it has, compile says so in one line (use against the core)."""
    with pytest.raises(FpgaplaceError) as info:
        compiled(board, 32)
    message = str(info.value)
    assert "\n" not in message and "dsp at the smallest folding; the core has" in message
    needed, has = [int(word) for word in message.replace(";", " ").split() if word.isdigit()][-2:]
    assert needed > has == load_board(board).cores[0].dsp


def test_compile_refines_a_placement_whose_folding_disagrees_with_its_plan(compiled):
    """MobileNetV2's first placement on kv260 cut into two cores puts the BRAM-hungry early layers
    on one core, whose folding then runs beyond 10% of its plan; compile places again on the folding's costs and keeps
    the fastest placement it saw, whose record matches design.json."""
    result = compiled(KV260_TWO_CORES, 96, "mobilenet_v2")
    refinement = result.design["placement"]["refinement"]
    rounds, chosen = refinement["rounds"], refinement["rounds"][refinement["chosen"]]
    assert any(abs(ratio - 1) > 0.1 for ratio in rounds[0]["cores"].values()), rounds[0]
    assert 2 <= len(rounds) <= 1 + REFINE_ROUNDS
    assert chosen["interval_us"] == min(r["interval_us"] for r in rounds) < rounds[0]["interval_us"]
    for record in result.design["cores"]:
        ratio = record["interval_us"] / record["planned_compute_us"]
        assert chosen["cores"][record["name"]] == pytest.approx(ratio, rel=1e-9)
        assert abs(ratio - 1) <= 0.1, record["name"]
    assert max(record["interval_us"] for record in result.design["cores"]) <= chosen["interval_us"]


def test_compile_keeps_a_placement_it_was_given(tmp_path):
    """A placement set with ``set_placement`` is not placed again: one round, the same devices."""
    model = models.cnn_residual(batch=1, image=32)
    placed = Design(model, "pynq-z2", profile_cpu=False).quantized(random_samples=2)
    placed.place()
    given = Design(model, "pynq-z2", profile_cpu=False).quantized(random_samples=2)
    given.set_placement(placed.placement.placement)
    result = given.compile(tmp_path / "project")
    assert len(result.design["placement"]["refinement"]["rounds"]) == 1
    assert result.design["placement"]["devices"] == {op: device.name for op, device in placed.op_devices().items()}


def test_a_refinement_round_that_cannot_be_lowered_keeps_the_placement_before_it(tmp_path, monkeypatch):
    """A refinement round that cannot be built (its placement, or its cores' folding, fails) ends
    the refinement; the first placement is built. The CNN's first folding on ultra96-v2 runs more
    than 10% beyond its plan, so a round is tried; the injected failure hits its placement."""
    placements = []
    place = Design.place

    def place_once(self, *args, **kwargs):
        placements.append(self)
        if len(placements) > 1:  # placed again: a refinement round
            raise FpgaplaceError("core0: does not fit (injected)")
        return place(self, *args, **kwargs)

    monkeypatch.setattr(Design, "place", place_once)
    said = []
    design = Design(models.cnn_residual(batch=1, image=32), "ultra96-v2", profile_cpu=False, progress=said.append)
    result = design.compile(tmp_path / "project", random_samples=2)
    rounds = result.design["placement"]["refinement"]["rounds"]
    assert len(rounds) == 1 and any(abs(r - 1) > 0.1 for r in rounds[0]["cores"].values())
    assert any(line.startswith("refining stopped: ") and "(injected)" in line for line in said)


def test_a_refined_design_scales_the_latencies_it_names_and_no_others(placed_qdq_cnn):
    design = placed_qdq_cnn
    problem = design.problem
    assert design.placement.evaluation.feasible  # placed with the defaults
    kind = problem.accelerator_kinds()[0]
    v = int(np.flatnonzero(np.isfinite(problem.latency[:, kind]) & (problem.latency[:, kind] > 0))[0])
    u = int(np.flatnonzero(problem.size > 0)[0])
    refined = design.refined({(v, kind): 1.5}, {u: 1.25})
    assert refined.problem.latency[v, kind] == 1.5 * problem.latency[v, kind]
    changed = refined.problem.latency != problem.latency
    assert changed.sum() == 1 and changed[v, kind]
    assert refined.problem.size[u] == 1.25 * problem.size[u]
    assert np.flatnonzero(refined.problem.size != problem.size).tolist() == [u]
    assert not refined.placed and design.placed  # the original keeps its placement and costs


@pytest.mark.slow
def test_a_core_whose_ops_fit_no_folding_is_placed_again_with_them_grown(monkeypatch):
    """A dense block of 12 layers (tests/real_models.densenet) at 112 x 112 on kv260: the first
    placement charges one core fewer bytes than its line buffers and per-channel words take once
    folded (BRAM or LUTRAM, never URAM), so its ops fit no folding even with every weight
    streamed. The refinement grows that core's ops by at most ``MEMORY_GROWTH`` a round and
    places again (``flow.refine.fitting_lowering``) until every core folds; where the FIFOs in
    front of the concats' waiting inputs are what does not fit, each op is charged its own
    FIFOs' bytes (``flow.refine.fifo_sizes``) and the next placement moves ops off the core; where
    the ops need more of a memory than the growth rounds left can reach, each is charged its share
    of it (``flow.refine.logic_bytes``; since the global pool's sums are priced in block RAM). The
    FIFOs are kept in BRAM here (``codegen.lower.FIFO_STORES``): packed into kv260's URAM they fit
    beside the layers, and no op needs charging."""
    from real_models import densenet

    from fpgaplace.codegen import lower
    from fpgaplace.flow import refine as refinement
    from fpgaplace.flow.refine import FIFO_ROUNDS, MEMORY_GROWTH, MEMORY_ROUNDS, lower_cores, refine
    from fpgaplace.hw.folding import DoesNotFit

    charged: dict[int, float] = {}

    def charging(sizes):
        def charged_sizes(*args):
            added = sizes(*args)
            for v, size in added.items():
                charged[v] = charged.get(v, 0.0) + size
            return added
        return charged_sizes

    fifo_sizes = refinement.fifo_sizes
    monkeypatch.setattr(refinement, "fifo_sizes", charging(fifo_sizes))
    monkeypatch.setattr(refinement, "logic_bytes", charging(refinement.logic_bytes))
    monkeypatch.setattr(lower, "FIFO_STORES", (False,))
    said: list[str] = []
    design = Design(densenet(layers=12, image=112), "kv260", profile_cpu=False).quantized(random_samples=2)
    design.place()
    with pytest.raises(DoesNotFit) as first:
        lower_cores(design)
    grown = [v for v, name in enumerate(design.problem.names) if design.op_devices()[name].name == first.value.core]
    refined = refine(design, said.append)
    assert 1 <= sum(line.startswith("placing again: ") for line in said) <= MEMORY_ROUNDS + FIFO_ROUNDS
    assert any("FIFOs" in line for line in said if line.startswith("placing again: ")) and charged
    assert {core.name for core in refined.lowered.cores} == {
        device.name for device in refined.design.op_devices().values() if device.name.startswith("core")}
    for core in refined.lowered.cores:  # the FIFOs fit beside the layers
        used = core.folding.resources + core.fifo_resources
        assert not used.over(core_budget(core.core)), core.name
    sized = [v for v in grown if design.problem.size[v] > 0]  # a free op's 0 bytes stay 0 unless charged FIFOs
    first_sizes, sizes = design.problem.size, refined.design.problem.size
    assert sized and all(sizes[v] > first_sizes[v] for v in sized)
    assert all(sizes[v] <= (first_sizes[v] + charged.get(v, 0.0)) * MEMORY_GROWTH ** MEMORY_ROUNDS + 1e-6
               for v in range(len(sizes)))  # a charge grows with its op in later rounds


def test_the_least_interval_is_proven_and_the_folder_reaches_it_where_dsps_alone_bind():
    """On a core where only DSPs bind, SCIP's least interval equals the least one the stages'
    fewest DSPs reach, and the folder's choice reaches it; one target below it is infeasible."""
    board = load_board("pynq-z2")
    core = board.cores[0]
    shapes = [(1, 64, 16, 16), (1, 64, 8, 8)]
    stages = [Stage(f"conv{i}", *planned(*single_op("Conv", {"x": x}, {"w": (64, x[1], 3, 3)}, kernel_shape=[3, 3],
                                                       pads=[1, 1, 1, 1]))) for i, x in enumerate(shapes)]
    fastest = max(min(s.kernel.cycles(s.geometry, f) for f in s.kernel.foldings(s.geometry)) for s in stages)
    least = least_interval(stages, core)
    assert least.proven and least.probes >= 1
    assert least.interval > fastest  # the DSPs bind: the fastest foldings do not fit
    folding = fold_core(stages, core, board.dram)
    assert least.interval == dsp_only_interval(stages, core) == folding.compute_interval
    used, budget = folding.resources.as_tuple(), core_budget(core).as_tuple()
    shares = {name: u / b for name, u, b in zip(("dsp", "bram36", "uram", "lut", "ff"), used, budget, strict=True) if b}
    assert max(shares, key=shares.get) == "dsp" and "dram" not in folding.binding()  # the DSPs are what runs out


def dsp_only_interval(stages: list[Stage], core: FpgaCore) -> int:
    """The least interval any choice of foldings reaches when only DSPs are counted (a lower
    bound of every folding's interval): for a target T each stage takes its fewest DSPs among
    its foldings within T, and T is the least candidate whose total fits. O(T * F)."""
    options = [[(s.kernel.cycles(s.geometry, f), s.kernel.resources(s.geometry, f, core).dsp)
                for f in s.kernel.foldings(s.geometry)] for s in stages]
    for target in sorted({cycles for stage in options for cycles, _ in stage}):
        fewest = [min((dsp for cycles, dsp in stage if cycles <= target), default=None) for stage in options]
        if None not in fewest and sum(fewest) <= core.dsp:
            return target
    raise AssertionError("no target fits the DSPs")


# ---- precision: element widths in bits (1, 2, 4, 8, 16, 32) ---------------------------------


def test_weight_bytes_count_bits_per_element_and_keep_the_byte_argument():
    from fpgaplace.hw.kernel import with_precision

    kernel, g = planned(*conv_op(CONV_CASES["strided with uneven pads"]))
    assert kernel.weight_bytes(g) == kernel.weight_bytes(g, 1) == g.weights  # int8 as before
    assert kernel.weight_bytes(g, 2) == kernel.weight_bytes(g, bits=16) == 2 * g.weights
    for bits in (1, 2, 4):
        assert kernel.weight_bytes(g, bits=bits) == math.ceil(g.weights * bits / 8)
        assert kernel.weight_bytes(with_precision(g, bits, 8)) == math.ceil(g.weights * bits / 8)
    with pytest.raises(FpgaplaceError, match="expected one of 1, 2, 4, 8, 16, 32 bits, got 3"):
        kernel.weight_bytes(g, bits=3)
    with pytest.raises(FpgaplaceError, match="weight_bits"):
        with_precision(g, 5)


@pytest.mark.parametrize("board", ["pynq-z2", "zcu104"])
def test_narrow_lanes_take_packed_dsps_or_luts_and_binary_takes_luts(board):
    from fpgaplace.hw.kernel import lane_choice, packed_dsps, with_precision

    core = shipped_core(board)
    kernel, g8 = planned(*conv_op(CONV_CASES["strided with uneven pads"]))
    fold = Folding(4, 8)
    requantizers = kernel.resources(g8, Folding(4, 8), core).dsp - kernel.mac_dsps(g8, fold, core)
    assert requantizers > 0
    for bits in (4, 2, 16):
        g = with_precision(g8, bits, bits)
        assert kernel.cycles(g, fold) == kernel.cycles(g8, fold), "cycles do not depend on the width"
        lanes = lane_choice(core, bits, bits)
        if bits == 16:
            assert kernel.mac_dsps(g, fold, core) == fold.lanes
            lane = 1 + kernel_requantizer_share(g, core)  # DSPs of a MAC lane: its multiplier, its requantizer part
            lane8 = 1 / core.macs_per_dsp + kernel_requantizer_share(g8, core)
            assert kernel.ideal_cycles(g, core) == pytest.approx(kernel.ideal_cycles(g8, core) * lane / lane8)
        elif lanes.kind == "dsp":  # channel groups packed into one multiplier each
            assert kernel.mac_dsps(g, fold, core) == fold.simd * packed_dsps(lanes, fold.pe, core)
        else:  # LUT lanes: no multiplier, and more LUTs than the same stage's XNOR lanes
            assert kernel.mac_dsps(g, fold, core) == 0
            assert kernel.resources(g, fold, core).lut > kernel.resources(with_precision(g8, 1, 1), fold, core).lut
    binary = with_precision(g8, 1, 1)
    # weights streamed (no banks): the binary lanes' XNOR-popcounts take LUTs, the DSPs are the requantizers'
    used = kernel.resources(binary, fold, core, resident=False)
    assert kernel.mac_dsps(binary, fold, core) == 0 and used.dsp == requantizers - (
        kernel.requantizer_dsps(g8, fold, core) - kernel.requantizer_dsps(binary, fold, core)) and used.lut > 0
    assert math.isfinite(kernel.ideal_cycles(binary, core)) and kernel.ideal_cycles(binary, core) > 0
    # resident weight banks hold bits: at 1 bit a bank is an eighth of the 8-bit one
    assert kernel.weight_bytes(binary) * 8 == kernel.weight_bytes(g8)


def test_int8_costs_are_unchanged_by_the_precision_fields():
    from fpgaplace.hw.kernel import with_precision

    core = shipped_core("zcu104")
    for name, kernel, g in dot_and_lane_geometries():
        same = with_precision(g, 8, 8)
        assert same == g, name
        for fold in kernel.foldings(g)[:20]:
            assert kernel.cycles(same, fold) == kernel.cycles(g, fold)
            assert kernel.resources(same, fold, core) == kernel.resources(g, fold, core)


def kernel_requantizer_share(g, core) -> float:
    """The requantizer DSPs one MAC lane carries: a unit per ``reduction`` lanes."""
    from fpgaplace.hw.kernel import requantizer_dsps

    return requantizer_dsps(g.reduction, core, g) / g.reduction
