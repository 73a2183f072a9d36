"""Top-1 agreement of the 4-layer ViT-style encoder on the cores with onnxruntime's QDQ model.

    python scripts/bench_attention_top1.py [--samples 1000] [--board zcu104] [--keep DIR] [--json]

Quantizes ``fpgaplace.model.zoo.vit_encoder()`` (32 random calibration inputs), compiles it for the
board, and runs ``--samples`` seeded random images (uniform in [-1, 1]) through the placed model in C
simulation (``fpgaplace.sim.csim``: every core bit-exact against its integer reference) and through
onnxruntime's QDQ model, with its graph optimizations (QLinear ops: what csim compares with first)
and without (every op in float between its Q/DQ, as ONNX defines the model); prints the share of
images whose argmax agrees with each run and between the two runs themselves (how far onnxruntime
agrees with itself: a random-weight classifier's logits are often within a few steps of a tie),
the outputs' worst LSB outside onnxruntime's band beside csim's piece-by-piece check, the float
model's drift from the QDQ one (``quantize``'s measure) and the seconds each step took.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from fpgaplace.flow.design import Design
from fpgaplace.model import zoo
from fpgaplace.model.quantize import measure_drift
from fpgaplace.sim.csim import run_csim
from fpgaplace.util.onnxrt import session


def measure(samples: int, board: str, folder: Path) -> dict:
    """Compile, C-simulate and compare (module docstring); the numbers as a dict."""
    start = time.perf_counter()
    design = Design(zoo.vit_encoder(), board, profile_cpu=False).quantized(random_samples=32)
    design.place(method="single")
    result = design.compile(folder / "vit")
    compiled = time.perf_counter() - start
    images = np.random.default_rng(2026).uniform(-1, 1, (samples, 3, 32, 32)).astype(np.float32)
    start = time.perf_counter()
    check = run_csim(folder / "vit", inputs=images)
    simulated = time.perf_counter() - start
    qdq = design.graph.model
    runs = {kind: session(qdq, "the QDQ model", optimized=kind == "optimized")
            for kind in ("optimized", "unoptimized")}
    classes = {kind: np.array([run.run(["logits"], {"image": x[None]})[0].argmax() for x in images])
               for kind, run in runs.items()}
    placed = check.values["logits"].argmax(-1)
    drift = measure_drift(design.float_design.graph.model, qdq, [{"image": x[None]} for x in images[:100]])
    (output,) = check.outputs
    return {"samples": samples, "cpu_ops": len(result.cpu_ops),
            "cores_bit_exact": all(c.bit_exact for c in check.cores),
            "top1_vs_optimized": float(np.mean(placed == classes["optimized"])),
            "top1_vs_unoptimized": float(np.mean(placed == classes["unoptimized"])),
            "top1_onnxruntime_runs": float(np.mean(classes["optimized"] == classes["unoptimized"])),
            "max_lsb_outside_band": output.max_abs_diff_lsb, "max_lsb_optimized": output.max_lsb_optimized,
            "layers": check.layers.to_json(), "csim_ok": check.ok,
            "quantize_drift_100": drift.to_json()["outputs"][0], "compile_seconds": compiled,
            "csim_seconds": simulated}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--board", default="zcu104")
    parser.add_argument("--keep", type=Path, help="write the project here (default: a temporary folder)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        numbers = measure(args.samples, args.board, args.keep or Path(temporary))
    if args.json:
        print(json.dumps(numbers, indent=2))
        return
    width = max(map(len, numbers))
    for key, value in numbers.items():
        print(f"{key:<{width}}  {value:.4g}" if isinstance(value, float) else f"{key:<{width}}  {value}")


if __name__ == "__main__":
    main()
