"""QONNX models compiled into folded cores (``fpgaplace.model.qonnx_qdq`` and the op library's
lowering): every core bit-exact against its integer reference in C simulation, and the placed
model's outputs equal to qonnx's own execution (``qonnx.core.onnx_exec.execute_onnx``) of the
QONNX model, on random inputs. The CNV networks are FINN's layer structure at fewer channels.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
import pytest
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.core.onnx_exec import execute_onnx
from qonnx.transformation.infer_shapes import InferShapes

from fpgaplace import Design
from fpgaplace.board.load import load_board
from fpgaplace.codegen.rtl_project import board_cores
from fpgaplace.hw import KERNELS, Folding
from fpgaplace.hw.kernel import lane_choice
from fpgaplace.model import zoo
from fpgaplace.model.qdq import read_widths
from fpgaplace.model.qonnx_qdq import int_quant, qonnx_to_qdq
from fpgaplace.project.arrays import load_arrays
from fpgaplace.project.record import load
from fpgaplace.sim.csim import run_csim
from fpgaplace.util.errors import FpgaplaceError

SMALL_CNV = {"channels": (8, 8, 16, 16, 32, 32), "dense": (32, 32)}
SAMPLES = 3


def qonnx_outputs(model: onnx.ModelProto, images: np.ndarray) -> np.ndarray:
    """qonnx's execution of ``model``, one image at a time."""
    wrapped = ModelWrapper(model).transform(InferShapes())
    name = model.graph.output[0].name
    return np.concatenate([execute_onnx(wrapped, {"image": image[None]})[name] for image in images])


def assert_every_op_lowers(result) -> None:
    """Every op a compile left on a CPU is there by the placement's choice, none because no core
    could run it (the CPU pieces run in onnxruntime and must agree with qonnx too)."""
    from fpgaplace.flow.compile import FOLLOWS_REASON, HOST_REASON, INPUT_REASON, PLACED_REASON

    reasons = {group["reason"] for group in result.left_on_cpus["groups"]}
    assert reasons <= {FOLLOWS_REASON, HOST_REASON, INPUT_REASON, PLACED_REASON}, reasons


def packed_weight_layers(project: Path) -> dict[str, int]:
    """Checks that every dot-product layer's weights are kept in C++ at its lane width
    (``Kernel.width_members``' WB, what the folding prices them at): a resident layer's array in
    weights.h of ``ceil(weights * WB / 8)`` bytes, the streamed ones' the core's wmem bytes. Returns
    how many layers of each kernel keep them below 8 bits."""
    packed: dict[str, int] = {}
    for core in load(project).cores:
        arrays = load_arrays(project, core)
        header = (project / core.folder / "weights.h").read_text()
        streamed = 0
        for i, layer in enumerate(core.layers):
            if not KERNELS[layer.kernel].uses_dsp or "w" not in arrays[i]:
                continue
            bits = KERNELS[layer.kernel].width_members(layer.widths and layer.widths.to_json(), arrays[i]).get("WB", 8)
            size = math.ceil(arrays[i]["w"].size * bits / 8)
            packed[layer.kernel] = packed.get(layer.kernel, 0) + (bits < 8)
            if layer.resident:
                assert f"static const int8_t l{i}_w[{size}] =" in header, (layer.op, bits, size)
            else:
                streamed += size
        assert core.streamed_weight_bytes == streamed, (core.name, core.streamed_weight_bytes, streamed)
    return packed


def images(count: int, size: int = 32, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, (count, 3, size, size)).astype(np.float32)


def test_int_quant_follows_qonnx():
    """The codes equal qonnx's Quant (its int_quant) at every width, signedness and narrowness."""
    from qonnx.custom_op.general.quant import quant

    from fpgaplace.model.qonnx_qdq import QuantSpec

    x = np.random.default_rng(1).normal(0, 3, 2000).astype(np.float32)
    x[:8] = [0.0, 0.5, 1.5, -2.5, 2.5, -0.5, 100.0, -100.0]  # ties and saturation
    for bits in (1, 2, 3, 4, 8):
        for signed in (True, False):
            for narrow in (False, True):
                spec = QuantSpec("q", np.array(1.0, np.float32), 0.0, bits, signed, narrow)
                want = quant(x, np.float32(1.0), np.float32(0.0), np.float32(bits), signed, narrow, "ROUND")
                assert np.array_equal(int_quant(x, spec), want), (bits, signed, narrow)


