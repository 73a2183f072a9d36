"""Top-1 agreement of 4-layer ViT-style encoders on the cores with onnxruntime's QDQ model.

    python scripts/bench_attention_top1.py [--samples 1000] [--checked 100] [--board zcu104] [--keep DIR] [--json]

Two models, one column each:
- ``random``: ``fpgaplace.model.zoo.vit_encoder()`` (seeded random weights), quantized on 32 random
  calibration inputs and run on ``--samples`` seeded random images uniform in [-1, 1];
- ``trained``: the ViT of ``tests/trained_vit.py`` (PyTorch, trained for seconds on CPU on a
  synthetic task of ten oriented-grating classes in noise, exported to ONNX; cached), quantized on
  32 task images and run on ``--samples`` held-out images drawn from the task's distribution.

Each is compiled for the board and run through the placed model in C simulation
(``fpgaplace.sim.csim``: the first ``--checked`` samples with every core checked bit-exact against
its integer reference, the rest run only) and through onnxruntime's QDQ model with its graph
optimizations (QLinear ops: what csim compares with first) and without (every op in float between
its Q/DQ, as ONNX defines the model). Printed: the share of images whose argmax agrees with each run
and between the two runs themselves, and for each pair the disagreements split by how close the two
picks are (``tie``: in one run the other's pick ties for the top, so argmax's first-index rule
decides; ``1 LSB``: one output step apart in one run; ``more``), the outputs' worst LSB outside
onnxruntime's band, the float model's drift from the QDQ one (``quantize``'s measure, over all the
samples), the class accuracy of the float, QDQ and placed runs (trained model) and the seconds each
step took. A random-weight classifier's logits sit near ties (its argmax flips on rounding alone);
the trained one's do not, so its agreement measures the cores.

Measured (1,000 samples, 100 checked, zcu104; both designs: no CPU op, every core bit-exact, csim ok):

                                 random (uniform images)       trained (held-out task images)
    top1_vs_optimized            0.945                         0.998
    top1_vs_unoptimized          0.979                         1
    top1_onnxruntime_runs        0.945                         0.998
    split_vs_optimized           19 tie / 16 1 LSB / 20 more   0 tie / 1 1 LSB / 1 more
    split_vs_unoptimized         11 tie / 8 1 LSB / 2 more     0 tie / 0 1 LSB / 0 more
    split_onnxruntime_runs       20 tie / 17 1 LSB / 18 more   0 tie / 1 1 LSB / 1 more
    quantize_top1_float_vs_qdq   0.903                         0.998
    quantize_max_relative_error  0.1836                        0.1306
    accuracy float / qdq / placed                              0.988 / 0.988 / 0.988
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import trained_vit  # noqa: E402 - the trained model lives with the tests

from fpgaplace.flow.design import Design  # noqa: E402
from fpgaplace.hw.qdq import output_scales  # noqa: E402
from fpgaplace.model import zoo  # noqa: E402
from fpgaplace.model.quantize import measure_drift  # noqa: E402
from fpgaplace.sim.csim import run_csim  # noqa: E402
from fpgaplace.util.onnxrt import session  # noqa: E402


def disagreements(first: np.ndarray, second: np.ndarray, step: float) -> dict[str, int]:
    """The rows of two runs' logits ``[n, classes]`` whose argmax differs, split by the closest the
    two picks come in either run, in output steps ``step``: ``tie`` (0: in one run the other's pick
    ties for the top), ``one_lsb`` (1) and ``more``. O(n × classes)."""
    a, b = first.argmax(-1), second.argmax(-1)
    rows = np.flatnonzero(a != b)
    gap_first = (first.max(-1) - first[np.arange(len(b)), b])[rows]
    gap_second = (second.max(-1) - second[np.arange(len(a)), a])[rows]
    closest = np.rint(np.minimum(gap_first, gap_second) / step)
    return {"total": len(rows), "tie": int(np.sum(closest == 0)), "one_lsb": int(np.sum(closest == 1)),
            "more": int(np.sum(closest > 1))}


def qdq_logits(qdq, images: np.ndarray) -> dict[str, np.ndarray]:
    """onnxruntime's logits of the QDQ model, optimized and unoptimized, one image a run."""
    runs = {kind: session(qdq, "the QDQ model", optimized=kind == "optimized") for kind in ("optimized", "unoptimized")}
    return {kind: np.concatenate([run.run(["logits"], {"image": x[None]})[0] for x in images])
            for kind, run in runs.items()}


