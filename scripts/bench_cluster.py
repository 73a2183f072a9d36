"""Throughput of a model split onto 2 Ray actors (1 thread each) vs the whole model in one session.

For each model: run the graph optimizer (``fpgaplace.model.passes.optimize``: constants folded,
BatchNorm folded, ...), measure every op's time on this host with onnxruntime
(``fpgaplace.place.cost.cpu.profile_cpu_us``, 1 thread), and cut the graph into 2 contiguous pieces with the
exact throughput DP (``fpgaplace.place.solvers.dp.solve_throughput_dp``) on a 2-device problem:
latency = the measured op time, transfer = an estimate of one Ray hop for the op's output
(HOP_US + bytes / HOP_BYTES_PER_US, charged to both sides as the paper's model does for
accelerators). The split keeps the DP's cut exactly (no fused-group colocation) and is
checked against the whole model (``check_split``); then N samples are streamed through
``run_cluster`` (2 actors x 1 intra-op thread) and through ``run_whole`` (1 session, 1 thread;
and 2 threads for reference), 3 runs each, medians reported.

    python scripts/bench_cluster.py    # resnet50, inception_v2, bert (768 hidden), tiny_cnn
    python scripts/bench_cluster.py --models bert --samples 32 --json

What bounds the figures on a 2-core machine: at most 2x (two stages, one core each, and only
if the cut is perfectly balanced); each hop costs a Ray actor call plus serializing the boundary
tensors into the object store; the driver, the raylet and the GCS run on the same two cores.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import onnx

from fpgaplace.deploy.cluster import open_session, pipeline_devices, run_cluster, run_whole, start_local_ray
from fpgaplace.flow.split import check_split, split_model
from fpgaplace.model import zoo as models
from fpgaplace.model.frontend.load import load_onnx
from fpgaplace.model.passes import name_nodes, optimize
from fpgaplace.model.passes.graph_tools import tensor_types, topological_order
from fpgaplace.place.cost.cpu import profile_cpu_us
from fpgaplace.place.solvers.dp import solve_throughput_dp
from fpgaplace.place.solvers.problem import DeviceKind, PlacementProblem
from fpgaplace.util.compare import relative_error
from fpgaplace.util.onnxrt import random_inputs

HOP_US = 100.0  # estimated fixed cost of one Ray actor-to-actor tensor hop on one host
HOP_BYTES_PER_US = 2000.0  # estimated object-store copy rate, 2 GB/s
DEVICES = ["actor0", "actor1"]
RUNS = 3


def build_models() -> dict[str, onnx.ModelProto]:
    return {
        "resnet50": onnx.load(str(models.light_model_path("resnet50"))),
        "inception_v2": onnx.load(str(models.light_model_path("inception_v2"))),
        "bert": models.bert_encoder_layer(seq=128, hidden=768, heads=12, batch=1),
        "tiny_cnn": models.cnn_residual(batch=1),  # ~0.1 ms of compute: shows Ray's cost per sample
    }


def named(model: onnx.ModelProto) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    name_nodes(out)
    return out


def two_actor_problem(model: onnx.ModelProto, op_us: dict[str, float]) -> PlacementProblem:
    """Nodes in topological order, tensor edges, 2 identical devices, measured op times."""
    nodes = topological_order(model.graph)
    index = {node.name: i for i, node in enumerate(nodes)}
    producer = {out: index[node.name] for node in nodes for out in node.output if out}
    edges = sorted({(producer[t], index[node.name]) for node in nodes for t in node.input if t in producer})
    types = tensor_types(model)
    out_bytes = [sum((types[t].nbytes() or 0) if t in types else 0 for t in node.output) for node in nodes]
    n = len(nodes)
    return PlacementProblem(
        names=[node.name for node in nodes], ids=list(range(n)), edges=edges,
        kinds=[DeviceKind("actor", len(DEVICES), math.inf, False)],
        latency=np.array([[op_us.get(node.name, 0.0)] for node in nodes], dtype=np.float64).reshape(n, 1),
        size=np.zeros(n), transfer=np.array([HOP_US + b / HOP_BYTES_PER_US for b in out_bytes]),
        backward=np.zeros(n, dtype=bool), color=np.full(n, -1, dtype=np.int64),
        cpu_overlap_unlimited=False, source=model.graph.name,
    )


@dataclass
class Row:
    model: str
    ops: int
    cut_tensors: int
    cut_bytes: int
    stage_ms_predicted: list[float]  # profiled op time per stage in pipeline order, ms
    whole_1t: float  # samples/s
    whole_2t: float
    two_sessions: float  # 2 whole-model sessions x 1 thread side by side (data parallel): the host's 2-core ceiling
    pipelined: float
    speedup: float  # pipelined / whole_1t
    bound: float  # profiled total / slowest stage: the speed-up a perfect 2-stage pipeline of this cut gives
    stage_busy_ms: list[float]  # time inside onnxruntime per sample and stage, run with the median throughput
    dp_seconds: float


def data_parallel(model: onnx.ModelProto, inputs: list[dict[str, np.ndarray]]) -> float:
    """Samples/s of two 1-thread sessions of the whole model, each running half the inputs in its
    own thread (onnxruntime releases the GIL), timed from a common start after both sessions
    loaded: what 2 cores give here without any pipeline."""
    data = model.SerializeToString()
    sessions = [open_session(data, "data-parallel baseline", threads=1) for _ in range(2)]
    barrier = threading.Barrier(3)

    def work(session, half: list[dict[str, np.ndarray]]) -> None:
        barrier.wait()
        for sample in half:
            session.run(None, sample)

    threads = [threading.Thread(target=work, args=(session, inputs[k::2])) for k, session in enumerate(sessions)]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    return len(inputs) / (time.perf_counter() - start)


def balanced_split(model: onnx.ModelProto, folder: Path, work: Path) -> tuple[dict, list[float], float]:
    """Profile, solve the 2-device DP, write the split; return the manifest stats, stage ms, DP s."""
    path = work / f"{model.graph.name or 'model'}.onnx"
    onnx.save(model, str(path))
    op_us = profile_cpu_us(load_onnx(path))
    problem = two_actor_problem(model, op_us)
    start = time.perf_counter()
    placement = solve_throughput_dp(problem, time_limit=120)
    dp_seconds = time.perf_counter() - start
    assignment = {name: DEVICES[int(d)] for name, d in zip(problem.names, placement.device, strict=True)}
    manifest = split_model(model, assignment, folder, colocate_fused=False)  # keep the DP's cut exactly
    stage_ms = [sum(problem.latency[v, 0] for v in range(problem.n) if assignment[problem.names[v]] == device) / 1e3
                for device in pipeline_devices(manifest)]
    return manifest.stats, stage_ms, dp_seconds


def bench(name: str, model: onnx.ModelProto, samples: int, work: Path) -> Row:
    optimized, _ = optimize(model)
    optimized = named(optimized)
    folder = work / f"{name}-split"
    stats, stage_ms, dp_seconds = balanced_split(optimized, folder, work)
    errors = check_split(optimized, folder)
    if max(errors.values()) > 1e-5:
        raise SystemExit(f"{name}: split differs from the whole model: {errors}")
    inputs = [random_inputs(optimized, seed) for seed in range(samples)]
    whole_1t, whole_2t, two_sessions, pipelined, busy = [], [], [], [], []
    for _ in range(RUNS):
        whole = run_whole(optimized, inputs, threads=1)
        whole_1t.append(whole.throughput)
        whole_2t.append(run_whole(optimized, inputs, threads=2).throughput)
        two_sessions.append(data_parallel(optimized, inputs))
        result = run_cluster(folder, inputs, timeout_s=120)
        pipelined.append(result.throughput)
        busy.append([result.stage_busy_s[d] * 1e3 / samples for d in result.devices])
        worst = max(relative_error(got[k], want[k]) for got, want in zip(result.outputs, whole.outputs, strict=True)
                    for k in want)
        if worst > 1e-5:
            raise SystemExit(f"{name}: pipelined outputs differ from the whole model (relative error {worst:.3g})")
    median_run = sorted(range(RUNS), key=lambda i: pipelined[i])[RUNS // 2]
    transfers = stats["transfers_after"]
    return Row(name, len(optimized.graph.node), transfers["count"], transfers["bytes"],
               [round(ms, 2) for ms in stage_ms], statistics.median(whole_1t), statistics.median(whole_2t),
               statistics.median(two_sessions),
               statistics.median(pipelined), statistics.median(pipelined) / statistics.median(whole_1t),
               sum(stage_ms) / max(stage_ms),
               [round(ms, 2) for ms in busy[median_run]], dp_seconds)


def print_table(rows: list[Row], samples: int) -> None:
    header = (f"{'model':<13}{'ops':>5}{'cut':>5}{'cut KB':>9}{'stages ms (profiled)':>22}"
              f"{'whole 1t/s':>12}{'whole 2t/s':>12}{'2 sess./s':>11}{'2 actors/s':>12}{'speed-up':>10}{'bound':>7}"
              f"{'busy ms/sample':>17}")
    print(f"{samples} samples per run, median of {RUNS} runs; speed-up = 2 actors x 1 thread vs whole model 1 thread")
    print(header)
    for r in rows:
        stages = " / ".join(f"{ms:.1f}" for ms in r.stage_ms_predicted)
        busy = " / ".join(f"{ms:.1f}" for ms in r.stage_busy_ms)
        print(f"{r.model:<13}{r.ops:>5}{r.cut_tensors:>5}{r.cut_bytes / 1024:>9.0f}{stages:>22}{r.whole_1t:>12.2f}"
              f"{r.whole_2t:>12.2f}{r.two_sessions:>11.2f}{r.pipelined:>12.2f}{r.speedup:>9.2f}x{r.bound:>6.2f}x{busy:>17}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet50", "inception_v2", "bert", "tiny_cnn"],
                        choices=["resnet50", "inception_v2", "bert", "tiny_cnn"])
    parser.add_argument("--samples", type=int, default=24)
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    chosen = {name: model for name, model in build_models().items() if name in args.models}
    start_local_ray(num_cpus=2)
    rows = []
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="fpgaplace-bench-cluster-") as tmp:
        for name, model in chosen.items():
            print(f"benchmarking {name} ...", file=sys.stderr, flush=True)
            rows.append(bench(name, model, args.samples, Path(tmp)))
    load_after = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"load_average": [load_before, load_after], "rows": [asdict(r) for r in rows]}, indent=2))
    else:
        print_table(rows, args.samples)
        print(f"1-minute load average before/after: {load_before:.2f} / {load_after:.2f} on {os.cpu_count()} cores "
              "(other processes share the cores: the figures are only as clean as this)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
