"""Data movement on the cores (``fpgaplace.hw.slice``: Split and Slice; ``fpgaplace.hw.upsample``:
nearest Resize at integer scales; ``fpgaplace.hw.pad``: constant Pad; padded and strided pools of
``fpgaplace.hw.pool``): each op is placed on a
core by the op library (``plan_op``), compiled from a small float model (quantized by compile),
C-simulated bit-exact against the integer reference and within 1 LSB of onnxruntime on the QDQ
model, and its RTL unit simulated in cocotb bit-exact under backpressure with cycles within 10%
of the op library's model; whole cores in RTL as well."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import onnx
import pytest
from movement_models import channel_slice, focus, neck, padded, pooled, split_concat, upsample
from test_rtl_ops import check_cycles, simulate_case

from fpgaplace import Design
from fpgaplace.hw import KERNELS, Folding, Unsupported, plan_op, reference
from fpgaplace.hw.quant import quantize_multiplier
from fpgaplace.hw.registry import pad_geometry, slice_geometry, upsample_geometry
from fpgaplace.model.frontend.load import from_model
from fpgaplace.sim.csim import run_csim
from fpgaplace.sim.rtl_project import simulate_project_rtl
from fpgaplace.util.errors import FpgaplaceError

CYCLE_TOLERANCE = 0.10
F = Folding


# --------------------------------------------------------------------------- whole models


def compiled(model: onnx.ModelProto, folder: Path, board: str = "zcu104"):
    """The compile result of ``model`` and its C simulation over 3 samples."""
    result = Design(model, board, profile_cpu=False).compile(folder, random_samples=8)
    return result, run_csim(folder, samples=3)


def kernels_used(result) -> set[str]:
    return {layer["kernel"] for core in result.design["cores"] for layer in core["layers"]}


@pytest.mark.parametrize(("make", "stages"), [
    (split_concat, 2), (focus, 4), pytest.param(partial(focus, on_input=True), 4, id="focus-on-input"),
    (channel_slice, 1)])
def test_slicing_models_run_entirely_on_the_cores_bit_exact(tmp_path, make, stages):
    """Conv -> Split -> Convs -> Concat (C2f), the Focus stem's four stride-2 Slices (of a conv's
    output, and of the float input itself) and a channel Slice: no op on a CPU, a slice stage per
    output, every core bit-exact against the integer reference and the output within 1 LSB of
    onnxruntime."""
    result, csim = compiled(make(), tmp_path / "project")
    assert result.cpu_ops == []
    layers = [layer for core in result.design["cores"] for layer in core["layers"] if layer["kernel"] == "slice"]
    assert len(layers) == stages
    assert csim.ok and all(core.bit_exact and core.mismatches == 0 for core in csim.cores)
    assert all(o.max_abs_diff_lsb is not None and o.max_abs_diff_lsb <= 1 for o in csim.outputs)
    for core in csim.to_json()["cores"]:
        for stage in core["stages"]:
            if stage["kernel"] == "slice":
                assert stage["cycles_csim"] == stage["cycles_model"], stage


@pytest.mark.parametrize("board", ["zcu104", "kv260"])
def test_a_yolo_style_neck_runs_entirely_on_the_cores_bit_exact(tmp_path, board):
    """C2f's Split, SPPF's three 5x5 stride-1 max pools, a stride-2 Conv, nearest x2 upsampling, a
    Concat with the earlier map and a Pad: no op left to the CPUs, each core bit-exact, the output
    within 1 LSB of onnxruntime."""
    result, csim = compiled(neck(), tmp_path / "project", board)
    assert result.cpu_ops == [] and {"slice", "maxpool", "upsample", "pad", "concat"} <= kernels_used(result)
    assert csim.ok and all(core.bit_exact for core in csim.cores)
    assert all(o.max_abs_diff_lsb is not None and o.max_abs_diff_lsb <= 1 for o in csim.outputs)


@pytest.mark.slow
def test_the_neck_cores_are_bit_exact_in_rtl_within_ten_percent_of_the_model(tmp_path):
    """The YOLO-style neck's two cores on zcu104 cut into two (zcu104-dpu) in cocotb, on an 8 x 8
    image: every op of the 16 px neck in a quarter of its cycles (its cores within 7% and 5% of the
    model's interval; at 16 px within 4% and 3%)."""
    Design(neck(size=8), "zcu104-dpu", profile_cpu=False).compile(tmp_path / "project", random_samples=4)
    rtl = simulate_project_rtl(tmp_path / "project", samples=2)
    assert rtl.ok and len(rtl.cores) == 2
    for core in rtl.cores:
        assert core.bit_exact, core
        assert abs(core.cycles_measured - core.cycles_model) <= CYCLE_TOLERANCE * core.cycles_model, core


UPSAMPLES = {  # name: (factor, coordinate_transformation_mode, nearest_mode, a sizes input)
    "x2-asymmetric-floor": (2, "asymmetric", "floor", False),  # PyTorch's nearest export
    "x2-half-pixel-sizes": (2, "half_pixel", "round_prefer_floor", True),  # ONNX's defaults
    "x3-asymmetric-floor": (3, "asymmetric", "floor", False),
}


@pytest.mark.parametrize("name", sorted(UPSAMPLES))
def test_upsampling_models_run_entirely_on_the_cores_bit_exact(tmp_path, name):
    factor, transform, rounding, by_sizes = UPSAMPLES[name]
    result, csim = compiled(upsample(size=6, factor=factor, transform=transform, rounding=rounding,
                                     by_sizes=by_sizes), tmp_path / "project")
    assert result.cpu_ops == [] and "upsample" in kernels_used(result)
    assert csim.ok and all(core.bit_exact for core in csim.cores)
    assert all(o.max_abs_diff_lsb is not None and o.max_abs_diff_lsb <= 1 for o in csim.outputs)
    stages = [s for core in csim.to_json()["cores"] for s in core["stages"] if s["kernel"] == "upsample"]
    assert stages and all(s["cycles_csim"] == s["cycles_model"] for s in stages)


@pytest.mark.parametrize(("make", "kernel"), [
    (split_concat, "slice"), (upsample, "upsample"), (padded, "pad"),
    (lambda: pooled("AveragePool", 3, 1, 1, count_include_pad=0), "avgpool")])
def test_slice_and_upsample_cores_are_bit_exact_in_rtl(tmp_path, make, kernel):
    result = Design(make(), "pynq-z2", profile_cpu=False).compile(tmp_path / "project", random_samples=4)
    assert kernel in kernels_used(result) and result.cpu_ops == []
    rtl = simulate_project_rtl(tmp_path / "project", samples=2)
    assert rtl.ok and rtl.cores
    for core in rtl.cores:
        assert core.bit_exact, core
        assert abs(core.cycles_measured - core.cycles_model) <= CYCLE_TOLERANCE * core.cycles_model, core


# --------------------------------------------------------------------------- the op library


def op_of(model: onnx.ModelProto, op_type: str):
    graph = from_model(model)
    return next(op for op in graph.ops.values() if op.op_type == op_type), graph


def test_split_and_slice_plan_onto_the_slice_kernel():
    op, graph = op_of(split_concat(parts=(2, 6)), "Split")
    kernel, geometry = plan_op(op, graph)
    assert kernel.name == "slice" and geometry.channels == 2  # PE divides 8, 2 and 6
    assert [(w["C0"], w["CN"]) for w in geometry.shape["windows"]] == [(0, 2), (2, 6)]
    op, graph = op_of(focus(size=8), "Slice")
    kernel, geometry = plan_op(op, graph)
    window = geometry.shape["windows"][0]
    assert (window["H0"], window["HN"], window["SH"], window["WN"], window["SW"]) == (0, 4, 2, 4, 2)
    assert KERNELS["slice"].cycles(geometry, F(4)) == 8 * 8 * 4 // 4  # every input beat


def slice_model(starts, ends, axes, steps, shape=(1, 4, 6, 6)) -> onnx.ModelProto:
    from onnx import TensorProto, helper, numpy_helper

    consts = [numpy_helper.from_array(np.array(v, np.int64), n) for v, n in
              ((starts, "s"), (ends, "e"), (axes, "a"), (steps, "p"))]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    y = helper.make_empty_tensor_value_info("y")
    graph = helper.make_graph([helper.make_node("Slice", ["x", "s", "e", "a", "p"], ["y"], name="sl")], "g", [x], [y],
                              consts)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model)


