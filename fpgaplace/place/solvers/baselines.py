"""Baseline placements, each scored by the one trusted evaluator.

These are the comparison points of Tarnawski et al. (NeurIPS 2020, Section 6) plus two
trivial ones; none of them proves anything, so every result carries ``bound = -inf`` and
``status = "heuristic"``.

All of them move a colour class as one *block* (``colour_blocks``), so none splits a class.

- ``greedy_latency``: fill the accelerators one after another in topological order while
  memory fits, the rest on a CPU. O(n + m).
- ``local_search``: first-improvement moves and swaps of nodes between devices with random
  restarts, every candidate scored by ``evaluate``. O(restarts * sweeps * n * D * (n + m)),
  cut by a time limit.
- ``partitioner``: METIS (pymetis) k-way partition of the undirected graph weighted by
  latency and transfer cost, then memory repair and unsupported nodes to a CPU.
- ``pipedream``: PipeDream's linearized dynamic program (Narayanan et al., SOSP 2019): cut one
  topological order into consecutive stages, one per device. O(n^2 * S) for S device-count
  states.
- ``single_accelerator``, ``all_cpu``, ``from_split_file``.

``check_feasible`` rejects, before any solver runs, instances where some node fits no device.
"""

from __future__ import annotations

import itertools
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fpgaplace.place.solvers.evaluate import class_graph, evaluate, evaluation_of
from fpgaplace.place.solvers.evaluate import topological_order as evaluation_order
from fpgaplace.place.solvers.problem import Placement, PlacementProblem
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.graphs import strong_components
from fpgaplace.util.graphs import topological_order as graph_order

Objective = str  # "throughput" | "latency"


# --------------------------------------------------------------------------- shared helpers


def check_feasible(problem: PlacementProblem) -> None:
    """Raise FpgaplaceError if some node (or colour class) fits on no device.

    A node fits a CPU kind when its latency there is finite; it fits an accelerator kind when
    its latency there is finite and its size (with its whole colour class) is at most that
    kind's memory. Also checks that the nodes that cannot run on any CPU fit in the total
    accelerator memory. O(n * K).
    """
    where = f"{problem.source}: " if problem.source else ""
    usable = problem.available_kinds()
    class_size: dict[int, float] = {}
    for v in range(problem.n):
        c = int(problem.color[v])
        if c >= 0:
            class_size[c] = class_size.get(c, 0.0) + float(problem.size[v])
    cpu_only_bytes = 0.0
    for v in range(problem.n):
        c = int(problem.color[v])
        need = class_size[c] if c >= 0 else float(problem.size[v])
        if any(problem.kinds[k].is_cpu and math.isfinite(problem.latency[v, k]) for k in usable):
            continue
        accel = [
            k for k in usable
            if not problem.kinds[k].is_cpu and math.isfinite(problem.latency[v, k])
        ]
        label = f"node {problem.names[v]!r} (id {problem.ids[v]})"
        if not accel:
            raise FpgaplaceError(
                f"{where}{label} can run on no available device "
                "(unsupported on every accelerator and no CPU can run it)"
            )
        largest = max(problem.kinds[k].memory for k in accel)
        if need > largest:
            what = "its colour class needs" if c >= 0 and need > problem.size[v] else "needs"
            raise FpgaplaceError(
                f"{where}{label} {what} {need:.0f} bytes but the largest accelerator it can run "
                f"on holds {largest:.0f} bytes (short by {need - largest:.0f} bytes) and no CPU "
                "can run it"
            )
        cpu_only_bytes += float(problem.size[v])
    total = sum(
        problem.kinds[k].memory * problem.kinds[k].count
        for k in usable
        if not problem.kinds[k].is_cpu
    )
    if cpu_only_bytes > total:
        raise FpgaplaceError(
            f"{where}the nodes no CPU can run need {cpu_only_bytes:.0f} bytes but all "
            f"accelerators together hold {total:.0f} bytes (short by "
            f"{cpu_only_bytes - total:.0f} bytes)"
        )


