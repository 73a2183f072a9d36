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
class Family:
    """What an FPGA family's fabric means to the op library and to yosys.

    ``multiplier``: the hard multiplier cell yosys maps a product to, ``a_bits`` its signed A-port
    width (the B port is 18 bits on all three), and how yosys' ``mul2dsp`` splits a wider product
    (``techmap -D DSP_A_MAXWIDTH_PARTIAL``, ``DSP_SIGNEDONLY``, ``DSP_A_MINWIDTH`` of
    ``synth_xilinx`` / ``synth_ecp5``): into partial products of ``a_partial_bits`` less
    ``sign_headroom`` bits of A, and a last partial narrower than ``min_a_bits`` goes to LUTs;
    ``block_ram``: the block RAM cells and how many of each make one 36 Kbit block of the op
    library's ``bram36`` count (an ECP5 EBR holds 18 Kbit, and two side by side take every aspect
    ratio a RAMB36 has: 512 x 72 as 2 x 512 x 36, ..., 32768 x 1 as 2 x 16384 x 1, so a board file
    gives ECP5 block RAM as EBR / 2); ``lut_inputs``: inputs of the fabric's LUT; ``lut_scale``:
    the fabric's LUTs per LUT of the op library's base coefficients (``fpgaplace.hw.kernel``'s
    ``DOT_LUT_*``/``LANE_LUT_*``, which count Xilinx LUT6s). ECP5's 3.87 is fitted (least squares
    through the origin) to nextpnr-ecp5 0.11's TRELLIS_COMB count, less the board's 600-LUT shell
    and the softmax's own estimate, against the dense layers' estimate, over the three MLPs built
    for the ULX3S-85F with yosys 0.70 synth_ecp5: 8-8-4 on one core (4,373 used; dense 716,
    softmax 1,014 estimated), 64-128-64-10 on two cores twice (7,022; 1,532 and 1,014) and (9,868;
    2,126 and 666): ratios 3.85, 3.53, 4.05, the fit within 9% of each. ``rtl_built``: the
    family's projects are built from the RTL op library (ECP5's open flow), so a kernel prices the
    memories the RTL lays out (the window unit's line buffer: ``fpgaplace.hw.window.line_buffer``),
    not the HLS kernel's. Sources: Xilinx
    UG479 (DSP48E1, 25 x 18), UG579 (DSP48E2, 27 x 18); Lattice FPGA-TN-02205 "ECP5 and ECP5-5G
    sysDSP Usage Guide" (MULT18X18D, 18 x 18) and FPGA-TN-02204 "ECP5 Memory Usage Guide" (sysMEM
    EBR, 18 Kbit, DP16KD / PDPW16KD)."""

    name: str  # yosys' name: synth_xilinx -family xc7 | xcup, synth_ecp5
    multiplier: str
    a_bits: int
    a_partial_bits: int
    sign_headroom: int
    min_a_bits: int
    block_ram: dict[str, float]  # cell name prefix: bram36 per cell
    lut_inputs: int
    lut_scale: float = 1.0
    rtl_built: bool = False  # the project's hardware is the RTL op library (ECP5's open flow), not HLS


_XILINX_RAM = {"RAMB36": 1.0, "RAMB18": 0.5}
ECP5_LUT_SCALE = 3.87  # LUT4s per op-library LUT (Family docstring: fitted to nextpnr-ecp5 on three MLPs)
FAMILIES: dict[str, Family] = {
    "xc7": Family("xc7", "DSP48E1", 25, 18, 1, 2, _XILINX_RAM, 6),
    "xcup": Family("xcup", "DSP48E2", 27, 18, 1, 2, _XILINX_RAM, 6),
    "ecp5": Family("ecp5", "MULT18X18D", 18, 18, 0, 2, {"DP16KD": 0.5, "PDPW16KD": 0.5}, 4, ECP5_LUT_SCALE, True),
}


