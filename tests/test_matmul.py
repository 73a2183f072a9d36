"""MatMul of two activations on a core (attention's Q Kᵀ and softmax(.) V): quantized to QDQ around
both operands, compiled with every op on the cores, bit-exact in C simulation and within 1 LSB of
onnxruntime, bit-exact in RTL with the modelled cycles, and its DSPs those yosys maps."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from fpgaplace.flow.design import Design
from fpgaplace.hw import KERNELS, Folding, Unsupported
from fpgaplace.hw.lowering import multipliers
from fpgaplace.hw.matmul import matmul_int8
from fpgaplace.model.quantize import quantize_model
from fpgaplace.project.record import DesignRecord
from fpgaplace.sim.csim import run_csim
from fpgaplace.util.errors import FpgaplaceError

MATMUL = KERNELS["matmul"]


def attention(seq: int = 8, dim: int = 16, seed: int = 0) -> onnx.ModelProto:
    """x [1, seq, dim] -> Q, K, V projections -> softmax(Q Kᵀ) V, Kᵀ by a Transpose."""
    rng = np.random.default_rng(seed)
    nodes = [helper.make_node("MatMul", ["x", f"w{t}"], [t], name=f"{t}_proj") for t in "qkv"]
    nodes += [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1], name="k_t"),
              helper.make_node("MatMul", ["q", "kt"], ["s"], name="scores"),
              helper.make_node("Softmax", ["s"], ["p"], axis=-1, name="softmax"),
              helper.make_node("MatMul", ["p", "v"], ["y"], name="context")]
    weights = [numpy_helper.from_array(rng.normal(0, 0.3, (dim, dim)).astype(np.float32), f"w{t}") for t in "qkv"]
    x, y = (helper.make_tensor_value_info(t, TensorProto.FLOAT, [1, seq, dim]) for t in "xy")
    graph = helper.make_graph(nodes, "attention", [x], [y], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_both_operands_of_an_activation_matmul_are_quantized():
    rng = np.random.default_rng(1)
    samples = [{"x": rng.normal(0, 1, (1, 8, 16)).astype(np.float32)} for _ in range(4)]
    model = quantize_model(attention(), samples)
    producer = {out: node for node in model.graph.node for out in node.output}
    readers = {t: node for node in model.graph.node for t in node.input}
    for name in ("scores", "context"):
        node = next(n for n in model.graph.node if n.name == name)
        for operand in node.input:
            dq = producer[operand]
            assert dq.op_type == "DequantizeLinear" and producer[dq.input[0]].op_type == "QuantizeLinear", (name, dq)
        assert readers[node.output[0]].op_type == "QuantizeLinear", name
    assert not [n.name for n in model.graph.node if n.op_type in ("MatMul", "Softmax", "Transpose")
                and any(producer.get(t) is None or producer[t].op_type != "DequantizeLinear" for t in n.input
                        if t not in {i.name for i in model.graph.initializer})]


def test_attention_runs_on_the_cores_bit_exact(tmp_path):
    design = Design(attention(), "zcu104", profile_cpu=False).quantized(random_samples=8)
    design.place(method="single")
    result = design.compile(tmp_path / "p")
    layers = {layer["op"]: layer for core in result.design["cores"] for layer in core["layers"]}
    assert result.cpu_ops == [] and layers["scores"]["kernel"] == layers["context"]["kernel"] == "matmul", layers
    assert layers["scores"]["config"]["K"] == 16 and layers["context"]["config"]["K"] == 8
    check = run_csim(tmp_path / "p", samples=4)
    assert check.ok and all(c.bit_exact for c in check.cores), check
    assert all(o.max_abs_diff_lsb is not None and o.max_abs_diff_lsb <= 1 for o in check.outputs), check.outputs
    record = DesignRecord.from_json(result.design, "test")
    stages = [s for core, rec in zip(check.cores, record.cores, strict=True) for s in core.stages(rec)
              if s["kernel"] == "matmul"]
    assert len(stages) == 2 and all(s["cycles_csim"] == s["cycles_model"] > 0 for s in stages), stages


def two_heads() -> onnx.ModelProto:
    """x [1, 8, 16] -> Q, K projections, each read as two heads [2, 8, 8] -> Q K -> [1, 8, 16]."""
    rng = np.random.default_rng(2)
    nodes = [*(helper.make_node("MatMul", ["x", f"w{t}"], [t], name=f"{t}_proj") for t in "qk"),
             *(helper.make_node("Reshape", [t, "heads"], [f"{t}h"], name=f"{t}_heads") for t in "qk"),
             helper.make_node("MatMul", ["qh", "kh"], ["s"], name="scores"),
             helper.make_node("Reshape", ["s", "merged"], ["y"], name="merge")]
    constants = [*(numpy_helper.from_array(rng.normal(0, 0.3, (16, 16)).astype(np.float32), f"w{t}") for t in "qk"),
                 numpy_helper.from_array(np.array([2, 8, 8]), "heads"), numpy_helper.from_array(np.array([1, 8, 16]),
                                                                                                "merged")]
    x, y = (helper.make_tensor_value_info(t, TensorProto.FLOAT, [1, 8, 16]) for t in "xy")
    graph = helper.make_graph(nodes, "two_heads", [x], [y], constants)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_heads_are_a_batch_of_the_kernel(tmp_path):
    design = Design(two_heads(), "zcu104", profile_cpu=False).quantized(random_samples=8)
    design.place(method="single")
    result = design.compile(tmp_path / "p")
    layers = {layer["op"]: layer for core in result.design["cores"] for layer in core["layers"]}
    assert result.cpu_ops == [] and layers["scores"]["config"]["HEADS"] == 2, layers
    check = run_csim(tmp_path / "p", samples=3)
    assert check.ok and all(c.bit_exact for c in check.cores), check
    assert all(o.max_abs_diff_lsb is not None and o.max_abs_diff_lsb <= 1 for o in check.outputs), check.outputs


def case(heads: int, m: int, k: int, n: int, samples: int = 3, seed: int = 0) -> tuple[dict, list[np.ndarray]]:
    """A layer's config (spreading its outputs over int8) and ``samples`` random int8 operands."""
    rng = np.random.default_rng(seed)
    (mq,), (sq,) = multipliers(np.array([1 / (40.0 * k)]), "test")
    config = {"HEADS": heads, "M": m, "K": k, "N": n, "ZA": -20, "ZB": 7, "MQ": int(mq), "SQ": int(sq), "ZY": 3,
              "LO": -128, "HI": 127}
    operands = [rng.integers(-128, 128, (samples, heads * m * k), dtype=np.int8),
                rng.integers(-128, 128, (samples, heads * k * n), dtype=np.int8)]
    return config, operands


