"""Run the fuzz generator's cases (tests/fuzz.py) and print a table by family: cases, tracebacks,
hangs, exits with status 0 on invalid input, and other failures (no one-line error naming the
file, an exit != 0 on valid input).

Usage: python scripts/fuzz_report.py [--seed 0] [--subprocess] [--jobs 2] [--timeout 30] [--show 5]

``--subprocess`` runs every case as ``python -m fpgaplace.cli.app`` in its own process with a timeout
and a 3 GiB address-space limit (a hang in C code or a memory blow-up is then a counted hang,
and onnxruntime's own log lines on stderr count against the one-line error); the default runs
them in-process as tests/test_fuzz.py does.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import fuzz  # noqa: E402 - the generator lives with the tests

MEMORY_LIMIT = 3 << 30


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_in_subprocess(case: fuzz.Case, timeout: float) -> fuzz.Outcome:
    """``case`` as ``python -m fpgaplace.cli.app`` in a temporary folder; a timeout or a kill by the
    memory limit counts as a hang."""
    with tempfile.TemporaryDirectory(prefix="fpgaplace-fuzz-") as tmp:
        folder = Path(tmp)
        argv = fuzz.write_files(case, folder)
        start = time.perf_counter()
        outcome = fuzz.Outcome(case, None, 0.0)
        try:
            done = subprocess.run([sys.executable, "-m", "fpgaplace.cli.app", *argv], capture_output=True, text=True,
                                  timeout=timeout, preexec_fn=_limit_memory, cwd=folder)
            outcome.exit_code, outcome.stderr = done.returncode, done.stderr
            if done.returncode < 0 or "MemoryError" in done.stderr:
                outcome.hang = True
        except subprocess.TimeoutExpired:
            outcome.hang = True
        outcome.seconds = time.perf_counter() - start
        return fuzz.judge(case, folder, outcome.exit_code, outcome.stderr, outcome)


def table(outcomes: list[fuzz.Outcome]) -> str:
    rows = []
    header = ("family", "cases", "tracebacks", "hangs", "exit 0 on invalid", "accepted invalid", "overruns",
              "other failures", "seconds")
    by_family = collections.defaultdict(list)
    for outcome in outcomes:
        by_family[outcome.case.family].append(outcome)
    for family in [*by_family, "all"]:
        group = outcomes if family == "all" else by_family[family]
        other = sum(1 for o in group if o.problems and not (o.traceback or o.hang or o.exit_zero_on_invalid
                                                            or o.accepted_invalid or o.overran))
        rows.append((family, len(group), sum(o.traceback for o in group), sum(o.hang for o in group),
                     sum(o.exit_zero_on_invalid for o in group), sum(o.accepted_invalid for o in group),
                     sum(o.overran for o in group), other, f"{sum(o.seconds for o in group):.0f}"))
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = [" | ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) for r in [header, *rows]]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--subprocess", action="store_true", help="one process per case (catches C-level hangs)")
    parser.add_argument("--jobs", type=int, default=2, help="parallel processes with --subprocess")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="seconds per case (a placing case: 3 x its time limit + 60 if longer)")
    parser.add_argument("--show", type=int, default=5, help="failing cases to list per family")
    parser.add_argument("--families", default=",".join((*fuzz.FAMILIES, fuzz.SCALE)),
                        help="comma-separated families (default: all, the scale family included)")
    parser.add_argument("--times", action="store_true", help="list every scale case's wall time against its limit")
    args = parser.parse_args()
    cases = fuzz.generate(args.seed, families=tuple(args.families.split(",")))
    if args.subprocess:
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            outcomes = list(pool.map(lambda c: run_in_subprocess(c, fuzz.hang_seconds(c, args.timeout)), cases))
    else:
        outcomes = [fuzz.run_case(c, fuzz.hang_seconds(c, args.timeout)) for c in cases]
    print(table(outcomes))
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    for outcome in outcomes if args.times else ():
        if outcome.case.time_limit is not None:
            print(f"{outcome.case.name:48} limit {outcome.case.time_limit:5.0f} s  wall {outcome.seconds:6.1f} s  "
                  f"cpu {outcome.cpu_seconds:6.1f} s  exit {outcome.exit_code}")
    shown = collections.Counter()
    for outcome in outcomes:
        if outcome.problems and shown[outcome.case.family] < args.show:
            shown[outcome.case.family] += 1
            last = [line for line in outcome.stderr.splitlines() if line.strip()][-1:] or [""]
            print(f"{outcome.case.name}: {'; '.join(outcome.problems)} | {last[0][:160]}")


if __name__ == "__main__":
    main()
