"""QONNX low-bit networks compiled into folded cores, checked against qonnx's own execution.

    python scripts/bench_qonnx.py [--models cnv_w1a1,cnv_w1a2,cnv_w2a2,cnv_w4a4,mobilenet_w4a4]
                                  [--boards pynq-z2,kv260,zcu104] [--samples 100] [--image 224] [--json]

For each model (built with ``fpgaplace.model.zoo``: FINN's CNV for CIFAR-10 at full width, with a
BatchNormalization before every activation quantizer as FINN's CNV has; MobileNetV1 w4a4 with 8-bit
first and last layers at ``--image``) and board: ``compile`` (analytic CPU costs), then C simulation
of ``--samples`` uniform random images in [-1, 1): each core bit for bit against its integer
reference, and the placed model's outputs against ``qonnx.core.onnx_exec.execute_onnx`` of the QONNX
model (max difference in output steps). One row per run: cores, ops left on CPUs, layers with
threshold output stages, the folded fps, compile and simulation seconds, and both checks.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from fpgaplace import Design
from fpgaplace.model import zoo
from fpgaplace.sim.csim import run_csim
from fpgaplace.util.errors import FpgaplaceError

CNV = {f"cnv_w{w}a{a}": (w, a) for w, a in ((1, 1), (1, 2), (2, 2), (4, 4))}


def build(name: str, image: int):
    if name in CNV:
        return zoo.cnv(*CNV[name], batch_norm=True), 32
    if name == "mobilenet_w4a4":
        return zoo.mobilenet_v1_lowbit(4, 4, image=image), image
    raise FpgaplaceError(f"--models: {name!r}; expected one of {', '.join([*CNV, 'mobilenet_w4a4'])}")


def qonnx_reference(model, images: np.ndarray) -> np.ndarray:
    """qonnx's execution of ``model`` on each image."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx
    from qonnx.transformation.infer_shapes import InferShapes

    wrapped = ModelWrapper(model).transform(InferShapes())
    output = model.graph.output[0].name
    return np.concatenate([execute_onnx(wrapped, {"image": image[None]})[output] for image in images])


def logit_step(model) -> float:
    """The scale of the quantizer writing the model's output (its step)."""
    from onnx import numpy_helper

    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    last = next(node for node in model.graph.node if node.output[0] == model.graph.output[0].name)
    return float(inits[last.input[1]].reshape(-1)[0])


def measure(name: str, board: str, samples: int, image: int, folder: Path) -> dict:
    model, size = build(name, image)
    start = time.perf_counter()
    result = Design(model, board, profile_cpu=False).compile(folder)
    compiled = time.perf_counter() - start
    layers = [layer for core in result.design["cores"] for layer in core["layers"]]
    images = np.random.default_rng(0).uniform(-1, 1, (samples, 3, size, size)).astype(np.float32)
    start = time.perf_counter()
    simulated = run_csim(folder, inputs=images)
    simulation = time.perf_counter() - start
    want = qonnx_reference(model, images)
    got = simulated.values[model.graph.output[0].name]
    return {"model": name, "board": board, "cores": len(result.design["cores"]),
            "cpu_ops": result.left_on_cpus["ops"], "layers": len(layers),
            "thresholds": sum(1 for layer in layers if (layer.get("widths") or {}).get("output_stage") == "thresholds"),
            "fps": result.design["fps"], "compile_s": compiled, "csim_s": simulation, "samples": samples,
            "bit_exact": all(core.bit_exact for core in simulated.cores),
            "max_lsb_vs_qonnx": float(np.abs(got - want).max() / logit_step(model))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join([*CNV, "mobilenet_w4a4"]))
    parser.add_argument("--boards", default="pynq-z2,kv260,zcu104")
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--image", type=int, default=224, help="MobileNetV1's image size")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-qonnx-") as tmp:
        for name in args.models.split(","):
            for board in args.boards.split(","):
                try:
                    rows.append(measure(name, board, args.samples, args.image, Path(tmp) / f"{name}-{board}"))
                except FpgaplaceError as error:
                    rows.append({"model": name, "board": board, "error": str(error)})
                if not args.json:
                    print(_line(rows[-1]), flush=True)
    if args.json:
        print(json.dumps(rows, indent=2))
    return 0 if all(r.get("bit_exact") and r.get("max_lsb_vs_qonnx") == 0 for r in rows) else 1


def _line(row: dict) -> str:
    if "error" in row:
        return f"{row['model']:<15} {row['board']:<8} error: {row['error']}"
    return (f"{row['model']:<15} {row['board']:<8} cores {row['cores']}  cpu ops {row['cpu_ops']:<3} "
            f"layers {row['layers']:<3} thresholds {row['thresholds']:<3} fps {row['fps']:>10.4g}  "
            f"compile {row['compile_s']:6.1f} s  csim {row['csim_s']:7.1f} s ({row['samples']} samples)  "
            f"bit-exact {row['bit_exact']}  max |csim - qonnx| {row['max_lsb_vs_qonnx']:g} LSB")


if __name__ == "__main__":
    sys.exit(main())