def test_integer_matmul_is_the_requantized_product():
    config, (a, b) = case(2, 3, 5, 4, samples=1)
    got = matmul_int8(a, b, **{key.lower(): value for key, value in config.items()}).reshape(2, 3, 4)
    real = (a.reshape(2, 3, 5).astype(float) + 20) @ (b.reshape(2, 5, 4).astype(float) - 7) / 200.0
    assert np.abs(got.astype(int) - np.clip(np.rint(real) + 3, -128, 127)).max() <= 1
    assert len(np.unique(got)) > 10


def test_shapes_the_kernel_refuses():
    assert MATMUL.shapes_geometry((2, 4, 8), (2, 8, 6), (2, 4, 6)).shape["HEADS"] == 2
    assert isinstance(MATMUL.shapes_geometry((2, 4, 8), (1, 8, 6), (2, 4, 6)), Unsupported)  # broadcast heads
    assert isinstance(MATMUL.shapes_geometry((1, 4, 8, 16), (1, 4, 16, 8), (1, 4, 8, 8)), Unsupported)
    assert "int32" in MATMUL.shapes_geometry((1, 40000), (40000, 2), (1, 2)).reason
    config, _ = case(1, 2, 4, 6)
    with pytest.raises(FpgaplaceError, match="PE=4 must divide N=6"):
        MATMUL.rtl(config, {}, Folding(4, 2, 1), "fp_matmul", 100)


@pytest.mark.parametrize(("fold", "macs_per_dsp"), [(Folding(3, 2, 1), 2), (Folding(2, 4, 1), 1)])
def test_matmul_rtl_bit_exact_and_cycles(tmp_path, fold, macs_per_dsp):
    from test_rtl_ops import assert_verilog_2005_clean, check_cycles, render_op, simulate_case

    config, operands = case(2, 4, 8, 6, seed=fold.pe)
    result = simulate_case("matmul", (config, {}, operands, fold), tmp_path, geometry=MATMUL.config_geometry(config),
                           macs_per_dsp=macs_per_dsp)
    check_cycles(result, f"matmul {fold}")
    assert_verilog_2005_clean(render_op("matmul", config, {}, fold, 100, macs_per_dsp=macs_per_dsp), tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize(("board", "family"), [("pynq-z2", "xc7"), ("zcu104", "xcup")])
def test_matmul_dsps_equal_yosys(tmp_path, board, family):
    """A lane per DSP on a DSP48E1; on a DSP48E2 a column pair shares one (PE = 3: a pair and a single)."""
    from fpgaplace.board.load import load_board
    from fpgaplace.codegen import rtl
    from fpgaplace.sim import yosys

    core = load_board(board).cores[0]
    config, _ = case(2, 4, 8, 6)
    fold = Folding(3, 2, 1)
    op = rtl.render_op("matmul", config, {}, fold, 100, macs_per_dsp=int(core.macs_per_dsp))
    got = yosys.synthesize(rtl.RtlModule(op.module.top, {**rtl.library(), **op.module.files}), tmp_path, family,
                           dsp_only=True)
    assert got.dsp == MATMUL.resources(MATMUL.config_geometry(config), fold, core).dsp == (6 if family == "xc7" else 4)
