"""The decomposed layer norm forms fuse into one LayerNormalization that computes the same
values in onnxruntime (1e-5 relative), the quantizer puts Q/DQ around it, and the result runs on
the layernorm kernel of a core, within 1 LSB of onnxruntime (measured over 300 samples: 1)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from fpgaplace.model.passes.layernorm import fuse_layernorm
from fpgaplace.util import onnxrt

N = 12


def decomposed(form: str, opset: int = 17, affine: bool = True) -> onnx.ModelProto:
    """x[2, 3, N] -> a layer norm over the last axis written out: ``mean`` (ReduceMean, Pow, Div) or
    ``sum`` (ReduceSum times 1/N, Mul(d, d), Reciprocal and Mul; gamma and beta in the other order)."""
    rng = np.random.default_rng(3)
    consts = {"two": np.float32(2.0), "eps": np.float32(1e-5), "inv_n": np.float32(1.0 / N),
              "gamma": rng.normal(1, 0.3, N).astype(np.float32), "beta": rng.normal(0, 0.3, N).astype(np.float32)}
    reduce_axes = {"axes": [-1]} if opset < 18 else {}
    axes_input = [] if opset < 18 else ["axes"]
    if opset >= 18:
        consts["axes"] = np.array([-1], np.int64)

    def mean(src: str, out: str) -> list[onnx.NodeProto]:
        if form == "mean":
            return [helper.make_node("ReduceMean", [src, *axes_input], [out], name=f"mean_{out}", **reduce_axes)]
        return [helper.make_node("ReduceSum", [src, "sum_axes"], [f"{out}_sum"], name=f"sum_{out}"),
                helper.make_node("Mul", [f"{out}_sum", "inv_n"], [out], name=f"scale_{out}")]

    if form == "sum":
        consts["sum_axes"] = np.array([-1], np.int64)
    nodes = [*mean("x", "m"), helper.make_node("Sub", ["x", "m"], ["d"], name="sub")]
    nodes += [helper.make_node("Pow", ["d", "two"], ["q"], name="pow")] if form == "mean" else [
        helper.make_node("Mul", ["d", "d"], ["q"], name="square")]
    nodes += [*mean("q", "v"), helper.make_node("Add", ["v", "eps"], ["ve"], name="add_eps"),
              helper.make_node("Sqrt", ["ve"], ["s"], name="sqrt")]
    nodes += [helper.make_node("Div", ["d", "s"], ["n"], name="div")] if form == "mean" else [
        helper.make_node("Reciprocal", ["s"], ["r"], name="recip"),
        helper.make_node("Mul", ["r", "d"], ["n"], name="norm")]
    out = "n"
    if affine:
        nodes += [helper.make_node("Mul", ["gamma", "n"] if form == "sum" else ["n", "gamma"], ["g"], name="gamma_mul"),
                  helper.make_node("Add", ["g", "beta"], ["y"], name="beta_add")]
        out = "y"
    graph = helper.make_graph(nodes, "ln", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, N])],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, [2, 3, N])],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def outputs(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    return onnxrt.session(model, "layer norm").run(None, {"x": x})[0]


@pytest.mark.parametrize(("form", "opset", "affine"), [("mean", 17, True), ("sum", 18, True), ("mean", 18, False)])
def test_the_decomposed_forms_fuse_into_one_layer_norm(form, opset, affine):
    model = decomposed(form, opset, affine)
    fused, changes = fuse_layernorm(model)
    assert changes == 1 and [n.op_type for n in fused.graph.node] == ["LayerNormalization"]
    node = fused.graph.node[0]
    assert node.name == ("beta_add" if affine else "div") and node.output[0] == model.graph.output[0].name
    x = np.random.default_rng(0).normal(1.5, 2.0, (2, 3, N)).astype(np.float32)
    want, got = outputs(model, x), outputs(fused, x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_chain_that_is_not_a_layer_norm_stays():
    model = decomposed("mean")
    two = next(t for t in model.graph.initializer if t.name == "two")
    two.CopyFrom(numpy_helper.from_array(np.float32(3.0), "two"))  # a cube is no variance
    assert fuse_layernorm(model)[1] == 0
    old = decomposed("mean")
    old.opset_import[0].version = 16  # before LayerNormalization existed
    assert fuse_layernorm(old)[1] == 0


def test_the_quantizer_puts_qdq_around_the_fused_layer_norm():
    from fpgaplace.model.quantize import quantize_model

    rng = np.random.default_rng(1)
    samples = [{"x": rng.normal(0, 2, (2, 3, N)).astype(np.float32)} for _ in range(4)]
    qdq = quantize_model(decomposed("sum", 18), samples)
    (norm,) = [n for n in qdq.graph.node if n.op_type == "LayerNormalization"]
    made = {o: n for n in qdq.graph.node for o in n.output}
    assert [made[t].op_type for t in norm.input] == ["DequantizeLinear"] * 3
    assert [n.op_type for n in qdq.graph.node if norm.output[0] in n.input] == ["QuantizeLinear"]
    assert not {"ReduceMean", "ReduceSum", "Sqrt", "Reciprocal"} & {n.op_type for n in qdq.graph.node}


def test_a_decomposed_layer_norm_compiles_to_the_layernorm_kernel(tmp_path):
    from fpgaplace.flow.design import Design
    from fpgaplace.sim.csim import run_csim

    design = Design(decomposed("sum", 18), "zcu104", profile_cpu=False).quantized(random_samples=8)
    design.place(method="single")
    result = design.compile(tmp_path / "p")
    kernels = [layer["kernel"] for core in result.design["cores"] for layer in core["layers"]]
    assert kernels == ["layernorm"] and result.cpu_ops == [], (kernels, result.cpu_ops)
    check = run_csim(tmp_path / "p", samples=6)
    assert check.ok and all(c.bit_exact for c in check.cores)
    assert all(o.max_abs_diff_lsb is not None and o.max_abs_diff_lsb <= 1 for o in check.outputs)
