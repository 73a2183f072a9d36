"""A minimal Vivado hardware hand-off (HWH) of a project's block design, for the stand-in board.

The block design is the one the project's build scripts create: ``codegen.blockdesign.plan.plan_nodes``
plans it from ``design.json`` (the cell names of ``fpgaplace.project.layout``), and this writes
its HWH: the processing system (``zynq_ultra_ps_e`` on a Zynq UltraScale+ part,
``processing_system7`` on a Zynq-7000), each core's HLS IP with its AXI-Lite control register
map (``CTRL`` at 0x0, the weight pointer ``wmem_1``/``wmem_2`` at 0x10/0x14 when its weights are
streamed, where Vitis HLS puts the first argument), one ``xilinx.com:ip:axi_dma:7.1`` per stream
entering or leaving the fabric (simple mode, 26-bit length, 32-bit memory side, one channel),
the AXI-Stream FIFOs between cores and the broadcasters in front of an output read by several.
The TLAST markers and width converters of the block design pass every byte through unchanged
and are left out. Ends of one stream share a ``BUSNAME``, as in Vivado's own HWH, which is how
the stand-in device wires the simulated cores.

Only the elements pynq's HWH front end (``pynqmetadata``) reads are written; each bus
interface maps its logical signals to physical ports of its module so the parser can resolve
them. O(cores + ports) elements.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree as ET

from fpgaplace.codegen.blockdesign.plan import plan_nodes
from fpgaplace.project.layout import BITSTREAM_DIR, BITSTREAM_STEM
from fpgaplace.project.record import DesignRecord, load

AXIMM = "xilinx.com:interface:aximm:1.0"
AXIS = "xilinx.com:interface:axis:1.0"
DMA_VLNV = "xilinx.com:ip:axi_dma:7.1"
FIFO_VLNV = "xilinx.com:ip:axis_data_fifo:2.0"
BROADCASTER_VLNV = "xilinx.com:ip:axis_broadcaster:1.1"
REGISTER_SPAN = 0x10000
DMA_PARAMETERS = {"C_INCLUDE_SG": "0", "C_SG_LENGTH_WIDTH": "26", "C_M_AXI_MM2S_DATA_WIDTH": "32",
                  "C_M_AXI_S2MM_DATA_WIDTH": "32", "C_M_AXIS_MM2S_TDATA_WIDTH": "8", "C_S_AXIS_S2MM_TDATA_WIDTH": "8",
                  "C_INCLUDE_MM2S_DRE": "0", "C_INCLUDE_S2MM_DRE": "0", "C_MICRO_DMA": "0",
                  "C_MM2S_BURST_SIZE": "16", "C_S2MM_BURST_SIZE": "16"}
AXI_LITE_SIGNALS = ["AWADDR", "AWVALID", "AWREADY", "WDATA", "WVALID", "WREADY", "BRESP", "BVALID", "BREADY",
                    "ARADDR", "ARVALID", "ARREADY", "RDATA", "RRESP", "RVALID", "RREADY"]
STREAM_SIGNALS = ["TDATA", "TVALID", "TREADY", "TLAST"]


@dataclass(frozen=True)
class Processor:
    modtype: str
    vlnv: str
    instance: str
    master: str  # the general-purpose AXI master the PL registers hang on
    slave: str  # the high-performance port the DMAs read and write DRAM through
    register_base: int
    arch: str


ZYNQ_US = Processor("zynq_ultra_ps_e", "xilinx.com:ip:zynq_ultra_ps_e:3.3", "zynq_ultra_ps_e_0", "M_AXI_HPM0_FPD",
                    "S_AXI_HP0_FPD", 0xA000_0000, "zynquplus")
ZYNQ_7000 = Processor("processing_system7", "xilinx.com:ip:processing_system7:5.5", "processing_system7_0",
                      "M_AXI_GP0", "S_AXI_HP0", 0x4000_0000, "zynq")


class _Writer:
    """Builds the HWH element tree module by module."""

    def __init__(self, processor: Processor, part: str, clock_mhz: float) -> None:
        self.processor = processor
        self.clock_mhz = clock_mhz
        self.root = ET.Element("EDKSYSTEM", EDWVERSION="1.2", TIMESTAMP="fpgaplace stand-in", VIVADOVERSION="2023.2")
        ET.SubElement(self.root, "SYSTEMINFO", ARCH=processor.arch, DEVICE=part, NAME="design", PACKAGE="",
                      SPEEDGRADE="")
        ET.SubElement(self.root, "EXTERNALPORTS")
        ET.SubElement(self.root, "EXTERNALINTERFACES")
        self.modules = ET.SubElement(self.root, "MODULES")
        self.next_address = processor.register_base
        self.ps_ranges: list[dict] = []

    def module(self, instance: str, vlnv: str, modtype: str, parameters: dict[str, str]) -> ET.Element:
        module = ET.SubElement(self.modules, "MODULE", FULLNAME=f"/{instance}", INSTANCE=instance, IPTYPE="PERIPHERAL",
                               IS_ENABLE="1", MODCLASS="PERIPHERAL", MODTYPE=modtype, VLNV=vlnv,
                               HWVERSION=vlnv.rsplit(":", 1)[1])
        params = ET.SubElement(module, "PARAMETERS")
        for name, value in parameters.items():
            ET.SubElement(params, "PARAMETER", NAME=name, VALUE=value)
        ET.SubElement(module, "PORTS")
        ET.SubElement(module, "BUSINTERFACES")
        return module

    def bus(self, module: ET.Element, name: str, kind: str, vlnv: str, busname: str, signals: list[str]) -> None:
        """A bus interface and the physical ports its logical signals map to."""
        ports = module.find("PORTS")
        interface = ET.SubElement(module.find("BUSINTERFACES"), "BUSINTERFACE", BUSNAME=busname, NAME=name,
                                  TYPE=kind, VLNV=vlnv)
        portmaps = ET.SubElement(interface, "PORTMAPS")
        driving = kind in ("MASTER", "INITIATOR")
        for signal in signals:
            physical = f"{name}_{signal.lower()}"
            inbound = signal in ("TREADY", "AWREADY", "WREADY", "BRESP", "BVALID", "ARREADY", "RDATA", "RRESP",
                                 "RVALID")
            ET.SubElement(ports, "PORT", DIR="I" if inbound == driving else "O", NAME=physical, SIGIS="undef")
            ET.SubElement(portmaps, "PORTMAP", LOGICAL=signal, PHYSICAL=physical)

    def register_slave(self, module: ET.Element, interface: str) -> int:
        """An AXI-Lite slave of ``module`` at the next free register window; returns its base."""
        base = self.next_address
        self.next_address += REGISTER_SPAN
        instance = module.get("INSTANCE")
        self.bus(module, interface, "SLAVE", AXIMM, f"{self.processor.master}_{instance}", AXI_LITE_SIGNALS)
        self.ps_ranges.append({"ADDRESSBLOCK": "Reg", "BASENAME": "C_BASEADDR", "BASEVALUE": f"0x{base:08X}",
                               "HIGHNAME": "C_HIGHADDR", "HIGHVALUE": f"0x{base + REGISTER_SPAN - 1:08X}",
                               "INSTANCE": instance, "IS_DATA": "TRUE", "IS_INSTRUCTION": "TRUE",
                               "MASTERBUSINTERFACE": self.processor.master, "MEMTYPE": "REGISTER",
                               "SLAVEBUSINTERFACE": interface})
        return base

    def dram_master(self, module: ET.Element, interface: str) -> None:
        """An AXI master of ``module`` that reaches the processing system's DRAM."""
        instance = module.get("INSTANCE")
        self.bus(module, interface, "MASTER", AXIMM, f"{instance}_{interface}", AXI_LITE_SIGNALS)
        memory_map = module.find("MEMORYMAP")
        if memory_map is None:
            memory_map = ET.SubElement(module, "MEMORYMAP")
        ET.SubElement(memory_map, "MEMRANGE", ADDRESSBLOCK="HP0_DDR_LOW", BASENAME="C_BASEADDR",
                      BASEVALUE="0x00000000", HIGHNAME="C_HIGHADDR", HIGHVALUE="0x7FFFFFFF",
                      INSTANCE=self.processor.instance, IS_DATA="TRUE", IS_INSTRUCTION="TRUE",
                      MASTERBUSINTERFACE=interface, MEMTYPE="MEMORY", SLAVEBUSINTERFACE=self.processor.slave)

    def clock_parameters(self) -> dict[str, str]:
        """PL clock 0 enabled at ``clock_mhz`` (divisors from a 1500 MHz PLL), clocks 1-3 off, under
        the processing system's own parameter names."""
        zynq = self.processor.modtype == "processing_system7"
        parameters = {}
        for clock in range(4):
            enable = f"PCW_FPGA_FCLK{clock}_ENABLE" if zynq else f"PSU__FPGA_PL{clock}_ENABLE"
            parameters[enable] = "1" if clock == 0 else "0"
            for divisor, value in enumerate((max(1, round(1500 / self.clock_mhz)), 1)):
                name = (f"PCW_FCLK{clock}_PERIPHERAL_DIVISOR{divisor}" if zynq
                        else f"PSU__CRL_APB__PL{clock}_REF_CTRL__DIVISOR{divisor}")
                parameters[name] = str(value)
            parameters[f"PCW_FCLK{clock}_PERIPHERAL_CLKSRC" if zynq else f"PSU__CRL_APB__PL{clock}_REF_CTRL__SRCSEL"] \
                = "IO PLL"
            parameters[f"PSU__CRL_APB__PL{clock}_REF_CTRL__ACT_FREQMHZ"] = str(self.clock_mhz)
        return parameters

    def processing_system(self) -> None:
        p = self.processor
        module = self.module(p.instance, p.vlnv, p.modtype, self.clock_parameters())
        module.set("IS_PL", "FALSE")
        self.bus(module, p.master, "MASTER", AXIMM, f"{p.master}_bus", AXI_LITE_SIGNALS)
        self.bus(module, p.slave, "SLAVE", AXIMM, f"{p.slave}_bus", AXI_LITE_SIGNALS)
        memory_map = ET.SubElement(module, "MEMORYMAP")
        for memrange in self.ps_ranges:
            ET.SubElement(memory_map, "MEMRANGE", **memrange)


