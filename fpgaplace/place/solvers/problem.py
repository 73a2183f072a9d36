"""The placement problem every solver reads, and the placement every solver returns.

The model follows Tarnawski et al., "Efficient Algorithms for Device Placement of DNN Graph
Operators" (NeurIPS 2020): a DAG of operators; accelerator devices (FPGA cores; several kinds
may share one board) with a memory limit each; CPU devices. Node v has a latency on each device
kind (``inf`` where it is not supported), a size in accelerator memory, and a transfer cost
c(v) for moving its output between an accelerator and DRAM (the same on every out-edge of v).

A problem built from a graph carries ``fills`` (our extension): each node's dataflow stage on
each accelerator kind, so the evaluator takes an accelerator subgraph's time as a core's
single-sample latency (its stages overlapped, ``hw.kernel.dataflow_latency``, the figure ``sim``
reads) rather than the sum of its nodes' latencies; that figure is never below the sum, so
the solvers' models, which add the latencies up, stay lower bounds.

A problem built from a board may carry ``links`` (our extension): then what a tensor costs an
accelerator depends on the link joining it to the device on the other side (an AXI stream
between two cores, DRAM or PCIe to a CPU, the network to another node). The evaluator charges
those; ``transfer`` then holds the costliest link's time, which the solvers' models use (an
upper bound on every per-link charge), and ``optimistic()`` the problem at the cheapest link's
time, whose optimum is a lower bound.

Arrays are indexed by node index 0..n-1; ``ids`` maps an index back to the id used in the
input (the workload JSON's node id, or the op's position in the ONNX graph).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # the op library loads only with a problem built from a graph
    from fpgaplace.hw.geometry import Fill


@dataclass(frozen=True)
class DeviceKind:
    """A class of identical devices: ``count`` FPGA cores of one size, or the CPU cores."""

    name: str
    count: int
    memory: float  # bytes of on-chip memory per device; math.inf for CPUs
    is_cpu: bool


@dataclass(frozen=True)
class Links:
    """What a tensor crossing between two devices costs, per link.

    ``times[v, l]`` is the time to move node v's outputs over link ``names[l]``. Devices are
    named by (kind index, ordinal) through ``device_ids[kind][ordinal]``, an index into
    ``column``: ``column[a, b]`` is the link a tensor takes from device a to device b;
    ``column[a, a]`` the link of a tensor that leaves accelerator a and comes back to it in a
    later subgraph (its DRAM). Indexing by (kind, ordinal) keeps a problem restricted to fewer
    devices of a kind (its first ordinals) valid.
    """

    names: tuple[str, ...]
    times: np.ndarray  # float64 (n, len(names))
    device_ids: tuple[tuple[int, ...], ...]
    column: np.ndarray  # int64 (B, B), B = every device of the board


@dataclass(frozen=True)
class StageFill:
    """A node's dataflow stage on an accelerator kind, for the latency objective: its fill at the
    serial folding with times in the problem's unit (``hw.Kernel.fill`` at ``Folding()``) and its
    time a sample at that folding; the evaluator paces it at the subgraph's load
    (``hw.kernel.paced_fill``)."""

    fill: Fill
    serial: float


@dataclass
class PlacementProblem:
    """Nodes, edges and device kinds of one placement instance.

    ``latency[v, k]`` is node v's time on one device of kind k (``np.inf`` = not allowed there).
    ``cpu_overlap_unlimited`` selects the paper's latency convention (CPU work overlaps without
    limit); with False, each CPU core runs one op at a time.
    """

    names: list[str]
    ids: list[int]
    edges: list[tuple[int, int]]
    kinds: list[DeviceKind]
    latency: np.ndarray  # float64 (n, len(kinds))
    size: np.ndarray  # float64 (n,)
    transfer: np.ndarray  # float64 (n,)
    backward: np.ndarray  # bool (n,)
    color: np.ndarray  # int64 (n,), -1 = no colour class
    cpu_overlap_unlimited: bool = True
    source: str = ""  # where the problem came from (file name), for messages
    meta: dict = field(default_factory=dict)
    links: Links | None = None  # per-link transfer times (module docstring); None: ``transfer``
    fills: list[list[StageFill | None]] | None = None  # [v][kind] (module docstring); None: sums

    def additive(self) -> PlacementProblem:
        """The problem without ``fills``: an accelerator subgraph takes the sum of its nodes'
        latencies, as the solvers' models count it (never more than with fills)."""
        return self if self.fills is None else replace(self, fills=None)

    @property
    def n(self) -> int:
        return len(self.names)

    def devices(self) -> list[tuple[int, int]]:
        """Every device as (kind index, ordinal within the kind), accelerators first."""
        return [(k, i) for k, kind in enumerate(self.kinds) for i in range(kind.count)]

    def device_kinds(self) -> list[int]:
        """The kind index of each device, in ``devices()`` order."""
        return [k for k, _ in self.devices()]

    def available_kinds(self) -> list[int]:
        """The kinds with at least one device."""
        return [k for k, kind in enumerate(self.kinds) if kind.count > 0]

    def device_name(self, device: int) -> str:
        kind, ordinal = self.devices()[device]
        return f"{self.kinds[kind].name}{ordinal}"

    def accelerator_kinds(self) -> list[int]:
        return [k for k, kind in enumerate(self.kinds) if not kind.is_cpu]

    def cpu_kinds(self) -> list[int]:
        return [k for k, kind in enumerate(self.kinds) if kind.is_cpu]

    def supported(self, kind: int) -> np.ndarray:
        """Boolean mask of nodes that may run on a device of ``kind``."""
        return np.isfinite(self.latency[:, kind])

    def successors(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in range(self.n)]
        for u, v in self.edges:
            out[u].append(v)
        return out

    def predecessors(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in range(self.n)]
        for u, v in self.edges:
            out[v].append(u)
        return out

    def link_matrix(self) -> np.ndarray | None:
        """``[d, e]`` = the column of ``links.times`` for a tensor from device d to device e
        (``devices()`` order), or None without links. O(D^2)."""
        if self.links is None:
            return None
        ids = np.array([self.links.device_ids[kind][ordinal] for kind, ordinal in self.devices()], dtype=np.int64)
        return self.links.column[np.ix_(ids, ids)]

    def charge(self, u: int, device: int, partners: set[int], matrix: np.ndarray | None) -> float:
        """What accelerator ``device`` pays for tensor u crossing to or from ``partners`` (the
        devices on the other side): the costliest of those links, or ``transfer[u]`` without
        links. ``matrix`` is ``link_matrix()``."""
        if matrix is None or self.links is None:
            return float(self.transfer[u])
        return float(max(self.links.times[u, matrix[device, p]] for p in partners))

    def optimistic(self) -> PlacementProblem:
        """The problem with each node's transfer at the cheapest charge it can incur (no links):
        node u is charged only for an edge (u, w) that crosses from a device d that runs u to a
        device e that runs w (d = e: a later subgraph; not both CPUs), over the link joining them,
        so the cheapest such link over u's out-edges bounds every charge of u from below (0 for
        a node without out-edges, never charged), and this problem's optimum bounds this one's.
        Without links, the problem itself. O(links * (n D^2 + m D)) for D devices."""
        matrix = self.link_matrix()
        if matrix is None or self.links is None or not self.edges:
            return self if matrix is None else replace(self, transfer=np.zeros(self.n), links=None)
        devices = self.devices()
        runs = np.isfinite(self.latency[:, [kind for kind, _ in devices]])  # (n, D): u runs on d
        cpu = np.array([self.kinds[kind].is_cpu for kind, _ in devices])
        charged = ~(cpu[:, None] & cpu[None, :])  # a pair where an accelerator pays
        tail, head = (np.array(side) for side in zip(*self.edges, strict=True))
        cheapest = np.full(self.n, np.inf)
        for link in range(len(self.links.names)):
            pairs = (matrix == link) & charged
            reaches = (runs.astype(np.int64) @ pairs.astype(np.int64)) > 0  # u on some d, link to e
            possible = (reaches[tail] & runs[head]).any(axis=1)
            np.minimum.at(cheapest, tail[possible], self.links.times[tail[possible], link])
        cheapest[~np.isfinite(cheapest)] = 0.0  # no out-edge can cross: never charged
        return replace(self, transfer=cheapest, links=None)

    def link_ratio(self) -> float:
        """The least ratio, over nodes that can be charged, of ``optimistic()``'s transfer to
        ``transfer`` (1 without links): every placement's per-link objective is at least this
        times its objective at ``transfer``."""
        optimistic = self.optimistic()
        if optimistic is self:
            return 1.0
        charged = self.transfer > 0
        charged[[v for v in range(self.n) if v not in {u for u, _ in self.edges}]] = False
        if not charged.any():
            return 1.0
        return float(np.min(optimistic.transfer[charged] / self.transfer[charged]))

    def index_of(self) -> dict[int, int]:
        """Map from external node id to node index."""
        return {node_id: i for i, node_id in enumerate(self.ids)}


@dataclass
class Placement:
    """Where every node runs, plus what the solver proved about it.

    ``device[v]`` indexes ``problem.devices()``. ``order[v]`` (optional) is the position of v's
    subgraph on its device when a device runs several subgraphs one after another (latency
    objective); None lets the evaluator derive subgraphs from the assignment.
    ``value`` is the objective the solver claims, ``bound`` a proven lower bound on the optimum
    (``-inf`` if none), and ``gap`` = (value - bound) / value.
    """

    device: np.ndarray
    order: np.ndarray | None = None
    method: str = ""
    objective: str = "throughput"
    value: float = math.inf
    bound: float = -math.inf
    seconds: float = 0.0
    status: str = ""  # "optimal", "time limit", "heuristic", ...
    contiguous: bool = True
    evaluated: tuple | None = field(default=None, repr=False, compare=False)
    # (problem, device, order, Evaluation) stored by ``evaluate.evaluation_of``; reused only while
    # the problem is the same object and device and order are unchanged

    @property
    def gap(self) -> float:
        if not math.isfinite(self.value) or not math.isfinite(self.bound):
            return math.inf
        if self.value == 0:
            return 0.0
        return max(0.0, (self.value - self.bound) / abs(self.value))
