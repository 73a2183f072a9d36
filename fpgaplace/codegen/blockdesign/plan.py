"""Project build scripts from design.json: a Vivado block design (Zynq) or a Vitis link config
(Alveo) per node, and the project's Makefile.

What goes where is planned here (``plan_node``) and written by the templates in
``hls_templates/project`` (``vivado/``, ``vitis/``, ``Makefile.j2``):

- a tensor between two cores of one node runs through an AXI-Stream FIFO (Zynq) or a Vitis
  stream connection (Alveo), its depth from the cycle model (``fifo_depth``);
- a stream that enters or leaves the fabric (from or to a CPU, the host, another node, or the
  model's own input or output) gets a DMA: an AXI DMA on Zynq, a data-mover kernel reading or
  writing card memory on Alveo, named ``dma_instance(core, port)`` on both;
- an output read by more than one of those gets an AXI-Stream broadcaster (Zynq) or a fork
  kernel (Alveo) in front;
- on Zynq, a stream into an AXI DMA's S2MM channel passes a small HLS IP (``fp_last_<n>x<b>``,
  one per sample of n beats of b bytes, in ``vivado/ip``) that marks the last beat of every
  sample with TLAST: the cores' streams carry data only, and the DMA ends a transfer on TLAST;
- streams carry a port's ``beat`` elements per beat (design.json; one when absent): where two
  sides differ an axis_dwidth_converter (Zynq) or an ``fp_regroup`` kernel (Alveo) joins them,
  and an AXI DMA runs at the port's width when AXI DMA allows it (a power of two), else bytes;
- a core with streamed weights (an ``m_axi`` port) reads the PS DDR (Zynq) or an HBM/DDR bank
  (Alveo, ``sp=``).

Planning a node is O(cores' ports + transfers). Cell names come from ``fpgaplace.project.layout``;
what is planned is read from the typed record (``fpgaplace.project.record``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from fpgaplace.board.model import VitisPlatform, VivadoBoard
from fpgaplace.project.board import is_alveo, project_board
from fpgaplace.project.layout import (
    cell_name,
    core_ip_instance,
    dma_instance,
    fifo_instance,
)
from fpgaplace.project.record import BoundaryTensor, Core, DesignRecord, TransferInfo
from fpgaplace.util.errors import FpgaplaceError

FIFO_MIN_DEPTH = 16  # the depths Vivado's axis_data_fifo allows: powers of two in 16..32768


FIFO_MAX_DEPTH = 32768


DMA_MAX_STREAM_BYTES = 128  # AXI DMA stream widths: 8..1024 bits, powers of two


@dataclass(frozen=True)
class Endpoint:
    """An AXI-Stream port of a core's IP (``port`` is the HLS argument name)."""

    core: str
    port: str

    @property
    def cell(self) -> str:
        return core_ip_instance(self.core)


@dataclass
class Fifo:
    name: str
    producer: Endpoint
    consumer: Endpoint
    tensor: str
    depth: int  # in the producer's beats
    producer_bytes: int = 1  # bytes per beat on each side; a width converter joins them when they differ
    consumer_bytes: int = 1

    @property
    def converter(self) -> str:
        """The width converter after the FIFO ("" when both sides have one beat)."""
        return cell_name(f"width_{self.name}") if self.producer_bytes != self.consumer_bytes else ""


@dataclass
class Dma:
    """A stream entering (``to_fabric``: memory -> core input) or leaving the fabric."""

    name: str
    endpoint: Endpoint
    tensor: str
    to_fabric: bool
    bytes_per_sample: int
    stream_bytes: int = 1  # bytes per beat of the core's port

    @property
    def beats_per_sample(self) -> int:
        return math.ceil(self.bytes_per_sample / self.stream_bytes)

    @property
    def dma_bytes(self) -> int:
        """The DMA's stream width: the port's beat when AXI DMA takes it (a power of two up to
        128 bytes), else single bytes through a width converter."""
        beat = self.stream_bytes
        return beat if beat & (beat - 1) == 0 and beat <= DMA_MAX_STREAM_BYTES else 1

    @property
    def converter(self) -> str:
        """The width converter between the DMA and the core ("" when the widths agree)."""
        return cell_name(f"width_{self.name}") if self.dma_bytes != self.stream_bytes else ""

    @property
    def last_top(self) -> str:
        """The TLAST marker IP in front of an S2MM channel (Zynq), one per sample size and beat."""
        return f"fp_last_{self.beats_per_sample}x{self.stream_bytes}"

    @property
    def last_cell(self) -> str:
        return cell_name(f"last_{self.name}")


