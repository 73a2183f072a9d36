"""``design.json``, the project's single record: its file name, format, reader, and the physical
link each of its transfers occupies. Light on imports: the later stages (sim, report, flash)
read projects without loading the compile step."""

from __future__ import annotations

import json
from pathlib import Path

from fpgaplace.util.errors import FpgaplaceError

DESIGN_FILE = "design.json"
DESIGN_FORMAT = 1


def load_design(project: Path) -> dict:
    """Read ``design.json`` of a project; one-line errors for a missing or broken file."""
    path = Path(project) / DESIGN_FILE
    if not path.is_file():
        raise FpgaplaceError(f"{project}: no {DESIGN_FILE}; expected a folder written by `fpgaplace compile`")
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise FpgaplaceError(f"{path}: not readable JSON ({error})") from None
    if not isinstance(document, dict) or document.get("format") != DESIGN_FORMAT or "cores" not in document:
        raise FpgaplaceError(f"{path}: not a design.json of format {DESIGN_FORMAT}")
    return document


def transfer_channel(transfer: dict, nodes: dict[str, str]) -> str:
    """The physical link a transfer occupies (transfers on one channel take turns): an AXI
    stream is point to point; DRAM and host links are one per node; the network one per
    direction between two nodes. ``nodes`` maps device names to their node."""
    kind, source, target = transfer.get("link", "link"), transfer["from_device"], transfer["to_device"]
    if kind == "stream":
        return f"stream {source}->{target}"
    a, b = nodes.get(source, "?"), nodes.get(target, "?")
    return f"{kind} {a}" if a == b else f"{kind} {a}->{b}"
