"""LayerNormalization on a core: integer mean and variance of a row, a digit-by-digit inverse
square root and gamma/beta folded with the output requantization; within 1 LSB of the real layer
norm, bit-exact in C simulation, and on the cores between two Gemms within 1 LSB of onnxruntime."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from fpgaplace.flow.design import Design
from fpgaplace.hw.geometry import Folding, Geometry, Unsupported
from fpgaplace.hw.layernorm import MAX_N, gains, isqrt_steps, layernorm_int8, layernorm_rows
from fpgaplace.sim.csim import run_csim

ORT_TOLERANCE_LSB = 1
"""The measured bound of the compiled model's outputs against onnxruntime on its QDQ model."""


def test_rows_are_the_last_axis_of_rank_2_or_3():
    assert layernorm_rows((1, 4, 16), -1) == (4, 16)
    assert layernorm_rows((6, 32), 1) == (6, 32)
    assert isinstance(layernorm_rows((1, 4, 16), 1), Unsupported)  # normalizes 4 x 16: not one row
    assert isinstance(layernorm_rows((1, 4, 8, 8), -1), Unsupported)  # rank 4 streams channels last
    assert isinstance(layernorm_rows((2, MAX_N + 1), -1), Unsupported)


@pytest.mark.parametrize("value", [0, 1, 3, 4, 99, 2**40 + 7, 2**62 - 1])
def test_the_square_root_is_the_exact_floor(value):
    assert isqrt_steps(value, 31) == math.isqrt(value)


@pytest.mark.parametrize(("n", "sx", "sy"), [(16, 0.05, 0.03), (64, 0.02, 0.05), (12, 0.5, 0.02)])
def test_integer_layer_norm_is_within_one_step_of_the_real_one(n, sx, sy):
    rng = np.random.default_rng(n)
    x = rng.integers(-128, 128, (30, n), dtype=np.int8)
    x[0] = 7  # a constant row: only epsilon under the root
    x[1, :] = 0
    x[1, 0] = 1  # the smallest variance that is not zero
    gamma, beta, zy, eps = rng.normal(1, 0.3, n), rng.normal(0, 0.3, n), 3, 1e-5
    mult, offset, s = gains(gamma / sy, beta / sy, "test")
    e = round(4 * eps * n * n / sx**2)
    got = layernorm_int8(x, mult, offset, n=n, e=e, s=s, zy=zy).reshape(30, n)
    real = x.astype(np.float64) * sx
    norm = (real - real.mean(1, keepdims=True)) / np.sqrt(real.var(1, keepdims=True) + eps)
    exact = norm * gamma / sy + beta / sy
    want = np.clip(np.rint(exact) + zy, -128, 127)
    assert np.abs(got - want).max() <= 1
    assert np.mean(got == want) > 0.99 and len(np.unique(got)) > 20
    bound = np.abs(gamma / sy).max() * 2.0**-12  # the module docstring's: a miss only this near a tie
    tie_distance = np.abs(exact - np.floor(exact) - 0.5)
    assert np.all(tie_distance[got != want] <= bound), tie_distance[got != want]