@dataclass
class Fanout:
    """An output port read by several sinks (FIFOs and at most one DMA) through a broadcaster."""

    name: str
    source: Endpoint
    sinks: list[str]  # the cells it feeds, in order: fifo names, then the DMA
    stream_bytes: int = 1


@dataclass
class CorePlan:
    name: str
    cell: str
    top: str
    folder: str
    slr: int
    weights_port: str  # the m_axi argument ("wmem") or "" when every weight is on chip


@dataclass
class NodePlan:
    node: str
    board: str
    part: str
    alveo: bool
    clock_mhz: float
    cores: list[CorePlan]
    fifos: list[Fifo] = field(default_factory=list)
    dmas: list[Dma] = field(default_factory=list)
    fanouts: list[Fanout] = field(default_factory=list)
    single: bool = True  # the only node with cores (no per-node folders)
    vivado: VivadoBoard | None = None  # the board's facts for the vendor tools (from its board file)
    vitis: VitisPlatform | None = None

    @property
    def folder(self) -> str:
        """Where the node's scripts live (one folder per node on clusters)."""
        return "" if self.single else cell_name(self.node)

    @property
    def last_tops(self) -> list[str]:
        """The TLAST marker IPs the node's S2MM channels need (Zynq), sorted."""
        return sorted({d.last_top for d in self.dmas if not d.to_fabric})


def next_power_of_two(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1, n))))


def fifo_depth(beats: int, producer_cycles: int, consumer_cycles: int) -> int:
    """Depth of the FIFO carrying one sample of ``beats`` beats from a producer that emits
    them in ``producer_cycles`` to a consumer that reads them in ``consumer_cycles``.

    When the producer is faster it runs ahead by ``beats * (1 - producer / consumer)``
    beats by the end of the sample (the backlog of two constant-rate streams); the FIFO holds
    that backlog so the producer never stalls within a sample, rounded up to a power of two and
    kept within Vivado's axis_data_fifo depths 16..32768 (beyond that the producer stalls, which
    costs nothing: the slower consumer sets the pace). A faster consumer needs the minimum. O(1).
    """
    producer, consumer = max(1, producer_cycles), max(1, consumer_cycles)
    backlog = math.ceil(beats * max(0.0, 1.0 - producer / consumer))
    return min(FIFO_MAX_DEPTH, max(FIFO_MIN_DEPTH, next_power_of_two(backlog)))


def _port_of(core: Core, direction: str, tensor: str) -> BoundaryTensor | None:
    """The port of ``core`` (``inputs``/``outputs``) carrying ``tensor`` or one of its views; an
    input port also carries the float tensor the core quantizes on arrival (``quantized_from``)."""
    def carries(port: BoundaryTensor) -> bool:
        return tensor in port.names or (direction == "inputs" and port.quantized_from == tensor)

    return next((t for t in getattr(core, direction) if carries(t)), None)


def _elements(tensor: BoundaryTensor) -> int:
    return math.prod(tensor.sample_shape)


def _producing_cycles(core: Core, tensor: BoundaryTensor) -> int:
    """Cycles of the layer that writes ``tensor`` (the core's interval when no layer does)."""
    source = core.aliases.get(tensor.name, tensor.name)
    return next((layer.cycles for layer in core.layers if layer.output == source), core.interval_cycles)


def _consuming_cycles(core: Core, tensor: BoundaryTensor) -> int:
    """Cycles of the slowest layer reading ``tensor`` (the core's interval when none does)."""
    cycles = [layer.cycles for layer in core.layers if tensor.name in layer.inputs]
    return max(cycles, default=core.interval_cycles)


def _graph_outputs(folder: Path, document: DesignRecord) -> set[str]:
    manifest = folder / document.split
    if not manifest.is_file():
        return set()
    return {output["name"] for output in json.loads(manifest.read_text()).get("graph_outputs", [])}


@dataclass
class _Wiring:
    """What the transfers of one node connect, while it is planned."""

    fed: set[Endpoint] = field(default_factory=set)  # core inputs with a source
    sinks: dict[Endpoint, list[str]] = field(default_factory=dict)  # core outputs -> cells they feed
    leaving: set[Endpoint] = field(default_factory=set)  # core outputs read off the fabric
    pairs: dict[tuple[str, str], int] = field(default_factory=dict)  # FIFOs per (producer, consumer)