@pytest.mark.parametrize(("bits", "batch_norm"), [((4, 4), False), ((2, 2), True), ((1, 1), False),
                                                  ((1, 1), True)])
def test_rewritten_model_runs_like_qonnx(bits, batch_norm):
    """The QDQ rewrite, run by onnxruntime without graph optimizations as the CPU pieces of its
    projects run, equals qonnx's execution."""
    from fpgaplace.model.qdq import is_from_qonnx
    from fpgaplace.util.onnxrt import session

    model = zoo.cnv(*bits, batch_norm=batch_norm, **SMALL_CNV)
    rewritten = qonnx_to_qdq(model)
    onnx.checker.check_model(rewritten)
    assert is_from_qonnx(rewritten)
    runner = session(rewritten, "rewritten", optimized=False)
    x = images(2)
    got = np.concatenate([runner.run(None, {"image": image[None]})[0] for image in x])
    assert np.array_equal(got, qonnx_outputs(model, x))
    widths = read_widths(rewritten)
    assert {w["bits"] for w in widths.values()} == {*bits, 8}


@pytest.mark.parametrize(("bits", "batch_norm"), [((4, 4), False), ((1, 2), False), ((4, 4), True), ((2, 2), True),
                                                  ((1, 1), True)])
def test_cnv_compiles_bit_exact_and_equal_to_qonnx(tmp_path, bits, batch_norm):
    """A CNV at w4a4, w1a2 (bipolar weights) and, with a BatchNormalization before every
    activation quantizer, w4a4, w2a2 and w1a1 (bipolar activations: threshold stages) compiles for a
    ZCU104 (every op lowers; the w1a1 placement keeps its last two layers on a CPU, which runs them
    in onnxruntime), each core bit-exact in C simulation, the outputs equal to qonnx's execution."""
    model = zoo.cnv(*bits, batch_norm=batch_norm, **SMALL_CNV)
    result = Design(model, "zcu104", profile_cpu=False).compile(tmp_path / "project")
    assert_every_op_lowers(result)
    layers = [layer for core in result.design["cores"] for layer in core["stages"]]
    assert layers
    x = images(SAMPLES)
    simulated = run_csim(tmp_path / "project", inputs=x)
    assert simulated.cores and all(core.bit_exact for core in simulated.cores)
    logits = simulated.values["logits"]
    assert np.unique(logits).size > 5  # the network does not saturate into a constant
    assert np.array_equal(logits, qonnx_outputs(model, x))


def test_mobilenet_v1_w4a4_compiles_bit_exact_and_equal_to_qonnx(tmp_path):
    """MobileNetV1 at w4a4 with 8-bit first and last layers (depthwise and pointwise convolutions, batch
    norms, ReLU and unsigned 4-bit quantizers, global average pooling), a quarter wide and five blocks
    deep at 32x32, on a KV260: cores bit-exact, the outputs equal to qonnx's execution."""
    model = zoo.mobilenet_v1_lowbit(4, 4, image=32, width=0.25, classes=10, blocks=5)
    result = Design(model, "kv260", profile_cpu=False).compile(tmp_path / "project")
    assert_every_op_lowers(result)
    stages = {layer["widths"]["output_stage"] for core in result.design["cores"] for layer in core["layers"]
              if layer["widths"] and layer["widths"]["weights"] == 4}
    assert stages == {"thresholds"}  # a batch norm before every 4-bit activation quantizer
    assert packed_weight_layers(tmp_path / "project")["conv2d"] >= 5  # the 4-bit convs' weights two a byte
    x = images(SAMPLES)
    simulated = run_csim(tmp_path / "project", inputs=x)
    assert simulated.cores and all(core.bit_exact for core in simulated.cores)
    assert np.array_equal(simulated.values["logits"], qonnx_outputs(model, x))


