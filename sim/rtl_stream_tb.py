"""cocotb test (cocotb 2.x) streaming vectors through an RTL op or core top with AXI-Stream ports.

Run by ``fpgaplace.sim.rtl`` through cocotb's runner, never imported by the package itself. The
clock, the stimulus and the capture are Verilog (``stream_harness``, written by
``fpgaplace.sim.harness`` from the job: per phase a reset, input beats offered with random gaps
and held until accepted, outputs with random backpressure, then back to back; the cycle each
vector's last beat left), so this test only waits for the harness to say it has finished (each
phase ends by its cycle limit at the latest) and no Python runs a cycle;
``fpgaplace.sim.harness.read`` reads the harness' files.
"""

from __future__ import annotations

from typing import Any

import cocotb
from cocotb.triggers import RisingEdge


@cocotb.test()
async def stream(dut: Any) -> None:
    """Wait until the harness has run every phase."""
    while str(dut.finished.value) != "1":  # X before the harness' initial block runs
        await RisingEdge(dut.finished)
