"""The integer reference (fpgaplace.hw.quant, fpgaplace.hw.reference) against independent
computations: exact rational arithmetic for the rounding, onnxruntime's integer ops
(ConvInteger, MatMulInteger, MaxPool) for the exact accumulators, and float math on dequantized
values / QLinearConv for the int8 outputs (within 1 LSB, and exact away from rounding ties)."""

from __future__ import annotations

import math
import time
from fractions import Fraction

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from fpgaplace.hw import quant, reference
from fpgaplace.hw.quant import activation_bounds, quantize_multiplier, requantize, requantize2

# ---------------------------------------------------------------- helpers


def exact_requantize(value: Fraction, zero_point: int, lo: int, hi: int) -> int:
    """clip(round_half_even(value) + zero_point, lo, hi) in exact rational arithmetic."""
    return min(hi, max(lo, round(value) + zero_point))  # Fraction.__round__ rounds half to even


def run_onnx(node, inputs: dict[str, np.ndarray], output_type: int, opset: int = 21) -> np.ndarray:
    """Run one onnx node on onnxruntime's CPU provider; returns its single output."""
    element = {np.dtype(np.int8): TensorProto.INT8, np.dtype(np.int32): TensorProto.INT32,
               np.dtype(np.float32): TensorProto.FLOAT}
    inputs = {name: np.asarray(value) for name, value in inputs.items()}
    graph = helper.make_graph(
        [node],
        "probe",
        [helper.make_tensor_value_info(name, element[value.dtype], value.shape) for name, value in inputs.items()],
        [helper.make_tensor_value_info(node.output[0], output_type, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, inputs)[0]


def random_int8(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.integers(-128, 128, size=shape, dtype=np.int8)


def assert_matches_real(y: np.ndarray, real_value: np.ndarray, error_bound: np.ndarray, zy: int,
                        lo: int = -128, hi: int = 127) -> None:
    """``y`` is within 1 LSB of clip(round(real_value) + zy) everywhere, and equal to it wherever
    ``real_value`` is further than ``error_bound`` (the fixed-point multiplier's error) from a
    rounding tie; most elements must be such safe ones, so the check is not vacuous."""
    expected = np.clip(np.rint(real_value) + zy, lo, hi)
    assert np.abs(y.astype(np.float64) - expected).max() <= 1
    distance_to_tie = np.abs(real_value - np.floor(real_value) - 0.5)
    safe = distance_to_tie > error_bound + 1e-9 * (1 + np.abs(real_value))
    assert safe.mean() > 0.9
    np.testing.assert_array_equal(y[safe], expected[safe])


def multiplier_error(acc: np.ndarray, m: np.ndarray, s: np.ndarray, real: np.ndarray) -> np.ndarray:
    """|acc| * |m * 2**-s - real|: how far the fixed-point product can be from acc * real."""
    return np.abs(acc) * np.abs(m * np.exp2(-s.astype(np.float64)) - real)


def multipliers(reals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pairs = [quantize_multiplier(float(r)) for r in reals]
    return np.array([p[0] for p in pairs], dtype=np.int64), np.array([p[1] for p in pairs], dtype=np.int64)


# ---------------------------------------------------------------- quantize_multiplier


def test_quantize_multiplier_is_normalized_and_accurate_over_many_magnitudes():
    rng = np.random.default_rng(1)
    for real in np.exp2(rng.uniform(-32, 29.9, size=2000)):
        m, s = quantize_multiplier(float(real))
        assert 2**30 <= m < 2**31 and 1 <= s <= 62
        error = abs(Fraction(m, 2**s) - Fraction(float(real)))
        assert error <= Fraction(1, 2 ** (s + 1))  # m is the nearest integer to real * 2**s
        assert error / Fraction(float(real)) <= Fraction(1, 2**31)


@pytest.mark.parametrize("real, expected", [(1.0, (2**30, 30)), (0.5, (2**30, 31)), (0.75, (3 * 2**29, 31)),
                                            (2.0**29, (2**30, 1)), (2.0**-32, (2**30, 62))])
def test_quantize_multiplier_powers_of_two_are_exact(real, expected):
    assert quantize_multiplier(real) == expected


def test_quantize_multiplier_rounding_up_to_2_31_halves_m():
    m, s = quantize_multiplier(1.0 - 2.0**-40)
    assert (m, s) == (2**30, 30)


def test_quantize_multiplier_tiny_scales_keep_shift_62():
    assert quantize_multiplier(2.0**-40) == (2**22, 62)
    assert quantize_multiplier(3.0 * 2.0**-64) == (1, 62)  # 0.75 rounds to 1
    assert quantize_multiplier(1e-30) == (0, 62)
    m, s = quantize_multiplier(2.0**-33 * 1.5)
    assert s == 62 and m == 3 * 2**28


@pytest.mark.parametrize("real", [0.0, -1.0, -1e-9, math.inf, -math.inf, math.nan, 2.0**30, 2.0**31,
                                  2.0**30 * (1 - 2.0**-52)])
def test_quantize_multiplier_rejects_out_of_range(real):
    with pytest.raises(ValueError, match="quantize_multiplier"):
        quantize_multiplier(real)


# ---------------------------------------------------------------- requantize


@settings(max_examples=300, deadline=None)
@given(
    acc=st.integers(-(2**32) + 1, 2**32 - 1),
    m=st.integers(0, 2**31 - 1),
    s=st.integers(1, 62),
    zero_point=st.integers(-128, 127),
    bounds=st.tuples(st.integers(-128, 127), st.integers(-128, 127)).map(sorted),
)
def test_requantize_equals_exact_rational_rounding(acc, m, s, zero_point, bounds):
    lo, hi = bounds
    got = requantize(np.array([acc]), m, s, zero_point, lo, hi)
    assert got.dtype == np.int8
    assert int(got[0]) == exact_requantize(Fraction(acc * m, 2**s), zero_point, lo, hi)


@settings(max_examples=200, deadline=None)
@given(
    a=st.integers(-(2**31) + 1, 2**31 - 1),
    b=st.integers(-(2**31) + 1, 2**31 - 1),
    ma=st.integers(0, 2**31 - 1),
    mb=st.integers(0, 2**31 - 1),
    s=st.integers(1, 62),
    zero_point=st.integers(-128, 127),
)
def test_requantize2_equals_exact_rational_rounding(a, b, ma, mb, s, zero_point):
    got = requantize2(np.array([a]), ma, np.array([b]), mb, s, zero_point)
    assert int(got[0]) == exact_requantize(Fraction(a * ma + b * mb, 2**s), zero_point, -128, 127)


def test_requantize_ties_round_to_even_for_both_signs():
    acc = np.array([1, 3, 5, 7, -1, -3, -5, -7, 2, -2])
    # m * 2**-s = 0.5: x.5 values round to the even neighbour
    np.testing.assert_array_equal(requantize(acc, 2**30, 31, 0), [0, 2, 2, 4, 0, -2, -2, -4, 1, -1])
    # the same with s = 1, m = 1
    np.testing.assert_array_equal(requantize(acc, 1, 1, 0), [0, 2, 2, 4, 0, -2, -2, -4, 1, -1])
    # just off the tie rounds to the nearest
    np.testing.assert_array_equal(requantize(np.array([1, -1]), 2**30 + 1, 31, 0), [1, -1])
    np.testing.assert_array_equal(requantize(np.array([1, -1]), 2**30 - 1, 31, 0), [0, 0])


def test_requantize_shift_62_with_the_largest_operands():
    acc = np.array([2**32 - 1, -(2**32) + 1, 2**31])
    m = 2**31 - 1
    expected = [exact_requantize(Fraction(int(a) * m, 2**62), 5, -128, 127) for a in acc]
    np.testing.assert_array_equal(requantize(acc, m, 62, 5), expected)
    assert expected == [7, 3, 6]


def test_requantize_saturates_and_applies_bounds_after_the_zero_point():
    acc = np.array([10**6, -(10**6), 100, -100, 0])
    np.testing.assert_array_equal(requantize(acc, 2**30, 30, 0), [127, -128, 100, -100, 0])
    np.testing.assert_array_equal(requantize(acc, 2**30, 30, 50), [127, -128, 127, -50, 50])
    np.testing.assert_array_equal(requantize(acc, 2**30, 30, -20, lo=-20, hi=60), [60, -20, 60, -20, -20])


def test_requantize_broadcasts_per_channel_multipliers_on_the_last_axis():
    acc = np.arange(-6, 6).reshape(2, 2, 3) * 1000
    m = np.array([2**30, 2**30, 3 * 2**29])
    s = np.array([30, 35, 40])
    got = requantize(acc, m, s, 1)
    expected = np.vectorize(lambda a, mm, ss: exact_requantize(Fraction(int(a) * int(mm), 2 ** int(ss)), 1, -128,
                                                                127))(acc, m, s)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"acc": np.array([2**32]), "m": 1, "s": 1}, "acc"),
        ({"acc": np.array([1]), "m": 2**31, "s": 1}, "m must"),
        ({"acc": np.array([1]), "m": -1, "s": 1}, "m must"),
        ({"acc": np.array([1]), "m": 1, "s": 0}, "s must"),
        ({"acc": np.array([1]), "m": 1, "s": 63}, "s must"),
        ({"acc": np.array([1.5]), "m": 1, "s": 1}, "integers"),
        ({"acc": np.array([1]), "m": 1, "s": 1, "lo": 5, "hi": 4}, "bounds"),
        ({"acc": np.array([1]), "m": 1, "s": 1, "zero_point": 128}, "zero_point"),
    ],
)
def test_requantize_rejects_bad_arguments(kwargs, message):
    arguments = {"zero_point": 0, **kwargs}
    with pytest.raises(ValueError, match=message):
        requantize(**arguments)


