"""Mul, Sub, Max and Min of two int8 activations (``fpgaplace.hw.binary``), one operand maybe
broadcast per channel (a squeeze-excite gate) or per pixel: the integer layer against onnxruntime
on the QDQ op, whole models compiled for zcu104 and C-simulated (every core bit-exact with the
integer reference, the output within 1 LSB of onnxruntime), the RTL unit in cocotb (bit-exact
under gaps and backpressure, its cycles the op library's), and the plane buffer in the cost."""

from __future__ import annotations

import subprocess

import binary_models
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from rtl_cases import binary_case
from test_rtl_ops import check_cycles, simulate_case

from fpgaplace import load_board
from fpgaplace.codegen.rtl import RtlModule, library, render_op
from fpgaplace.flow.design import Design
from fpgaplace.hw import KERNELS, Folding, plan_op
from fpgaplace.hw.binary import PER_CHANNEL, PER_PIXEL, SAME, broadcast_mode
from fpgaplace.hw.kernel import probe
from fpgaplace.hw.lowering import LayerContext
from fpgaplace.model.frontend.load import from_model
from fpgaplace.place.cost.fpga import fpga_latency_us, on_chip_plan, weight_area
from fpgaplace.sim import yosys
from fpgaplace.sim.csim import run_csim
from fpgaplace.sim.rtl_project import simulate_project_rtl
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.onnxrt import run_model

OPS = {"sub": "Sub", "mul": "Mul", "max": "Max", "min": "Min", "add_broadcast": "Add"}
OTHER = {SAME: lambda c, h, w: (1, c, h, w), PER_CHANNEL: lambda c, h, w: (1, c, 1, 1),
         PER_PIXEL: lambda c, h, w: (1, 1, h, w)}


# ---------------------------------------------------------------- the integer layer against onnxruntime


