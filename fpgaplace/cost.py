"""Cost model: per-op latency on each device kind, on-chip footprint, transfer times.

Its output is the ``PlacementProblem`` the solvers read. Times are in microseconds.

FPGA core: what the hardware op library (``fpgaplace.hw``) says the op costs: its kernel's
  ``ideal_cycles`` (its share of the core's DSPs or LUT lanes, see ``fpgaplace.hw.kernels``)
  plus the cycles to stream its weights from DRAM when they do not stay resident, turned into
  microseconds by ``hw.cycles_to_us``. An op without a kernel, or whose line buffer does not fit
  the core's working area, cannot run on the core (infinite latency).
On-chip memory of a core: a share ``WORKING_SHARE`` is the working area for streams and the
  rounding of memories into blocks; the rest holds what the ops keep on chip, which adds up over
  the ops on the core (all stages of a dataflow exist at once): an op's footprint m(v) is its
  kernel's line buffer and per-channel words, plus its weights when they stay resident. Which
  weights stay resident is decided here, once: smallest first, each at most ``RESIDENT_LIMIT``
  of the smallest core's weight area, until they fill ``RESIDENT_BUDGET`` of all cores' weight
  areas together (so the cores can hold every resident op with room to spare, and no op is
  pushed to a CPU only because memory ran out). The other weights are streamed from DRAM at
  every run.
CPU core: the op's time measured by profiling the whole model with onnxruntime on this host,
  scaled by (host GFLOP/s) / (board CPU GFLOP/s); where a node has no measurement, analytic
  ``2 * macs / GFLOP/s``.
Transfer c(u): bytes of u's outputs at the chosen precision over the core<->DRAM link, plus the
  link's latency.
Fused ops (annotated by ``fpgaplace.passes.fuse``): a fused group shares one colour class so
  every solver keeps it on one device; on a core each member is a stage of the same dataflow.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fpgaplace import hw
from fpgaplace.board import Board, CpuCore, FpgaCore
from fpgaplace.errors import FpgaplaceError, first_line
from fpgaplace.hw.folding import streamed_cycles
from fpgaplace.ir import Op, OpGraph
from fpgaplace.passes.fuse import fused_head
from fpgaplace.solvers.problem import DeviceKind, PlacementProblem

PRECISION_BYTES = {"int8": 1, "int16": 2, "float16": 2, "float32": 4}
WORKING_SHARE = 0.5  # of a core's on-chip bytes: the working area (streams, block rounding)
RESIDENT_LIMIT = 0.5  # an op's weights may stay resident if they take at most this share of a weight area
RESIDENT_BUDGET = 0.5  # resident weights fill at most this share of all cores' weight areas together


@dataclass(frozen=True)
class CostOptions:
    precision: str = "int8"
    profile_cpu: bool = True  # measure CPU times with onnxruntime (else analytic only)
    profile_runs: int = 3


@dataclass
class OpCost:
    """One op's costs: latency (us) per device kind, on-chip bytes, output transfer (us)."""

    name: str
    op_type: str
    latency_us: dict[str, float]  # device kind name -> us; inf where unsupported
    onchip_bytes: int  # resident weight bytes (the placement's m(v))
    streamed: bool  # weights or activations go through DRAM at every run
    transfer_us: float
    cpu_measured: bool


def fpga_core_kinds(board: Board) -> list[tuple[str, list[FpgaCore]]]:
    """Group identical cores (equal ``kind_key``) into named kinds, in board order."""
    groups: dict[tuple, list[FpgaCore]] = {}
    for core in board.cores:
        groups.setdefault(core.kind_key, []).append(core)
    if len(groups) == 1:
        return [("core", next(iter(groups.values())))]
    return [(f"core-{cores[0].name}", cores) for cores in groups.values()]


def cpu_kinds(board: Board) -> list[tuple[str, list[CpuCore]]]:
    groups: dict[tuple, list[CpuCore]] = {}
    for cpu in board.cpus:
        groups.setdefault((cpu.kind, cpu.gflops), []).append(cpu)
    if len(groups) == 1:
        return [("cpu", next(iter(groups.values())))]
    return [(f"cpu-{cpus[0].kind}", cpus) for cpus in groups.values()]


def _element_bytes(graph: OpGraph, tensors: list[str], precision: int) -> int:
    return sum(graph.tensors[t].numel * precision for t in tensors if t in graph.tensors)


@dataclass(frozen=True)
class OnChipPlan:
    """How one op uses a core's memory: bytes it keeps resident and bytes it streams per run."""

    resident_bytes: int
    streamed_bytes: int


def weight_area(core_bytes: int) -> int:
    return int(core_bytes * (1 - WORKING_SHARE))


