"""C simulation of a compiled project: every core's C++ built with g++ and run from Python.

As hls4ml's ``compile()``/``predict()`` do, each core's HLS top and its C entry are built into
a shared library (``g++ -std=c++17 -O2 -Wall -Werror``, the project's ``hls_compat.h`` standing
in for the Vitis headers unless they are on the include path) and called through ctypes.
Then the whole placed model runs sample by sample in manifest order: CPU pieces in
onnxruntime, cores in C. Each core's outputs are compared bit for bit with the integer
reference (``fpgaplace.hw`` kernels run on the same int8 inputs), and the model's outputs with
onnxruntime running the whole QDQ model, in units of the output's quantization step (LSB).
A core whose sources and flags are unchanged is not rebuilt (a hash of them sits beside the
library). Only ``design.json`` and the files it names are read.

onnxruntime runs a QDQ model two ways that need not agree: with its graph optimizations (Q/DQ
pairs fused into integer QLinear ops; the CPU pieces run so) and without (every op in float
between its DequantizeLinear and QuantizeLinear, as ONNX defines the model). Where a value lands
next to a rounding boundary the two round it one step apart, and the layers after an early
one-step difference can grow it to several steps at the outputs (a small MobileNetV3 with SE
blocks: 5 and 6 LSB between onnxruntime's own two runs on two samples of eight; the light zoo's
VGG-19, 2 to 5 LSB on four samples, its ShuffleNet 85 and 127 LSB on two of thirty, where a
near-tie of two logits flips). Neither run is exact either: their float32 convolutions misround
values within about 1e-5 of a rounding midpoint, which the cores' exact integer accumulations
round correctly (VGG-19's first conv: 7 values of 3.2 million), and the unoptimized run breaks an
average pool's exact ties by float noise. So the cores follow one run here and the other there,
and an output element is within 1 LSB when it lies no more than 1 LSB outside the band between
onnxruntime's two runs of it (``lsb_outside``; the unoptimized run is made only for a sample the
optimized one is more than 1 LSB from): never further from onnxruntime than onnxruntime is from
itself, plus one step. A deep model can still carry a one-step difference further than
that (VGG-19: 2 LSB outside the band on one sample of two): on such a sample every core layer
is run again by its integer reference on onnxruntime's own int8 inputs to it and compared with
onnxruntime's output of it (``LayerCheck``, in ``layers`` of ``csim.json``); the sample passes
when every layer alone is within one step, i.e. no layer computes anything but what
onnxruntime computes up to one rounding step, and csim says so. Then
``first_difference`` points at the first int8 tensor, in the model's order, whose placed value
differs from the unoptimized run, and at the piece that computed it: a tensor between pieces, or
one inside a core (a layer's output as its integer reference computed it, which the core's C
equals when bit-exact), so the pointer names the op where a sample first left onnxruntime even
when the core's outputs are many layers later.

Softmax and LayerNormalization are not exact integer arithmetic in onnxruntime's QDQ model (a
float exponential, square root and division between their Q/DQ pairs), so their integer kernels
(``hw.softmax``, ``hw.layernorm``) land one step from it where a value sits near a rounding
midpoint, and later layers carry that step on: the 4-layer ViT of ``zoo.vit_encoder`` lands up to
5 LSB outside onnxruntime's band over 100 random samples (8 over 1,000; onnxruntime's own two runs
10 apart), the BERT layer 2. The piece-by-piece check above is what such a sample is held to: on
30 ViT samples every one of 3,180 layer outputs (Softmax and LayerNorm included) was within one
step of onnxruntime on onnxruntime's own inputs.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import math
import os
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from fpgaplace.hw import KERNELS
from fpgaplace.hw.lstm_cell import wide_anchors
from fpgaplace.hw.qdq import output_scales
from fpgaplace.hw.quant import dequantize, quantize_float
from fpgaplace.model.qdq import is_from_qonnx
from fpgaplace.project.arrays import load_arrays
from fpgaplace.project.layout import DESIGN_FILE, INCLUDE_DIR, LAYERS_FILE, RESULTS_DIR, WEIGHTS_FILE
from fpgaplace.project.manifest import Manifest
from fpgaplace.project.record import BoundaryTensor, Core, load
from fpgaplace.sim.event import load_manifest
from fpgaplace.util import onnxrt
from fpgaplace.util.errors import FpgaplaceError, first_line
from fpgaplace.util.files import write_file
from fpgaplace.util.onnxrt import random_inputs

CXX_FLAGS = ["-std=c++17", "-O2", "-Wall", "-Werror", "-Wno-unknown-pragmas", "-shared", "-fPIC", "-DFP_COUNT_TICKS",
             "-fvisibility=hidden"]  # each core's library keeps its own counters; only fp_run and fp_ticks are seen
LIBRARY = "libcore.so"
CSIM_RESULTS = "csim.json"


@dataclass
class CoreCheck:
    name: str
    bit_exact: bool
    mismatches: int = 0
    first_mismatch: str = ""
    built: bool = False
    stage_ticks: list[int] = field(default_factory=list)  # each stage's loop iterations over all runs
    runs: int = 0  # samples the core ran

    def stages(self, record: Core | None) -> list[dict]:
        """Each stage's measured iterations per sample beside the model's cycles (design.json)."""
        per_sample = [t / max(1, self.runs) for t in self.stage_ticks]
        stages = record.stages if record is not None else []
        return [{**stage.to_json(), "cycles_csim": ticks} for stage, ticks in zip(stages, per_sample, strict=False)]

    def interval_cycles(self) -> float:
        """The busiest stage's iterations per sample: the core's interval at II=1."""
        return max(self.stage_ticks, default=0) / max(1, self.runs)


@dataclass
class OutputCheck:
    name: str
    max_abs_diff: float
    max_abs_diff_lsb: float | None  # outside the band of onnxruntime's two runs; None for a float output
    max_lsb_optimized: float | None = None  # from onnxruntime's optimized run alone


@dataclass
class LayerCheck:
    """On a sample whose outputs are more than 1 LSB off, every piece of the placed run fed
    onnxruntime's own values of its inputs (from the unoptimized run) and compared with
    onnxruntime's values of what it computes, in steps: each core layer by its integer reference
    (bit-exact with the core's C), each CPU piece in onnxruntime. Where every layer and piece alone
    stays within one step, the outputs' larger differences grew from one-step rounding differences
    through the layers after them (a deep model amplifies them; near-ties of two logits flip them),
    not from anything computed wrongly; where one does not, ``worst`` names it. A core's own
    tensors that onnxruntime does not have (pads, reorders) are computed, not compared; a CPU piece
    whose inputs onnxruntime's run does not have is ``unchecked`` and the check then proves nothing."""

    samples: int = 0  # samples checked piece by piece
    compared: int = 0  # layer and piece outputs compared, over those samples
    worst_lsb: float = 0.0
    worst: str = ""
    unchecked: set[str] = field(default_factory=set)

    @property
    def within_one_step(self) -> bool:
        return self.samples > 0 and self.compared > 0 and self.worst_lsb <= 1 and not self.unchecked

    def to_json(self) -> dict:
        return {"samples": self.samples, "compared": self.compared, "worst_lsb": self.worst_lsb,
                "worst": self.worst, "unchecked": sorted(self.unchecked), "within_one_step": self.within_one_step}

    def add(self, cores: dict[str, _Core], runs: dict[str, list], pieces: list, reference: dict[str, np.ndarray],
            steps: dict[str, float]) -> None:
        """Check one sample: ``runs``, each core's (inputs, outputs) per run; ``pieces``, the CPU
        pieces as (manifest entry, session); ``reference``, onnxruntime's unoptimized run by tensor
        name; ``steps``, each activation's step (0: an int8 tensor). O(one run of the model)."""
        self.samples += 1
        for name, core_runs in runs.items():
            self._check_core(name, cores[name], core_runs, reference)
        for sub, session in pieces:
            self._check_piece(sub, session, reference, steps)

    def _check_core(self, name: str, core: _Core, core_runs: list, reference: dict[str, np.ndarray]) -> None:
        anchors = _stream_anchors(core.record, reference, len(core_runs))
        wide = wide_anchors(core.record.layers, anchors)  # inputs only: onnxruntime has no wide state
        for index, (inputs, _) in enumerate(core_runs):
            given = {t: parts[index] for t, parts in anchors.items()}
            layers: dict[str, np.ndarray] = {}
            core.reference(inputs, layers, given | {t: parts[index] for t, parts in wide.items()})
            for tensor, value in layers.items():
                if tensor in given:
                    self._count(np.abs(value.astype(np.int32) - given[tensor].astype(np.int32)),
                                f"'{tensor}' in core {name}")

    def _check_piece(self, sub, session, reference: dict[str, np.ndarray], steps: dict[str, float]) -> None:
        if any(t not in reference for t in sub.inputs):
            self.unchecked.add(sub.name)
            return
        results = session.run(sub.outputs, {t: reference[t] for t in sub.inputs})
        for tensor, got in zip(sub.outputs, results, strict=True):
            if tensor in reference and tensor in steps:
                difference = np.abs(got.astype(np.float64) - reference[tensor].astype(np.float64))
                step = steps[tensor]
                self._count(np.rint(difference / step) if step else difference,
                            f"'{tensor}' from piece {sub.name} on {sub.device}")

    def _count(self, steps_off: np.ndarray, where: str) -> None:
        self.compared += 1
        lsb = float(np.max(steps_off, initial=0))
        if lsb > self.worst_lsb:
            self.worst_lsb, self.worst = lsb, where


def _stream_anchors(record: Core, reference: dict[str, np.ndarray], runs: int) -> dict[str, list[np.ndarray]]:
    """onnxruntime's int8 value of each of the core's layer tensors it has, cut into the core's
    ``runs`` (a 4-D tensor channels last, as the stream carries it: the inverse of
    ``_model_layout``). O(those tensors' elements)."""
    anchors = {}
    for layer in record.layers:
        for tensor in (*layer.inputs, layer.output):
            value = reference.get(tensor)
            if value is None or tensor in anchors or value.dtype not in (np.int8, np.uint8) or value.size % runs:
                continue
            ordered = np.transpose(value, (0, 2, 3, 1)) if value.ndim == 4 else value
            anchors[tensor] = np.split(ordered.reshape(-1), runs)
    return anchors


@dataclass
class CsimResult:
    project: Path
    samples: int
    cores: list[CoreCheck]
    outputs: list[OutputCheck]
    build_seconds: float
    run_seconds: float  # the placed model only: cores in C, CPU pieces in onnxruntime
    check_seconds: float = 0.0  # the integer reference and the whole QDQ model in onnxruntime
    values: dict[str, np.ndarray] = field(default_factory=dict, repr=False)  # each output over all samples
    notes: list[str] = field(default_factory=list)
    records: dict[str, Core] = field(default_factory=dict, repr=False)  # design.json's core records
    first_difference: str = ""  # where a sample first left onnxruntime's unoptimized run (module docstring)
    layers: LayerCheck = field(default_factory=LayerCheck)  # on samples off by more than 1 LSB
    checked: int | None = None  # the samples checked (the first ones; run_csim's ``checked``): all when None

    @property
    def ok(self) -> bool:
        """Every core bit-exact, and every output within 1 LSB of onnxruntime (outside the band of
        its two runs) or, on the samples where one is not, every core layer and CPU
        piece within 1 LSB of onnxruntime given onnxruntime's own inputs to it (``LayerCheck``)."""
        lsb_ok = all(o.max_abs_diff_lsb is None or o.max_abs_diff_lsb <= 1.0 for o in self.outputs)
        return all(c.bit_exact for c in self.cores) and (lsb_ok or self.layers.within_one_step)

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "project": str(self.project),
            "samples": self.samples,
            "checked_samples": self.samples if self.checked is None else self.checked,
            "cores": [{"name": c.name, "bit_exact": c.bit_exact, "mismatches": c.mismatches,
                       "first_mismatch": c.first_mismatch, "rebuilt": c.built,
                       "interval_cycles_csim": c.interval_cycles(),
                       "interval_cycles_model": (self.records[c.name].compute_interval_cycles
                                                 if c.name in self.records else None),
                       "stages": c.stages(self.records.get(c.name))} for c in self.cores],
            "outputs": [{"name": o.name, "max_abs_diff": o.max_abs_diff, "max_abs_diff_lsb": o.max_abs_diff_lsb,
                         "max_lsb_optimized": o.max_lsb_optimized} for o in self.outputs],
            "first_difference": self.first_difference,
            "layers": self.layers.to_json(),
            "build_seconds": self.build_seconds,
            "run_seconds": self.run_seconds,
            "check_seconds": self.check_seconds,
        }