def plan_node(document: DesignRecord, node: str, graph_outputs: set[str], alveo: bool) -> NodePlan:
    """FIFOs, DMAs and broadcasters of one node's block design (see the module docstring)."""
    cores = {c.name: c for c in document.cores if c.node == node}
    first = next(iter(cores.values()))
    name, vivado, vitis = _node_board(document, node)
    plan = NodePlan(node, name, first.part, alveo, first.clock_mhz,
                    [CorePlan(c.name, core_ip_instance(c.name), c.top, c.folder, c.slr,
                              "wmem" if c.streamed_weight_bytes > 0 else "") for c in cores.values()],
                    single=len({c.node for c in document.cores}) <= 1, vivado=vivado, vitis=vitis)
    wiring = _Wiring()
    for transfer in document.transfers:
        _wire_transfer(plan, cores, transfer, wiring)
    for core in cores.values():
        for tensor in core.inputs:
            endpoint = Endpoint(core.name, tensor.port)
            if endpoint not in wiring.fed:  # a model input
                _add_dma(plan, endpoint, tensor, to_fabric=True)
        for tensor in core.outputs:
            endpoint = Endpoint(core.name, tensor.port)
            read_off = endpoint in wiring.leaving or bool(tensor.names & graph_outputs)
            if read_off or endpoint not in wiring.sinks:  # to a CPU, another node, or the model's output
                wiring.sinks.setdefault(endpoint, []).append(_add_dma(plan, endpoint, tensor, to_fabric=False).name)
    beats = {Endpoint(c.name, t.port): t.beat for c in cores.values() for t in c.outputs}
    plan.fanouts = [Fanout(cell_name(f"bcast_{e.core}_{e.port}"), e, cells, beats[e])
                    for e, cells in wiring.sinks.items() if len(cells) > 1]
    return plan


def _wire_transfer(plan: NodePlan, cores: dict[str, Core], transfer: TransferInfo, wiring: _Wiring) -> None:
    """A FIFO for a tensor between two of the node's cores; a DMA into a core for one from elsewhere;
    a core output read elsewhere is marked for its DMA."""
    source, target, tensor = transfer.from_device, transfer.to_device, transfer.tensor
    out_port = _port_of(cores[source], "outputs", tensor) if source in cores else None
    in_port = _port_of(cores[target], "inputs", tensor) if target in cores else None
    for device, port, kind in ((source, out_port, "output"), (target, in_port, "input")):
        if device in cores and port is None:
            raise FpgaplaceError(f"design.json: transfer of {tensor} names {device}, which has no {kind} "
                                 "port carrying it; expected the tensor or one of its views")
    consumer = Endpoint(target, in_port.port) if in_port is not None else None
    if consumer is not None and consumer in wiring.fed:
        return  # listed twice
    if out_port is None and in_port is not None:
        _add_dma(plan, consumer, in_port, to_fabric=True)
        wiring.fed.add(consumer)
        return
    if out_port is None:
        return  # between CPUs
    producer = Endpoint(source, out_port.port)
    if in_port is None:
        wiring.leaving.add(producer)
        return
    index = wiring.pairs.get((source, target), 0)
    wiring.pairs[(source, target)] = index + 1
    depth = fifo_depth(math.ceil(_elements(out_port) / out_port.beat), _producing_cycles(cores[source], out_port),
                       _consuming_cycles(cores[target], in_port))
    fifo = Fifo(fifo_instance(source, target, index), producer, consumer, out_port.name, depth,
                out_port.beat, in_port.beat)
    plan.fifos.append(fifo)
    wiring.sinks.setdefault(producer, []).append(fifo.name)
    wiring.fed.add(consumer)


def _add_dma(plan: NodePlan, endpoint: Endpoint, tensor: BoundaryTensor, to_fabric: bool) -> Dma:
    dma = Dma(dma_instance(endpoint.core, endpoint.port), endpoint, tensor.name, to_fabric, _elements(tensor),
              tensor.beat)
    plan.dmas.append(dma)
    return dma


def _node_board(document: DesignRecord, node: str) -> tuple[str, VivadoBoard | None, VitisPlatform | None]:
    """The node's board name and its vendor tool facts (none when the board no longer loads)."""
    try:
        board = project_board(document).node_board(node)
    except FpgaplaceError:
        return document.board.name, None, None
    return board.name, board.vivado, board.vitis


def plan_nodes(document: DesignRecord, folder: Path) -> list[NodePlan]:
    """One plan per node that has FPGA cores, in node order."""
    alveo = is_alveo(document)
    outputs = _graph_outputs(folder, document)
    nodes = list(dict.fromkeys(c.node for c in document.cores))
    return [plan_node(document, node, outputs, alveo) for node in nodes]
