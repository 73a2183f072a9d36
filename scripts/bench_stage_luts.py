"""Where a compiled layer's LUTs go: yosys ``synth_xilinx`` (or ``synth_ecp5``) of one stage's RTL
as ``fpgaplace sim --resources`` synthesises it, one row per module of its hierarchy (the unit
itself, its requantizers, FIFO, gearbox): instances, LUTs of one, LUTs of all, share; beside the
stage's estimate from design.json. The unit's own row holds its lanes, SIMD adder trees,
accumulators, line buffer and control.

    python scripts/bench_stage_luts.py PROJECT --stages core0/conv_1 [--keep DIR] [--json]

Minutes of yosys a wide layer (the small CNN's conv_1 on zcu104: about 4 CPU minutes).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from fpgaplace.board.model import family_of
from fpgaplace.project.record import load
from fpgaplace.sim import yosys
from fpgaplace.sim.stages import layer_modules, select


def module_rows(stat: dict[str, Any], top: str, family: Any) -> list[dict[str, Any]]:
    """Per module of a yosys ``stat -json`` document: its instances under ``top``, LUTs of one and of all."""
    instances = stat["modules"][f"\\{top}"]["num_cells_by_type"]  # a submodule's instances by its name
    rows = []
    for name in stat["modules"]:
        plain = name.removeprefix("\\")
        count = 1 if plain == top else instances.get(plain, 0)
        one = yosys.count_cells(yosys.parse_stat(stat, name), family).lut
        rows.append({"module": plain.split("\\")[-1], "instances": count, "lut_each": one, "lut": one * count})
    total = sum(row["lut"] for row in rows)
    return [row | {"share": round(row["lut"] / total, 3)} for row in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("project", type=Path)
    parser.add_argument("--stages", required=True, help="as fpgaplace sim --stages (core0/conv_1)")
    parser.add_argument("--keep", type=Path, help="write the yosys folders here")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    design = load(args.project)
    family = family_of(design.cores[0].part)
    results = []
    with tempfile.TemporaryDirectory(prefix="stage-luts-") as scratch:
        folder = args.keep or Path(scratch)
        for ref in select(design, args.stages):
            module = layer_modules(args.project, ref.core)[ref.index]
            started = time.time()
            got = yosys.synthesize(module, folder / module.top, family)
            rows = module_rows(yosys.read_stat(folder / module.top), module.top, family)
            results.append({"stage": ref.name, "estimate_lut": int(ref.layer.resources.get("lut", 0)),
                            "yosys_lut": got.lut, "yosys_s": round(time.time() - started), "modules": rows})
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for result in results:
        print(f"\n{result['stage']}: yosys {result['yosys_lut']} LUTs, estimate {result['estimate_lut']} "
              f"({result['yosys_s']} s wall)")
        print("| module | instances | LUT each | LUT | share |\n|---|---:|---:|---:|---:|")
        for row in result["modules"]:
            print(f"| {row['module']} | {row['instances']} | {row['lut_each']} | {row['lut']} | {row['share']:.0%} |")


if __name__ == "__main__":
    main()