def _compiler() -> str:
    cxx = os.environ.get("CXX", "g++")
    if shutil.which(cxx) is None:
        raise FpgaplaceError(f"csim: the C++ compiler '{cxx}' is not on PATH; install g++ (scripts/setup.sh does)")
    return cxx


def build_core(project: Path, record: Core) -> tuple[Path, bool]:
    """The core's shared library, built unless its sources and flags are unchanged; returns
    (path, whether it was built). A compiler failure names the core, the first error and the log."""
    project = project.resolve()  # g++ runs in the core's folder (below), so every path it is given is absolute
    folder = project / record.folder
    sources = [folder / f"{record.top}.cpp", folder / "csim_entry.cpp"]
    for source in sources:
        if not source.is_file():
            raise FpgaplaceError(f"{source}: missing; expected the C++ of core {record.name} (compile writes it)")
    embedded = _embedded_weights(folder, record)
    headers = sorted((project / INCLUDE_DIR).rglob("*.h")) + sorted(folder.glob("*.h"))
    defines = [f'-DFP_WMEM_FILE="{WEIGHTS_FILE}"'] if embedded else []  # found by the assembler in its cwd
    command = [_compiler(), *CXX_FLAGS, *defines, f"-I{project / INCLUDE_DIR}", *map(str, sources)]
    digest = hashlib.sha256(" ".join(command).encode())
    for path in [*sources, *headers, *([embedded] if embedded else [])]:
        digest.update(path.read_bytes())
    build = folder / "build"
    library, stamp = build / LIBRARY, build / "sources.sha256"
    if library.is_file() and stamp.is_file() and stamp.read_text() == digest.hexdigest():
        return library, False
    build.mkdir(exist_ok=True)
    log = build / "g++.log"
    done = subprocess.run([*command, "-o", str(library)], capture_output=True, text=True, cwd=folder)
    log.write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        errors = ([line for line in done.stderr.splitlines() if "error" in line or "Error:" in line]  # g++ or as
                  or done.stderr.splitlines() or ["?"])
        raise FpgaplaceError(f"{record.name}: g++ failed: {errors[0].strip()} (log: {log})")
    stamp.write_text(digest.hexdigest())
    return library, True


