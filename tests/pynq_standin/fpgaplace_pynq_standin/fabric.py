"""The programmable logic of the stand-in board: AXI DMAs and HLS cores behind their registers.

Everything above the registers is pynq's own code; this module is what the registers reach.

* ``AxiDma``: the simple-mode register file of Xilinx AXI DMA 7.1 (PG021): MM2S_DMACR/DMASR at
  0x00/0x04, SA at 0x18/0x1C, LENGTH at 0x28; S2MM_DMACR/DMASR at 0x30/0x34, DA at 0x48/0x4C,
  LENGTH at 0x58. DMACR.RS (bit 0) runs a channel, DMASR bit 0 is Halted, bit 1 Idle, bits 4-6
  the internal/slave/decode errors, bit 12 IOC. Writing LENGTH starts a transfer: MM2S copies
  LENGTH bytes from memory into the stream (one int8 element a beat, TLAST after the last);
  S2MM takes one packet from the stream into memory and writes the bytes it took back into
  LENGTH; a packet longer than the buffer is an internal error, an address outside every
  allocated buffer a decode error.
* ``HlsCore``: an ``ap_ctrl_hs`` HLS top: CTRL at 0x0 with ap_start (bit 0), ap_done (bit 1,
  cleared when read), ap_idle (bit 2), ap_ready (bit 3) and auto_restart (bit 7), and for
  streamed weights the pointer at 0x10/0x14. Once started it runs ``fp_run`` of the core's
  C-simulation library whenever every input stream holds a whole sample; each output goes to
  its stream's readers (a DMA's S2MM channel and/or, through a FIFO, other cores; several
  behind a broadcaster).

Streams are unbounded queues of packets, so a producer never stalls (a FIFO in hardware would
apply backpressure; the order of samples is the same). Each event (a register write) runs
every core that can run until none can: O(cores) checks per event.
"""

from __future__ import annotations

import ctypes
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HALTED, IDLE, INTERNAL_ERROR, DECODE_ERROR, IOC = 0x1, 0x2, 0x10, 0x40, 0x1000
AP_START, AP_DONE, AP_IDLE, AP_READY, AUTO_RESTART = 0x1, 0x2, 0x4, 0x8, 0x80


@dataclass
class Stream:
    """An AXI-Stream link: packets (one sample of one port each) waiting for their reader."""

    name: str
    packets: deque = field(default_factory=deque)


class Memory:
    """The board's DRAM as the buffers pynq allocated: physical address -> numpy bytes."""

    def __init__(self) -> None:
        self.buffers: dict[int, np.ndarray] = {}

    def view(self, address: int, nbytes: int) -> np.ndarray | None:
        """The ``nbytes`` bytes at ``address`` if they lie inside one buffer, else None."""
        for base, data in self.buffers.items():
            if base <= address and address + nbytes <= base + data.nbytes:
                return data[address - base: address - base + nbytes]
        return None


class AxiDma:
    """One AXI DMA: an MM2S channel feeding the streams ``feeds`` (one, or the outputs of a
    broadcaster) and/or an S2MM channel draining ``drains``."""

    def __init__(self, name: str, memory: Memory, feeds: list[Stream], drains: Stream | None) -> None:
        self.name, self.memory, self.feeds, self.drains = name, memory, feeds, drains
        self.registers = {0x00: 0, 0x04: HALTED, 0x30: 0, 0x34: HALTED}
        self.armed: int | None = None  # S2MM: bytes the pending receive may take

    def read(self, offset: int) -> int:
        return self.registers.get(offset, 0)

    def write(self, offset: int, value: int) -> None:
        if offset in (0x04, 0x34):  # status: write 1 to clear the interrupt bits
            self.registers[offset] &= ~(value & 0x7000)
            return
        self.registers[offset] = value
        if offset in (0x00, 0x30):
            status = offset + 4
            if value & 1:
                self.registers[status] = (self.registers[status] & ~HALTED) | IDLE
            else:
                self.registers[status] |= HALTED
        elif offset == 0x28:
            self._send(value)
        elif offset == 0x58:
            self._arm(value)

    def _address(self, low: int) -> int:
        return self.registers.get(low, 0) | (self.registers.get(low + 4, 0) << 32)

    def _send(self, nbytes: int) -> None:
        if not self.feeds or self.registers[0x04] & HALTED:
            self.registers[0x04] |= INTERNAL_ERROR
            return
        data = self.memory.view(self._address(0x18), nbytes)
        if data is None:
            self.registers[0x04] |= DECODE_ERROR
            return
        for stream in self.feeds:
            stream.packets.append(data.copy())
        self.registers[0x04] = (self.registers[0x04] | IDLE | IOC)

    def _arm(self, nbytes: int) -> None:
        if self.drains is None or self.registers[0x34] & HALTED:
            self.registers[0x34] |= INTERNAL_ERROR
            return
        self.armed = nbytes
        self.registers[0x34] &= ~IDLE
        self.deliver()

    def deliver(self) -> None:
        """Complete a pending receive with the next packet of the stream, if there is one."""
        if self.armed is None or self.drains is None or not self.drains.packets:
            return
        packet = self.drains.packets.popleft()
        target = self.memory.view(self._address(0x48), min(self.armed, packet.nbytes))
        if target is None:
            self.registers[0x34] |= DECODE_ERROR
        elif packet.nbytes > self.armed:
            self.registers[0x34] |= INTERNAL_ERROR
        else:
            target[:] = packet
            self.registers[0x58] = packet.nbytes
            self.registers[0x34] |= IDLE | IOC
        self.armed = None


