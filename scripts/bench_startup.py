"""Start-up of the real ``fpgaplace`` command on a small paper workload.

Runs the installed command (``.venv/bin/fpgaplace``, else ``python -m fpgaplace.cli.app``) ``--runs``
times and prints the median, least and greatest wall time beside a bare ``python -c pass``;
then runs it once under ``python -X importtime`` and prints where the import time goes: the
self time summed per top-level package, and the modules with the largest cumulative time.
It also says which of the heavy optional modules (numba, onnx, onnxruntime, pyscipopt, scipy,
networkx, ...) the run imported at all, and whether fpgaplace's modules have compiled bytecode
(with PYTHONDONTWRITEBYTECODE set and no .pyc, every run compiles them from source again).

``--tree DIR`` (repeatable) runs the command with ``PYTHONPATH=DIR`` instead, e.g. two
``git archive`` snapshots before and after a change: the runs alternate between the trees, so
load on the machine hits them alike, and each tree gets its own rows.

Usage:
  .venv/bin/python scripts/bench_startup.py
  .venv/bin/python scripts/bench_startup.py tests/workloads/latency/layer-bert24_inference.json \
      --args "--objective latency" --runs 5 --top 20
  .venv/bin/python scripts/bench_startup.py --tree /tmp/before --tree /tmp/after

Cost: (runs + 2) runs of the command per tree, about a second each.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import resource
import shlex
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_WORKLOAD = ROOT / "tests" / "workloads" / "throughput" / "layer-bert24_inference.json"
HEAVY = ("numba", "llvmlite", "onnx", "onnxruntime", "pyscipopt", "scipy", "networkx", "jinja2", "ray",
         "torch", "pandas", "matplotlib")
IMPORT_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


@dataclass
class ImportRecord:
    module: str
    self_us: int
    cumulative_us: int
    depth: int  # 0 for a module imported by no other module timed here


def command() -> list[str]:
    """The installed console script when there is one, else the module run by this Python."""
    script = Path(sys.executable).parent / "fpgaplace"
    if script.exists():
        return [sys.executable, str(script)]
    return [sys.executable, "-m", "fpgaplace.cli.app"]


def environment(tree: Path | None) -> dict[str, str]:
    """This process's environment, with ``tree`` first on PYTHONPATH when given."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [env.get("PYTHONPATH")])])
    return env


@dataclass
class Timing:
    wall: float
    cpu: float  # user + system seconds of the child: less sensitive to other load than wall


def timed_run(argv: list[str], env: dict[str, str]) -> Timing:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return Timing(wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)


def alternating_runs(argv: list[str], trees: list[Path | None], runs: int) -> list[list[Timing]]:
    """``runs`` timings per tree, one run of each tree in turn."""
    times: list[list[Timing]] = [[] for _ in trees]
    for _ in range(runs):
        for index, tree in enumerate(trees):
            times[index].append(timed_run(argv, environment(tree)))
    return times


def import_records(argv: list[str], env: dict[str, str]) -> list[ImportRecord]:
    """One run under ``-X importtime``, parsed (CPython prints one line per module on stderr)."""
    run = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], check=True, capture_output=True, text=True,
                         cwd=ROOT, env=env)
    records = []
    for line in run.stderr.splitlines():
        match = IMPORT_LINE.match(line)
        if match:
            records.append(ImportRecord(match[4], int(match[1]), int(match[2]), (len(match[3]) - 1) // 2))
    return records


def per_package(records: list[ImportRecord]) -> list[tuple[str, float, int]]:
    """(top-level package, self ms summed over its modules, modules), largest first."""
    total: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for record in records:
        package = record.module.split(".")[0]
        total[package] += record.self_us / 1000
        count[package] += 1
    return sorted(((p, total[p], count[p]) for p in total), key=lambda row: -row[1])


def bytecode_note(tree: Path | None) -> str:
    """Whether the package's modules have a .pyc at least as new as their source."""
    package = (tree or ROOT) / "fpgaplace"
    sources = sorted(package.rglob("*.py"))
    compiled = [s for s in sources if (pyc := Path(importlib.util.cache_from_source(str(s)))).exists()
                and pyc.stat().st_mtime >= s.stat().st_mtime]
    flag = os.environ.get("PYTHONDONTWRITEBYTECODE")
    return (f"bytecode: {len(compiled)} of {len(sources)} modules of {package} have a current .pyc"
            + (f" (PYTHONDONTWRITEBYTECODE={flag}: the others are compiled from source on every run)"
               if flag and len(compiled) < len(sources) else ""))


def print_table(title: str, header: tuple[str, ...], rows: list[tuple]) -> None:
    print(f"\n{title}")
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    print("  ".join(str(h).ljust(w) for h, w in zip(header, widths, strict=True)))
    for row in rows:
        print("  ".join(str(c).rjust(w) if isinstance(c, int | float) or c[:1].isdigit() else str(c).ljust(w)
                        for c, w in zip(row, widths, strict=True)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workload", nargs="?", type=Path, default=DEFAULT_WORKLOAD)
    parser.add_argument("--args", default="", help="further arguments of `fpgaplace place` (one string)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--top", type=int, default=15, help="rows of each import table")
    parser.add_argument("--tree", type=Path, action="append", default=[],
                        help="a source tree to put first on PYTHONPATH (repeatable: runs alternate)")
    options = parser.parse_args()

    argv = [*command(), "place", str(options.workload.resolve()), *shlex.split(options.args)]
    trees: list[Path | None] = [tree.resolve() for tree in options.tree] or [None]
    bare = statistics.median(timed_run([sys.executable, "-c", "pass"], dict(os.environ)).wall
                             for _ in range(options.runs))
    timings = alternating_runs(argv, trees, options.runs)
    print(f"command: {shlex.join(argv[1:])}")
    print(f"bare python -c pass: median {bare:.3f} s wall")
    for tree, runs in zip(trees, timings, strict=True):
        wall = [run.wall for run in runs]
        print(f"\n== {tree or 'installed'}: {bytecode_note(tree)}")
        print(f"wall over {options.runs} runs: median {statistics.median(wall):.3f} s, least {min(wall):.3f} s, "
              f"greatest {max(wall):.3f} s; cpu (user + system) median "
              f"{statistics.median(run.cpu for run in runs):.3f} s")
        print_imports(import_records(argv, environment(tree)), options.top)


def print_imports(records: list[ImportRecord], top: int) -> None:
    total_ms = sum(r.self_us for r in records) / 1000
    print(f"imports: {len(records)} modules, {total_ms:.0f} ms self time in all")
    packages = per_package(records)[:top]
    print_table("self time per top-level package", ("package", "ms", "share", "modules"),
                [(p, f"{ms:.1f}", f"{100 * ms / total_ms:.0f} %", n) for p, ms, n in packages])
    largest = sorted(records, key=lambda r: -r.cumulative_us)[:top]
    print_table("largest cumulative imports", ("module", "cumulative ms", "self ms", "depth"),
                [(r.module, f"{r.cumulative_us / 1000:.1f}", f"{r.self_us / 1000:.1f}", r.depth) for r in largest])
    loaded = {r.module.split(".")[0] for r in records}
    heavy = [name for name in HEAVY if name in loaded]
    print(f"heavy modules imported: {', '.join(heavy) if heavy else 'none'} (of {', '.join(HEAVY)})")


if __name__ == "__main__":
    main()