def topological_order(problem: PlacementProblem) -> list[int]:
    """Smallest index first among ready nodes: the evaluator's order. O((n + m) log n)."""
    return evaluation_order(problem.n, problem.edges)


def _device_lists(problem: PlacementProblem) -> tuple[list[int], list[int]]:
    """Indices into problem.devices() of the accelerators and of the CPU cores."""
    accels, cpus = [], []
    for d, (k, _) in enumerate(problem.devices()):
        (cpus if problem.kinds[k].is_cpu else accels).append(d)
    return accels, cpus


@dataclass
class Blocks:
    """Colour blocks in a topological order of the class graph (see ``colour_blocks``).

    ``flat`` lists the nodes block after block (members in topological order); every run of
    whole blocks is a contiguous (convex) set.
    """

    members: list[list[int]]
    latency: np.ndarray  # (B, K) summed, inf if a member cannot run on the kind
    size: np.ndarray  # (B,)
    flat: list[int]
    starts: list[int]  # position in ``flat`` of each block's first member, then n


def colour_blocks(problem: PlacementProblem) -> Blocks:
    """Group colour classes into blocks and order the blocks topologically. O((n + m) log n).

    A block is a strongly connected component of the evaluator's class graph (the forward
    graph with colour classes contracted; backward nodes follow their forward mates): usually
    one colour class, several when classes depend on each other in a cycle. Runs of whole
    blocks in this order are contiguous sets, the kind the DP and the contiguous IP consider.
    """
    topo = topological_order(problem)
    position = {v: i for i, v in enumerate(topo)}
    cls, class_edges = class_graph(problem)
    component = strong_components(int(cls.max()) + 1, class_edges)  # class -> component
    members: list[list[int]] = [[] for _ in range(int(component.max()) + 1)]
    for v in topo:
        members[component[cls[v]]].append(v)
    component_edges = [(int(component[a]), int(component[b])) for a, b in class_edges
                       if component[a] != component[b]]
    order = graph_order(len(members), component_edges, key=lambda c: position[members[c][0]])
    members = [members[c] for c in order]
    flat = [v for m in members for v in m]
    starts = list(itertools.accumulate([0] + [len(m) for m in members]))
    block_of = np.repeat(np.arange(len(members)), np.diff(starts))  # of each node of ``flat``
    latency = np.column_stack([np.bincount(block_of, problem.latency[flat, k], len(members))
                               for k in range(len(problem.kinds))])
    size = np.bincount(block_of, problem.size[flat].astype(float), len(members))
    return Blocks(members, latency.reshape(len(members), len(problem.kinds)), size, flat, starts)


def _score(
    problem: PlacementProblem,
    device: np.ndarray,
    method: str,
    objective: Objective,
    started: float,
    order: np.ndarray | None = None,
    contiguous: bool = True,
    known: Sequence[Placement] = (),
) -> Placement:
    """Wrap an assignment as a Placement whose value the evaluator computed (or had computed:
    ``evaluation_of``, for one of ``known`` with the same device and order).

    A given subgraph ``order`` that deadlocks is dropped (the evaluator then derives one).
    """
    placement = Placement(
        device=np.asarray(device, dtype=np.int64),
        order=order,
        method=method,
        objective=objective,
        status="heuristic",
        contiguous=contiguous,
    )
    try:
        result = evaluation_of(problem, placement, *known)
    except FpgaplaceError:
        placement.order = None
        result = evaluation_of(problem, placement, *known)
    placement.contiguous = bool(result.contiguous)
    if result.feasible:
        placement.value = float(result.max_load if objective == "throughput" else result.latency)
    else:
        placement.value = math.inf
        placement.status = "infeasible"
    placement.seconds = time.perf_counter() - started
    return placement


def _check_objective(objective: Objective) -> None:
    if objective not in ("throughput", "latency"):
        raise FpgaplaceError(f"objective {objective!r}: expected 'throughput' or 'latency'")


