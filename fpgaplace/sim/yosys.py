"""Resources of the RTL from yosys ``synth_xilinx`` or ``synth_ecp5`` (Debian's yosys), beside the
op library's estimate.

``synthesize(module, folder, family)`` runs ``synth_xilinx -family <family>`` (7-series,
UltraScale+) or ``synth_ecp5`` (Lattice ECP5) on a rendered module
(``fpgaplace.codegen.rtl.RtlModule``: its files are written into ``folder``) and counts the mapped
cells: LUT (LUT1..LUT6, plus the LUTs a distributed RAM or shift register cell takes; on ECP5
LUT4, two a CCU2C carry cell, four a TRELLIS_DPR16X4 RAM), FF (the FD* cells; TRELLIS_FF), DSP
(the family's multiplier: DSP48E1/E2, MULT18X18D) and BRAM36 (the family's block RAM cells in 36
Kbit blocks: RAMB36 + RAMB18 / 2, DP16KD / 2). ``stat`` reports the hierarchy's total last.

``project_resources(project)`` does so for every layer of every core of a compiled project (each
layer module with the shared library, read from the Verilog compile wrote into ``rtl/<core>/``);
it writes ``results/resources.json``. DSP
counts agree exactly (``dsp_equal``): the op library counts the MAC lanes' multipliers as the
RTL pairs them and the requantizers' (``fpgaplace.hw.kernel.Kernel.dsps``); LUT, FF and BRAM36
are estimates, set beside yosys as ratios.

Cost: yosys time grows with the lanes and with the line buffers (their read ports become LUT
multiplexers), from seconds for a small layer to minutes for a wide one.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from fpgaplace.board.model import FAMILIES, Family, family_of
from fpgaplace.project.layout import RESULTS_DIR, RTL_DIR, cell_name
from fpgaplace.project.record import Core, load
from fpgaplace.util.errors import FpgaplaceError

RESOURCES_FILE = "resources.json"
LUTRAM_LUTS = {"RAM16X1D": 2, "RAM32X1D": 2, "RAM64X1D": 2, "RAM128X1D": 4, "RAM256X1D": 8, "RAM32M": 4,
               "RAM64M": 4, "RAM32M16": 8, "RAM64M8": 8, "RAM32X1S": 1, "RAM64X1S": 1, "RAM128X1S": 2,
               "RAM256X1S": 4, "SRL16E": 1, "SRLC32E": 1, "SRLC16E": 1}
ECP5_LUTS = {"LUT4": 1, "CCU2C": 2, "TRELLIS_DPR16X4": 4}  # LUT4s a cell takes (a slice: 2 LUT4 + carry)
YOSYS_TIMEOUT_S = 3600
LIBRARY_FILE = "fp_lib.v"  # the shared modules every layer instantiates, beside a core's layers


class Module(Protocol):
    """A rendered Verilog module (``fpgaplace.codegen.rtl.RtlModule``): its top and its files
    (Verilog sources and ``$readmemh`` data) by name."""

    top: str
    files: dict[str, str]


@dataclass(frozen=True)
class LayerModule:
    """A layer's module read back from a project's ``rtl/<core>/``."""

    top: str
    files: dict[str, str]


@dataclass(frozen=True)
class Synthesized:
    """Mapped cells of one module (its whole hierarchy)."""

    lut: int
    ff: int
    dsp: int
    bram36: float

    def to_json(self) -> dict[str, Any]:
        return {"lut": self.lut, "ff": self.ff, "dsp": self.dsp, "bram36": self.bram36}


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


def synth_command(family: Family, top: str, dsp_only: bool) -> str:
    """The yosys synthesis command of ``family``; ``dsp_only`` stops where the DSP count is final
    (after ``synth_xilinx``'s DSP mapping, after ``synth_ecp5``'s coarse step, which maps them)."""
    if family.name == "ecp5":
        return f"synth_ecp5 -top {top}" + (" -run :map_ram" if dsp_only else "")
    return f"synth_xilinx -family {family.name} -top {top}" + (" -run :map_memory" if dsp_only else "")


def parse_stat(text: str) -> dict[str, int]:
    """The cell histogram of the last block of yosys ``stat`` output (the hierarchy's total when
    there is one)."""
    blocks = re.split(r"^=== (.+?) ===$", text, flags=re.MULTILINE)
    last = blocks[-1] if len(blocks) > 1 else text
    return {cell: int(n) for cell, n in re.findall(r"^\s+(\S+)\s+(\d+)\s*$", last, flags=re.MULTILINE)
            if not cell.startswith("$") or cell.startswith("$_")}


def synthesize(module: Module, folder: Path, family: Family | str, dsp_only: bool = False) -> Synthesized:
    """``synth_xilinx`` or ``synth_ecp5`` of ``module`` (written into ``folder`` with its ROM files);
    its cells. ``dsp_only`` stops after the DSP mapping and its clean-up (``synth_command``): the DSP
    count is final there, the LUT/FF/BRAM counts are not (a fraction of the time for a wide layer).
    ``family`` is a ``Family`` or its name (``xc7``, ``xcup``, ``ecp5``)."""
    family = FAMILIES[family] if isinstance(family, str) else family
    if shutil.which("yosys") is None:
        raise FpgaplaceError("yosys: not on PATH; install it (scripts/setup.sh does)")
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in module.files.items():
        (folder / name).write_text(text)
    sources = [folder / name for name in module.files if name.endswith(".v")]
    script = (f"read_verilog {' '.join(s.name for s in sources)}; {synth_command(family, module.top, dsp_only)}; "
              "tee -q -o stat.txt stat")
    log = folder / "yosys.log"
    try:
        run = subprocess.run(["yosys", "-q", "-l", str(log), "-p", script], cwd=folder, capture_output=True,
                             text=True, check=False, timeout=YOSYS_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise FpgaplaceError(f"yosys: {module.top} took over {YOSYS_TIMEOUT_S} s; see {log}") from None
    if run.returncode != 0 or not (folder / "stat.txt").is_file():
        raise FpgaplaceError(f"yosys: synthesis of {module.top} failed (exit {run.returncode}); see {log}")
    return count_cells(parse_stat((folder / "stat.txt").read_text()), family)


@dataclass(frozen=True)
class LayerResources:
    op: str
    kernel: str
    yosys: Synthesized
    estimate: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        ratios = {key: round(getattr(self.yosys, key) / self.estimate[key], 3) if self.estimate.get(key) else None
                  for key in ("lut", "ff", "bram36")}
        return {"op": self.op, "kernel": self.kernel, "yosys": self.yosys.to_json(), "estimate": self.estimate,
                "dsp_equal": self.yosys.dsp == self.estimate["dsp"], "ratio_yosys_to_estimate": ratios}


@dataclass(frozen=True)
class CoreResources:
    name: str
    layers: list[LayerResources]

    def to_json(self) -> dict[str, Any]:
        total = {key: sum(getattr(layer.yosys, key) for layer in self.layers) for key in ("lut", "ff", "dsp", "bram36")}
        estimate = {key: sum(layer.estimate[key] for layer in self.layers) for key in ("lut", "ff", "dsp", "bram36")}
        return {"name": self.name, "layers": [layer.to_json() for layer in self.layers], "yosys_layers_total": total,
                "estimate_total": estimate}


@dataclass(frozen=True)
class ProjectResources:
    family: Family
    cores: list[CoreResources]

    def to_json(self) -> dict[str, Any]:
        return {"family": self.family.name, "cores": [core.to_json() for core in self.cores]}


def project_resources(project: Path, progress: Callable[[str], None] | None = None,
                      dsp_only: bool = False) -> ProjectResources:
    """yosys resources of every layer of every core of ``project`` beside design.json's estimate;
    writes ``results/resources.json`` (not with ``dsp_only``, whose LUT/FF/BRAM are not final,
    see ``synthesize``)."""
    project = Path(project)
    design = load(project)
    family = family_of(design.cores[0].part) if design.cores else FAMILIES["xcup"]
    cores = []
    with tempfile.TemporaryDirectory(prefix="fpgaplace-yosys-") as scratch:
        for record in design.cores:
            layers = []
            for module, layer in zip(layer_modules(project, record), record.layers, strict=True):
                if progress is not None:
                    progress(f"yosys {synth_command(family, module.top, dsp_only).split()[0]} of {record.name} "
                             f"{layer.op} ({layer.kernel})")
                synthesized = synthesize(module, Path(scratch) / cell_name(module.top), family, dsp_only)
                estimate = {key: int(layer.resources.get(key, 0)) for key in ("lut", "ff", "dsp", "bram36")}
                layers.append(LayerResources(layer.op, layer.kernel, synthesized, estimate))
            cores.append(CoreResources(record.name, layers))
    result = ProjectResources(family, cores)
    if dsp_only:
        return result
    (project / RESULTS_DIR).mkdir(exist_ok=True)
    (project / RESULTS_DIR / RESOURCES_FILE).write_text(json.dumps(result.to_json(), indent=2) + "\n")
    return result


def layer_modules(project: Path, record: Core) -> list[Module]:
    """Each layer's module of a core as compile wrote it (``rtl/<core>/<core>_<i>_<kernel>.v``, its
    ROMs ``<core>_<i>_<kernel>_*.mem``) with the shared library; a one-line error where compile
    left no RTL for the core."""
    core = cell_name(record.name)
    folder = project / RTL_DIR / core
    if (folder / "README.txt").is_file():
        reason = (folder / "README.txt").read_text().strip()
        raise FpgaplaceError(f"{folder}: no RTL for core {record.name}: {reason}")
    if not (folder / LIBRARY_FILE).is_file():
        raise FpgaplaceError(f"{folder}: missing {LIBRARY_FILE}; expected the core's RTL (compile writes it)")
    names = sorted(path.name for path in folder.iterdir())
    modules: list[Module] = []
    for i, layer in enumerate(record.layers):
        top = f"{core}_{i}_{layer.kernel}"
        own = [name for name in names if name == f"{top}.v" or name.startswith(f"{top}_")]
        if f"{top}.v" not in own:
            raise FpgaplaceError(f"{folder}: missing {top}.v; expected layer {i}'s RTL (compile writes it)")
        modules.append(LayerModule(top, {name: (folder / name).read_text() for name in [LIBRARY_FILE, *own]}))
    return modules