def test_a_core_whose_luts_go_elsewhere_packs_its_narrow_lanes_into_dsps(tmp_path):
    """pynq-z2's share rule keeps 4 x 4 lanes on LUTs (a third of one of a core's 88 DSPs is a larger
    share than 37 of its 19,680 LUTs), but the small MobileNetV1's threshold tables and line
    buffers take LUTs too: compile folds the core each way (``codegen.lower.lane_cores``), keeps
    the DSP lanes there, records them (design.json ``narrow_lanes``), and the record's resources are
    the op library's on the board core with those lanes (``board_cores``), which the RTL and the
    checks build for. A malformed choice in design.json is a one-line error."""
    model = zoo.mobilenet_v1_lowbit(4, 4, image=32, width=0.25, classes=10, blocks=5)
    Design(model, "pynq-z2", profile_cpu=False).compile(tmp_path / "project")
    design = load(tmp_path / "project")
    board = load_board("pynq-z2")
    assert lane_choice(board.cores[0], 4, 4).kind == "lut", "the share rule must disagree here"
    chosen = board_cores(board, design)
    flipped = [core for core in design.cores if core.narrow_lanes == "dsp"]
    assert flipped, [(core.name, core.narrow_lanes) for core in design.cores]
    for core in flipped:
        assert lane_choice(chosen[core.name], 4, 4).kind == "dsp"
        four_bit, layer_arrays = 0, load_arrays(tmp_path / "project", core)
        for layer in core.layers:
            if layer.widths is None or layer.kernel not in ("conv2d", "dense"):
                continue
            kernel, arrays = KERNELS[layer.kernel], layer_arrays[core.layers.index(layer)]
            geometry = kernel.priced_geometry(kernel.config_geometry(layer.config), layer.widths.to_json(), arrays)
            priced = kernel.resources(geometry, Folding(layer.pe, layer.simd, layer.mmv, layer.uram), chosen[core.name],
                                      layer.resident)
            assert layer.resources == priced.to_json(), (layer.op, layer.resources, priced)
            four_bit += (geometry.weight_bits, geometry.activation_bits) == (4, 4)
        assert four_bit, core.name
    record = tmp_path / "project" / "design.json"
    record.write_text(record.read_text().replace('"narrow_lanes": "dsp"', '"narrow_lanes": "fpga"', 1))
    with pytest.raises(FpgaplaceError, match=r'cores\.core\d\.narrow_lanes: expected "dsp", "lut" or ""'):
        load(tmp_path / "project")


def test_streamed_lowbit_weights_are_packed_and_bit_exact(tmp_path):
    """A w4a4 MLP too large for a PYNQ-Z2's BRAM reads its hidden layers' weights from DRAM at
    their 4 bits (two a byte in weights.bin, the bytes the cost model streams), bit-exact in C
    simulation."""
    model = zoo.qonnx_mlp(4, 4, image=8, hidden=(1024, 256))
    Design(model, "pynq-z2", profile_cpu=False).compile(tmp_path / "project")
    cores = load(tmp_path / "project").cores
    assert sum(core.streamed_weight_bytes for core in cores) >= (192 * 1024 + 1024 * 256) // 2
    assert packed_weight_layers(tmp_path / "project")["dense"] >= 2
    for core in (core for core in cores if core.streamed_weight_bytes):
        assert (tmp_path / "project" / core.folder / "weights.bin").stat().st_size == core.streamed_weight_bytes
    simulated = run_csim(tmp_path / "project", inputs=images(2, 8))
    assert simulated.cores and all(core.bit_exact for core in simulated.cores)


def test_multithreshold_is_finns():
    """The threshold stage's integer reference counts as qonnx's MultiThreshold does."""
    from qonnx.custom_op.general.multithreshold import multithreshold as finn

    from fpgaplace.hw.threshold import multithreshold

    rng = np.random.default_rng(3)
    table = np.sort(rng.integers(-50, 50, (6, 15)), axis=1)
    acc = rng.integers(-60, 60, (4, 5, 6))
    want = finn(acc.astype(np.float32), table.astype(np.float32), channels_last=True)
    assert np.array_equal(multithreshold(acc, table, -8), want - 8)
    scaled = finn(acc.astype(np.float32), table.astype(np.float32), out_scale=2.0, out_bias=-15.0, channels_last=True)
    assert np.array_equal(multithreshold(acc, table, -15, step=2), scaled)  # FINN's out_scale: every 2nd code


