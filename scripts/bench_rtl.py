"""Benchmark of the RTL op library: model vs RTL-measured cycles per op, yosys vs the op library's
resource estimate per op, and the small CNN's end-to-end RTL simulation time.

Usage: .venv/bin/python scripts/bench_rtl.py [--cycles] [--yosys] [--cnn] [--json out.json]
(no flag: all three). Prints markdown tables. The op cases are the tests' (tests/rtl_cases.py,
tests/test_rtl_ops.py); the CNN is ``models.cnn_residual`` compiled for zcu104.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from rtl_cases import (  # noqa: E402
    concat_case,
    constant_add_case,
    conv_case,
    dense_case,
    elementwise_case,
    pool_case,
)
from test_rtl_ops import CONCATS, CONVS, POOLS  # noqa: E402

from fpgaplace.board.load import load_board
from fpgaplace.codegen import rtl  # noqa: E402
from fpgaplace.hw import KERNELS, Folding, Geometry  # noqa: E402
from fpgaplace.hw.registry import concat_geometry, dense_geometry, elementwise_geometry, window_geometry  # noqa: E402
from fpgaplace.sim import yosys  # noqa: E402
from fpgaplace.sim.rtl import simulate_stream  # noqa: E402

ELEMENTWISE = [("add", (8, 8, 8), Folding(2, 1, 1)), ("add", (4, 6, 6), Folding(4, 1, 3)),
               ("requant", (8, 6, 6), Folding(8, 1, 2))]
CONSTANT_ADDS = [((8, 6, 6), True, Folding(2, 1, 1)), ((4, 5, 5), False, Folding(4, 1, 5))]


def op_cases() -> list[tuple[str, str, tuple, Geometry]]:
    """(label, kernel, case, op library geometry) of every benchmarked op."""
    cases = []
    for name, (*shape, folding, dilation) in CONVS.items():
        case = conv_case(*shape, folding, seed=1, dilation=dilation)
        cases.append((f"conv {name} {shape[:4]}", "conv2d", case, window_geometry("conv2d", case[0])))
    for name, (kernel, (h, w, c, k, stride, pad, folding)) in POOLS.items():
        case = pool_case(kernel, h, w, c, k, stride, pad, folding, seed=1)
        cases.append((f"{name} {(h, w, c)}", kernel, case, window_geometry(kernel, case[0])))
    for kernel, shape, folding in ELEMENTWISE:
        cases.append((f"{kernel} {shape}", kernel, elementwise_case(kernel, shape, folding, seed=1),
                      elementwise_geometry(kernel, (1, *shape))))
    for shape, per_channel, folding in CONSTANT_ADDS:
        cases.append((f"add of a constant {shape}", "add", constant_add_case(shape, per_channel, folding, seed=1),
                      elementwise_geometry("add", (1, *shape), (shape[0], 1, 1) if per_channel else (1,))))
    for name, (pixels, channels, folding) in CONCATS.items():
        cases.append((f"concat {name} {channels}", "concat", concat_case(pixels, channels, folding, seed=1),
                      concat_geometry(pixels, channels)))
    return cases


def cycles_table() -> list[dict]:
    rows = []
    for label, kernel, (config, arrays, inputs, folding), g in op_cases():
        model = KERNELS[kernel].cycles(g, folding)
        inputs = inputs if isinstance(inputs, list) else [inputs]
        op = rtl.render_op(kernel, config, arrays, folding, model)
        expected = np.stack([KERNELS[kernel].reference(config, arrays, [x[v] for x in inputs]).reshape(-1)
                             for v in range(len(inputs[0]))])
        started = time.perf_counter()
        with tempfile.TemporaryDirectory() as folder:
            result = simulate_stream(op, inputs, expected, Path(folder), model, config, steady_vectors=4)
        rows.append({"op": label, "folding": f"PE={folding.pe} SIMD={folding.simd} MMV={folding.mmv}",
                     "model": model, "measured": result.steady.cycles_per_vector,
                     "error": round(result.cycle_error, 4), "bit_exact": result.bit_exact,
                     "seconds": round(time.perf_counter() - started, 1)})
        print(rows[-1], flush=True)
    return rows


def yosys_table() -> list[dict]:
    """Small shapes (yosys time grows fast with the line buffers' read ports), every op kind."""
    rows = []
    for board, family in (("zcu104", "xcup"), ("pynq-z2", "xc7")):
        core = load_board(board).cores[0]
        conv = conv_case(4, 4, 2, 2, 3, 1, 1, 1, Folding(2, 3, 2), seed=1)
        small = [("conv2d", conv, window_geometry("conv2d", conv[0])),
                 ("dense", dense_case(32, 8, Folding(2, 8, 1), seed=1), dense_geometry(32, 8))]
        if family == "xcup":
            for kernel in ("maxpool", "avgpool", "globalavgpool"):
                case = pool_case(kernel, 4, 4, 2, 2, 2, 0, Folding(2, 1, 1), seed=1)
                small.append((kernel, case, window_geometry(kernel, case[0])))
            for kernel in ("add", "requant"):
                small.append((kernel, elementwise_case(kernel, (2, 4, 4), Folding(2, 1, 1), seed=1),
                              elementwise_geometry(kernel, (1, 2, 4, 4))))
            small.append(("add of a constant", constant_add_case((2, 4, 4), True, Folding(2, 1, 1), seed=1),
                          elementwise_geometry("add", (1, 2, 4, 4), (2, 1, 1))))
            small.append(("concat", concat_case((4, 4), [2, 4], Folding(2, 1, 1), seed=1),
                          concat_geometry((4, 4), [2, 4])))
        for label, (config, arrays, _, folding), g in small:
            kernel = g.kernel
            op = rtl.render_op(kernel, config, arrays, folding, KERNELS[kernel].cycles(g, folding),
                               macs_per_dsp=core.macs_per_dsp)
            estimate = KERNELS[kernel].resources(g, folding, core)
            with tempfile.TemporaryDirectory() as folder:
                got = yosys.synthesize(rtl.RtlModule(op.module.top, {**rtl.library(), **op.module.files}),
                                       Path(folder), family)
            rows.append({"op": label, "family": family, "yosys": got.to_json(), "estimate": estimate.to_json(),
                         "lut_ratio": round(got.lut / estimate.lut, 2), "ff_ratio": round(got.ff / estimate.ff, 2),
                         "bram_ratio": round(got.bram36 / estimate.bram36, 2) if estimate.bram36 else None})
            print(rows[-1], flush=True)
    return rows


def cnn_seconds() -> dict:
    from fpgaplace import Design
    from fpgaplace.model import zoo as models
    from fpgaplace.sim.rtl_project import simulate_project_rtl

    with tempfile.TemporaryDirectory() as folder:
        design = Design(models.cnn_residual(batch=1), "zcu104", profile_cpu=False).quantized(random_samples=2)
        design.place()
        design.compile(Path(folder) / "cnn")
        started = time.perf_counter()
        result = simulate_project_rtl(Path(folder) / "cnn", progress=print)
        return {"seconds": round(time.perf_counter() - started, 1), **result.to_json()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", action="store_true")
    parser.add_argument("--yosys", action="store_true")
    parser.add_argument("--cnn", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    everything = not (args.cycles or args.yosys or args.cnn)
    report: dict = {}
    if args.cycles or everything:
        report["cycles"] = cycles_table()
        print("| op | folding | model | RTL | error |\n|---|---|---|---|---|")
        for row in report["cycles"]:
            print(f"| {row['op']} | {row['folding']} | {row['model']} | {row['measured']:.0f} | {row['error']:+.1%} |")
    if args.yosys or everything:
        report["yosys"] = yosys_table()
        print("| op | family | DSP yosys | DSP estimate | LUT yosys/est | FF yosys/est | BRAM36 yosys/est |")
        print("|---|---|---|---|---|---|---|")
        for row in report["yosys"]:
            print(f"| {row['op']} | {row['family']} | {row['yosys']['dsp']} | {row['estimate']['dsp']} "
                  f"| {row['lut_ratio']} | {row['ff_ratio']} | {row['bram_ratio']} |")
    if args.cnn or everything:
        report["cnn"] = cnn_seconds()
        print(report["cnn"])
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
