"""Project build scripts (Vivado block design or Vitis link config, Makefile) from design.json.

Being written (issue 8); until then it writes nothing.
"""

from __future__ import annotations

from pathlib import Path


def write_build_scripts(document: dict, folder: Path) -> None:
    """Write the build scripts of the project whose ``design.json`` is ``document`` into ``folder``."""
