"""The placement problem every solver reads, and the placement every solver returns.

The model follows Tarnawski et al., "Efficient Algorithms for Device Placement of DNN Graph
Operators" (NeurIPS 2020): a DAG of operators; accelerator devices (FPGA cores; several kinds
may share one board) with a memory limit each; CPU devices. Node v has a latency on each device
kind (``inf`` where it is not supported), a size in accelerator memory, and a transfer cost
c(v) for moving its output between an accelerator and DRAM (the same on every out-edge of v).

Arrays are indexed by node index 0..n-1; ``ids`` maps an index back to the id used in the
input (the workload JSON's node id, or the op's position in the ONNX graph).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class DeviceKind:
    """A class of identical devices: ``count`` FPGA cores of one size, or the CPU cores."""

    name: str
    count: int
    memory: float  # bytes of on-chip memory per device; math.inf for CPUs
    is_cpu: bool


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
