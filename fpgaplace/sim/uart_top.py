"""An ECP5 project's whole board top in RTL, driven over its UART as the host drives it.

``simulate_top(project, samples, seed)`` builds ``ecp5/fp_top.v`` with everything it reads (the
UART, the sample FIFO, the fabric joining the cores, every core's layers and ROMs: the files
``make bitstream`` synthesises) in Icarus under the cocotb UART testbench
(``fpgaplace.testbenches.uart_top_tb``): random int8 samples go in as 8N1 bytes at the board's
baud, the result's bytes come back on ``uart_tx``. It compares them with the integer reference
of the cores chained as design.json joins them (``model_reference``) and the clock cycles a
sample takes, first start bit in to last stop bit out, with the event simulator's latency of a
sample (``fpgaplace.sim.event``) less the host link's fixed latency, which is the USB bridge's
timer on the host side and not in the FPGA. Simulation is O(bits on the wire + cycles).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fpgaplace.project.arrays import load_arrays
from fpgaplace.project.board import project_board
from fpgaplace.project.layout import ECP5_DIR, HOST_DEVICE, RTL_DIR, cell_name
from fpgaplace.project.record import DesignRecord, load
from fpgaplace.sim.event import simulate
from fpgaplace.sim.rtl import run_cocotb
from fpgaplace.sim.rtl_project import core_reference
from fpgaplace.util.errors import FpgaplaceError

UART_TESTBENCH = "fpgaplace.testbenches.uart_top_tb"
TOP, TOP_FILES = "fp_top", ("fp_top.v", "fp_uart.v", "fp_fabric.v")


@dataclass(frozen=True)
class TopResult:
    """The top over the UART: bytes equal to the reference or not, and cycles beside the model's."""

    samples: int
    bit_exact: bool
    cycles: list[float]  # per sample: its first start bit in to its result's last stop bit out
    model_cycles: float  # the event sim's latency of a sample, less the host link's fixed latency

    @property
    def cycle_error(self) -> float:
        """The last sample's cycles relative to the model's (0.05: 5% more)."""
        return self.cycles[-1] / self.model_cycles - 1


def model_reference(project: Path, design: DesignRecord, sample: np.ndarray) -> np.ndarray:
    """The integer result of one sample (the model's input, int8) through every core's reference,
    cores fed as design.json joins them (a core runs once all its inputs are known); the output no
    core reads. O(cores^2 + the cores' reference work)."""
    produced = {name for core in design.cores for t in core.outputs for name in t.names}
    consumed = {name for core in design.cores for t in core.inputs for name in t.names}
    values = {t.name: np.asarray(sample, dtype=np.int8).reshape(-1)
              for core in design.cores for t in core.inputs if not t.names & produced}
    waiting = list(design.cores)
    while waiting:
        ready = [core for core in waiting if all(_known(t.names, values) for t in core.inputs)]
        if not ready:
            raise FpgaplaceError(f"{project}: design.json cores {', '.join(c.name for c in waiting)} wait on "
                                 "tensors no core produces")
        for core in ready:
            inputs = [values[_known(t.names, values)] for t in core.inputs]
            results = core_reference(core, load_arrays(project, core), inputs)
            values |= {t.name: x for t, x in zip(core.outputs, results, strict=True)}
            waiting.remove(core)
    (output,) = [values[t.name] for core in design.cores for t in core.outputs if not t.names & consumed]
    return output


def _known(names: set[str], values: dict[str, np.ndarray]) -> str | None:
    return next((name for name in sorted(names) if name in values), None)


def top_sources(project: Path, design: DesignRecord, folder: Path) -> list[Path]:
    """The top's Verilog and every core's (one copy of the shared library), copied with the ROMs
    into ``folder``, where the simulator runs; a one-line error when compile wrote no ECP5 top."""
    missing = [name for name in TOP_FILES if not (project / ECP5_DIR / name).is_file()]
    if missing:
        raise FpgaplaceError(f"{project / ECP5_DIR}: missing {', '.join(missing)}; expected the ECP5 top "
                             "compile writes for a board with an ecp5 section")
    for core in design.cores:
        shutil.copytree(project / RTL_DIR / cell_name(core.name), folder, dirs_exist_ok=True)
    for name in TOP_FILES:
        shutil.copy(project / ECP5_DIR / name, folder / name)
    return sorted(folder.glob("*.v"))


def simulate_top(project: Path, samples: int = 1, seed: int = 0, folder: Path | None = None) -> TopResult:
    """Send ``samples`` random samples through the project's board top over the UART (see the
    module docstring); ``folder`` keeps the build (a temporary one otherwise)."""
    project = Path(project)
    design = load(project)
    board = project_board(design)
    if board.ecp5 is None or board.host is None:
        raise FpgaplaceError(f"{project}: board {board.name} has no ecp5 section; expected an ECP5 board's project")
    sizes = [t.bytes for t in design.transfers if t.from_device == HOST_DEVICE]
    if len(sizes) != 1:
        raise FpgaplaceError(f"{project}: {len(sizes)} transfers from the host; expected the UART's one")
    rng = np.random.default_rng(seed)
    inputs = [rng.integers(-128, 128, size=sizes[0]).astype(np.int8) for _ in range(samples)]
    expected = [model_reference(project, design, x).astype(np.int64) & 0xFF for x in inputs]
    sample_bytes = [(np.asarray(x, dtype=np.int64).reshape(-1) & 0xFF).tolist() for x in inputs]
    clock_hz = board.ecp5.clock_mhz * 1e6
    link_bits = max(len(sample_bytes[0]), len(expected[0])) * 10 * clock_hz / board.ecp5.baud
    compute = sum(core.interval_cycles for core in design.cores)
    job = {"clock_hz": clock_hz, "baud": board.ecp5.baud, "samples": sample_bytes,
           "output_bytes": len(expected[0]), "cycle_limit": int(4 * (link_bits + compute) + 10000)}
    with tempfile.TemporaryDirectory(prefix="fpgaplace-uart-top-") as scratch:
        where = Path(folder) if folder is not None else Path(scratch)
        where.mkdir(parents=True, exist_ok=True)
        results = run_cocotb(TOP, top_sources(project, design, where), where, job, seed, testbench=UART_TESTBENCH)
    got = np.asarray(results["outputs"], dtype=np.int64)
    bit_exact = bool(np.array_equal(got, np.concatenate(expected)))
    fixed_us = sum(board.host.latency_us for t in design.transfers if HOST_DEVICE in (t.from_device, t.to_device))
    model_us = simulate(project, 1).latency_us - fixed_us
    return TopResult(samples, bit_exact, [float(c) for c in results["cycles"]], model_us * board.ecp5.clock_mhz)