def test_requantize2_rejects_operands_that_could_overflow():
    with pytest.raises(ValueError, match="a must"):
        requantize2(np.array([2**31]), 1, np.array([0]), 1, 1, 0)


# ---------------------------------------------------------------- activation bounds, float conversions


@pytest.mark.parametrize(
    "op_type, bounds, scale, zero_point, expected",
    [
        (None, None, 0.1, 3, (-128, 127)),
        ("Relu", None, 0.1, 3, (3, 127)),
        ("Relu", None, 0.1, -128, (-128, 127)),
        ("Clip", (0.0, 6.0), 6.0 / 255, -128, (-128, 127)),
        ("Clip", (0.0, 6.0), 0.1, -10, (-10, 50)),
        ("Clip", {"min": -1.0}, 0.1, 0, (-10, 127)),
        ("Clip", {"max": 1.25}, 0.5, 0, (-128, 2)),  # 2.5 rounds to even
        ("Clip", (1.75, None), 0.5, 0, (4, 127)),  # 3.5 rounds to even
        ("Clip", (100.0, 200.0), 0.1, 0, (127, 127)),  # whole range above int8: saturated
    ],
)
def test_activation_bounds(op_type, bounds, scale, zero_point, expected):
    assert activation_bounds(op_type, bounds, scale, zero_point) == expected


