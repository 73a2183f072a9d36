"""SCIP plumbing the integer programs share: a configured model (limits, seed, heuristics), progress
events (incumbent, bound, gap), status names, symmetry breaking of identical devices, and the
warm starts: every projected start is given to SCIP, the best sets the cutoff, and it is
returned (status "start kept (<method>): <why>") when SCIP ends with nothing better.

Source: Tarnawski et al., NeurIPS 2020 (Sections 4-5 and Appendix) solve their programs with
Gurobi to a 1 % gap; here SCIP (pyscipopt) with aggressive heuristics and a fixed seed.
pyscipopt is imported when a first model is built, so importing this module (and every solve
that needs no program) stays fast.

Symmetry of identical devices is broken by ordering them by their smallest group index (prefix
sums P[g,d]; x[g,d_j] <= P[g-1,d_{j-1}]): O(G) rows and columns per pair of neighbouring devices.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from fpgaplace.place.solvers.ip.reduce import Groups, ProjectedStart
from fpgaplace.place.solvers.problem import Placement, PlacementProblem
from fpgaplace.place.solvers.progress import Progress

if TYPE_CHECKING:
    from pyscipopt import Model

DEFAULT_GAP = 0.01  # the entry point's relative gap (the paper's Gurobi runs stop at 1 %); functions here are exact
PROGRESS_SECONDS = 2.0  # most seconds between two reports of a running solve
STATUS_NAMES = {"optimal": "optimal", "timelimit": "time limit", "gaplimit": "gap limit"}


def emit(progress: Progress | None, message: str) -> None:
    """Say ``message`` through the callback, or through the ``console`` of an object that has one
    (rich's Progress); nothing when ``progress`` is None."""
    if progress is None:
        return
    console = getattr(progress, "console", None)
    if console is not None:
        console.log(message)
    elif callable(progress):
        progress(message)


def quicksum(terms: Any) -> Any:
    """pyscipopt's ``quicksum``; pyscipopt (SCIP) is imported when a first model is built, so
    importing this module (and every solve that needs no program) stays fast."""
    from pyscipopt import quicksum as scip_quicksum

    return scip_quicksum(terms)


@cache
def _progress_events_class() -> type:
    """The SCIP event handler class (defined on first use, see ``quicksum``)."""
    from pyscipopt import SCIP_EVENTTYPE, Eventhdlr

    class _ProgressEvents(Eventhdlr):
        """Reports incumbent, bound and gap on every new incumbent and at most every
        ``PROGRESS_SECONDS`` on node and LP events; numbers also go to ``progress.update`` when the
        callback has one (``progress.Heartbeat``, which fills the silences of a long LP)."""

        EVENTS = ("BESTSOLFOUND", "NODESOLVED", "LPSOLVED", "DUALBOUNDIMPROVED")

        def __init__(self, progress: Progress, label: str) -> None:
            super().__init__()
            self.progress, self.label, self.last = progress, label, 0.0

        def eventinit(self) -> None:
            for name in self.EVENTS:
                self.model.catchEvent(getattr(SCIP_EVENTTYPE, name), self)

        def eventexit(self) -> None:
            for name in self.EVENTS:
                self.model.dropEvent(getattr(SCIP_EVENTTYPE, name), self)

        def eventexec(self, event: Any) -> None:
            m = self.model
            primal, dual = m.getPrimalbound(), m.getDualbound()
            update = getattr(self.progress, "update", None)
            if update is not None:
                update(method=self.label, incumbent=primal if abs(primal) < 1e19 else None,
                       bound=dual if abs(dual) < 1e19 else None)
            now = time.perf_counter()
            if event.getType() != SCIP_EVENTTYPE.BESTSOLFOUND and now - self.last < PROGRESS_SECONDS:
                return
            self.last = now
            finite = abs(primal) < 1e19 and abs(dual) < 1e19
            gap = max(0.0, (primal - dual) / abs(primal)) if finite and primal != 0 else 0.0  # Placement.gap's
            emit(self.progress, f"{self.label}: {m.getSolvingTime():.1f} s, incumbent {primal:.6g}, "
                                f"bound {dual:.6g}, gap {100 * gap:.2f} %" if finite else
                                f"{self.label}: {m.getSolvingTime():.1f} s, incumbent {primal:.6g}, bound {dual:.6g}")

    return _ProgressEvents


def new_model(name: str, time_limit: float, gap: float, progress: Progress | None) -> Model:
    """An empty SCIP model with its time and gap limits, a fixed seed, aggressive heuristics, no
    output, and the progress events when ``progress`` is given."""
    from pyscipopt import SCIP_PARAMSETTING, Model

    model = Model(name)
    model.hideOutput()
    model.setParam("limits/time", max(0.01, float(time_limit)))
    model.setParam("limits/gap", max(0.0, float(gap)))
    model.setParam("randomization/randomseedshift", 0)
    model.setHeuristics(SCIP_PARAMSETTING.AGGRESSIVE)  # closer to the paper's Gurobi run
    if progress is not None:
        model.includeEventhdlr(_progress_events_class()(progress, name), name + "-progress",
                               "reports primal and dual bounds")
    return model


def model_size(model: Model) -> dict[str, int]:
    """Columns and rows of a built model (before presolve)."""
    return {"vars": model.getNVars(), "conss": model.getNConss()}


def status_name(model: Model) -> str:
    """SCIP's status in words ("time limit"), or as SCIP says it where ``STATUS_NAMES`` has none."""
    raw = model.getStatus()
    return STATUS_NAMES.get(raw, raw)


def bounds_message(model: Model) -> str:
    """Primal and dual bound and raw status, for an error that SCIP found nothing."""
    return (f"primal {model.getPrimalbound():.6g}, dual {model.getDualbound():.6g}, "
            f"status {model.getStatus()}")


def identical_runs(problem: PlacementProblem, devices: list[int]) -> list[list[int]]:
    """The given device indices grouped by kind (identical devices), runs of two or more."""
    kind = problem.device_kinds()
    runs: dict[int, list[int]] = {}
    for d in devices:
        runs.setdefault(kind[d], []).append(d)
    return [run for run in runs.values() if len(run) > 1]


def order_by_smallest_group(
    model: Model, membership: dict[tuple[int, int], Any], groups: int, runs: list[list[int]]
) -> None:
    """x[g, d_j] <= sum_{g' < g} x[g', d_{j-1}] for identical devices d_0, d_1, ... (linear
    size through prefix sums): non-empty devices sorted by their smallest group, empty last."""
    for run in runs:
        for previous, current in zip(run, run[1:], strict=False):
            prefix: Any = 0.0
            for g in range(groups):
                here = membership.get((g, current))
                if here is not None:
                    model.addCons(here <= prefix, name=f"sym_{g}_{current}")
                before = membership.get((g, previous))
                if before is not None:
                    p = model.addVar(f"P_{g}_{previous}", lb=0.0, ub=None)
                    model.addCons(p == prefix + before)
                    prefix = p


def canonical_devices(problem: PlacementProblem, groups: Groups, device_of_group: np.ndarray,
                      devices: list[int]) -> np.ndarray:
    """Relabel identical devices so the non-empty ones are sorted by smallest group."""
    out = device_of_group.copy()
    for ds in identical_runs(problem, devices):
        smallest = {d: (np.flatnonzero(device_of_group == d).min()
                        if (device_of_group == d).any() else groups.count + d) for d in ds}
        for new, old in zip(ds, sorted(ds, key=smallest.get), strict=True):
            out[device_of_group == old] = new
    return out


def set_prefix_counts(model: Model, sol: Any, device_of_group: np.ndarray) -> None:
    """Symmetry-breaking prefix sums P_g_d = number of groups 0..g on device d. O(vars + G D)."""
    prefix: dict[int, np.ndarray] = {}
    for var in model.getVars():
        if var.name.startswith("P_"):
            _, g, d = var.name.split("_")
            counts = prefix.setdefault(int(d), np.cumsum(device_of_group == int(d)))
            model.setSolVal(sol, var, float(counts[int(g)]))


def projected_starts(candidates: Sequence[Placement | None],
                     project: Callable[[Placement], ProjectedStart | None],
                     progress: Progress | None) -> list[ProjectedStart]:
    """Every candidate that projects onto the groups, best projected value first; a projection
    that scores worse than its start is reported (it never should, ``project_onto_groups``)."""
    out = []
    for candidate in candidates:
        if candidate is None:
            continue
        projected = project(candidate)
        if projected is None:
            emit(progress, f"start {candidate.method or '?'}: infeasible for this program, skipped")
            continue
        if projected.value > projected.original * (1 + 1e-9) + 1e-12:
            emit(progress, f"start {projected.method or '?'}: {projected.original:.6g} becomes "
                           f"{projected.value:.6g} on the program's groups")
        out.append(projected)
    return sorted(out, key=lambda p: p.value)


def kept_start(best: ProjectedStart, bound: float, reason: str) -> Placement:
    """The best projected start as the program's answer (SCIP ended with nothing better);
    status "start kept (<its method>): <reason>"."""
    placement = copy.copy(best.placement)
    placement.method = "ip"
    placement.value = best.value
    placement.bound = min(bound, best.value)
    placement.status = f"start kept ({best.method or 'given'}): {reason}"
    return placement


def warm_starts(starts: list[ProjectedStart], give: Callable[[ProjectedStart], bool], cutoff: float,
                progress: Progress | None, label: str) -> None:
    """Hand SCIP every projected start within the cutoff (the best start's value; a worse one
    violates the objective's bound), each distinct assignment once."""
    seen: set[tuple[bytes, bytes]] = set()
    given: list[str] = []
    for start in starts:
        key = (start.device_of_group.tobytes(), start.slot.tobytes())
        if start.value > cutoff or key in seen:
            continue
        seen.add(key)
        if give(start):
            given.append(start.method or "?")
    emit(progress, f"{label}: {len(given)} of {len(starts)} starts given to SCIP "
                   f"({', '.join(given) or 'none'}); the rest repeat one or exceed the cutoff "
                   f"{cutoff:.6g}")