def _cpu_for(problem: PlacementProblem, blocks: Blocks, b: int, cpus: Sequence[int],
             load: dict[int, float]) -> int:
    """The least-loaded CPU core that can run block b (-1 if none); adds b's work to it."""
    kind = problem.device_kinds()
    allowed = [d for d in cpus if math.isfinite(blocks.latency[b, kind[d]])]
    if not allowed:
        return -1
    best = min(allowed, key=lambda d: (load[d], d))
    load[best] += float(blocks.latency[b, kind[best]])
    return best


def _no_room(problem: PlacementProblem, blocks: Blocks, b: int, what: str) -> FpgaplaceError:
    v = blocks.members[b][0]
    return FpgaplaceError(
        f"{problem.source or 'problem'}: {what} found no room for node {problem.names[v]!r} "
        f"(id {problem.ids[v]}); the accelerators are full and no CPU can run it"
    )


# --------------------------------------------------------------------------- baselines


def greedy_latency(problem: PlacementProblem, deadline: float | None = None,
                   blocks: Blocks | None = None) -> Placement:
    """Fill accelerators one after another in topological order while memory fits.

    Works on colour blocks (a colour class moves as one). A block that does not fit the current
    accelerator closes it and opens the next one; a block an accelerator cannot run, and
    everything after the last accelerator is full, goes to the least-loaded CPU core. Each
    accelerator's nodes are cut into subgraphs wherever a CPU block interrupts them, so every
    subgraph is a run of a topological order (convex) and subgraphs run in that order; if the
    evaluator's own subgraph derivation (fewest subgraphs) gives a lower latency, that is
    returned instead (``order`` None), unless ``deadline`` (a ``time.perf_counter()`` value) has
    passed by then. ``blocks``: the problem's ``colour_blocks``, if the caller has them.
    O(n + m) plus one or two evaluations.
    """
    started = time.perf_counter()
    check_feasible(problem)
    blocks = blocks or colour_blocks(problem)
    accels, cpus = _device_lists(problem)
    kind = problem.device_kinds()
    device = np.full(problem.n, -1, dtype=np.int64)
    order = np.zeros(problem.n, dtype=np.int64)
    cpu_load = {d: 0.0 for d in cpus}
    current, used = 0, 0.0
    subgraph = {d: 0 for d in accels}
    interrupted = False
    for b, members in enumerate(blocks.members):
        placed = False
        while current < len(accels):
            d = accels[current]
            if not math.isfinite(blocks.latency[b, kind[d]]):
                break
            if used + blocks.size[b] <= problem.kinds[kind[d]].memory:
                if interrupted:
                    subgraph[d] += 1
                    interrupted = False
                device[members], order[members] = d, subgraph[d]
                used += float(blocks.size[b])
                placed = True
                break
            current, used, interrupted = current + 1, 0.0, False
        if placed:
            continue
        d = _cpu_for(problem, blocks, b, cpus, cpu_load)
        if d < 0:
            raise _no_room(problem, blocks, b, "greedy placement")
        device[members] = d
        interrupted = True
    cut = _score(problem, device, "greedy", "latency", started, order=order)
    if deadline is not None and time.perf_counter() > deadline:
        return cut
    derived = _score(problem, device, "greedy", "latency", started)
    return derived if derived.value < cut.value else cut


def single_accelerator(problem: PlacementProblem, objective: Objective = "throughput") -> Placement:
    """Everything on the first accelerator, blocks it cannot run on the least-loaded CPU core.

    Infeasible (value inf, status "infeasible") when the model does not fit its memory.
    """
    started = time.perf_counter()
    _check_objective(objective)
    blocks = colour_blocks(problem)
    accels, cpus = _device_lists(problem)
    kind = problem.device_kinds()
    cpu_load = {d: 0.0 for d in cpus}
    device = np.full(problem.n, -1, dtype=np.int64)
    for b, members in enumerate(blocks.members):
        if accels and math.isfinite(blocks.latency[b, kind[accels[0]]]):
            device[members] = accels[0]
        else:
            device[members] = _cpu_for(problem, blocks, b, cpus, cpu_load)
            if device[members[0]] < 0:
                raise _no_room(problem, blocks, b, "single-accelerator placement")
    return _score(problem, device, "single", objective, started)


