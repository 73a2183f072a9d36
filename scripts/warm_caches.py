"""Warm the caches a fresh clone lacks, so its first commands start as fast as later ones.

    python scripts/warm_caches.py

1. Byte-compiles the fpgaplace package (``compileall``): with PYTHONDONTWRITEBYTECODE set, or
   on a read-only checkout, Python would otherwise compile every module from source on each run.
2. Compiles the DP's numba kernels once on a small paper workload (``dp_kernels.PYTHON_WORK = -1``
   forces the compiled path); numba writes the machine code next to
   fpgaplace/place/solvers/dp_kernels.py (``__pycache__``, ignored by git), or to its user-wide
   cache when that folder is not writable, and every later large DP loads it instead of
   compiling (about 10-20 s).

Prints where each cache went and how long each step took. Safe to run again: a warm cache is
loaded, not rebuilt.
"""

from __future__ import annotations

import compileall
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD = ROOT / "tests" / "workloads" / "throughput" / "layer-bert24_inference.json"


def byte_compile() -> None:
    started = time.perf_counter()
    ok = compileall.compile_dir(str(ROOT / "fpgaplace"), quiet=1)
    print(f"bytecode: fpgaplace compiled in {time.perf_counter() - started:.1f} s ({'ok' if ok else 'errors'})")


def compile_dp_kernels() -> None:
    from fpgaplace.place.solvers import dp, dp_kernels
    from fpgaplace.place.workload import load_workload

    started = time.perf_counter()
    dp_kernels.PYTHON_WORK = -1  # every kernel compiled, whatever the size
    dp.solve_throughput_dp(load_workload(WORKLOAD))
    hits = sum(sum(kernel.stats.cache_hits.values()) for kernel in dp_kernels._compiled.values())
    misses = sum(sum(kernel.stats.cache_misses.values()) for kernel in dp_kernels._compiled.values())
    where = {kernel.stats.cache_path for kernel in dp_kernels._compiled.values()}
    print(f"numba: DP kernels {'loaded' if not misses else 'compiled'} in {time.perf_counter() - started:.1f} s "
          f"({hits} cached, {misses} compiled) in {', '.join(sorted(where))}")


if __name__ == "__main__":
    byte_compile()
    compile_dp_kernels()
