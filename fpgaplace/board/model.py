"""A board as the cost model, the solvers and the code generator see it: its FPGA cores (each a
share of the fabric with its own DSPs, block RAM, UltraRAM, LUTs and clock), its CPU cores, the
links between them, and the vendor tool facts a project's build scripts need. Plain frozen data;
``fpgaplace.board.load`` reads and validates it from the board files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

RESOURCES: tuple[str, ...] = ("lut", "ff", "dsp", "bram36", "uram")
FABRIC_KEYS: tuple[str, ...] = (*RESOURCES, "slrs")
BRAM36_BYTES = 4608  # 36 Kbit
URAM_BYTES = 36864  # 288 Kbit


@dataclass(frozen=True)
class FpgaCore:
    """One FPGA core: a share of the fabric that runs its own kernels."""

    name: str
    dsp: int
    bram36: int
    uram: int
    lut: int
    ff: int
    clock_mhz: float
    macs_per_dsp: int
    region: int  # the SLR the core sits in
    node: str  # the cluster node (board) the core belongs to

    @property
    def onchip_bytes(self) -> int:
        """Bytes of block RAM and UltraRAM the core owns."""
        return self.bram36 * BRAM36_BYTES + self.uram * URAM_BYTES

    @property
    def kind_key(self) -> tuple:
        """Cores with equal resources, clock and DSP packing share a key (one device kind).

        Region and node are left out: where a core sits does not change what it can run.
        """
        return (self.dsp, self.bram36, self.uram, self.lut, self.ff, self.clock_mhz,
                self.macs_per_dsp)

    @property
    def peak_gmacs(self) -> float:
        """Peak multiply-accumulates per second, in GMAC/s."""
        return self.dsp * self.macs_per_dsp * self.clock_mhz / 1e3


@dataclass(frozen=True)
class CpuCore:
    """One CPU core of the board (or of the host, for PCIe cards)."""

    name: str
    kind: str
    ghz: float
    gflops: float  # rated peak GFLOP/s of this core
    node: str


@dataclass(frozen=True)
class Link:
    """A data path: ``kind`` is "stream", "dram", "host" or "network"; ``gbps`` in GB/s."""

    kind: str
    gbps: float
    latency_us: float
    type: str = ""  # the medium: ddr4, hbm2, axi-stream, 1gbe, ...

    def transfer_us(self, nbytes: float) -> float:
        """Time to move ``nbytes`` over the link: latency + bytes / bandwidth."""
        return self.latency_us + nbytes / (self.gbps * 1e3)


Device = FpgaCore | CpuCore


@dataclass(frozen=True)
class VivadoBoard:
    """What Vivado's block design needs of a Zynq board: its board part (a pattern whose newest
    installed version is taken) and, for a system-on-module, the carrier card's board part and
    the connector that joins them (the SOM's presets apply only with both)."""

    board_part: str
    carrier: str = ""
    connector: str = ""


@dataclass(frozen=True)
class VitisPlatform:
    """What Vitis needs of a PCIe card: its platform, and the kind and number of the memory
    banks that ``sp=`` spreads the memory ports over (HBM pseudo-channels or DDR banks)."""

    platform: str
    memory: str  # "HBM" or "DDR"
    banks: int


@dataclass(frozen=True)
class Board:
    """A board (or a cluster of boards) as the cost model and the solvers see it.

    ``fabric`` holds whole-part totals (summed over nodes for a cluster), ``usable`` what is
    left after the shell and the utilisation cap. For a cluster, ``dram`` and ``stream`` are the
    slowest node's links and ``node_boards`` maps each node to its own board.
    """

    name: str
    part: str
    source: str
    fabric: dict[str, int]
    usable: dict[str, int]
    shell: dict[str, int]
    utilisation_cap: dict[str, float]
    cores: list[FpgaCore]
    cpus: list[CpuCore]
    dram: Link
    stream: Link
    network: Link | None
    host: Link | None
    nodes: list[str]
    dram_gbytes: float
    node_boards: dict[str, Board] = field(default_factory=dict)
    vivado: VivadoBoard | None = None  # the vendor tools' facts (Zynq boards)
    vitis: VitisPlatform | None = None  # (PCIe cards)

    @property
    def is_cluster(self) -> bool:
        return bool(self.node_boards)

    def node_board(self, node: str) -> Board:
        """The board of one node (the board itself unless it is a cluster)."""
        if not self.is_cluster:
            return self
        return self.node_boards[node]

    def link_between(self, a: Device, b: Device) -> Link:
        """The link a tensor crosses from device ``a`` to device ``b``: the network between two
        nodes; on one node the AXI stream between two FPGA cores, the host link (PCIe) between a
        card's core and a host CPU, else the core's DRAM link."""
        if a.node != b.node:
            return self.network if self.network is not None else self.dram
        board = self.node_board(a.node)
        if isinstance(a, FpgaCore) and isinstance(b, FpgaCore):
            return board.stream
        if board.host is not None and isinstance(a, CpuCore) != isinstance(b, CpuCore):
            return board.host
        return board.dram

    def core_groups(self) -> list[list[FpgaCore]]:
        """Cores grouped by ``kind_key``, in board order of each group's first core."""
        groups: dict[tuple, list[FpgaCore]] = {}
        for core in self.cores:
            groups.setdefault(core.kind_key, []).append(core)
        return list(groups.values())

    def summary(self) -> dict[str, Any]:
        """A JSON-ready description (``fpgaplace board NAME --json``)."""
        return {
            "name": self.name,
            "part": self.part,
            "source": self.source,
            "nodes": list(self.nodes),
            "fabric": dict(self.fabric),
            "shell": dict(self.shell),
            "utilisation_cap": dict(self.utilisation_cap),
            "usable": dict(self.usable),
            "cores": [_core_summary(core) for core in self.cores],
            "cpus": [vars(cpu).copy() for cpu in self.cpus],
            "links": {
                link.kind: vars(link).copy()
                for link in (self.stream, self.dram, self.host, self.network)
                if link is not None
            },
            "dram_gbytes": self.dram_gbytes,
            "onchip_bytes": sum(core.onchip_bytes for core in self.cores),
            "peak_gmacs": round(sum(core.peak_gmacs for core in self.cores), 3),
        }


def _core_summary(core: FpgaCore) -> dict[str, Any]:
    out: dict[str, Any] = vars(core).copy()
    out["onchip_bytes"] = core.onchip_bytes
    out["peak_gmacs"] = round(core.peak_gmacs, 3)
    return out