def all_cpu(problem: PlacementProblem, objective: Objective = "throughput") -> Placement:
    """Everything on the first CPU core (a single-CPU baseline)."""
    started = time.perf_counter()
    _check_objective(objective)
    _, cpus = _device_lists(problem)
    if not cpus:
        raise FpgaplaceError(f"{problem.source or 'problem'}: there is no CPU core, expected one")
    kind = problem.device_kinds()
    bad = np.flatnonzero(~np.isfinite(problem.latency[:, kind[cpus[0]]]))
    if len(bad):
        v = int(bad[0])
        raise FpgaplaceError(
            f"{problem.source or 'problem'}: node {problem.names[v]!r} (id {problem.ids[v]}) "
            "cannot run on a CPU"
        )
    return _score(problem, np.full(problem.n, cpus[0]), "all-cpu", objective, started)


def from_split_file(path: str, problem: PlacementProblem, objective: Objective = "throughput"
                    ) -> Placement:
    """A given split (the paper's expert-split format), scored by the evaluator."""
    from fpgaplace.place.workload import load_split

    started = time.perf_counter()
    _check_objective(objective)
    given = load_split(path, problem)
    return _score(problem, given.device, "split-file", objective, started, order=given.order)


# --------------------------------------------------------------------------- PipeDream DP


def _stage_transfer_costs(problem: PlacementProblem, flat: list[int]) -> np.ndarray:
    """cost[i, j] = transfer of the stage flat[i:j] (j > i): every node with an edge crossing
    the stage boundary, counted once (``chain.crossing_table``: O(n (n + m)) numpy work, O(n^2)
    memory; a 2,000-op DAG with 16,000 edges once took 142 s in a Python loop)."""
    from fpgaplace.place.solvers.chain import crossing_table

    position = np.empty(problem.n, dtype=np.int64)
    position[flat] = np.arange(problem.n)
    tail = position[np.array([u for u, _ in problem.edges], dtype=np.int64)] if problem.edges else \
        np.zeros(0, dtype=np.int64)
    head = position[np.array([v for _, v in problem.edges], dtype=np.int64)] if problem.edges else \
        np.zeros(0, dtype=np.int64)
    return crossing_table(problem.n, tail, head, problem.transfer[np.asarray(flat, dtype=np.int64)])


PIPEDREAM_MAX_OPS = 8_000  # its transfer table holds (ops + 1)^2 floats: 512 MB at this size


