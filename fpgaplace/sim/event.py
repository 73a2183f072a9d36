"""Event simulation of a compiled project: samples streamed through its cores, CPUs and links.

Everything is read from ``design.json`` (through ``fpgaplace.project.record.load``) and the
split manifest it names; cycles come from the op library as the compile step wrote them there,
and ``fpgaplace.hw.cycles_to_us`` is the one conversion to time. Nothing is recomputed.

The model. The split's pieces (in manifest order) and the transfers between them are *stages*;
each stage runs on a *server* and handles samples 0, 1, ... in order:

* an FPGA core is a dataflow pipeline: it starts a sample at most every ``interval_cycles``
  (its busy time per sample) and hands it on ``latency_cycles`` later, the time from its first
  input beat to its last output beat as compile computed it from its kernels' fills
  (``fpgaplace.hw.registry.core_latency``: each stage starts on the first rows its predecessor
  emits, so the stages overlap). A project compiled before design.json had that field falls
  back on the sum of its stages' cycles (at least the interval), a conservative bound;
* a CPU runs one sample of one of its pieces at a time, taking its ``compute_us`` per sample
  (split over its pieces by how many of its ops each holds, when it has several);
* a link serves one transfer at a time, each taking that transfer's ``us`` (latency plus bytes
  over bandwidth); transfers sharing a link serialise. Links: an AXI stream per pair of cores,
  the DRAM (or host link) of a node, the network per direction between two nodes;
* the model's inputs are always there; its outputs leave at once, except over a host link (a
  CPU-less board's UART, design.json's transfers from and to ``HOST_DEVICE``): each such transfer
  is a link stage before the piece reading the input, or after the piece writing the output.

A stage starts sample *k* when it has finished sample *k - 1* on a free server, every input of
*k* has arrived, and every edge it feeds has room. Buffering is finite: an edge holds the samples
its producer is working on (a core's pipeline holds ``ceil(latency / interval)``, others one) plus
``buffer`` (default one) sample waiting for the consumer. A server that could start but whose
next ready piece waits for a full downstream edge is *blocked*; one waiting for input is
*starved*; both are stall time, counted between the server's first start and last finish.

Measured: the latency is the first sample's time through an empty pipeline (a run of its own);
the steady-state interval is the mean gap between sample completions over the middle half of
the run (with one sample there is no gap: the interval is then the latency); fps = batch * 1e6 /
interval, a sample being one run of the compiled model (``model.batch`` inputs). Utilisation is
a server's busy time over its active window. Beside them two bounds, in inputs per second:
the roofline, the MACs of the ops on FPGA cores (those on CPUs are not in design.json) over the
DSP peak of all the board's cores (DSPs x MACs per DSP x clock; ``fabric_roofline_fps`` uses the
whole part's DSPs), and the DRAM bound, each node's DRAM bandwidth over the bytes a sample moves
through it (weights its cores stream, transfers over it written then read, the model's inputs
and outputs).

Cost: a heap of finish and wake-up events, two per stage and sample, each re-trying only the
servers it affects; the heap holds a few events per stage, so for N samples, S stages (pieces +
transfers) and d stages per server (one for a core, a few for a shared link or CPU) the run is
O(N * S * d * log S).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fpgaplace import hw
from fpgaplace.board.model import Board
from fpgaplace.project.board import clocked_board, project_board
from fpgaplace.project.layout import DESIGN_FILE, HOST_DEVICE, MANIFEST_FILE
from fpgaplace.project.manifest import Manifest
from fpgaplace.project.record import DesignRecord, DeviceInfo, load, transfer_channel
from fpgaplace.sim.efficiency import mac_dsp_cycles
from fpgaplace.util.errors import FpgaplaceError

MAX_SAMPLES = 10**6
BUFFER_SAMPLES = 1  # samples an edge holds beyond those its producer is working on
_FINISH, _WAKE = 0, 1
_BLOCKED, _STARVED = "blocked", "starved"


@dataclass
class Edge:
    source: int  # stage index
    target: int
    capacity: int  # samples started by the source and not yet started by the target


@dataclass
class Stage:
    """A piece of the split or a transfer: what a server does to each sample."""

    name: str
    server: int
    busy_us: float  # time it occupies its server per sample (a core: its interval)
    latency_us: float  # from its start to its output being ready
    inputs: list[int] = field(default_factory=list)  # edge indices
    outputs: list[int] = field(default_factory=list)
    started: int = 0
    finished: int = 0


@dataclass
class Server:
    """A device or a link with the stages it runs."""

    name: str
    kind: str  # "fpga", "cpu" or "link"
    pipelined: bool  # a core: starts spaced by the busy time, several samples inside
    stages: list[int] = field(default_factory=list)
    running: int = 0
    next_start: float = 0.0
    busy_us: float = 0.0
    first_start: float | None = None
    last_end: float = 0.0
    idle_reason: str | None = None
    idle_since: float = 0.0
    stalls: dict[str, float] = field(default_factory=lambda: {_BLOCKED: 0.0, _STARVED: 0.0})
    wake_at: float | None = None


@dataclass
class Pipeline:
    """The stages, edges and servers of a project, with what the report needs beside them."""

    stages: list[Stage]
    edges: list[Edge]
    servers: list[Server]
    batch: int
    clock_mhz: float
    us_per_cycle: float
    macs: int  # per sample, of the ops on FPGA cores
    dsp_macs: float  # per sample, the MACs on DSP lanes at the int8 rate (``efficiency.mac_dsp_cycles``)
    cpu_ops: int
    roofline_macs_per_us: float
    fabric_macs_per_us: float
    dram: dict[str, tuple[float, float]]  # node -> (bytes per sample, GB/s)


@dataclass
class ServerReport:
    name: str
    kind: str
    per_sample_us: float
    utilisation: float
    stall_us: float
    blocked_us: float
    starved_us: float

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "per_sample_us": self.per_sample_us,
                "utilisation": self.utilisation, "stall_us": self.stall_us, "blocked_us": self.blocked_us,
                "starved_us": self.starved_us}


@dataclass(frozen=True)
class Busy:
    """One sample on one server: ``stage`` started it at ``start_us`` and held the server to
    ``end_us`` (a pipelined core takes its next sample after its interval)."""

    server: int
    stage: str
    sample: int
    start_us: float
    end_us: float


@dataclass
class SimResult:
    project: Path
    samples: int
    batch: int
    clock_mhz: float
    latency_us: float
    latency_cycles: float
    interval_us: float
    interval_cycles: float
    fps: float
    makespan_us: float
    bottleneck: str
    devices: list[ServerReport]
    macs: int
    cpu_ops: int
    roofline_fps: float | None
    fabric_roofline_fps: float | None
    dram_bound_fps: float | None
    dram_bytes: dict[str, float]

    @property
    def roofline_fraction(self) -> float | None:
        return self.fps / self.roofline_fps if self.roofline_fps else None

    @property
    def dram_fraction(self) -> float | None:
        return self.fps / self.dram_bound_fps if self.dram_bound_fps else None

    def to_json(self) -> dict:
        return {
            "project": str(self.project), "samples": self.samples, "batch": self.batch, "clock_mhz": self.clock_mhz,
            "latency_cycles": self.latency_cycles, "latency_us": self.latency_us,
            "interval_cycles": self.interval_cycles, "interval_us": self.interval_us, "fps": self.fps,
            "makespan_us": self.makespan_us, "bottleneck": self.bottleneck,
            "macs": self.macs, "cpu_ops": self.cpu_ops,
            "roofline_fps": self.roofline_fps, "roofline_fraction": self.roofline_fraction,
            "fabric_roofline_fps": self.fabric_roofline_fps,
            "dram_bound_fps": self.dram_bound_fps, "dram_fraction": self.dram_fraction,
            "dram_bytes_per_sample": self.dram_bytes,
            "devices": [d.to_json() for d in self.devices],
        }


# ---- reading the project -------------------------------------------------------------------


def load_manifest(project: Path, document: DesignRecord):
    """The folder of the split design.json names and its manifest (``fpgaplace.project.manifest``);
    a missing or damaged manifest is a one-line error naming it."""
    folder = project / Path(document.split).parent
    return folder, Manifest.load(folder)


def _piece_shares(pieces, devices: dict[str, DeviceInfo]) -> dict[str, float]:
    """A CPU's compute per sample split over its pieces by how many of its ops each holds
    (equal shares when none of its ops is named in the pieces)."""
    shares: dict[str, float] = {}
    for name, device in devices.items():
        mine = [p for p in pieces if p.device == name]
        ops = set(device.ops)
        counts = [len(ops.intersection(p.nodes)) for p in mine]
        total = sum(counts)
        for piece, count in zip(mine, counts, strict=True):
            shares[piece.name] = count / total if total else 1 / len(mine)
    return shares


def _tensor_bytes(entry: dict) -> float:
    dims = [d for d in entry.get("shape", []) if isinstance(d, int) and d > 0]
    try:
        itemsize = np.dtype(entry.get("dtype", "float32")).itemsize
    except TypeError:
        itemsize = 4
    return float(itemsize * math.prod(dims))


def build_pipeline(project: Path, buffer: int = BUFFER_SAMPLES) -> Pipeline:
    """The stages and servers of ``project`` (see the module docstring for the model); a
    design.json missing what the simulation reads is a one-line error naming the field."""
    project = Path(project)
    document = load(project)
    path = project / DESIGN_FILE
    board = clocked_board(project_board(document, path), document)
    _, manifest = load_manifest(project, document)
    return _pipeline(document, path, board, manifest, buffer)


def _pipeline(document: DesignRecord, path: Path, board: Board, manifest, buffer: int) -> Pipeline:
    board_cores = {core.name: core for core in board.cores}
    devices = {d.name: d for d in document.devices}
    cores = {c.name: c for c in document.cores}
    nodes = {name: d.node or "node0" for name, d in devices.items()}
    servers: list[Server] = []
    server_of: dict[str, int] = {}

    def server(name: str, kind: str) -> int:
        if name not in server_of:
            server_of[name] = len(servers)
            servers.append(Server(name, kind, pipelined=kind == "fpga"))
        return server_of[name]

    stages: list[Stage] = []
    piece_index: dict[str, int] = {}
    shares = _piece_shares(manifest.submodels, {n: d for n, d in devices.items() if n not in cores})
    for piece in manifest.submodels:
        where = f"{path}: piece {piece.name}"
        if piece.device in cores:
            record = cores[piece.device]
            core = board_cores.get(piece.device)
            if core is None:
                raise FpgaplaceError(f"{where}: core {piece.device!r} is not on board {board.name}")
            interval = record.interval_cycles
            busy, latency = hw.cycles_to_us(interval, core), hw.cycles_to_us(record.sample_latency_cycles, core)
            kind = "fpga"
        elif piece.device in devices:
            compute_us = devices[piece.device].compute_us
            if compute_us is None:
                raise FpgaplaceError(f"{where}: device {piece.device} has no field 'compute_us'; expected its "
                                     "compute per sample in us")
            busy = latency = compute_us * shares[piece.name]
            kind = devices[piece.device].kind or "cpu"
        else:
            raise FpgaplaceError(f"{where}: device {piece.device!r} is not among design.json's devices")
        piece_index[piece.name] = len(stages)
        stages.append(Stage(piece.name, server(piece.device, kind), busy, latency))
    transfers = {(t.tensor, t.from_submodel, t.to_submodel): t for t in document.transfers}
    edges: list[Edge] = []

    def connect(source: int, target: int) -> None:
        producer = stages[source]
        inside = math.ceil(producer.latency_us / producer.busy_us - 1e-9) if producer.busy_us > 0 else 1
        edges.append(Edge(source, target, max(1, inside) + buffer))
        producer.outputs.append(len(edges) - 1)
        stages[target].inputs.append(len(edges) - 1)

    for piece in manifest.submodels:
        for tensor, source in piece.sources.items():
            if not source:
                continue
            if source not in piece_index:
                raise FpgaplaceError(f"{path}: piece {piece.name} reads {tensor} from unknown piece {source!r}")
            transfer = transfers.get((tensor, source, piece.name))
            if transfer is None:  # handed over in the same device's memory
                connect(piece_index[source], piece_index[piece.name])
                continue
            us = transfer.us
            if us is None:
                raise FpgaplaceError(f"{path}: transfer of {tensor} from {source} has no time 'us'; expected "
                                     "a number of microseconds")
            channel = server(transfer_channel(transfer, nodes), "link")
            stages.append(Stage(f"{tensor}: {source} -> {piece.name}", channel, float(us), float(us)))
            connect(piece_index[source], len(stages) - 1)
            connect(len(stages) - 1, piece_index[piece.name])
    for transfer in document.transfers:
        if HOST_DEVICE in (transfer.from_device, transfer.to_device) and transfer.us is not None:
            _host_stage(transfer, manifest, piece_index, stages, server(transfer_channel(transfer, nodes), "link"),
                        connect)
    if not stages:
        raise FpgaplaceError(f"{path}: the split has no pieces; nothing to simulate")
    for index, stage in enumerate(stages):
        servers[stage.server].stages.append(index)
    clock = float(board.cores[0].clock_mhz if document.implementation and board.cores
                  else document.board.clock_mhz or (board.cores[0].clock_mhz if board.cores else 0))
    reference = board.cores[0] if board.cores else None
    return Pipeline(
        stages, edges, servers, batch=document.model.batch, clock_mhz=clock,
        us_per_cycle=hw.cycles_to_us(1, reference) if reference else (1 / clock if clock else 0.0),
        macs=sum(layer.macs for c in document.cores for layer in c.layers),
        dsp_macs=_dsp_macs(document, reference, path),
        cpu_ops=len(document.cpu_ops),
        roofline_macs_per_us=sum(c.dsp * c.macs_per_dsp * c.clock_mhz for c in board.cores),
        fabric_macs_per_us=(board.fabric.get("dsp", 0) * board.cores[0].macs_per_dsp * board.cores[0].clock_mhz
                            if board.cores else 0.0),
        dram=_dram_traffic(document, manifest, board, nodes),
    )


def _dsp_macs(document: DesignRecord, reference, path: Path) -> float:
    """A sample's MACs on the cores' DSP lanes at the int8 rate (``macs_per_dsp`` a DSP-cycle), what
    the DSP roofline bounds: ``efficiency.mac_dsp_cycles`` of each layer times that rate (a low-bit
    layer's MACs on LUT lanes not at all, its packed lanes' at their packing). O(layers)."""
    per_dsp = reference.macs_per_dsp if reference is not None else 1
    return per_dsp * sum(mac_dsp_cycles(layer, reference, per_dsp, 1, f"{path}: cores[{c}].layers[{i}]")
                         for c, core in enumerate(document.cores) for i, layer in enumerate(core.layers))


def _host_stage(transfer, manifest, piece_index: dict[str, int], stages: list[Stage], channel: str,
                connect) -> None:
    """A host-link transfer as a stage on ``channel``: the model input it carries feeds the pieces
    on its target device that read that input; the output it carries follows the piece writing it."""
    us = float(transfer.us)
    stages.append(Stage(f"{transfer.tensor}: {transfer.from_device} -> {transfer.to_device}", channel, us, us))
    link = len(stages) - 1
    for piece in manifest.submodels:
        if transfer.from_device == HOST_DEVICE and piece.device == transfer.to_device \
                and piece.sources.get(transfer.tensor) == "":
            connect(link, piece_index[piece.name])
        elif transfer.to_device == HOST_DEVICE and piece.device == transfer.from_device \
                and transfer.tensor in piece.outputs:
            connect(piece_index[piece.name], link)


def _dram_traffic(document: DesignRecord, manifest, board: Board,
                  nodes: dict[str, str]) -> dict[str, tuple[float, float]]:
    """Bytes per sample through each node's DRAM: weights its cores stream, transfers over it
    (written, then read), the model's inputs and outputs; with the node's DRAM bandwidth."""
    traffic = {node: 0.0 for node in board.nodes}

    def add(device: str, nbytes: float, where: str) -> None:
        node = nodes.get(device, board.nodes[0])
        if node not in traffic:
            raise FpgaplaceError(f"{where}: node {node!r} of {device} is not on board {board.name}")
        traffic[node] += nbytes

    for core in document.cores:
        add(core.name, float(core.streamed_weight_bytes), f"{DESIGN_FILE}: cores.{core.name}")
    for transfer in document.transfers:
        if transfer.link == "dram" and transfer.bytes is not None:
            for device in (transfer.from_device, transfer.to_device):
                add(device, float(transfer.bytes), f"{DESIGN_FILE}: transfer of {transfer.tensor}")
    device_of = {p.name: p.device for p in manifest.submodels}
    for entry in manifest.graph_inputs + manifest.graph_outputs:
        for piece in manifest.submodels:
            if entry["name"] in piece.outputs or piece.sources.get(entry["name"]) == "":
                add(device_of[piece.name], _tensor_bytes(entry), f"{MANIFEST_FILE}: {entry['name']}")
                break
    return {node: (nbytes, board.node_board(node).dram.gbps) for node, nbytes in traffic.items()}


# ---- the event loop ------------------------------------------------------------------------


class _Run:
    """One simulation of ``samples`` samples over a fresh copy of the pipeline's state."""

    def __init__(self, pipeline: Pipeline, samples: int) -> None:
        self.trace: list[Busy] | None = None  # every start, when asked for (``trace_schedule``)
        self.stages = [Stage(s.name, s.server, s.busy_us, s.latency_us, s.inputs, s.outputs) for s in pipeline.stages]
        self.servers = [Server(s.name, s.kind, s.pipelined, s.stages) for s in pipeline.servers]
        edges, stages = pipeline.edges, self.stages
        self.sources = [[stages[edges[e].source] for e in s.inputs] for s in stages]  # what a stage reads
        self.targets = [[(stages[edges[e].target], edges[e].capacity) for e in s.outputs] for s in stages]
        self.upstream = [list(dict.fromkeys(stages[edges[e].source].server for e in s.inputs)) for s in stages]
        self.downstream = [list(dict.fromkeys([s.server, *(stages[edges[e].target].server for e in s.outputs)]))
                           for s in stages]
        self.members = [[(i, stages[i]) for i in server.stages] for server in self.servers]
        self.samples = samples
        self.now = 0.0
        self.events: list[tuple[float, int, int, int]] = []
        self.sequence = 0
        self.done = [0.0] * samples

    def push(self, time: float, kind: int, index: int) -> None:
        self.sequence += 1
        heapq.heappush(self.events, (time, self.sequence, kind, index))

    def idle(self, server: Server, reason: str | None) -> None:
        """Close the server's current idle segment and open one for ``reason`` (None: busy or done)."""
        if server.idle_reason is not None:
            server.stalls[server.idle_reason] += self.now - server.idle_since
        server.idle_reason = reason if server.first_start is not None else None
        server.idle_since = self.now

    def choose(self, index: int) -> tuple[int | None, str | None]:
        """The stage the server starts next (lowest sample, then pipeline order), else why none:
        blocked (a stage has its inputs but no room downstream), starved, or None when done."""
        best, best_sample, waiting, ready = None, self.samples, False, False
        for stage_index, stage in self.members[index]:  # loops written out: this is the hot path
            sample = stage.started
            if sample >= self.samples:
                continue
            waiting = True
            for source in self.sources[stage_index]:
                if source.finished <= sample:
                    break
            else:
                ready = True
                if sample < best_sample:
                    for target, capacity in self.targets[stage_index]:
                        if sample - target.started >= capacity:
                            break
                    else:
                        best, best_sample = stage_index, sample
        if best is not None or not waiting:
            return best, None
        return None, _BLOCKED if ready else _STARVED

    def attempt(self, index: int) -> list[int]:
        """Start what the server can start now; the servers whose state that changed."""
        server = self.servers[index]
        touched: list[int] = []
        while True:
            if server.pipelined and self.now < server.next_start:
                if server.wake_at != server.next_start:
                    server.wake_at = server.next_start
                    self.push(server.next_start, _WAKE, index)
                return touched
            if not server.pipelined and server.running:
                return touched
            stage_index, reason = self.choose(index)
            if stage_index is None:
                if server.idle_reason != reason:
                    self.idle(server, reason)
                return touched
            touched += self.start(server, stage_index)

    def start(self, server: Server, index: int) -> list[int]:
        stage = self.stages[index]
        if self.trace is not None:
            self.trace.append(Busy(stage.server, stage.name, stage.started, self.now, self.now + stage.busy_us))
        self.idle(server, None)
        if server.first_start is None:
            server.first_start = self.now
        stage.started += 1
        server.running += 1
        server.busy_us += stage.busy_us
        server.next_start = self.now + stage.busy_us
        server.last_end = max(server.last_end, self.now + (stage.busy_us if server.pipelined else stage.latency_us))
        self.push(self.now + stage.latency_us, _FINISH, index)
        return self.upstream[index]

    def finish(self, index: int) -> list[int]:
        stage = self.stages[index]
        sample = stage.finished
        stage.finished += 1
        self.servers[stage.server].running -= 1
        if not stage.outputs:
            self.done[sample] = max(self.done[sample], self.now)
        return self.downstream[index]

    def run(self) -> _Run:
        work = list(range(len(self.servers)))
        while True:
            while work:
                work.extend(self.attempt(work.pop()))
            if not self.events:
                break
            self.now, _, kind, index = heapq.heappop(self.events)
            if kind == _FINISH:
                work = list(self.finish(index))
            else:
                self.servers[index].wake_at = None
                work = [index]
        if any(s.finished < self.samples for s in self.stages):
            stuck = next(s.name for s in self.stages if s.finished < self.samples)
            raise FpgaplaceError(f"simulation stalled at {stuck} after {self.now:.6g} us (a deadlock in the pipeline)")
        return self


