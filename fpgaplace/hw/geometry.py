"""The plain data a kernel answers in: an op's ``Geometry`` on a core (or why it has none,
``Unsupported``), a stage's ``Folding`` (PE x SIMD x MMV, URAM or not), the ``Resources`` it takes
and a core's budget of them, and the ROMs and RTL units it builds. ``fpgaplace.hw.kernel`` says
how each is computed; the lowering (``fpgaplace.hw.lowering``) and the folder read them too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fpgaplace.board.model import FpgaCore


@dataclass(frozen=True)
class Folding:
    """Parallelism of one stage: PE output channels, SIMD reduction elements and MMV output
    pixels (of one row) per cycle."""

    pe: int = 1
    simd: int = 1
    mmv: int = 1
    uram: bool = False  # weights in UltraRAM rather than BRAM

    @property
    def lanes(self) -> int:
        return self.pe * self.simd * self.mmv


@dataclass(frozen=True)
class Resources:
    dsp: int = 0
    bram36: int = 0
    uram: int = 0
    lut: int = 0
    ff: int = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(*(a + b for a, b in zip(self.as_tuple(), other.as_tuple(), strict=True)))

    def as_tuple(self) -> tuple[int, int, int, int, int]:
        return (self.dsp, self.bram36, self.uram, self.lut, self.ff)

    def to_json(self) -> dict[str, int]:
        return {"dsp": self.dsp, "bram36": self.bram36, "uram": self.uram, "lut": self.lut, "ff": self.ff}

    def over(self, budget: Resources) -> list[str]:
        """Names of the resources where this exceeds ``budget``."""
        names = ("dsp", "bram36", "uram", "lut", "ff")
        return [n for n, a, b in zip(names, self.as_tuple(), budget.as_tuple(), strict=True) if a > b]


def core_budget(core: FpgaCore) -> Resources:
    return Resources(core.dsp, core.bram36, core.uram, core.lut, core.ff)


@dataclass(frozen=True)
class Unsupported:
    """Why a kernel cannot run an op (the op then goes to a CPU)."""

    reason: str

    def __bool__(self) -> bool:
        return False


@dataclass(frozen=True)
class Geometry:
    """An op in a kernel's terms; ``shape`` holds the C++ config members (H, W, CIN, COUT, ...)."""

    kernel: str
    pixels: int  # output positions (over the whole batch)
    channels: int  # parallel output channels (PE folds them)
    reduction: int  # dot-product length per output (SIMD folds it); 1 for lane kernels
    stream_elements: int  # elements of the busiest stream (input or output) per run
    row: int = 1  # output pixels of one row (MMV folds them)
    weights: int = 0  # int8 weight elements
    linebuffer_bytes: int = 0  # line buffer elements (bytes at 8 bits, see ``activation_bits``)
    macs: int = 0
    shape: dict[str, Any] = field(default_factory=dict, compare=False)
    weight_bits: int = 8  # bits of one weight element
    activation_bits: int = 8  # bits of one input / output element

    @property
    def lane_bits(self) -> int:
        """Width of a MAC lane: the wider operand."""
        return max(self.weight_bits, self.activation_bits)


@dataclass(frozen=True)
class Fill:
    """When a stage's first and last outputs of a sample leave, relative to its input stream (its
    *fill latency*). The stage is *ready* once it has read the first ``needs`` of a sample's input
    (0: a lane stage's first beat; the rows a line buffer waits for; 1: a dense layer's whole
    vector), which at its own pace takes ``lead`` cycles; its first output beat leaves ``first``
    cycles after it is ready and its last ``work`` cycles after it is ready, or ``tail`` cycles
    after its last input beat, whichever is later (``reading``: cycles it takes to read a whole
    sample's input at its own pace). ``outputs`` turns an input stream's first and last beat
    times into the output's."""

    needs: float = 0.0
    lead: float = 0.0
    reading: float = 0.0
    first: float = 0.0
    work: float = 0.0
    tail: float = 0.0

    def outputs(self, first_in: float, last_in: float) -> tuple[float, float]:
        """(first, last) output beat times of a sample whose input's beats arrive from
        ``first_in`` to ``last_in`` (spread evenly: a producer streams at its own pace), never
        faster than this stage reads them. O(1)."""
        span = max(0.0, last_in - first_in)
        ready = first_in + max(self.lead, self.needs * span)
        last = max(ready + self.work, first_in + max(self.reading, span) + self.tail)
        return ready + self.first, max(ready + self.first, last)

    def scaled(self, factor: float) -> Fill:
        """The same fill with every time ``factor`` times as long (``needs`` is a share, kept). O(1)."""
        return Fill(self.needs, self.lead * factor, self.reading * factor, self.first * factor,
                    self.work * factor, self.tail * factor)


@dataclass(frozen=True)
class Rom:
    """A ``$readmemh`` file beside an RTL unit: ``words`` (ints) of ``bits`` each, or with ``bits``
    0 rows of int8 lanes (an int8 array ``[words, lanes]``, lane ``j`` in bits ``[8*j +: 8]``)."""

    words: Any
    bits: int = 0


@dataclass(frozen=True)
class RtlUnit:
    """What an op's RTL needs (``Kernel.rtl``): its template (under ``hls_templates``) and values,
    its ROM files by name, its stream ports ``(name, elements a beat, elements a sample)`` (inputs
    in operand order) and the extra modules it instantiates (name -> (template, values))."""

    template: str
    values: dict[str, Any]
    roms: dict[str, Rom]
    inputs: tuple[tuple[str, int, int], ...]
    output: tuple[str, int, int]