@pytest.mark.parametrize(
    "op_type, bounds, scale", [("Sigmoid", None, 0.1), ("Clip", (1.0, 0.0), 0.1), ("Relu", None, 0.0),
                               ("Clip", (1.0,), 0.1)]
)
def test_activation_bounds_rejects(op_type, bounds, scale):
    with pytest.raises(ValueError, match="activation_bounds"):
        activation_bounds(op_type, bounds, scale, 0)


def test_quantize_and_dequantize_match_onnxruntime():
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(4000) * 30).astype(np.float32)
    x[:6] = [0.25, 0.75, -0.25, -1.25, 1e6, -1e6]  # ties (x / 0.5) and saturation
    scale, zero_point = np.float32(0.5), np.int8(-3)
    onnx_q = run_onnx(helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"]),
                      {"x": x, "s": scale, "z": zero_point}, TensorProto.INT8)
    ours = quant.quantize_float(x, float(scale), int(zero_point))
    np.testing.assert_array_equal(ours, onnx_q)
    onnx_f = run_onnx(helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"]),
                      {"q": ours, "s": np.float32(0.37), "z": zero_point}, TensorProto.FLOAT)
    dequantized = quant.dequantize(ours, 0.37, int(zero_point))
    assert dequantized.dtype == np.float32
    np.testing.assert_array_equal(dequantized, onnx_f)


# ---------------------------------------------------------------- conv2d

