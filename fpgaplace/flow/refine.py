"""The placement refined by the folding: what the cores really cost, fed back to the placer.

The placement charges an op on a core its share of the core's DSPs, or its streamed weights
when those take longer (``fpgaplace.place.cost``). A folding reaches that share only where DSPs
alone bind. Where BRAM banks bind as well (a wide stage splits its memories into more banks),
or where the stages' foldings are too coarse to balance, the folded interval of a core exceeds
the sum of its ops' planned latencies. Where the DRAM port and the compute overlap, it falls
below that sum.

``refine`` measures each core's ratio r = folded interval / planned compute. It multiplies
the planned latency of each op on that core's kind by r, so the placement now charges that
core its folded interval. Then it places again with the same method and folds again. It does
this at most ``REFINE_ROUNDS`` times, only while some core disagrees by more than
``AGREEMENT``, and stops after a round slower than the best before it (the costs then swing:
ops moved off a core carry its ratio along). Of the placements seen it keeps the one whose
real interval is least: the largest of the cores' folded intervals and the other devices'
loads (on a tie, the later one, whose plan was solved on costs closer to its folding). This
is the estimate, partition, synthesise, re-estimate loop of hardware/software co-design, with
the folding as the synthesis estimate.

Cost per round: one placement (its time limit capped at ``REFINE_TIME_LIMIT_S``) and, unless
it is the placement before, one lowering and folding (the stages' candidate foldings are cached).

Memory comes first (``fitting_lowering``): the placement counts on-chip bytes, the folding blocks
in pools (line buffers and per-channel words take BRAM or LUTRAM, never URAM). Where a core's ops
fit no folding even with every weight streamed, that core's ops grow in size, at most
``MEMORY_GROWTH`` a round, and the design is placed again, before any latency round. An op that
alone fits its core at no folding is taken off that core's kind (``off_the_kind``); where the
cores' LUTs, FFs or DSPs are what does not fit, each op is charged bytes for its share of them
(``logic_bytes``), as where they need more of a memory than the growth can reach.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from fpgaplace import hw
from fpgaplace.codegen.lower import CoreDesign, lower_core
from fpgaplace.codegen.project import PlacedDesign
from fpgaplace.flow.settle import settle
from fpgaplace.hw.folding import DoesNotFit
from fpgaplace.hw.lowering import graph_batch
from fpgaplace.place.cost.fpga import PRECISION_BYTES, resident_ops
from fpgaplace.place.solvers.dp import solve_coarsened_dp, solve_throughput_dp
from fpgaplace.place.solvers.dp_ideals import StateSpaceTooLarge
from fpgaplace.place.solvers.problem import Placement, PlacementProblem
from fpgaplace.util.errors import FpgaplaceError


class Refinable(PlacedDesign, Protocol):
    """What the refinement asks of a placed design (``fpgaplace.flow.design.Design`` is one): the
    writer's view, the arguments it was placed with (None when a placement was set, not solved),
    a copy with some latencies scaled, and placing again."""

    _place_args: dict[str, Any] | None

    def refined(self, factors: dict[tuple[int, int], float], sizes: dict[int, float] | None = None,
                added: dict[int, float] | None = None) -> Refinable: ...

    def place(self, **arguments: Any) -> Any: ...

    def set_placement(self, placement: Any, arguments: dict | None = None) -> Any: ...

    def core_pieces(self) -> dict[str, int]: ...

REFINE_ROUNDS = 3  # placements solved again with the folding's costs, at most
AGREEMENT = 0.1  # a core whose folded interval is within this share of its plan needs no refinement
REFINE_TIME_LIMIT_S = 10.0  # time limit of each placement solved again (at most the first one's)
MEMORY_ROUNDS = 6  # placements solved again with a core's ops grown by what its folding could not fit, at most
MEMORY_GROWTH = 1.25  # the most a core's ops grow in one such round
FIFO_ROUNDS = 8  # placements solved again with ops charged the FIFOs in front of them, at most


@dataclass
class Lowered:
    """The lowered and folded cores of one placement, and the ops left to the host (placed on a
    core that would compute nothing)."""

    cores: list[CoreDesign]
    host_ops: list[str]


@dataclass
class Refined:
    design: Refinable  # placed; its problem carries the refined latencies
    lowered: Lowered
    rounds: list[dict]  # per placement tried: its real interval, planned value and cores' ratios
    chosen: int  # index in rounds of the placement kept


def say(progress, message: str) -> None:
    """Pass ``message`` to ``progress`` if there is one."""
    if progress is not None:
        progress(message)


def lower_cores(design: Refinable, progress=None, fps: float = 0.0) -> Lowered:
    """Lower and fold the ops the placement puts on each FPGA core (``lower.lower_core``); with
    ``fps``, each core only as fast as that rate needs (``FpgaCore.fps``)."""
    graph, board = design.graph, design.board
    names = {op: device.name for op, device in design.op_devices().items()}
    resident = resident_ops(graph, board, PRECISION_BYTES["int8"])
    batch = graph_batch(graph)  # samples per model run: one core run each
    lowered = Lowered([], [])
    order = graph.topological_order()
    for core in board.cores:
        ops = [op for op in order if names.get(op) == core.name]
        if ops:
            say(progress, f"lowering and folding {len(ops)} ops on {core.name}")
            result = lower_core(core.name, replace(core, fps=fps), ops, graph, names, resident, board.dram, batch)
            if result is None:
                lowered.host_ops += ops
            else:
                lowered.cores.append(result)
    return lowered


def planned_compute_us(design: Refinable, core: CoreDesign) -> float:
    """The sum of the placement's latencies of the core's ops on its kind."""
    problem = design.problem
    kind = problem.devices()[design.device_names().index(core.name)][0]
    index = {name: v for v, name in enumerate(problem.names)}
    return float(sum(problem.latency[index[op], kind] for op in core.ops))


def core_ratios(design: Refinable, lowered: Lowered) -> dict[str, float]:
    """Each core's folded interval over its planned compute."""
    ratios = {}
    for core in lowered.cores:
        planned = planned_compute_us(design, core)
        ratios[core.name] = hw.cycles_to_us(core.folding.interval, core.core) / planned if planned > 0 else 1.0
    return ratios


