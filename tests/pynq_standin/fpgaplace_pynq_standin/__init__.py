"""A stand-in PYNQ board for tests: pynq's own Overlay, HWH parser, DMA driver and allocate run
unchanged on a ``pynq.Device`` whose registers and memory are simulated (``fabric``).

Importing this package registers ``StandinDevice`` with pynq's device registry (pynq's
``DeviceMeta`` records every ``Device`` subclass that has a ``_probe_``), at a probe priority
before the embedded and XRT devices, so ``pynq.Device.active_device``, ``pynq.allocate`` and
``pynq.Overlay`` find it. The test environment imports it at start-up (a ``.pth`` file written by
``scripts/setup_pynq_env.sh``) only when ``FPGAPLACE_PYNQ_STANDIN=1``, so the driver under test
carries no test code.

``Overlay(<project>/bitstream/design.bit)`` reads ``design.hwh`` beside it with pynq's parser;
downloading builds the fabric from the same HWH (streams joined by ``BUSNAME``) and the
project's ``design.json`` (each HLS IP is a core by its top's VLNV, computing with the C
simulation library ``cores/<core>/build/libcore.so`` that ``fpgaplace.sim.csim.build_core``
built).
"""

from __future__ import annotations

import datetime
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree as ET

import numpy as np
from pynq.buffer import PynqBuffer
from pynq.pl_server.device import Device
from pynqmetadata.frontends import Metadata
from pynqmetadata.views.runtime import RuntimeMetadataParser

from fpgaplace_pynq_standin.fabric import AxiDma, Fabric, HlsCore, Memory, Stream

PAGE = 4096
DRAM_BASE = 0x1000_0000
LIBRARY = "build/libcore.so"
ZU_ARCH, ZYNQ_ARCH = "aarch64", "armv7l"
# The processing system's clock registers at their power-on values (pynq's Clocks reads them to
# set the PL clock): the IO PLL at 1500 MHz from the 33.333 MHz (Zynq UltraScale+: CRL_APB
# IOPLL_CTRL, FBDIV 90 and DIV2) or 50 MHz (Zynq-7000: SLCR IO_PLL_CTRL, PLL_FDIV 30) reference.
PS_CLOCK_REGISTERS = {ZU_ARCH: {0xFF5E0020: (1 << 16) | (90 << 8)}, ZYNQ_ARCH: {0xF8000108: 30 << 12}}