def kernel_weight_bytes(op: Op, graph: OpGraph, precision: int) -> int:
    """On-chip weight bytes of ``op``'s kernel (0 for ops no core runs)."""
    planned = hw.plan_op(op, graph)
    return planned[0].weight_bytes(planned[1], precision) if planned else 0


def resident_ops(graph: OpGraph, board: Board, precision: int) -> set[str]:
    """Ops whose weights stay on chip: smallest first, within ``RESIDENT_LIMIT`` of the smallest
    core's weight area each and ``RESIDENT_BUDGET`` of all weight areas together. O(n log n)."""
    if not board.cores:
        return set()
    per_op_limit = RESIDENT_LIMIT * weight_area(min(core.onchip_bytes for core in board.cores))
    budget = RESIDENT_BUDGET * sum(weight_area(core.onchip_bytes) for core in board.cores)
    sizes = sorted((kernel_weight_bytes(op, graph, precision), name) for name, op in graph.ops.items())
    chosen, used = set(), 0
    for size, name in sizes:
        if size > per_op_limit or used + size > budget:
            break
        chosen.add(name)
        used += size
    return chosen


def on_chip_plan(op: Op, graph: OpGraph, precision: int, resident: bool) -> OnChipPlan:
    """m(v): the kernel's fixed on-chip bytes (line buffer, per-channel words) plus its weights
    when they stay resident; weights that do not cross the DRAM link at every run."""
    planned = hw.plan_op(op, graph)
    if not planned:
        return OnChipPlan(0, 0)
    kernel, geometry = planned
    weights, fixed = kernel.weight_bytes(geometry, precision), kernel.fixed_bytes(geometry)
    return OnChipPlan(fixed + weights, 0) if resident else OnChipPlan(fixed, weights)


def fpga_latency_us(op: Op, graph: OpGraph, core: FpgaCore, board: Board, plan: OnChipPlan) -> float:
    """Latency (us) of ``op`` on ``core``: its kernel's share of the core plus its streamed
    weights over the DRAM link, both from the op library; infinite where no kernel runs it."""
    planned = hw.plan_op(op, graph)
    if not planned:
        return math.inf
    kernel, geometry = planned
    if kernel.fixed_bytes(geometry) > weight_area(core.onchip_bytes):
        return math.inf
    cycles = kernel.ideal_cycles(geometry, core) + streamed_cycles(plan.streamed_bytes, core, board.dram)
    return hw.cycles_to_us(cycles, core)


def transfer_us(op: Op, graph: OpGraph, board: Board, precision: int) -> float:
    """Time to move ``op``'s outputs between a core and DRAM over the board's AXI link."""
    nbytes = _element_bytes(graph, op.outputs, precision)
    if nbytes == 0:
        return 0.0
    return nbytes / (board.dram.gbps * 1e3) + board.dram.latency_us