def real_interval_us(design: Refinable, lowered: Lowered) -> float:
    """The placement's interval with the cores at their folded intervals: the largest of those and
    of the other devices' loads in the placement."""
    folded = {core.name: hw.cycles_to_us(core.folding.interval, core.core) for core in lowered.cores}
    loads = design.placement.evaluation.loads
    others = [float(load) for name, load in zip(design.device_names(), loads, strict=True) if name not in folded]
    return max([*folded.values(), *others], default=0.0)


def refined_latency_factors(design: Refinable, lowered: Lowered,
                            ratios: dict[str, float]) -> dict[tuple[int, int], float]:
    """(node, kind) -> the factor its latency takes: the ratio of the core it sits on."""
    problem = design.problem
    index = {name: v for v, name in enumerate(problem.names)}
    devices, names = problem.devices(), design.device_names()
    factors = {}
    for core in lowered.cores:
        kind = devices[names.index(core.name)][0]
        for op in core.ops:
            factors[index[op], kind] = ratios[core.name]
    return factors


def buildable(design: Refinable, progress=None) -> None:
    """Make ``design``'s placement one compile can build: its free ops settled (``flow.settle``),
    and every FPGA core's ops one piece of the split. A solved placement whose core sets are
    convex but not in one order (the integer program's may run core0, then a CPU, then core0
    again) is placed again by the DP (``chain_placement``), whose device sets are the steps of
    one chain of ideals; a given placement (or a latency one, which the DP does not solve) that
    stays in pieces is an error naming the core. O(devices * (ops + edges)) plus a placement
    when one is needed."""
    settle(design)
    arguments = design._place_args
    parted = _parted(design)
    if parted and arguments is not None and arguments["objective"] == "throughput":
        say(progress, f"{parted}: its ops form several pieces; placing again with the DP, whose device sets "
                      "follow one order")
        design.set_placement(chain_placement(design.problem, arguments["time_limit"], progress), arguments)
        settle(design)
        parted = _parted(design)
    if parted:
        pieces = design.core_pieces()[parted]
        raise FpgaplaceError(f"{parted}: its ops form {pieces} separate pieces of the model; a core builds one "
                             "dataflow, so place with contiguous device sets")


