"""The project's host code (the PYNQ driver) from design.json.

Being written (issue 8); until then it writes nothing.
"""

from __future__ import annotations

from pathlib import Path


def write_host_driver(document: dict, folder: Path) -> None:
    """Write the host driver of the project whose ``design.json`` is ``document`` into ``folder``."""