def test_a_bipolar_stage_keeps_each_threshold_once():
    """A table whose every channel repeats each threshold (codes -1 and +1 of ``-1..1``, 0 never
    written) is kept once a channel with the step 2 (``threshold.merged_steps``), and the stage
    writes the same codes; a table without common runs is kept whole."""
    from fpgaplace.hw.threshold import merged_steps, multithreshold

    rng = np.random.default_rng(4)
    single = np.sort(rng.integers(-40, 40, (5, 1)), axis=1)
    doubled = np.repeat(single, 2, axis=1)
    kept, step = merged_steps(doubled)
    assert step == 2 and np.array_equal(kept, single)
    acc = rng.integers(-50, 50, (7, 5))
    assert np.array_equal(multithreshold(acc, kept, -1, step), multithreshold(acc, doubled, -1))
    distinct = np.sort(rng.choice(100, (5, 4), replace=False) - 50, axis=1)
    assert merged_steps(distinct)[1] == 1 and merged_steps(np.repeat(distinct, 3, axis=1))[1] == 3


def onnxruntime_batch_norm(u: np.ndarray, gamma, beta, mean, var) -> np.ndarray:
    """onnxruntime's BatchNormalization (epsilon 1e-5) of ``u`` ([1, C, ...] float32), one node run
    as qonnx's ``execute_onnx`` runs it."""
    from onnx import TensorProto, helper, numpy_helper

    from fpgaplace.util.onnxrt import session

    params = {"gamma": gamma, "beta": beta, "mean": mean, "var": var}
    node = helper.make_node("BatchNormalization", ["u", *params], ["v"], epsilon=1e-5)
    graph = helper.make_graph([node], "bn", [helper.make_tensor_value_info("u", TensorProto.FLOAT, u.shape)],
                              [helper.make_tensor_value_info("v", TensorProto.FLOAT, u.shape)],
                              [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in params.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return session(model, "bn", optimized=False).run(None, {"u": u.astype(np.float32)})[0]


def test_batch_norm_is_onnxruntimes():
    """The threshold stage's BatchNormalization (``hw.threshold.batch_norm``) equals onnxruntime's
    bit for bit on every value (ONNX's own formula in float32 differs in the last bit on about half
    of them)."""
    from fpgaplace.hw.threshold import batch_norm

    rng = np.random.default_rng(5)
    channels = 64
    gamma, beta, mean = (rng.normal(0, 1, channels) for _ in range(3))
    var = rng.uniform(0.01, 4, channels)
    u = rng.normal(0, 2, (1, channels, 50, 20)).astype(np.float32)
    want = onnxruntime_batch_norm(u, gamma, beta, mean, var)
    assert np.array_equal(batch_norm(u[0], gamma, beta, mean, var, 1e-5), want[0])


ACC_SCALE = 2.0**-12  # the test convolution's: input codes at 2^-7 times weight codes at 2^-5
OUT_SCALE = 2.0**-3  # its 4-bit unsigned output quantizer's


def near_tie_channels(count: int, candidates: int = 4096, seed: int = 0) -> list[np.ndarray]:
    """Batch-norm parameters (gamma, beta, mean, var) of the ``count`` channels, of ``candidates``
    random ones (a quarter with a negative scale), whose onnxruntime output on some accumulator
    ``-2048 .. 2047`` at ``ACC_SCALE`` lands nearest a midpoint between two codes of the 4-bit
    output quantizer (exactly on one for most): where one float32 rounding decides the code."""
    rng = np.random.default_rng(seed)
    params = [rng.uniform(0.5, 1.5, candidates) * np.where(rng.random(candidates) < 0.25, -1, 1),
              rng.uniform(0.3, 1.2, candidates), rng.uniform(-0.1, 0.1, candidates),
              rng.uniform(0.08, 0.15, candidates)]
    params = [p.astype(np.float32) for p in params]
    u = np.broadcast_to(np.arange(-2048, 2048, dtype=np.float32) * np.float32(ACC_SCALE), (1, candidates, 4096))
    codes = onnxruntime_batch_norm(np.ascontiguousarray(u), *params)[0] / np.float32(OUT_SCALE)
    off_midpoint = np.where((codes > 0) & (codes < 15), np.abs(codes - np.floor(codes) - 0.5), 1.0)
    nearest = np.argsort(off_midpoint.min(axis=1), kind="stable")[:count]
    return [p[nearest] for p in params]


def batch_norm_conv(gamma, beta, mean, var) -> onnx.ModelProto:
    """A QONNX model of one layer: an 8-bit image ``[1, 2, 64, 64]``, a 1x1 convolution whose every
    output channel's weight codes are (1, 16), a BatchNormalization of the given parameters, a ReLU
    and an unsigned 4-bit quantizer (the output). With input codes 0..15 on channel 0 and
    -128..127 on channel 1 (``every_accumulator``) its accumulators are every integer of -2048..2047."""
    from onnx import TensorProto, helper, numpy_helper

    from fpgaplace.model.zoo import QONNX_DOMAIN

    channels = len(gamma)
    constants = {"in_scale": 2.0**-7, "zero": 0.0, "bits8": 8.0, "bits4": 4.0, "out_scale": OUT_SCALE,
                 "w_scale": 2.0**-5, "w": np.tile(np.array([1.0, 16.0]).reshape(1, 2, 1, 1), (channels, 1, 1, 1))
                 * 2.0**-5, "gamma": gamma, "beta": beta, "mean": mean, "var": var}

    def quant(x: str, scale: str, bits: str, out: str, signed: int) -> onnx.NodeProto:
        return helper.make_node("Quant", [x, scale, "zero", bits], [out], domain=QONNX_DOMAIN, signed=signed,
                                narrow=0, rounding_mode="ROUND")

    nodes = [quant("image", "in_scale", "bits8", "x", 1), quant("w", "w_scale", "bits8", "wq", 1),
             helper.make_node("Conv", ["x", "wq"], ["u"], kernel_shape=[1, 1]),
             helper.make_node("BatchNormalization", ["u", "gamma", "beta", "mean", "var"], ["v"], epsilon=1e-5),
             helper.make_node("Relu", ["v"], ["r"]), quant("r", "out_scale", "bits4", "y", 0)]
    graph = helper.make_graph(
        nodes, "near_ties", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 2, 64, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels, 64, 64])],
        [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in constants.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(QONNX_DOMAIN, 1)])
    model.ir_version = 8
    return model


