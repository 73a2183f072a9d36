"""Run graph passes to a fixpoint and report what each one changed.

As in qonnx's ``ModelWrapper.transform``: a pass returns the new model and how many changes it
made; the manager applies the passes in order, round after round, until a whole round changes
nothing or ``max_rounds`` is reached. Every pass only ever shrinks the graph or adds an
annotation that it will not add twice, so the fixpoint is reached in few rounds (two or three
on the onnx model-zoo structures).
"""

from __future__ import annotations

import functools
import io
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import onnx
from rich.console import Console
from rich.table import Table

from fpgaplace.model.passes.constant import fold_constants
from fpgaplace.model.passes.eliminate import eliminate_common_subexpressions, eliminate_dead_code
from fpgaplace.model.passes.fold import fold_batchnorm, fold_channel_affine
from fpgaplace.model.passes.fuse import fuse_activations, fuse_elementwise
from fpgaplace.model.passes.graph_tools import PassResult, copy_model, name_nodes, op_counts, sort_nodes
from fpgaplace.model.passes.heads import heads_to_batch
from fpgaplace.model.passes.layernorm import fuse_layernorm
from fpgaplace.model.passes.pools import whole_plane_pools_to_global
from fpgaplace.model.passes.recurrent import fold_constant_if
from fpgaplace.model.passes.simplify import (
    cancel_transpose_pairs,
    collapse_reshape_chains,
    remove_dropout,
    remove_identity,
    remove_noop_cast,
    remove_noop_reshape,
    remove_noop_transpose,
    sum_to_add,
)

Pass = Callable[[onnx.ModelProto], PassResult]

DEFAULT_PASSES: tuple[Pass, ...] = (
    sum_to_add,
    remove_identity,
    remove_dropout,
    remove_noop_cast,
    remove_noop_reshape,
    remove_noop_transpose,
    cancel_transpose_pairs,
    collapse_reshape_chains,
    whole_plane_pools_to_global,
    fold_constants,
    fold_constant_if,
    heads_to_batch,
    fuse_layernorm,
    eliminate_common_subexpressions,
    fold_batchnorm,
    fold_channel_affine,
    eliminate_dead_code,
    fuse_activations,
    fuse_elementwise,
)
"""The default pipeline: clean-ups first (a pool whose window is its whole plane becomes the global
pool, ``passes.pools``), then folding, then the fusion annotations. LSTM and GRU
stay whole here (one op a CPU runs; ``passes.recurrent.unroll_recurrent`` writes them out step by
step before quantization, where the steps become int8 stages)."""


def pass_name(a_pass: Pass) -> str:
    if isinstance(a_pass, functools.partial):
        return pass_name(a_pass.func)
    return getattr(a_pass, "__name__", type(a_pass).__name__)


@dataclass
class PassStat:
    """Totals for one pass over all rounds."""

    name: str
    changes: int = 0
    runs: int = 0
    seconds: float = 0.0


@dataclass
class OptimizeReport:
    """What the optimizer did: per-pass change counts and op counts before/after."""

    rounds: int
    converged: bool
    nodes_before: int
    nodes_after: int
    ops_before: dict[str, int]
    ops_after: dict[str, int]
    passes: list[PassStat] = field(default_factory=list)
    changes_per_round: list[dict[str, int]] = field(default_factory=list)

    @property
    def total_changes(self) -> int:
        return sum(p.changes for p in self.passes)

    def to_dict(self) -> dict:
        return asdict(self)

    def table(self) -> Table:
        """A rich table: one row per pass with its changes, runs and time."""
        title = (f"graph optimizer: {self.nodes_before} -> {self.nodes_after} nodes, "
                 f"{self.rounds} round(s){'' if self.converged else ' (not converged)'}")
        table = Table(title=title)
        table.add_column("pass")
        table.add_column("changes", justify="right")
        table.add_column("runs", justify="right")
        table.add_column("seconds", justify="right")
        for stat in self.passes:
            table.add_row(stat.name, str(stat.changes), str(stat.runs), f"{stat.seconds:.3f}")
        return table

    def text(self, width: int = 100) -> str:
        """The table rendered as plain text."""
        buffer = io.StringIO()
        Console(file=buffer, width=width, color_system=None).print(self.table())
        return buffer.getvalue()

    def __rich__(self) -> Table:
        return self.table()


class PassManager:
    """Applies ``passes`` in order, round after round, until nothing changes."""

    def __init__(self, passes: Sequence[Pass] = DEFAULT_PASSES, max_rounds: int = 20):
        if max_rounds < 1:
            raise ValueError("max_rounds must be at least 1")
        self.passes = list(passes)
        self.max_rounds = max_rounds

    def run(self, model: onnx.ModelProto) -> tuple[onnx.ModelProto, OptimizeReport]:
        current = copy_model(model)
        name_nodes(current)
        sort_nodes(current.graph)
        stats = [PassStat(pass_name(p)) for p in self.passes]
        per_round: list[dict[str, int]] = []
        converged = False
        for _ in range(self.max_rounds):
            round_changes: dict[str, int] = {}
            for a_pass, stat in zip(self.passes, stats, strict=True):
                start = time.perf_counter()
                current, changes = _apply(a_pass, current)
                stat.seconds += time.perf_counter() - start
                stat.runs += 1
                stat.changes += changes
                round_changes[stat.name] = round_changes.get(stat.name, 0) + changes
            per_round.append(round_changes)
            if not any(round_changes.values()):
                converged = True
                break
        sort_nodes(current.graph)
        report = OptimizeReport(
            rounds=len(per_round), converged=converged,
            nodes_before=len(model.graph.node), nodes_after=len(current.graph.node),
            ops_before=op_counts(model), ops_after=op_counts(current),
            passes=stats, changes_per_round=per_round,
        )
        return current, report


def _apply(a_pass: Pass, model: onnx.ModelProto) -> PassResult:
    """Run ``a_pass`` on the manager's own working ``model``: in place when the pass offers its
    rewrite (``graph_tools.rewrites_a_copy``), which saves copying every weight once per pass."""
    in_place = getattr(a_pass, "in_place", None)
    if in_place is None:
        return a_pass(model)
    return model, in_place(model)


def optimize(model: onnx.ModelProto, passes: Sequence[Pass] = DEFAULT_PASSES,
             max_rounds: int = 20) -> tuple[onnx.ModelProto, OptimizeReport]:
    """Run ``passes`` on ``model`` to a fixpoint; the input model is not modified."""
    return PassManager(passes, max_rounds).run(model)