CONV_CASES = [
    # (H, W, Cin, Cout, KH, KW, stride, pads, dilation, groups)
    (7, 9, 3, 8, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1),
    (8, 8, 4, 6, 3, 3, (2, 2), (1, 0, 1, 2), (1, 1), 2),
    (9, 7, 6, 6, 3, 3, (1, 2), (1, 1, 1, 1), (1, 1), 6),  # depthwise
    (10, 10, 5, 7, 1, 1, (2, 2), (0, 0, 0, 0), (1, 1), 1),
    (11, 8, 4, 4, 3, 2, (1, 1), (2, 1, 0, 1), (2, 3), 1),  # dilated, asymmetric pads
    (12, 12, 3, 4, 7, 7, (2, 2), (3, 3, 3, 3), (1, 1), 1),
    (6, 6, 8, 16, 2, 2, (2, 1), (0, 1, 1, 0), (1, 1), 4),
    (5, 5, 2, 3, 5, 5, (1, 1), (4, 4, 4, 4), (1, 1), 1),  # windows mostly padding
]


def conv_inputs(rng, case):
    h, w, cin, cout, kh, kw, _, _, _, groups = case
    return random_int8(rng, (h, w, cin)), random_int8(rng, (cout, kh, kw, cin // groups))


def onnx_conv_integer(x, w, zx, stride, pads, dilation, groups) -> np.ndarray:
    """ConvInteger's exact int32 accumulators in our channels-last layout."""
    out = run_onnx(
        helper.make_node("ConvInteger", ["x", "w", "xz"], ["y"], strides=list(stride), pads=list(pads),
                         dilations=list(dilation), group=groups),
        {"x": x.transpose(2, 0, 1)[None].copy(), "w": w.transpose(0, 3, 1, 2).copy(), "xz": np.int8(zx)},
        TensorProto.INT32,
    )
    return out[0].transpose(1, 2, 0)


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_accumulators_equal_onnxruntime_conv_integer(case):
    rng = np.random.default_rng(hash(case) % 2**32)
    x, w = conv_inputs(rng, case)
    *_, stride, pads, dilation, groups = case
    bias = rng.integers(-(2**20), 2**20, size=w.shape[0], dtype=np.int32)
    zx = int(rng.integers(-128, 128))
    acc = reference.conv2d_accumulate(x, w, bias, zx=zx, stride=stride, pads=pads, dilation=dilation, groups=groups)
    expected = onnx_conv_integer(x, w, zx, stride, pads, dilation, groups).astype(np.int64) + bias
    assert acc.dtype == np.int64
    np.testing.assert_array_equal(acc, expected)


def test_conv2d_accumulate_equals_the_definition_loop():
    """A direct transcription of the spec's sum on a small grouped, strided, padded case."""
    rng = np.random.default_rng(3)
    case = (6, 5, 4, 6, 3, 2, (2, 1), (1, 0, 2, 1), (1, 2), 2)
    x, w = conv_inputs(rng, case)
    h, wd, cin, cout, kh, kw, (sh, sw), (top, left, bottom, right), (dh, dw), g = case
    bias = rng.integers(-1000, 1000, size=cout, dtype=np.int32)
    ho = (h + top + bottom - dh * (kh - 1) - 1) // sh + 1
    wo = (wd + left + right - dw * (kw - 1) - 1) // sw + 1
    expected = np.zeros((ho, wo, cout), dtype=np.int64)
    cg, og = cin // g, cout // g
    for oh in range(ho):
        for ow in range(wo):
            for co in range(cout):
                total = int(bias[co])
                g0 = (co // og) * cg
                for i in range(kh):
                    for j in range(kw):
                        ih, iw = oh * sh - top + i * dh, ow * sw - left + j * dw
                        if 0 <= ih < h and 0 <= iw < wd:
                            for ci in range(g0, g0 + cg):
                                total += (int(x[ih, iw, ci]) - 7) * int(w[co, i, j, ci - g0])
                expected[oh, ow, co] = total
    got = reference.conv2d_accumulate(x, w, bias, zx=7, stride=(sh, sw), pads=(top, left, bottom, right),
                                      dilation=(dh, dw), groups=g)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("case", CONV_CASES[:4])
def test_conv2d_within_one_lsb_of_qlinearconv_and_exact_away_from_ties(case):
    rng = np.random.default_rng(hash(case) % 2**31 + 1)
    x, w = conv_inputs(rng, case)
    *_, stride, pads, dilation, groups = case
    cout = w.shape[0]
    x_scale, y_scale = 0.05, 0.4
    w_scale = rng.uniform(0.001, 0.02, size=cout).astype(np.float32)
    zx, zy = -5, 9
    real = x_scale * w_scale.astype(np.float64) / y_scale
    m, s = multipliers(real)
    bias = rng.integers(-5000, 5000, size=cout, dtype=np.int32)
    lo, hi = activation_bounds("Relu", None, y_scale, zy)
    y = reference.conv2d(x, w, bias, m, s, zx=zx, zy=zy, lo=lo, hi=hi, stride=stride, pads=pads,
                         dilation=dilation, groups=groups)
    assert y.dtype == np.int8
    acc = onnx_conv_integer(x, w, zx, stride, pads, dilation, groups).astype(np.int64) + bias
    assert_matches_real(y, acc * real, multiplier_error(acc, m, s, real), zy, lo, hi)
    onnx_y = run_onnx(
        helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"],
                         strides=list(stride), pads=list(pads), dilations=list(dilation), group=groups),
        {"x": x.transpose(2, 0, 1)[None].copy(), "xs": np.float32(x_scale), "xz": np.int8(zx),
         "w": w.transpose(0, 3, 1, 2).copy(), "ws": w_scale, "wz": np.zeros(cout, np.int8),
         "ys": np.float32(y_scale), "yz": np.int8(zy), "b": bias},
        TensorProto.INT8,
    )[0].transpose(1, 2, 0)
    unclipped_diff = np.abs(y.astype(int) - np.maximum(onnx_y.astype(int), lo))
    assert unclipped_diff.max() <= 1


def test_conv2d_resnet50_sized_layer_is_exact_and_fast():
    rng = np.random.default_rng(4)
    x, w = random_int8(rng, (28, 28, 128)), random_int8(rng, (128, 3, 3, 128))
    bias = rng.integers(-(2**16), 2**16, size=128, dtype=np.int32)
    start = time.perf_counter()
    acc = reference.conv2d_accumulate(x, w, bias, zx=3, pads=(1, 1, 1, 1))
    elapsed = time.perf_counter() - start
    np.testing.assert_array_equal(acc, onnx_conv_integer(x, w, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1) + bias)
    assert elapsed < 10.0  # 115 M MACs; about 0.1 s as a BLAS product


@pytest.mark.parametrize(
    "change, message",
    [
        ({"x": np.zeros((4, 4, 4), np.float32)}, "x must be int8"),
        ({"w": np.zeros((4, 3, 3), np.int8)}, "w must have 4"),
        ({"groups": 3}, "groups=3"),
        ({"bias": np.zeros(5, np.int32)}, "bias must"),
        ({"m": np.ones(3, np.int64)}, "m must"),
        ({"stride": (0, 1)}, "stride"),
        ({"pads": (1, 1, 1)}, "pads"),
        ({"w": np.zeros((4, 5, 5, 4), np.int8)}, "does not fit"),
    ],
)
def test_conv2d_rejects_bad_shapes(change, message):
    arguments = {"x": np.zeros((4, 4, 4), np.int8), "w": np.zeros((4, 3, 3, 4), np.int8),
                 "bias": np.zeros(4, np.int32), "m": np.full(4, 2**30), "s": np.full(4, 30)}
    options = {"groups": 1, "stride": (1, 1), "pads": (0, 0, 0, 0)}
    for key, value in change.items():
        (arguments if key in arguments else options)[key] = value
    with pytest.raises(ValueError, match=message):
        reference.conv2d(**arguments, zx=0, zy=0, **options)


# ---------------------------------------------------------------- dense


def test_dense_accumulators_equal_matmul_integer_and_outputs_match_float_math():
    rng = np.random.default_rng(5)
    n, k = 37, 300
    x, w = random_int8(rng, (k,)), random_int8(rng, (n, k))
    bias = rng.integers(-(2**18), 2**18, size=n, dtype=np.int32)
    zx, zy = 11, -3
    acc = reference.dense_accumulate(x, w, bias, zx=zx)
    matmul = run_onnx(helper.make_node("MatMulInteger", ["a", "b", "az"], ["y"]),
                      {"a": x[None], "b": w.T.copy(), "az": np.int8(zx)}, TensorProto.INT32)[0]
    np.testing.assert_array_equal(acc, matmul.astype(np.int64) + bias)
    real = rng.uniform(1e-5, 1e-3, size=n)
    m, s = multipliers(real)
    y = reference.dense(x, w, bias, m, s, zx=zx, zy=zy)
    assert_matches_real(y, acc * real, multiplier_error(acc, m, s, real), zy)


def test_dense_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="dense: x has shape"):
        reference.dense(np.zeros(5, np.int8), np.zeros((3, 4), np.int8), np.zeros(3, np.int32), 2**30, 30, zx=0, zy=0)


# ---------------------------------------------------------------- pooling

POOL_CASES = [
    # (H, W, C, kernel, stride, pads)
    (8, 8, 5, (2, 2), (2, 2), (0, 0, 0, 0)),
    (9, 7, 3, (3, 3), (2, 2), (1, 1, 1, 1)),
    (7, 10, 4, (3, 2), (1, 3), (1, 0, 2, 1)),
    (7, 7, 6, (7, 7), (1, 1), (0, 0, 0, 0)),  # global
]


@pytest.mark.parametrize("case", POOL_CASES)
def test_maxpool_identity_rescale_equals_onnxruntime_maxpool(case):
    h, w, c, kernel, stride, pads = case
    rng = np.random.default_rng(h * 100 + w)
    x = random_int8(rng, (h, w, c))
    got = reference.maxpool(x, kernel=kernel, stride=stride, pads=pads, zx=-7, m=2**30, s=30, zy=-7)
    onnx_y = run_onnx(helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=list(kernel), strides=list(stride),
                                       pads=list(pads)), {"x": x.transpose(2, 0, 1)[None].copy()}, TensorProto.INT8)
    np.testing.assert_array_equal(got, onnx_y[0].transpose(1, 2, 0))