class HlsCore:
    """One core's HLS IP, computing with its C-simulation library."""

    def __init__(self, record: dict, library: Path, memory: Memory, inputs: list[Stream],
                 outputs: list[list[Stream]], weights: np.ndarray | None) -> None:
        self.record, self.memory, self.inputs, self.outputs, self.weights = record, memory, inputs, outputs, weights
        self.entry = ctypes.CDLL(str(library)).fp_run
        self.entry.restype = ctypes.c_int
        self.control = AP_IDLE
        self.registers: dict[int, int] = {}
        self.error = ""

    def read(self, offset: int) -> int:
        if offset == 0:
            value = self.control
            self.control &= ~AP_DONE  # clear on read
            return value
        return self.registers.get(offset, 0)

    def write(self, offset: int, value: int) -> None:
        if offset == 0:
            self.control = (self.control & ~(AP_START | AUTO_RESTART)) | (value & (AP_START | AUTO_RESTART))
            if value & AP_START:
                self.control &= ~AP_IDLE
        else:
            self.registers[offset] = value

    def ready(self) -> bool:
        return bool(self.control & AP_START) and all(stream.packets for stream in self.inputs)

    def step(self) -> None:
        """One call of the top: one sample from every input stream to every output stream."""
        record = self.record
        self._check_weights()
        sizes = [int(np.prod(t["sample_shape"])) for t in record["inputs"]]
        ins = [np.ascontiguousarray(s.packets.popleft(), dtype=np.int8) for s in self.inputs]
        if [x.size for x in ins] != sizes:
            raise RuntimeError(f"stand-in {record['name']}: input packets of {[x.size for x in ins]} bytes, "
                               f"the core reads {sizes} a sample")
        outs = [np.zeros(int(np.prod(t["sample_shape"])), dtype=np.int8) for t in record["outputs"]]
        pointer = ctypes.POINTER(ctypes.c_int8)
        in_array = (pointer * max(1, len(ins)))(*[x.ctypes.data_as(pointer) for x in ins])
        out_array = (pointer * max(1, len(outs)))(*[y.ctypes.data_as(pointer) for y in outs])
        status = self.entry(in_array, out_array)
        if status != 0:
            raise RuntimeError(f"stand-in {record['name']}: fp_run returned status {status}")
        for readers, out in zip(self.outputs, outs, strict=True):
            for stream in readers:
                stream.packets.append(out.copy())
        self.control |= AP_DONE | AP_READY
        if not self.control & AUTO_RESTART:
            self.control = (self.control & ~AP_START) | AP_IDLE

    def _check_weights(self) -> None:
        """A core with streamed weights reads them over m_axi from the address in its pointer
        register: it must hold the weights the C simulation was built with."""
        if self.weights is None:
            return
        address = self.registers.get(0x10, 0) | (self.registers.get(0x14, 0) << 32)
        found = self.memory.view(address, self.weights.nbytes)
        if found is None or not np.array_equal(found.view(np.int8), self.weights):
            raise RuntimeError(f"stand-in {self.record['name']}: the weight pointer 0x{address:x} does not hold "
                               f"the core's {self.weights.nbytes} bytes of weights")


class Fabric:
    """Every DMA and core of the loaded design, by register window."""

    def __init__(self) -> None:
        self.windows: list[tuple[int, int, AxiDma | HlsCore]] = []
        self.dmas: list[AxiDma] = []
        self.cores: list[HlsCore] = []

    def add(self, base: int, span: int, block: AxiDma | HlsCore) -> None:
        self.windows.append((base, span, block))
        (self.dmas if isinstance(block, AxiDma) else self.cores).append(block)

    def find(self, address: int) -> tuple[AxiDma | HlsCore, int] | None:
        for base, span, block in self.windows:
            if base <= address < base + span:
                return block, address - base
        return None

    def settle(self) -> None:
        """Run cores and complete receives until nothing changes."""
        progress = True
        while progress:
            progress = False
            for core in self.cores:
                while core.ready():
                    core.step()
                    progress = True
            for dma in self.dmas:
                if dma.armed is not None and dma.drains is not None and dma.drains.packets:
                    dma.deliver()
                    progress = True

