"""The RTL op library: an op's Verilog rendered from its kernel's values (``hls_templates/rtl``).

``render_op(kernel, config, arrays, folding, model_cycles)`` asks the kernel
(``fpgaplace.hw``: ``Kernel.rtl``) for its template, values, ROMs and stream ports and renders
them into an ``OpModule``: the files of a synthesizable Verilog-2005 module (with the shared
library ``fp_lib.v``: gearbox, FIFO, fork, requantizer) and its ``$readmemh`` data files, and
its ports. ``fpgaplace.codegen.rtl_project`` wires a core's layers into one top;
``fpgaplace.sim.rtl`` simulates what is rendered here and ``fpgaplace.sim.yosys`` synthesizes it.

Rendering is O(the ROMs: weights for a dot product); the ROM text is written by numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fpgaplace.board.model import FpgaCore
from fpgaplace.hw import KERNELS, Folding
from fpgaplace.hw.dense import Dense
from fpgaplace.hw.geometry import Rom, RtlUnit
from fpgaplace.hw.kernel import Lanes
from fpgaplace.hw.registry import rtl_kernels
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.templates import environment

HEX_DIGITS = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
LIBRARY_FILE = "fp_lib.v"


@dataclass(frozen=True)
class RtlModule:
    """A rendered module: its top name and its files (Verilog sources and ``$readmemh`` data)."""

    top: str
    files: dict[str, str]

    @property
    def sources(self) -> list[str]:
        return [name for name in self.files if name.endswith(".v")]

    def write(self, folder: Path) -> list[Path]:
        """Write every file into ``folder``; returns the Verilog sources' paths."""
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in self.files.items():
            (folder / name).write_text(text)
        return [folder / name for name in self.sources]


@dataclass(frozen=True)
class Port:
    """A stream port: its name, int8 elements a beat and elements a vector (one sample)."""

    name: str
    elems: int
    length: int

    def to_json(self) -> dict[str, Any]:
        return {"port": self.name, "elems": self.elems, "length": self.length}


@dataclass(frozen=True)
class OpModule:
    """A rendered op: its files (``module``, the shared library included) and its stream ports
    (inputs in operand order)."""

    module: RtlModule
    inputs: tuple[Port, ...]
    output: Port


def library() -> dict[str, str]:
    """The shared modules (``hls_templates/rtl/lib.v.j2``): gearbox, FIFO, fork, requantizer."""
    return {LIBRARY_FILE: environment().get_template("rtl/lib.v.j2").render()}


def hex_words(words: list[int], bits: int) -> str:
    """``$readmemh`` text: one word a line, ``ceil(bits/4)`` hex digits, most significant first."""
    digits = math.ceil(bits / 4)
    return "".join(f"{word:0{digits}x}\n" for word in words)


def byte_lanes_hex(rows: np.ndarray) -> str:
    """``$readmemh`` text of int8 lanes, one row a word with lane ``j`` in bits ``[8*j +: 8]``
    (what ``hex_words`` of ``pack_lanes(row, 8)`` gives): every byte's two digits and every line's
    newline written by numpy into one buffer, since a large core's weights are millions of lanes."""
    as_bytes = np.asarray(rows, dtype=np.int8).view(np.uint8)[:, ::-1]
    count, width = as_bytes.shape
    text = np.empty((count, 2 * width + 1), dtype=np.uint8)
    text[:, 0:2 * width:2] = HEX_DIGITS[as_bytes >> 4]
    text[:, 1:2 * width:2] = HEX_DIGITS[as_bytes & 15]
    text[:, -1] = ord("\n")
    return text.tobytes().decode("ascii")


def rom_text(rom: Rom) -> str:
    return byte_lanes_hex(rom.words) if rom.bits == 0 else hex_words(rom.words, rom.bits)


def render_unit(unit: RtlUnit, top: str) -> OpModule:
    """The files and ports of a kernel's ``RtlUnit`` named ``top``."""
    verilog = environment().get_template(unit.template).render(**unit.values)
    files = {**library(), f"{top}.v": verilog, **{name: rom_text(rom) for name, rom in unit.roms.items()}}
    return OpModule(RtlModule(top, files), tuple(Port(*port) for port in unit.inputs), Port(*unit.output))


def render_op(kernel: str, config: dict[str, Any], arrays: dict[str, Any], folding: Folding, model_cycles: int,
              top: str | None = None, macs_per_dsp: int = 1, core: FpgaCore | None = None) -> OpModule:
    """The RTL of one layer of a core (``design.json``'s kernel, config, folding and cycles) on
    ``core`` (``Kernel.rtl``: its lanes as the cost model priced them; None: the default price)."""
    top = top or f"fp_{kernel}"
    if kernel not in rtl_kernels():
        raise FpgaplaceError(f"rtl {top}: no RTL template for kernel {kernel!r} (have {', '.join(rtl_kernels())})")
    return render_unit(KERNELS[kernel].rtl(config, arrays, folding, top, model_cycles, macs_per_dsp, core), top)


def render_dense(config: dict[str, Any], arrays: dict[str, Any], top: str = "fp_dense",
                 macs_per_dsp: int = 1, lanes: Lanes | None = None) -> RtlModule:
    """The dense unit for ``config`` (``K, N, ZX, ZY, LO, HI, PE, SIMD``, optionally the widths
    ``WB, XB, XU``) and ``arrays`` (``Dense.rtl_values``, with its ``lanes``): ``{top}.v``, its
    weight and channel ROMs and the library. O(N*K)."""
    dense = KERNELS["dense"]
    assert isinstance(dense, Dense)
    return render_unit(dense.rtl_values(config, arrays, top, macs_per_dsp, lanes), top).module