def every_accumulator() -> np.ndarray:
    """The image giving ``batch_norm_conv`` every accumulator once: channel 0's codes 0..15 and
    channel 1's -128..127 at every pairing."""
    low, high = np.meshgrid(np.arange(16), np.arange(-128, 128))
    return (np.stack([low.reshape(64, 64), high.reshape(64, 64)]) * 2.0**-7).astype(np.float32)[None]


def test_threshold_stage_equals_qonnx_at_code_midpoints(tmp_path):
    """A convolution, batch norm and 4-bit quantizer whose batch-norm outputs land on (or within a
    float32 rounding of) midpoints between codes compiles into a threshold stage that equals
    qonnx's execution on every accumulator, bit for bit (with ONNX's formula in place of
    onnxruntime's, 3 of the 65,536 outputs were one code off: the 1-LSB step MobileNetV1 w4a4
    at 224 carried to 6 LSB at its logits)."""
    model = batch_norm_conv(*near_tie_channels(16))
    result = Design(model, "zcu104", profile_cpu=False).compile(tmp_path / "project")
    stages = [layer["widths"]["output_stage"] for core in result.design["cores"] for layer in core["layers"]]
    assert stages == ["thresholds"] and not result.left_on_cpus["ops"]
    x = every_accumulator()
    want = qonnx_outputs(model, x)
    assert np.unique(want).size == 16  # every code is reached
    simulated = run_csim(tmp_path / "project", inputs=x)
    assert simulated.cores and all(core.bit_exact for core in simulated.cores)
    assert np.array_equal(simulated.values["y"], want)


def test_trunc_is_named(tmp_path):
    """A quantizer the rewrite does not lower is one line naming the node."""
    model = zoo.cnv(4, 4, **SMALL_CNV)
    node = next(n for n in model.graph.node if n.op_type == "Quant" and n.input[0].startswith("conv"))
    node.op_type = "Trunc"
    with pytest.raises(FpgaplaceError, match=rf"Trunc '{node.name}'.*not lowered") as error:
        qonnx_to_qdq(model, "cnv.onnx")
    assert "\n" not in str(error.value) and str(error.value).startswith("cnv.onnx: ")


# ---- int4 and int2 weights in QDQ ----------------------------------------------------------------


