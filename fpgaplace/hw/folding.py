"""Folding of one core's dataflow: PE and SIMD per stage, balanced within the core's budget.

Like FINN's ``SetFolding`` for a target rate, but searching the rate: the interval of a
dataflow is its slowest stage, so for a target interval ``T`` every stage takes one of its
foldings with ``cycles <= T`` such that together they fit the core, and ``T`` is the smallest
value, found by bisection over the stages' candidate cycle counts, at which a fitting choice
is found. Choosing is a multiple-choice knapsack over DSP, BRAM36, URAM, LUT and FF, so it is
done in three steps, cheapest first:

1. a proof that nothing fits: the stages' least use of one resource within ``T`` already
   exceeds the core's (exact: no choice does better on that resource);
2. each stage's cheapest folding under a fixed ranking (``RANKINGS``: the budget-weighted sum,
   or one resource first), from prefix minima: O(S log F);
3. a Lagrangian search (``lagrangian_picks``): each stage takes the folding of least priced use,
   the price of each resource starting at 1 / budget and raised multiplicatively where the
   total is over, lowered where it is under (the multiplicative-weights rule), for at most
   ``LAGRANGE_ROUNDS`` rounds; the priced choice that came closest (and each ranking's) is then
   repaired by greedy descent on the excess (``repaired``: one stage switched per step, to the
   folding that lowers the total excess most; where none does, one switch that moves the excess
   off the resources that are over, then the descent again). Prices alone swing between choices
   each just over one resource; the repair finishes the job. Where DSPs and BRAM both bind (a
   depthwise conv's line buffer splits into more banks the wider it runs), this finds the mixes
   no single ranking does: on MobileNetV2 and ResNet-50 on zcu104 and kv260 every core folds to
   within 0.1 % of SCIP's least interval (``least_interval``, ``scripts/bench_agreement.py``),
   where the rankings alone stopped up to twice above it.

A larger ``T`` only adds candidates, so steps 1 and 2 are monotone in ``T``; step 3 is a
heuristic, so the bisection's answer is checked and, if its probe failed, the next larger
target that fits is taken. Complexity: O(F log F) to sort the F candidate foldings, then
O(S log F) per probe (plus O(F) per price round and per repair step where step 3 runs) and
O(log F) probes.

With a rate to keep up with (``FpgaCore.fps``, ``compile --fps``; FINN's ``target_fps``) the
target is the larger of that rate's interval and the least ``T`` that fits, and each stage takes
its cheapest folding within it (step 2's budget-weighted ranking first): the fabric need not
outrun what feeds it (an ECP5 board's UART link carries a few hundred 32 x 32 images a second).

Weights that are not resident are read from DRAM at every run; they share the core's one
memory port, so their cycles add up and bound the interval from below.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from fpgaplace.board.model import FpgaCore, Link
from fpgaplace.hw.geometry import Folding, Geometry, Resources, core_budget
from fpgaplace.hw.kernel import Kernel
from fpgaplace.util.errors import FpgaplaceError


class DoesNotFit(FpgaplaceError):
    """The ops of core ``core`` need more of ``resource`` than the core has, at every folding:
    ``needed`` of it where the core has ``available``; ``fifo_bytes``: by op, the on-chip bytes of
    the FIFOs in front of its layers where those FIFOs are what does not fit (else empty);
    ``shares``: by op, its share of the core's ``resource`` at its smallest folding, where the ops
    together are what does not fit (else empty); ``ops``: the ops that each alone fit the core at no
    folding (the figures are the first's; else empty)."""

    def __init__(self, message: str, resource: str, core: str = "", needed: float = 0, available: float = 0,
                 fifo_bytes: dict[str, float] | None = None, shares: dict[str, float] | None = None,
                 ops: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.resource, self.core, self.needed, self.available = resource, core, needed, available
        self.fifo_bytes, self.shares, self.ops = fifo_bytes or {}, shares or {}, ops

    @property
    def over(self) -> float:
        """How many times the core's ``resource`` the ops need (at least 1; 2 where it has none)."""
        return max(1.0, self.needed / self.available) if self.available > 0 else 2.0


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

    def binding(self) -> list[str]:
        """What holds the interval where it is: the resources used to at least ``BINDING_SHARE``
        of the core's budget, and "dram" when the streamed weights take at least as long as the
        slowest stage; "fps" when the core was folded for a rate it keeps up with (``core.fps``);
        empty when every stage runs at its fastest folding."""
        if self.core.fps > 0 and self.compute_interval <= self.core.clock_mhz * 1e6 / self.core.fps:
            return ["fps"]
        budget = core_budget(self.core)
        names = [n for n, used, have in zip(RESOURCE_NAMES, self.resources.as_tuple(), budget.as_tuple(), strict=True)
                 if have and used >= BINDING_SHARE * have]
        return names + (["dram"] if self.dram_cycles and self.dram_cycles >= self.compute_interval else [])


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
        self.use = np.array([o[3].as_tuple() for o in options], dtype=np.float64).reshape(-1, len(RESOURCE_NAMES))
        self.least = np.minimum.accumulate(self.use, axis=0)  # least use of each resource among the first i

    def _prefix_minima(self, rank, budget: Resources) -> list[int]:
        """For each i, the index of the cheapest of the first i + 1 options under ``rank``."""
        minima: list[int] = []
        for i, option in enumerate(self.options):
            best = minima[-1] if minima else i
            minima.append(i if rank(option, budget) < rank(self.options[best], budget) else best)
        return minima

    def within(self, target: int) -> int:
        """How many of the foldings take at most ``target`` cycles."""
        return bisect.bisect_right(self.cycles, target)

    def pick(self, target: int, ranking: int = 0) -> tuple[int, float, Folding, Resources] | None:
        i = self.within(target) - 1
        return self.options[self.cheapest[ranking][i]] if i >= 0 else None

    def priced_pick(self, count: int, prices: np.ndarray) -> int:
        """The index of the folding of least priced use among the first ``count`` (ties: the faster)."""
        return int(np.argmin(self.use[:count] @ prices))


# Ways to rank a stage's foldings within a target: the weighted share of every resource, or one
# resource first (the core's scarce one decides which balance fits).
RANKINGS = (
    lambda option, budget: option[1],
    lambda option, budget: (option[3].dsp, option[1]),
    lambda option, budget: (option[3].lut, option[1]),
    lambda option, budget: (option[3].bram36 + option[3].uram, option[1]),
)


RESOURCE_NAMES = ("dsp", "bram36", "uram", "lut", "ff")
BINDING_SHARE = 0.95  # a resource used this far binds the folding (a wider stage would not fit)
LAGRANGE_ROUNDS = 40  # rounds of the price search before a target is given up
LAGRANGE_STEP = 2.0  # exponent of the multiplicative price update per unit of relative excess
REPAIR_BRANCHES = 6  # switches tried where the repair's descent is stuck
REPAIR_KICKS = 1  # how deep such switches nest
REPAIR_MAX_EXCESS = 0.25  # the priced choice's excess (in budgets) beyond which no repair is tried


def least_use_over(candidates: list[_Candidates], counts: list[int], budget: Resources) -> bool:
    """Whether some resource is over ``budget`` even when every stage takes its least use of it
    among its first ``counts`` foldings (then no choice fits: an exact test)."""
    least = sum(c.least[n - 1] for c, n in zip(candidates, counts, strict=True))
    return bool(np.any(least > np.array(budget.as_tuple(), dtype=np.float64)))


def lagrangian_picks(candidates: list[_Candidates], counts: list[int], budget: Resources) -> list | None:
    """Foldings that fit ``budget`` found by pricing the resources, then repairing the priced
    choice that came closest (see the module docstring, step 3), or None.
    O(F * (LAGRANGE_ROUNDS + repair steps))."""
    capacity = np.array(budget.as_tuple(), dtype=np.float64)
    present = capacity > 0
    scale = np.where(present, 1.0 / np.maximum(capacity, 1.0), 0.0)
    prices = scale.copy()
    closest: tuple[float, list[int]] | None = None
    for _ in range(LAGRANGE_ROUNDS):
        chosen = [c.priced_pick(n, prices) for c, n in zip(candidates, counts, strict=True)]
        total = sum(c.use[i] for c, i in zip(candidates, chosen, strict=True))
        over = _excess(total, capacity, scale)
        if over == 0:
            break
        if closest is None or over < closest[0]:
            closest = (over, chosen)
        relative = total * scale - 1.0
        prices = prices * np.exp(LAGRANGE_STEP * np.clip(relative, -1.0, 1.0))
    else:
        assert closest is not None
        if closest[0] > REPAIR_MAX_EXCESS:  # far from fitting: a repair would search long and fail
            return None
        starts = [closest[1], *([c.cheapest[r][n - 1] for c, n in zip(candidates, counts, strict=True)]
                                for r in range(len(RANKINGS)))]
        attempts = [(start, 0) for start in starts] + [(closest[1], REPAIR_KICKS)]  # plain descents first
        chosen = next((fit for start, kicks in attempts
                       if (fit := repaired(candidates, counts, start, capacity, scale, kicks)) is not None), None)
        if chosen is None:
            return None
    return [c.options[i] for c, i in zip(candidates, chosen, strict=True)]


def _excess(total: np.ndarray, capacity: np.ndarray, scale: np.ndarray) -> float:
    """How far ``total`` is over the budget: the sum of each resource's excess over its capacity."""
    return float(np.sum(np.maximum(total - capacity, 0.0) * scale, axis=-1))


def repaired(candidates: list[_Candidates], counts: list[int], chosen: list[int], capacity: np.ndarray,
             scale: np.ndarray, kicks: int = REPAIR_KICKS) -> list[int] | None:
    """Greedy descent on the excess from ``chosen``: each step switches the one stage, to the one
    folding within its first ``counts``, that lowers the total excess most (ties: the least
    budget-weighted use), until nothing is over (the fitting choice). Where no switch lowers it
    (one block of BRAM over, and every switch that frees it spends too many DSPs), the descent
    starts again after each of the ``REPAIR_BRANCHES`` best switches that use less of every
    resource that is over (``_shifts``): they move the excess onto resources other stages can
    give back; ``kicks`` deep, None if none of them fits. The excess falls at every step of a
    descent, so each ends; O(F) per step."""
    chosen = list(chosen)
    total = sum(c.use[i] for c, i in zip(candidates, chosen, strict=True))
    over = _excess(total, capacity, scale)
    while over > 0:
        best = (over, math.inf, -1, -1)
        for s, (c, n) in enumerate(zip(candidates, counts, strict=True)):
            switched = total - c.use[chosen[s]] + c.use[:n]
            excess = np.sum(np.maximum(switched - capacity, 0.0) * scale, axis=1)
            weight = switched @ scale
            i = int(np.lexsort((weight, excess))[0])
            if (excess[i], weight[i]) < best[:2]:
                best = (float(excess[i]), float(weight[i]), s, i)
        if best[0] >= over:
            if kicks == 0:
                return None
            for s, i in _shifts(candidates, counts, chosen, total, capacity, scale)[:REPAIR_BRANCHES]:
                fit = repaired(candidates, counts, [*chosen[:s], i, *chosen[s + 1:]], capacity, scale, kicks - 1)
                if fit is not None:
                    return fit
            return None
        over, _, s, i = best
        total = total - candidates[s].use[chosen[s]] + candidates[s].use[i]
        chosen[s] = i
    return chosen


def _shifts(candidates: list[_Candidates], counts: list[int], chosen: list[int], total: np.ndarray,
            capacity: np.ndarray, scale: np.ndarray) -> list[tuple[int, int]]:
    """(stage, folding) switches, at most one a stage, that use less of every resource over
    ``capacity`` and no more of any, in order of the excess after them (then the weighted use)."""
    over = total > capacity
    moves = []
    for s, (c, n) in enumerate(zip(candidates, counts, strict=True)):
        current = c.use[chosen[s]]
        lower = np.all(c.use[:n][:, over] < current[over], axis=1)
        if not lower.any():
            continue
        switched = total - current + c.use[:n]
        excess = np.where(lower, np.sum(np.maximum(switched - capacity, 0.0) * scale, axis=1), np.inf)
        i = int(np.lexsort((switched @ scale, excess))[0])
        moves.append((float(excess[i]), float(switched[i] @ scale), s, i))
    return [(s, i) for _, _, s, i in sorted(moves)]


def _candidates(stage: Stage, core: FpgaCore) -> _Candidates:
    """The stage's candidates on ``core`` (cached: a core folded again after one op's weights
    moved to DRAM rebuilds only that op's; keyed by its threshold count too, which a geometry's
    equality leaves out with the rest of its ``shape``, but a threshold stage's resources follow)."""
    return _cached_candidates(stage, core, int(stage.geometry.shape.get("T", 0)))


@lru_cache(maxsize=4096)
def _cached_candidates(stage: Stage, core: FpgaCore, thresholds: int) -> _Candidates:
    """``_Candidates`` of ``stage`` on ``core``, cached per threshold count (``_candidates``)."""
    return _Candidates(stage, core, core_budget(core))


def _weight(used: Resources, budget: Resources) -> float:
    return sum(u / b for u, b in zip(used.as_tuple()[:4], budget.as_tuple()[:4], strict=True) if b > 0)


def _total(picks) -> Resources:
    total = Resources()
    for pick in picks:
        total += pick[3]
    return total


def balanced_picks(candidates: list[_Candidates], core: FpgaCore, slack: float | None = None) -> list:
    """One folding per stage: the choice at the least target that fits (module docstring), or,
    where ``slack`` cycles allow a slower one, the cheapest foldings within the largest target
    up to ``slack`` that fit.

    Raises ``DoesNotFit`` when a stage, or all of them together, cannot fit the core at any folding.
    """
    budget = core_budget(core)
    unfit = [c for c in candidates if not c.options]
    if unfit:
        first = unfit[0].stage
        slowest = first.kernel.resources(first.geometry, Folding(), core, first.resident)
        over = ", ".join(f"{n} {getattr(slowest, n)} > {getattr(budget, n)}" for n in slowest.over(budget))
        name = slowest.over(budget)[0]
        more = f" (and {len(unfit) - 1} more)" if len(unfit) > 1 else ""
        raise DoesNotFit(f"{core.name}: op '{first.op}'{more} does not fit the core at any folding ({over})",
                         name, core.name, getattr(slowest, name), getattr(budget, name),
                         ops=tuple(c.stage.op for c in unfit))
    targets = sorted({cycles for c in candidates for cycles in c.cycles}) or [0]

    def fitting_picks(target: int) -> list | None:
        """Foldings within ``target`` that fit the core (module docstring, steps 1 to 3), or None."""
        counts = [c.within(target) for c in candidates]
        if 0 in counts or least_use_over(candidates, counts, budget):
            return None
        for ranking in range(len(RANKINGS)):
            picks = [c.pick(target, ranking) for c in candidates]
            if not _total(picks).over(budget):
                return picks
        return lagrangian_picks(candidates, counts, budget)

    def fits(target: int) -> bool:
        return fitting_picks(target) is not None

    if not fits(targets[-1]):
        smallest = [c.pick(targets[-1]) for c in candidates]
        slowest = _total(smallest)
        name = slowest.over(budget)[0]
        raise DoesNotFit(
            f"{core.name}: its {len(candidates)} ops need {getattr(slowest, name)} {name} at the smallest folding; "
            f"the core has {getattr(budget, name)}",
            name, core.name, getattr(slowest, name), getattr(budget, name),
            shares={c.stage.op: getattr(pick[3], name) / getattr(budget, name)
                    for c, pick in zip(candidates, smallest, strict=True)},
        )
    low = bisect.bisect_left(range(len(targets)), True, key=lambda i: fits(targets[i]))
    relaxed = bisect.bisect_right(targets, slack) - 1 if slack else -1
    picks = fitting_picks(targets[relaxed]) if relaxed > low else None
    while picks is None:  # the heuristic step failed at the bisection's probe: the next target that fits
        picks = fitting_picks(targets[low])
        low += 1
    return picks


def fold_core(stages: list[Stage], core: FpgaCore, dram: Link) -> CoreFolding:
    """The balanced folding of ``stages`` on ``core`` (see the module docstring): the fastest that
    fits, or the cheapest that keeps up with ``core.fps`` where that is slower.

    Raises ``FpgaplaceError`` naming the core, an op and the resource when the ops cannot fit
    the core at any folding.
    """
    candidates = [_candidates(stage, core) for stage in stages]
    picks = balanced_picks(candidates, core, core.clock_mhz * 1e6 / core.fps if core.fps > 0 else None)
    folded = [FoldedStage(c.stage, p[2], p[0], p[3]) for c, p in zip(candidates, picks, strict=True)]
    streamed = sum(s.geometry.weights for s in stages if not s.resident)
    return CoreFolding(
        core=core,
        stages=folded,
        compute_interval=max((f.cycles for f in folded), default=0),
        dram_cycles=math.ceil(streamed_cycles(streamed, core, dram)),
        resources=_total(picks),
    )


@dataclass(frozen=True)
class IntervalCertificate:
    """The least compute interval any choice of the stages' foldings reaches on a core within
    every resource of its budget, proven by SCIP: ``interval`` fits, and every candidate interval
    below it was proven infeasible (``proven`` is False when a probe hit the time limit, and then
    ``interval`` is only the least one found to fit)."""

    interval: int
    proven: bool
    probes: int


def least_interval(stages: list[Stage], core: FpgaCore, time_limit: float = 30.0) -> IntervalCertificate:
    """The exact least interval of ``stages`` on ``core`` (what ``fold_core``'s heuristic choice
    is measured against): bisection over the candidate cycle counts between the first not
    disproved by least use (step 1 of the module docstring) and ``fold_core``'s own interval,
    each probe a feasibility integer program on SCIP (pyscipopt): one binary per folding within
    the target, one folding per stage, one knapsack row per resource. O(log F) probes."""
    from pyscipopt import Model, quicksum

    candidates = [_candidates(stage, core) for stage in stages]
    budget = core_budget(core)
    capacity = budget.as_tuple()
    folded = max(p[0] for p in balanced_picks(candidates, core))
    targets = sorted({cycles for c in candidates for cycles in c.cycles if cycles <= folded})
    low = next(i for i, t in enumerate(targets)
               if not least_use_over(candidates, [c.within(t) for c in candidates], budget))
    high, proven, probes = len(targets) - 1, True, 0
    while low < high:
        middle = (low + high) // 2
        model = Model()
        model.hideOutput()
        model.setParam("limits/time", time_limit)
        chosen = []
        for c in candidates:
            pick = [model.addVar(vtype="B") for _ in range(c.within(targets[middle]))]
            model.addCons(quicksum(pick) == 1)
            chosen.append((c, pick))
        for r, limit in enumerate(capacity):
            model.addCons(quicksum(float(c.use[i, r]) * x for c, pick in chosen for i, x in enumerate(pick)) <= limit)
        model.optimize()
        probes += 1
        status = model.getStatus()
        if status == "optimal":
            high = middle
        elif status == "infeasible":
            low = middle + 1
        else:  # time limit: neither proven; look above, and say the answer is not proven least
            proven, low = False, middle + 1
    return IntervalCertificate(targets[high], proven, probes)
