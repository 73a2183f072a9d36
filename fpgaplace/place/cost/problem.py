"""The placement problem of a graph on a board: every op's latency on each device kind (cores from
``fpga``, CPUs from ``cpu``), its footprint, the transfer time of its outputs over each link,
and the fused groups' colours, as the ``PlacementProblem`` the solvers read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fpgaplace.board.model import Board, Link
from fpgaplace.hw.registry import colocated_groups
from fpgaplace.model.ir import Op, OpGraph
from fpgaplace.model.passes.fuse import fused_head
from fpgaplace.place.cost.cpu import (
    CpuProfileCache,
    cpu_kinds,
    cpu_latency_us,
    cpu_profile,
    default_cpu_cache_dir,
)
from fpgaplace.place.cost.fpga import (
    PRECISION_BYTES,
    element_bytes,
    fpga_core_kinds,
    fpga_fill,
    fpga_latency_us,
    on_chip_plan,
    resident_ops,
    weight_area,
)
from fpgaplace.place.solvers.problem import DeviceKind, Links, PlacementProblem, StageFill
from fpgaplace.util.errors import FpgaplaceError


@dataclass(frozen=True)
class CostOptions:
    """How ``op_costs`` costs a graph.

    ``profile_cpu`` measures CPU op times with onnxruntime (else analytic only): one warm-up run
    and at least ``profile_runs`` timed runs (more while they take under ``MIN_PROFILE_SECONDS``
    in all), an op's time the median of its timed runs. ``cpu_cache`` keeps each profile, with
    the host rate measured beside it, in ``cpu_cache_dir`` (None: ``default_cpu_cache_dir()``),
    keyed by the model's content, the timing method and the host (``profile_key``), so the next
    run on the same model and host reads the same figures; without it every run measures again
    (and two runs on a loaded machine can differ by a factor of 2, see tests/test_cost.py).
    """

    precision: str = "int8"
    profile_cpu: bool = True
    profile_runs: int = 5
    cpu_cache: bool = True
    cpu_cache_dir: Path | None = None

    def profile_cache(self) -> CpuProfileCache | None:
        """The cache ``op_costs`` reads and writes CPU profiles in, or None when caching is off."""
        if not self.cpu_cache:
            return None
        return CpuProfileCache(Path(self.cpu_cache_dir) if self.cpu_cache_dir is not None else default_cpu_cache_dir())


@dataclass
class OpCost:
    """One op's costs: latency (us) per device kind, on-chip bytes, output transfer (us)."""

    name: str
    op_type: str
    latency_us: dict[str, float]  # device kind name -> us; inf where unsupported
    onchip_bytes: int  # resident weight bytes (the placement's m(v))
    streamed: bool  # weights or activations go through DRAM at every run
    transfer_us: float  # over the costliest link between the board's devices (the solvers' c(v))
    output_bytes: int  # what moving its outputs to another device transfers
    cpu_measured: bool
    fills: dict[str, StageFill | None] = field(default_factory=dict)  # FPGA kind name -> its stage (``fpga_fill``)


def board_links(board: Board) -> tuple[list[Link], np.ndarray]:
    """The distinct links between the board's devices (cores, then CPUs, in board order) and
    ``column[a, b]``, the index of the link a tensor takes from device a to device b: as
    ``Board.link_between`` says for two devices, the node's DRAM for a core to itself. O(B^2)."""
    devices: list = [*board.cores, *board.cpus]
    links: list[Link] = []
    column = np.zeros((len(devices), len(devices)), dtype=np.int64)
    for a, source in enumerate(devices):
        for b, target in enumerate(devices):
            link = board.node_board(source.node).dram if a == b else board.link_between(source, target)
            if link not in links:
                links.append(link)
            column[a, b] = links.index(link)
    return links, column


def output_bytes(op: Op, graph: OpGraph, precision: float) -> int:
    """Bytes of ``op``'s outputs, each at its own width or ``precision`` bytes per element (packed
    below 8 bits): what a transfer moves."""
    return element_bytes(graph, op.outputs, precision)


def _transfer_times(nbytes: int, links: list[Link]) -> list[float]:
    return [link.transfer_us(nbytes) if nbytes else 0.0 for link in links]