def family_of(part: str) -> Family:
    """The family of a part name: ``ecp5`` for Lattice LFE5U/LFE5UM/LFE5UM5G, ``xc7`` for Xilinx
    7-series (Zynq-7000 included), else ``xcup`` (Zynq UltraScale+, Kintex/Virtex UltraScale+,
    Alveo). O(len(part))."""
    name = part.lower()
    if name.startswith("lfe5u"):
        return FAMILIES["ecp5"]
    return FAMILIES["xc7" if name.startswith(("xc7", "xa7", "xq7")) else "xcup"]


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
    family: str = "xcup"  # a key of FAMILIES (the board's part decides it)
    # how its 2-4-bit MAC lanes are built: "" by their share of its budgets (``hw.kernel.lane_choice``),
    # "dsp" or "lut" as compile chose for the core's folding (``codegen.lower``, design.json's core)
    narrow_lanes: str = ""
    # samples a second its stages need to keep up with (``compile --fps``): each takes its cheapest
    # folding within that interval (``hw.folding.fold_core``); 0: as fast as the core's budget allows
    fps: float = 0.0

    @property
    def onchip_bytes(self) -> int:
        """Bytes of block RAM and UltraRAM the core owns."""
        return self.bram36 * BRAM36_BYTES + self.uram * URAM_BYTES

    @property
    def kind_key(self) -> tuple:
        """Cores with equal resources, clock, DSP packing and family share a key (one device kind).

        Region and node are left out: where a core sits does not change what it can run.
        """
        return (self.dsp, self.bram36, self.uram, self.lut, self.ff, self.clock_mhz,
                self.macs_per_dsp, self.family)

    @property
    def peak_gmacs(self) -> float:
        """Peak multiply-accumulates per second, in GMAC/s."""
        return self.dsp * self.macs_per_dsp * self.clock_mhz / 1e3


def core_family(core: FpgaCore | None) -> Family:
    """The core's FPGA family (7-series when no core is given). O(1)."""
    return FAMILIES[core.family] if core is not None else FAMILIES["xc7"]


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
class Ecp5Board:
    """What the open ECP5 flow (yosys, nextpnr-ecp5, ecppack) needs of a board: nextpnr's device
    (``85k``, ``um5g-45k``, ...), package and speed grade, the oscillator's pin and frequency, and
    the USB UART bridge's pins (``uart_tx`` the FPGA drives, ``uart_rx`` it reads) and baud rate.
    The board's host link is the UART: ``baud / 10`` bytes a second (8N1: a start and a stop bit
    a byte), ``latency_us`` the USB bridge's latency (its latency timer). ``loader``:
    openFPGALoader's name of the board (its ``-b``), "" when it has none."""

    device: str
    package: str
    speed: int
    clock_pin: str
    clock_mhz: float
    uart_tx: str
    uart_rx: str
    baud: int
    latency_us: float
    loader: str = ""

    def host_link(self) -> Link:
        """The UART as the board's host link (GB/s: ``baud / 10`` bytes a second)."""
        return Link("host", self.baud / UART_BITS_PER_BYTE / 1e9, self.latency_us, f"uart-{self.baud}")


UART_BITS_PER_BYTE = 10  # 8N1 framing: start bit, 8 data bits, stop bit


@dataclass(frozen=True)
class Board:
    """A board (or a cluster of boards) as the cost model and the solvers see it.

    ``fabric`` holds whole-part totals (summed over nodes for a cluster), ``usable`` what is
    left after the shell and the utilisation cap. For a cluster, ``dram`` and ``stream`` are the
    slowest node's links and ``node_boards`` maps each node to its own board. ``fixed_cores`` is
    False where the board file leaves the cut of the fabric into cores to the tool
    (``fpgaplace.board.partition``): ``cores`` is then the default cut, one core per SLR.
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
    ecp5: Ecp5Board | None = None  # (ECP5 boards: the open flow, the UART host link)
    fixed_cores: bool = True  # the board file cuts the fabric into its cores; else the tool chooses

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
            "fixed_cores": self.fixed_cores,
        }


def _core_summary(core: FpgaCore) -> dict[str, Any]:
    out: dict[str, Any] = vars(core).copy()
    out["onchip_bytes"] = core.onchip_bytes
    out["peak_gmacs"] = round(core.peak_gmacs, 3)
    return out