@pytest.mark.parametrize(("bounds", "reason"), [
    (([0], [4], [1], [2]), "strided channel Slice"),
    (([5], [0], [2], [-1]), "negative step"),
    (([0], [1], [0], [1], (2, 4, 6, 6)), "batch axis"),
    (([3], [3], [3], [1]), "empty Slice"),
])
def test_slices_no_core_runs_say_why(bounds, reason):
    op, graph = op_of(slice_model(*bounds), "Slice")
    planned = plan_op(op, graph)
    assert isinstance(planned, Unsupported) and reason in planned.reason


def test_a_slice_step_of_zero_is_refused_with_a_reason():
    """ONNX forbids a step of 0 (shape inference fails on it): the op library says so rather than dividing by it."""
    with pytest.raises(FpgaplaceError, match="step of 0"):
        slice_geometry({"H": 4, "W": 4, "C": 2, "H0": 0, "HN": 2, "SH": 0, "W0": 0, "WN": 4, "SW": 1, "C0": 0,
                        "CN": 2})


# --------------------------------------------------------------------------- RTL and reference


def slice_case(h, w, c, window: dict, folding: Folding, seed: int, samples: int = 3):
    """A random slice layer (config members as compile writes them) and its inputs."""
    rng = np.random.default_rng(seed)
    m, s = quantize_multiplier(float(rng.uniform(0.5, 1.5)))
    zy = int(rng.integers(-20, 20))
    config = {"H": h, "W": w, "C": c, **window, "ZX": int(rng.integers(-128, 128)), "M": m, "S": s, "ZY": zy,
              "LO": -120, "HI": 120}
    return config, {}, rng.integers(-128, 128, (samples, h * w * c), dtype=np.int8), folding


