"""The report's tables, from the project record and the stages' results: resources and memory per
core, its layers, the placement's solvers, devices and transfers, the event simulation's figures,
and the C/RTL simulation and synthesis results when those stages left them.
"""

from __future__ import annotations

import json
from pathlib import Path

from fpgaplace.board.model import BRAM36_BYTES, URAM_BYTES
from fpgaplace.project.arrays import weight_bytes
from fpgaplace.project.layout import RESULTS_DIR
from fpgaplace.project.record import Core, DesignRecord, PlacementInfo
from fpgaplace.report.figures import UNPLACED_COLOUR
from fpgaplace.report.units import finite, format_bytes, format_fps, format_gap, format_number, format_share, format_us
from fpgaplace.util.errors import first_line

RESOURCE_KEYS = ("dsp", "bram36", "uram", "lut", "ff")


RESOURCE_LABELS = {"dsp": "DSP", "bram36": "BRAM36", "uram": "URAM", "lut": "LUT", "ff": "FF"}


RESULT_FILES = {"csim": "csim.json", "rtl": "rtl.json", "synthesis": "resources.json", "saved_sim": "sim.json"}


RESULT_TITLES = {"csim": "C simulation", "rtl": "RTL simulation", "synthesis": "Synthesis (yosys) beside the estimate",
                 "saved_sim": "Saved event simulation"}


def resource_rows(cores: list[Core]) -> list[dict]:
    """Per core, each resource as used / available and its share; then the total of the cores."""
    rows = []
    totals = {key: [0.0, 0.0] for key in RESOURCE_KEYS}
    for core in cores:
        used, budget = core.resources, core.budget
        cells = []
        for key in RESOURCE_KEYS:
            u, b = finite(used.get(key)), finite(budget.get(key))
            totals[key][0] += u or 0.0
            totals[key][1] += b or 0.0
            cells.append(_share_cell(key, u, b))
        rows.append({"name": core.name, "node": core.node, "total": False, "cells": cells})
    if len(cores) > 1:
        rows.append({"name": "all cores", "node": "", "total": True,
                     "cells": [_share_cell(key, *totals[key]) for key in RESOURCE_KEYS]})
    return rows


def _share_cell(key: str, used: float | None, available: float | None) -> dict:
    fraction = used / available if used is not None and available else None
    return {"key": key, "used": used, "available": available, "text": format_share(used, available),
            "percent": None if fraction is None else min(100.0, 100 * fraction),
            "over": fraction is not None and fraction > 1}


def layer_rows(core: Core) -> list[dict]:
    rows = []
    for layer in core.layers:
        resources = layer.resources
        rows.append({"op": layer.op, "kernel": layer.kernel, "widths": layer.widths.text() if layer.widths else "—",
                     "folding": f"{layer.pe} / {layer.simd} / {layer.mmv}",
                     "cycles": format_number(layer.cycles), "macs": format_number(layer.macs),
                     "resources": [format_number(resources.get(key)) for key in RESOURCE_KEYS],
                     "resident": "on chip" if layer.resident else "streamed"})
    return rows


def memory_rows(project: Path, cores: list[Core]) -> list[dict]:
    rows = []
    for core in cores:
        used, budget = core.resources, core.budget
        ram_used = (finite(used.get("bram36")) or 0) * BRAM36_BYTES + (finite(used.get("uram")) or 0) * URAM_BYTES
        ram_budget = (finite(budget.get("bram36")) or 0) * BRAM36_BYTES + (finite(budget.get("uram")) or 0) * URAM_BYTES
        weights = weight_bytes(project, core)
        rows.append({
            "name": core.name,
            "onchip_weights": format_bytes(weights[0]) if weights else "–",
            "streamed_weights": format_bytes(weights[1]) if weights else "–",
            "streamed_per_sample": format_bytes(core.streamed_weight_bytes),
            "ram": f"{format_bytes(ram_used)} / {format_bytes(ram_budget)}"
                   + (f" ({ram_used / ram_budget:.1%})" if ram_budget else ""),
            "percent": min(100.0, 100 * ram_used / ram_budget) if ram_budget else None,
        })
    return rows


def solver_rows(placement: PlacementInfo) -> list[dict]:
    """``placement.compared`` (every method tried) when design.json has it, else the chosen one."""
    entries = placement.compared or [placement.to_json()]
    unit = placement.unit
    rows = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        value, bound = finite(entry.get("value")), finite(entry.get("bound"))
        rows.append({"method": str(entry.get("method", "?")), "value": in_unit(value, unit),
                     "bound": in_unit(bound, unit) if bound is not None else "none proven",
                     "gap": format_gap(entry.get("gap")), "status": str(entry.get("status", "")),
                     "seconds": format_number(entry.get("seconds")) if "seconds" in entry else "–",
                     "chosen": entry.get("method") == placement.method})
    return rows


def in_unit(value: float | None, unit: str) -> str:
    return format_us(value) if unit == "us" else ("–" if value is None else f"{value:.4g} {unit}")


