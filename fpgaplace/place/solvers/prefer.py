"""Among placements of equal value, the one that keeps more work on the accelerators.

A solver optimises one number: the max-load (throughput) or the latency. Where an op on a CPU
is not on the critical device, moving it onto an accelerator leaves that number unchanged, so
the solver has no reason to prefer either; the DP, for one, keeps whichever chain it met first.
Yet the two are not equal to a user: an op on a CPU costs a DMA round trip and CPU time, and a
classifier's closing Softmax on the ARM cores means the FPGA's output crosses to the CPU and back.
``prefer_accelerators`` breaks such ties towards the accelerators: it moves a CPU op (with its
colour class) onto an accelerator that already holds one of its neighbours whenever the value,
as the trusted evaluator computes it, does not grow, the accelerator supports every moved op
and has the memory for it, and (for contiguous placements) every device's set stays convex.
Hill climbing, so the answer is a local optimum of the secondary criterion; the primary value
never changes for the worse.

Complexity: each trial is O(D (n + m)) (loads or schedule, and convexity); a round tries each
CPU class against each accelerator next to it, and rounds repeat while a move is made, all
within ``seconds``; none past ``PREFER_MAX_OPS`` ops.
"""

from __future__ import annotations

import copy
import math
import time

import numpy as np

from fpgaplace.place.solvers.evaluate import device_loads, is_contiguous, latency_schedule
from fpgaplace.place.solvers.problem import Placement, PlacementProblem
from fpgaplace.util.errors import FpgaplaceError

PREFER_SECONDS = 2.0  # at most this long moving CPU ops onto accelerators after a solve
PREFER_MAX_OPS = 20_000  # past this many ops one trial (a full evaluation) takes seconds: no moves
TOLERANCE = 1e-9  # a move may not raise the value by more than this share


def placement_value(problem: PlacementProblem, device: np.ndarray, objective: str,
                    order: np.ndarray | None = None) -> float:
    """The evaluator's max-load (throughput) or single-sample latency of ``device``; ``inf`` for
    a latency schedule that deadlocks. O(D (n + m)) for max-load."""
    if objective == "latency":
        try:
            schedule = latency_schedule(problem, device, order, problem.cpu_overlap_unlimited)
        except FpgaplaceError:
            return math.inf
        return max((entry.end for entry in schedule), default=0.0)
    return max(device_loads(problem, device), default=0.0)


def _groups(problem: PlacementProblem) -> list[list[int]]:
    """The nodes that move together: each colour class, and every uncoloured node alone."""
    by_colour: dict[int, list[int]] = {}
    groups: list[list[int]] = []
    for v in range(problem.n):
        colour = int(problem.color[v])
        if colour < 0:
            groups.append([v])
        else:
            by_colour.setdefault(colour, []).append(v)
    return groups + list(by_colour.values())


def _neighbour_accelerators(problem: PlacementProblem, group: list[int], device: np.ndarray,
                            neighbours: list[set[int]], is_cpu: list[bool]) -> list[int]:
    """The accelerators holding a predecessor or successor of ``group``, in device order."""
    found = {int(device[w]) for v in group for w in neighbours[v]}
    return sorted(d for d in found if not is_cpu[d])


def _fits(problem: PlacementProblem, group: list[int], target: int, used: np.ndarray, limits: list[float],
          kinds: list[int]) -> bool:
    kind = kinds[target]
    if not all(np.isfinite(problem.latency[v, kind]) for v in group):
        return False
    return used[target] + float(problem.size[group].sum()) <= limits[target] * (1 + 1e-12)


def prefer_accelerators(problem: PlacementProblem, placement: Placement, objective: str,
                        contiguous: bool = True, seconds: float = PREFER_SECONDS) -> Placement:
    """``placement`` with CPU ops moved onto neighbouring accelerators where the value does not
    grow (module docstring); the same object when nothing moves. A placement with a given
    subgraph ``order`` is returned as it is (its order names the units it was solved with), and
    so is one of more than ``PREFER_MAX_OPS`` ops (a 200,000-op chain: 9 s for the first trial)."""
    if placement.order is not None or problem.n == 0 or problem.n > PREFER_MAX_OPS:
        return placement
    kinds = problem.device_kinds()
    is_cpu = [problem.kinds[k].is_cpu for k in kinds]
    device = np.asarray(placement.device, dtype=np.int64).copy()
    cpu_groups = [g for g in _groups(problem) if all(is_cpu[int(device[v])] for v in g)]
    if not cpu_groups or all(is_cpu):
        return placement
    neighbours: list[set[int]] = [set() for _ in range(problem.n)]
    for u, v in problem.edges:
        neighbours[u].add(v)
        neighbours[v].add(u)
    limits = [problem.kinds[k].memory for k in kinds]
    used = np.bincount(device, weights=problem.size, minlength=len(kinds)).astype(float)
    value = placement_value(problem, device, objective)
    deadline = time.perf_counter() + seconds
    moved = True
    while moved and time.perf_counter() < deadline:
        moved = False
        for group in cpu_groups:
            if time.perf_counter() > deadline:
                break
            source = int(device[group[0]])
            if not is_cpu[source]:
                continue
            for target in _neighbour_accelerators(problem, group, device, neighbours, is_cpu):
                if not _fits(problem, group, target, used, limits, kinds):
                    continue
                trial = device.copy()
                trial[group] = target
                if contiguous and not is_contiguous(problem, trial):
                    continue
                candidate = placement_value(problem, trial, objective)
                if candidate <= value * (1 + TOLERANCE):
                    device, value, moved = trial, min(value, candidate), True
                    weight = float(problem.size[group].sum())
                    used[source] -= weight
                    used[target] += weight
                    break
    if np.array_equal(device, placement.device):
        return placement
    preferred = copy.copy(placement)
    preferred.device = device
    return preferred
