"""How well each core's planned load agrees with the interval its folding reaches, on placed models.

    python scripts/bench_agreement.py [--models cnn_residual,mobilenet_v2,resnet50]
                                      [--boards zcu104] [--no-certify] [--json]

For each model and board: `compile` (int8, 2 random calibration samples, analytic CPU costs),
then one row per core of the kept placement: its planned compute (the sum of its ops' latencies
in the placement's problem), its folded interval, their ratio, what binds it, and the least
interval any choice of its stages' foldings reaches within every resource of the core, which
SCIP proves (``hw.folding.least_interval``; skipped with --no-certify). The first placement's
ratios and interval are shown beside the kept one's: compile places again where a core
disagrees with its plan by more than 10 % (``flow.refine``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import onnx

from fpgaplace import Design, load_board
from fpgaplace.hw import cycles_to_us, plan_op
from fpgaplace.hw.folding import Stage, least_interval
from fpgaplace.model import zoo as models
from fpgaplace.model.frontend.load import from_model
from fpgaplace.util.errors import FpgaplaceError

MODELS = {
    "cnn_residual": lambda: models.cnn_residual(batch=1, image=64),
    "mobilenet_v2": lambda: models.mobilenet_v2(batch=1),
    "resnet50": lambda: models.with_random_weights(onnx.load(str(models.light_model_path("resnet50")))),
}


def measure(name: str, board_name: str, certify: bool, folder: Path) -> dict:
    start = time.perf_counter()
    result = Design(MODELS[name](), board_name, profile_cpu=False).compile(folder / name, random_samples=2)
    seconds = time.perf_counter() - start
    document = result.design
    refinement = document["placement"]["refinement"]
    first = refinement["rounds"][0]
    graph = from_model(onnx.load(result.project / document["model"]["file"]))
    cores = {core.name: core for core in load_board(board_name).cores}
    rows = []
    for record in document["cores"]:
        core = cores[record["name"]]
        row = {"core": record["name"], "planned_us": record["planned_compute_us"], "folded_us": record["interval_us"],
               "ratio": record["interval_us"] / record["planned_compute_us"], "binding": record["binding"],
               "first_ratio": first["cores"].get(record["name"])}
        if certify:
            stages = [Stage(layer["op"], *plan_op(graph.ops[layer["op"]], graph), layer["resident"])
                      for layer in record["layers"]]
            certificate = least_interval(stages, core)
            row["least_compute_us"] = cycles_to_us(certificate.interval, core)
            row["folder_over_least"] = record["compute_interval_cycles"] / certificate.interval
            row["proven"] = certificate.proven
        rows.append(row)
    return {"model": name, "board": board_name, "compile_s": seconds, "rounds": len(refinement["rounds"]),
            "first_fps": 1e6 / first["interval_us"], "fps": document["fps"], "cores": rows}


def print_table(results: list[dict]) -> None:
    print("| model | board | core | plan µs | folded µs | folded/plan (first placement) | binds | "
          "least µs (SCIP) | folder/least | rounds | fps first → kept | compile s |")
    print("|---|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    for r in results:
        for c in r["cores"]:
            first = f" ({c['first_ratio']:.2f})" if c["first_ratio"] is not None else ""
            least = f"{c['least_compute_us']:.1f}" if "least_compute_us" in c else "—"
            over = f"{c['folder_over_least']:.3f}" if "folder_over_least" in c else "—"
            print(f"| {r['model']} | {r['board']} | {c['core']} | {c['planned_us']:.1f} | {c['folded_us']:.1f} | "
                  f"{c['ratio']:.2f}{first} | {', '.join(c['binding']) or '—'} | {least} | {over} | {r['rounds']} | "
                  f"{r['first_fps']:,.0f} → {r['fps']:,.0f} | {r['compile_s']:.1f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help=f"some of {', '.join(MODELS)}")
    parser.add_argument("--boards", default="zcu104", help="board names, comma separated")
    parser.add_argument("--no-certify", action="store_true", help="skip SCIP's least interval per core")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    names = args.models.split(",")
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise SystemExit(f"--models: unknown {', '.join(unknown)}; expected some of {', '.join(MODELS)}")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for board in args.boards.split(","):
            for name in names:
                print(f"compiling {name} for {board}", file=sys.stderr, flush=True)
                try:
                    results.append(measure(name, board, not args.no_certify, Path(tmp) / board))
                except FpgaplaceError as error:
                    raise SystemExit(f"error: {error}") from None
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print_table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