def _embedded_weights(folder: Path, record: Core) -> Path | None:
    """The core's ``weights.bin``, which the C entry embeds (``FP_WMEM_FILE``, by the assembler:
    a C initializer of ResNet-50's first core's 24 MB takes g++ about a minute); None when the core
    streams no weights. A missing file, or one not holding exactly the streamed bytes, is an error."""
    size = record.streamed_weight_bytes
    if size <= 0:
        return None
    weights = folder / WEIGHTS_FILE
    if not weights.is_file():
        raise FpgaplaceError(f"{weights}: missing; expected the {size} bytes of weights {record.name} streams "
                             f"(compile writes it)")
    if weights.stat().st_size != size:
        raise FpgaplaceError(f"{weights}: {weights.stat().st_size} bytes; expected the {size} bytes of weights "
                             f"{record.name} streams")
    return weights


def _build_alias(library: Path) -> Path:
    """A name of the library that is unique to its build (its sources' digest): dlopen hands back an
    already loaded library of the same name, so a core rebuilt within one process would otherwise
    keep running its old code. The alias is a hard link (a copy where links fail); older ones go."""
    digest = (library.parent / "sources.sha256").read_text().strip()[:16]
    alias = library.with_name(f"{library.stem}-{digest}{library.suffix}")
    if not alias.is_file():
        for old in library.parent.glob(f"{library.stem}-*{library.suffix}"):
            old.unlink()
        try:
            os.link(library, alias)
        except OSError:
            shutil.copyfile(library, alias)
    return alias


