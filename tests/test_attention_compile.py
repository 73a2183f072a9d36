"""Transformer encoders on the cores: a BERT encoder layer (batch 1, 16 tokens of 64) with no op
on a CPU, every core bit-exact against its integer reference in C simulation and the outputs
within 1 LSB of onnxruntime's QDQ model; the rewrites that get it there (the heads as a batch of
the MatMul kernel, the head split and merge as reorder stages of blocks, GELU as one table)."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_rtl_ops import assert_verilog_2005_clean, check_cycles, render_op, simulate_case

from fpgaplace.flow.design import Design
from fpgaplace.hw import KERNELS
from fpgaplace.hw.geometry import Folding
from fpgaplace.hw.islands import islands
from fpgaplace.hw.permutation import stream_transpose
from fpgaplace.model import zoo as models
from fpgaplace.model.passes import heads_to_batch
from fpgaplace.model.quantize import calibration_inputs, measure_drift
from fpgaplace.project.record import DesignRecord
from fpgaplace.sim.csim import run_csim
from fpgaplace.util.onnxrt import run_model


@pytest.fixture(scope="module")
def bert():
    """The quantized BERT layer at batch 1, placed on one zcu104 core group."""
    design = Design(models.bert_encoder_layer(batch=1), "zcu104", profile_cpu=False).quantized(random_samples=8)
    design.place(method="single")
    return design


@pytest.mark.parametrize("batch", [1, "batch"])
def test_the_heads_pass_keeps_the_values_and_leaves_no_rank_4_matmul(batch):
    model = models.bert_encoder_layer(batch=batch)
    rewritten, changes = heads_to_batch(model)
    assert changes == 1
    samples = 1 if batch == 1 else 3  # a symbolic batch: the heads reshape to [-1, S, D]
    x = {"hidden_states": np.random.default_rng(0).normal(0, 1, (samples, 16, 64)).astype(np.float32)}
    np.testing.assert_allclose(run_model(rewritten, x)["encoded"], run_model(model, x)["encoded"], atol=1e-6)
    kinds = {n.op_type for n in rewritten.graph.node}
    assert "Softmax" in kinds and heads_to_batch(rewritten)[1] == 0  # a fixpoint


@pytest.mark.parametrize(("shape", "perm", "expected"), [
    ((2, 4, 3, 5), (0, 2, 1, 3), (4, 3, 5)),  # [S, H, D] -> [H, S, D]: blocks of D
    ((2, 4, 3, 5), (0, 2, 3, 1), (4, 15, 1)),  # [S, H*D] -> [H*D, S]: Kᵀ, a plain transpose
])
def test_a_head_split_is_a_transpose_of_blocks(shape, perm, expected):
    source = np.arange(np.prod(shape)).reshape(shape[0], shape[1], -1)
    moved = source.reshape(shape).transpose(perm).reshape(shape[0] * shape[2], *np.array(shape)[list(perm[2:])])
    assert stream_transpose(source.shape, moved) == expected
    rows, columns, block = expected
    want = source.reshape(shape[0], rows, columns, block).transpose(0, 2, 1, 3).reshape(-1)
    assert np.array_equal(moved.reshape(-1), want)


def test_gelu_is_one_table(bert):
    graph = bert.graph
    tables = {i.exit_op: i for i in islands(graph.model, graph.tensors).islands if i.kernel == "table"}
    erf = next(n.name for n in graph.model.graph.node if n.op_type == "Erf")
    gelu = [i for i in tables.values() if erf in i.nodes]
    assert len(gelu) == 1 and {"Div", "Erf", "Add", "Mul"} <= {graph.model.graph.node[[n.name for n in
                                                                 graph.model.graph.node].index(m)].op_type
                                                             for m in gelu[0].members}


def tanh_gelu_mlp(seed: int = 4) -> onnx.ModelProto:
    """x [1, 8, 16] -> MatMul -> GELU as its tanh approximation exporters write,
    0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x**3))) -> MatMul."""
    rng = np.random.default_rng(seed)
    consts = {"w0": rng.normal(0, 0.3, (16, 16)), "w1": rng.normal(0, 0.3, (16, 8)), "three": 3.0,
              "c": 0.044715, "k": math.sqrt(2 / math.pi), "one": 1.0, "half": 0.5}
    nodes = [helper.make_node("MatMul", ["x", "w0"], ["h"], name="fc0"),
             helper.make_node("Pow", ["h", "three"], ["cube"], name="cube"),
             helper.make_node("Mul", ["cube", "c"], ["cubic"], name="cubic"),
             helper.make_node("Add", ["h", "cubic"], ["inner"], name="inner"),
             helper.make_node("Mul", ["inner", "k"], ["scaled"], name="scaled"),
             helper.make_node("Tanh", ["scaled"], ["t"], name="tanh"),
             helper.make_node("Add", ["t", "one"], ["t1"], name="t1"),
             helper.make_node("Mul", ["h", "t1"], ["g2"], name="g2"),
             helper.make_node("Mul", ["g2", "half"], ["g"], name="gelu"),
             helper.make_node("MatMul", ["g", "w1"], ["y"], name="fc1")]
    inits = [numpy_helper.from_array(np.asarray(v, np.float32), name) for name, v in consts.items()]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8])
    return helper.make_model(helper.make_graph(nodes, "tanh_gelu", [x], [y], inits),
                             opset_imports=[helper.make_opsetid("", 17)])


def test_the_tanh_gelu_is_one_table_on_a_core(tmp_path):
    design = Design(tanh_gelu_mlp(), "zcu104", profile_cpu=False, optimize=False).quantized(random_samples=8)
    graph = design.graph
    (table,) = [i for i in islands(graph.model, graph.tensors).islands if i.kernel == "table"]
    assert {"cube", "tanh", "g2"} <= set(table.members) and table.exit_op == "gelu"
    design.place(method="single")
    result = design.compile(tmp_path / "p")
    layers = [(layer["op"], layer["kernel"]) for core in result.design["cores"] for layer in core["layers"]]
    assert result.cpu_ops == [] and layers == [("fc0", "dense"), ("gelu", "table"), ("fc1", "dense")], layers
    check = run_csim(tmp_path / "p", samples=4)
    assert check.ok and all(c.bit_exact for c in check.cores), check


def test_bert_layer_runs_on_the_cores_bit_exact(bert, tmp_path):
    result = bert.compile(tmp_path / "p")
    assert result.cpu_ops == []
    kernels = [layer["kernel"] for core in result.design["cores"] for layer in core["layers"]]
    assert kernels.count("matmul") == 2 and kernels.count("softmax") == 1 and kernels.count("layernorm") == 2
    assert kernels.count("reorder") == 4 and kernels.count("table") == 2, kernels  # scale, GELU
    check = run_csim(tmp_path / "p", samples=4)
    assert check.ok and all(c.bit_exact for c in check.cores), check
    assert all(o.max_abs_diff_lsb is not None and o.max_abs_diff_lsb <= 1 for o in check.outputs), check.outputs
    record = DesignRecord.from_json(result.design, "test")
    stages = [s for core, rec in zip(check.cores, record.cores, strict=True) for s in core.stages(rec)
              if s["kernel"] in ("matmul", "reorder", "softmax", "layernorm")]
    assert len(stages) == 9 and all(s["cycles_csim"] == s["cycles_model"] > 0 for s in stages), stages


def test_the_quantized_layer_drifts_little_from_the_float_one(bert):
    model = bert.float_design.graph.model
    samples = calibration_inputs(model, random_samples=16, seed=7)
    drift = measure_drift(model, bert.graph.model, samples)
    (output,) = drift.outputs
    assert 0 < output.max_relative_error < 0.35, drift.to_json()  # 0.24 measured (16 samples, seed 7)


def top1_agreement(project, model, images: np.ndarray) -> tuple[float, object]:
    """The share of ``images`` whose placed run (C simulation) and onnxruntime's QDQ model pick the
    same class, and the csim result."""
    check = run_csim(project, inputs=images, layers=True)
    expected = np.concatenate([run_model(model, {"image": x[None]})["logits"] for x in images])
    return float(np.mean(check.values["logits"].argmax(-1) == expected.argmax(-1))), check


def test_vit_encoder_runs_on_the_cores_bit_exact(tmp_path):
    design = Design(models.vit_encoder(), "zcu104", profile_cpu=False).quantized(random_samples=8)
    design.place(method="single")
    result = design.compile(tmp_path / "p")
    assert result.cpu_ops == []
    kernels = [layer["kernel"] for core in result.design["cores"] for layer in core["layers"]]
    assert kernels.count("matmul") == 8 and kernels.count("softmax") == 4 and kernels.count("layernorm") == 8
    assert kernels.count("concat") == 1 and kernels.count("conv2d") == 1 and "slice" in kernels, kernels
    images = np.random.default_rng(11).uniform(-1, 1, (12, 3, 32, 32)).astype(np.float32)
    agreement, check = top1_agreement(tmp_path / "p", design.graph.model, images)
    assert all(c.bit_exact for c in check.cores) and check.ok, check
    # piece by piece (every sample): each layer, Softmax and LayerNorm included, within one step of
    # onnxruntime on onnxruntime's own inputs to it
    assert check.layers.samples == len(images) and check.layers.compared > 0
    assert check.layers.worst_lsb <= 1 and check.to_json()["layers"]["within_one_step"], check.layers
    assert agreement >= 11 / 12, agreement


@pytest.mark.parametrize(("rows", "columns", "block", "folding", "rescale"), [
    (16, 4, 16, Folding(4, 1, 1), False), (4, 16, 16, Folding(8, 1, 1), True), (5, 3, 6, Folding(2, 1, 1), True)])
def test_reorder_of_blocks_rtl_bit_exact_and_cycles(tmp_path, rows, columns, block, folding, rescale):
    """The head split (R = S, C = H, E = D) and merge (R = H, C = S) in RTL: cocotb against the
    integer reference, cycles equal to the model's."""
    rng = np.random.default_rng(rows * columns * block)
    m, s = (1 << 30, 30) if not rescale else (int(rng.integers(1 << 29, 1 << 30)), 30)
    size = rows * columns * block
    config = {"SIZE": size, "XR": rows, "XC": columns, "XE": block, "ZX": int(rng.integers(-20, 20)), "M": m,
              "S": s, "ZY": int(rng.integers(-20, 20)), "LO": -128, "HI": 127}
    inputs = [rng.integers(-128, 128, (3, size), dtype=np.int8)]
    geometry = KERNELS["reorder"].transpose_geometry(1, rows, columns, block)
    assert folding in KERNELS["reorder"].foldings(geometry)
    result = simulate_case("reorder", (config, {}, inputs, folding), tmp_path, geometry=geometry)
    check_cycles(result, f"reorder {rows}x{columns}x{block} {folding}")
    (tmp_path / "lint").mkdir()
    assert_verilog_2005_clean(render_op("reorder", config, {}, folding, 100), tmp_path / "lint")
