"""The stream testbench's stimulus and capture as Verilog (``hls_templates/rtl/stream_harness.v.j2``),
so that a simulation runs no Python a cycle.

The cocotb stream test once drove every port from Python at every clock edge: three simulator
callbacks a cycle, about 30,000 cycles a second whatever the simulator, which made Verilator no
faster than Icarus on ResNet-50's stages (a 4,000-LUT conv band: 75 s for 2.8 M cycles, build
18 s). The harness keeps the job's semantics (``fpgaplace.testbenches.rtl_stream_tb``: per
phase a reset, inputs offered with probability 1 - gap and held until accepted, outputs ready
with probability 1 - backpressure, the cycle each vector's last beat left, a cycle limit) in
the simulator itself; its random draws are xorshift32 seeded from the job's seed, not Python's.

``write(top, job, folder, seed)`` writes ``stream_harness.v`` and the input words (``in<k>.hex``)
into ``folder``; ``read(job, folder)`` reads what the harness wrote back as the stream test's
results (per phase: each output port's int8 elements, the done cycles, the cycles run). Both
O(elements of the job).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.templates import environment

TOP = "stream_harness"
TEMPLATE = "rtl/stream_harness.v.j2"
CLOCK_PERIOD = 10  # time units (ns under the runner's timescale) of the harness' own clock
RESET_CYCLES = 4  # rising edges a phase holds the DUT in reset
DRAW_SCALE = 1 << 16  # a draw is 16 bits: offered/ready where draw >= probability x DRAW_SCALE
DONE_FILE = "done.txt"
PHASE_END = "-"
JOB_KEYS = ("inputs", "outputs", "cycle_limit", "phases")  # the line closing a phase in an output file


def beat_hex(vectors: list[list[int]], elems: int) -> list[str]:
    """The beats of ``vectors`` (int8 elements, ``elems`` a beat, element i in bits [8i +: 8];
    a vector's last beat may be short) as hex words, vector after vector. O(elements)."""
    words: list[str] = []
    for vector in vectors:
        values = np.asarray(vector, dtype=np.int64).astype(np.uint8)
        padded = np.zeros(-(-len(values) // elems) * elems, dtype=np.uint8)
        padded[:len(values)] = values
        text = padded.reshape(-1, elems)[:, ::-1].tobytes().hex()
        words.extend(text[i:i + 2 * elems] for i in range(0, len(text), 2 * elems))
    return words


def seed_of(seed: int, stream: int) -> int:
    """A nonzero xorshift32 state for ``stream`` (a port) of job seed ``seed``."""
    state = (seed * 0x9E3779B1 + (stream + 1) * 0x85EBCA6B) & 0xFFFFFFFF
    return state or 0x2545F491


def write(top: str, job: dict[str, Any], folder: Path, seed: int) -> list[Path]:
    """Write the harness around ``top`` for ``job`` (the stream test's: ``inputs``, ``outputs``,
    ``cycle_limit``, ``phases``) into ``folder``: ``stream_harness.v`` and ``in<k>.hex``; the
    Verilog source written. O(elements of the job)."""
    missing = [key for key in JOB_KEYS if key not in job]
    if missing:
        raise FpgaplaceError(f"rtl harness: the job for {top} has no {', '.join(missing)}; "
                             f"expected {', '.join(JOB_KEYS)}")
    phases = job["phases"]
    inputs, bases = [], [[0] * len(job["inputs"]) for _ in phases]
    counts = [[0] * len(job["inputs"]) for _ in phases]
    for k, spec in enumerate(job["inputs"]):
        words: list[str] = []
        for p, phase in enumerate(phases):
            beats = beat_hex(phase["inputs"][k], spec["elems"])
            bases[p][k], counts[p][k] = len(words), len(beats)
            words.extend(beats)
        (folder / f"in{k}.hex").write_text("\n".join(words or ["0"]) + "\n")
        inputs.append({"name": spec["port"], "width": 8 * spec["elems"], "words": max(1, len(words)),
                       "seed": seed_of(seed, k)})
    outputs = [{"name": spec["port"], "width": 8 * spec["elems"], "beats": max(1, spec["length"] // spec["elems"]),
                "seed": seed_of(seed, len(inputs) + k)} for k, spec in enumerate(job["outputs"])]
    settings = [{"gap": threshold(phase["gap"]), "backpressure": threshold(phase["backpressure"]),
                 "vectors": len(phase["inputs"][0]) if phase["inputs"] else 0, "bases": bases[p], "words": counts[p]}
                for p, phase in enumerate(phases)]
    text = environment().get_template(TEMPLATE).render(
        dut=top, inputs=inputs, outputs=outputs, phases=settings, cycle_limit=int(job["cycle_limit"]),
        reset_cycles=RESET_CYCLES, clock_period=CLOCK_PERIOD)
    path = folder / f"{TOP}.v"
    path.write_text(text)
    return [path]


def threshold(probability: float) -> int:
    """The draw threshold of a gap or backpressure ``probability`` in [0, 1]."""
    if not 0.0 <= probability <= 1.0:
        raise FpgaplaceError(f"rtl harness: a gap or backpressure is a probability in [0, 1], got {probability}")
    return round(probability * DRAW_SCALE)


def read(job: dict[str, Any], folder: Path) -> list[dict[str, Any]]:
    """The stream test's results from the files the harness wrote in ``folder``: per phase its
    name, each output port's int8 elements, the done cycles and the cycles run. A beat with an
    unknown bit (x or z) is a one-line error. O(elements)."""
    done = _phase_blocks((folder / DONE_FILE).read_text().split("\n"), lambda line: line.startswith("end "))
    ports = [_phase_blocks((folder / f"out{k}.hex").read_text().split("\n"), lambda line: line == PHASE_END)
             for k in range(len(job["outputs"]))]
    results = []
    for p, phase in enumerate(job["phases"]):
        lines = done[p] if p < len(done) else []
        cycles = int(lines[-1].split()[1]) if lines and lines[-1].startswith("end ") else 0
        outputs = [_elements(blocks[p] if p < len(blocks) else [], spec, phase["name"])
                   for blocks, spec in zip(ports, job["outputs"], strict=True)]
        results.append({"name": phase["name"], "outputs": outputs,
                        "done_cycles": [int(line) for line in lines[:-1]], "cycles": cycles})
    return results


def _phase_blocks(lines: list[str], closes: Any) -> list[list[str]]:
    """``lines`` split into phases, each block ending with the line ``closes`` accepts (kept in
    the block; an unclosed tail is a block too)."""
    blocks: list[list[str]] = [[]]
    for line in (line.strip() for line in lines):
        if not line:
            continue
        blocks[-1].append(line)
        if closes(line):
            blocks.append([])
    return blocks if blocks[-1] else blocks[:-1]


def _elements(lines: list[str], spec: dict[str, Any], phase: str) -> list[int]:
    """An output port's beats (hex lines, the closing line dropped) as int8 elements, ``elems`` a
    beat (element i in bits [8i +: 8])."""
    beats = [line for line in lines if line != PHASE_END]
    unknown = next((i for i, line in enumerate(beats) if set(line.lower()) - set("0123456789abcdef")), None)
    if unknown is not None:
        raise FpgaplaceError(f"rtl: {spec['port']} drove an unknown value (x or z) in beat {unknown} of phase "
                             f"{phase}: {beats[unknown]}")
    elems = spec["elems"]
    raw = np.frombuffer(bytes.fromhex("".join(line.zfill(2 * elems)[-2 * elems:] for line in beats)), dtype=np.int8)
    return raw.reshape(-1, elems)[:, ::-1].reshape(-1).astype(int).tolist()
