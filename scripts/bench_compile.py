"""How long `compile` and C simulation take on real architectures, and what falls back to CPUs.

    python scripts/bench_compile.py [--models resnet50,mobilenet_v2,bert] [--board zcu104]
                                    [--calib 8] [--no-csim] [--repeat 1] [--json]

For each model (ResNet-50: the onnx package's light-zoo structure with seeded random weights;
MobileNetV2 and a BERT-style encoder layer (seq 128, hidden 256): built with onnx.helper), one
row per stage, timed in this process: import and graph optimizer, int8 quantization
(onnxruntime static QDQ on --calib random samples), placement (the exact DP), code
generation (lowering, folding, rendering, split), then the C simulation of one sample
(g++ build of every core, then the run); plus the cores' folded interval and fps and the ops
that run on CPUs, by op type. With ``--repeat N`` each model is compiled N times (each run in a
fresh Design) and every stage's seconds are the median over the runs (``runs`` lists them all).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import onnx

from fpgaplace.flow.design import Design
from fpgaplace.model import zoo as models
from fpgaplace.sim.csim import run_csim

MODELS = ("resnet50", "mobilenet_v2", "bert")


def build_model(name: str) -> onnx.ModelProto:
    if name == "resnet50":
        return models.with_random_weights(onnx.load(str(models.light_model_path("resnet50"))))
    if name == "mobilenet_v2":
        return models.mobilenet_v2(batch=1)
    if name == "bert":
        return models.bert_encoder_layer(seq=128, hidden=256, heads=4, batch=1)
    raise SystemExit(f"--models: unknown model {name!r}; expected some of {', '.join(MODELS)}")


def measure(name: str, board: str, calib: int, csim: bool, folder: Path) -> dict:
    row: dict = {"model": name, "board": board}
    model = build_model(name)
    start = time.perf_counter()
    design = Design(model, board, profile_cpu=True)
    _ = design.graph
    row["import_s"] = time.perf_counter() - start
    start = time.perf_counter()
    quantized = design.quantized(random_samples=calib)
    _ = quantized.graph
    row["quantize_s"] = time.perf_counter() - start
    start = time.perf_counter()
    quantized.place("throughput", "auto", time_limit=120)
    row["place_s"] = time.perf_counter() - start
    project = folder / name
    start = time.perf_counter()
    result = quantized.compile(project)
    row["codegen_s"] = time.perf_counter() - start
    row["compile_total_s"] = row["import_s"] + row["quantize_s"] + row["place_s"] + row["codegen_s"]
    document = result.design
    row["cores"] = [{k: c[k] for k in ("name", "ops", "dsp", "bram36", "uram", "lut", "cycles", "interval_us",
                                         "planned_compute_us")} for c in result.cores]
    row["interval_us"] = document["interval_us"]
    row["fps"] = document["fps"]
    types = {op.name: op.op_type for op in quantized.graph.ops.values()}
    row["cpu_ops"] = dict(Counter(types[op] for op in document["cpu_ops"]))
    row["macs"] = quantized.graph.total_macs
    if csim:
        check = run_csim(project, samples=1)
        row["csim_build_s"], row["csim_run_s"], row["csim_ok"] = check.build_seconds, check.run_seconds, check.ok
        row["csim_bit_exact"] = all(c.bit_exact for c in check.cores)
        row["csim_max_lsb"] = max((o.max_abs_diff_lsb for o in check.outputs if o.max_abs_diff_lsb is not None),
                                  default=None)
    return row


def measure_once(name: str, args: argparse.Namespace, folder: Path) -> dict:
    """``measure`` into a folder of its own, removed afterwards (a ResNet-50 project is ~200 MB)."""
    folder.mkdir()
    try:
        return measure(name, args.board, args.calib, not args.no_csim, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


STAGES = ("import_s", "quantize_s", "place_s", "codegen_s", "compile_total_s", "csim_build_s", "csim_run_s")


def median_row(rows: list[dict]) -> dict:
    """The last run's row with every stage's seconds replaced by the median over ``rows``."""
    merged = dict(rows[-1])
    for stage in STAGES:
        values = [row[stage] for row in rows if stage in row]
        if values:
            merged[stage] = statistics.median(values)
    merged["runs"] = [{stage: row[stage] for stage in STAGES if stage in row} for row in rows]
    return merged


def print_table(rows: list[dict]) -> None:
    columns = ("model", "import_s", "quantize_s", "place_s", "codegen_s", "compile_total_s", "csim_build_s",
               "csim_run_s", "csim_bit_exact", "csim_max_lsb", "interval_us", "fps")
    print(" | ".join(columns))
    for row in rows:
        cells = []
        for column in columns:
            value = row.get(column, "")
            cells.append(f"{value:.3g}" if isinstance(value, float) else str(value))
        print(" | ".join(cells))
    for row in rows:
        if len(row.get("runs", [])) > 1:
            print(f"{row['model']}: medians of {len(row['runs'])} runs; totals "
                  + ", ".join(f"{run['compile_total_s']:.3g}" for run in row["runs"]))
        print(f"{row['model']}: CPU ops {row['cpu_ops'] or 'none'}")
        for core in row["cores"]:
            print(f"  {core['name']}: {core['ops']} ops, DSP {core['dsp']}, BRAM36 {core['bram36']}, URAM "
                  f"{core['uram']}, interval {core['interval_us']:.1f} us (planned compute "
                  f"{core['planned_compute_us']:.1f} us)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated, from " + ", ".join(MODELS))
    parser.add_argument("--board", default="zcu104")
    parser.add_argument("--calib", type=int, default=8, help="random calibration samples for quantization")
    parser.add_argument("--no-csim", action="store_true", help="skip the C simulation of one sample")
    parser.add_argument("--repeat", type=int, default=1, help="runs per model; stage seconds are their median")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        raise SystemExit(f"--repeat: {args.repeat}; expected a count of at least 1")
    folder = Path(tempfile.mkdtemp(prefix="fpgaplace-bench-compile-"))
    try:
        rows = [median_row([measure_once(name.strip(), args, folder / f"run{run}") for run in range(args.repeat)])
                for name in args.models.split(",") if name.strip()]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if args.json:
        json.dump(rows, sys.stdout, indent=2)
        print()
    else:
        print_table(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