def weight_codes(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """The int8 codes behind each Conv/Gemm/MatMul weight DequantizeLinear, by node name."""
    from onnx import numpy_helper

    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    producer = {out: node for node in model.graph.node for out in node.output}
    return {node.name: inits[producer[node.input[1]].input[0]] for node in model.graph.node
            if node.op_type in ("Conv", "Gemm", "MatMul") and node.input[1] in producer}


@pytest.mark.parametrize("bits", [4, 2])
def test_narrow_weights_keep_the_model_close(bits):
    """narrow_weights puts every weight in the symmetric range of ``bits`` bits (one layer kept at 8
    by name), records the widths the front end costs by, and onnxruntime runs the model with its
    outputs near the int8 model's."""
    from fpgaplace.model.frontend.load import from_model
    from fpgaplace.model.quantize import calibration_inputs, narrow_weights, quantize_model
    from fpgaplace.util.onnxrt import run_model

    model = zoo.cnn_residual(batch=1)
    feeds = calibration_inputs(model, random_samples=4)
    int8 = quantize_model(model, feeds)
    first = next(iter(weight_codes(int8)))
    narrow = narrow_weights(int8, bits, {first: 8})
    codes = weight_codes(narrow)
    high = 2 ** (bits - 1) - 1
    assert np.array_equal(codes[first], weight_codes(int8)[first])
    assert all(np.abs(c).max() == high for name, c in codes.items() if name != first)
    assert {w["bits"] for w in read_widths(narrow).values()} == {bits}
    graph = from_model(narrow)
    weights = [op.inputs[1] for op in graph.ops.values() if op.op_type in ("Conv", "Gemm") and op.name != first]
    assert weights and all(graph.tensors[t].quant_bits == bits for t in weights)
    want, got = run_model(int8, feeds[0])["logits"], run_model(narrow, feeds[0])["logits"]
    assert np.abs(got - want).max() < (0.5 if bits == 4 else 2.0) * np.abs(want).max()


def test_int4_design_compiles_bit_exact(tmp_path):
    """A float model compiled at precision int4: int4 weights in int8 storage, every core bit-exact in
    C simulation, the outputs within 1 LSB of onnxruntime's run of the int4 QDQ model."""
    design = Design(zoo.cnn_residual(batch=1), "zcu104", profile_cpu=False, precision="int4")
    result = design.compile(tmp_path / "project", random_samples=8)
    assert result.left_on_cpus["groups"] == []
    quantized = design.quantized(random_samples=8)
    assert all(np.abs(c).max() <= 7 for c in weight_codes(quantized.graph.model).values())
    simulated = run_csim(tmp_path / "project", samples=SAMPLES)
    assert simulated.ok and all(core.bit_exact for core in simulated.cores)


def test_cli_quantize_int4(tmp_path):
    """``fpgaplace quantize --precision int4`` writes a QDQ model with 4-bit weights."""
    import subprocess
    import sys

    source = tmp_path / "cnn.onnx"
    onnx.save(zoo.cnn_residual(batch=1), source)
    target = tmp_path / "cnn.int4.onnx"
    result = subprocess.run([sys.executable, "-m", "fpgaplace.cli.app", "quantize", str(source), "--out", str(target),
                             "--random", "4", "--precision", "int4", "--json"], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    codes = weight_codes(onnx.load(target))
    assert codes and all(np.abs(c).max() == 7 for c in codes.values())


# ---- widths in inspect, compile, design.json and report ------------------------------------------


def cli(*args: str):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "fpgaplace.cli.app", *args], capture_output=True, text=True,
                          timeout=600)


def test_widths_in_inspect_compile_record_and_report(tmp_path):
    """inspect shows each op's bits, compile prints each layer's widths, design.json records them
    (typed, ``record.LayerWidths``) and the report shows them; a bad record is one line."""
    import json

    from fpgaplace.project.record import LayerWidths, load

    source = tmp_path / "cnv.onnx"
    onnx.save(zoo.cnv(2, 2, batch_norm=True, **SMALL_CNV), source)
    inspected = cli("inspect", str(source), "--json")
    assert inspected.returncode == 0, inspected.stderr
    convs = [r["bits"] for r in json.loads(inspected.stdout)["ops"] if r["type"] == "Conv"]
    assert convs[0] == {"weights": 2, "input": 8, "output": 8} and convs[1]["input"] == 2

    project = tmp_path / "project"
    compiled = cli("compile", str(source), "--board", "pynq-z2", "--out", str(project), "--cpu-cost", "analytic")
    assert compiled.returncode == 0, compiled.stderr
    assert "QONNX model" in compiled.stdout and "w2 a2 -> a2 (thresholds)" in compiled.stdout
    assert load(project).model.from_qonnx  # the driver runs its CPU pieces as qonnx defines them
    layers = {layer.op: layer for core in load(project).cores for layer in core.layers}
    widths = [layer.widths for layer in layers.values() if layer.kernel in ("conv2d", "dense")]
    assert all(isinstance(w, LayerWidths) for w in widths)
    assert [w.weights for w in widths].count(2) == len(widths)
    assert all(w.output_stage == "thresholds" for w in widths if w.output == 2)  # a batch norm before each
    last = [w for w in widths if w.output == 8]
    assert len(last) == 1 and last[0].output_stage == "requantize"  # the logits: a requantizer

    report = cli("report", str(project), "--out", str(tmp_path / "report.html"))
    assert report.returncode == 0, report.stderr
    assert "<td>w2 a2 -&gt; a2 (thresholds)</td>" in (tmp_path / "report.html").read_text()

    document = json.loads((project / "design.json").read_text())
    document["cores"][0]["layers"][0]["widths"]["output_stage"] = "lookup"
    (project / "design.json").write_text(json.dumps(document))
    with pytest.raises(FpgaplaceError, match=r"widths\.output_stage: expected requantize or thresholds") as error:
        load(project)
    assert "\n" not in str(error.value)