class StandinDevice(Device):
    """A Zynq board whose PL is ``fabric``: registers through pynq's REGISTER_RW path."""

    _probe_priority_ = 5

    @classmethod
    def _probe_(cls) -> list[StandinDevice]:
        return [cls()]

    def __init__(self) -> None:
        super().__init__("fpgaplace_standin0")
        self.name = "fpgaplace-standin"
        self.capabilities = {"REGISTER_RW": True, "MEMORY_MAPPED": False, "CALLABLE": False}
        self.memory = Memory()
        self.fabric = Fabric()
        self.arch = ZU_ARCH
        self.plain_registers: dict[int, int] = dict(PS_CLOCK_REGISTERS[self.arch])  # the PS's own registers
        self.next_address = DRAM_BASE
        self.timestamp = ""

    # -- memory
    def allocate(self, shape, dtype, **kwargs) -> PynqBuffer:
        """A physically addressed, page-aligned, coherent buffer in the simulated DRAM."""
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        address = self.next_address
        self.next_address += max(PAGE, -(-nbytes // PAGE) * PAGE)
        backing = np.zeros(max(nbytes, 1), dtype=np.uint8)
        self.memory.buffers[address] = backing
        return PynqBuffer(shape, dtype, buffer=backing, device=self, device_address=address, coherent=True)

    # -- registers (pynq's MMIO calls these for a REGISTER_RW device)
    def read_registers(self, address: int, length: int) -> bytes:
        found = self.fabric.find(address)
        value = found[0].read(found[1]) if found else self.plain_registers.get(address, 0)
        return struct.pack("<I", value & 0xFFFFFFFF)[:length]

    def write_registers(self, address: int, data: bytes) -> None:
        for i in range(0, len(data), 4):
            value = struct.unpack("<I", data[i:i + 4].ljust(4, b"\0"))[0]
            found = self.fabric.find(address + i)
            if found:
                found[0].write(found[1], value)
            else:
                self.plain_registers[address + i] = value
        self.fabric.settle()

    # -- bitstreams
    def get_bitfile_metadata(self, bitfile_name: str, partial: bool = False) -> RuntimeMetadataParser:
        hwh = Path(bitfile_name).with_suffix(".hwh")
        if not hwh.is_file():
            raise RuntimeError(f"Unable to find metadata for bitstream: {hwh} is missing")
        parser = RuntimeMetadataParser(Metadata(input=hwh))
        arch = ZYNQ_ARCH if parser.family_ps == "processing_system7" else ZU_ARCH
        if arch != self.arch:
            self.arch = arch
            self.plain_registers = dict(PS_CLOCK_REGISTERS[arch])
        return parser

    def download(self, bitstream, parser=None) -> None:
        """Program the fabric: build its DMAs and cores from the HWH and design.json."""
        self.fabric = build_fabric(Path(bitstream.bitfile_name), parser.ip_dict, self.memory)
        bitstream.timestamp = datetime.datetime.now().isoformat()
        self.reset(parser, bitstream.timestamp, bitstream.bitfile_name)

    def gen_cache(self, bitstream, parser=None) -> None:
        """Nothing to cache: the stand-in keeps no state between processes."""


@dataclass
class Wiring:
    """The streams of the HWH: every module's bus interfaces by BUSNAME, and the FIFOs and
    broadcasters that join them."""

    buses: dict[str, dict[str, str]]  # instance -> bus interface -> BUSNAME
    vlnv: dict[str, str]  # instance -> VLNV
    streams: dict[str, Stream] = field(default_factory=dict)

    @staticmethod
    def read(hwh: Path) -> Wiring:
        root = ET.parse(hwh).getroot()
        modules = list(root.iter("MODULE"))
        return Wiring({m.get("INSTANCE"): {b.get("NAME"): b.get("BUSNAME") for b in m.iter("BUSINTERFACE")}
                       for m in modules}, {m.get("INSTANCE"): m.get("VLNV") for m in modules})

    def _passing(self, busname: str) -> list[str]:
        """The buses a FIFO or broadcaster whose input is ``busname`` drives."""
        for instance, interfaces in self.buses.items():
            kind = self.vlnv[instance].split(":")[2]
            if kind in ("axis_data_fifo", "axis_broadcaster") and interfaces.get("S_AXIS") == busname:
                return [bus for name, bus in sorted(interfaces.items()) if name != "S_AXIS"]
        return []

    def reader(self, busname: str) -> Stream:
        """The stream a core input or an S2MM channel on ``busname`` reads."""
        return self.streams.setdefault(busname, Stream(busname))

    def readers(self, busname: str) -> list[Stream]:
        """Where a packet written on ``busname`` ends up: through FIFOs and broadcasters to the
        core inputs and S2MM channels at the far ends."""
        passing = self._passing(busname)
        if not passing:
            return [self.reader(busname)]
        return [stream for bus in passing for stream in self.readers(bus)]


def _streamed_weights(project: Path, record: dict) -> np.ndarray | None:
    """The weights the core's C simulation was built with (its weights.bin), if they are streamed."""
    if record.get("streamed_weight_bytes", 0) <= 0:
        return None
    weights = np.fromfile(project / record["folder"] / "weights.bin", dtype=np.int8)
    return weights[: record["streamed_weight_bytes"]]


def build_fabric(bitfile: Path, ip_dict: dict, memory: Memory) -> Fabric:
    project = bitfile.parent.parent
    document = json.loads((project / "design.json").read_text())
    records = {f"xilinx.com:hls:{r['top']}:1.0": r for r in document["cores"]}
    wiring = Wiring.read(bitfile.with_suffix(".hwh"))
    fabric = Fabric()
    for instance, description in ip_dict.items():
        interfaces = wiring.buses.get(instance, {})
        base, span = description.get("phys_addr"), description.get("addr_range")
        if description["type"] == "xilinx.com:ip:axi_dma:7.1":
            feeds = wiring.readers(interfaces["M_AXIS_MM2S"]) if "M_AXIS_MM2S" in interfaces else []
            drains = wiring.reader(interfaces["S_AXIS_S2MM"]) if "S_AXIS_S2MM" in interfaces else None
            fabric.add(base, span, AxiDma(instance, memory, feeds, drains))
        elif description["type"] in records:
            record = records[description["type"]]
            library = project / record["folder"] / LIBRARY
            if not library.is_file():
                raise RuntimeError(f"stand-in: {library} is missing; build the core's C simulation first")
            inputs = [wiring.reader(interfaces[t["port"]]) for t in record["inputs"]]
            outputs = [wiring.readers(interfaces[t["port"]]) for t in record["outputs"]]
            fabric.add(base, span, HlsCore(record, library, memory, inputs, outputs,
                                           _streamed_weights(project, record)))
    return fabric
