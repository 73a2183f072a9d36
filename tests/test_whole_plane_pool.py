"""An AveragePool whose one window is its whole unpadded plane (ResNet-50's last pool, 7 x 7 over
7 x 7) is the global pool: the graph pass ``passes.pools.whole_plane_pools_to_global`` makes it a
GlobalAveragePool, the same model in onnxruntime (float: the same mean summed in another order, a
few ulps; QDQ: the same int8 outputs, its Q/DQ pair kept),
so that it is priced, built and simulated as the ``globalavgpool`` kernel (``rtl/globalpool.v.j2``),
not as the window unit with a line-buffer copy per read lane (ResNet-50's: 29,175 LUTs and 1,569
BRAM36 in yosys against 190 LUTs and 25 BRAM36 priced). A padded or smaller window stays a
windowed pool; so does a whole-plane MaxPool (no global max pool kernel)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from fpgaplace import Design
from fpgaplace.hw import KERNELS
from fpgaplace.model.passes import optimize, whole_plane_pools_to_global
from fpgaplace.model.quantize import calibration_inputs, quantize_model
from fpgaplace.project.arrays import load_arrays
from fpgaplace.project.record import load
from fpgaplace.sim.rtl_project import simulate_project_stages
from fpgaplace.util.compare import relative_error
from fpgaplace.util.onnxrt import random_inputs, run_model

FLOAT = TensorProto.FLOAT


def pool_model(op_type: str = "AveragePool", plane: tuple[int, int] = (6, 5), channels: int = 8,
               **attrs) -> onnx.ModelProto:
    """x[1, 3, *plane] -> Conv 3x3 (pad 1) -> Relu -> ``op_type`` (``attrs``) -> Flatten -> Gemm -> y[1, 4]."""
    rng = np.random.default_rng(5)
    h, w = plane
    probe = helper.make_graph([helper.make_node(op_type, ["x"], ["p"], **attrs)], "probe",
                              [helper.make_tensor_value_info("x", FLOAT, [1, channels, h, w])],
                              [helper.make_tensor_value_info("p", FLOAT, None)])
    pooled = onnx.shape_inference.infer_shapes(helper.make_model(probe)).graph.output[0].type.tensor_type.shape
    features = channels * int(np.prod([d.dim_value for d in pooled.dim[2:]]))
    weights = {"w": rng.normal(0, 0.4, (channels, 3, 3, 3)), "b": rng.normal(0, 0.1, channels),
               "wf": rng.normal(0, 0.4, (4, features)), "bf": rng.normal(0, 0.1, 4)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node(op_type, ["r"], ["p"], name="pool", **attrs),
             helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], name="fc", transB=1)]
    graph = helper.make_graph(nodes, "pool", [helper.make_tensor_value_info("x", FLOAT, [1, 3, h, w])],
                              [helper.make_tensor_value_info("y", FLOAT, [1, 4])],
                              [numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


WHOLE = {  # the whole 6 x 5 plane, no padding: any strides, count_include_pad meaningless
    "kernel = plane": {"kernel_shape": [6, 5]},
    "strided, count_include_pad": {"kernel_shape": [6, 5], "strides": [3, 2], "count_include_pad": 1},
    "explicit zero pads, VALID": {"kernel_shape": [6, 5], "pads": [0, 0, 0, 0], "auto_pad": "VALID"},
}
WINDOWED = {  # kept as AveragePool / MaxPool
    "padded": ("AveragePool", {"kernel_shape": [6, 5], "pads": [1, 1, 1, 1]}),
    "smaller window": ("AveragePool", {"kernel_shape": [3, 5], "strides": [3, 1]}),
    "ceil_mode": ("AveragePool", {"kernel_shape": [6, 5], "ceil_mode": 1}),
    "whole-plane max pool": ("MaxPool", {"kernel_shape": [6, 5]}),
}


@pytest.mark.parametrize("name", sorted(WHOLE))
def test_a_whole_plane_average_pool_becomes_the_global_pool_with_the_same_outputs(name):
    model = pool_model(**WHOLE[name])
    rewritten, changes = whole_plane_pools_to_global(model)
    assert changes == 1
    (pool,) = [node for node in rewritten.graph.node if node.name == "pool"]
    assert (pool.op_type, list(pool.attribute), list(pool.input), list(pool.output)) == (
        "GlobalAveragePool", [], ["r"], ["p"])
    assert [node.op_type for node in model.graph.node if node.name == "pool"] == ["AveragePool"], "a copy rewritten"
    inputs = random_inputs(model, seed=1)  # the same mean, summed in another order (float32: ulps apart)
    assert relative_error(run_model(rewritten, inputs)["y"], run_model(model, inputs)["y"]) <= 1e-6
    _, report = optimize(model)
    assert report.ops_after.get("GlobalAveragePool") == 1 and "AveragePool" not in report.ops_after


@pytest.mark.parametrize("name", sorted(WINDOWED))
def test_a_padded_smaller_ceil_or_max_pool_stays_windowed(name):
    op_type, attrs = WINDOWED[name]
    model = pool_model(op_type, **attrs)
    rewritten, changes = whole_plane_pools_to_global(model)
    assert changes == 0
    assert [node.op_type for node in rewritten.graph.node if node.name == "pool"] == [op_type]


def test_a_pool_of_unknown_input_shape_is_left_alone():
    node = helper.make_node("AveragePool", ["x"], ["p"], name="pool", kernel_shape=[6, 5])
    graph = helper.make_graph([node], "dynamic", [helper.make_tensor_value_info("x", FLOAT, [1, 8, "h", "w"])],
                              [helper.make_tensor_value_info("p", FLOAT, None)])
    assert whole_plane_pools_to_global(helper.make_model(graph))[1] == 0


@pytest.fixture(scope="module")
def qdq_models() -> dict[str, onnx.ModelProto]:
    """The whole-plane and the padded pool model in QDQ int8, quantized as the model is given
    (the pool still an AveragePool between its DequantizeLinear and QuantizeLinear)."""
    models = {"whole": pool_model(kernel_shape=[6, 5], strides=[2, 2]),
              "padded": pool_model(kernel_shape=[6, 5], pads=[1, 1, 1, 1], count_include_pad=1)}
    return {name: quantize_model(model, calibration_inputs(model, random_samples=4)) for name, model in models.items()}


def pool_layer(project: Path):
    """The core and layer of the model's pool, and the layer's arrays."""
    ((core, index, layer),) = [(core, i, layer) for core in load(project).cores for i, layer in enumerate(core.layers)
                               if layer.op == "pool"]
    return core, layer, load_arrays(project, core)[index]


def test_a_qdq_whole_plane_pool_is_compiled_as_the_global_pool_bit_exact(qdq_models, tmp_path):
    """The QDQ model's whole-plane AveragePool (DequantizeLinear -> AveragePool -> QuantizeLinear,
    as ResNet-50's) compiles to the globalavgpool layer: the optimized graph keeps every Q/DQ node
    and gives onnxruntime's outputs of the original exactly; the layer's integer reference is
    onnxruntime's int8 output of the original pool (10 samples, ``assert_reference_is_onnxruntime``);
    its RTL (rtl/globalpool.v.j2, folded to fewer lanes than channels, as ResNet-50's, so that the
    sums sit in a memory of C/PE words) is bit-exact with it in Icarus at the op library's cycles. Without
    the pass (``optimize=False``) the same op is the windowed avgpool layer of the same rescale (M, S,
    TIE), as it was before."""
    model = qdq_models["whole"]
    design = Design(model, "zcu104", profile_cpu=False)
    optimized = design.graph.model
    assert [n.op_type for n in optimized.graph.node if n.name == "pool"] == ["GlobalAveragePool"]
    kinds = [n.op_type for n in optimized.graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear")]
    assert kinds == [n.op_type for n in model.graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear")]
    for seed in range(3):
        inputs = random_inputs(model, seed=seed)
        np.testing.assert_array_equal(run_model(optimized, inputs)["y"], run_model(model, inputs)["y"])
    design.place()
    design.compile(tmp_path / "global", fps=1000)  # folded slow, as ResNet-50's (PE 1): the sums in a memory
    core, layer, arrays = pool_layer(tmp_path / "global")
    assert layer.kernel == "globalavgpool" and layer.pe < layer.config["C"]
    assert_reference_is_onnxruntime(model, layer, arrays)
    result = simulate_project_stages(tmp_path / "global", samples=2, jobs=1, stages=f"{core.name}/pool",
                                     simulator="icarus")
    (stage,) = result.cores[0].stages
    assert stage.bit_exact and stage.cycles_measured == stage.cycles_model, stage
    windowed = Design(model, "zcu104", profile_cpu=False, optimize=False)
    windowed.place()
    windowed.compile(tmp_path / "windowed")
    _, before, _ = pool_layer(tmp_path / "windowed")
    assert before.kernel == "avgpool"
    assert {k: before.config[k] for k in ("M", "S", "TIE", "ZX", "ZY")} == {
        k: layer.config[k] for k in ("M", "S", "TIE", "ZX", "ZY")}


def test_a_qdq_padded_pool_stays_the_windowed_pool(qdq_models, tmp_path):
    design = Design(qdq_models["padded"], "zcu104", profile_cpu=False)
    assert [n.op_type for n in design.graph.model.graph.node if n.name == "pool"] == ["AveragePool"]
    design.place()
    design.compile(tmp_path / "padded")
    assert pool_layer(tmp_path / "padded")[1].kernel == "avgpool"


def assert_reference_is_onnxruntime(model: onnx.ModelProto, layer, arrays: dict, samples: int = 10) -> None:
    """The layer's integer reference (``KERNELS[layer.kernel].reference``) on onnxruntime's int8
    input of the pool gives onnxruntime's int8 output of it (the original model), per sample: each
    element the value of onnxruntime's optimized run (the QLinear pool) or of its unoptimized one
    (float between Q and DQ), which round an exact midpoint (a plane sum of k + 1/2 steps) apart
    (``fpgaplace.sim.csim``'s band)."""
    (x,), y = layer.inputs, layer.output
    for seed in range(samples):
        inputs = random_inputs(model, seed=seed)
        runs = [run_model(model, inputs, [x, y], optimized=optimized) for optimized in (True, False)]
        stream = runs[0][x].transpose(0, 2, 3, 1).reshape(-1)  # channels last, as the cores stream
        np.testing.assert_array_equal(runs[1][x], runs[0][x])
        got = np.asarray(KERNELS[layer.kernel].reference(layer.config, arrays, [stream])).reshape(-1)
        one, other = (run[y].reshape(-1) for run in runs)
        inside = (got >= np.minimum(one, other)) & (got <= np.maximum(one, other))
        assert inside.all(), (seed, got, one, other)


@pytest.mark.parametrize(("board", "plane", "channels", "pe"), [
    ("zcu104", 7, 1024, 1),  # the MobileNetV1 w4a4's last pool: its sums in a RAMB18
    ("pynq-z2", 7, 256, 8),  # 32 words of 8 sums: LUTRAM, the head register in FFs
])
def test_the_global_pool_on_xilinx_is_priced_as_yosys_builds_it(tmp_path, board, plane, channels, pe):
    """The globalavgpool unit (``rtl/globalpool.v.j2``) on a Xilinx core is priced as built
    (``pool.global_pool_resources``), not as the generic kernel (the MobileNetV1 w4a4's 7 x 7 x 1,024
    was 190 LUTs, 248 FFs and no BRAM priced, 553 LUTs, 17 FFs and a RAMB18 in yosys): yosys
    synth_xilinx of the unit has its FFs and its block RAM rounded up to BRAM36, and its LUTs within
    25 % of the estimate (priced at a typical multiplier's CSD digits)."""
    from rtl_cases import pool_case

    from fpgaplace.board.load import load_board
    from fpgaplace.board.model import core_family
    from fpgaplace.codegen.rtl import render_op
    from fpgaplace.hw.geometry import Folding
    from fpgaplace.sim.yosys import synthesize

    core = load_board(board).cores[0]
    config, arrays, _, folding = pool_case("globalavgpool", plane, plane, channels, 0, 0, 0, Folding(pe, 1, 1), seed=1)
    pool = KERNELS["globalavgpool"]
    estimate = pool.resources(pool.config_geometry(config), folding, core)
    built = synthesize(render_op("globalavgpool", config, arrays, folding, 1, core=core).module, tmp_path,
                       core_family(core))
    assert built.dsp == estimate.dsp == 0
    assert built.ff == estimate.ff and np.ceil(built.bram36) == estimate.bram36, (built, estimate)
    assert abs(built.lut / estimate.lut - 1) <= 0.25, (built, estimate)