def encoder_block(rows: int = 4, hidden: int = 16) -> onnx.ModelProto:
    """x[rows, 8] -> Gemm (8 -> hidden) -> LayerNormalization -> Gemm (hidden -> 6)."""
    rng = np.random.default_rng(5)

    def const(name: str, value) -> onnx.TensorProto:
        return numpy_helper.from_array(np.asarray(value, np.float32), name)

    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1, name="fc1"),
             helper.make_node("LayerNormalization", ["h", "gamma", "beta"], ["n"], axis=-1, epsilon=1e-5, name="ln"),
             helper.make_node("Gemm", ["n", "w2", "b2"], ["y"], transB=1, name="fc2")]
    weights = [const("w1", rng.normal(0, 0.5, (hidden, 8))), const("b1", rng.normal(0, 0.5, hidden)),
               const("gamma", rng.normal(1, 0.2, hidden)), const("beta", rng.normal(0, 0.2, hidden)),
               const("w2", rng.normal(0, 0.5, (6, hidden))), const("b2", rng.normal(0, 0.5, 6))]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, 6])
    graph = helper.make_graph(nodes, "encoder_block", [x], [y], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_an_encoder_block_with_its_layer_norm_runs_on_the_cores(tmp_path):
    design = Design(encoder_block(), "zcu104", profile_cpu=False).quantized(random_samples=8)
    design.place(method="single")
    result = design.compile(tmp_path / "p")
    kernels = [layer["kernel"] for core in result.design["cores"] for layer in core["layers"]]
    assert "layernorm" in kernels and result.cpu_ops == [], (kernels, result.cpu_ops)
    check = run_csim(tmp_path / "p", samples=6)
    assert check.ok and all(c.bit_exact for c in check.cores)
    assert all(o.max_abs_diff_lsb is not None and o.max_abs_diff_lsb <= ORT_TOLERANCE_LSB for o in check.outputs)


def test_an_epsilon_too_large_for_the_input_scale_names_the_op():
    from fpgaplace.hw.layernorm import epsilon_term
    from fpgaplace.model.ir import Op
    from fpgaplace.util.errors import FpgaplaceError

    op = Op(name="ln7", op_type="LayerNormalization", domain="", attrs={"epsilon": 10.0}, inputs=["h"],
            outputs=["n"], index=0)
    with pytest.raises(FpgaplaceError, match="op 'ln7': epsilon 10"):
        epsilon_term(op, 512, 1e-4)
    assert epsilon_term(Op(name="ln", op_type="LayerNormalization", domain="", attrs={}, inputs=["h"],
                           outputs=["n"], index=0), 16, 0.02) == round(4e-5 * 256 / 0.02**2)


def rtl_case(rows: int, n: int, seed: int) -> tuple[dict, dict, Geometry]:
    """A layer's config, arrays and geometry for ``rows`` rows of ``n``, gamma and beta at random."""
    rng = np.random.default_rng(seed)
    mult, offset, s = gains(rng.normal(1, 0.3, n) / 0.03, rng.normal(0, 0.3, n) / 0.03, "test")
    config = {"SIZE": rows * n, "N": n, "E": round(4e-5 * n * n / 0.05**2), "S": s, "ZY": -5, "LO": -128, "HI": 127}
    geometry = Geometry("layernorm", rows, n, 1, stream_elements=rows * n, row=1, linebuffer_bytes=n,
                        shape={"SIZE": rows * n, "N": n, "ROWS": rows})
    return config, {"mult": mult, "offset": offset}, geometry


@pytest.mark.parametrize(("rows", "n", "lanes"), [(2, 12, 3), (3, 16, 16)])
def test_layernorm_rtl_bit_exact_and_cycles(tmp_path, rows, n, lanes):
    from test_rtl_ops import assert_verilog_2005_clean, check_cycles, render_op, simulate_case

    config, arrays, geometry = rtl_case(rows, n, n)
    inputs = np.random.default_rng(n).integers(-128, 128, (3, rows * n), dtype=np.int8)
    inputs[0, :n] = 9  # a constant row: only epsilon under the root
    result = simulate_case("layernorm", (config, arrays, [inputs], Folding(lanes, 1, 1)), tmp_path, geometry=geometry)
    check_cycles(result, f"layernorm {rows}x{n}")
    assert_verilog_2005_clean(render_op("layernorm", config, arrays, Folding(lanes, 1, 1), 100), tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize(("board", "family", "n", "lanes"), [("pynq-z2", "xc7", 12, 2), ("zcu104", "xcup", 16, 2),
                                                             ("pynq-z2", "xc7", 520, 2), ("zcu104", "xcup", 768, 2)])
def test_layernorm_dsps_equal_yosys(tmp_path, board, family, n, lanes):
    """A lane's x**2, D r, t M and N x products and a row's S1**2 and N S2 take the DSPs the op library
    counts (N a power of two: shifts; N = 520 and 768: D wider than the B port)."""
    from fpgaplace.board.load import load_board
    from fpgaplace.codegen import rtl
    from fpgaplace.hw import KERNELS
    from fpgaplace.sim import yosys

    core = load_board(board).cores[0]
    config, arrays, geometry = rtl_case(2, n, n)
    folding = Folding(lanes, 1, 1)
    op = rtl.render_op("layernorm", config, arrays, folding, 100)
    got = yosys.synthesize(rtl.RtlModule(op.module.top, {**rtl.library(), **op.module.files}), tmp_path, family,
                           dsp_only=True)
    assert got.dsp == KERNELS["layernorm"].resources(geometry, folding, core).dsp > 0, got
