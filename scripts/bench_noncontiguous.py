"""Non-contiguous latency splits: the latency IP with q = 1, 2, 3 subgraphs per accelerator on the
public latency workloads of the NeurIPS 2020 paper, side by side.

    python scripts/bench_noncontiguous.py [--time-limit 60] [--q 1,2,3] [--workloads DIR] [--only bert] [--json]

Every run is ``solve(problem, "ip", SolveOptions(objective="latency", subgraphs_per_device=q,
contiguous=(q == 1)))`` (the IP warm-started from the heuristic starts, never worse than the best
of them) within ``--time-limit`` seconds, and its answer is scored again here by the one trusted
evaluator, ``fpgaplace.place.solvers.evaluate.evaluate``: the value printed is the evaluator's latency,
never the solver's claim. The bound is the IP's bound for placements with at most q subgraphs per
accelerator (so a q = 2 bound says nothing about q = 3). "used" is the most subgraphs any
accelerator holds in the answer (from ``Placement.order``); "vs q=1" is the relative improvement
of the value over the same workload's q = 1 value (positive: q helps).

Cost: workloads x len(q) x time limit (the IP ends earlier when it proves its gap).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_WORKLOADS = ROOT.parent / "shared" / "workloads"


@dataclass
class Row:
    workload: str
    q: int
    value: float  # the evaluator's latency
    bound: float
    gap: float
    seconds: float
    used: int  # most subgraphs on one accelerator in the answer
    feasible: bool
    status: str
    improvement: float = math.nan  # (value at q=1 - value) / value at q=1


def subgraphs_used(problem, placement) -> int:
    """The most distinct subgraph positions (``order``) among one accelerator's nodes; 1 without order."""
    if placement.order is None:
        return 1
    accelerators = [d for d, (kind, _) in enumerate(problem.devices()) if not problem.kinds[kind].is_cpu]
    counts = [len({int(placement.order[v]) for v in range(problem.n) if placement.device[v] == d})
              for d in accelerators]
    return max(counts, default=0)


def run(path: Path, q: int, time_limit: float) -> Row:
    from fpgaplace.place.solvers.evaluate import evaluate
    from fpgaplace.place.solvers.run import SolveOptions, solve
    from fpgaplace.place.workload import load_workload

    problem = load_workload(path)
    started = time.perf_counter()
    result = solve(problem, "ip", SolveOptions(objective="latency", time_limit=time_limit,
                                               subgraphs_per_device=q, contiguous=q == 1))
    seconds = time.perf_counter() - started
    placement = result.placement
    evaluation = evaluate(problem, placement)
    return Row(path.stem, q, float(evaluation.latency), float(placement.bound), float(placement.gap), seconds,
               subgraphs_used(problem, placement), evaluation.feasible, placement.status)


def with_improvements(rows: list[Row]) -> list[Row]:
    base = {row.workload: row.value for row in rows if row.q == 1}
    for row in rows:
        if row.workload in base and base[row.workload] > 0:
            row.improvement = (base[row.workload] - row.value) / base[row.workload]
    return rows


def format_row(row: Row) -> str:
    bound = f"{row.bound:.6g}" if math.isfinite(row.bound) else "-"
    gap = f"{row.gap:.2%}" if math.isfinite(row.gap) else "-"
    better = f"{row.improvement:+.2%}" if math.isfinite(row.improvement) else "-"
    return (f"{row.workload:28} {row.q:>2} {row.value:12.6g} {bound:>12} {gap:>8} {row.seconds:8.1f} "
            f"{row.used:>4} {better:>8}  {row.status}{'' if row.feasible else ' INFEASIBLE'}")


HEADER = (f"{'workload':28} {'q':>2} {'value':>12} {'bound':>12} {'gap':>8} {'seconds':>8} {'used':>4} "
          f"{'vs q=1':>8}  status")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per (workload, q) run")
    parser.add_argument("--q", default="1,2,3", help="subgraphs per accelerator, comma-separated")
    parser.add_argument("--workloads", type=Path, default=DEFAULT_WORKLOADS)
    parser.add_argument("--only", default="", help="substring a workload's file name must contain")
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    counts = sorted({int(q) for q in options.q.split(",") if q})
    paths = [p for p in sorted((options.workloads / "latency").glob("*.json")) if options.only in p.name]
    if not paths:
        parser.error(f"no latency workload in {options.workloads / 'latency'} matches {options.only!r}")
    print(HEADER, file=sys.stderr, flush=True)
    rows = []
    for path in paths:
        for q in counts:
            rows.append(run(path, q, options.time_limit))
            print(format_row(with_improvements(rows)[-1]), file=sys.stderr, flush=True)
    with_improvements(rows)
    if options.json:
        print(json.dumps([asdict(row) for row in rows], indent=2))
        return
    print(f"latency IP, {options.time_limit:g} s per run; value = evaluate(problem, placement).latency")
    print(HEADER)
    for row in rows:
        print(format_row(row))


if __name__ == "__main__":
    main()
