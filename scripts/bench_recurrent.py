"""How exactly the recurrent and embedding models of issue 19 run on the cores, over many samples.

    python scripts/bench_recurrent.py [--models crnn_lstm,byte_classifier,lstm_sequence] [--samples 1000]
                                      [--board zcu104] [--random 32] [--cell-bits 8|16] [--steps 32] [--json]

For each model of ``fpgaplace.model.zoo`` (``crnn_lstm``: convs, a bidirectional LSTM over the
columns, a classifier per column; ``byte_classifier``: a 256-row byte embedding, a GRU, a
classifier): compile it (quantized on ``--random`` seeded calibration samples, placed by the default
method), C-simulate ``--samples`` seeded random inputs (``csim``: every core against its integer
reference), and compare the placed model's outputs with onnxruntime's run of the QDQ model (the
most LSB apart, and the share of samples, or of sequence steps for the CRNN, whose top-1 class is
the same) and with the float model it was quantized from (top-1 agreement: what int8 costs; the
largest and the root-mean-square difference of the outputs, the compiled model's and onnxruntime's
QDQ model's). One row per model: ops on the cores and on CPUs, stages, interval and latency cycles
(event simulation), bit-exact cores, LSB, the agreements, float errors and the seconds each step took.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx

from fpgaplace.flow.design import Design
from fpgaplace.model import zoo
from fpgaplace.sim.csim import run_csim
from fpgaplace.sim.event import simulate
from fpgaplace.util.onnxrt import random_inputs, run_model

MODELS = ("crnn_lstm", "byte_classifier", "lstm_sequence")


def top1_agreement(got: np.ndarray, want: np.ndarray) -> float:
    """The share of rows (samples, or sequence steps) whose largest class is the same."""
    return float(np.mean(got.argmax(-1) == want.argmax(-1)))


def measure(name: str, args: argparse.Namespace, folder: Path) -> dict:
    """One row: compile, csim and sim ``name`` (see the module docstring)."""
    model = zoo.lstm_sequence(steps=args.steps, hidden=16) if name == "lstm_sequence" else getattr(zoo, name)()
    start = time.perf_counter()
    result = Design(model, args.board, profile_cpu=False, lstm_cell_bits=args.cell_bits).compile(
        folder / name, random_samples=args.random)
    compiled = time.perf_counter() - start
    start = time.perf_counter()
    check = run_csim(folder / name, samples=args.samples)
    simulated = time.perf_counter() - start
    qdq = onnx.load(folder / name / "model.qdq.onnx")
    (output,) = [o.name for o in qdq.graph.output]
    feeds = [random_inputs(qdq, i) for i in range(args.samples)]  # csim's feeds: the same seeds
    want = np.concatenate([run_model(qdq, feed)[output] for feed in feeds])
    real = np.concatenate([run_model(model, feed)[output] for feed in feeds])
    got = check.values[output]
    sim = simulate(folder / name, samples=64)
    return {
        "model": name, "ops_cores": sum(len(c["ops"]) for c in result.design["cores"]),
        "ops_cpus": len(result.cpu_ops), "stages": sum(len(c["layers"]) for c in result.design["cores"]),
        "interval_cycles": sim.interval_cycles, "latency_cycles": sim.latency_cycles,
        "bit_exact": all(c.bit_exact for c in check.cores), "max_lsb": max(o.max_abs_diff_lsb or 0.0
                                                                           for o in check.outputs),
        "top1_vs_qdq": top1_agreement(got, want), "top1_vs_float": top1_agreement(got, real),
        "float_max": float(np.abs(got - real).max()), "float_rms": rms(got - real),
        "qdq_float_max": float(np.abs(want - real).max()), "qdq_float_rms": rms(want - real),
        "rows_compared": int(got.reshape(-1, got.shape[-1]).shape[0]), "compile_s": compiled, "csim_s": simulated,
    }


def rms(difference: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(difference.astype(np.float64)))))


def table(rows: list[dict]) -> str:
    columns = ("model", "ops_cores", "ops_cpus", "stages", "interval_cycles", "latency_cycles", "bit_exact",
               "max_lsb", "top1_vs_qdq", "top1_vs_float", "float_max", "float_rms", "qdq_float_max", "qdq_float_rms",
               "rows_compared", "compile_s", "csim_s")
    cells = [[f"{row[c]:.4g}" if isinstance(row[c], float) else str(row[c]) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--board", default="zcu104")
    parser.add_argument("--random", type=int, default=32, help="calibration samples")
    parser.add_argument("--cell-bits", type=int, choices=(8, 16), default=8, help="the LSTM's cell state")
    parser.add_argument("--steps", type=int, default=32, help="lstm_sequence's steps")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    args.models = [m for m in args.models.split(",") if m]
    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        parser.error(f"--models: unknown {', '.join(unknown)}; expected some of {', '.join(MODELS)}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-recurrent-") as folder:
        rows = [measure(name, args, Path(folder)) for name in args.models]
    print(json.dumps(rows, indent=2) if args.json else table(rows))


if __name__ == "__main__":
    sys.exit(main())