WINDOWS = {  # (H, W, C, window, folding)
    "channel-half": (4, 5, 8, {"H0": 0, "HN": 4, "SH": 1, "W0": 0, "WN": 5, "SW": 1, "C0": 4, "CN": 4}, F(2)),
    "focus-odd": (6, 8, 3, {"H0": 1, "HN": 3, "SH": 2, "W0": 1, "WN": 4, "SW": 2, "C0": 0, "CN": 3}, F(3)),
    "stride3-rows": (7, 4, 4, {"H0": 2, "HN": 2, "SH": 3, "W0": 0, "WN": 2, "SW": 3, "C0": 0, "CN": 2}, F(1)),
}


def test_the_reference_is_numpy_slicing_then_requantization():
    config, _, inputs, _ = slice_case(*WINDOWS["focus-odd"][:4], F(3), seed=4)
    x = inputs[0].reshape(6, 8, 3)
    got = KERNELS["slice"].reference(config, {}, [inputs[0]])
    kept = x[1::2, 1::2, :].astype(np.int64)
    expected = reference.requant(kept.astype(np.int8), zx=config["ZX"], m=config["M"], s=config["S"],
                                 zy=config["ZY"], lo=config["LO"], hi=config["HI"])
    assert np.array_equal(got, expected.reshape(-1))


@pytest.mark.parametrize("name", sorted(WINDOWS))
def test_slice_rtl_bit_exact_and_cycles(tmp_path, name):
    h, w, c, window, folding = WINDOWS[name]
    case = slice_case(h, w, c, window, folding, seed=len(name))
    geometry = slice_geometry(case[0])
    result = simulate_case("slice", case, tmp_path, geometry=geometry)
    check_cycles(result, f"slice {name}")


def test_slice_rtl_refuses_a_pe_that_splits_a_channel_range():
    config, arrays, _, _ = slice_case(*WINDOWS["channel-half"][:4], F(2), seed=1)
    from fpgaplace.codegen.rtl import render_op

    with pytest.raises(FpgaplaceError, match="PE=8 must divide C=8, C0=4 and CN=4"):
        render_op("slice", config, arrays, F(8), 100)


# --------------------------------------------------------------------------- upsampling


