#!/usr/bin/env python3
"""Check that fpgaplace's imports run one way: no cycle, no arrow against the layer order.

The layers, top to bottom (DESIGN.md, "Target layout"); a module may import its own package and
any package of a lower layer, never one of its own layer's siblings or anything above it:

    cli > flow > report > codegen | sim | deploy > project > place > hw > model | board > util

(the report draws the event simulator's schedule, so it sits above the simulators).

Every ``import`` and ``from ... import`` statement counts, at module level or inside a function
(a deferred import still runs) or under ``TYPE_CHECKING`` (it still says which way the
dependency points). The package root ``fpgaplace/__init__.py`` is the Python API: it sits above
every layer, and a module may read ``fpgaplace.__version__`` from it.

Cycles are the strongly connected components of the module graph with more than one module
(Tarjan, O(modules + imports), ``fpgaplace.util.graphs.strong_components``). Prints one line per violation and
exits 1 if there is any; ``--json`` prints the same as a JSON document.

    python scripts/check_imports.py [--json] [--root PATH]
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "fpgaplace"
LAYERS: tuple[tuple[str, ...], ...] = (  # bottom first
    ("util",),
    ("model", "board"),
    ("hw",),
    ("place",),
    ("project",),
    ("codegen", "sim", "deploy"),
    ("report",),
    ("flow",),
    ("cli",),
)
RANK = {package: rank for rank, packages in enumerate(LAYERS) for package in packages}
ROOT_NAMES_ANYONE_MAY_READ = frozenset({"__version__"})


@dataclass(frozen=True)
class Arrow:
    """One import: ``source`` module imports ``target`` module at ``line``."""

    source: str
    target: str
    line: int


def module_names(package_dir: Path) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    names = {}
    for path in package_dir.rglob("*.py"):
        parts = path.relative_to(package_dir.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def _absolute(module: str | None, level: int, source: str, is_package: bool) -> str:
    if not level:
        return module or ""
    base = source.split(".") if is_package else source.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def arrows(names: dict[str, Path]) -> list[Arrow]:
    """Every import between two modules of the package. ``from a import b`` points at ``a.b``
    when that is a module, else at ``a``. O(size of the source)."""
    found = []
    for source, path in sorted(names.items()):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node.module, node.level, source, path.name == "__init__.py")
                read = [a.name for a in node.names if not (base == PACKAGE and a.name in ROOT_NAMES_ANYONE_MAY_READ)]
                targets = [f"{base}.{name}" if f"{base}.{name}" in names else base for name in read]
            else:
                continue
            for target in targets:
                if target == PACKAGE or target.startswith(PACKAGE + "."):
                    while target not in names and "." in target:
                        target = target.rsplit(".", 1)[0]
                    if target != source:
                        found.append(Arrow(source, target, node.lineno))
    return sorted(set(found), key=lambda a: (a.source, a.line, a.target))


def layer_of(module: str) -> str | None:
    """The layer package of a module (``fpgaplace.place.cost`` -> ``place``); None for the root."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def against_the_layers(found: list[Arrow]) -> list[str]:
    """Arrows that point up, or sideways to a sibling package of the same layer."""
    problems = []
    for arrow in found:
        source, target = layer_of(arrow.source), layer_of(arrow.target)
        if source is None or source == target:
            continue
        if source not in RANK or target not in RANK:
            unknown = source if source not in RANK else target
            problems.append(f"{arrow.source}:{arrow.line} -> {arrow.target}: package '{unknown}' has no layer")
        elif target is None or RANK[target] >= RANK[source]:
            way = "sideways" if target is not None and RANK[target] == RANK[source] else "up"
            problems.append(f"{arrow.source}:{arrow.line} -> {arrow.target}: points {way} ({source} -> {target})")
    return problems


def cycles(found: list[Arrow], names: dict[str, Path]) -> list[list[str]]:
    """The strongly connected components with more than one module, each sorted."""
    sys.path.insert(0, str(ROOT))
    from fpgaplace.util.graphs import strong_components

    order = sorted(names)
    index = {name: i for i, name in enumerate(order)}
    edges = sorted({(index[a.source], index[a.target]) for a in found})
    members: dict[int, list[str]] = {}
    for name, component in zip(order, strong_components(len(order), edges), strict=True):
        members.setdefault(int(component), []).append(name)
    return sorted(c for c in members.values() if len(c) > 1)


def check(root: Path = ROOT) -> dict:
    """The import graph's violations: ``{"modules", "imports", "against_layers", "cycles"}``."""
    names = module_names(root / PACKAGE)
    found = arrows(names)
    return {
        "modules": len(names),
        "imports": len(found),
        "against_layers": against_the_layers(found),
        "cycles": cycles(found, names),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this one)")
    args = parser.parse_args(argv)
    result = check(args.root)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for line in result["against_layers"]:
            print(f"layer: {line}")
        for component in result["cycles"]:
            print(f"cycle: {' <-> '.join(component)}")
        bad = len(result["against_layers"]) + len(result["cycles"])
        print(f"{result['modules']} modules, {result['imports']} imports: "
              f"{len(result['against_layers'])} against the layers, {len(result['cycles'])} cycles"
              + ("" if bad else " (ok)"))
    return 1 if result["against_layers"] or result["cycles"] else 0


if __name__ == "__main__":
    sys.exit(main())
