"""A node's Vivado block design (Zynq): the template context of ``vivado/create_project.tcl``
(the processing system, one AXI DMA per stream entering or leaving the fabric, AXI-Stream FIFOs,
broadcasters and width converters, interconnects of at most ``MEMORY_PORTS_PER_INTERCONNECT``
masters over the PS's HP ports), the TLAST marker IPs and the limits a block design must keep.
"""

from __future__ import annotations

from fpgaplace.codegen.blockdesign.plan import NodePlan
from fpgaplace.util.errors import FpgaplaceError

CONTROL_MAX_PORTS = 64  # AXI-Lite slaves on one axi_interconnect


MEMORY_PORTS_PER_INTERCONNECT = 16  # AXI masters on one axi_interconnect, one per PS HP port


PS_HP_PORTS = 4


DMA_LENGTH_BITS = 26  # AXI DMA buffer length register width: up to 64 MiB per transfer


def _block_design_limits(plan: NodePlan, memory_masters: int, control: int) -> list[str]:
    """What keeps the node's block design from being built (said by the script when it runs, so
    that compile, csim and sim still work): more memory or AXI-Lite ports than the interconnects
    take, or a sample longer than an AXI DMA moves."""
    problems = []
    if memory_masters > MEMORY_PORTS_PER_INTERCONNECT * PS_HP_PORTS:
        problems.append(FpgaplaceError(
            f"node {plan.node}: {memory_masters} DMA and weight ports; a block design takes at most "
            f"{MEMORY_PORTS_PER_INTERCONNECT * PS_HP_PORTS} (place fewer streams off the fabric)"))
    if control > CONTROL_MAX_PORTS:
        problems.append(FpgaplaceError(
            f"node {plan.node}: {control} AXI-Lite ports; expected at most {CONTROL_MAX_PORTS}"))
    problems += [FpgaplaceError(f"{d.endpoint.core}: {d.tensor} has {d.bytes_per_sample} bytes per sample; an AXI "
                                f"DMA moves less than 2**{DMA_LENGTH_BITS}")
                 for d in plan.dmas if d.bytes_per_sample >= 1 << DMA_LENGTH_BITS]
    return [str(problem) for problem in problems]


def vivado_context(plan: NodePlan, files: list[str]) -> dict:
    ps7 = plan.part.startswith("xc7z")
    memory_masters = [(d.name, "M_AXI_MM2S" if d.to_fabric else "M_AXI_S2MM") for d in plan.dmas]
    memory_masters += [(c.cell, "m_axi_gmem") for c in plan.cores if c.weights_port]
    control = [c.cell for c in plan.cores] + [d.name for d in plan.dmas]
    groups = [memory_masters[i:i + MEMORY_PORTS_PER_INTERCONNECT]
              for i in range(0, len(memory_masters), MEMORY_PORTS_PER_INTERCONNECT)][:PS_HP_PORTS]
    bit, hwh = files  # the node's bitstream and hardware handoff (project.layout.bitstream_files)
    vivado = plan.vivado
    carrier = (vivado.carrier, vivado.connector) if vivado and vivado.carrier else None
    return {"plan": plan, "ps7": ps7, "board_part": vivado.board_part if vivado else "", "carrier": carrier,
            "control": control, "length_bits": DMA_LENGTH_BITS,
            "memory_groups": groups, "root": "../.." if plan.folder else "..", "bit": bit, "hwh": hwh,
            "sink_pins": _sink_pins(plan),
            "problems": _block_design_limits(plan, len(memory_masters), len(control))}


def _sink_pins(plan: NodePlan) -> dict[str, str]:
    """The stream pin each FIFO or DMA is fed from: a core port, or a broadcaster's master."""
    pins: dict[str, str] = {}
    for fanout in plan.fanouts:
        for i, cell in enumerate(fanout.sinks):
            pins[cell] = f"{fanout.name}/M{i:02d}_AXIS"
    for fifo in plan.fifos:
        pins.setdefault(fifo.name, f"{fifo.producer.cell}/{fifo.producer.port}")
    for dma in plan.dmas:
        if not dma.to_fabric:
            pins.setdefault(dma.name, f"{dma.endpoint.cell}/{dma.endpoint.port}")
    return pins
