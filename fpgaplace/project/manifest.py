"""``manifest.json`` of a split folder: the submodels in execution order, their devices and the
tensors between them. ``flow.split`` writes it; the C simulation, the event simulation, the host
driver's samples and the Ray cluster read it, so it lives below all of them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from fpgaplace.model.passes.transfers import Transfer
from fpgaplace.util.errors import FpgaplaceError

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = "fpgaplace-split/1"
GRAPH_INPUT = ""  # the "source submodel" of a tensor that is a graph input


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
    def from_dict(data: dict, where: str = MANIFEST_NAME) -> Manifest:
        if data.get("format") != MANIFEST_FORMAT:
            raise FpgaplaceError(f"{where}: field 'format' is {data.get('format')!r}, "
                                 f"expected {MANIFEST_FORMAT!r}")
        return Manifest(data["source"], data["devices"], data["graph_inputs"],
                        data["graph_outputs"], [SubmodelInfo(**s) for s in data["submodels"]],
                        [Transfer.from_dict(t) for t in data["transfers"]], data["stats"])

    @staticmethod
    def load(manifest_dir: Path) -> Manifest:
        path = Path(manifest_dir) / MANIFEST_NAME
        if not path.is_file():
            raise FpgaplaceError(f"{path}: no split manifest here (run the split first)")
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise FpgaplaceError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") \
                from exc
        return Manifest.from_dict(data, str(path))
