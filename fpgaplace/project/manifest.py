"""The split's manifest (``split/manifest.json``): the pieces of the model in execution order, each
on one device with its inputs (and the piece each comes from) and outputs, the transfers between
them, the graph inputs and outputs. ``fpgaplace.flow.split`` writes it; the simulators, the
cluster runner and flash read it through ``Manifest.load``, which checks its fields: a missing or
damaged manifest is one ``FpgaplaceError`` line naming the file and the field. O(size of the file).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fpgaplace.model.passes.transfers import Transfer
from fpgaplace.project.layout import MANIFEST_FILE
from fpgaplace.util.errors import FpgaplaceError

MANIFEST_FORMAT = "fpgaplace-split/1"


@dataclass
class SubmodelInfo:
    """One piece of the split: which nodes, on which device, reading and writing what."""

    name: str
    file: str
    device: str
    nodes: list[str]
    inputs: list[str]
    outputs: list[str]
    sources: dict[str, str]  # input tensor -> producing submodel ("" = graph input)


@dataclass
class Manifest:
    """The split's pipeline: submodels in execution order and the tensors between them."""

    source: str
    devices: list[str]
    graph_inputs: list[dict]
    graph_outputs: list[dict]
    submodels: list[SubmodelInfo]
    transfers: list[Transfer]
    stats: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "format": MANIFEST_FORMAT, "source": self.source, "devices": self.devices,
            "graph_inputs": self.graph_inputs, "graph_outputs": self.graph_outputs,
            "submodels": [vars(s) for s in self.submodels],
            "transfers": [t.to_dict() for t in self.transfers], "stats": self.stats,
        }

    @staticmethod
    def from_dict(data: Any, where: str = MANIFEST_FILE) -> Manifest:
        if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
            found = data.get("format") if isinstance(data, dict) else data
            raise FpgaplaceError(f"{where}: field 'format' is {found!r}, expected {MANIFEST_FORMAT!r}")
        try:
            manifest = Manifest(data["source"], data["devices"], data["graph_inputs"],
                                data["graph_outputs"], [SubmodelInfo(**s) for s in data["submodels"]],
                                [Transfer.from_dict(t) for t in data["transfers"]], data["stats"])
        except KeyError as error:
            raise FpgaplaceError(f"{where}: no field {error}; expected a manifest written by the split") from None
        except TypeError as error:
            raise FpgaplaceError(f"{where}: {error}; expected a manifest written by the split") from None
        _check(manifest, where)
        return manifest

    @staticmethod
    def load(manifest_dir: Path) -> Manifest:
        path = Path(manifest_dir) / MANIFEST_FILE
        if not path.is_file():
            raise FpgaplaceError(f"{path}: no split manifest here (run the split first)")
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise FpgaplaceError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") \
                from exc
        except (OSError, ValueError, RecursionError) as exc:
            raise FpgaplaceError(f"{path}: not readable ({exc})") from None
        return Manifest.from_dict(data, str(path))


def _names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _check(manifest: Manifest, where: str) -> None:
    """Names are strings; graph inputs and outputs are objects with a name."""
    for index, piece in enumerate(manifest.submodels):
        texts = (piece.name, piece.file, piece.device)
        if not (all(isinstance(text, str) for text in texts) and _names(piece.nodes) and _names(piece.inputs)
                and _names(piece.outputs) and isinstance(piece.sources, dict)
                and _names([*piece.sources, *piece.sources.values()])):
            raise FpgaplaceError(f"{where}: submodels[{index}]: expected its names as strings")
    for key in ("graph_inputs", "graph_outputs"):
        entries = getattr(manifest, key)
        if not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(e.get("name"), str)
                                                    for e in entries):
            raise FpgaplaceError(f"{where}: {key}: expected a list of tensors, each with a name")