def pipedream(problem: PlacementProblem, objective: Objective = "throughput",
              time_limit: float | None = None) -> Placement:
    """PipeDream-style linearized DP over prefixes of one topological order of colour blocks.

    Stages are runs of whole blocks; each goes to a distinct device (accelerators pay their
    stage's boundary transfers and need its memory to fit). For throughput the DP minimises the
    largest stage load, for latency the sum of stage times (a chain). State: the prefix and how
    many devices of each kind are used. O(B^2 * S * K) numpy steps for B blocks, S device-count
    states, K device kinds, plus O(n * m) time and O(n^2) memory for the transfer table: refused
    past ``PIPEDREAM_MAX_OPS`` ops, and stopped (``FpgaplaceError``) past ``time_limit`` seconds.
    """
    started = time.perf_counter()
    _check_objective(objective)
    if problem.n > PIPEDREAM_MAX_OPS:
        raise FpgaplaceError(f"pipedream: {problem.n:,} ops is more than the {PIPEDREAM_MAX_OPS:,} its "
                             "all-pairs transfer table allows")
    deadline = started + (time_limit if time_limit is not None else math.inf)
    check_feasible(problem)
    blocks = colour_blocks(problem)
    cuts = np.array(blocks.starts)  # stage boundaries, positions in blocks.flat
    kinds = problem.available_kinds()
    transfer = _stage_transfer_costs(problem, blocks.flat)[np.ix_(cuts, cuts)]
    lat = blocks.latency[:, kinds]
    prefix_lat = np.vstack([np.zeros(len(kinds)), np.cumsum(np.where(np.isfinite(lat), lat, 0), 0)])
    unsupported = np.vstack([np.zeros(len(kinds)), np.cumsum(~np.isfinite(lat), 0)])
    prefix_size = np.concatenate([[0.0], np.cumsum(blocks.size)])
    count = len(blocks.members)
    states = list(itertools.product(*[range(problem.kinds[k].count + 1) for k in kinds]))
    state_index = {s: i for i, s in enumerate(states)}
    best = np.full((count + 1, len(states)), math.inf)
    back = np.full((count + 1, len(states), 3), -1, dtype=np.int64)
    best[0, state_index[tuple(0 for _ in kinds)]] = 0.0
    for j in range(1, count + 1):
        if time.perf_counter() > deadline:
            raise FpgaplaceError(f"pipedream: its DP over {count:,} blocks did not end within the time limit")
        for slot, k in enumerate(kinds):
            # stage = blocks i..j-1 on a device of kind k, for every i < j at once
            stage = prefix_lat[j, slot] - prefix_lat[:j, slot]
            allowed = unsupported[j, slot] - unsupported[:j, slot] == 0
            if not problem.kinds[k].is_cpu:
                stage = stage + transfer[:j, j]
                allowed &= prefix_size[j] - prefix_size[:j] <= problem.kinds[k].memory
            stage = np.where(allowed, stage, math.inf)
            for s_index, state in enumerate(states):
                if state[slot] >= problem.kinds[k].count:
                    continue
                before = best[:j, s_index]
                value = np.maximum(before, stage) if objective == "throughput" else before + stage
                i = int(np.argmin(value))
                nxt = list(state)
                nxt[slot] += 1
                t = state_index[tuple(nxt)]
                if value[i] < best[j, t]:
                    best[j, t] = value[i]
                    back[j, t] = (i, s_index, k)
    end = int(np.argmin(best[count]))
    if not math.isfinite(best[count, end]):
        raise FpgaplaceError(
            f"{problem.source or 'problem'}: no split of the topological order into stages fits "
            "the devices' memory"
        )
    first_device = {k: d for d, (k, ordinal) in reversed(list(enumerate(problem.devices())))
                    if ordinal == 0}
    next_ordinal = {k: 0 for k in kinds}
    device = np.full(problem.n, -1, dtype=np.int64)
    j, s = count, end
    while j > 0:
        i, s_prev, k = (int(x) for x in back[j, s])
        nodes = blocks.flat[blocks.starts[i]: blocks.starts[j]]
        device[nodes] = first_device[k] + next_ordinal[k]
        next_ordinal[k] += 1
        j, s = i, s_prev
    return _score(problem, device, "pipedream", objective, started)


# --------------------------------------------------------------------------- partitioner


def _repair(problem: PlacementProblem, blocks: Blocks, device: np.ndarray) -> np.ndarray:
    """Move blocks off accelerators that cannot run them or whose memory overflows.

    Blocks are visited in topological order; a block that is unsupported where it is, or would
    overflow its accelerator, goes to the least-loaded CPU core that can run it, else to the
    first accelerator with room. O(B * D).
    """
    accels, cpus = _device_lists(problem)
    kind = problem.device_kinds()
    device = device.copy()
    cpu_load = {d: 0.0 for d in cpus}
    used = {d: 0.0 for d in accels}
    for b, members in enumerate(blocks.members):
        d = int(device[members[0]])
        runs = math.isfinite(blocks.latency[b, kind[d]])
        if d in used and runs and used[d] + blocks.size[b] <= problem.kinds[kind[d]].memory:
            used[d] += float(blocks.size[b])
            continue
        if d in cpu_load and runs:
            cpu_load[d] += float(blocks.latency[b, kind[d]])
            continue
        target = _cpu_for(problem, blocks, b, cpus, cpu_load)
        if target < 0:
            spare = [a for a in accels if math.isfinite(blocks.latency[b, kind[a]])
                     and used[a] + blocks.size[b] <= problem.kinds[kind[a]].memory]
            if not spare:
                raise _no_room(problem, blocks, b, "partitioner repair")
            target = spare[0]
            used[target] += float(blocks.size[b])
        device[members] = target
    return device