def device_rows(document: DesignRecord, colours: dict[str, str]) -> list[dict]:
    devices = document.devices
    heaviest = max((d.load_us or 0.0 for d in devices), default=0.0) or 1.0
    return [{"name": d.name, "kind": d.kind, "node": d.node or "", "ops": len(d.ops),
             "load": format_us(d.load_us), "compute": format_us(d.compute_us),
             "percent": 100 * (d.load_us or 0.0) / heaviest,
             "colour": colours.get(d.name, UNPLACED_COLOUR)} for d in devices]


def transfer_rows(document: DesignRecord) -> list[dict]:
    return [{"tensor": t.tensor, "from": t.from_device, "to": t.to_device,
             "link": f"{t.link or '?'} ({t.link_type})" if t.link_type else (t.link or "?"),
             "bytes": format_bytes(t.bytes), "time": format_us(t.us)}
            for t in document.transfers]


def simulation_figures(project: Path, samples: int) -> dict:
    from fpgaplace.sim.efficiency import efficiency
    from fpgaplace.sim.event import simulate

    result = simulate(project, samples).to_json()
    mac = efficiency(project, result["interval_us"])
    return {
        "samples": result["samples"], "latency": format_us(result["latency_us"]),
        "interval": format_us(result["interval_us"]), "fps": format_fps(result["fps"]),
        "bottleneck": result["bottleneck"],
        "roofline": (f"{format_fps(result['roofline_fps'])} ({result['roofline_fraction']:.1%} reached)"
                     if result.get("roofline_fps") else "–"),
        "dram": (f"{format_fps(result['dram_bound_fps'])} ({result['dram_fraction']:.1%} reached)"
                 if result.get("dram_bound_fps") else "–"),
        "efficiency": efficiency_figures(mac),
        "devices": [{"name": d["name"], "kind": d["kind"], "per_sample": format_us(d["per_sample_us"]),
                     "utilisation": f"{d['utilisation']:.1%}", "blocked": format_us(d["blocked_us"]),
                     "starved": format_us(d["starved_us"])} for d in result["devices"]],
        "raw": {k: result[k] for k in ("samples", "latency_us", "interval_us", "fps", "bottleneck")},
    }


def efficiency_figures(mac) -> dict:
    """The MAC efficiency (``fpgaplace.sim.efficiency.Efficiency``) as the report shows it: the
    shares of the cores' and the chip's DSP roofline reached, and the three stages losing the
    most DSP-cycles, in percent of those the cores offer."""
    offered = mac.offered or 1.0
    return {"cores": f"{mac.cores_fraction:.1%}", "chip": f"{mac.chip_fraction:.1%}",
            "largest": [{"core": s.core, "op": s.op, "kernel": s.kernel, "dsp": s.dsp,
                         "lost": f"{s.total / offered:.2%}",
                         "ways": ", ".join(f"{way} {v / offered:.2%}" for way, v in s.losses.items() if v > 0)}
                        for s in mac.largest()]}


def _flatten(record: dict, prefix: str = "") -> dict[str, object]:
    """Nested dicts as dotted keys (``yosys.lut``); lists shown by their length."""
    flat: dict[str, object] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{name}."))
        elif isinstance(value, list):
            flat[name] = f"{len(value)} items"
        else:
            flat[name] = value
    return flat


def _with_ratio(row: dict[str, object]) -> dict[str, object]:
    """A row holding measured and modelled cycles gains their ratio (the estimate beside the
    measurement, as one number)."""
    measured, model = finite(row.get("cycles_measured")), finite(row.get("cycles_model"))
    if measured is not None and model:
        return {**row, "measured / model": f"{measured / model:.3f}"}
    return row


def _cell(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "NO"
    return format_number(value) if isinstance(value, int | float) else str(value)


def results_section(key: str, document: object) -> dict:
    """A results file as facts (its top-level scalars) and tables (its lists of records, nested
    records flattened into dotted columns); any shape the stages write is shown, none is assumed."""
    if not isinstance(document, dict):
        document = {"value": document}
    facts = [(name, _cell(value)) for name, value in document.items() if not isinstance(value, dict | list)]
    tables = []
    for name, value in document.items():
        if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            value = [{"name": k, **v} for k, v in value.items()]  # {core: {...}} as rows
        elif isinstance(value, dict):
            facts += [(f"{name}.{k}", _cell(v)) for k, v in _flatten(value).items()]
            continue
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            rows = [_with_ratio(_flatten(v)) for v in value]
            columns = list(dict.fromkeys(c for row in rows for c in row))
            tables.append({"name": name, "columns": columns,
                           "rows": [[_cell(row.get(c, "")) for c in columns] for row in rows]})
        elif isinstance(value, list):
            facts.append((name, ", ".join(_cell(v) for v in value)))
    ok = document.get("ok")
    return {"key": key, "title": RESULT_TITLES[key], "file": f"{RESULTS_DIR}/{RESULT_FILES[key]}",
            "status": None if not isinstance(ok, bool) else ("passed" if ok else "FAILED"), "facts": facts,
            "tables": tables}


def results(project: Path, notes: list[str]) -> list[dict]:
    sections = []
    for key, name in RESULT_FILES.items():
        path = project / RESULTS_DIR / name
        if not path.is_file():
            continue
        try:
            document = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            notes.append(f"{path}: not readable JSON ({first_line(error)}); left out")
            continue
        sections.append(results_section(key, document))
    return sections
