"""cocotb test (cocotb 2.x) streaming vectors through an RTL op with AXI-Stream ports.

Run by ``fpgaplace.sim.rtl`` through cocotb's runner, never imported by the package itself. The
job (JSON, path in ``$FPGAPLACE_RTL_JOB``) gives the beat widths in elements (``in_elems``,
``out_elems``), the output length of one vector (``out_len``), a cycle limit and phases, each
``{"name", "gap", "backpressure", "inputs": [[int8, ...], ...]}``. For every phase the DUT is
reset, the input beats are offered with probability ``1 - gap`` a cycle (a valid beat is held
until accepted, as AXI-Stream requires) and the output is ready with probability
``1 - backpressure``. The results file gets, per phase, the output elements in order, the
cycle (counted from reset release) at which each vector's last output beat left, and the
total cycles. Ports: ``ap_clk``, ``ap_rst_n`` (active low), ``s_axis_t{data,valid,ready}``,
``m_axis_t{data,valid,ready}``; element ``i`` of a beat is bits ``[8*i +: 8]``, int8.

Signals are driven just after the falling edge and sampled in the read-only phase of that
half cycle, so a handshake seen there is the one the next rising edge performs.
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


async def run_phase(dut: Any, phase: dict[str, Any], job: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """Reset the DUT and stream one phase; O(cycles)."""
    dut.ap_rst_n.value = 0
    dut.s_axis_tvalid.value = 0
    dut.s_axis_tdata.value = 0
    dut.m_axis_tready.value = 0
    for _ in range(RESET_CYCLES):
        await RisingEdge(dut.ap_clk)
    await FallingEdge(dut.ap_clk)
    dut.ap_rst_n.value = 1
    words = beats(phase["inputs"], job["in_elems"])
    beats_per_vector = job["out_len"] // job["out_elems"]
    wanted = beats_per_vector * len(phase["inputs"])
    outputs: list[int] = []
    done_cycles: list[int] = []
    sent, offering, received, cycle = 0, False, 0, 0
    while received < wanted and cycle < job["cycle_limit"]:
        if cycle:
            await FallingEdge(dut.ap_clk)
        if not offering and sent < len(words) and rng.random() >= phase["gap"]:
            offering = True
            dut.s_axis_tdata.value = words[sent]
        dut.s_axis_tvalid.value = int(offering)
        ready = rng.random() >= phase["backpressure"]
        dut.m_axis_tready.value = int(ready)
        await ReadOnly()
        if offering and dut.s_axis_tready.value == 1:
            sent, offering = sent + 1, False
        if ready and dut.m_axis_tvalid.value == 1:
            outputs.extend(unpack(dut.m_axis_tdata.value.to_unsigned(), job["out_elems"]))
            received += 1
            if received % beats_per_vector == 0:
                done_cycles.append(cycle)
        cycle += 1
    await FallingEdge(dut.ap_clk)
    dut.s_axis_tvalid.value = 0
    return {"name": phase["name"], "outputs": outputs, "done_cycles": done_cycles, "cycles": cycle}


@cocotb.test()
async def stream(dut: Any) -> None:
    """Every phase of the job; fails if a phase did not produce all its outputs in time."""
    job = json.loads(Path(os.environ[JOB_ENV]).read_text())
    rng = random.Random(int(os.environ.get("COCOTB_RANDOM_SEED", "0")))
    cocotb.start_soon(Clock(dut.ap_clk, 10, unit="ns").start())
    results = [await run_phase(dut, phase, job, rng) for phase in job["phases"]]
    Path(job["results"]).write_text(json.dumps(results))
    for phase, result in zip(job["phases"], results, strict=True):
        expected = len(phase["inputs"]) * job["out_len"]
        assert len(result["outputs"]) == expected, (
            f"phase {phase['name']}: {len(result['outputs'])} of {expected} outputs within {job['cycle_limit']} cycles")
