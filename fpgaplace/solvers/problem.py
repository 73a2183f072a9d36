"""The placement problem every solver reads, and the placement every solver returns.

The model follows Tarnawski et al., "Efficient Algorithms for Device Placement of DNN Graph
Operators" (NeurIPS 2020): a DAG of operators; accelerator devices (FPGA cores; several kinds
may share one board) with a memory limit each; CPU devices. Node v has a latency on each device
kind (``inf`` where it is not supported), a size in accelerator memory, and a transfer cost
c(v) for moving its output between an accelerator and DRAM (the same on every out-edge of v).

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

import numpy as np


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

    @property
    def n(self) -> int:
        return len(self.names)

    def devices(self) -> list[tuple[int, int]]:
        """Every device as (kind index, ordinal within the kind), accelerators first."""
        return [(k, i) for k, kind in enumerate(self.kinds) for i in range(kind.count)]

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
        """The problem with every transfer at its cheapest link's time between devices it has
        (no links): every per-link charge is at least that, so its optimum is a lower bound on
        this problem's. Without links, the problem itself."""
        matrix = self.link_matrix()
        if matrix is None or self.links is None:
            return self
        accelerators = [d for d, (kind, _) in enumerate(self.devices()) if not self.kinds[kind].is_cpu]
        used = sorted({int(c) for d in accelerators for c in matrix[d]} | {int(matrix[e, d]) for d in accelerators
                                                                             for e in range(len(matrix))})
        cheapest = self.links.times[:, used].min(axis=1) if used else self.transfer
        return replace(self, transfer=np.asarray(cheapest, dtype=np.float64), links=None)

    def link_ratio(self) -> float:
        """The least ratio over nodes of cheapest to costliest link time (1 without links): every
        placement's per-link objective is at least this times its objective at ``transfer``."""
        optimistic = self.optimistic()
        moving = self.transfer > 0
        if optimistic is self or not moving.any():
            return 1.0
        return float(np.min(optimistic.transfer[moving] / self.transfer[moving]))

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

    @property
    def gap(self) -> float:
        if not math.isfinite(self.value) or not math.isfinite(self.bound):
            return math.inf
        if self.value == 0:
            return 0.0
        return max(0.0, (self.value - self.bound) / abs(self.value))
