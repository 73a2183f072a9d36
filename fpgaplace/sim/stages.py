"""A project's stages (each layer of each core) for the checks that go stage by stage: yosys
(``fpgaplace.sim.yosys``) and RTL simulation (``fpgaplace.sim.rtl_project``) of each layer's
module alone, at its folding, so that the checks scale with the design (a stage's tool run is
small, the runs go side by side, ``fpgaplace.util.tools.run_parallel``, and identical stages
are checked once).

``select(design, patterns)`` picks stages by comma-separated shell patterns matched against
``core/op``, ``core/index`` and ``core/kernel`` (``core0/*``, ``*/conv_5``, ``*/conv2d``);
``layer_modules`` reads each layer's Verilog as compile wrote it; ``cached`` keeps a check's
result under ``results/cache/<kind>/<key>.json``, the key a hash of everything the check reads
(``content_key``: the module's files, the tool's command, the stimuli), written atomically.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from fpgaplace.project.layout import RESULTS_DIR, RTL_DIR, cell_name
from fpgaplace.project.record import Core, DesignRecord, Layer
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.files import write_file

CACHE_DIR = "cache"
LIBRARY_FILE = "fp_lib.v"  # the shared modules every layer instantiates, beside a core's layers


class Module(Protocol):
    """A rendered Verilog module (``fpgaplace.codegen.rtl.RtlModule``): its top and its files
    (Verilog sources and ``$readmemh`` data) by name."""

    top: str
    files: dict[str, str]


@dataclass(frozen=True)
class LayerModule:
    """A layer's module read back from a project's ``rtl/<core>/``."""

    top: str
    files: dict[str, str]


@dataclass(frozen=True)
class StageRef:
    """One layer of one core."""

    core: Core
    index: int
    layer: Layer

    @property
    def name(self) -> str:
        return f"{self.core.name}/{self.layer.op}"

    def labels(self) -> tuple[str, ...]:
        """What a pattern is matched against."""
        core = self.core.name
        return (f"{core}/{self.layer.op}", f"{core}/{self.index}", f"{core}/{self.layer.kernel}")


@dataclass(frozen=True)
class Cut:
    """A stage cut to the first ``rows`` output rows of its frame (``Kernel.cut_rows``): its config,
    its module (the layer's own Verilog rendered again with only the frame height changed) and its
    stream ports as ``sim/<core>/stages.json`` gives a layer's."""

    rows: int
    config: dict[str, Any]
    module: Module
    ports: dict[str, Any]


def select(design: DesignRecord, patterns: str | None) -> list[StageRef]:
    """The stages of ``design`` (in core and layer order) matching any of the comma-separated
    ``patterns`` (every stage when None); a pattern that matches none is a one-line error."""
    stages = [StageRef(core, i, layer) for core in design.cores for i, layer in enumerate(core.layers)]
    if patterns is None:
        return stages
    wanted = [p.strip() for p in patterns.split(",") if p.strip()]
    if not wanted:
        raise FpgaplaceError("stages: expected patterns such as core0/*, */conv_5 or */conv2d, got none")
    for pattern in wanted:
        if not any(fnmatch.fnmatchcase(label, pattern) for stage in stages for label in stage.labels()):
            names = ", ".join(stage.name for stage in stages[:6])
            raise FpgaplaceError(f"stages: {pattern!r} matches no stage (core/op, core/index or core/kernel; "
                                 f"e.g. {names})")
    return [s for s in stages if any(fnmatch.fnmatchcase(label, p) for label in s.labels() for p in wanted)]


def layer_modules(project: Path, record: Core) -> list[Module]:
    """Each layer's module of a core as compile wrote it (``rtl/<core>/<core>_<i>_<kernel>.v``, its
    ROMs ``<core>_<i>_<kernel>_*.mem``) with the shared library; a one-line error where compile
    left no RTL for the core."""
    core = cell_name(record.name)
    folder = project / RTL_DIR / core
    if (folder / "README.txt").is_file():
        reason = (folder / "README.txt").read_text().strip()
        raise FpgaplaceError(f"{folder}: no RTL for core {record.name}: {reason}")
    if not (folder / LIBRARY_FILE).is_file():
        raise FpgaplaceError(f"{folder}: missing {LIBRARY_FILE}; expected the core's RTL (compile writes it)")
    names = sorted(path.name for path in folder.iterdir())
    modules: list[Module] = []
    for i, layer in enumerate(record.layers):
        top = f"{core}_{i}_{layer.kernel}"
        own = [name for name in names if name == f"{top}.v" or name.startswith(f"{top}_")]
        if f"{top}.v" not in own:
            raise FpgaplaceError(f"{folder}: missing {top}.v; expected layer {i}'s RTL (compile writes it)")
        modules.append(LayerModule(top, {name: (folder / name).read_text() for name in [LIBRARY_FILE, *own]}))
    return modules


def content_key(*parts: Any) -> str:
    """A hash of ``parts`` (strings, or anything JSON takes), O(their size)."""
    digest = hashlib.sha256()
    for part in parts:
        text = part if isinstance(part, str) else json.dumps(part, sort_keys=True)
        digest.update(len(text).to_bytes(8, "little"))
        digest.update(text.encode())
    return digest.hexdigest()[:32]


def module_key(module: Module, *parts: Any) -> str:
    """``content_key`` of a module's top, every file with its name, and ``parts``; the top's name
    does not count (``<core>_<i>`` differ between identical stages), so its occurrences are
    replaced by a placeholder first."""
    body = {name.replace(module.top, "@"): text.replace(module.top, "@") for name, text in module.files.items()}
    return content_key(body, *parts)


def cached(project: Path, kind: str, key: str, compute: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any], bool]:
    """``compute()``'s result stored under ``results/cache/<kind>/<key>.json`` (atomically), or the
    one stored there before; and whether it came from the cache."""
    path = project / RESULTS_DIR / CACHE_DIR / kind / f"{key}.json"
    if path.is_file():
        try:
            return json.loads(path.read_text()), True
        except (OSError, ValueError):
            pass  # unreadable: compute again
    value = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_file(path, json.dumps(value) + "\n")
    return value, False
