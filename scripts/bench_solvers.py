"""Every placement method on every workload of the NeurIPS 2020 paper: one table.

    python scripts/bench_solvers.py [--time-limit 60] [--workloads DIR] [--methods dp,ip,...] [--json]
    python scripts/bench_solvers.py --large-models [--time-limit 60]

``--large-models`` instead runs method auto (throughput and latency) through ``Design`` on models
past the DP's state space, built by tests/test_solvers_scale.py: a YOLOv8-style detector at
320x320 and a BERT-base-style encoder (12 layers, hidden 768, sequence 128), raw operator graphs
(no fusion), analytic costs on the zcu104.

Each (workload, method) runs in a fresh process so its peak memory (max RSS) is its own. Values
are the trusted evaluator's: max-load for throughput workloads, latency for latency workloads
(paper conventions: unlimited CPU overlap). Bound and gap are what the method proved.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_WORKLOADS = ROOT.parent / "shared" / "workloads"
METHODS = ("dp", "ip", "greedy", "local-search", "partitioner", "pipedream", "single", "cpu")


def run_one(path: str, objective: str, method: str, time_limit: float, queue) -> None:
    from fpgaplace.place.solvers.run import SolveOptions, solve
    from fpgaplace.place.workload import load_workload
    from fpgaplace.util.errors import FpgaplaceError

    start = time.perf_counter()
    try:
        result = solve(load_workload(path), method, SolveOptions(objective=objective, time_limit=time_limit))
        row = {
            "value": result.value,
            "bound": result.placement.bound,
            "gap": result.placement.gap,
            "status": result.placement.status,
            "feasible": result.evaluation.feasible,
        }
    except FpgaplaceError as error:
        row = {"error": str(error)}
    row["seconds"] = time.perf_counter() - start
    row["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put(row)


LARGE_MODELS = ("yolo_detector", "bert_base")


def run_model(model: str, objective: str, method: str, time_limit: float, queue) -> None:
    """One large model placed by ``Design.place``; the row also says the model's block count
    and how long building the placement problem took (not part of ``seconds``)."""
    sys.path.insert(0, str(ROOT / "tests"))
    import test_solvers_scale

    from fpgaplace import Design
    from fpgaplace.place.solvers.dp_ideals import build_blocks

    built = time.perf_counter()
    design = Design(getattr(test_solvers_scale, model)(), "zcu104", profile_cpu=False, optimize=False)
    problem = design.problem
    row = {"blocks": build_blocks(problem).count, "problem_seconds": time.perf_counter() - built}
    start = time.perf_counter()
    result = design.place(objective, method, time_limit)
    row.update(value=result.value, bound=result.placement.bound, gap=result.placement.gap,
               status=result.placement.status, feasible=result.evaluation.feasible,
               seconds=time.perf_counter() - start,
               peak_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    queue.put(row)


def measure(path: Path | str, objective: str, method: str, time_limit: float, target=run_one) -> dict:
    queue = mp.get_context("fork").Queue()
    process = mp.get_context("fork").Process(target=target, args=(str(path), objective, method, time_limit, queue))
    process.start()
    process.join(timeout=time_limit * 3 + 120)
    if process.is_alive():
        process.kill()
        return {"error": "did not finish", "seconds": time_limit * 3 + 120}
    return queue.get() if not queue.empty() else {"error": f"exit code {process.exitcode}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--workloads", type=Path, default=DEFAULT_WORKLOADS)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--only", default="", help="substring a workload's path must contain")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--large-models", action="store_true", help="method auto on " + ", ".join(LARGE_MODELS))
    args = parser.parse_args()
    methods = [m for m in args.methods.split(",") if m]
    rows = []
    for model in LARGE_MODELS if args.large_models else ():
        for objective in ("throughput", "latency"):
            row = {"workload": f"{objective}/{model}", "method": "auto",
                   **measure(model, objective, "auto", args.time_limit, target=run_model)}
            rows.append(row)
            print(_format(row), file=sys.stderr, flush=True)
    for objective in ("throughput", "latency") if not args.large_models else ():
        for path in sorted((args.workloads / objective).glob("*.json")):
            if args.only not in str(path):
                continue
            for method in methods:
                if method == "dp" and objective == "latency":
                    continue
                row = {
                    "workload": f"{objective}/{path.stem}",
                    "method": method,
                    **measure(path, objective, method, args.time_limit),
                }
                rows.append(row)
                print(_format(row), file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'workload':40} {'method':13} {'value':>12} {'bound':>12} {'gap':>8} {'seconds':>8} {'peak MB':>8}  status")
    for row in rows:
        print(_format(row))


def _format(row: dict) -> str:
    if "error" in row:
        return f"{row['workload']:40} {row['method']:13} {'error: ' + row['error'][:70]}"
    gap = f"{row['gap']:.2%}" if row["gap"] != float("inf") else "-"
    bound = f"{row['bound']:.6g}" if row["bound"] != float("-inf") else "-"
    return (
        f"{row['workload']:40} {row['method']:13} {row['value']:12.6g} {bound:>12} {gap:>8} "
        f"{row['seconds']:8.2f} {row['peak_mb']:8.0f}  {row['status']}{'' if row['feasible'] else ' INFEASIBLE'}"
        + (f" [{row['blocks']} blocks]" if "blocks" in row else "")
    )


if __name__ == "__main__":
    main()
