"""cocotb test (cocotb 2.x) streaming vectors through an RTL op with AXI-Stream ports.

Run by ``fpgaplace.sim.rtl`` through cocotb's runner, never imported by the package itself. The
job (JSON, path in ``$FPGAPLACE_RTL_JOB``) names the input ports (``inputs``: ``[{"port",
"elems"}]``, ``elems`` int8 elements a beat) and output ports (``outputs``: ``[{"port", "elems",
"length"}]``, ``length`` elements a vector), a cycle limit and phases, each ``{"name", "gap",
"backpressure", "inputs": [[vector, ...] per input port]}``. For every phase the DUT is reset,
every input port's beats are offered with probability ``1 - gap`` a cycle (a valid beat is held
until accepted, as AXI-Stream requires) and every output is ready with probability ``1 -
backpressure``. The results file gets, per phase, each output port's elements in order, the
cycle (counted from reset release) at which each vector's last output beat left (on every
output port), and the total cycles. Ports: ``ap_clk``, ``ap_rst_n`` (active low),
``<port>_t{data,valid,ready}``; element ``i`` of a beat is bits ``[8*i +: 8]``, int8.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

JOB_ENV = "FPGAPLACE_RTL_JOB"
RESET_CYCLES = 4


def pack(elements: list[int]) -> int:
    """int8 element ``i`` in bits ``[8*i +: 8]``."""
    return sum((e & 0xFF) << (8 * i) for i, e in enumerate(elements))


def unpack(word: int, count: int) -> list[int]:
    """The ``count`` int8 elements of a beat."""
    return [((word >> (8 * i)) & 0xFF) - (256 if (word >> (8 * i)) & 0x80 else 0) for i in range(count)]


def beats(inputs: list[list[int]], width: int) -> list[int]:
    return [pack(vector[i:i + width]) for vector in inputs for i in range(0, len(vector), width)]


class InputPort:
    """An input port's beats and the AXI-Stream master state driving it."""

    def __init__(self, dut: Any, spec: dict[str, Any], vectors: list[list[int]]) -> None:
        self.data, self.valid = getattr(dut, f"{spec['port']}_tdata"), getattr(dut, f"{spec['port']}_tvalid")
        self.ready = getattr(dut, f"{spec['port']}_tready")
        self.words = beats(vectors, spec["elems"])
        self.sent, self.offering = 0, False

    def idle(self) -> None:
        self.valid.value = 0
        self.data.value = 0

    def drive(self, rng: random.Random, gap: float) -> None:
        if not self.offering and self.sent < len(self.words) and rng.random() >= gap:
            self.offering = True
            self.data.value = self.words[self.sent]
        self.valid.value = int(self.offering)

    def sample(self) -> None:
        if self.offering and self.ready.value == 1:
            self.sent, self.offering = self.sent + 1, False


class OutputPort:
    """An output port's received elements and its ready."""

    def __init__(self, dut: Any, spec: dict[str, Any]) -> None:
        self.data, self.valid = getattr(dut, f"{spec['port']}_tdata"), getattr(dut, f"{spec['port']}_tvalid")
        self.ready = getattr(dut, f"{spec['port']}_tready")
        self.elems, self.beats_per_vector = spec["elems"], spec["length"] // spec["elems"]
        self.outputs: list[int] = []
        self.received, self.is_ready = 0, False

    def drive(self, rng: random.Random, backpressure: float) -> None:
        self.is_ready = rng.random() >= backpressure
        self.ready.value = int(self.is_ready)

    def sample(self) -> None:
        if self.is_ready and self.valid.value == 1:
            self.outputs.extend(unpack(self.data.value.to_unsigned(), self.elems))
            self.received += 1


async def run_phase(dut: Any, phase: dict[str, Any], job: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """Reset the DUT and stream one phase; O(cycles)."""
    inputs = [InputPort(dut, spec, vectors) for spec, vectors in zip(job["inputs"], phase["inputs"], strict=True)]
    outputs = [OutputPort(dut, spec) for spec in job["outputs"]]
    dut.ap_rst_n.value = 0
    for port in inputs:
        port.idle()
    for port in outputs:
        port.ready.value = 0
    for _ in range(RESET_CYCLES):
        await RisingEdge(dut.ap_clk)
    await FallingEdge(dut.ap_clk)
    dut.ap_rst_n.value = 1
    vectors = len(phase["inputs"][0]) if phase["inputs"] else 0
    done_cycles: list[int] = []
    cycle = 0
    while len(done_cycles) < vectors and cycle < job["cycle_limit"]:
        if cycle:
            await FallingEdge(dut.ap_clk)
        for port in inputs:
            port.drive(rng, phase["gap"])
        for port in outputs:
            port.drive(rng, phase["backpressure"])
        await ReadOnly()
        for port in [*inputs, *outputs]:
            port.sample()
        finished = min(port.received // port.beats_per_vector for port in outputs)
        done_cycles.extend([cycle] * (finished - len(done_cycles)))
        cycle += 1
    await FallingEdge(dut.ap_clk)
    for port in inputs:
        port.valid.value = 0
    return {"name": phase["name"], "outputs": [port.outputs for port in outputs], "done_cycles": done_cycles,
            "cycles": cycle}


@cocotb.test()
async def stream(dut: Any) -> None:
    """Every phase of the job; fails if a phase did not produce all its outputs in time."""
    job = json.loads(Path(os.environ[JOB_ENV]).read_text())
    rng = random.Random(int(os.environ.get("COCOTB_RANDOM_SEED", "0")))
    cocotb.start_soon(Clock(dut.ap_clk, 10, unit="ns").start())
    results = [await run_phase(dut, phase, job, rng) for phase in job["phases"]]
    Path(job["results"]).write_text(json.dumps(results))
    for phase, result in zip(job["phases"], results, strict=True):
        vectors = len(phase["inputs"][0]) if phase["inputs"] else 0
        for spec, got in zip(job["outputs"], result["outputs"], strict=True):
            expected = vectors * spec["length"]
            assert len(got) == expected, (f"phase {phase['name']}: {spec['port']} gave {len(got)} of {expected} "
                                          f"outputs within {job['cycle_limit']} cycles")
