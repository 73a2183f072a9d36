"""cocotb test (cocotb 2.x) of an ECP5 project's board top (``fp_top``) as its host sees it: bytes
in and out over the UART, 8N1, at the host's own baud.

Run by ``fpgaplace.sim.uart_top`` through cocotb's runner, never imported by the package itself.
The job (JSON, path in ``$FPGAPLACE_RTL_JOB``) gives the board clock (``clock_hz``), the ``baud``,
the ``samples`` (each a list of bytes the host sends back to back), the bytes a sample's result
has (``output_bytes``), a time limit in clock cycles (``cycle_limit``) and the ``results`` file.
The host model drives ``uart_rx`` bit by bit with its own bit period (a real USB bridge's clock,
not the FPGA's), and a receiver samples ``uart_tx`` in the middle of each bit, checking the stop
bit. The results: the bytes received, and per sample the clock cycles from its first start bit
to the stop bit of its result's last byte. Ports: ``clk``, ``uart_rx``, ``uart_tx``; the top
resets itself at power-on. O(bits) cocotb steps; the simulator runs the clock.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, First, Timer
from cocotb.utils import get_sim_time

JOB_ENV = "FPGAPLACE_RTL_JOB"
START_CYCLES = 64  # idle line before the first byte (the top's power-on reset takes 15)


async def send_byte(line: Any, value: int, bit_ps: int) -> None:
    """One 8N1 frame on ``line``: start bit, eight data bits LSB first, stop bit."""
    for bit in [0, *((value >> k) & 1 for k in range(8)), 1]:
        line.value = bit
        await Timer(bit_ps, unit="ps")


async def receive_byte(line: Any, bit_ps: int) -> int:
    """The next 8N1 frame on ``line`` (awaits its start bit); fails on a missing stop bit."""
    await FallingEdge(line)
    await Timer(bit_ps // 2, unit="ps")
    assert line.value == 0, "a glitch, not a start bit, on uart_tx"
    value = 0
    for k in range(8):
        await Timer(bit_ps, unit="ps")
        value |= int(line.value) << k
    await Timer(bit_ps, unit="ps")
    assert line.value == 1, "uart_tx: no stop bit"
    return value


@cocotb.test()
async def uart_samples(dut: Any) -> None:
    """Every sample of the job over the UART, one after the other; each result read back whole
    before the next sample starts."""
    job = json.loads(Path(os.environ[JOB_ENV]).read_text())
    clock_ps = round(1e12 / job["clock_hz"])
    bit_ps = round(1e12 / job["baud"])
    dut.uart_rx.value = 1
    cocotb.start_soon(Clock(dut.clk, clock_ps, unit="ps").start())
    await Timer(START_CYCLES * clock_ps, unit="ps")
    limit = Timer(job["cycle_limit"] * clock_ps, unit="ps")
    received: list[int] = []
    cycles: list[float] = []
    for sample in job["samples"]:
        started = get_sim_time("ps")
        for value in sample:
            await send_byte(dut.uart_rx, value, bit_ps)
        for _ in range(job["output_bytes"]):
            task = cocotb.start_soon(receive_byte(dut.uart_tx, bit_ps))
            await First(task.complete, limit)
            assert task.done(), f"no result byte {len(received) % job['output_bytes']} within the limit"
            received.append(task.result())
        cycles.append((get_sim_time("ps") - started) / clock_ps)
    Path(job["results"]).write_text(json.dumps({"outputs": received, "cycles": cycles}))