class _Core:
    """One built core: its ctypes entry and its integer reference."""

    def __init__(self, record: Core, library: Path, arrays: list[dict[str, np.ndarray]]) -> None:
        self.record = record
        library_handle = ctypes.CDLL(str(_build_alias(library)))
        self.entry = library_handle.fp_run
        self.entry.restype = ctypes.c_int
        self.ticks_entry = library_handle.fp_ticks
        self.ticks_entry.restype = ctypes.c_int
        self.stage_count = len(record.stages)
        self.arrays = arrays

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """One sample through the C core (inputs and outputs in stream order)."""
        ins = [np.ascontiguousarray(x, dtype=np.int8) for x in inputs]
        outs = [np.zeros(math.prod(t.sample_shape), dtype=np.int8) for t in self.record.outputs]
        pointer = ctypes.POINTER(ctypes.c_int8)
        in_array = (pointer * max(1, len(ins)))(*[x.ctypes.data_as(pointer) for x in ins])
        out_array = (pointer * max(1, len(outs)))(*[y.ctypes.data_as(pointer) for y in outs])
        status = self.entry(in_array, out_array)
        if status != 0:
            what = {1: "an output stream held the wrong number of elements", 2: "an input was not consumed",
                    3: "a stage read an empty stream", 4: "its streamed weights could not be read"}.get(
                        status, "unknown status")
            raise FpgaplaceError(f"{self.record.name}: the C simulation ended with status {status} ({what})")
        return outs

    def ticks(self) -> np.ndarray:
        """Each stage's loop iterations since the last call (the counters are then reset)."""
        counts = np.zeros(max(1, self.stage_count), dtype=np.int64)
        filled = self.ticks_entry(counts.ctypes.data_as(ctypes.POINTER(ctypes.c_longlong)))
        return counts[:filled]

    def reference(self, inputs: list[np.ndarray], layers: dict[str, np.ndarray] | None = None,
                  anchors: dict[str, np.ndarray] | None = None) -> list[np.ndarray]:
        """The same sample through the integer reference of every layer; each layer's output (in
        stream order) goes to ``layers`` too when given. A layer input named in ``anchors`` (stream
        order) is read from there instead of from the layer before: each layer then runs on the
        values another run (onnxruntime's) gave it (``LayerCheck``)."""
        values = {t.name: x for t, x in zip(self.record.inputs, inputs, strict=True)}
        anchors = anchors or {}
        for layer, arrays in zip(self.record.layers, self.arrays, strict=True):
            kernel = KERNELS[layer.kernel]
            try:
                operands = [anchors[t] if t in anchors else values[t] for t in layer.inputs]
                values[layer.output] = kernel.reference(layer.config, arrays, operands, rows=layer.rows).reshape(-1)
            except (ValueError, IndexError, KeyError, TypeError, ZeroDivisionError, MemoryError) as error:
                raise FpgaplaceError(f"{self.record.name}: layer {layer.op} ({layer.kernel}): the integer reference "
                                     f"does not run on design.json's config and {LAYERS_FILE} ({first_line(error)})"
                                     ) from None
        if layers is not None:
            layers.update((layer.output, values[layer.output]) for layer in self.record.layers)
        aliases = self.record.aliases
        return [values[aliases.get(t.name, t.name)].reshape(-1) for t in self.record.outputs]


