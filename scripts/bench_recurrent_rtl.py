"""A recurrence's time in RTL beside the cycle model's: first output, a step, and the interval.

    python scripts/bench_recurrent_rtl.py [--steps 1,2,4,8] [--inputs 6] [--hidden 4] [--board zcu104]
                                          [--samples 4] [--cell-bits 8|16] [--json]

For each sequence length T, ``zoo.lstm_sequence`` (one forward LSTM, nothing else; its cell state in
int8, or with ``--cell-bits 16`` in ``hw.lstm_cell``'s int16) is compiled
(unrolled into per-step stages, every one on one core) and the core's RTL top is simulated in
cocotb (``fpgaplace sim --rtl --whole-cores``: ``--samples`` samples with random gaps and
backpressure, then back to back): bit-exact against the integer reference, the first sample's
latency (reset release to its last output beat) beside design.json's ``latency_cycles`` (the
kernels' fills overlapped, ``hw.kernel.pipeline_latency``), and the steady cycles a sample beside
the core's interval. A step's time is the latency's slope over T (between the two longest
sequences): the recurrence's loop-carried part, since step t's gates wait for step t-1's hidden
state. One row per T; the errors are (RTL - model) / model.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from fpgaplace.flow.design import Design
from fpgaplace.model import zoo
from fpgaplace.sim.rtl_project import simulate_project_rtl


def measure(steps: int, args: argparse.Namespace, folder: Path) -> dict:
    """One row: compile the T-step LSTM and simulate its core's RTL."""
    project = folder / f"lstm_t{steps}"
    model = zoo.lstm_sequence(steps=steps, inputs=args.inputs, hidden=args.hidden)
    result = Design(model, args.board, profile_cpu=False, lstm_cell_bits=args.cell_bits).compile(
        project, random_samples=24)
    cores = result.design["cores"]
    if len(cores) != 1 or result.cpu_ops:
        raise SystemExit(f"T={steps}: expected one core and no CPU op, got {len(cores)} cores, {result.cpu_ops}")
    (core,) = simulate_project_rtl(project, samples=args.samples).cores
    return {"steps": steps, "stages": len(cores[0]["layers"]), "bit_exact": core.bit_exact,
            "latency_rtl": core.latency_measured, "latency_model": core.latency_model,
            "interval_rtl": core.cycles_measured, "interval_model": core.cycles_model}


def error(measured: float, model: float) -> str:
    return f"{(measured - model) / model:+.0%}" if model else "-"


def step_times(rows: list[dict]) -> tuple[float, float] | None:
    """(RTL, model) cycles a step: the latency's slope between the two longest sequences."""
    if len(rows) < 2:
        return None
    a, b = sorted(rows, key=lambda r: r["steps"])[-2:]
    span = b["steps"] - a["steps"]
    return (b["latency_rtl"] - a["latency_rtl"]) / span, (b["latency_model"] - a["latency_model"]) / span


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="1,2,4,8", help="sequence lengths, comma-separated")
    parser.add_argument("--inputs", type=int, default=6)
    parser.add_argument("--hidden", type=int, default=4)
    parser.add_argument("--board", default="zcu104")
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--cell-bits", type=int, choices=(8, 16), default=8, help="the LSTM's cell state")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-recurrent-rtl-") as scratch:
        rows = [measure(int(t), args, Path(scratch)) for t in args.steps.split(",")]
    step = step_times(rows)
    if args.json:
        print(json.dumps({"rows": rows, "step_rtl": step and step[0], "step_model": step and step[1]}, indent=2))
        return 0
    print(f"LSTM {args.inputs} -> {args.hidden}, cell state int{args.cell_bits}, on {args.board}: cycles, RTL "
          "(cocotb) vs the cycle model")
    print(f"{'T':>3} {'stages':>6} {'exact':>5} {'latency rtl':>11} {'model':>6} {'err':>5} "
          f"{'interval rtl':>12} {'model':>6} {'err':>6}")
    for r in rows:
        print(f"{r['steps']:>3} {r['stages']:>6} {str(r['bit_exact']):>5} {r['latency_rtl']:>11} "
              f"{r['latency_model']:>6} {error(r['latency_rtl'], r['latency_model']):>5} "
              f"{r['interval_rtl']:>12.1f} {r['interval_model']:>6} {error(r['interval_rtl'], r['interval_model']):>6}")
    if step is not None:
        print(f"a step: {step[0]:.1f} cycles in RTL, {step[1]:.1f} in the model ({error(*step)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