def host_gflops(samples: int = 5, n: int = 256) -> float:
    """Single-thread float32 GFLOP/s of this host: an n^3 MatMul in onnxruntime with one thread,
    the engine and thread budget the per-op profile uses (fastest run: on a shared machine the
    slower runs measure the neighbours, not this host)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [n, n])
    c = helper.make_tensor_value_info("c", TensorProto.FLOAT, [n, n])
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "a"], ["c"])], "gflops", [a], [c])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    feed = {"a": np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)}
    session.run(None, feed)
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        session.run(None, feed)
        times.append(time.perf_counter() - start)
    return 2 * n**3 / min(times) / 1e9


def profile_cpu_us(graph: OpGraph, runs: int = 3) -> dict[str, float]:
    """Per-op time (us, fastest of ``runs``) of ``graph`` on this host's CPU, by onnxruntime.

    The model runs single-threaded with graph optimizations off so each ONNX node keeps its
    own kernel and its own entry in the profile.
    """
    import onnxruntime as ort

    from fpgaplace.split import random_inputs

    model = graph.to_onnx()
    with tempfile.TemporaryDirectory(prefix="fpgaplace-profile-") as tmp:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(tmp, "profile")
        options.log_severity_level = 3
        try:
            session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own types; keep it one line
            raise FpgaplaceError(
                f"{graph.name}: onnxruntime cannot run the model for CPU profiling: {first_line(exc)}"
            ) from exc
        feeds = random_inputs(model, integer_high=2)  # integers 0/1: in range of small index tables
        for _ in range(runs + 1):
            session.run(None, feeds)
        profile_path = session.end_profiling()
        events = json.loads(Path(profile_path).read_text())
    return _node_times_us(events, runs)


def _node_times_us(events: list[dict], runs: int) -> dict[str, float]:
    """Fastest kernel time per node name over the last ``runs`` runs of an onnxruntime profile
    (the minimum is the estimate least disturbed by other work on the machine)."""
    per_node: dict[str, list[float]] = {}
    for event in events:
        if event.get("cat") != "Node" or not event.get("name", "").endswith("_kernel_time"):
            continue
        name = event["name"][: -len("_kernel_time")]
        per_node.setdefault(name, []).append(float(event["dur"]))
    return {name: float(min(times[-runs:])) for name, times in per_node.items()}


def cpu_latency_us(op: Op, cpu: CpuCore, measured_us: float | None, host_rate: float) -> float:
    """CPU time (us) of ``op`` on ``cpu``: the host measurement scaled by rated speed, else analytic."""
    if measured_us is not None:
        return measured_us * host_rate / cpu.gflops
    return max(2 * op.macs, op.output_bytes) / (cpu.gflops * 1e3)


def op_costs(graph: OpGraph, board: Board, options: CostOptions = CostOptions()) -> list[OpCost]:
    """Every op's costs on every device kind of ``board``, in topological order.

    Complexity: O(ops * kinds) plus one profiled onnxruntime run of the model.
    """
    if options.precision not in PRECISION_BYTES:
        raise FpgaplaceError(f"precision: expected one of {', '.join(PRECISION_BYTES)}, got {options.precision!r}")
    precision = PRECISION_BYTES[options.precision]
    core_kinds = fpga_core_kinds(board)
    resident = resident_ops(graph, board, precision)
    measured = profile_cpu_us(graph, options.profile_runs) if options.profile_cpu and board.cpus else {}
    rate = host_gflops() if measured else 1.0
    costs = []
    for name in graph.topological_order():
        op = graph.ops[name]
        plan = on_chip_plan(op, graph, precision, name in resident)
        latency = {kind: fpga_latency_us(op, graph, cores[0], board, plan) for kind, cores in core_kinds}
        for kind, cpus in cpu_kinds(board):
            latency[kind] = cpu_latency_us(op, cpus[0], measured.get(name), rate)
        costs.append(
            OpCost(
                name=name,
                op_type=op.op_type,
                latency_us=latency,
                onchip_bytes=plan.resident_bytes,
                streamed=plan.streamed_bytes > 0,
                transfer_us=transfer_us(op, graph, board, precision),
                cpu_measured=name in measured,
            )
        )
    return costs


def _fused_into(op: Op, graph: OpGraph) -> str | None:
    """The head op of ``op``'s fused group, if a fusion pass annotated it and the head exists."""
    node = getattr(op, "node", None)
    head = fused_head(node) if node is not None else None
    return head if head in graph.ops and head != op.name else None


def fused_colours(graph: OpGraph, names: list[str]) -> np.ndarray:
    """Colour class per op: a fused group shares its head's index; other ops get -1."""
    index = {name: i for i, name in enumerate(names)}
    colour = np.full(len(names), -1, dtype=np.int64)
    for name in names:
        head = _fused_into(graph.ops[name], graph)
        if head is not None:
            colour[index[name]] = colour[index[head]] = index[head]
    return colour


def build_problem(
    graph: OpGraph, board: Board, options: CostOptions = CostOptions(), costs: list[OpCost] | None = None
) -> PlacementProblem:
    """The ``PlacementProblem`` of placing ``graph`` on ``board`` (finite-CPU latency convention)."""
    costs = costs if costs is not None else op_costs(graph, board, options)
    kinds = [
        DeviceKind(name, len(cores), float(weight_area(cores[0].onchip_bytes)), False)
        for name, cores in fpga_core_kinds(board)
    ]
    kinds += [DeviceKind(name, len(cpus), math.inf, True) for name, cpus in cpu_kinds(board)]
    index = {cost.name: i for i, cost in enumerate(costs)}
    edges = sorted({(index[u], index[v]) for u, v in graph.graph.edges if u in index and v in index})
    latency = np.array([[cost.latency_us[kind.name] for kind in kinds] for cost in costs], dtype=np.float64)
    return PlacementProblem(
        names=[cost.name for cost in costs],
        ids=list(range(len(costs))),
        edges=edges,
        kinds=kinds,
        latency=latency.reshape(len(costs), len(kinds)),
        size=np.array([cost.onchip_bytes for cost in costs], dtype=np.float64),
        transfer=np.array([cost.transfer_us for cost in costs], dtype=np.float64),
        backward=np.zeros(len(costs), dtype=bool),
        color=fused_colours(graph, [cost.name for cost in costs]),
        cpu_overlap_unlimited=False,
        source=graph.name,
        meta={"board": board.name, "precision": options.precision, "unit": "us"},
    )