@pytest.mark.parametrize("case", POOL_CASES)
def test_maxpool_rescale_matches_float_math(case):
    h, w, c, kernel, stride, pads = case
    rng = np.random.default_rng(h * 10 + c)
    x = random_int8(rng, (h, w, c))
    zx, zy, real = 4, -20, 0.61
    m, s = quantize_multiplier(real)
    identity = reference.maxpool(x, kernel=kernel, stride=stride, pads=pads, zx=zx, m=2**30, s=30, zy=zx)
    got = reference.maxpool(x, kernel=kernel, stride=stride, pads=pads, zx=zx, m=m, s=s, zy=zy)
    centred = identity.astype(np.int64) - zx
    assert_matches_real(got, centred * real, multiplier_error(centred, np.array(m), np.array(s), real), zy)


def test_maxpool_rejects_a_window_of_only_padding():
    with pytest.raises(ValueError, match="only padding"):
        reference.maxpool(np.zeros((3, 3, 1), np.int8), kernel=(1, 1), pads=(1, 1, 1, 1), zx=0, m=2**30, s=30, zy=0)


@pytest.mark.parametrize("case", POOL_CASES)
def test_avgpool_matches_float_mean_of_dequantized_values(case):
    h, w, c, kernel, stride, pads = case
    rng = np.random.default_rng(h + w + c)
    x = random_int8(rng, (h, w, c))
    x_scale, zx, y_scale, zy = 0.1, 3, 0.0713, -4
    count = kernel[0] * kernel[1]  # count_include_pad=1
    real = x_scale / (y_scale * count)
    m, s = quantize_multiplier(real)
    got = reference.avgpool(x, kernel=kernel, stride=stride, pads=pads, zx=zx, m=m, s=s, zy=zy)
    centred = np.pad(x.astype(np.float64) - zx, ((pads[0], pads[2]), (pads[1], pads[3]), (0, 0)))
    ho, wo = got.shape[:2]
    sums = np.array([[centred[i * stride[0]:i * stride[0] + kernel[0], j * stride[1]:j * stride[1] + kernel[1]]
                      .sum(axis=(0, 1)) for j in range(wo)] for i in range(ho)])
    assert_matches_real(got, sums * real, multiplier_error(sums, np.array(m), np.array(s), real), zy)


