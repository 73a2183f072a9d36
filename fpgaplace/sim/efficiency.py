"""MAC efficiency of a project: the MACs a second its cores achieve over the DSP roofline, and
where the rest of the DSP cycles go, stage by stage. Reads design.json only.

At an interval of ``I`` cycles per run, the cores' DSPs offer ``sum(budget DSPs) * I`` DSP-cycles a
run, and the model's MACs need some of them (``mac_dsp_cycles``): an int8 layer's ``MACs /
macs_per_dsp``, a layer whose narrow lanes are packed several to a DSP its MACs at that packing, and
one whose lanes are LUTs (XNOR, LUT lanes) none: those MACs are counted apart (``lut_macs``), so
the efficiency of a low-bit design is its DSPs', never above 100 %. Every DSP-cycle offered is either
useful or lost in one of these ways (an exact account: they sum to the offer):

* ``unused``: a core's DSPs no stage took (its budget less its stages' DSPs, all of a board core
  the design leaves empty), all interval long;
* ``requantizers``: a dot-product stage's requantization multipliers (``Kernel.requantizer_dsps``),
  all interval long;
* ``idle``: a stage's MAC DSPs while it waits for the slowest stage (``I`` less its cycles);
* ``fill``: its MAC DSPs while its cycles exceed its compute steps (the line buffer's first rows,
  an output row waiting for its input rows, a reorder buffer draining);
* ``folding``: its MAC DSPs during the compute steps but idle, because the folds do not divide
  the work evenly (a short last group of pixels) or because a lane has no partner to pair with
  in one DSP (``Kernel.paired_lanes``);
* ``other``: the DSPs of a stage that computes no MACs (a layer norm's or an affine's products).

The interval is the design's (the simulated one when given, else design.json's), so a core faster
than the slowest device counts its wait as ``idle`` of its stages and ``unused`` of its spare DSPs.
Cost: O(layers).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from fpgaplace.hw.geometry import Folding, Geometry
from fpgaplace.hw.kernel import Kernel
from fpgaplace.hw.registry import KERNELS
from fpgaplace.project.board import project_board
from fpgaplace.project.layout import DESIGN_FILE
from fpgaplace.project.record import DesignRecord, Layer, load
from fpgaplace.util.errors import FpgaplaceError, first_line

LOSSES = ("requantizers", "idle", "fill", "folding", "other")
"""The ways a stage loses DSP-cycles (module docstring), in the order they are shown."""


@dataclass
class StageLoss:
    """The DSP-cycles one dot-product stage loses a run, by way (``LOSSES``)."""

    core: str
    op: str
    kernel: str
    dsp: int
    cycles: int
    macs: int
    losses: dict[str, float]

    @property
    def total(self) -> float:
        return sum(self.losses.values())

    def to_json(self) -> dict:
        return {"core": self.core, "op": self.op, "kernel": self.kernel, "dsp": self.dsp, "cycles": self.cycles,
                "macs": self.macs, "losses": self.losses, "total": self.total}


@dataclass
class Efficiency:
    """MACs a second against the cores' and the chip's DSP peak, and the lost DSP-cycles a run."""

    macs: int  # per run, on the cores
    interval_cycles: float
    macs_per_dsp: float
    offered: float  # DSP-cycles the cores' budgets offer a run
    chip_dsp: int  # every DSP of the part (every node's)
    stages: list[StageLoss]
    unused: dict[str, float] = field(default_factory=dict)  # core -> DSP-cycles no stage took

    useful: float = 0.0  # DSP-cycles a run the MACs on DSP lanes need (``mac_dsp_cycles``)
    lut_macs: int = 0  # per run, the MACs done on LUT lanes (no DSP-cycles)

    @property
    def cores_fraction(self) -> float:
        """Achieved MACs a second over the cores' DSP roofline."""
        return self.useful / self.offered if self.offered else 0.0

    @property
    def chip_fraction(self) -> float:
        """Achieved MACs a second over the whole part's DSP peak."""
        chip = self.chip_dsp * self.interval_cycles
        return self.useful / chip if chip else 0.0

    def largest(self, count: int = 3) -> list[StageLoss]:
        """The ``count`` stages that lose most, largest first."""
        return sorted(self.stages, key=lambda s: -s.total)[:count]

    def by_way(self) -> dict[str, float]:
        """Lost DSP-cycles a run summed by way, ``unused`` first."""
        return {"unused": sum(self.unused.values()),
                **{way: sum(s.losses[way] for s in self.stages) for way in LOSSES}}

    def to_json(self) -> dict:
        return {"macs": self.macs, "lut_macs": self.lut_macs, "interval_cycles": self.interval_cycles,
                "offered_dsp_cycles": self.offered, "useful_dsp_cycles": self.useful,
                "cores_fraction": self.cores_fraction, "chip_fraction": self.chip_fraction,
                "lost": self.by_way(), "largest": [s.to_json() for s in self.largest()]}