def dma_parameters(send: bool) -> dict[str, str]:
    """An AXI DMA's parameters with only its MM2S (``send``) or S2MM channel, under both the
    model names and the lower-case user names, as Vivado writes them (pynq reads the latter)."""
    chosen = {**DMA_PARAMETERS, "C_INCLUDE_MM2S": "1" if send else "0", "C_INCLUDE_S2MM": "0" if send else "1"}
    return {**chosen, **{name.lower(): value for name, value in chosen.items()}}


def _control_registers(module: ET.Element, streamed: bool) -> None:
    """The HLS AXI-Lite register map: CTRL (ap_start, ap_done, ap_idle, ap_ready, auto_restart)
    and, for streamed weights, the 64-bit weight pointer."""
    block = ET.SubElement(ET.SubElement(module, "ADDRESSBLOCKS"), "ADDRESSBLOCK", ACCESS="read-write",
                          INTERFACE="s_axi_control", NAME="Reg", RANGE=str(REGISTER_SPAN), USAGE="register")
    registers = ET.SubElement(block, "REGISTERS")
    rows = [("CTRL", 0x0, [("AP_START", 0), ("AP_DONE", 1), ("AP_IDLE", 2), ("AP_READY", 3), ("AUTO_RESTART", 7)])]
    if streamed:
        rows += [("wmem_1", 0x10, [("wmem", 0)]), ("wmem_2", 0x14, [("wmem", 0)])]
    for name, offset, fields in rows:
        register = ET.SubElement(registers, "REGISTER", NAME=name)
        for key, value in (("ADDRESS_OFFSET", str(offset)), ("SIZE", "32"), ("ACCESS", "read-write"),
                           ("IS_ENABLED", "true"), ("DESCRIPTION", name)):
            ET.SubElement(register, "PROPERTY", NAME=key, VALUE=value)
        bit_fields = ET.SubElement(register, "FIELDS")
        for field_name, bit in fields:
            width = 32 if name.startswith("wmem") else 1
            field = ET.SubElement(bit_fields, "FIELD", NAME=field_name)
            for key, value in (("BIT_OFFSET", str(bit)), ("BIT_WIDTH", str(width)), ("ACCESS", "read-write")):
                ET.SubElement(field, "PROPERTY", NAME=key, VALUE=value)