# ---------------------------------------------------------------- add, requant, concat


def test_add_matches_float_sum_of_dequantized_values():
    rng = np.random.default_rng(6)
    a, b = random_int8(rng, (6, 5, 7)), random_int8(rng, (6, 5, 7))
    (sa, za), (sb, zb), (sy, zy) = (0.05, -3), (0.11, 8), (0.13, 2)
    shift = 30
    ma, mb = round(sa / sy * 2**shift), round(sb / sy * 2**shift)
    lo, hi = activation_bounds("Relu", None, sy, zy)
    got = reference.add(a, b, za=za, ma=ma, zb=zb, mb=mb, s=shift, zy=zy, lo=lo, hi=hi)
    da, db = a.astype(np.float64) - za, b.astype(np.float64) - zb
    error = (np.abs(da) * abs(ma / 2**shift - sa / sy) + np.abs(db) * abs(mb / 2**shift - sb / sy))
    assert_matches_real(got, da * sa / sy + db * sb / sy, error, zy, lo, hi)


def test_add_rejects_different_shapes():
    with pytest.raises(ValueError, match="same shape"):
        reference.add(np.zeros((2, 3), np.int8), np.zeros((3, 2), np.int8), za=0, ma=1, zb=0, mb=1, s=1, zy=0)


def test_requant_relu_and_clip_match_float_activation():
    rng = np.random.default_rng(7)
    x = random_int8(rng, (4, 4, 16))
    (sx, zx), (sy, zy) = (0.08, 5), (0.05, -100)
    m, s = quantize_multiplier(sx / sy)
    centred = x.astype(np.int64) - zx
    for op_type, bounds, activation in [("Relu", None, lambda v: np.maximum(v, 0)),
                                        ("Clip", (0.0, 6.0), lambda v: np.clip(v, 0, 6))]:
        lo, hi = activation_bounds(op_type, bounds, sy, zy)
        got = reference.requant(x, zx=zx, m=m, s=s, zy=zy, lo=lo, hi=hi)
        expected_float = quant.quantize_float(activation(centred * sx), sy, zy)
        assert np.abs(got.astype(int) - expected_float).max() <= 1
        assert_matches_real(got, centred * (sx / sy), multiplier_error(centred, np.array(m), np.array(s), sx / sy),
                            zy, lo, hi)


