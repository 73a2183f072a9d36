"""Automatic search over how to place a model: the black-box partitioner's outer loop.

After BBGraP's idea: treat the model and the board as black boxes and search the settings
that decide a partition — graph optimizer on/off, the objective the solver optimises, how many
FPGA cores to use, contiguous or non-contiguous device sets, and the batch size — keeping the
memory limits. Every candidate is solved by ``fpgaplace.solvers.run.solve`` (no solver of its
own) and scored by the trusted evaluator on both metrics; the table is ranked by the target:
  throughput: time per sample of the pipeline = max-load / batch (lower is better);
  latency:    time until one batch's outputs exist, per sample = latency / batch.
Cost: one solve per candidate, at most 2 * 2 * cores * 2 * len(batches) candidates; the time
limit is shared evenly among the candidates still to run.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from fpgaplace.cost import CostOptions
from fpgaplace.errors import FpgaplaceError
from fpgaplace.flow import PreparedModel, prepare
from fpgaplace.solvers.problem import PlacementProblem
from fpgaplace.solvers.run import Result, SolveOptions, exact_method, solve

TARGETS = ("throughput", "latency")


@dataclass(frozen=True)
class Candidate:
    optimized: bool
    objective: str
    cores: int
    contiguous: bool
    batch: int

    @property
    def method(self) -> str:
        """Exact method for this candidate: the DP for contiguous throughput, else the IP."""
        return exact_method(SolveOptions(objective=self.objective, contiguous=self.contiguous))

    def label(self) -> str:
        return (
            f"{'opt' if self.optimized else 'raw'}/{self.objective}/{self.cores} cores/"
            f"{'contiguous' if self.contiguous else 'non-contiguous'}/batch {self.batch}"
        )


@dataclass
class Scored:
    candidate: Candidate
    result: Result
    prepared: PreparedModel
    per_sample_throughput: float  # max-load / batch
    per_sample_latency: float  # latency / batch

    def score(self, target: str) -> float:
        return self.per_sample_throughput if target == "throughput" else self.per_sample_latency


def with_cores(problem: PlacementProblem, cores: int) -> PlacementProblem:
    """The same problem with only the first ``cores`` FPGA cores (in kind order) available."""
    kinds, left = [], cores
    for kind in problem.kinds:
        if kind.is_cpu:
            kinds.append(kind)
            continue
        take = min(kind.count, left)
        left -= take
        kinds.append(dataclasses.replace(kind, count=take))
    return dataclasses.replace(problem, kinds=kinds)


def candidates(total_cores: int, batches: Sequence[int], optimizer: Sequence[bool]) -> list[Candidate]:
    grid = itertools.product(optimizer, TARGETS, range(1, total_cores + 1), (True, False), batches)
    return [Candidate(o, obj, c, contiguous, b) for o, obj, c, contiguous, b in grid]


def search(
    model_path: str | Path,
    board: str,
    target: str = "throughput",
    batches: Sequence[int] = (1,),
    optimizer: Sequence[bool] = (False, True),
    time_limit: float = 120.0,
    options: CostOptions = CostOptions(),
    progress: Callable[[str], None] | None = None,
) -> list[Scored]:
    """Solve every candidate setting within ``time_limit`` seconds; best first for ``target``."""
    if target not in TARGETS:
        raise FpgaplaceError(f"--target: expected one of {', '.join(TARGETS)}, got {target!r}")
    deadline = time.perf_counter() + time_limit
    prepared = {
        (o, b): prepare(model_path, board, batch=b, optimized=o, options=options) for o in optimizer for b in batches
    }
    total_cores = sum(k.count for k in next(iter(prepared.values())).problem.kinds if not k.is_cpu)
    todo = candidates(total_cores, batches, optimizer)
    scored: list[Scored] = []
    for done, candidate in enumerate(todo):
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            if progress:
                progress(f"time limit reached after {done} of {len(todo)} candidates")
            break
        base = prepared[(candidate.optimized, candidate.batch)]
        problem = with_cores(base.problem, candidate.cores)
        solve_options = SolveOptions(
            objective=candidate.objective,
            time_limit=max(0.5, remaining / (len(todo) - done)),
            contiguous=candidate.contiguous,
            subgraphs_per_device=1 if candidate.contiguous else 2,
        )
        try:
            result = solve(problem, candidate.method, solve_options)
        except FpgaplaceError as error:  # e.g. nothing fits on one core: skip, say why
            if progress:
                progress(f"{candidate.label()}: {error}")
            continue
        if not result.evaluation.feasible:
            continue
        scored.append(
            Scored(
                candidate,
                result,
                dataclasses.replace(base, problem=problem),
                result.evaluation.max_load / candidate.batch,
                result.evaluation.latency / candidate.batch,
            )
        )
        if progress:
            progress(f"[{done + 1}/{len(todo)}] {candidate.label()}: {scored[-1].score(target):.4g}")
    if not scored:
        raise FpgaplaceError(f"{model_path}: no candidate placement fits {board} within the time limit")
    return sorted(scored, key=lambda s: (s.score(target), s.per_sample_latency + s.per_sample_throughput))
