"""How big the generated build scripts are: cells and connections of the Vivado block design
(ResNet-50 on zcu104) and of the Vitis link (a model on alveo-u280).

    python scripts/count_build_cells.py [--zynq resnet50:zcu104] [--alveo resnet50:alveo-u280]
                                        [--calib 2] [--json] [--keep DIR]

Each model is quantized on --calib random samples, placed with the defaults (analytic CPU
costs) and compiled into a temporary project. A Zynq project's ``create_project.tcl`` is run
under tclsh with the Vivado stand-ins of ``tests/tcl/vivado_standin.tcl``, and the record of its
calls is counted: cells = ``create_bd_cell`` calls, connections = ``connect_bd_intf_net`` +
``connect_bd_net`` calls. An Alveo project's ``link.cfg`` is parsed: cells = compute units of
its ``nk=`` lines, connections = ``sc=`` + ``sp=`` lines. One row per (board, model, node).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STANDIN = ROOT / "tests" / "tcl" / "vivado_standin.tcl"
sys.path.insert(0, str(ROOT / "scripts"))

from bench_compile import build_model  # noqa: E402  (ResNet-50 as the compile benchmark makes it)

from fpgaplace.flow.design import Design  # noqa: E402


def run_standin(script: Path, record: Path) -> list[list[str]]:
    """Run a generated create_project.tcl under tclsh with the Vivado stand-ins; its calls."""
    done = subprocess.run(["tclsh", str(STANDIN), str(script), str(record)], capture_output=True, text=True,
                          cwd=script.parent, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{script}: the stand-in run failed: {done.stderr.strip() or done.stdout.strip()}")
    return json.loads(record.read_text())


def parse_link_cfg(text: str) -> dict[str, list[str]]:
    """``key=value`` lines of a Vitis config by key (comments and section headers left out)."""
    entries: dict[str, list[str]] = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "[")) and "=" in line:
            key, value = line.split("=", 1)
            entries.setdefault(key.strip(), []).append(value.strip())
    return entries


def count_vivado(calls: list[list[str]]) -> dict[str, int]:
    cells = [c[-1] for c in calls if c[0] == "create_bd_cell"]
    return {"cells": len(cells),
            "connections": sum(c[0] in ("connect_bd_intf_net", "connect_bd_net") for c in calls),
            "dmas": sum(name.startswith("dma_") for name in cells),
            "fifos": sum(name.startswith("fifo_") for name in cells)}


def count_vitis(entries: dict[str, list[str]]) -> dict[str, int]:
    units = [cu for value in entries.get("nk", []) for cu in value.split(":")[2].split(".")]
    return {"cells": len(units), "connections": len(entries.get("sc", [])) + len(entries.get("sp", [])),
            "dmas": sum(cu.startswith("dma_") for cu in units),
            "fifos": sum(len(value.split(":")) == 3 for value in entries.get("sc", []))}  # core-to-core: with a depth


def measure(model_name: str, board: str, calib: int, folder: Path) -> list[dict]:
    design = Design(build_model(model_name), board, profile_cpu=False).quantized(random_samples=calib)
    design.place()
    project = folder / f"{model_name}-{board}"
    result = design.compile(project)
    document = result.design
    single = document["cores"][0]["node"] if document["cores"] else ""
    rows = []
    for script in sorted(project.glob("vivado/**/create_project.tcl")):
        node = single if script.parent.name == "vivado" else script.parent.name
        rows.append({"node": node, **count_vivado(run_standin(script, folder / "record.json"))})
    for config in sorted(project.glob("vitis/**/link.cfg")):
        node = single if config.parent.name == "vitis" else config.parent.name
        rows.append({"node": node, **count_vitis(parse_link_cfg(config.read_text()))})
    for row in rows:
        row.update(board=board, model=model_name, cores=len(document["cores"]))
    return rows


def print_table(rows: list[dict]) -> None:
    columns = ("board", "model", "node", "cores", "cells", "connections", "dmas", "fifos")
    print(" | ".join(columns))
    for row in rows:
        print(" | ".join(str(row[column]) for column in columns))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--zynq", default="resnet50:zcu104", help="model:board of the Vivado block design")
    parser.add_argument("--alveo", default="resnet50:alveo-u280", help="model:board of the Vitis link")
    parser.add_argument("--calib", type=int, default=2, help="random calibration samples for quantization")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--keep", type=Path, help="write the projects into this folder and keep them")
    args = parser.parse_args(argv)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="fpgaplace-count-cells-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        rows = []
        for spec in (args.zynq, args.alveo):
            model_name, _, board = spec.partition(":")
            rows += measure(model_name, board, args.calib, folder)
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    if args.json:
        json.dump(rows, sys.stdout, indent=2)
        print()
    else:
        print_table(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