def measure(design: Design, images: np.ndarray, labels: np.ndarray | None, checked: int, folder: Path) -> dict:
    """Place, compile, C-simulate and compare one quantized ``design`` on ``images`` (module
    docstring); ``labels``: the images' classes, when they have any. The numbers as a dict."""
    start = time.perf_counter()
    design.place(method="single")
    result = design.compile(folder)
    compiled = time.perf_counter() - start
    start = time.perf_counter()
    check = run_csim(folder, inputs=images, checked=checked)
    simulated = time.perf_counter() - start
    qdq = design.graph.model
    step = output_scales(qdq)["logits"]
    logits = {"placed": check.values["logits"].reshape(len(images), -1), **qdq_logits(qdq, images)}
    pairs = {"vs_optimized": ("placed", "optimized"), "vs_unoptimized": ("placed", "unoptimized"),
             "onnxruntime_runs": ("optimized", "unoptimized")}
    drift = measure_drift(design.float_design.graph.model, qdq, [{"image": x[None]} for x in images])
    (output,) = check.outputs
    numbers = {"samples": len(images), "checked_samples": check.checked, "cpu_ops": len(result.cpu_ops),
               "cores_bit_exact": all(c.bit_exact for c in check.cores), "csim_ok": check.ok}
    for name, (a, b) in pairs.items():
        numbers[f"top1_{name}"] = float(np.mean(logits[a].argmax(-1) == logits[b].argmax(-1)))
    for name, (a, b) in pairs.items():
        counts = disagreements(logits[a], logits[b], step)
        numbers[f"split_{name}"] = f"{counts['tie']} tie / {counts['one_lsb']} 1 LSB / {counts['more']} more"
    numbers.update({"max_lsb_outside_band": output.max_abs_diff_lsb, "max_lsb_optimized": output.max_lsb_optimized,
                    "quantize_top1_float_vs_qdq": drift.outputs[0].top1_agreement,
                    "quantize_max_relative_error": drift.outputs[0].max_relative_error})
    if labels is not None:
        float_run = session(design.float_design.graph.model, "the float model")
        float_logits = np.concatenate([float_run.run(["logits"], {"image": x[None]})[0] for x in images])
        numbers.update({f"accuracy_{kind}": float(np.mean(values.argmax(-1) == labels))
                        for kind, values in (("float", float_logits), ("qdq", logits["unoptimized"]),
                                             ("placed", logits["placed"]))})
    numbers.update({"compile_seconds": compiled, "csim_seconds": simulated})
    return numbers


def random_column(samples: int, board: str, checked: int, folder: Path) -> dict:
    """The random-weight zoo ViT on uniform random images (module docstring)."""
    design = Design(zoo.vit_encoder(), board, profile_cpu=False).quantized(random_samples=32)
    images = np.random.default_rng(2026).uniform(-1, 1, (samples, 3, 32, 32)).astype(np.float32)
    return measure(design, images, None, checked, folder / "random")


def trained_column(samples: int, board: str, checked: int, folder: Path) -> dict:
    """The trained ViT on held-out task images (module docstring)."""
    start = time.perf_counter()
    model, _ = trained_vit.trained_vit()
    trained = time.perf_counter() - start
    calibration = folder / "calibration"
    calibration.mkdir(parents=True, exist_ok=True)
    np.save(calibration / "task.npy", trained_vit.task_images(32, seed=7)[0])
    design = Design(model, board, profile_cpu=False).quantized(calib_dir=calibration)
    images, labels = trained_vit.task_images(samples, seed=2026)
    return {**measure(design, images, labels, checked, folder / "trained"), "train_or_cache_seconds": trained}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--checked", type=int, default=100, help="samples checked bit-exact core by core")
    parser.add_argument("--board", default="zcu104")
    parser.add_argument("--keep", type=Path, help="write the projects here (default: a temporary folder)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        folder = args.keep or Path(temporary)
        columns = {"random": random_column(args.samples, args.board, args.checked, folder),
                   "trained": trained_column(args.samples, args.board, args.checked, folder)}
    if args.json:
        print(json.dumps(columns, indent=2))
        return
    keys = list(dict.fromkeys(key for numbers in columns.values() for key in numbers))
    width = max(map(len, keys))
    print(f"{'':<{width}}  " + "  ".join(f"{name:<28}" for name in columns))
    for key in keys:
        cells = [numbers.get(key, "") for numbers in columns.values()]
        print(f"{key:<{width}}  " + "  ".join(f"{c:<28.4g}" if isinstance(c, float) else f"{c!s:<28}" for c in cells))


if __name__ == "__main__":
    main()
