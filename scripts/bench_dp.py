"""Benchmark the exact throughput DP on every paper workload (and one synthetic large graph).

Usage: python scripts/bench_dp.py [--runs 3] [--no-synthetic] [--models M1,M2] [WORKLOAD_DIR]

Prints one table: workload, nodes, ideals (after block contraction), optimal max-load, seconds
(median of --runs runs, numba already compiled) and peak MB allocated by one extra run
(tracemalloc: numpy arrays and Python objects), and for a model with a speed goal
(``GOAL_SECONDS``) whether the median met it. The synthetic row is an Inception-like chain of
22 modules of 5 parallel branches (lengths 2..5), about 40,000 ideals, with random costs. The
model rows are ONNX models of the light model zoo, unoptimised (raw operator graph), with analytic
costs (no CPU profiling, so deterministic) on the zcu102 board: inception_v1 has 2,718 ideals,
inception_v2 59,862.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
import tracemalloc
from pathlib import Path

import numpy as np

from fpgaplace.flow.design import Design
from fpgaplace.model.zoo import light_model_path
from fpgaplace.place.solvers.dp import solve_throughput_dp
from fpgaplace.place.solvers.dp_ideals import build_blocks, enumerate_ideals
from fpgaplace.place.solvers.evaluate import evaluate
from fpgaplace.place.solvers.problem import DeviceKind, PlacementProblem
from fpgaplace.place.workload import load_workload

DEFAULT_DIR = Path("/work/shared/workloads/throughput")
DEFAULT_MODELS = "inception_v1,inception_v2"
MODEL_BOARD = "zcu102"
GOAL_SECONDS = {"inception_v2": 180.0}  # speed goals (median seconds); once a timed unit test


def model_problem(model: str) -> PlacementProblem:
    """The raw (unoptimised) operator graph of a light-zoo model on the benchmark board."""
    return Design(light_model_path(model), MODEL_BOARD, optimize=False, profile_cpu=False).problem


def inception_like(modules: int = 22, branches: tuple[int, ...] = (2, 3, 4, 4, 5),
                   seed: int = 0) -> PlacementProblem:
    """A chain of fork-join modules; each module has parallel branches of the given lengths."""
    rng = np.random.default_rng(seed)
    edges: list[tuple[int, int]] = []
    n, previous = 1, 0
    for _ in range(modules):
        ends = []
        for length in branches:
            last = previous
            for _ in range(length):
                edges.append((last, n))
                last, n = n, n + 1
            ends.append(last)
        edges += [(end, n) for end in ends]
        previous, n = n, n + 1
    accelerator = rng.uniform(0.2, 2.0, n)
    return PlacementProblem(
        names=[f"v{i}" for i in range(n)], ids=list(range(n)), edges=edges,
        kinds=[DeviceKind("fpga", 6, math.inf, False), DeviceKind("cpu", 1, math.inf, True)],
        latency=np.column_stack([accelerator, 10 * accelerator]), size=np.ones(n),
        transfer=rng.uniform(0.01, 0.3, n), backward=np.zeros(n, bool), color=np.full(n, -1),
        source="synthetic inception-like")


def bench(name: str, problem: PlacementProblem, runs: int) -> tuple:
    blocks = build_blocks(problem)
    ideals = enumerate_ideals(blocks.count, blocks.edges).count
    seconds = []
    placement = None
    for _ in range(runs):
        started = time.perf_counter()
        placement = solve_throughput_dp(problem)
        seconds.append(time.perf_counter() - started)
    tracemalloc.start()
    solve_throughput_dp(problem)
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    result = evaluate(problem, placement)
    assert result.feasible and result.contiguous
    assert math.isclose(result.max_load, placement.value, rel_tol=1e-9)
    return name, problem.n, ideals, placement.value, statistics.median(seconds), peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-synthetic", action="store_true")
    parser.add_argument("--models", default=DEFAULT_MODELS,
                        help="comma-separated light-zoo models (raw graph, analytic costs, "
                             f"{MODEL_BOARD}); empty for none")
    args = parser.parse_args()
    cases = [(path.stem, load_workload(path)) for path in sorted(args.directory.glob("*.json"))]
    if not args.no_synthetic:
        cases.append(("synthetic inception-like (22x5 branches)", inception_like()))
    for model in filter(None, args.models.split(",")):
        cases.append((f"{model} raw ({MODEL_BOARD}, analytic)", model_problem(model)))
    solve_throughput_dp(cases[0][1])  # compile (or load the numba cache) outside the timings
    header = f"{'workload':42} {'nodes':>6} {'ideals':>8} {'optimum':>18} {'seconds':>8} {'peak MB':>8}  goal"
    print(header)
    print("-" * len(header))
    for name, problem in cases:
        row = bench(name, problem, args.runs)
        goal = GOAL_SECONDS.get(name.split()[0])
        verdict = "" if goal is None else f"<= {goal:g} s: {'met' if row[4] <= goal else 'MISSED'}"
        print(f"{row[0]:42} {row[1]:6d} {row[2]:8d} {row[3]:18.10g} {row[4]:8.3f} {row[5]:8.1f}  {verdict}",
              flush=True)


if __name__ == "__main__":
    main()