def chain_placement(problem: PlacementProblem, time_limit: float, progress=None) -> Placement:
    """A contiguous throughput placement whose device sets are the steps of one chain of ideals:
    the exact DP, or past its state space the DP over a coarsened graph."""
    try:
        placement = solve_throughput_dp(problem, time_limit=time_limit, progress=progress)
    except StateSpaceTooLarge:
        placement = solve_coarsened_dp(problem, time_limit=time_limit, progress=progress)
    placement.method = placement.method or "dp"
    return placement


def _parted(design: Refinable) -> str | None:
    """The first FPGA core whose ops form more than one piece of the split, or None."""
    return next((core for core, count in design.core_pieces().items() if count > 1), None)


def core_size_factors(design: Refinable, core: str, factor: float) -> dict[int, float]:
    """node -> ``factor`` for every op the placement puts on the device called ``core``."""
    index = {name: v for v, name in enumerate(design.problem.names)}
    return {index[op]: factor for op, device in design.op_devices().items() if device.name == core}


def off_the_kind(design: Refinable, ops: tuple[str, ...], core: str) -> dict[tuple[int, int], float]:
    """(node, kind) -> ``inf`` for each of ``ops`` on the kind of ``core``: an op that alone fits
    that core at no folding fits none of its kind (a kind's cores are identical), whatever its
    bytes in the placement (an 8-bit threshold table in blocks may outgrow a core its bytes fit).
    Such rounds are not counted against ``MEMORY_ROUNDS``: each takes ops off a kind for good, at
    most ops x kinds of them. O(ops)."""
    kind = design.problem.devices()[design.device_names().index(core)][0]
    index = {name: v for v, name in enumerate(design.problem.names)}
    return {(index[op], kind): math.inf for op in ops if op in index}


LOGIC_RESOURCES = ("lut", "ff", "dsp")  # what the placement's bytes do not see


def logic_bytes(design: Refinable, error: DoesNotFit, charged: set[tuple[str, str]],
                reach: float = 1.0) -> dict[int, float]:
    """node -> bytes more for each op of a core whose ops together need more LUTs, FFs or DSPs
    than it has at their smallest foldings (``DoesNotFit.shares``): its share of that resource
    as a share of the core kind's on-chip bytes, once per op and resource (``charged``), so that
    the placement, which counts bytes only, packs the core's logic as well. Growing the ops' bytes instead
    (``core_size_factors``) moves nothing where their bytes are a small part of the core: an
    int8 CNV with its batch norms (8-bit threshold stages, thousands of LUTs a layer) failed to
    compile on pynq-z2 and zcu104 that way. The same for a memory (BRAM36, URAM) the ops need
    more than ``reach`` times the core's of (what the growth rounds left can reach): MobileNetV1
    at w8a8 with its batch norms (255 thresholds a channel, in blocks) needed 2.8 times a zcu104
    core's BRAM36 at 96 px and 6 times at 224, and growing by 1.25 a round failed both. Empty
    otherwise or where every op is charged already. O(ops)."""
    if not error.shares or (error.resource not in LOGIC_RESOURCES and error.over <= reach):
        return {}
    problem = design.problem
    memory = problem.kinds[problem.devices()[design.device_names().index(error.core)][0]].memory
    index = {name: v for v, name in enumerate(problem.names)}
    added = {index[op]: share * memory for op, share in error.shares.items()
             if (op, error.resource) not in charged and op in index}
    charged.update((op, error.resource) for op in error.shares if op in index)
    return added


def fifo_sizes(design: Refinable, fifo_bytes: dict[str, float]) -> dict[int, float]:
    """node -> the bytes of the FIFOs in front of its layers (``DoesNotFit.fifo_bytes``), which
    the placement charges it from then on. O(ops)."""
    index = {name: v for v, name in enumerate(design.problem.names)}
    return {index[op]: size for op, size in fifo_bytes.items() if op in index}