@pytest.mark.parametrize(("factor", "transform", "rounding", "word"), [
    (2, "half_pixel", "floor", "does not repeat pixels"),  # output 2 maps to input 0
    (2, "tf_half_pixel_for_nn", "ceil", "does not repeat pixels"),
    (2, "asymmetric", "ceil", "does not repeat pixels"),  # output 1 maps to input 1
])
def test_resize_mappings_other_than_replication_are_refused(factor, transform, rounding, word):
    op, graph = op_of(upsample(size=4, factor=factor, transform=transform, rounding=rounding), "Resize")
    planned = plan_op(op, graph)
    assert isinstance(planned, Unsupported) and word in planned.reason and transform in planned.reason


def test_the_replication_check_agrees_with_onnxruntime():
    """Where the op library says a mapping replicates pixels, onnxruntime's float Resize equals
    np.repeat; where it says not, it differs (the check is the ONNX formulas, ORT is the judge)."""
    import onnxruntime as ort

    from fpgaplace.hw.upsample import replicates

    x = np.arange(5, dtype=np.float32).reshape(1, 1, 1, 5)
    for factor in (2, 3, 4):
        for transform in ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "tf_half_pixel_for_nn"):
            for rounding in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
                from onnx import TensorProto, helper, numpy_helper

                node = helper.make_node("Resize", ["x", "", "s"], ["y"], mode="nearest",
                                        coordinate_transformation_mode=transform, nearest_mode=rounding)
                graph = helper.make_graph([node], "r", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                      [1, 1, 1, 5])],
                                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                                          [numpy_helper.from_array(np.array([1, 1, 1, factor], np.float32), "s")])
                model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                model.ir_version = 8
                y = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
                    None, {"x": x})[0]
                same = np.array_equal(y.reshape(-1), np.repeat(x.reshape(-1), factor))
                assert same == (replicates(5, factor, float(factor), transform, rounding) is None), (
                    factor, transform, rounding)


def test_linear_and_fractional_resizes_are_refused():
    op, graph = op_of(upsample(size=4), "Resize")
    op.attrs["mode"] = "linear"
    assert "only nearest" in plan_op(op, graph).reason
    op.attrs["mode"] = "nearest"
    graph.tensors[op.outputs[0]] = type(graph.tensors[op.outputs[0]])(op.outputs[0], (1, 4, 6, 6), "float32")
    assert "integer upsampling" in plan_op(op, graph).reason
    graph.tensors[op.outputs[0]] = type(graph.tensors[op.outputs[0]])(op.outputs[0], (1, 4, 4 * 10**9, 8), "float32")
    assert "factor above" in plan_op(op, graph).reason


def upsample_case(h, w, c, rh, rw, folding: Folding, seed: int, samples: int = 3):
    rng = np.random.default_rng(seed)
    m, s = quantize_multiplier(float(rng.uniform(0.5, 1.5)))
    config = {"H": h, "W": w, "C": c, "RH": rh, "RW": rw, "ZX": int(rng.integers(-128, 128)), "M": m, "S": s,
              "ZY": int(rng.integers(-20, 20)), "LO": -120, "HI": 120}
    return config, {}, rng.integers(-128, 128, (samples, h * w * c), dtype=np.int8), folding


REPEATS = {"x2": (4, 5, 4, 2, 2, F(2)), "x3-by-x1": (3, 4, 2, 3, 1, F(2)), "x2-pe1": (3, 3, 3, 2, 2, F(1))}


@pytest.mark.parametrize("name", sorted(REPEATS))
def test_upsample_rtl_bit_exact_and_cycles(tmp_path, name):
    *shape, folding = REPEATS[name]
    case = upsample_case(*shape, folding, seed=len(name))
    result = simulate_case("upsample", case, tmp_path, geometry=upsample_geometry(case[0]))
    check_cycles(result, f"upsample {name}")


def test_the_upsample_reference_is_numpy_repeat():
    config, _, inputs, _ = upsample_case(3, 4, 2, 3, 2, F(2), seed=9)
    x = inputs[0].reshape(3, 4, 2)
    repeated = x.repeat(3, axis=0).repeat(2, axis=1)
    expected = reference.requant(repeated, zx=config["ZX"], m=config["M"], s=config["S"], zy=config["ZY"],
                                 lo=config["LO"], hi=config["HI"])
    assert np.array_equal(KERNELS["upsample"].reference(config, {}, [inputs[0]]), expected.reshape(-1))


