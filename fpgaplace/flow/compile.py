"""The compile step: an int8 QDQ design -> a buildable project folder.

``compile_design`` checks the model's Q/DQ nodes, places the design with the defaults if it is
not placed, makes the placement one it can build (``refine.buildable``: free ops settled beside
what they read, every core's ops one piece of the split, placed again by the DP if not), lowers
and folds the ops of every FPGA core and refines the placement by the folding
(``fpgaplace.flow.refine``; where the board file leaves the cut of the fabric into cores to the
tool, on each cut it offers, keeping the fastest: ``fpgaplace.flow.partition``), then hands the
placed design and its folded cores to the writer (``fpgaplace.codegen.project.write_project``),
which renders the HLS, the split, the build scripts, the driver and ``design.json``. The flow decides; codegen writes.

What is left on the CPUs (``left_on_cpus``) comes back with the result: the ops grouped by op
type and the reason (``hw.plan_op``'s, or that the placement kept an op a core could run), and
what they cost: the design's fps as placed beside the fps of its cores alone (the slowest
core's own folded interval), with the device whose load sets the interval.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Protocol

from fpgaplace import hw
from fpgaplace.codegen.project import CompileResult, check_project_dir, write_project
from fpgaplace.flow.partition import Partitionable, choose_partition
from fpgaplace.flow.refine import Refinable, lower_cores, planned_compute_us, say
from fpgaplace.flow.settle import is_free, source_op
from fpgaplace.hw.lowering import check_sequence_batch
from fpgaplace.model.quantize import check_qdq
from fpgaplace.project.layout import HOST_DEVICE
from fpgaplace.project.record import TransferInfo, transfer_channel
from fpgaplace.util.errors import FpgaplaceError


class Compilable(Partitionable, Protocol):
    """What the compile step asks of a design besides the refinement's view (``fpgaplace.flow.design.Design``)."""

    name: str
    is_qdq: bool

    def take_placement(self, other: Refinable) -> None: ...


def compile_design(design: Compilable, out_dir: Path, progress=None, fps: float | None = None) -> CompileResult:
    """Write the project of ``design`` (an int8 QDQ design; placed with defaults if it is not)
    into ``out_dir``. With ``fps``, the placement and the cut of the fabric are chosen as without,
    then every core is folded again only as fast as ``fps`` samples a second need, on the least
    resources (``FpgaCore.fps``; a core that cannot keep up stays at its fastest)."""
    out_dir = Path(out_dir)
    check_fps(fps)
    check_project_dir(out_dir)
    if not design.is_qdq:
        raise FpgaplaceError(f"{design.name}: compile needs an int8 QDQ model; quantize it first")
    check_qdq(design.graph.model)  # a bad scale or zero point is named by its Q/DQ node, before any work
    check_sequence_batch(design.graph)
    refined, cut = choose_partition(design, progress)  # placed with the defaults first if it is not
    if refined.design is not design:
        design.take_placement(refined.design)
    lowered = refined.lowered
    if fps:
        say(progress, f"folding every core again for {fps:g} samples/s on the least resources")
        lowered = lower_cores(refined.design, progress, fps)
    cores = lowered.cores
    record = {"rounds": refined.rounds, "chosen": refined.chosen} | ({"partition": cut} if cut else {})
    result = write_project(design, out_dir, cores, lowered.host_ops, record | ({"fps_target": fps} if fps else {}),
                           {c.name: planned_compute_us(design, c) for c in cores}, progress)
    result.left_on_cpus = left_on_cpus(design, result.design)
    return result


def check_fps(fps: float | None) -> None:
    """``compile --fps``: a rate above zero and finite, or none."""
    if fps is not None and not (0 < fps < float("inf")):
        raise FpgaplaceError(f"--fps: expected samples a second above 0, got {fps:g}")


HOST_REASON = "on a core that computes nothing else, so the host runs it"
PLACED_REASON = "a core could run it; the placement kept it on a CPU"
FOLLOWS_REASON = "free on a core; it follows the op it reads, on a CPU"
INPUT_REASON = "free on a core; it reads a model input, which the host quantizes"


def _cpu_reason(design: Compilable, name: str, hosted: set[str]) -> tuple[bool, str]:
    """Whether op ``name`` (on a CPU) is a free op, and why it is not on a core."""
    graph = design.graph
    op = graph.ops[name]
    planned = hw.plan_op(op, graph)
    if not planned:  # a reason naming a tensor groups with the same reason for its other tensors
        return False, re.sub(r"'[^']*'", "'…'", planned.reason)
    if name in hosted:
        return False, HOST_REASON
    if is_free(op, graph):
        return True, FOLLOWS_REASON if source_op(op, graph) else INPUT_REASON
    return False, PLACED_REASON


def cpu_op_groups(design: Compilable, cpu_ops: list[str], host_ops: list[str]) -> list[dict]:
    """``cpu_ops`` grouped by (op type, reason): the groups of ops that compute first, the
    largest first, then the free ops (Q/DQ, reshapes) that follow them; each group's op type,
    count, reason and op names. The reason is why no core can run the op (``hw.plan_op``; the
    tensors it names shown as '…'),
    ``HOST_REASON`` for ``host_ops``, that a free op follows its neighbour (``flow.settle``), or
    ``PLACED_REASON``. O(ops)."""
    hosted = set(host_ops)
    groups: dict[tuple[bool, str, str], list[str]] = {}
    for name in cpu_ops:
        free, reason = _cpu_reason(design, name, hosted)
        groups.setdefault((free, design.graph.ops[name].op_type, reason), []).append(name)
    ordered = sorted(groups.items(), key=lambda item: (item[0][0], -len(item[1]), item[0][1:]))
    return [{"op_type": op_type, "count": len(ops), "reason": reason, "ops": ops}
            for (_, op_type, reason), ops in ordered]


def host_link_busy_us(document: dict) -> dict[str, float]:
    """Per direction, the time a sample's transfers from and to the host (``HOST_DEVICE``) keep the
    host link busy, named as ``record.transfer_channel`` names the channel. O(transfers)."""
    busy: dict[str, float] = {}
    for t in document["transfers"]:
        if t.get("us") is not None and HOST_DEVICE in (t["from_device"], t["to_device"]):
            channel = transfer_channel(TransferInfo(t["tensor"], t["from_device"], t["to_device"], link=t.get("link")),
                                       {})
            busy[channel] = busy.get(channel, 0.0) + t["us"]
    return busy


def left_on_cpus(design: Compilable, document: dict) -> dict:
    """What ``design``'s CPUs run and what it costs, from its ``design.json`` ``document``: the
    ops by group (``cpu_op_groups``), the fps as placed and the device whose load (or folded
    interval) sets it, or the host link (a CPU-less board's UART carrying the model's input and
    output, ``host_link_busy_us``), and the fps of the cores alone (the slowest core's interval). O(ops)."""
    batch = document["model"]["batch"]
    intervals = {core["name"]: core["interval_us"] for core in document["cores"]}
    loads = {**{d["name"]: d["load_us"] for d in document["devices"] if d["name"] not in intervals
                and d["ops"]}, **intervals}
    loads |= host_link_busy_us(document)
    binding = max(loads, key=loads.get) if loads else None
    slowest = max(intervals, key=intervals.get) if intervals else None
    return {
        "ops": len(document["cpu_ops"]),
        "groups": cpu_op_groups(design, document["cpu_ops"], document.get("host_ops") or []),
        "fps": document["fps"], "binding": binding,
        "cores_alone_fps": batch * 1e6 / intervals[slowest] if slowest and intervals[slowest] > 0 else None,
        "slowest_core": slowest,
    }
