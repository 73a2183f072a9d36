"""Folding of one core's dataflow: PE and SIMD per stage, balanced within the core's budget.

Like FINN's ``SetFolding`` for a target rate, but searching the rate: the interval of a
dataflow is its slowest stage, so for a target interval ``T`` every stage takes its cheapest
folding with ``cycles <= T`` (cheapest = least budget-weighted DSP + BRAM36 + URAM + LUT), and
``T`` is the smallest value, found by bisection over the stages' candidate cycle counts, at
which the chosen foldings fit the core together. Feasibility is monotone in ``T`` (a larger
``T`` only adds candidates), so the bisection is exact for this choice rule.
Complexity: O(F log F) to sort the F candidate foldings, then O(S log F) per probe and
O(log F) probes for S stages.

Weights that are not resident are read from DRAM at every run; they share the core's one
memory port, so their cycles add up and bound the interval from below.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from functools import lru_cache

from fpgaplace.board import FpgaCore, Link
from fpgaplace.errors import FpgaplaceError
from fpgaplace.hw.kernels import Folding, Geometry, Kernel, Resources, core_budget


class DoesNotFit(FpgaplaceError):
    """The ops of a core need more of ``resource`` than the core has, at every folding."""

    def __init__(self, message: str, resource: str) -> None:
        super().__init__(message)
        self.resource = resource


@dataclass(frozen=True)
class Stage:
    """One op of a core as the folding sees it."""

    op: str
    kernel: Kernel
    geometry: Geometry
    resident: bool = True  # weights stay on chip (else streamed from DRAM every run)


@dataclass(frozen=True)
class FoldedStage:
    stage: Stage
    folding: Folding
    cycles: int
    resources: Resources


@dataclass(frozen=True)
class CoreFolding:
    core: FpgaCore
    stages: list[FoldedStage]
    compute_interval: int  # slowest stage
    dram_cycles: int  # streamed weights over the core's DRAM port, per run
    resources: Resources

    @property
    def interval(self) -> int:
        """Cycles between two samples leaving the core."""
        return max(self.compute_interval, self.dram_cycles)


def streamed_cycles(nbytes: int, core: FpgaCore, dram: Link) -> float:
    """Core cycles to read ``nbytes`` over the DRAM link (bytes per cycle = GB/s * 1e3 / MHz)."""
    return nbytes / (dram.gbps * 1e3 / core.clock_mhz) if nbytes else 0.0


class _Candidates:
    """One stage's foldings sorted by cycles and, for each way of ranking what a folding costs
    (``RANKINGS``), the cheapest one among the first i."""

    def __init__(self, stage: Stage, core: FpgaCore, budget: Resources) -> None:
        options = []
        for fold in stage.kernel.foldings(stage.geometry):
            if (fold.uram and core.uram == 0) or stage.kernel.lane_bound(fold, core, stage.geometry) > budget.dsp:
                continue
            used = stage.kernel.resources(stage.geometry, fold, core, stage.resident)
            if not used.over(budget):
                options.append((stage.kernel.cycles(stage.geometry, fold), _weight(used, budget), fold, used))
        options.sort(key=lambda o: (o[0], o[1]))
        self.stage = stage
        self.options = options
        self.cycles = [o[0] for o in options]
        self.cheapest = [self._prefix_minima(rank, budget) for rank in RANKINGS]

    def _prefix_minima(self, rank, budget: Resources) -> list[int]:
        """For each i, the index of the cheapest of the first i + 1 options under ``rank``."""
        minima: list[int] = []
        for i, option in enumerate(self.options):
            best = minima[-1] if minima else i
            minima.append(i if rank(option, budget) < rank(self.options[best], budget) else best)
        return minima

    def pick(self, target: int, ranking: int = 0) -> tuple[int, float, Folding, Resources] | None:
        i = bisect.bisect_right(self.cycles, target) - 1
        return self.options[self.cheapest[ranking][i]] if i >= 0 else None


# Ways to rank a stage's foldings within a target: the weighted share of every resource, or one
# resource first (the core's scarce one decides which balance fits).
RANKINGS = (
    lambda option, budget: option[1],
    lambda option, budget: (option[3].dsp, option[1]),
    lambda option, budget: (option[3].lut, option[1]),
    lambda option, budget: (option[3].bram36 + option[3].uram, option[1]),
)


@lru_cache(maxsize=4096)
def _candidates(stage: Stage, core: FpgaCore) -> _Candidates:
    """The stage's candidates on ``core`` (cached: a core folded again after one op's weights
    moved to DRAM rebuilds only that op's)."""
    return _Candidates(stage, core, core_budget(core))


def _weight(used: Resources, budget: Resources) -> float:
    return sum(u / b for u, b in zip(used.as_tuple()[:4], budget.as_tuple()[:4], strict=True) if b > 0)


def _total(picks) -> Resources:
    total = Resources()
    for pick in picks:
        total += pick[3]
    return total


def fold_core(stages: list[Stage], core: FpgaCore, dram: Link) -> CoreFolding:
    """The balanced folding of ``stages`` on ``core`` (see the module docstring).

    Raises ``FpgaplaceError`` naming the core, an op and the resource when the ops cannot fit
    the core at any folding.
    """
    candidates = [_candidates(stage, core) for stage in stages]
    budget = core_budget(core)
    for c in candidates:
        if not c.options:
            slowest = c.stage.kernel.resources(c.stage.geometry, Folding(), core, c.stage.resident)
            over = ", ".join(f"{n} {getattr(slowest, n)} > {getattr(budget, n)}" for n in slowest.over(budget))
            raise DoesNotFit(f"{core.name}: op '{c.stage.op}' does not fit the core at any folding ({over})",
                             slowest.over(budget)[0])
    targets = sorted({cycles for c in candidates for cycles in c.cycles}) or [0]

    def fitting_picks(target: int) -> list | None:
        """The stages' foldings within ``target`` under the first ranking whose total fits."""
        for ranking in range(len(RANKINGS)):
            picks = [c.pick(target, ranking) for c in candidates]
            if all(p is not None for p in picks) and not _total(picks).over(budget):
                return picks
        return None

    def fits(target: int) -> bool:
        return fitting_picks(target) is not None

    if not fits(targets[-1]):
        slowest = _total(c.pick(targets[-1]) for c in candidates)
        name = slowest.over(budget)[0]
        raise DoesNotFit(
            f"{core.name}: its {len(stages)} ops need {getattr(slowest, name)} {name} at the smallest folding; "
            f"the core has {getattr(budget, name)}",
            name,
        )
    low = bisect.bisect_left(range(len(targets)), True, key=lambda i: fits(targets[i]))
    picks = fitting_picks(targets[low])
    folded = [FoldedStage(c.stage, p[2], p[0], p[3]) for c, p in zip(candidates, picks, strict=True)]
    streamed = sum(s.geometry.weights for s in stages if not s.resident)
    return CoreFolding(
        core=core,
        stages=folded,
        compute_interval=max((f.cycles for f in folded), default=0),
        dram_cycles=math.ceil(streamed_cycles(streamed, core, dram)),
        resources=_total(picks),
    )
