"""QONNX models compiled into folded cores (``fpgaplace.model.qonnx_qdq`` and the op library's
lowering): every core bit-exact against its integer reference in C simulation, and the placed
model's outputs equal to qonnx's own execution (``qonnx.core.onnx_exec.execute_onnx``) of the
QONNX model, on random inputs. The CNV networks are FINN's layer structure at fewer channels.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.core.onnx_exec import execute_onnx
from qonnx.transformation.infer_shapes import InferShapes

from fpgaplace import Design
from fpgaplace.model import zoo
from fpgaplace.model.qonnx_qdq import int_quant, qonnx_to_qdq, read_widths
from fpgaplace.sim.csim import run_csim
from fpgaplace.util.errors import FpgaplaceError

SMALL_CNV = {"channels": (8, 8, 16, 16, 32, 32), "dense": (32, 32)}
SAMPLES = 3


def qonnx_outputs(model: onnx.ModelProto, images: np.ndarray) -> np.ndarray:
    """qonnx's execution of ``model``, one image at a time."""
    wrapped = ModelWrapper(model).transform(InferShapes())
    name = model.graph.output[0].name
    return np.concatenate([execute_onnx(wrapped, {"image": image[None]})[name] for image in images])


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


@pytest.mark.parametrize("bits", [(4, 4), (2, 2), (1, 1)])
def test_rewritten_model_runs_like_qonnx(bits):
    """The QDQ rewrite, run by onnxruntime without graph optimizations, equals qonnx's execution."""
    model = zoo.cnv(*bits, **SMALL_CNV)
    rewritten = qonnx_to_qdq(model)
    onnx.checker.check_model(rewritten)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(rewritten.SerializeToString(), options)
    x = images(2)
    got = np.concatenate([session.run(None, {"image": image[None]})[0] for image in x])
    assert np.array_equal(got, qonnx_outputs(model, x))
    widths = read_widths(rewritten)
    assert {w["bits"] for w in widths.values()} == {*bits, 8}


@pytest.mark.parametrize(("bits", "batch_norm"), [((4, 4), False), ((2, 2), False), ((1, 2), False),
                                                  ((4, 4), True), ((2, 2), True), ((1, 1), True)])
def test_cnv_compiles_bit_exact_and_equal_to_qonnx(tmp_path, bits, batch_norm):
    """A CNV at w4a4, w2a2, w1a2 (bipolar weights) and, with a BatchNormalization before every
    activation quantizer, w4a4, w2a2 and w1a1 (bipolar activations: threshold stages) compiles onto
    the cores of a ZCU104 (nothing left on its CPUs), each core bit-exact in C simulation, the
    outputs equal to qonnx's execution."""
    model = zoo.cnv(*bits, batch_norm=batch_norm, **SMALL_CNV)
    result = Design(model, "zcu104", profile_cpu=False).compile(tmp_path / "project")
    assert result.left_on_cpus["groups"] == []
    layers = [layer for core in result.design["cores"] for layer in core["stages"]]
    assert layers
    x = images(SAMPLES)
    simulated = run_csim(tmp_path / "project", inputs=x)
    assert simulated.cores and all(core.bit_exact for core in simulated.cores)
    logits = simulated.values["logits"]
    assert np.unique(logits).size > 5  # the network does not saturate into a constant
    assert np.array_equal(logits, qonnx_outputs(model, x))


def test_multithreshold_is_finns():
    """The threshold stage's integer reference counts as qonnx's MultiThreshold does."""
    from qonnx.custom_op.general.multithreshold import multithreshold as finn

    from fpgaplace.hw.threshold import multithreshold

    rng = np.random.default_rng(3)
    table = np.sort(rng.integers(-50, 50, (6, 15)), axis=1)
    acc = rng.integers(-60, 60, (4, 5, 6))
    want = finn(acc.astype(np.float32), table.astype(np.float32), channels_last=True)
    assert np.array_equal(multithreshold(acc, table, -8), want - 8)


def test_trunc_is_named(tmp_path):
    """A quantizer the rewrite does not lower is one line naming the node."""
    model = zoo.cnv(4, 4, **SMALL_CNV)
    node = next(n for n in model.graph.node if n.op_type == "Quant" and n.input[0].startswith("conv"))
    node.op_type = "Trunc"
    with pytest.raises(FpgaplaceError, match=rf"Trunc '{node.name}'.*not lowered") as error:
        qonnx_to_qdq(model, "cnv.onnx")
    assert "\n" not in str(error.value) and str(error.value).startswith("cnv.onnx: ")
