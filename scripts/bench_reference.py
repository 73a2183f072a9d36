"""Our solvers side by side with the paper's reference C++ (../shared/reference, MIT licence).

Usage: python scripts/bench_reference.py [--runs 3] [--ip-seconds 60] [--reference-timeout 300]
                                         [--only throughput|latency] [--workloads DIR]

Builds the reference ``dp`` and ``greedy`` with g++ -O3 into .bench/ (once), then:

Throughput: for every workload in DIR/throughput, ``--runs`` rounds, each running in turn our
    DP in this process (numba compiled by a warm-up run), our CLI as a fresh process
    (``fpgaplace place W --method dp --json``: Python start-up included) and the reference ``dp``
    (a process reading W on standard input). Prints the optimum of each (they must agree), the
    median seconds and the ratios reference / ours.
Latency: for every workload in DIR/latency, the reference ``greedy``, and our entry point
    ``solve(method="ip")`` at ``--ip-seconds`` (warm-started by greedy, PipeDream and local
    search, bounded by the critical-path bound and SCIP): value, bound, gap and seconds.

Every value of ours is the trusted evaluator's. Seconds are wall-clock on whatever else runs on the
machine: compare ratios from one run of this script, not across runs.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from fpgaplace.place.solvers.bounds import critical_path_bound
from fpgaplace.place.solvers.dp import solve_throughput_dp
from fpgaplace.place.solvers.dp_ideals import build_blocks, enumerate_ideals
from fpgaplace.place.solvers.evaluate import evaluate
from fpgaplace.place.solvers.run import SolveOptions, solve
from fpgaplace.place.workload import load_workload

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT.parent / "shared" / "reference"
BUILD = ROOT / ".bench"
PROGRAMS = {"dp": "throughput-dp/dp.cpp", "greedy": "latency-greedy/greedy.cpp"}
DEFAULT_WORKLOADS = ROOT / "tests" / "workloads"


@dataclass
class Timed:
    value: float  # nan when the program did not finish
    seconds: float
    finished: bool = True


def build_reference() -> dict[str, Path]:
    """g++ -O3 each reference program into .bench/ unless it is newer than its source."""
    BUILD.mkdir(exist_ok=True)
    out = {}
    for name, source in PROGRAMS.items():
        binary, path = BUILD / name, REFERENCE / source
        if not binary.exists() or binary.stat().st_mtime < path.stat().st_mtime:
            subprocess.run(["g++", "-O3", "-std=c++17", f"-I{REFERENCE}", str(path), "-o", str(binary)],
                           check=True)
        out[name] = binary
    return out


def run_reference(binary: Path, workload: Path, key: str, timeout: float) -> Timed:
    """Wall time of one reference run and the value of ``key`` in the JSON it prints last."""
    started = time.perf_counter()
    try:
        with workload.open() as stdin:
            done = subprocess.run([str(binary)], stdin=stdin, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Timed(float("nan"), timeout, finished=False)
    seconds = time.perf_counter() - started
    found = re.findall(rf'"{key}":\s*([-+0-9.eE]+)', done.stdout)
    return Timed(float(found[-1]) if found else float("nan"), seconds)


def run_our_cli(workload: Path) -> Timed:
    """Wall time of ``fpgaplace place W --method dp --json`` in a fresh process, and its value."""
    command = [str(Path(sys.executable).parent / "fpgaplace"), "place", str(workload), "--method", "dp", "--json"]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - started
    document = json.loads(done.stdout)
    return Timed(float(document.get("maxLoad", float("nan"))), seconds)


def run_our_dp(workload: Path) -> Timed:
    problem = load_workload(workload)
    started = time.perf_counter()
    placement = solve_throughput_dp(problem)
    seconds = time.perf_counter() - started
    return Timed(float(evaluate(problem, placement).max_load), seconds)


def median(runs: list[Timed]) -> str:
    seconds = statistics.median(run.seconds for run in runs)
    return f"{'>' if not all(run.finished for run in runs) else ''}{seconds:.3f}"


def throughput_table(binaries: dict[str, Path], folder: Path, runs: int, timeout: float) -> None:
    print("| workload | ideals | our optimum | reference optimum | ours in-process s | ours CLI s "
          "| reference s | reference / ours in-process | reference / ours CLI |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for workload in sorted(folder.glob("*.json")):
        problem = load_workload(workload)
        blocks = build_blocks(problem)
        ideals = enumerate_ideals(blocks.count, blocks.edges).count
        run_our_dp(workload)  # warm-up: numba compiled or loaded from its cache
        ours, cli, reference = [], [], []
        for _ in range(runs):  # alternate, so load on the machine hits all three alike
            ours.append(run_our_dp(workload))
            cli.append(run_our_cli(workload))
            reference.append(run_reference(binaries["dp"], workload, "maxLoad", timeout))
            if not reference[-1].finished:
                break  # one timeout is enough to say it
        ratio_in = statistics.median(r.seconds for r in reference) / statistics.median(o.seconds for o in ours)
        ratio_cli = statistics.median(r.seconds for r in reference) / statistics.median(c.seconds for c in cli)
        print(f"| {workload.stem} | {ideals:,} | {ours[0].value:.8g} | {reference[0].value:.8g} | {median(ours)} "
              f"| {median(cli)} | {median(reference)} | {ratio_in:.2f} | {ratio_cli:.2f} |", flush=True)


def latency_table(binaries: dict[str, Path], folder: Path, ip_seconds: float, timeout: float) -> None:
    print(f"| workload | reference greedy | s | critical-path bound | our IP ({ip_seconds:g} s) | bound | gap "
          "| s | status |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for workload in sorted(folder.glob("*.json")):
        problem = load_workload(workload)
        reference = run_reference(binaries["greedy"], workload, "totalLatency", timeout)
        path_bound = critical_path_bound(problem)
        result = solve(problem, "ip", SolveOptions(objective="latency", time_limit=ip_seconds))
        placement = result.placement
        print(f"| {workload.stem} | {reference.value:.6g} | {reference.seconds:.3f} | {path_bound:.6g} "
              f"| {result.value:.6g} | {placement.bound:.6g} | {100 * placement.gap:.2f} % "
              f"| {placement.seconds:.1f} | {placement.status} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ip-seconds", type=float, default=60.0)
    parser.add_argument("--reference-timeout", type=float, default=300.0)
    parser.add_argument("--only", choices=("throughput", "latency"))
    parser.add_argument("--workloads", type=Path, default=DEFAULT_WORKLOADS)
    args = parser.parse_args()
    binaries = build_reference()
    if args.only != "latency":
        throughput_table(binaries, args.workloads / "throughput", args.runs, args.reference_timeout)
        print()
    if args.only != "throughput":
        latency_table(binaries, args.workloads / "latency", args.ip_seconds, args.reference_timeout)


if __name__ == "__main__":
    main()
