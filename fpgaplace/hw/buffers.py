"""The FIFO in front of each reader of a core's tensors: how many elements it holds.

A core runs its layers as one dataflow, a sample every ``interval`` cycles. A stage of several
inputs (an add, a concat, a gate's product) starts on the latest of them (``hw.kernel.stage_start``
over ``hw.kernel.stage_times``, the fill model's stage start times), so each earlier input
*waits* the difference; a tensor read by several stages is forked, and a fork passes a beat only
when every branch takes it. An input that waits ``w`` cycles has the beats its producer wrote in
those ``w`` cycles in flight: ``w // interval`` whole samples and the share of the next that
the producer writes in the rest (its beats spread over its first-to-last output span; a core
input's over the cycles its fastest reader takes to read a sample, ``Fill.reading``). Unless
the FIFO in front of it holds them, the producer stalls, through a fork every other branch with
it, and the core's interval grows to the latency difference of the branches (an unrolled LSTM's
gates wait a whole recurrence step for the previous hidden state: 28 cycles an interval in RTL
against the model's 4 with two-beat FIFOs, the model's 4 with deep ones). A stage that reads its
inputs in turn (a concat: a run of each a row) also holds one turn (``Kernel.turn_elements``: a
row of its output, capped at the input's sample) in front of each input, which it leaves while
it reads the others: a pixel on a channel concat, a whole sample where the runs are whole
tensors. Nothing else is held a whole sample: ResNet-50's 16 residual forks, a whole sample a
branch, took 2,987 BRAM36 against its 206 for the layers on zcu104 (312 on the chip).

One definition: the HLS top's stream depths (``codegen.render``), the RTL top's FIFOs
(``codegen.rtl_project``) and the core's priced memory (``buffer_memory``, in design.json's
core resources) all read ``reader_buffers`` (design.json keeps it as the core's ``buffers``)
and ``fifo_beats``. O(stages + edges).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from fpgaplace.board.model import FpgaCore, core_family
from fpgaplace.hw.geometry import Fill, Resources
from fpgaplace.hw.kernel import stage_start, stage_times, stream_memory
from fpgaplace.hw.memory import LUTRAM_MAX_DEPTH, URAM_SHAPE

PLAIN_BEATS = 2  # a FIFO of two beats: the hand-off between two stages, not priced (the stage's own LUTs)


def held_elements(size: int, span: float, wait: float, interval: float, turn: int = 0) -> int:
    """Elements a reader's FIFO holds: what its producer writes (``size`` a sample over ``span``
    cycles, a sample every ``interval``) while the reader waits ``wait`` cycles, plus the
    reader's ``turn`` (a stage reading its inputs in turn) up to a sample. O(1)."""
    extra = min(size, turn)
    if wait <= 0 or interval <= 0:
        return extra
    whole, rest = divmod(wait, interval)
    share = min(1.0, rest / max(1.0, span))
    return math.ceil(size * (whole + share)) + extra


def reader_buffers(stages: Iterable[tuple[Sequence[str], str, Fill]], outputs: Sequence[str],
                   sizes: Mapping[str, int], interval: float, turns: Mapping[str, int] | None = None
                   ) -> dict[str, list[int]]:
    """Elements the FIFO in front of each reader of each tensor holds (``held_elements``; 0: a
    plain ``PLAIN_BEATS`` FIFO), by tensor, its readers in the order the code generators meet
    them: every stage's inputs in stage order, then the core's ``outputs`` (read as they come).
    ``stages``: ``(input tensors, output tensor, fill)`` in topological order (``registry.layer_stages``);
    ``sizes``: elements a sample of every tensor; ``turns``: by a stage's output tensor, the
    elements a stage reading its inputs in turn holds in front of each (``Kernel.turn_elements``).
    O(stages + edges)."""
    stages, turns = list(stages), turns or {}
    times = stage_times(stages)
    waits: dict[str, list[tuple[float, int]]] = {}
    for inputs, output, _ in stages:
        start = stage_start(inputs, times)
        for tensor in inputs:
            waits.setdefault(tensor, []).append((start - times.get(tensor, (0.0, 0.0))[0], turns.get(output, 0)))
    for tensor in outputs:
        waits.setdefault(tensor, []).append((0.0, 0))
    spans = {tensor: times[tensor][1] - times[tensor][0] for tensor in times}
    for inputs, output, fill in stages:  # a core input comes as fast as its fastest reader reads it
        for tensor in inputs:
            if tensor not in times:
                spans[tensor] = min(spans.get(tensor, interval), fill.reading or spans[output])
    return {tensor: [held_elements(sizes[tensor], spans.get(tensor, interval), wait, interval, turn)
                     for wait, turn in each]
            for tensor, each in waits.items()}


