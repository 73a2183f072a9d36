"""A node's Vitis link (Alveo): the template context of ``vitis/link.cfg`` and the helper kernels
(``nk`` units, ``sc`` stream connections, ``slr`` placement, ``sp`` memory banks: HBM pseudo-channels
in turn, or the DDR bank of the port's SLR, from the board file's ``vitis`` section).
"""

from __future__ import annotations

from dataclasses import dataclass

from fpgaplace.board.model import VitisPlatform
from fpgaplace.codegen.blockdesign.plan import NodePlan
from fpgaplace.project.layout import (
    core_ip_instance,
)


@dataclass(frozen=True)
class VitisKernel:
    """A helper kernel of the link (``movers.cpp``): a data mover, a fork or a width regrouper."""

    kind: str  # "mm2s", "s2mm", "fork", "regroup"
    width: int  # bytes per beat (a regroup's input)
    outputs: int = 1  # a fork's outputs
    out_width: int = 0  # a regroup's output beat

    @property
    def name(self) -> str:
        if self.kind == "fork":
            return f"fp_fork{self.outputs}_{self.width}"
        if self.kind == "regroup":
            return f"fp_regroup_{self.width}_{self.out_width}"
        return f"fp_{self.kind}_{self.width}"


def _vitis_units(plan: NodePlan) -> dict[VitisKernel, list[str]]:
    """Compute units of the helper kernels, by kernel: a mover per DMA, a fork per fan-out, a
    regrouper per FIFO whose sides differ in width."""
    units: dict[VitisKernel, list[str]] = {}
    for dma in plan.dmas:
        units.setdefault(VitisKernel("mm2s" if dma.to_fabric else "s2mm", dma.stream_bytes), []).append(dma.name)
    for fanout in plan.fanouts:
        units.setdefault(VitisKernel("fork", fanout.stream_bytes, len(fanout.sinks)), []).append(fanout.name)
    for fifo in plan.fifos:
        if fifo.converter:
            kernel = VitisKernel("regroup", fifo.producer_bytes, out_width=fifo.consumer_bytes)
            units.setdefault(kernel, []).append(fifo.converter)
    return dict(sorted(units.items(), key=lambda item: item[0].name))


def _vitis_streams(plan: NodePlan) -> list[tuple[str, str, int]]:
    """``sc=`` connections as (producer.port, consumer.port, depth; 0 for Vitis's default)."""
    feeds: dict[str, str] = {}  # sink cell -> the stream it reads
    streams = []
    for fanout in plan.fanouts:
        streams.append((f"{fanout.source.cell}.{fanout.source.port}", f"{fanout.name}.src", 0))
        feeds.update({cell: f"{fanout.name}.dst{i}" for i, cell in enumerate(fanout.sinks)})
    for fifo in plan.fifos:
        source = feeds.get(fifo.name, f"{fifo.producer.cell}.{fifo.producer.port}")
        consumer = f"{fifo.consumer.cell}.{fifo.consumer.port}"
        if fifo.converter:
            streams += [(source, f"{fifo.converter}.src", fifo.depth), (f"{fifo.converter}.dst", consumer, 0)]
        else:
            streams.append((source, consumer, fifo.depth))
    for dma in plan.dmas:
        core = f"{dma.endpoint.cell}.{dma.endpoint.port}"
        if dma.to_fabric:
            streams.append((f"{dma.name}.dst", core, 0))
        else:
            streams.append((feeds.get(dma.name, core), f"{dma.name}.src", 0))
    return streams


def vitis_context(plan: NodePlan, files: list[str]) -> dict:
    vitis = plan.vitis
    platform = vitis.platform if vitis is not None else ""  # another card: `make xclbin PLATFORM=...`
    slr = {c.cell: c.slr for c in plan.cores}
    slr.update({d.name: slr[core_ip_instance(d.endpoint.core)] for d in plan.dmas})
    slr.update({f.name: slr[f.source.cell] for f in plan.fanouts})
    slr.update({f.converter: slr[f.consumer.cell] for f in plan.fifos if f.converter})
    memory_ports = [(d.name, "mem") for d in plan.dmas] + [(c.cell, c.weights_port) for c in plan.cores
                                                           if c.weights_port]
    banks = {f"{cell}.{arg}": memory_bank(vitis, i, slr[cell]) for i, (cell, arg) in enumerate(memory_ports)}
    return {"plan": plan, "platform": platform, "banks": banks, "slr": slr, "xclbin": files[0],
            "units": _vitis_units(plan), "streams": _vitis_streams(plan)}


def memory_bank(vitis: VitisPlatform | None, index: int, slr: int) -> tuple[str, int]:
    """The ``sp=`` bank (kind, number) of the ``index``-th memory port, used from ``slr``: HBM
    pseudo-channels in turn (all HBM sits below SLR0); on DDR cards the bank attached to the
    port's SLR (one DDR bank when the board file names none)."""
    kind, count = (vitis.memory, vitis.banks) if vitis is not None else ("DDR", 1)
    return kind, index % count if kind == "HBM" else slr % count
