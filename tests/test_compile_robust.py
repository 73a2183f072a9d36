"""compile never refuses a model place accepts (issue 18, item 4): every cut of a placement is
one design.json can describe; the placement compile makes is one a core can build."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from fpgaplace import Design
from fpgaplace.flow.settle import is_free, settled_devices
from fpgaplace.place.solvers.problem import Placement
from fpgaplace.sim.csim import run_csim


def _conv(nodes: list, inits: list, rng, x: str, name: str, cin: int, cout: int) -> str:
    """A 3x3 convolution (padding 1) of ``x`` followed by a Relu; returns the Relu's output."""
    inits += [onnx.numpy_helper.from_array((rng.standard_normal((cout, cin, 3, 3)) / (3 * cin ** 0.5))
                                           .astype(np.float32), f"{name}_w"),
              onnx.numpy_helper.from_array((rng.standard_normal(cout) * 0.1).astype(np.float32), f"{name}_b")]
    nodes += [onnx.helper.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [f"{name}_c"], name=name, pads=[1] * 4),
              onnx.helper.make_node("Relu", [f"{name}_c"], [f"{name}_r"], name=f"{name}_relu")]
    return f"{name}_r"


@pytest.fixture(scope="module")
def concat_qdq() -> onnx.ModelProto:
    """Two conv branches joined by a Concat (which heads no fused group, so its QuantizeLinear is
    free to go elsewhere) read by a conv and a max pool, quantized to int8 QDQ (2 random samples)."""
    rng = np.random.default_rng(7)
    nodes: list = []
    inits: list = []
    a, b = (_conv(nodes, inits, rng, "x", name, 4, 8) for name in ("conv_a", "conv_b"))
    nodes.append(onnx.helper.make_node("Concat", [a, b], ["joined"], name="concat", axis=1))
    c = _conv(nodes, inits, rng, "joined", "conv_c", 16, 8)
    nodes.append(onnx.helper.make_node("MaxPool", ["joined"], ["pooled"], name="pool", kernel_shape=[2, 2],
                                       strides=[2, 2]))
    graph = onnx.helper.make_graph(
        nodes, "concat_branches", [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4, 8, 8])],
        [onnx.helper.make_tensor_value_info(c, onnx.TensorProto.FLOAT, [1, 8, 8, 8]),
         onnx.helper.make_tensor_value_info("pooled", onnx.TensorProto.FLOAT, [1, 16, 4, 4])], inits)
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    return Design(model, "zcu104", profile_cpu=False).quantized(random_samples=2).graph.model


def _place(design: Design, on_core) -> None:
    """The ops ``on_core(name, op)`` says on core0, every other op on cpu0."""
    names, graph = design.device_names(), design.graph
    device = np.array([names.index("core0" if on_core(name, graph.ops[name]) else "cpu0")
                       for name in design.problem.names])
    design.set_placement(Placement(device=device, method="given"))


def _fused_with(head: str):
    from fpgaplace.model.passes.fuse import fused_head

    return lambda name, op: name == head or fused_head(op.node) == head


CUTS = {
    # The branches and the Concat on the core, the Concat's QuantizeLinear on the CPU: the float
    # Concat result before its QuantizeLinear crosses (as concat_120 of the YOLO-style model did).
    "float before its quantizer": lambda name, op: name == "concat" or any(
        _fused_with(head)(name, op) for head in ("conv_a", "conv_b")),
    # conv_c on the core with the Concat's DequantizeLinear, the Concat and its QuantizeLinear on
    # the CPU: the DequantizeLinear of a tensor the core only receives, also read by the pool on
    # the CPU, crosses (as hardswish_58.tmp_0_DequantizeLinear_Output did).
    "view of a received tensor": lambda name, op: name == "joined_DequantizeLinear" or _fused_with("conv_c")(
        name, op),
}


@pytest.mark.parametrize("cut", list(CUTS))
def test_a_cut_that_stopped_compile_builds_bit_exact(concat_qdq, tmp_path, cut):
    """These cuts used to stop compile ("design.json: transfer of ... names core0, which has no
    output port carrying it"); now every tensor leaving the core is one of its output ports or a
    view of one, and the placed model is bit-exact against onnxruntime on the whole QDQ model."""
    design = Design(concat_qdq, "zcu104", profile_cpu=False)
    assert "joined_DequantizeLinear" in design.graph.ops  # the names the cuts use
    _place(design, CUTS[cut])
    result = design.compile(tmp_path / "project")
    document = json.loads((tmp_path / "project" / "design.json").read_text())
    [core] = document["cores"]
    ports = {name for t in core["outputs"] for name in [t["name"], *(v["name"] for v in t["views"])]}
    leaving = {t["tensor"] for t in document["transfers"] if t["from_device"] == "core0"}
    assert leaving <= ports
    manifest = json.loads((tmp_path / "project" / "split" / "manifest.json").read_text())
    split = {node: sub["device"] for sub in manifest["submodels"] for node in sub["nodes"]}
    placed = document["placement"]["devices"]
    assert {op: split[op] for op in placed} == placed  # the record places every op where the split runs it
    assert result.design["placement"]["devices"] == placed
    check = run_csim(tmp_path / "project", samples=2)
    assert [c.bit_exact for c in check.cores] == [True]
    assert [o.max_abs_diff_lsb for o in check.outputs] == [0.0, 0.0]


def test_settling_moves_fused_ops_to_their_head_and_free_ops_to_their_source(concat_qdq):
    """On random placements, every op that moves is a fused member now on its head's device (as
    the split puts it) or a Q/DQ or order-keeping reshape now on the device of the op it reads;
    no other op moves, and settling a settled placement changes nothing."""
    from fpgaplace.model.passes.fuse import fused_head

    design = Design(concat_qdq, "zcu104", profile_cpu=False)
    graph, problem = design.graph, design.problem
    rng = np.random.default_rng(0)
    index = {name: v for v, name in enumerate(problem.names)}
    cpu0 = design.device_names().index("cpu0")
    runs = problem.latency[:, problem.device_kinds()]  # (ops, devices): finite where an op may run
    for _ in range(20):
        device = rng.integers(0, len(design.device_names()), problem.n)
        device[~np.isfinite(runs[np.arange(problem.n), device])] = cpu0
        settled = settled_devices(problem, graph, device)
        for v in np.flatnonzero(settled != device):
            op = graph.ops[problem.names[v]]
            head = fused_head(op.node)
            reads = index[head] if head in index else index[graph.producer(op.inputs[0])]
            assert head in index or is_free(op, graph)
            assert settled[v] == settled[reads]
        assert np.array_equal(settled_devices(problem, graph, settled), settled)