def fifo_beats(elements: int, width: int) -> int:
    """Beats of ``width`` elements a FIFO holding ``elements`` has (at least ``PLAIN_BEATS``). O(1)."""
    return max(PLAIN_BEATS, math.ceil(elements / max(1, width)))


URAM_WORD_BITS = URAM_SHAPE[0]  # a URAM word: the widest a packed FIFO's word is
URAM_FIFO_MIN_WORDS = LUTRAM_MAX_DEPTH + 1  # fewer words are LUTRAM in either store


@dataclass(frozen=True)
class FifoStorage:
    """How a reader's FIFO keeps what it holds: ``words`` words of ``pack`` elements, in URAM
    (``uram``: its producer's beats regrouped ``pack`` a word on the way in and back to the
    reader's on the way out) or at its producer's beat as the family maps memories (BRAM, LUTRAM)."""

    pack: int
    words: int
    uram: bool = False


def fifo_storage(held: int, width: int, size: int, uram: bool, bits: int = 8) -> FifoStorage:
    """The storage of a FIFO holding ``held`` elements of ``bits`` whose producer writes ``width``
    a beat (``size`` a sample). With ``uram`` (the core's FIFO choice, ``codegen.lower``, made when
    BRAM is short), a FIFO too deep for LUTRAM once packed (``URAM_FIFO_MIN_WORDS``) goes to URAM,
    its words as wide as a URAM word allows (``packed_elements``): ResNet-50's residual skips hold 61,032
    one-element beats, 15 BRAM36 each, 2 URAM packed eight a word (15 in one-byte words). Read by the priced
    memory (``buffer_memory``), the HLS top (``codegen.render``) and the RTL top
    (``codegen.rtl_project``). O(URAM word / ``bits``)."""
    beats = fifo_beats(held, width)
    if uram and beats > PLAIN_BEATS:
        pack = packed_elements(width, size, bits)
        words = fifo_beats(held, pack)
        if words >= URAM_FIFO_MIN_WORDS:
            return FifoStorage(pack, words, True)
    return FifoStorage(width, beats)


def packed_elements(width: int, size: int, bits: int = 8) -> int:
    """Elements a packed FIFO word holds: the most whole beats of ``width`` that fit a URAM word
    of ``URAM_WORD_BITS`` and divide a sample of ``size`` elements (so a sample ends on a whole
    word and nothing waits in the packer); the beat itself when it is as wide already. O(URAM word / ``bits``)."""
    beats_a_word = URAM_WORD_BITS // (bits * width)
    return max((k * width for k in range(1, beats_a_word + 1) if size % (k * width) == 0), default=width)


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
                  bits: int = 8, sizes: Mapping[str, int] | None = None, uram: bool = False) -> Resources:
    """The memory of a core's deeper-than-plain FIFOs (``reader_buffers``), each stored as
    ``fifo_storage`` says (``sizes``: elements a sample of each tensor; ``uram``: the core's deep
    FIFOs in URAM), at its tensor's producer beat of ``widths[tensor]`` elements of ``bits`` (as the
    RTL top lays them out), mapped together as the family maps FIFOs (``hw.kernel.stream_memory``;
    LUTs at the family's scale). O(edges)."""
    sizes = sizes or {}
    fifos = [(bits * storage.pack, storage.words, storage.uram) for tensor, held in buffers.items() for elements in held
             if (storage := fifo_storage(elements, widths[tensor], sizes.get(tensor, widths[tensor]), uram,
                                         bits)).words > PLAIN_BEATS]
    bram, uram_blocks, luts = stream_memory(fifos, core)
    return Resources(0, bram, uram_blocks, round(core_family(core).lut_scale * luts), 0)
