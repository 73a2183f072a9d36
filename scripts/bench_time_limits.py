"""Whether every placement method honours ``--time-limit`` on a large chain (issue 23).

Writes the fuzz scale family's chain workload (``tests/fuzz.py large_workload``, seeded) of
``--ops`` ops, runs the real command ``fpgaplace place WORKLOAD --method M --time-limit L`` for
each method, and prints a table: wall seconds of the whole command (start-up and reading the
workload included, as a user waits), its peak resident memory, its exit status (1: the method
refused, e.g. PipeDream past its size) and whether the wall time is within the issue's allowance
of 2 L + 3 s. The script's exit status is 1 when a run is over it.

``--tree DIR`` (repeatable) runs the command with ``PYTHONPATH=DIR`` instead, e.g. two
``git archive`` snapshots of ``fpgaplace/`` before and after a change: the trees take turns
method by method, so load on the machine hits them alike.

Usage:
  .venv/bin/python scripts/bench_time_limits.py
  .venv/bin/python scripts/bench_time_limits.py --ops 200000 --limit 5 --methods greedy,local-search
  .venv/bin/python scripts/bench_time_limits.py --tree /tmp/before --tree .

Cost: per tree and method about 2 L + 3 s at most; the defaults (200,000 ops, 5 s, seven runs)
about a minute a tree.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

METHODS = ("greedy", "local-search", "partitioner", "auto", "dp", "ip", "auto --objective latency")


def allowed_seconds(limit: float) -> float:
    """The issue's allowance: twice the limit and 3 s of start-up and output."""
    return 2 * limit + 3


def run(tree: str | None, workload: Path, method: str, limit: float, out: Path) -> tuple[float, int, int]:
    """(wall seconds, peak RSS in KB, exit status) of one ``fpgaplace place`` run."""
    env = dict(os.environ)
    if tree:
        env["PYTHONPATH"] = str(Path(tree).resolve())
    argv = [sys.executable, "-m", "fpgaplace.cli.app", "place", str(workload), "--method", *shlex.split(method),
            "--time-limit", f"{limit:g}", "--out", str(out)]
    started = time.perf_counter()
    child = subprocess.Popen(argv, env=env, cwd=workload.parent,  # (not a checkout: ``-m`` puts the cwd first)
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - started, usage.ru_maxrss, child.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=200_000)
    parser.add_argument("--limit", type=float, default=5.0, help="--time-limit of every run")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated; 'auto --objective latency' ok")
    parser.add_argument("--tree", action="append", help="PYTHONPATH for the command (repeatable)")
    args = parser.parse_args()
    from fuzz import large_workload

    trees = args.tree or [None]
    allowed = allowed_seconds(args.limit)
    failed = False
    with tempfile.TemporaryDirectory() as folder:
        workload = Path(folder) / "chain.json"
        workload.write_text(json.dumps(large_workload(random.Random(0), args.ops)))
        print(f"{args.ops:,}-op chain, --time-limit {args.limit:g}: allowed {allowed:g} s\n")
        print(f"{'tree':24} {'method':26} {'wall s':>7} {'max RSS MB':>10}  exit  within")
        for method in args.methods.split(","):
            for tree in trees:
                wall, rss, code = run(tree, workload, method, args.limit, Path(folder) / "placement.json")
                within = wall <= allowed
                failed |= not within
                print(f"{tree or 'installed':24} {method:26} {wall:7.1f} {rss / 1024:10.0f}  {code:4}  "
                      f"{'yes' if within else 'NO'}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