def test_the_row_buffer_is_counted():
    g = upsample_geometry({"H": 20, "W": 40, "C": 64, "RH": 2, "RW": 2})
    assert g.linebuffer_bytes == 2 * 40 * 64  # the row repeated and the next
    small = KERNELS["upsample"].resources(upsample_geometry({"H": 20, "W": 4, "C": 4, "RH": 2, "RW": 2}), F(4))
    big = KERNELS["upsample"].resources(g, F(4))
    assert big.bram36 >= 1 and small.bram36 == 0


# --------------------------------------------------------------------------- padding and pools


POOLED = {  # name: (model, the kernel it goes on)
    "pad-zero": (lambda: padded(), "pad"),
    "pad-value": (lambda: padded(pads=(2, 0, 1, 1), value=0.7), "pad"),
    "sppf-maxpool-5x5-s1-p2": (lambda: pooled("MaxPool", 5, 1, 2), "maxpool"),
    "maxpool-3x3-s2-p1": (lambda: pooled("MaxPool", 3, 2, 1), "maxpool"),
    "avgpool-3x3-p1-include-pad": (lambda: pooled("AveragePool", 3, 1, 1, count_include_pad=1), "avgpool"),
    # the pool is the output: its exact midpoints (a sum over 4 or 6 elements at x.5) round to even here, while
    # onnxruntime's float32 pooling rounds some of them the other way; a Conv after it would amplify that
    "avgpool-3x3-p1-exclude-pad": (lambda: pooled("AveragePool", 3, 1, 1, count_include_pad=0, tail=False),
                                   "avgpool"),
    "avgpool-2x2-s2-p1-exclude-pad": (lambda: pooled("AveragePool", 2, 2, 1, count_include_pad=0, tail=False),
                                      "avgpool"),
}


@pytest.mark.parametrize("name", sorted(POOLED))
def test_padding_and_pool_models_run_entirely_on_the_cores_bit_exact(tmp_path, name):
    make, kernel = POOLED[name]
    result, csim = compiled(make(), tmp_path / "project")
    assert result.cpu_ops == [] and kernel in kernels_used(result)
    assert csim.ok and all(core.bit_exact for core in csim.cores)
    assert all(o.max_abs_diff_lsb is not None and o.max_abs_diff_lsb <= 1 for o in csim.outputs)
    stages = [s for core in csim.to_json()["cores"] for s in core["stages"] if s["kernel"] == kernel]
    assert stages and all(s["cycles_csim"] == s["cycles_model"] for s in stages)


