"""Throughput of int8 CNNs as `compile` builds them, beside the Vitis AI DPU's published figures.

    python scripts/bench_throughput.py [--models resnet50,mobilenet_v2] [--boards zcu104,kv260,alveo-u250]
                                       [--random 4] [--samples 64] [--keep DIR] [--json]

For each model (ResNet-50: the onnx package's light-zoo structure with seeded random weights,
``zoo.with_random_weights``; MobileNetV2 width 1.0 at 224 x 224, ``zoo.mobilenet_v2``) and board,
in this process: ``Design(model, board).quantized(random_samples=N).compile(folder)`` with the
defaults (the board's own cut of the fabric, or the cut the compile step chooses where the board
file leaves it out), then the event simulation of ``--samples`` samples (``fpgaplace sim``).
One row each: fps from the simulation, the MAC efficiency against the chip's DSP roofline (the
whole part's DSPs, ``sim.efficiency``; against the cores' budget in brackets), the DSP, BRAM36
and URAM the cores use, the cut (cores, and the reason the compile step gave where it chose),
the compile seconds, and the published Vitis AI figure for the board.

Published Vitis AI figures (frames per second, int8, the DPU image's cores with many threads;
AMD Vitis AI Model Zoo performance tables, 2.5/3.0): ZCU104 with 2 x DPUCZDX8G B4096 at 300 MHz:
ResNet-50 175, MobileNetV2 609; KV260 with 1 x B4096: ResNet-50 99, MobileNetV2 337. None is
given here for the Alveo U250 (its DPU is another architecture).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import onnx

from fpgaplace.flow.design import Design
from fpgaplace.model import zoo
from fpgaplace.sim.efficiency import efficiency
from fpgaplace.sim.event import simulate

MODELS = ("resnet50", "mobilenet_v2")
BOARDS = ("zcu104", "kv260", "alveo-u250")
PUBLISHED = {  # (board, model): Vitis AI DPU fps (module docstring)
    ("zcu104", "resnet50"): 175.0, ("zcu104", "mobilenet_v2"): 609.0,
    ("kv260", "resnet50"): 99.0, ("kv260", "mobilenet_v2"): 337.0,
}


@dataclass
class Row:
    model: str
    board: str
    fps: float | None = None
    chip_efficiency: float | None = None
    cores_efficiency: float | None = None
    dsp: int | None = None
    bram36: int | None = None
    uram: int | None = None
    cores: int | None = None
    cut: str = ""
    compile_s: float | None = None
    dpu_fps: float | None = None
    error: str = ""


def build(name: str) -> onnx.ModelProto:
    if name == "resnet50":
        return zoo.with_random_weights(onnx.load(str(zoo.light_model_path("resnet50"))))
    return zoo.mobilenet_v2(batch=1)


def measure(name: str, board: str, args: argparse.Namespace, folder: Path) -> Row:
    """Compile ``name`` for ``board`` into ``folder``, simulate it, and fill its row."""
    row = Row(name, board, dpu_fps=PUBLISHED.get((board, name)))
    start = time.perf_counter()
    try:
        result = Design(build(name), board, profile_cpu=False).compile(folder / f"{name}-{board}",
                                                                         random_samples=args.random)
    except Exception as error:  # noqa: BLE001 - a failing row says why; the others still run
        row.error = f"compile: {str(error).splitlines()[0]}"
        return row
    row.compile_s = time.perf_counter() - start
    document = result.design
    simulated = simulate(result.project, args.samples)
    mac = efficiency(result.project, simulated.interval_us)
    row.fps, row.chip_efficiency, row.cores_efficiency = simulated.fps, mac.chip_fraction, mac.cores_fraction
    for key in ("dsp", "bram36", "uram"):
        setattr(row, key, sum(core["resources"][key] for core in document["cores"]))
    row.cores = len(document["cores"])
    cut = (document["placement"].get("refinement") or {}).get("partition")
    row.cut = cut["reason"] if cut else f"{row.cores} cores fixed by the board file"
    return row


def table(rows: list[Row]) -> str:
    header = ["model", "board", "fps (sim)", "MACs/chip peak", "(/cores' peak)", "DSP", "BRAM36", "URAM", "cores",
              "compile s", "Vitis AI DPU fps", "cut chosen / error"]
    cells = [[r.model, r.board, _number(r.fps), _share(r.chip_efficiency), _share(r.cores_efficiency), _number(r.dsp),
              _number(r.bram36), _number(r.uram), _number(r.cores), _number(r.compile_s), _number(r.dpu_fps),
              r.error or r.cut] for r in rows]
    widths = [max(len(line[i]) for line in [header, *cells]) for i in range(len(header))]
    lines = [" | ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
             for line in [header, *cells]]
    lines.insert(1, "-+-".join("-" * width for width in widths))
    return "\n".join(lines)


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def names(text: str, known: tuple[str, ...], flag: str) -> list[str]:
    chosen = [item.strip() for item in text.split(",") if item.strip()]
    if not chosen or any(item not in known for item in chosen):
        raise SystemExit(f"{flag} {text!r}: expected a comma-separated list of {', '.join(known)}")
    return chosen


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated models (default: both)")
    parser.add_argument("--boards", default=",".join(BOARDS), help="comma-separated boards (default: all three)")
    parser.add_argument("--random", type=int, default=4, help="random calibration samples (default 4)")
    parser.add_argument("--samples", type=int, default=64, help="samples the event simulation streams (default 64)")
    parser.add_argument("--keep", type=Path, help="keep the projects in this folder")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    if args.random <= 0 or args.samples <= 0:
        raise SystemExit("--random and --samples: expected positive numbers")
    models, boards = names(args.models, MODELS, "--models"), names(args.boards, BOARDS, "--boards")
    with tempfile.TemporaryDirectory(prefix="bench-throughput-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        rows = []
        for name in models:
            for board in boards:
                rows.append(measure(name, board, args, folder))
                print(table(rows[-1:]), end="\n\n", file=sys.stderr, flush=True)  # progress
    print(json.dumps([asdict(row) for row in rows], indent=2) if args.json else table(rows))


if __name__ == "__main__":
    main()