def _checked_arrays(project: Path, record: Core) -> list[dict[str, np.ndarray]]:
    """The core's arrays, once every layer's kernel is known to the op library."""
    unknown = next((layer for layer in record.layers if layer.kernel not in KERNELS), None)
    if unknown is not None:
        raise FpgaplaceError(f"{project / DESIGN_FILE}: cores.{record.name}: layer {unknown.op}: kernel "
                             f"{unknown.kernel!r} is not in the op library; expected one of {', '.join(KERNELS)}")
    return load_arrays(project, record)


def _to_stream(array: np.ndarray, tensor: BoundaryTensor) -> list[np.ndarray]:
    """Per-sample stream-order arrays of a boundary tensor (NCHW -> HWC), one per core run."""
    batch = array.reshape(tensor.shape)
    samples = np.split(batch, tensor.samples) if batch.ndim else [batch]
    return [np.transpose(s, (0, 2, 3, 1)).reshape(-1) if tensor.channels_last else s.reshape(-1) for s in samples]


def _from_stream(samples: list[np.ndarray], tensor: BoundaryTensor) -> np.ndarray:
    shape = tensor.shape
    if tensor.channels_last:
        n, c, h, w = shape
        per = [s.reshape(-1, h, w, c).transpose(0, 3, 1, 2) for s in samples]
        return np.concatenate(per).reshape(shape)
    return np.concatenate([s.reshape(-1) for s in samples]).reshape(shape)


def _core_inputs(record: Core, values: dict) -> list[np.ndarray]:
    """The int8 inputs of a core from what the pieces before it computed."""
    arrays = []
    for t in record.inputs:
        if t.name in values:
            q = values[t.name].astype(np.int8)
        elif any(v.name in values for v in t.views):
            view = next(v.name for v in t.views if v.name in values)
            q = quantize_float(values[view].reshape(t.shape), t.scale, t.zero_point)
        elif t.quantized_from in values:
            q = quantize_float(values[t.quantized_from].reshape(t.shape), t.scale, t.zero_point)
        else:
            raise FpgaplaceError(f"{record.name}: input '{t.name}' is computed by no earlier piece")
        arrays.append(q)
    return arrays


