"""What place and route measured of an ECP5 project, read back into its design.json.

``make bitstream`` of an ECP5 project (``fpgaplace.codegen.blockdesign.ecp5``) runs yosys,
nextpnr-ecp5 with ``--report ecp5/report.json`` and ecppack, each step writing its nanoseconds
to ``ecp5/<step>.ns``, and then ``python -m fpgaplace.sim.nextpnr PROJECT``, which calls
``read_back``: nextpnr's achieved clock (its Fmax of the design's clock; the planned one is the
cores' clock), the slowest path's ends when it misses, per resource the cells used and available
(LUT: TRELLIS_COMB, FF: TRELLIS_FF, DSP: MULT18X18D, BRAM36: DP16KD / 2) beside the op library's
estimate (the cores' sum in design.json) and the steps' seconds, stored as design.json's
``implementation`` (``fpgaplace.project.record.Implementation``) and written atomically.

A missing or malformed report is one ``FpgaplaceError`` line naming the file. O(report size).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from fpgaplace.board.model import FAMILIES
from fpgaplace.project.layout import DESIGN_FILE, ECP5_DIR
from fpgaplace.project.record import Implementation, load
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.files import write_file

REPORT_FILE = "report.json"
STEPS = ("synth", "pnr", "pack")
CELLS = {"lut": ("TRELLIS_COMB", 1.0), "ff": ("TRELLIS_FF", 1.0), "dsp": (FAMILIES["ecp5"].multiplier, 1.0),
         "bram36": ("DP16KD", FAMILIES["ecp5"].block_ram["DP16KD"])}
"""Each op-library resource as nextpnr-ecp5's utilisation names it, and its cells' share of one."""


def _report(project: Path) -> dict[str, Any]:
    path = project / ECP5_DIR / REPORT_FILE
    try:
        report = json.loads(path.read_text())
    except FileNotFoundError:
        raise FpgaplaceError(f"{path}: missing; expected nextpnr's report (make bitstream writes it)") from None
    except (OSError, ValueError) as error:
        raise FpgaplaceError(f"{path}: unreadable nextpnr report ({error})") from None
    if not isinstance(report, dict) or not isinstance(report.get("fmax"), dict) or not report["fmax"] \
            or not isinstance(report.get("utilization"), dict):
        raise FpgaplaceError(f"{path}: expected nextpnr's report with fmax and utilization")
    return report


def slowest_clock(report: dict[str, Any]) -> tuple[str, float]:
    """The clock with the lowest achieved Fmax (MHz) in a nextpnr report, and that Fmax."""
    name, entry = min(report["fmax"].items(), key=lambda item: item[1]["achieved"])
    return name, float(entry["achieved"])


def critical_path(report: dict[str, Any]) -> str:
    """``<from cell> -> <to cell>`` of the longest of nextpnr's critical paths ("" if it gives none)."""
    paths = [path.get("path") or [] for path in report.get("critical_paths") or []]
    paths = [steps for steps in paths if steps]
    if not paths:
        return ""
    steps = max(paths, key=lambda steps: sum(float(step.get("delay", 0.0)) for step in steps))
    ends = [step.get("from", {}).get("cell", "?") for step in steps[:1]] + [steps[-1].get("to", {}).get("cell", "?")]
    return " -> ".join(ends)


def _resources(report: dict[str, Any], estimate: dict[str, int]) -> dict[str, dict[str, float]]:
    used = report["utilization"]
    return {key: {"used": used.get(cell, {}).get("used", 0) * share,
                  "available": used.get(cell, {}).get("available", 0) * share,
                  "estimate": estimate.get(key, 0)}
            for key, (cell, share) in CELLS.items()}


def _seconds(project: Path) -> dict[str, float]:
    seconds = {}
    for step in STEPS:
        path = project / ECP5_DIR / f"{step}.ns"
        if path.is_file():
            seconds[step] = round(int(path.read_text().strip() or 0) / 1e9, 3)
    return seconds


def read_back(project: Path) -> Implementation:
    """Read ``ecp5/report.json`` and the steps' times into ``project``'s design.json (see the module
    docstring); the record written."""
    project = Path(project)
    document = load(project)
    report = _report(project)
    _, achieved = slowest_clock(report)
    target = min(core.clock_mhz for core in document.cores)
    estimate = {key: sum(core.resources.get(key, 0) for core in document.cores) for key in CELLS}
    implementation = Implementation("nextpnr-ecp5", target, round(achieved, 3),
                                    critical_path(report) if achieved < target else "",
                                    _resources(report, estimate), _seconds(project))
    document.implementation = implementation
    write_file(project / DESIGN_FILE, json.dumps(document.to_json(), indent=2) + "\n")
    return implementation


def summary(implementation: Implementation) -> str:
    """One line: the clock achieved against the planned one (by how much and where it misses), and
    each resource used of available beside the estimate (``Implementation.summary``)."""
    return implementation.summary()


def main(argv: list[str]) -> int:
    """``python -m fpgaplace.sim.nextpnr PROJECT``: read back and print the summary line."""
    if len(argv) != 1:
        print("usage: python -m fpgaplace.sim.nextpnr PROJECT", file=sys.stderr)
        return 2
    try:
        print(summary(read_back(Path(argv[0]))))
    except FpgaplaceError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