def partitioner(problem: PlacementProblem, objective: Objective = "throughput") -> Placement:
    """METIS k-way partition (pymetis) of the colour-block graph, one part per accelerator.

    Vertex weight: the block's accelerator latency; edge weight: the sources' transfer costs
    (both scaled to integers). Unsupported blocks and memory overflow then go to CPUs
    (``_repair``). METIS is multilevel, roughly O(m log k).
    """
    import pymetis

    started = time.perf_counter()
    _check_objective(objective)
    check_feasible(problem)
    blocks = colour_blocks(problem)
    accels, cpus = _device_lists(problem)
    kind = problem.device_kinds()
    count = len(blocks.members)
    block_of = np.empty(problem.n, dtype=np.int64)
    for b, members in enumerate(blocks.members):
        block_of[members] = b
    parts = len(accels)
    if parts == 0:
        device = np.full(problem.n, cpus[0], dtype=np.int64)
        return _score(problem, _repair(problem, blocks, device), "partitioner", objective,
                      started, contiguous=False)
    lat = blocks.latency[:, kind[accels[0]]]
    finite = lat[np.isfinite(lat)]
    scale = 1000.0 / max(float(finite.max()) if finite.size else 1.0, 1e-12)
    vweights = [max(1, round(x * scale)) if math.isfinite(x) else 1 for x in lat]
    neighbours: list[dict[int, float]] = [{} for _ in range(count)]
    cmax = max(float(problem.transfer.max()), 1e-12)
    for u, v in problem.edges:
        a, b = int(block_of[u]), int(block_of[v])
        if a != b:
            w = float(problem.transfer[u]) / cmax
            neighbours[a][b] = neighbours[a].get(b, 0.0) + w
            neighbours[b][a] = neighbours[b].get(a, 0.0) + w
    xadj, adjncy, eweights = [0], [], []
    for a in range(count):
        for b, w in sorted(neighbours[a].items()):
            adjncy.append(b)
            eweights.append(max(1, round(w * 1000)))
        xadj.append(len(adjncy))
    if parts == 1 or count <= parts:
        membership = [min(b, parts - 1) for b in range(count)]
    else:
        adjacency = pymetis.CSRAdjacency(xadj, adjncy)
        _, membership = pymetis.part_graph(parts, adjacency, vweights=vweights, eweights=eweights)
    device = np.array([accels[membership[b]] for b in block_of], dtype=np.int64)
    device = _repair(problem, blocks, device)
    return _score(problem, device, "partitioner", objective, started, contiguous=False)


# --------------------------------------------------------------------------- local search

EVALUATION_SECONDS_PER_OP = 6e-6  # per node and edge, before one is timed (200,000-op chain: 2.5 s)


