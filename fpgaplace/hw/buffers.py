"""The FIFO in front of each reader of a core's tensors: how many elements it holds.

A core runs its layers as one dataflow, a sample every ``interval`` cycles. A stage of several
inputs (an add, a concat, a gate's product) starts on the latest of them (``hw.kernel.stage_start``
over ``hw.kernel.stage_times``, the fill model's stage start times), so each earlier input
*waits* the difference; a tensor read by several stages is forked, and a fork passes a beat only
when every branch takes it. An input that waits ``w`` cycles has the beats its producer wrote in
those ``w`` cycles in flight: ``w // interval`` whole samples and the share of the next that
the producer writes in the rest (its beats spread over its first-to-last output span). Unless
the FIFO in front of it holds them, the producer stalls, through a fork every other branch with
it, and the core's interval grows to the latency difference of the branches (an unrolled LSTM's
gates wait a whole recurrence step for the previous hidden state: 28 cycles an interval in RTL
against the model's 4 with two-beat FIFOs, the model's 4 with deep ones). A forked branch also
holds at least a whole sample (a concat reads its inputs one after another).

One definition: the HLS top's stream depths (``codegen.render``), the RTL top's FIFOs
(``codegen.rtl_project``) and the core's priced memory (``buffer_memory``, in design.json's
core resources) all read ``reader_buffers`` (design.json keeps it as the core's ``buffers``)
and ``fifo_beats``. O(stages + edges).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from fpgaplace.board.model import FpgaCore
from fpgaplace.hw.geometry import Fill, Resources
from fpgaplace.hw.kernel import _family, stage_start, stage_times, stream_memory

PLAIN_BEATS = 2  # a FIFO of two beats: the hand-off between two stages, not priced (the stage's own LUTs)


def held_elements(size: int, span: float, wait: float, interval: float, forked: bool) -> int:
    """Elements a reader's FIFO holds: what its producer writes (``size`` a sample over ``span``
    cycles, a sample every ``interval``) while the reader waits ``wait`` cycles, and a whole
    sample on a forked branch. O(1)."""
    if wait <= 0 or interval <= 0:
        return size if forked else 0
    whole, rest = divmod(wait, interval)
    share = min(1.0, rest / max(1.0, span))
    return max(size if forked else 0, math.ceil(size * (whole + share)))


def reader_buffers(stages: Iterable[tuple[Sequence[str], str, Fill]], outputs: Sequence[str],
                   sizes: Mapping[str, int], interval: float) -> dict[str, list[int]]:
    """Elements the FIFO in front of each reader of each tensor holds (``held_elements``; 0: a
    plain ``PLAIN_BEATS`` FIFO), by tensor, its readers in the order the code generators meet
    them: every stage's inputs in stage order, then the core's ``outputs`` (read as they come).
    ``stages``: ``(input tensors, output tensor, fill)`` in topological order (``registry.layer_stages``);
    ``sizes``: elements a sample of every tensor. O(stages + edges)."""
    stages = list(stages)
    times = stage_times(stages)
    waits: dict[str, list[float]] = {}
    for inputs, _, _ in stages:
        start = stage_start(inputs, times)
        for tensor in inputs:
            waits.setdefault(tensor, []).append(start - times.get(tensor, (0.0, 0.0))[0])
    for tensor in outputs:
        waits.setdefault(tensor, []).append(0.0)
    return {tensor: [held_elements(sizes[tensor], times.get(tensor, (0.0, 0.0))[1] - times.get(tensor, (0.0, 0.0))[0],
                                   wait, interval, len(each) > 1) for wait in each]
            for tensor, each in waits.items()}


def fifo_beats(elements: int, width: int) -> int:
    """Beats of ``width`` elements a FIFO holding ``elements`` has (at least ``PLAIN_BEATS``). O(1)."""
    return max(PLAIN_BEATS, math.ceil(elements / max(1, width)))


def producer_widths(layers: Iterable[tuple[Sequence[str], str, Sequence[int], int]]) -> dict[str, int]:
    """Elements a beat of each tensor as its producer writes it, the width of the RTL top's FIFOs,
    from each layer's ``(input tensors, output tensor, input beats, output beat)``; a core input's
    is its first reader's beat (the RTL top's input port). O(edges)."""
    layers = list(layers)
    widths = {output: beat for _, output, _, beat in layers}
    for inputs, _, beats, _ in layers:
        for tensor, width in zip(inputs, beats, strict=True):
            widths.setdefault(tensor, width)
    return widths


def buffer_memory(buffers: Mapping[str, Sequence[int]], widths: Mapping[str, int], core: FpgaCore | None,
                  bits: int = 8) -> Resources:
    """The memory of a core's deeper-than-plain FIFOs (``reader_buffers``), each at its tensor's
    producer beat of ``widths[tensor]`` elements of ``bits`` (as the RTL top lays them out), mapped
    together as the family maps FIFOs (``hw.kernel.stream_memory``; LUTs at the family's scale). O(edges)."""
    fifos = [(bits * widths[tensor], beats) for tensor, held in buffers.items() for elements in held
             if (beats := fifo_beats(elements, widths[tensor])) > PLAIN_BEATS]
    bram, uram, luts = stream_memory(fifos, core)
    return Resources(0, bram, uram, round(_family(core).lut_scale * luts), 0)
