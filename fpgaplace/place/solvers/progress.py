"""Progress of a solve: which method runs, elapsed time, incumbent, bound and gap, at least every
``PERIOD`` seconds.

``Heartbeat`` wraps the caller's progress callback (a function of one message string). Solvers
call it with their own messages and report numbers through ``update``: ``plan`` is the method
that answers (auto's choice: "dp", "coarse dp + ip", "ip"), ``method`` the stage running now (a
start such as "greedy", or the solver itself, "max-load IP"); the status line names both
("coarse dp + ip (greedy): 3.1 s, incumbent ..."), or the one that is set when they agree or
no plan was given. A daemon thread repeats the current status line whenever nothing was said
for ``PERIOD`` seconds (e.g. while SCIP solves a long root LP, during which no event fires: the
IPs solve without holding the GIL so the thread runs). The thread never calls into a solver,
it only reads the last reported numbers.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

PERIOD = 2.0  # most seconds between two progress messages during a solve

Progress = Callable[[str], Any]  # a progress callback: one message a call (a ``Heartbeat`` also takes ``update``)


@dataclass
class SolveStatus:
    """What a running solve has reported so far."""

    method: str = ""  # the stage running now
    plan: str = ""  # the method that answers (auto's choice), when the caller said
    incumbent: float = math.inf
    bound: float = -math.inf
    started: float = field(default_factory=time.perf_counter)

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    @property
    def gap(self) -> float:
        if not (math.isfinite(self.incumbent) and math.isfinite(self.bound)):
            return math.inf
        if self.incumbent == 0:
            return 0.0
        return max(0.0, (self.incumbent - self.bound) / abs(self.incumbent))

    @property
    def running(self) -> str:
        """``plan (method)``, or the one of them that is set, or "solve"."""
        if self.plan and self.method and self.method != self.plan:
            return f"{self.plan} ({self.method})"
        return self.plan or self.method or "solve"

    def line(self) -> str:
        gap = f"{100 * self.gap:.2f} %" if math.isfinite(self.gap) else "-"
        return (f"{self.running}: {self.elapsed:.1f} s, incumbent {self.incumbent:.6g}, "
                f"bound {self.bound:.6g}, gap {gap}")


class Heartbeat:
    """A progress callback that also repeats the status line every ``period`` seconds of silence.

    Use as a context manager around a solve; calling it forwards a message. ``update`` records
    the plan, the stage running, a better incumbent or a higher bound (never a worse one)."""

    def __init__(self, progress: Callable[[str], object] | None, period: float = PERIOD) -> None:
        self.progress, self.period = progress, period
        self.status = SolveStatus()
        self._last = time.perf_counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __call__(self, message: str) -> None:
        if self.progress is None:
            return
        with self._lock:
            self._last = time.perf_counter()
            self.progress(message)

    def update(self, method: str | None = None, incumbent: float | None = None,
               bound: float | None = None, say: bool = False, plan: str | None = None) -> None:
        with self._lock:
            if plan is not None:
                self.status.plan = plan
            if method is not None:
                self.status.method = method
            if incumbent is not None and incumbent < self.status.incumbent:
                self.status.incumbent = float(incumbent)
            if bound is not None and bound > self.status.bound:
                self.status.bound = float(bound)
        if say:
            self(self.status.line())

    def __enter__(self) -> Heartbeat:
        if self.progress is not None:
            self._thread = threading.Thread(target=self._beat, name="fpgaplace-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _beat(self) -> None:
        while not self._stop.wait(self.period / 10):
            if time.perf_counter() - self._last >= self.period:
                self(self.status.line())
