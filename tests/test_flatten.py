"""A flatten of a feature map read by dense layers only: free on a core, the dense layers' weights
permuted to the stream's channels-last order; kept on one device with them; refused otherwise."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from fpgaplace.flow.design import Design
from fpgaplace.hw import plan_op
from fpgaplace.hw.registry import colocated_groups
from fpgaplace.model.frontend.load import from_model
from fpgaplace.sim.csim import run_csim


def conv_flatten_dense(kind: str, graph_output: bool = False) -> onnx.ModelProto:
    """Conv -> Relu -> Flatten (or Reshape to [1, -1]) -> Gemm on a [1, 3, 6, 6] image; with
    ``graph_output`` the flattened vector is also a model output."""
    rng = np.random.default_rng(len(kind))

    def const(name: str, value, dtype=np.float32) -> onnx.TensorProto:
        return numpy_helper.from_array(np.asarray(value, dtype), name)

    flat = (helper.make_node("Flatten", ["r"], ["f"], name="flat") if kind == "flatten"
            else helper.make_node("Reshape", ["r", "shape"], ["f"], name="flat"))
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"), flat,
             helper.make_node("Gemm", ["f", "w2", "b2"], ["z"], transB=1, name="fc")]
    outputs = [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 10])]
    outputs += [helper.make_tensor_value_info("f", TensorProto.FLOAT, [1, 288])] if graph_output else []
    weights = [const("w1", rng.normal(0, 0.5, (8, 3, 3, 3))), const("w2", rng.normal(0, 0.2, (10, 288))),
               const("b2", rng.normal(0, 0.5, 10)), const("shape", [1, -1], np.int64)]
    graph = helper.make_graph(nodes, kind, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 6])],
                              outputs, weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("kind", ["flatten", "reshape"])
def test_a_flatten_into_a_dense_layer_runs_on_the_cores(kind, tmp_path):
    design = Design(conv_flatten_dense(kind), "zcu104", profile_cpu=False)
    result = design.compile(tmp_path / "p", random_samples=8)
    assert [layer["kernel"] for core in result.design["cores"] for layer in core["layers"]] == ["conv2d", "dense"]
    assert result.cpu_ops == []
    check = run_csim(tmp_path / "p", samples=6)
    assert check.ok and all(c.bit_exact for c in check.cores)
    assert all(o.max_abs_diff_lsb is not None and o.max_abs_diff_lsb <= 1 for o in check.outputs)
    graph = design.quantized(random_samples=2).graph
    (group,) = [g for g in colocated_groups(graph) if "flat" in g]
    assert "fc" in group


def test_a_flatten_read_outside_dense_layers_is_refused():
    graph = from_model(conv_flatten_dense("flatten", graph_output=True))
    planned = plan_op(graph.ops["flat"], graph)
    assert not planned and "flatten read by dense layers only" in planned.reason
