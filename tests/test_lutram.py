"""A written memory alone through yosys 0.23 ``synth_xilinx`` on 7-series and UltraScale+: the memory
rule of ``fpgaplace.hw.memory`` (``yosys_lutram``, ``yosys_lutram_layout``, ``yosys_lutram_luts``) picks
LUTRAM or a RAMB18 as yosys does, as many LUTRAM cells, and their LUTs within 25 %."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fpgaplace.hw.memory import YOSYS_LUTRAMS, yosys_lutram, yosys_lutram_layout, yosys_lutram_luts
from fpgaplace.sim import yosys

LUTRAM_CELLS = {"xc7": ("RAM64M", "RAM32M"), "xcup": ("RAM64M8", "RAM32M16")}


@dataclass(frozen=True)
class Memory:
    """A simple dual-port memory of ``depth`` words of ``width`` bits with a registered read, as the
    window unit's line-buffer banks are written and read."""

    width: int
    depth: int
    top: str = "memory"
    files: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        bits = max(1, math.ceil(math.log2(self.depth)))
        text = (f"module {self.top}(input clk, input we, input [{bits - 1}:0] wa, input [{bits - 1}:0] ra,\n"
                f"  input [{self.width - 1}:0] d, output reg [{self.width - 1}:0] q);\n"
                f"  reg [{self.width - 1}:0] words [0:{self.depth - 1}];\n"
                "  always @(posedge clk) begin\n    if (we) words[wa] <= d;\n    q <= words[ra];\n  end\n"
                "endmodule\n")
        self.files[f"{self.top}.v"] = text


@pytest.mark.parametrize("family", sorted(YOSYS_LUTRAMS))
@pytest.mark.parametrize(("width", "depth"), [(2, 80), (1, 160), (4, 70), (16, 150), (2, 1280)])
def test_a_memory_is_built_in_the_cells_the_rule_picks(tmp_path: Path, family: str, width: int, depth: int):
    """2 x 80 bits: two RAM64M on xc7, three RAM32M16 on xcup; 16 x 150 and 2 x 1,280: a RAMB18 on
    xc7, LUTRAM on xcup (its cells cost all by the bits they use). A few seconds of yosys each."""
    got = yosys.synthesize(Memory(width, depth), tmp_path, family)
    cells = yosys.parse_stat(yosys.read_stat(tmp_path))
    lutram_cells = sum(cells.get(name, 0) for name in LUTRAM_CELLS[family])
    if not yosys_lutram(width, depth, family):
        assert got.bram36 > 0 and lutram_cells == 0, (got, cells)
        return
    _, rows, columns = yosys_lutram_layout(width, depth, family)
    assert got.bram36 == 0 and lutram_cells == rows * columns, (cells, rows, columns)
    priced = yosys_lutram_luts(width, depth, family)
    assert abs(priced - got.lut) <= 0.25 * got.lut, (priced, got)