def fitting_lowering(design: Refinable, progress=None) -> tuple[Refinable, Lowered]:
    """``design`` and its lowered cores, placed again where a core's ops fit no folding.

    The placement charges an op its on-chip bytes against a share of the core's bytes; the folding
    counts blocks in pools (a line buffer or per-channel words take BRAM or LUTRAM, never URAM; a
    bank takes whole blocks). Where a core's ops, every weight streamed, still need ``over`` times
    a resource the core has (``DoesNotFit``), the sizes of that core's ops are multiplied by
    ``over``, at most ``MEMORY_GROWTH`` (where the FIFOs in front of its stages' readers are what
    does not fit, each op is charged its own FIFOs' bytes instead: ``fifo_sizes``), and the design
    placed again with its own arguments (the memory counterpart of the latency refinement), at most
    ``MEMORY_ROUNDS`` times (and at most ``FIFO_ROUNDS`` times for FIFOs: the charges add up over
    the rounds, as the ops that share a core, and so their FIFOs, change with each placement). The
    growth's step is small because the sizes travel with the ops: grown all at once, they may outgrow every core
    together and send ops to a CPU, where a few ops moved to the next core would do. A placement
    that was set, not solved, raises at once. Cost per round: one placement and one lowering of
    every core."""
    arguments = design._place_args
    rounds = {"grown": 0, "fifos": 0, "off": 0}
    charged: set[tuple[str, str]] = set()  # (op, resource) charged bytes for its share of a core's (``logic_bytes``)
    while arguments is not None and rounds["grown"] < MEMORY_ROUNDS and rounds["fifos"] < FIFO_ROUNDS:
        try:
            return design, lower_cores(design, progress)
        except DoesNotFit as error:
            if not error.core:
                raise
            say(progress, f"placing again: {error}")
            if error.ops:  # not counted against MEMORY_ROUNDS: each takes ops off a kind for good
                rounds["off"] += 1
                if rounds["off"] > len(design.problem.names):  # a placement that keeps them there anyway
                    raise error
                design = design.refined(off_the_kind(design, error.ops, error.core))
            else:
                rounds["fifos" if error.fifo_bytes else "grown"] += 1
                logic = logic_bytes(design, error, charged, MEMORY_GROWTH ** (MEMORY_ROUNDS - rounds["grown"] + 1))
                design = (design.refined({}, added=fifo_sizes(design, error.fifo_bytes)) if error.fifo_bytes else
                          design.refined({}, added=logic) if logic else
                          design.refined({}, core_size_factors(design, error.core, min(error.over, MEMORY_GROWTH))))
            try:
                design.place(**{**arguments, "time_limit": min(arguments["time_limit"], REFINE_TIME_LIMIT_S)})
            except FpgaplaceError:  # no placement with the ops so charged: the folding's reason is the user's
                raise error from None
            buildable(design, progress)
    return design, lower_cores(design, progress)


def refine(design: Refinable, progress=None) -> Refined:
    """The design's placement and its lowered cores, refined by the folding (module docstring).
    A placement made by ``set_placement`` (no method to run again) is kept (its free ops settled); a round
    whose placement cannot be lowered (a core's ops fit no folding) ends the refinement. Every
    placement is made buildable first (``buildable``: free ops settled, each core one piece)."""
    buildable(design, progress)
    design, lowered = fitting_lowering(design, progress)
    rounds = [_round(design, lowered)]
    best = Refined(design, lowered, rounds, 0)
    arguments = design._place_args
    for _ in range(REFINE_ROUNDS if arguments is not None else 0):
        ratios = rounds[-1]["cores"]
        if all(abs(r - 1) <= AGREEMENT for r in ratios.values()):
            break
        worst = max(ratios, key=lambda name: abs(ratios[name] - 1))
        say(progress, f"refining the placement: {worst} folds {ratios[worst] - 1:+.0%} against its plan")
        before = design.placement.placement.device
        design = design.refined(refined_latency_factors(design, lowered, ratios))
        try:
            design.place(**{**arguments, "time_limit": min(arguments["time_limit"], REFINE_TIME_LIMIT_S)})
            buildable(design, progress)
            same = np.array_equal(design.placement.placement.device, before)
            lowered = lowered if same else lower_cores(design, progress)  # the same cores fold the same
        except FpgaplaceError as error:  # e.g. a core's new ops fit no folding: keep what was found
            say(progress, f"refining stopped: {error}")
            break
        rounds.append(_round(design, lowered))
        if rounds[-1]["interval_us"] > rounds[best.chosen]["interval_us"] * (1 + 1e-9):
            break  # worse than the best: the costs swing (ops moved off a core took its ratio along)
        best = Refined(design, lowered, rounds, len(rounds) - 1)  # on a tie the later plan, solved on
    return best  # the costs its folding has


def _round(design: Refinable, lowered: Lowered) -> dict:
    return {"interval_us": real_interval_us(design, lowered), "planned_value_us": design.placement.value,
            "cores": core_ratios(design, lowered)}