def op_costs(graph: OpGraph, board: Board, options: CostOptions = CostOptions()) -> list[OpCost]:
    """Every op's costs on every device kind of ``board``, in topological order.

    Complexity: O(ops * kinds) plus, when profiling and the cache has no profile of the model,
    ``1 + options.profile_runs`` profiled onnxruntime runs of it.
    """
    if options.precision not in PRECISION_BYTES:
        raise FpgaplaceError(f"precision: expected one of {', '.join(PRECISION_BYTES)}, got {options.precision!r}")
    precision = PRECISION_BYTES[options.precision]
    core_kinds = fpga_core_kinds(board)
    resident = resident_ops(graph, board, precision)
    profiled = options.profile_cpu and board.cpus
    profile = cpu_profile(graph, options.profile_runs, options.profile_cache()) if profiled else None
    measured = profile.op_us if profile else {}
    rate = profile.host_gflops if profile else 1.0
    links = board_links(board)[0]
    costs = []
    for name in graph.topological_order():
        op = graph.ops[name]
        plan = on_chip_plan(op, graph, precision, name in resident, board.cores[0] if board.cores else None)
        nbytes = output_bytes(op, graph, precision)
        latency = {kind: fpga_latency_us(op, graph, cores[0], board, plan, precision) for kind, cores in core_kinds}
        for kind, cpus in cpu_kinds(board):
            latency[kind] = cpu_latency_us(op, cpus[0], measured.get(name), rate)
        costs.append(
            OpCost(
                name=name,
                op_type=op.op_type,
                latency_us=latency,
                onchip_bytes=plan.resident_bytes,
                streamed=plan.streamed_bytes > 0,
                transfer_us=max(_transfer_times(nbytes, links), default=0.0),
                output_bytes=nbytes,
                cpu_measured=name in measured,
                fills={kind: fpga_fill(op, graph, cores[0], precision) for kind, cores in core_kinds},
            )
        )
    return costs


def _fused_into(op: Op, graph: OpGraph) -> str | None:
    """The head op of ``op``'s fused group, if a fusion pass annotated it and the head exists."""
    node = getattr(op, "node", None)
    head = fused_head(node) if node is not None else None
    return head if head in graph.ops and head != op.name else None


def fused_colours(graph: OpGraph, names: list[str]) -> np.ndarray:
    """Colour class per op: the ops of a fused group, or of a group the op library needs on one
    device (``hw.registry.colocated_groups``: a table island, a flatten and the dense layers
    reading it), share one index (the smallest of the class); other ops get -1.
    Groups that share an op merge. O(n alpha(n)) with a union-find."""
    index = {name: i for i, name in enumerate(names)}
    parent = list(range(len(names)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def join(a: int, b: int) -> None:
        ra, rb = root(a), root(b)
        parent[max(ra, rb)] = min(ra, rb)

    coloured: set[int] = set()
    for name in names:
        head = _fused_into(graph.ops[name], graph)
        if head is not None and head in index:
            join(index[name], index[head])
            coloured |= {index[name], index[head]}
    for group in colocated_groups(graph):
        members = [index[n] for n in group if n in index]
        for i in members[1:]:
            join(members[0], i)
        coloured |= set(members) if len(members) > 1 else set()
    colour = np.full(len(names), -1, dtype=np.int64)
    for i in coloured:
        colour[i] = root(i)
    return colour


def problem_links(board: Board, costs: list[OpCost]) -> Links:
    """The per-link transfer times of ``costs`` on ``board``; devices in the order of
    ``fpga_core_kinds`` then ``cpu_kinds`` (the problem's kinds). O(ops * links + B^2)."""
    links, column = board_links(board)
    position = {id(device): b for b, device in enumerate([*board.cores, *board.cpus])}
    groups = [cores for _, cores in fpga_core_kinds(board)] + [cpus for _, cpus in cpu_kinds(board)]
    times = np.array([_transfer_times(cost.output_bytes, links) for cost in costs], dtype=np.float64)
    return Links(
        names=tuple(f"{link.kind}:{link.type}" if link.type else link.kind for link in links),
        times=times.reshape(len(costs), len(links)),
        device_ids=tuple(tuple(position[id(device)] for device in group) for group in groups),
        column=column,
    )


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
        links=problem_links(board, costs),
        fills=[[cost.fills.get(kind.name) for kind in kinds] for cost in costs],
        backward=np.zeros(len(costs), dtype=bool),
        color=fused_colours(graph, [cost.name for cost in costs]),
        cpu_overlap_unlimited=False,
        source=graph.name,
        meta={"board": board.name, "precision": options.precision, "unit": "us"},
    )