def qdq_op(op_type: str, x_shape: tuple[int, ...], g_shape: tuple[int, ...], swap: bool,
           seed: int) -> onnx.ModelProto:
    """int8 x, g -> DequantizeLinear each -> ``op_type`` (g first when ``swap``) -> QuantizeLinear
    -> int8 y, with random scales and zero points."""
    rng = np.random.default_rng(seed)
    scales = rng.uniform(0.01, 0.05, 3) * (np.array([1, 1, 4]) if op_type == "Mul" else 1)
    zeros = rng.integers(-40, 40, 3)
    inits = [t for i, name in enumerate(("x", "g", "y")) for t in (
        numpy_helper.from_array(np.array(scales[i], dtype=np.float32), f"{name}_scale"),
        numpy_helper.from_array(np.array(zeros[i], dtype=np.int8), f"{name}_zero"))]
    nodes = [helper.make_node("DequantizeLinear", [n, f"{n}_scale", f"{n}_zero"], [f"{n}_f"], name=f"dq_{n}")
             for n in ("x", "g")]
    operands = ["g_f", "x_f"] if swap else ["x_f", "g_f"]
    nodes += [helper.make_node(op_type, operands, ["y_f"], name="op"),
              helper.make_node("QuantizeLinear", ["y_f", "y_scale", "y_zero"], ["y"], name="q_y")]
    graph = helper.make_graph(nodes, "qdq_op", [helper.make_tensor_value_info("x", TensorProto.INT8, x_shape),
                                                helper.make_tensor_value_info("g", TensorProto.INT8, g_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.INT8, x_shape)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def stream_order(t: np.ndarray) -> np.ndarray:
    """One sample in the cores' order (channels last), flat."""
    return (t[0].transpose(1, 2, 0) if t.ndim == 4 else t[0]).reshape(-1)


@pytest.mark.parametrize(("kernel", "mode"), [(kernel, mode) for kernel in sorted(OPS)
                                              for mode in (SAME, PER_CHANNEL, PER_PIXEL)
                                              if (kernel, mode) != ("add_broadcast", SAME)])  # the Add kernel's
def test_integer_layer_within_one_lsb_of_onnxruntime(kernel, mode):
    """The layer ``lower`` makes, run by the kernel's integer reference, against onnxruntime on
    the QDQ op (which fuses DQ -> Mul -> Q into QLinearMul and runs the others in float)."""
    x_shape, g_shape = (1, 16, 6, 5), OTHER[mode](16, 6, 5)
    model = qdq_op(OPS[kernel], x_shape, g_shape, swap=kernel == "sub", seed=len(kernel) + mode)
    rng = np.random.default_rng(mode)
    x, g = (rng.integers(-128, 128, s, dtype=np.int8) for s in (x_shape, g_shape))
    expected = stream_order(run_model(model, {"x": x, "g": g})["y"])
    graph = from_model(model)
    op = graph.ops["op"]
    planned = plan_op(op, graph)
    assert planned, planned
    layer = planned[0].lower(LayerContext(graph), op, planned[1].shape)
    assert layer.kernel == kernel and sorted(layer.inputs) == ["g", "x"] and layer.config["MODE"] == mode
    assert mode == SAME or layer.inputs[0] == "x", "the full operand streams first"
    feed = {"x": stream_order(x), "g": stream_order(g)}
    got = KERNELS[kernel].reference(layer.config, layer.arrays, [feed[t] for t in layer.inputs])
    diff = np.abs(got.astype(int) - expected.astype(int))
    assert diff.max() <= 1, f"{kernel}: {int(diff.max())} LSB from onnxruntime"
    assert (diff == 0).mean() >= 0.99, f"{kernel}: only {(diff == 0).mean():.1%} equal to onnxruntime"
    assert len(np.unique(got)) > 30, "the case must spread the outputs"


# ---------------------------------------------------------------- whole models on a core, C simulation

MODELS = {
    "mul": lambda: binary_models.two_branches("Mul"),
    "sub-swapped": lambda: binary_models.two_branches("Sub", swap=True),
    "max": lambda: binary_models.two_branches("Max"),
    "squeeze-excite": lambda: binary_models.squeeze_excite(swap=True),
    "spatial": lambda: binary_models.spatial_gate(),
    "add per channel": lambda: binary_models.squeeze_excite(op="Add"),
    "min per pixel": lambda: binary_models.spatial_gate(op="Min"),
}
MODES = {"mul": SAME, "sub-swapped": SAME, "max": SAME, "squeeze-excite": PER_CHANNEL, "spatial": PER_PIXEL,
         "add per channel": PER_CHANNEL, "min per pixel": PER_PIXEL}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_models_on_a_core_bit_exact_and_within_one_lsb(name, tmp_path):
    result = Design(MODELS[name](), "zcu104", profile_cpu=False).compile(tmp_path / "project", random_samples=8)
    assert result.cpu_ops == []
    layers = [layer for core in result.design["cores"] for layer in core["layers"]]
    binary = [layer for layer in layers if layer["kernel"] in OPS]
    assert len(binary) == 1 and binary[0]["config"]["MODE"] == MODES[name]
    top = next((tmp_path / "project" / "cores").glob("*/*_top.cpp")).read_text()
    assert "fp::binary<" in top
    check = run_csim(tmp_path / "project", samples=4)
    assert check.ok and check.cores and all(c.bit_exact for c in check.cores)
    assert all(o.max_abs_diff_lsb is not None and o.max_abs_diff_lsb <= 1 for o in check.outputs)


@pytest.mark.parametrize("name", ["squeeze-excite", "spatial"])
def test_cores_in_rtl_bit_exact_at_the_models_interval(name, tmp_path):
    """The whole core in cocotb: the gate's path (pool, two convs) runs beside the plane buffer,
    and the core keeps the interval the op library gives it (the second plane of a per-channel
    buffer absorbs the gate path's latency)."""
    Design(MODELS[name](), "zcu104", profile_cpu=False).compile(tmp_path / "project", random_samples=4)
    assert not list((tmp_path / "project" / "rtl").glob("*/README.txt")), "every core has RTL"
    rtl = simulate_project_rtl(tmp_path / "project", samples=2)
    assert rtl.ok and rtl.cores
    for core in rtl.cores:
        assert core.bit_exact, core
        assert abs(core.cycles_measured - core.cycles_model) <= 0.10 * core.cycles_model, core


# ---------------------------------------------------------------- the plane buffer in the cost


def test_a_broadcast_charges_its_plane_buffer():
    """Per channel the stage holds two of x's planes, per pixel one: their bytes are the kernel's
    fixed bytes and take BRAM (at least their bits in 36 Kbit blocks; yosys' count is checked
    below), the same shape holds nothing."""
    mul = KERNELS["mul"]
    shape = (1, 64, 28, 28)
    fold = Folding(8, 1, 1)
    same, gate, pixel = (mul.shape_geometry(shape, OTHER[m](64, 28, 28)) for m in (SAME, PER_CHANNEL, PER_PIXEL))
    plane = 64 * 28 * 28
    assert mul.fixed_bytes(same) == 0 and mul.resources(same, fold).bram36 == 0
    for g, planes in ((gate, 2), (pixel, 1)):
        assert mul.fixed_bytes(g) >= planes * plane
        assert mul.resources(g, fold).bram36 >= -(-planes * plane * 8 // 36864)
    assert mul.cycles(gate, fold) == plane // 8 + 64 // 8  # the C / PE gate beats first
    assert mul.cycles(pixel, fold) == mul.cycles(same, fold) == plane // 8
    assert mul.resources(same, fold).dsp == 8 and KERNELS["max"].resources(same, fold).dsp == 0


@pytest.mark.slow
@pytest.mark.parametrize(("kernel", "mode", "folding"), [("mul", PER_CHANNEL, Folding(8, 1, 1)),
                                                          ("max", PER_PIXEL, Folding(8, 1, 2))])
def test_dsp_and_bram_equal_yosys(tmp_path, kernel, mode, folding):
    """synth_xilinx of the unit: a Mul's lane products on DSPs, the others none; the plane FIFO
    in as many BRAM36 as the estimate."""
    shape = (8, 32, 32)
    config = binary_case(kernel, shape, mode, folding, seed=4)[0]
    op = render_op(kernel, config, {}, folding, 100)
    got = yosys.synthesize(RtlModule(op.module.top, {**library(), **op.module.files}), tmp_path, "xcup")
    estimate = KERNELS[kernel].resources(KERNELS[kernel].shape_geometry((1, *shape), OTHER[mode](*shape)), folding,
                                         load_board("zcu104").cores[0])
    assert (got.dsp, got.bram36) == (estimate.dsp, estimate.bram36), (got, estimate)
    assert got.bram36 > 0


def test_a_plane_larger_than_a_core_is_refused_there():
    """The cost model sees the buffer: a gate over a plane beyond a core's on-chip memory cannot
    go on that core (infinite latency), a small one can."""
    board = load_board("zcu104")
    core = board.cores[0]
    side = int(np.sqrt(weight_area(core.onchip_bytes) / 64)) + 8
    for size, fits in ((8, True), (side, False)):
        graph = from_model(float_gate(64, size))
        op = graph.ops["excite"]
        plan = on_chip_plan(op, graph, 1, True)
        latency = fpga_latency_us(op, graph, core, board, plan)
        assert np.isfinite(latency) == fits, (size, latency)


def float_gate(c: int, size: int) -> onnx.ModelProto:
    """x[1, c, size, size] * s[1, c, 1, 1], both graph inputs (no quantization: the cost only)."""
    node = helper.make_node("Mul", ["x", "s"], ["z"], name="excite")
    info = helper.make_tensor_value_info
    graph = helper.make_graph([node], "gate", [info("x", TensorProto.FLOAT, [1, c, size, size]),
                                               info("s", TensorProto.FLOAT, [1, c, 1, 1])],
                              [info("z", TensorProto.FLOAT, [1, c, size, size])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


# ---------------------------------------------------------------- shapes a core does not take


def test_broadcast_modes():
    out = (2, 8, 4, 5)
    assert broadcast_mode(out, out) == SAME
    assert broadcast_mode((2, 8, 1, 1), out) == PER_CHANNEL
    assert broadcast_mode((1, 8, 1, 1), out) is None  # one gate for two samples
    assert broadcast_mode((8, 1, 1), (1, 8, 4, 5)) == PER_CHANNEL
    assert broadcast_mode((2, 1, 4, 5), out) == PER_PIXEL
    assert broadcast_mode((2, 8, 4, 1), out) is None  # along W only
    assert broadcast_mode((8,), (1, 8)) is None


@pytest.mark.parametrize(("a", "b", "reason"), [
    ((1, 8, 4, 4), (1, 8, 4, 1), "expected the same shape, or one operand broadcast"),
    ((1, 8, 1, 1), (1, 1, 4, 4), "expected the same shape, or one operand broadcast"),
])
def test_other_broadcasts_stay_on_cpus_with_the_reason(a, b, reason):
    out = tuple(max(x, y) for x, y in zip(a, b, strict=True))
    with pytest.raises(FpgaplaceError, match=reason):
        probe(KERNELS["mul"], "Mul", {}, ["a", "b"], {"a": a, "b": b, "y": out})


def test_a_constant_operand_is_not_this_kernels():
    with pytest.raises(FpgaplaceError, match="expected 2 input"):
        probe(KERNELS["mul"], "Mul", {}, ["a", "b"], {"a": (1, 4, 2, 2), "b": (1, 4, 1, 1), "y": (1, 4, 2, 2)},
              ("b",))


# ---------------------------------------------------------------- RTL

RTL_CASES = {  # kernel, (C, H, W), mode, folding
    "mul same": ("mul", (8, 4, 4), SAME, Folding(2, 1, 1)),
    "mul per channel": ("mul", (8, 4, 4), PER_CHANNEL, Folding(2, 1, 1)),
    "max per channel, MMV 2": ("max", (8, 4, 4), PER_CHANNEL, Folding(8, 1, 2)),
    "sub per pixel": ("sub", (8, 4, 4), PER_PIXEL, Folding(4, 1, 1)),
    "min per pixel, MMV 2": ("min", (8, 4, 4), PER_PIXEL, Folding(8, 1, 2)),
    "add per channel": ("add_broadcast", (8, 4, 4), PER_CHANNEL, Folding(4, 1, 1)),
}


@pytest.mark.parametrize("name", sorted(RTL_CASES))
def test_rtl_bit_exact_and_cycles(tmp_path, name):
    kernel, shape, mode, folding = RTL_CASES[name]
    geometry = KERNELS[kernel].shape_geometry((1, *shape), OTHER[mode](*shape))
    result = simulate_case(kernel, binary_case(kernel, shape, mode, folding, seed=len(name)), tmp_path,
                           geometry=geometry)
    check_cycles(result, name)


@pytest.mark.parametrize("name", sorted(RTL_CASES))
def test_rendered_verilog_is_verilog_2005_clean(tmp_path, name):
    kernel, shape, mode, folding = RTL_CASES[name]
    case = binary_case(kernel, shape, mode, folding, seed=1)
    op = render_op(kernel, case[0], case[1], folding, 100)
    sources = []
    for file, text in {**library(), **op.module.files}.items():
        (tmp_path / file).write_text(text)
        sources += [str(tmp_path / file)] if file.endswith(".v") else []
    run = subprocess.run(["iverilog", "-g2005", "-Wall", "-o", str(tmp_path / "lint.vvp"), *sources],
                         capture_output=True, text=True, check=False)
    problems = [line for line in run.stderr.splitlines() if "is sensitive to all" not in line]
    assert run.returncode == 0 and not problems, run.stderr


def test_rtl_of_a_folding_that_splits_a_pixel_unevenly_is_a_one_line_error():
    config = binary_case("mul", (6, 2, 2), PER_CHANNEL, Folding(4, 1, 1), seed=2)[0]
    with pytest.raises(FpgaplaceError, match=r"rtl fp_mul: PE=4 x MMV=1 lanes must divide SIZE=24 and PE the C=6"):
        render_op("mul", config, {}, Folding(4, 1, 1), 100)