def pad_model(mode: str = "constant", pads=(0, 0, 1, 1, 0, 0, 1, 1)) -> onnx.ModelProto:
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 5])
    graph = helper.make_graph([helper.make_node("Pad", ["x", "p"], ["y"], name="pad", mode=mode)], "g", [x],
                              [helper.make_empty_tensor_value_info("y")],
                              [numpy_helper.from_array(np.array(pads, np.int64), "p")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model)


@pytest.mark.parametrize(("mode", "pads", "reason"), [
    ("reflect", (0, 0, 1, 1, 0, 0, 1, 1), "mode 'reflect'"),
    ("edge", (0, 0, 1, 1, 0, 0, 1, 1), "mode 'edge'"),
    ("constant", (0, 1, 0, 0, 0, 1, 0, 0), "channel axis"),
    ("constant", (0, 0, -1, 0, 0, 0, 1, 1), "negative Pad"),
])
def test_pads_no_core_runs_say_why(mode, pads, reason):
    op, graph = op_of(pad_model(mode, pads), "Pad")
    planned = plan_op(op, graph)
    assert isinstance(planned, Unsupported) and reason in planned.reason


def pad_case(h, w, c, pads, folding: Folding, seed: int, samples: int = 3):
    rng = np.random.default_rng(seed)
    m, s = quantize_multiplier(float(rng.uniform(0.5, 1.5)))
    config = {"H": h, "W": w, "C": c, **dict(zip(("PT", "PL", "PB", "PR"), pads, strict=True)),
              "PAD": int(rng.integers(-128, 128)), "ZX": int(rng.integers(-128, 128)), "M": m, "S": s,
              "ZY": int(rng.integers(-20, 20)), "LO": -120, "HI": 120}
    return config, {}, rng.integers(-128, 128, (samples, h * w * c), dtype=np.int8), folding


PADS = {"all-sides": (4, 5, 4, (1, 2, 0, 1), F(2)), "top-left": (3, 3, 3, (2, 1, 0, 0), F(3)),
        "wide-pe1": (2, 6, 2, (0, 0, 2, 3), F(1))}


@pytest.mark.parametrize("name", sorted(PADS))
def test_pad_rtl_bit_exact_and_cycles(tmp_path, name):
    *shape, folding = PADS[name]
    case = pad_case(*shape, folding, seed=len(name))
    result = simulate_case("pad", case, tmp_path, geometry=pad_geometry(case[0]))
    check_cycles(result, f"pad {name}")


def test_the_pad_reference_is_numpy_pad_of_the_requantized_input():
    config, _, inputs, _ = pad_case(3, 4, 2, (1, 0, 2, 1), F(2), seed=3)
    inner = reference.requant(inputs[0].reshape(3, 4, 2), zx=config["ZX"], m=config["M"], s=config["S"],
                              zy=config["ZY"], lo=config["LO"], hi=config["HI"])
    expected = np.full((6, 5, 2), config["PAD"], np.int8)
    expected[1:4, 0:4] = inner
    assert np.array_equal(KERNELS["pad"].reference(config, {}, [inputs[0]]), expected.reshape(-1))


@pytest.mark.parametrize("kernel", ["slice", "upsample", "pad", "avgpool"])
def test_rendered_verilog_is_verilog_2005_clean(tmp_path, kernel):
    import subprocess

    from fpgaplace.codegen.rtl import library, render_op

    case = {"slice": lambda: slice_case(*WINDOWS["focus-odd"][:4], F(3), seed=1),
            "upsample": lambda: upsample_case(3, 4, 2, 2, 2, F(2), seed=1),
            "pad": lambda: pad_case(3, 4, 2, (1, 1, 1, 1), F(2), seed=1),
            "avgpool": lambda: exclude_pad_case(F(2))}[kernel]()
    op = render_op(kernel, case[0], case[1], case[3], 100)
    sources = []
    for name, text in {**library(), **op.module.files}.items():
        (tmp_path / name).write_text(text)
        sources += [str(tmp_path / name)] if name.endswith(".v") else []
    run = subprocess.run(["iverilog", "-g2005", "-Wall", "-o", str(tmp_path / "lint.vvp"), *sources],
                         capture_output=True, text=True, check=False)
    problems = [line for line in run.stderr.splitlines() if "is sensitive to all" not in line]
    assert run.returncode == 0 and not problems, run.stderr


def test_the_exclude_pad_reference_divides_by_the_non_padded_elements():
    """Against float: the mean over the window's non-padded elements times sx / sy, rounded (equal
    wherever the float value is not within 1e-6 of a tie, else within 1)."""
    from fpgaplace.hw.lowering import multipliers

    rng = np.random.default_rng(11)
    x = rng.integers(-128, 128, (5, 6, 3), dtype=np.int8)
    zx, zy, ratio = -7, 3, 0.83
    ms, ss = multipliers(ratio / np.maximum(np.arange(10), 1), "test")
    got = reference.avgpool_exclude_pad(x, kernel=(3, 3), stride=(2, 1), pads=(1, 1, 1, 1), zx=zx, ms=ms, ss=ss,
                                        zy=zy)
    padded = np.pad(x.astype(np.float64) - zx, ((1, 1), (1, 1), (0, 0)), constant_values=np.nan)
    for ho in range(got.shape[0]):
        for wo in range(got.shape[1]):
            window = padded[2 * ho:2 * ho + 3, wo:wo + 3]
            value = np.nanmean(window, axis=(0, 1)) * ratio
            expected = np.clip(np.rint(value) + zy, -128, 127)
            tie = np.abs(np.abs(value - np.floor(value)) - 0.5) < 1e-6
            assert np.all(np.where(tie, np.abs(got[ho, wo] - expected) <= 1, got[ho, wo] == expected))


def exact_average(x: np.ndarray, kernel, stride, pads, zx: int, ratio: float, zy: int, exclude: bool):
    """The ONNX meaning of an int8 average, in exact rationals: ``round_half_even(Σ (x - zx) *
    ratio / n) + zy`` clipped, n the window's non-padded elements (``exclude``) or all of them;
    and how many of its values were exact midpoints. O(Ho*Wo*C*KH*KW)."""
    from fractions import Fraction

    (kh, kw), (sh, sw), (pt, pl, pb, pr) = kernel, stride, pads
    h, w, c = x.shape
    out = np.zeros(((h + pt + pb - kh) // sh + 1, (w + pl + pr - kw) // sw + 1, c), dtype=np.int64)
    midpoints = 0
    for ho in range(out.shape[0]):
        for wo in range(out.shape[1]):
            top, left = ho * sh - pt, wo * sw - pl
            window = x[max(top, 0):top + kh, max(left, 0):left + kw].astype(np.int64) - zx
            count = window.shape[0] * window.shape[1] if exclude else kh * kw
            for channel in range(c):
                value = Fraction(int(window[:, :, channel].sum())) * Fraction(ratio) / count
                midpoints += value.denominator == 2
                out[ho, wo, channel] = min(127, max(-128, round(value) + zy))  # round(Fraction): half to even
    return out, midpoints


@pytest.mark.parametrize("ratio", [1.0, 0.5, 0.25])
def test_average_pools_round_exact_midpoints_to_even(ratio):
    """ShuffleNet's padded 3x3 stride-2 average without count_include_pad keeps its input's scale
    (onnxruntime's quantizer), so many border sums over 6 or 4 elements are exact midpoints (15 / 6
    = 2.5). With the tables lowering makes (``count_tables``: multipliers and midpoint bands) the
    reference rounds each to even, as exact arithmetic does; the rounded multiplier of 1/6 alone
    sent them all one way (1% of ShuffleNet's pooled values 1 LSB off onnxruntime). Input scales 1,
    1/2 and 1/4 of the output's; the same for a 2x3 average counting padding (6 elements everywhere)
    through its one (M, S, TIE)."""
    from fpgaplace.hw.pool import count_tables
    from fpgaplace.hw.quant import tie_bits

    rng = np.random.default_rng(7)
    x = rng.integers(-128, 128, (14, 14, 8), dtype=np.int8)
    zx, zy, scale = -5, -128, 0.37
    tables = count_tables(ratio * scale, scale, 9, "test")
    got = reference.avgpool_exclude_pad(x, kernel=(3, 3), stride=(2, 2), pads=(1, 1, 1, 1), zx=zx,
                                        ms=tables["mult"], ss=tables["shift"], zy=zy, ties=tables["tie"])
    expected, midpoints = exact_average(x, (3, 3), (2, 2), (1, 1, 1, 1), zx, ratio, zy, exclude=True)
    assert midpoints > 5 and np.array_equal(got.astype(np.int64), expected)
    m, s = quantize_multiplier(ratio / 6)
    tie = tie_bits(ratio * scale, scale, 6, m, s)
    got = reference.avgpool(x, kernel=(2, 3), stride=(1, 2), pads=(1, 1, 0, 0), zx=zx, m=m, s=s, zy=3, tie=tie)
    expected, midpoints = exact_average(x, (2, 3), (1, 2), (1, 1, 0, 0), zx, ratio, 3, exclude=False)
    assert tie > 0 and midpoints > 5 and np.array_equal(got.astype(np.int64), expected)


def test_the_midpoint_band_is_empty_without_a_power_of_two_scale_ratio_or_for_an_exact_multiplier():
    """``tie_bits``: no band (the plain midpoint test) for a ratio of scales that is not a power of
    two or a count whose multiplier is exact; for counts 3, 5, 6, 7, 9 at ratio 1 a band that
    holds every midpoint's product and no other sum's."""
    from fractions import Fraction

    from fpgaplace.hw.quant import tie_bits

    assert tie_bits(0.3, 0.7, 6, *quantize_multiplier(0.3 / 0.7 / 6)) == 0
    assert all(tie_bits(0.25, 0.25, n, *quantize_multiplier(1 / n)) == 0 for n in (1, 2, 4, 8))
    for n in (3, 5, 6, 7, 9):
        m, s = quantize_multiplier(1 / n)
        band = 2 ** tie_bits(0.25, 0.25, n, m, s)
        assert band > 1
        sums = np.arange(-255 * n, 255 * n + 1)
        remainder = sums * m - ((sums * m) >> s << s)
        near = np.abs(remainder - 2 ** (s - 1)) < band
        exact = np.array([Fraction(int(v), n).denominator == 2 for v in sums])
        assert np.array_equal(near, exact)


def test_average_pooling_without_count_include_pad_plans_onto_the_avgpool_kernel():
    op, graph = op_of(pooled("AveragePool", 3, 1, 1, count_include_pad=0), "AveragePool")
    kernel, geometry = plan_op(op, graph)
    assert kernel.name == "avgpool" and geometry.shape["EXCLUDE_PAD"] == 1


EXCLUDE_POOLS = {"3x3-s1-p1": (6, 5, 4, 3, 1, 1, F(2)), "2x2-s2-p1": (5, 6, 2, 2, 2, 1, F(1)),
                 "3x3-s1-p1-mmv": (4, 6, 2, 3, 1, 1, F(2, 1, 2)),
                 "3x3-s2-p1-same-scale": (8, 8, 4, 3, 2, 1, F(2))}  # ShuffleNet's: midpoints, to even


@pytest.mark.parametrize("name", sorted(EXCLUDE_POOLS))
def test_exclude_pad_average_rtl_bit_exact_and_cycles(tmp_path, name):
    """The window unit with one constant requantization per count of the window's elements inside
    the frame (and, when the output keeps the input's scale, its midpoint band), against the
    reference (``avgpool_exclude_pad``)."""
    from rtl_cases import pool_case

    from fpgaplace.hw.pool import count_tables
    from fpgaplace.hw.registry import window_geometry

    h, w, c, k, stride, pad, folding = EXCLUDE_POOLS[name]
    config, _, inputs, _ = pool_case("avgpool", h, w, c, k, stride, pad, folding, seed=len(name))
    ratio = 1.0 if name.endswith("same-scale") else np.random.default_rng(1).uniform(0.5, 1.5)
    tables = count_tables(0.2 * ratio, 0.2, k * k, name)
    assert (tables["tie"] > 0).any() == name.endswith("same-scale")
    config["EXCLUDE_PAD"] = 1
    case = (config, tables, inputs, folding)
    result = simulate_case("avgpool", case, tmp_path, geometry=window_geometry("avgpool", config))
    check_cycles(result, f"avgpool exclude-pad {name}")


def exclude_pad_case(folding: Folding):
    """A 3x3 stride-1 pad-1 average without count_include_pad (config, tables, inputs, folding)."""
    from rtl_cases import pool_case

    from fpgaplace.hw.lowering import multipliers

    config, _, inputs, _ = pool_case("avgpool", 4, 4, 2, 3, 1, 1, folding, seed=5)
    mult, shift = multipliers(0.7 / np.maximum(np.arange(10), 1), "exclude-pad case")
    return config | {"EXCLUDE_PAD": 1}, {"mult": mult, "shift": shift}, inputs, folding


YOSYS_MODELS = {  # small enough for yosys' DSP mapping in a minute or two each
    "split": lambda: split_concat(size=4), "upsample": lambda: upsample(size=4),
    "pad": lambda: padded(size=4), "avg-exclude-pad": lambda: pooled("AveragePool", 3, 1, 1, size=4),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(YOSYS_MODELS))
def test_yosys_dsps_equal_the_estimate_beside_the_movement_units(tmp_path, name):
    """yosys synth_xilinx maps no DSP in the slice, upsample, pad and average units (constant
    multipliers are shift-and-add sums, as the op library counts them), and every other layer's
    count equals its estimate."""
    from fpgaplace.sim import yosys

    Design(YOSYS_MODELS[name](), "pynq-z2", profile_cpu=False).compile(tmp_path / "project", random_samples=2)
    result = yosys.project_resources(tmp_path / "project", dsp_only=True)
    layers = [layer for core in result.cores for layer in core.layers]
    assert {"slice", "upsample", "pad", "avgpool"} & {layer.kernel for layer in layers}
    for layer in layers:
        assert layer.yosys.dsp == layer.estimate["dsp"], (layer.op, layer.kernel, layer.yosys)