def hwh_text(document: DesignRecord, folder: Path) -> str:
    """The HWH of the block design ``codegen.blockdesign.plan.plan_nodes`` plans for the project (one Zynq node)."""
    plans = plan_nodes(document, folder)
    if len(plans) != 1 or plans[0].alveo:
        raise ValueError(f"{folder}: the stand-in board takes one Zynq node; the design plans "
                         f"{len(plans)} node(s){' on Alveo' if plans and plans[0].alveo else ''}")
    plan = plans[0]
    processor = ZYNQ_7000 if plan.part.lower().startswith("xc7z") else ZYNQ_US
    writer = _Writer(processor, plan.part, float(plan.clock_mhz or 100))
    records = {c.name: c for c in document.cores}
    bus = {}  # (cell, interface) -> BUSNAME of the stream it joins
    for fifo in plan.fifos:
        bus[(fifo.name, "S_AXIS")] = bus[(fifo.producer.cell, fifo.producer.port)] = f"{fifo.name}_in"
        bus[(fifo.name, "M_AXIS")] = bus[(fifo.consumer.cell, fifo.consumer.port)] = f"{fifo.name}_out"
    for dma in plan.dmas:
        interface = "M_AXIS_MM2S" if dma.to_fabric else "S_AXIS_S2MM"
        bus[(dma.name, interface)] = bus.setdefault((dma.endpoint.cell, dma.endpoint.port), f"{dma.name}_stream")
    fifo_names = {fifo.name for fifo in plan.fifos}
    for fanout in plan.fanouts:  # the core's port feeds the broadcaster, which feeds the FIFOs and the DMA
        bus[(fanout.source.cell, fanout.source.port)] = bus[(fanout.name, "S_AXIS")] = f"{fanout.name}_in"
        for index, cell in enumerate(fanout.sinks):
            interface = "S_AXIS" if cell in fifo_names else "S_AXIS_S2MM"
            bus[(fanout.name, f"M{index:02d}_AXIS")] = bus[(cell, interface)] = f"{fanout.name}_{index}"
    for core in plan.cores:
        record = records[core.name]
        module = writer.module(core.cell, f"xilinx.com:hls:{core.top}:1.0", core.top, {})
        writer.register_slave(module, "s_axi_control")
        _control_registers(module, bool(core.weights_port))
        if core.weights_port:
            writer.dram_master(module, "m_axi_gmem")
        for tensor in record.inputs:
            writer.bus(module, tensor.port, "SLAVE", AXIS, bus[(core.cell, tensor.port)], STREAM_SIGNALS)
        for tensor in record.outputs:
            writer.bus(module, tensor.port, "MASTER", AXIS, bus[(core.cell, tensor.port)], STREAM_SIGNALS)
    for dma in plan.dmas:
        module = writer.module(dma.name, DMA_VLNV, "axi_dma", dma_parameters(send=dma.to_fabric))
        writer.register_slave(module, "S_AXI_LITE")
        if dma.to_fabric:
            writer.dram_master(module, "M_AXI_MM2S")
            writer.bus(module, "M_AXIS_MM2S", "INITIATOR", AXIS, bus[(dma.name, "M_AXIS_MM2S")], STREAM_SIGNALS)
        else:
            writer.dram_master(module, "M_AXI_S2MM")
            writer.bus(module, "S_AXIS_S2MM", "TARGET", AXIS, bus[(dma.name, "S_AXIS_S2MM")], STREAM_SIGNALS)
    for fifo in plan.fifos:
        module = writer.module(fifo.name, FIFO_VLNV, "axis_data_fifo", {"FIFO_DEPTH": str(fifo.depth)})
        writer.bus(module, "S_AXIS", "SLAVE", AXIS, bus[(fifo.name, "S_AXIS")], STREAM_SIGNALS)
        writer.bus(module, "M_AXIS", "MASTER", AXIS, bus[(fifo.name, "M_AXIS")], STREAM_SIGNALS)
    for fanout in plan.fanouts:
        module = writer.module(fanout.name, BROADCASTER_VLNV, "axis_broadcaster",
                               {"NUM_MI": str(len(fanout.sinks))})
        writer.bus(module, "S_AXIS", "SLAVE", AXIS, bus[(fanout.name, "S_AXIS")], STREAM_SIGNALS)
        for index in range(len(fanout.sinks)):
            writer.bus(module, f"M{index:02d}_AXIS", "MASTER", AXIS, bus[(fanout.name, f"M{index:02d}_AXIS")],
                       STREAM_SIGNALS)
    writer.processing_system()
    ET.indent(writer.root)
    return '<?xml version="1.0" encoding="UTF-8" standalone="no" ?>\n' + ET.tostring(writer.root, encoding="unicode")


def write_standin_bitstream(project: Path) -> Path:
    """``bitstream/design.hwh`` from the project's design.json and a placeholder ``design.bit``
    (the stand-in programs nothing); returns the .bit path."""
    project = Path(project)
    document = load(project)
    folder = project / BITSTREAM_DIR
    folder.mkdir(exist_ok=True)
    (folder / f"{BITSTREAM_STEM}.hwh").write_text(hwh_text(document, project))
    bit = folder / f"{BITSTREAM_STEM}.bit"
    bit.write_bytes(b"fpgaplace stand-in: no bitstream\n")
    return bit