def local_search(
    problem: PlacementProblem,
    objective: Objective = "throughput",
    restarts: int = 8,
    seed: int = 0,
    time_limit: float = 10.0,
    contiguous: bool = True,
    starts: Sequence[Placement] = (),
) -> Placement:
    """First-improvement local search over block moves and swaps, with random restarts.

    Start: the best of ``starts`` (default: greedy and PipeDream, computed inside the limit).
    A candidate moves one colour block to another device, half the time swapping a block of
    that device back. It is accepted if the evaluator scores it strictly better, feasible and
    (with ``contiguous``) contiguous. Each restart perturbs the best placement by moving three
    random blocks. A start is scored as it is (its subgraph order too) and returned so when nothing
    beats it. Stops at ``time_limit`` seconds, with the best found so far: no candidate is
    scored when the last evaluation's time would run past it (one evaluation takes 2.5 s at
    200,000 ops). A sweep costs O(B * D) evaluations of O(D (n + m)) each.
    """
    started = time.perf_counter()
    deadline = started + time_limit
    _check_objective(objective)
    check_feasible(problem)
    rng = random.Random(seed)
    blocks = colour_blocks(problem)
    kind = problem.device_kinds()
    devices = list(range(len(problem.devices())))
    block_of = np.empty(problem.n, dtype=np.int64)
    for b, members in enumerate(blocks.members):
        block_of[members] = b
    last_evaluation = [EVALUATION_SECONDS_PER_OP * (problem.n + len(problem.edges))]  # the latest one's seconds

    def value_from(result) -> float:
        if not result.feasible or (contiguous and not result.contiguous):
            return math.inf
        return float(result.max_load if objective == "throughput" else result.latency)

    def value_of(device_of_block: np.ndarray) -> float:
        began = time.perf_counter()
        result = evaluate(problem, Placement(device=device_of_block[block_of]))
        last_evaluation[0] = time.perf_counter() - began
        return value_from(result)

    def start_value(start: Placement, device_of_block: np.ndarray) -> float:
        """A start's value: when it moves whole blocks, its own (maybe stored) evaluation, with
        its subgraph order; else that of its blocks' devices."""
        if np.array_equal(device_of_block[block_of], start.device):
            try:
                return value_from(evaluation_of(problem, start))
            except FpgaplaceError:  # a given subgraph order that deadlocks
                pass
        return value_of(device_of_block)

    def time_left() -> bool:
        return time.perf_counter() + last_evaluation[0] < deadline

    def runs(b: int, d: int) -> bool:
        return math.isfinite(blocks.latency[b, kind[d]])

    if not starts:
        starts = [greedy_latency(problem, deadline, blocks)]
        if time_left():
            try:
                starts.append(pipedream(problem, objective, deadline - time.perf_counter()))
            except FpgaplaceError:  # refused past its size, or out of time
                pass
    candidates = [np.array([p.device[m[0]] for m in blocks.members]) for p in starts]
    scored = [(start_value(starts[0], candidates[0]), 0)]
    scored += [(start_value(p, c), i) for i, (p, c) in enumerate(zip(starts, candidates, strict=True))
               if i and time_left()]
    best_value, best_index = min(scored)
    best = candidates[best_index].copy()

    def improve(current: np.ndarray, value: float) -> tuple[np.ndarray, float]:
        improved = True
        while improved and time_left():
            improved = False
            for b in rng.sample(range(len(current)), len(current)):
                for d in rng.sample(devices, len(devices)):
                    if d == current[b] or not runs(b, d):
                        continue
                    if not time_left():
                        return current, value
                    candidate = current.copy()
                    candidate[b] = d
                    others = np.flatnonzero(current == d)
                    if len(others) and rng.random() < 0.5:
                        other = int(others[rng.randrange(len(others))])
                        if runs(other, int(current[b])):
                            candidate[other] = current[b]
                    score = value_of(candidate)
                    if score < value - 1e-12:
                        current, value, improved = candidate, score, True
                        break
        return current, value

    best, best_value = improve(best, best_value)
    for _ in range(max(0, restarts - 1)):
        if not time_left():
            break
        current = best.copy()
        for b in rng.sample(range(len(current)), min(len(current), 3)):
            current[b] = rng.choice([d for d in devices if runs(b, d)])
        current, value = improve(current, value_of(current))
        if value < best_value:
            best, best_value = current, value
    kept = starts[best_index]
    if np.array_equal(best[block_of], kept.device):  # nothing better found: the start as it is
        return _score(problem, kept.device, "local-search", objective, started, order=kept.order,
                      contiguous=contiguous, known=[kept])
    return _score(problem, best[block_of], "local-search", objective, started,
                  contiguous=contiguous)
