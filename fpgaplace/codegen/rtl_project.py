"""The project's RTL (per-core Verilog tops) and cocotb testbenches from design.json.

Being written (issue 9); until then it writes nothing.
"""

from __future__ import annotations

from pathlib import Path


def write_rtl_project(document: dict, folder: Path) -> None:
    """Write the RTL and testbenches of the project whose ``design.json`` is ``document`` into ``folder``."""
