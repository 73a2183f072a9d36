"""Top-1 agreement on a trained classifier: the ViT of ``trained_vit`` (PyTorch, seeded, trained on
CPU on a synthetic grating task, exported to ONNX by the TorchScript exporter; cached by its file's
hash) quantized, compiled for zcu104 with no op on a CPU, run on 1,000 held-out task images in C
simulation (the first few checked core by core) and compared with onnxruntime's QDQ model. A
random-weight ViT's logits sit near ties (its argmax flips on one-step rounding differences: 94.5%
agreement over 1,000 images, as onnxruntime's two runs agree with each other); a trained one's
do not, so 99% is a fair bar."""

from __future__ import annotations

import numpy as np
import pytest
from trained_vit import task_images, trained_vit

from fpgaplace.flow.design import Design
from fpgaplace.model.quantize import measure_drift
from fpgaplace.sim.csim import run_csim
from fpgaplace.util.onnxrt import session

SAMPLES, CHECKED = 1000, 4


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The trained ViT, its float accuracy, and its QDQ design (calibrated on 32 task images)."""
    model, accuracy = trained_vit()
    calibration = tmp_path_factory.mktemp("calibration")
    np.save(calibration / "task.npy", task_images(32, seed=7)[0])
    design = Design(model, "zcu104", profile_cpu=False).quantized(calib_dir=calibration)
    design.place(method="single")
    return model, accuracy, design


def test_the_exported_vit_learned_its_task(trained):
    """The classifier is a trained one: far above the 10% of chance on held-out images."""
    _, accuracy, _ = trained
    assert accuracy >= 0.9, accuracy


def test_trained_vit_agrees_top1_with_onnxruntime_on_1000_task_images(trained, tmp_path):
    model, _, design = trained
    result = design.compile(tmp_path / "p")
    kernels = [layer["kernel"] for core in result.design["cores"] for layer in core["layers"]]
    assert result.cpu_ops == [] and kernels.count("softmax") == 4 and kernels.count("layernorm") == 8, kernels
    images, labels = task_images(SAMPLES, seed=2026)
    check = run_csim(tmp_path / "p", inputs=images, checked=CHECKED)
    assert check.ok and check.checked == CHECKED and all(c.bit_exact for c in check.cores), check
    placed = check.values["logits"].reshape(SAMPLES, -1).argmax(-1)
    qdq = design.graph.model
    for optimized in (True, False):
        run = session(qdq, "the QDQ model", optimized=optimized)
        expected = np.array([run.run(["logits"], {"image": x[None]})[0].argmax() for x in images])
        agreement = float(np.mean(placed == expected))
        assert agreement >= 0.99, (optimized, agreement)
    # quantize's own drift beside it, on the same images: the QDQ model classifies as the float one
    drift = measure_drift(model, qdq, [{"image": x[None]} for x in images[:200]]).outputs[0]
    assert drift.top1_agreement >= 0.95, drift
    assert np.mean(placed == labels) >= 0.9
