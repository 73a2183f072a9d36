"""Automatic search over how to place a model: the black-box partitioner's outer loop.

After BBGraP's idea: treat the model and the board as black boxes and search the settings
that decide a partition — graph optimizer on/off, the objective the solver optimises, how many
FPGA cores to use (where the board file leaves the cut of the fabric into cores to the tool: which
cut, ``fpgaplace.board.partition``, each costed on its own cores), contiguous or non-contiguous
device sets, and the batch size — keeping the memory limits. Every candidate is solved by
``Design.place`` (no solver of its own) and scored by the trusted evaluator on both metrics; the
table is ranked by the target:
  throughput: time per sample of the pipeline = max-load / batch (lower is better);
  latency:    time until one batch's outputs exist, per sample = latency / batch.
Every candidate is a ``Design`` (restricted to its cores with ``Design.with_cores``, or on its cut
of the board with ``Design.on_board``), so the
best one can be split or compiled as it was placed. Cost: one solve per candidate, at most
2 * 2 * cores * 2 * len(batches) candidates; the time limit covers the whole search (loading
and costing included) and is shared evenly among the candidates still to run.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from fpgaplace.board.model import Board
from fpgaplace.board.partition import partitioned, partitions
from fpgaplace.flow.design import Design
from fpgaplace.place.solvers.problem import Placement
from fpgaplace.place.solvers.run import Result
from fpgaplace.util.errors import FpgaplaceError

if TYPE_CHECKING:
    import onnx

TARGETS = ("throughput", "latency")
# the statuses (run's and the IP's) of an IP answer that is one of its starts: kept over SCIP's, or
# proven optimal by the critical-path bound before SCIP ran
KEPT_START = re.compile(r"start kept \((?P<kept>[^)]+)\)|critical-path bound; start (?P<proven>[^)]+)\)")
COARSE_DP_STATUS = "heuristic (DP over"  # dp.solve_coarsened_dp's status


@dataclass(frozen=True)
class Candidate:
    """One setting of the search. ``method`` is "auto" (what every candidate asks for) until the
    candidate is solved; a ``Scored`` candidate carries the method that produced its answer
    (``method_used``)."""

    optimized: bool
    objective: str
    cores: int
    contiguous: bool
    batch: int
    method: str = "auto"
    cut: bool = False  # ``cores`` is a cut of the fabric (the board leaves it to the tool), not a subset

    def label(self) -> str:
        cores = f"cut into {self.cores} cores" if self.cut else f"{self.cores} cores"
        return (
            f"{'opt' if self.optimized else 'raw'}/{self.objective}/{cores}/"
            f"{'contiguous' if self.contiguous else 'non-contiguous'}/batch {self.batch}"
        )


@dataclass
class Scored:
    candidate: Candidate
    result: Result
    design: Design  # placed with ``result``, on the candidate's cores
    per_sample_throughput: float  # max-load / batch
    per_sample_latency: float  # latency / batch

    def score(self, target: str) -> float:
        return self.per_sample_throughput if target == "throughput" else self.per_sample_latency


def method_used(result: Result) -> str:
    """The method whose placement ``result`` returns, as auto ran it: "dp" (exact), "coarse dp"
    (the DP over a coarsened graph, kept because the IP did not beat it), "coarse dp + ip" (the
    max-load IP improving on that start), "ip", or the start the IP returned as its answer (kept
    over SCIP's, or proven within the gap by the critical-path bound: "greedy", "local-search", ...).

    A start is the answer when the status names it or when it places every node as the answer
    does (same devices, same subgraph order); O(starts x n)."""
    placement = result.placement
    coarse = any(_coarse(start) for start in result.starts)
    returned = _start_returned(result)
    if returned is not None:
        return "coarse dp" if returned == "dp" and coarse else returned
    if _coarse(placement):
        return "coarse dp"
    if placement.method == "ip" and coarse:
        return "coarse dp + ip"
    return placement.method


def _coarse(placement: Placement) -> bool:
    return placement.status.startswith(COARSE_DP_STATUS)


def _start_returned(result: Result) -> str | None:
    """The method of the start ``result``'s IP answer is, or None when it is the IP's own."""
    if not result.starts and result.placement.method != "ip":
        return None
    kept = KEPT_START.search(result.placement.status)
    if kept:
        return kept["kept"] or kept["proven"]
    for start in result.starts:
        if _same_placement(start, result.placement):
            return start.method
    return None


def _same_placement(a: Placement, b: Placement) -> bool:
    same_order = a.order is None or b.order is None or np.array_equal(a.order, b.order)
    return np.array_equal(a.device, b.device) and same_order


def model_batch(design: Design) -> int:
    """The batch the design's graph runs: dim 0 of its first input (1 for a scalar input); the
    model's fixed batch when the design asks for another (the front end's FixedBatchError)."""
    from fpgaplace.model.frontend.bind import FixedBatchError

    try:
        graph = design.loaded
    except FixedBatchError as error:
        return error.fixed
    info = graph.tensors.get(graph.inputs[0]) if graph.inputs else None
    return info.shape[0] if info is not None and info.shape else 1


def candidates(total_cores: int, batches: Sequence[int], optimizer: Sequence[bool],
               cuts: Sequence[int] = ()) -> list[Candidate]:
    """The settings to solve: on a board with fixed cores the first 1 .. ``total_cores`` of them;
    on a board that leaves the cut to the tool every cut of ``cuts`` (all its cores used)."""
    counts, cut = (list(cuts), True) if cuts else (range(1, total_cores + 1), False)
    grid = itertools.product(optimizer, TARGETS, counts, (True, False), batches)
    return [Candidate(o, obj, c, contiguous, b, cut=cut) for o, obj, c, contiguous, b in grid]


def candidate_design(designs: dict, candidate: Candidate) -> Design:
    """The design a candidate is solved on: the first ``cores`` cores of its board, or its board
    cut into ``cores`` cores (``board.partition.partitioned``; costed once per cut, kept in
    ``designs``)."""
    base = designs[(candidate.optimized, candidate.batch)]
    if not candidate.cut:
        return base.with_cores(candidate.cores)
    key = (candidate.optimized, candidate.batch, candidate.cores)
    if key not in designs:
        designs[key] = base.on_board(partitioned(base.board, candidate.cores))
    return designs[key].with_cores(candidate.cores)


def search(
    model: str | Path | onnx.ModelProto,
    board: str | Path | Board,
    target: str = "throughput",
    batches: Sequence[int] = (1,),
    optimizer: Sequence[bool] = (False, True),
    time_limit: float = 120.0,
    progress: Callable[[str], None] | None = None,
    **design_options,
) -> list[Scored]:
    """Solve every candidate setting within ``time_limit`` seconds in all (loading and costing
    the model included); best first for ``target``. ``design_options`` are further ``Design``
    keywords (input_shapes, precision, profile_cpu)."""
    if target not in TARGETS:
        raise FpgaplaceError(f"target: expected one of {', '.join(TARGETS)}, got {target!r}")
    deadline = time.perf_counter() + time_limit
    designs = {
        (o, b): Design(model, board, batch=b, optimize=o, progress=progress, **design_options)
        for o in optimizer
        for b in batches
    }
    first = next(iter(designs.values()))
    kept = [b for b in batches if all(model_batch(designs[(o, b)]) == b for o in optimizer)]
    for b in batches:
        if b not in kept and progress:
            progress(f"batch {b}: the model's inputs keep a fixed batch of {model_batch(designs[(optimizer[0], b)])}; "
                     "skipped")
    if not kept:
        raise FpgaplaceError(f"{first.name}: none of the batches {list(batches)} is the model's "
                             f"(its inputs have a fixed batch of {model_batch(first)})")
    cuts = partitions(first.board)
    todo = candidates(len(first.board.cores), kept, optimizer, cuts if not first.board.fixed_cores else ())
    scored: list[Scored] = []
    for done, candidate in enumerate(todo):
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            if progress:
                progress(f"time limit reached after {done} of {len(todo)} candidates")
            break
        try:
            design = candidate_design(designs, candidate)
            result = design.place(
                candidate.objective,
                "auto",  # the exact method while its state space allows, else one that scales
                max(0.5, remaining / (len(todo) - done)),
                contiguous=candidate.contiguous,
                subgraphs_per_device=1 if candidate.contiguous else 2,
            )
        except FpgaplaceError as error:  # e.g. nothing fits on one core: skip, say why
            if progress:
                progress(f"{candidate.label()}: {error}")
            continue
        if not result.evaluation.feasible:
            continue
        scored.append(
            Scored(
                replace(candidate, method=method_used(result)),
                result,
                design,
                result.evaluation.max_load / candidate.batch,
                result.evaluation.latency / candidate.batch,
            )
        )
        if progress:
            progress(f"[{done + 1}/{len(todo)}] {candidate.label()}: {scored[-1].score(target):.4g} "
                     f"({scored[-1].candidate.method})")
    if not scored:
        raise FpgaplaceError(f"{first.name}: no candidate placement fits {first.board.name} within the time limit")
    return sorted(scored, key=lambda s: (s.score(target), s.per_sample_latency + s.per_sample_throughput))