def mac_dsps(layer: Layer, core, batch: int, where: str) -> tuple[int, int, int]:
    """(MAC DSPs, requantizer DSPs, compute-step cycles a run) of a dot-product layer, asked of its
    kernel from its config and folding: the steps are FINN's MVAU count (``Kernel.cycles`` of the
    base class: no line buffer, no drain) of one sample's geometry, times the samples (and the
    rows of a dense layer's sample, by its MACs). Where the kernel has no way to rebuild its
    geometry from a config, every DSP counts as a MAC DSP and the layer's cycles as compute
    steps; a config it cannot rebuild a layer from is one error line naming ``where`` (the
    layer's path in design.json) and the config (``config_geometry``)."""
    kernel = KERNELS.get(layer.kernel)
    build = getattr(kernel, "config_geometry", None)
    if build is None:
        return layer.resources.get("dsp", 0), 0, layer.cycles
    g = config_geometry(build, layer, where)
    fold = Folding(layer.pe, layer.simd, layer.mmv, layer.uram)
    requant = kernel.requantizer_dsps(g, fold, core)
    steps = Kernel.cycles(kernel, g, fold) * batch * max(1, layer.macs // max(1, g.macs))
    return layer.resources.get("dsp", 0) - requant, requant, min(layer.cycles, steps)


def mac_dsp_cycles(layer: Layer, core, per_dsp: float, batch: int, where: str) -> float:
    """DSP-cycles a run the MACs of ``layer`` need on its DSP lanes: ``MACs / per_dsp`` (the core's
    int8 rule) for a layer at 8 x 8 bits; below, its MACs at the rate its lanes run on its MAC DSPs
    (``mac_dsps``: PE x SIMD x MMV lanes on them, several packed to a DSP), none where its lanes
    are LUTs (no MAC DSPs). O(1)."""
    if not layer.macs:
        return 0.0
    widths = layer.widths
    if widths is None or (widths.weights or 8) >= 8 and min(widths.inputs or [8]) >= 8:
        return batch * layer.macs / per_dsp
    macs_dsp, _, _ = mac_dsps(layer, core, batch, where)
    lanes = layer.pe * layer.simd * layer.mmv
    return batch * layer.macs * max(0, macs_dsp) / lanes if lanes else 0.0


def config_geometry(build, layer: Layer, where: str) -> Geometry:
    """The one-sample geometry ``build`` (a kernel's ``config_geometry``) makes of ``layer``'s
    config, checked: a member it needs missing, a value the op library rejects (a stride of 0) or
    a layer of MACs whose config gives none (a channel count of 0) is one ``FpgaplaceError`` line
    ``<where>.config[.<member>]: ...``. Cost: the kernel's geometry, O(1) for the dot products."""
    try:
        g = build(layer.config)
    except KeyError as error:
        raise FpgaplaceError(f"{where}.config.{error.args[0]}: missing; expected the {layer.kernel} "
                             "kernel's config member") from None
    except (ValueError, TypeError, ZeroDivisionError, FpgaplaceError) as error:
        raise FpgaplaceError(f"{where}.config: the {layer.kernel} kernel cannot rebuild the layer from it "
                             f"({first_line(error)})") from None
    if layer.macs and g.macs < 1:
        raise FpgaplaceError(f"{where}.config: a {layer.kernel} layer of no MACs; expected members giving "
                             f"the layer's {layer.macs} MACs")
    return g


def efficiency(project: Path, interval_us: float | None = None) -> Efficiency:
    """The MAC efficiency of ``project`` at ``interval_us`` a run (design.json's when None)."""
    document: DesignRecord = load(project)
    board = project_board(document, Path(project) / "design.json")
    per_dsp = board.cores[0].macs_per_dsp if board.cores else 1
    clock = document.board.clock_mhz or (board.cores[0].clock_mhz if board.cores else 1.0)
    interval = (interval_us if interval_us is not None else document.interval_us) * clock
    reference = board.cores[0] if board.cores else None
    batch = document.model.batch
    stages, unused, offered, useful, lut_macs = [], {}, 0.0, 0.0, 0
    for c, core in enumerate(document.cores):
        budget = core.budget.get("dsp", 0)
        offered += budget * interval
        used = 0
        for i, layer in enumerate(core.layers):
            dsp = layer.resources.get("dsp", 0)
            used += dsp
            where = f"{Path(project) / DESIGN_FILE}: cores[{c}].layers[{i}]"
            on_dsps = mac_dsp_cycles(layer, reference, per_dsp, batch, where)
            useful += on_dsps
            lut_macs += batch * layer.macs if layer.macs and not on_dsps else 0
            if dsp:
                stages.append(_stage_loss(core.name, layer, reference, interval, on_dsps, batch, where))
        unused[core.name] = max(0, budget - used) * interval
    for spare in board.cores:  # a core of the board the design leaves empty: all its DSPs unused
        if spare.name not in unused:
            offered += spare.dsp * interval
            unused[spare.name] = spare.dsp * interval
    return Efficiency(batch * sum(layer.macs for c in document.cores for layer in c.layers), interval, per_dsp,
                      offered, board.fabric.get("dsp", 0), stages, unused, useful, lut_macs)


def _stage_loss(core: str, layer: Layer, reference, interval: float, useful: float, batch: int,
                where: str) -> StageLoss:
    """The DSP-cycles ``layer`` loses a run of ``interval`` cycles, by way (module docstring); its
    MACs need ``useful`` of them (``mac_dsp_cycles``)."""
    losses = dict.fromkeys(LOSSES, 0.0)
    if not layer.macs:
        losses["other"] = layer.resources.get("dsp", 0) * interval
        return StageLoss(core, layer.op, layer.kernel, layer.resources.get("dsp", 0), layer.cycles, 0, losses)
    macs_dsp, requant, steps = mac_dsps(layer, reference, batch, where)
    losses |= {"requantizers": requant * interval, "idle": macs_dsp * max(0.0, interval - layer.cycles),
              "fill": macs_dsp * (layer.cycles - steps), "folding": macs_dsp * steps - useful}
    return StageLoss(core, layer.op, layer.kernel, layer.resources.get("dsp", 0), layer.cycles, layer.macs, losses)