def test_concat_with_equal_scales_is_plain_concatenation():
    rng = np.random.default_rng(8)
    xs = [random_int8(rng, (3, 4, c)) for c in (2, 5, 1)]
    got = reference.concat(xs, zxs=[6, 6, 6], ms=[2**30] * 3, ss=[30] * 3, zy=6)
    np.testing.assert_array_equal(got, np.concatenate(xs, axis=-1))
    vectors = [random_int8(rng, (c,)) for c in (3, 4)]
    np.testing.assert_array_equal(reference.concat(vectors, zxs=[0, 0], ms=[2**30] * 2, ss=[30] * 2, zy=0),
                                  np.concatenate(vectors))


def test_concat_rescales_each_input_to_the_output_scale():
    rng = np.random.default_rng(9)
    xs = [random_int8(rng, (3, 3, c)) for c in (4, 3)]
    scales, zero_points, (sy, zy) = [0.1, 0.03], [-2, 7], (0.06, 1)
    pairs = [quantize_multiplier(sc / sy) for sc in scales]
    got = reference.concat(xs, zxs=zero_points, ms=[p[0] for p in pairs], ss=[p[1] for p in pairs], zy=zy)
    assert got.shape == (3, 3, 7)
    expected = np.concatenate([quant.quantize_float(quant.dequantize(x, sc, z), sy, zy)
                               for x, sc, z in zip(xs, scales, zero_points, strict=True)], axis=-1)
    assert np.abs(got.astype(int) - expected).max() <= 1


@pytest.mark.parametrize(
    "xs, zxs, message",
    [
        ([np.zeros((2, 2, 1), np.int8), np.zeros((2, 3, 1), np.int8)], [0, 0], "agree"),
        ([np.zeros((2, 2, 1), np.int8)], [0, 0], "zero points"),
        ([], [], "at least one"),
    ],
)
def test_concat_rejects_mismatched_inputs(xs, zxs, message):
    with pytest.raises(ValueError, match=message):
        reference.concat(xs, zxs=zxs, ms=[1] * len(zxs), ss=[1] * len(zxs), zy=0)


# ---------------------------------------------------------------- weight folding for the C++ kernels


def test_fold_weights_places_each_weight_at_its_documented_index():
    rng = np.random.default_rng(10)
    w = random_int8(rng, (6, 3, 3, 4))
    pe, simd = 3, 12
    folded = reference.fold_weights(w, pe, simd)
    rows = w.reshape(6, 36)
    tiles = 36 // simd
    for co in range(6):
        for k in range(36):
            (nf, p), (t, i) = divmod(co, pe), divmod(k, simd)
            assert folded[((nf * tiles + t) * pe + p) * simd + i] == rows[co, k]
    with pytest.raises(ValueError, match="PE=4"):
        reference.fold_weights(w, 4, 1)