def test_cnv_smaller_than_its_layers_allow_is_one_line_naming_the_least_image():
    """CNV's six unpadded 3x3 convolutions and two pools leave no pixel of an image under 32 px: the
    zoo says so in one line instead of building a model whose shapes go negative."""
    assert zoo.cnv_output_size(zoo.CNV_MIN_IMAGE) == 1 and zoo.cnv_output_size(zoo.CNV_MIN_IMAGE - 1) < 1
    with pytest.raises(FpgaplaceError, match=f"image 16; expected at least {zoo.CNV_MIN_IMAGE} pixels") as error:
        zoo.cnv(1, 1, image=16)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("board", ["pynq-z2", "zcu104"])
def test_an_int8_cnv_with_batch_norms_compiles_where_its_threshold_stages_outgrow_the_cores(tmp_path, board):
    """FINN's CNV at w8a8 with a batch norm before every 8-bit quantizer: 255 thresholds a channel.
    On pynq-z2 some layers' tables alone outgrow a core's BRAM (each is taken off the core's kind:
    ``refine.off_the_kind``); on both boards the threshold stages' LUTs together outgrow the cores
    while their bytes fit (each op is charged bytes for its share of the LUTs: ``refine.logic_bytes``).
    Before, growing the ops' bytes by 1.25 a round moved nothing, and compile failed: on pynq-z2
    "op 'conv_12' does not fit the core at any folding" after six rounds, on zcu104 "no cut of the
    fabric into cores fits the model". Now each core's folding fits its budget and the rest runs on
    the ARM cores."""
    result = Design(zoo.cnv(8, 8, batch_norm=True), board, profile_cpu=False).compile(tmp_path / "p",
                                                                                      random_samples=2)
    design = load(tmp_path / "p")
    assert design.cores and result.design["fps"] > 0 and result.cpu_ops
    budgets = {core.name: core for core in load_board(board).cores}
    for core in design.cores:
        for key in ("lut", "dsp", "bram36"):
            assert core.resources[key] <= getattr(budgets[core.name], key), (core.name, key, core.resources)


def test_a_mobilenet_whose_threshold_tables_outgrow_a_core_s_bram_compiles(tmp_path):
    """MobileNetV1 at w8a8 with a batch norm before every 8-bit quantizer (255 thresholds a channel,
    in block RAM) on zcu104 at 96 px: its first core's ops needed 690 BRAM36 at their smallest
    folding against the core's 243; six rounds of growing their bytes by 1.25 moved too little,
    and compile failed ("no cut of the fabric into cores fits the model"). Once the rounds left
    cannot reach the overflow, each op is charged bytes for its share of the BRAM
    (``refine.logic_bytes``), then of the LUTs the same way, and the rest runs on the ARM cores
    within every core's budget."""
    model = zoo.mobilenet_v1_lowbit(8, 8, image=96, width=1.0, classes=10)
    result = Design(model, "zcu104", profile_cpu=False).compile(tmp_path / "p", random_samples=1)
    design = load(tmp_path / "p")
    assert design.cores and result.design["fps"] > 0 and result.cpu_ops
    budgets = {core.name: core for core in load_board("zcu104").cores}
    for core in design.cores:
        for key in ("lut", "dsp", "bram36"):
            assert core.resources[key] <= getattr(budgets[core.name], key), (core.name, key, core.resources)