def run_csim(project: Path, samples: int = 1, seed: int = 0, progress=None,
             inputs: np.ndarray | None = None, layers: bool = False, checked: int | None = None) -> CsimResult:
    """Build every core and run ``samples`` random samples (or the given ``inputs``, one row per
    sample of the model's one input) through the placed model (see the module docstring);
    ``layers``: check every sample piece by piece (``LayerCheck``), not only those more than 1
    LSB off (one more unoptimized onnxruntime run and integer reference a sample); ``checked``:
    check only the first ``checked`` samples (all when None) and only run the rest, their outputs
    kept in ``values`` (a top-1 count over many samples: a run costs a fraction of its check)."""
    project = Path(project)
    if samples < 1 or samples > 10**6:
        raise FpgaplaceError(f"samples: expected 1 to 1000000, got {samples}")
    if inputs is not None and not 1 <= len(inputs) <= 10**6:
        raise FpgaplaceError(f"inputs: expected 1 to 1000000 samples, got {len(inputs)}")
    document = load(project)
    say = progress or (lambda message: None)
    # What the run reads besides the libraries, checked before the (long) build.
    model = _load_model(project / document.model.file)
    split, manifest = load_manifest(project, document)
    arrays = {record.name: _checked_arrays(project, record) for record in document.cores}
    start = time.perf_counter()
    cores, checks = {}, {}
    say(f"building {len(document.cores)} cores with g++")
    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:  # one g++ process per core
        builds = list(pool.map(lambda record: build_core(project, record), document.cores))
    for record, (library, built) in zip(document.cores, builds, strict=True):
        cores[record.name] = _Core(record, library, arrays[record.name])
        checks[record.name] = CoreCheck(record.name, True, built=built)
    build_seconds = time.perf_counter() - start
    sessions = {s.name: onnxrt.session(str(split / s.file), str(split / s.file), optimized=not is_from_qonnx(model))
                for s in manifest.submodels if s.device not in cores}
    comparison = OutputComparison(project, model, [o["name"] for o in manifest.graph_outputs],
                                  piece_origins(manifest, document.cores))
    feeds = _sample_feeds(model, inputs, samples, seed)
    layer_check = LayerCheck()
    pieces = [(sub, sessions[sub.name]) for sub in manifest.submodels if sub.device not in cores]
    run_seconds = check_seconds = 0.0
    checked = len(feeds) if checked is None else max(0, min(checked, len(feeds)))
    for sample, feed in enumerate(feeds):
        if len(feeds) > 1 and sample % max(1, len(feeds) // 10) == 0:
            say(f"sample {sample + 1} of {len(feeds)}")
        start = time.perf_counter()
        values = dict(feed)
        runs = _run_pieces(project, manifest, cores, sessions, values)
        run_seconds += time.perf_counter() - start
        if sample >= checked:
            comparison.keep(values)
            continue
        start = time.perf_counter()
        inner: dict[str, list[np.ndarray]] = {}  # the cores' layer outputs, one stream-order array per run
        for name, core_runs in runs.items():
            _check_core(cores[name], checks[name], core_runs, inner)
            _count_ticks(cores[name], checks[name], len(core_runs))
        off = comparison.add(sample + 1, feed, values, inner)
        if off is None and layers:
            off = comparison.unoptimized(feed)
        if off is not None:
            layer_check.add(cores, runs, pieces, off, comparison.steps)
        check_seconds += time.perf_counter() - start
    result = CsimResult(project, len(feeds), list(checks.values()), comparison.outputs(), build_seconds, run_seconds,
                        records={r.name: r for r in document.cores}, checked=checked,
                        check_seconds=check_seconds, values=comparison.values(),
                        first_difference=comparison.first_difference, layers=layer_check)
    _save_result(project, result)
    return result


class OutputComparison:
    """The model's outputs ``names``, sample by sample, against onnxruntime's optimized run of the
    whole QDQ model and, for a sample more than 1 LSB from it, its unoptimized run with every
    activation's Q/DQ tensor as an output too (built on first need; see the module docstring).
    ``origins`` names the piece that computes each tensor the placed run passes on."""

    def __init__(self, project: Path, model: onnx.ModelProto, names: list[str], origins: dict[str, str]) -> None:
        self.project, self.model = project, model
        self.scales = output_scales(model)
        self.worst = {name: [0.0, 0.0, 0.0] for name in names}  # float, outside both runs (LSB), optimized (LSB)
        self.produced: dict[str, list[np.ndarray]] = {name: [] for name in names}
        self.origins = origins
        self.steps = _activation_steps(model)
        self.first_difference = ""
        self._failed = False  # whether first_difference is from a sample off both runs
        self._unoptimized = None
        self._optimized = None

    def add(self, sample: int, feed: dict, values: dict,
            inner: dict[str, list[np.ndarray]] | None = None) -> dict[str, np.ndarray] | None:
        """Compare one sample's outputs (``values``, the placed run's tensors) with onnxruntime's;
        ``inner``: the cores' layer outputs (stream order, one array per run of the core), which
        the pointer reads too. Returns onnxruntime's unoptimized run of a sample that lies more
        than 1 LSB outside the band of the two runs (else None). Cost: one optimized run of the
        model; one unoptimized run too when it is more than 1 LSB off."""
        expected = self.expected(feed)
        self.keep(values, expected)
        optimized = {}
        for name, bounds in self.worst.items():
            got, want = values[name].astype(np.float64), expected[name].astype(np.float64)
            bounds[0] = max(bounds[0], float(np.max(np.abs(got - want), initial=0.0)))
            if name in self.scales:
                optimized[name] = lsb_difference(got, want, self.scales[name])
        nearest, off = dict(optimized), None
        if any(lsb > 1 for lsb in optimized.values()):
            reference = self.unoptimized(feed)
            nearest = {name: lsb_outside(values[name], expected[name], reference[name], self.scales[name])
                       for name in optimized}
            failed = any(lsb > 1 for lsb in nearest.values())
            off = reference if failed else None
            if not self.first_difference or (failed and not self._failed):
                self.first_difference = self._pointer(sample, {**_model_layout(inner or {}, reference), **values},
                                                      reference, expected)
                self._failed = failed
        for name, lsb in optimized.items():
            self.worst[name][1] = max(self.worst[name][1], nearest[name])
            self.worst[name][2] = max(self.worst[name][2], lsb)
        return off

    def keep(self, values: dict, expected: dict | None = None) -> None:
        """Keep one sample's outputs (``values``, the placed run's tensors) for ``values()``, each
        checked to be one of the model's (and of ``expected``'s shape when given)."""
        for name in self.worst:
            if name not in values or (expected is not None and (name not in expected or
                                                                 values[name].shape != expected[name].shape)):
                raise FpgaplaceError(f"{self.project}: the split's output '{name}' is not the model's (a damaged or "
                                     "swapped file); expected the split compile wrote")
            self.produced[name].append(values[name])

    def expected(self, feed: dict) -> dict[str, np.ndarray]:
        """onnxruntime's run of one sample of the whole model (optimized unless from QONNX), its
        session opened once."""
        if self._optimized is None:
            self._optimized = onnxrt.session(self.model.SerializeToString(), f"model '{self.model.graph.name}'",
                                             optimized=not is_from_qonnx(self.model))
        names = [o.name for o in self._optimized.get_outputs()]
        return dict(zip(names, self._optimized.run(names, feed), strict=True))

    def outputs(self) -> list[OutputCheck]:
        return [OutputCheck(name, diff, lsb if name in self.scales else None,
                            optimized if name in self.scales else None)
                for name, (diff, lsb, optimized) in self.worst.items()]

    def values(self) -> dict[str, np.ndarray]:
        """Each output over all samples."""
        return {name: np.concatenate(arrays) for name, arrays in self.produced.items()}

    def unoptimized(self, feed: dict) -> dict[str, np.ndarray]:
        """onnxruntime's unoptimized run of one sample, every activation's Q and DQ output too."""
        if self._unoptimized is None:
            probe = onnxrt.with_outputs(self.model, self.steps)
            self._unoptimized = (onnxrt.session(probe.SerializeToString(), f"model '{self.model.graph.name}'",
                                                optimized=False), [o.name for o in probe.graph.output])
        session, names = self._unoptimized
        return dict(zip(names, session.run(names, feed), strict=True))

    def _pointer(self, sample: int, values: dict, reference: dict, expected: dict) -> str:
        """One line: the first activation (in the model's order) whose placed value differs from the
        unoptimized run, the piece that computed it, and how far onnxruntime's two runs are apart."""
        spread = max((lsb_difference(expected[n], reference[n], scale) for n, scale in self.scales.items()
                      if n in expected and n in reference), default=0.0)
        apart = f"onnxruntime's optimized run is {spread:g} LSB from its unoptimized one"
        for tensor, step in self.steps.items():
            if tensor not in values or tensor not in reference or values[tensor].size != reference[tensor].size:
                continue
            got, want = (np.asarray(v, np.float64).reshape(-1) for v in (values[tensor], reference[tensor]))
            off = np.rint(np.abs(got - want) / step) if step else np.abs(got - want)
            if np.any(off > 0):
                return (f"sample {sample}: the first tensor off onnxruntime's unoptimized run is '{tensor}' from "
                        f"{self.origins.get(tensor, 'the placed run')} ({np.count_nonzero(off)} of {off.size} values, "
                        f"up to {off.max():g} LSB); {apart}")
        return f"sample {sample}: every int8 tensor equals onnxruntime's unoptimized run; {apart}"


def _model_layout(inner: dict[str, list[np.ndarray]], reference: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The cores' layer outputs in the model's layout (a 4-D tensor's runs, channels last, back to
    NCHW), for those onnxruntime's run has with as many elements. O(elements)."""
    laid = {}
    for name, runs in inner.items():
        want = reference.get(name)
        if want is None or sum(r.size for r in runs) != want.size:
            continue
        if want.ndim == 4:
            _, c, h, w = want.shape
            runs = [r.reshape(-1, h, w, c).transpose(0, 3, 1, 2) for r in runs]
        laid[name] = np.concatenate([r.reshape(-1) for r in runs]).reshape(want.shape)
    return laid


def _activation_steps(model: onnx.ModelProto) -> dict[str, float]:
    """Every activation's QuantizeLinear output (step 0: compared as integers) and DequantizeLinear
    output (its per-tensor scale), in the model's node order; weights' DequantizeLinear are left out."""
    constants = {t.name: t for t in model.graph.initializer}
    steps = {}
    for node in model.graph.node:
        if node.op_type == "QuantizeLinear":
            steps[node.output[0]] = 0.0
        elif node.op_type == "DequantizeLinear" and node.input[0] not in constants and node.input[1] in constants:
            scale = onnx.numpy_helper.to_array(constants[node.input[1]])
            if scale.size == 1:
                steps[node.output[0]] = float(scale.reshape(-1)[0])
    return steps


def piece_origins(manifest: Manifest, cores: list[Core]) -> dict[str, str]:
    """The piece that computes each tensor the placed run passes on: 'piece P on D' for the
    split's outputs, the core for a core's int8 outputs."""
    origins = {t: f"piece {sub.name} on {sub.device}" for sub in manifest.submodels for t in sub.outputs}
    for record in cores:
        for tensor in record.outputs:
            origins.setdefault(tensor.name, f"core {record.name}")
            for view in tensor.views:
                origins.setdefault(view.name, f"core {record.name}")
        for layer in record.layers:
            origins.setdefault(layer.output, f"core {record.name} (layer {layer.op}, {layer.kernel})")
    return origins


def _load_model(path: Path) -> onnx.ModelProto:
    try:
        return onnx.load(str(path))
    except FileNotFoundError:
        raise FpgaplaceError(f"{path}: missing; expected the project's QDQ model (compile writes it)") from None
    except Exception as error:  # noqa: BLE001 - protobuf raises several unrelated types
        raise FpgaplaceError(f"{path}: not an ONNX model ({first_line(error)})") from None


def _run_pieces(project: Path, manifest: Manifest, cores: dict[str, _Core], sessions: dict, values: dict) -> dict:
    """One sample through the pieces in manifest order (cores in C, the rest in onnxruntime);
    returns each core's runs. Pieces that do not fit design.json (a damaged or swapped file) are a
    one-line error naming the piece."""
    runs = {}
    for sub in manifest.submodels:
        try:
            if sub.device in cores:
                runs[sub.device] = _run_core(cores[sub.device], values)
            else:
                results = sessions[sub.name].run(sub.outputs, {t: values[t] for t in sub.inputs})
                values.update(zip(sub.outputs, results, strict=True))
        except FpgaplaceError:
            raise
        except Exception as error:  # noqa: BLE001 - numpy and onnxruntime raise several unrelated types
            raise FpgaplaceError(f"{project}: piece {sub.name} on {sub.device} does not run on what design.json and "
                                 f"the split describe ({first_line(error)})") from None
    return runs


def _save_result(project: Path, result: CsimResult) -> None:
    """``results/csim.json`` in the project, for the report (written whole, then renamed)."""
    folder = project / RESULTS_DIR
    folder.mkdir(exist_ok=True)
    write_file(folder / CSIM_RESULTS, json.dumps(result.to_json(), indent=2) + "\n")


def lsb_outside(got: np.ndarray, one: np.ndarray, other: np.ndarray, scale: float) -> float:
    """Largest distance, in quantization steps, of ``got`` outside the band between two runs
    ``one`` and ``other``, element by element (0 where it lies between them or equals either).
    At most ``lsb_difference`` to either run. O(size)."""
    steps = np.rint(got / scale)
    a, b = np.rint(one / scale), np.rint(other / scale)
    outside = np.maximum(np.minimum(a, b) - steps, steps - np.maximum(a, b))
    return float(np.max(np.maximum(outside, 0.0), initial=0.0))


def lsb_difference(got: np.ndarray, want: np.ndarray, scale: float) -> float:
    """Largest difference of two dequantized int8 tensors in quantization steps.

    Both hold ``(q - zero_point) * scale`` rounded to float32, so dividing by the scale and
    rounding recovers ``q - zero_point`` exactly (|q - zero_point| <= 255 keeps the float32
    error far below half a step); the difference of those integers is the exact step count, where
    the float difference over the scale is off by float noise (1.0000003 for one step).
    """
    return float(np.max(np.abs(np.rint(got / scale) - np.rint(want / scale)), initial=0.0))


def _run_core(core: _Core, values: dict) -> list[tuple[list[np.ndarray], list[np.ndarray]]]:
    """Run the core in C on every sample of the batch; store its outputs (and their float views)
    in ``values``; return each sample's (inputs, outputs) for the reference check."""
    record = core.record
    batch_inputs = [_to_stream(q, t) for q, t in zip(_core_inputs(record, values), record.inputs, strict=True)]
    runs = [(list(sample_inputs), core.run(list(sample_inputs))) for sample_inputs in zip(*batch_inputs, strict=True)]
    for i, t in enumerate(record.outputs):
        q = _from_stream([got[i] for _, got in runs], t)
        values[t.name] = q
        for view in t.views:
            values[view.name] = dequantize(q, t.scale, t.zero_point).reshape(view.shape)
    return runs


def _check_core(core: _Core, check: CoreCheck, runs: list[tuple[list[np.ndarray], list[np.ndarray]]],
                inner: dict[str, list[np.ndarray]]) -> None:
    """Compare the C outputs with the integer reference on the same inputs, element by element;
    append each run's layer outputs (the reference's) to ``inner``."""
    for inputs, got in runs:
        layers: dict[str, np.ndarray] = {}
        for i, (g, w) in enumerate(zip(got, core.reference(inputs, layers), strict=True)):
            bad = np.flatnonzero(g != w)
            if bad.size:
                check.bit_exact = False
                check.mismatches += int(bad.size)
                check.first_mismatch = check.first_mismatch or (
                    f"{core.record.outputs[i].name}[{bad[0]}]: C {g[bad[0]]}, reference {w[bad[0]]}")
        for name, value in layers.items():
            inner.setdefault(name, []).append(value)


def _count_ticks(core: _Core, check: CoreCheck, runs: int) -> None:
    """Add the stages' loop iterations of the last ``runs`` samples to the check."""
    ticks = core.ticks().tolist()
    if len(check.stage_ticks) < len(ticks):
        check.stage_ticks += [0] * (len(ticks) - len(check.stage_ticks))
    check.stage_ticks = [a + b for a, b in zip(check.stage_ticks, ticks + [0] * (len(check.stage_ticks) - len(ticks)),
                                               strict=True)]
    check.runs += runs


def _sample_feeds(model: onnx.ModelProto, inputs: np.ndarray | None, samples: int, seed: int) -> list[dict]:
    """One feed per sample: the given samples of the model's one input (each without the batch
    axis of 1), or seeded random inputs."""
    if inputs is None:
        return [random_inputs(model, seed + i) for i in range(samples)]
    initializers = {t.name for t in model.graph.initializer}
    graph_inputs = [i for i in model.graph.input if i.name not in initializers]
    if len(graph_inputs) != 1:
        raise FpgaplaceError(f"inputs: the model has {len(graph_inputs)} inputs; given samples feed exactly one")
    info = graph_inputs[0]
    shape = [d.dim_value for d in info.type.tensor_type.shape.dim]
    if not shape or shape[0] != 1 or list(inputs.shape[1:]) != shape[1:]:
        expected = ", ".join(map(str, shape[1:]))
        raise FpgaplaceError(f"inputs: samples of shape {list(inputs.shape)}; expected (N, {expected}) for input "
                             f"'{info.name}' of shape {shape}")
    dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(info.type.tensor_type.elem_type))
    return [{info.name: sample[None].astype(dtype)} for sample in inputs]