# ---- results -------------------------------------------------------------------------------


MAX_PERIOD = 64  # longest repeating pattern of completion gaps looked for (samples)


def _steady_interval(done: list[float]) -> float | None:
    """The mean gap between completions over the middle half of the run, clear of the start
    (the pipeline filling) and of the end (the last samples drain); None for one sample. A
    steady schedule repeats with some period of p samples (a link shared by two transfers of a
    sample can alternate long and short gaps): when the gaps repeat with a period p at most
    ``MAX_PERIOD``, the window is a whole number of periods, so the mean is the steady interval
    itself, not off by part of a period. O(samples * MAX_PERIOD)."""
    count = len(done)
    if count < 2:
        return None
    first = min(count // 4, count - 2)
    last = max(first + 1, count - 1 - count // 4)
    gaps = np.diff(np.asarray(done[first:last + 1], dtype=np.float64))
    for period in range(1, min(MAX_PERIOD, len(gaps) // 2) + 1):
        if np.allclose(gaps[period:], gaps[:-period], rtol=1e-9, atol=1e-12):
            last = first + len(gaps) // period * period
            break
    return (done[last] - done[first]) / (last - first)


def _report(run: _Run) -> list[ServerReport]:
    reports = []
    for server in run.servers:
        window = server.last_end - (server.first_start or 0.0)
        per_sample = sum(run.stages[s].busy_us for s in server.stages)
        blocked, starved = server.stalls[_BLOCKED], server.stalls[_STARVED]
        reports.append(ServerReport(server.name, server.kind, per_sample,
                                    min(1.0, server.busy_us / window) if window > 0 else 0.0,
                                    blocked + starved, blocked, starved))
    return reports


def _bottleneck(reports: list[ServerReport]) -> str:
    """The busiest server: highest utilisation, then most time per sample."""
    return max(reports, key=lambda r: (round(r.utilisation, 9), r.per_sample_us)).name


def trace_schedule(project: Path, samples: int, buffer: int = BUFFER_SAMPLES) -> tuple[list[tuple[str, str]],
                                                                                       list[Busy]]:
    """The servers (name, kind) of the project's pipeline and every start of a run of ``samples``
    samples, in the order the simulation made them (the schedule a Gantt chart draws)."""
    pipeline = build_pipeline(Path(project), buffer)
    run = _Run(pipeline, samples)
    run.trace = []
    run.run()
    return [(server.name, server.kind) for server in pipeline.servers], run.trace


def simulate(project: Path, samples: int = 256, buffer: int = BUFFER_SAMPLES) -> SimResult:
    """Stream ``samples`` samples through the project's pipeline (see the module docstring)."""
    if not isinstance(samples, int) or not 1 <= samples <= MAX_SAMPLES:
        raise FpgaplaceError(f"samples: expected 1 to {MAX_SAMPLES}, got {samples}")
    if not isinstance(buffer, int) or buffer < 0:
        raise FpgaplaceError(f"buffer: expected a number of samples >= 0, got {buffer}")
    project = Path(project)
    if not project.is_dir():
        raise FpgaplaceError(f"{project}: not a folder; expected a project written by `fpgaplace compile`")
    pipeline = build_pipeline(project, buffer)
    latency = _Run(pipeline, 1).run().done[0]
    run = _Run(pipeline, samples).run()
    steady = _steady_interval(run.done)
    interval = latency if steady is None else steady
    reports = _report(run)
    batch = pipeline.batch
    fps = batch * 1e6 / interval if interval > 0 else math.inf

    def bound(macs_per_us: float) -> float | None:  # inputs per second at that many DSP MACs per us
        return 1e6 * macs_per_us / pipeline.dsp_macs if pipeline.dsp_macs and macs_per_us else None

    worst_dram = max((nbytes / (gbps * 1e3) for nbytes, gbps in pipeline.dram.values() if nbytes), default=0.0)
    return SimResult(
        project=project, samples=samples, batch=batch, clock_mhz=pipeline.clock_mhz,
        latency_us=latency, latency_cycles=latency / pipeline.us_per_cycle if pipeline.us_per_cycle else 0.0,
        interval_us=interval,
        interval_cycles=interval / pipeline.us_per_cycle if pipeline.us_per_cycle else 0.0,
        fps=fps, makespan_us=run.now, bottleneck=_bottleneck(reports), devices=reports,
        macs=pipeline.macs * batch, cpu_ops=pipeline.cpu_ops,
        roofline_fps=bound(pipeline.roofline_macs_per_us), fabric_roofline_fps=bound(pipeline.fabric_macs_per_us),
        dram_bound_fps=batch * 1e6 / worst_dram if worst_dram else None,
        dram_bytes={node: nbytes for node, (nbytes, _) in pipeline.dram.items()},
    )
