"""Rendering: a lowered core -> its HLS C++ top, weight headers, C-simulation entry, run_hls.tcl.

The C++ lives in templates (``hls_templates/hls``) and in the kernel headers; this module only
plans what the templates need: one *step* per stage (its config struct, streams in and out,
weight arrays) in dataflow order, the forks that copy a stream read by several stages, and the
stream widths. Each stage reads and writes beats of the widths its folding implies
(``layer_widths``); where a tensor's producer and a reader differ, a ``regroup`` stage converts.
A tensor read by k readers gets k - 1 two-way forks. O(layers + weight elements).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fpgaplace.codegen.lower import CoreDesign, layer_widths, numel, per_sample_shape
from fpgaplace.hw import KERNELS, threshold
from fpgaplace.hw.buffers import PLAIN_BEATS, fifo_beats, fifo_storage
from fpgaplace.hw.concat import constant_parts
from fpgaplace.hw.dense import lane_thresholds
from fpgaplace.hw.kernel import divisors
from fpgaplace.hw.lowering import Layer
from fpgaplace.hw.reference import fold_weights
from fpgaplace.project.layout import WEIGHTS_FILE
from fpgaplace.util.templates import environment, template_dir

MAX_PORT_WIDTH = 64  # int8 elements per beat at the core's boundary (a 512-bit AXI-Stream)


def include_dir() -> Path:
    """The kernel headers every project copies (``include/fpgaplace``)."""
    return template_dir() / "hls" / "include"


def identifier(name: str) -> str:
    """A C identifier made from a tensor or op name."""
    ident = re.sub(r"\W", "_", name)
    return ident if ident and not ident[0].isdigit() else f"t_{ident}"


@dataclass
class Step:
    kernel: str
    template: str
    cfg: str
    config: dict[str, int]
    ins: list[str]
    out: str = ""
    outs: list[str] = field(default_factory=list)
    w: str = ""  # the on-chip weight array; "" when the weights are read from wmem
    w_offset: int = 0  # where the weights start in wmem when they are streamed
    prefix: str = ""
    rows: int = 1
    op: str = ""  # the layer it computes ("" for forks, converters and constants)


@dataclass
class Port:
    name: str  # the int8 tensor
    port: str
    size: int  # elements per sample
    width: int = 1  # elements per beat


@dataclass
class CorePlan:
    top: str
    inputs: list[Port]
    outputs: list[Port]
    steps: list[Step]
    streams: list[dict]  # name, width
    arrays: list[dict]
    partitions: list[dict]
    streamed: int  # bytes of weights read over m_axi
    wmem: np.ndarray
    buffers: dict[str, list[int]] = field(default_factory=dict)  # hw.buffers.reader_buffers


class _Streams:
    """Names and widths of the streams between stages, and the forks and converters that feed
    a tensor's readers."""

    def __init__(self, uram: bool = False) -> None:
        self.width: dict[str, int] = {}
        self.depth: dict[str, int] = {}  # a packed URAM FIFO's words (hw.buffers.fifo_storage)
        self.uram = uram  # the core's deep FIFOs are packed into URAM
        self.packed: set[str] = set()  # readers' streams behind a packed FIFO (two beats themselves)
        self.forks = 0
        self.converters = 0

    def new(self, base: str, width: int) -> str:
        name = f"s{len(self.width)}_{identifier(base)}"[:60]
        self.width[name] = width
        return name

    def feed(self, targets: list[str], size: int, width: int, base: str, held: list[int] | None = None
             ) -> tuple[str, list[Step]]:
        """The stream a tensor's producer writes (beats of ``width``) and the steps that copy it
        into every reader's stream: a regroup before each reader of another width, and forks
        between them. A single reader of the producer's width reads its stream directly. A reader
        whose FIFO (``held`` elements, by reader) is packed into URAM (``hw.buffers.fifo_storage``)
        reads it through a regroup to the packed words, the packed stream and a regroup back."""
        direct, converters = [], []
        for target, elements in zip(targets, held or [0] * len(targets), strict=True):
            storage = fifo_storage(elements, width, size, self.uram)
            if storage.uram:
                staging = self.new(f"pack_{base}", width)
                packed = self.new(f"uram_{base}", storage.pack)
                self.depth[packed] = storage.words
                self.packed.add(target)
                converters += [self._regroup(size, staging, packed), self._regroup(size, packed, target)]
                direct.append(staging)
            elif self.width[target] == width:
                direct.append(target)
            else:
                staging = self.new(f"to{self.width[target]}_{base}", width)
                converters.append(self._regroup(size, staging, target))
                direct.append(staging)
        if len(direct) == 1:
            return direct[0], converters
        source = self.new(base, width)
        return source, self._fan_out(source, direct, size, width) + converters

    def _regroup(self, size: int, source: str, target: str) -> Step:
        self.converters += 1
        return Step("regroup", "hls/ops/regroup.j2", f"regroup{self.converters}_cfg",
                    {"SIZE": size, "A": self.width[source], "B": self.width[target]}, [source], out=target)

    def _fan_out(self, source: str, targets: list[str], size: int, width: int) -> list[Step]:
        steps = []
        current = source
        for i, target in enumerate(targets[:-1]):
            rest = targets[-1] if i == len(targets) - 2 else self.new(f"fork{self.forks}", width)
            self.forks += 1
            steps.append(Step("fork", "hls/ops/fork.j2", f"fork{self.forks}_cfg", {"SIZE": size, "L": width},
                              [current], outs=[target, rest]))
            current = rest
        return steps


def port_width(size: int, preferred: int) -> int:
    """The beat of a boundary stream: ``preferred`` when it fits an AXI-Stream port, else the
    widest width that does and divides the tensor."""
    if preferred <= MAX_PORT_WIDTH:
        return preferred
    return max(d for d in divisors(size) if d <= MAX_PORT_WIDTH)


def _layer_config(layer: Layer) -> dict[str, int]:
    """The stage's config members (the kernel's ``hls_config``)."""
    return KERNELS[layer.kernel].hls_config(layer.config, layer.geometry, layer.folding)


def _concat_constants(layer: Layer, index: int, ins: list[str], streams: _Streams,
                      arrays: list) -> tuple[list[Step], list[str]]:
    """The constant stages of a concat's constant inputs (a class token: ``fp::broadcast`` of one
    sample's values, ``hw.concat.constant_parts``) and the concat's input streams with theirs in place."""
    parts = constant_parts(layer.arrays, layer.config["PIXELS"])
    steps, streamed, full = [], iter(ins), []
    for j in range(len(layer.arrays["channels"])):
        if j not in parts:
            full.append(next(streamed))
            continue
        full.append(streams.new(f"const{index}_{j}", layer.folding.pe))
        size = int(parts[j].size)
        steps.append(Step("broadcast", "hls/ops/broadcast.j2", f"l{index}_c{j}_b_cfg",
                          {"SIZE": size, "C": size, "L": layer.folding.pe}, [], out=full[-1], prefix=f"l{index}_c{j}"))
        arrays.append(_array(f"l{index}_c{j}_b", "int8_t", parts[j]))
    return steps, full


def _concat_steps(layer: Layer, index: int, ins: list[str], out: str, streams: _Streams) -> list[Step]:
    """A concat of n inputs as n - 1 chained two-input concats (``Concat.hls_part_configs``)."""
    kernel = KERNELS["concat"]
    steps = []
    left = ins[0]
    parts = kernel.hls_part_configs(layer.config, layer.arrays, layer.folding)  # type: ignore[attr-defined]
    for j, config in enumerate(parts, start=1):
        target = out if j == len(ins) - 1 else streams.new(f"concat{index}_{j}", layer.folding.pe)
        steps.append(Step("concat", kernel.template, f"l{index}_{j}_cfg", config, [left, ins[j]], out=target,
                          op=layer.op))
        left = target
    return steps


def plan_core(design: CoreDesign) -> CorePlan:
    """Steps, streams, ports and arrays of one core (see the module docstring)."""
    top = identifier(f"{design.name}_top")
    streams = _Streams(design.fifo_uram)
    readers: dict[str, list[str]] = {}  # tensor -> stream of each reader, in reader order
    layer_inputs: list[list[str]] = []
    for layer in design.layers:
        widths, _ = layer_widths(layer)
        slots = [streams.new(tensor, width) for tensor, width in zip(layer.inputs, widths, strict=True)]
        for tensor, slot in zip(layer.inputs, slots, strict=True):
            readers.setdefault(tensor, []).append(slot)
        layer_inputs.append(slots)
    produced = {layer.output: layer_widths(layer)[1] for layer in design.layers}
    buffers = design.buffers
    outputs = []
    for i, t in enumerate(design.outputs):
        size = numel(per_sample_shape(t, design.batch))
        source = design.aliases.get(t.name, t.name)
        port = Port(t.name, f"out{i}_{identifier(t.name)}"[:48], size, port_width(size, produced[source]))
        streams.width[port.port] = port.width
        readers.setdefault(source, []).append(port.port)
        outputs.append(port)
    inputs, steps = [], []
    for i, t in enumerate(design.inputs):
        size = numel(per_sample_shape(t, design.batch))
        targets = readers.get(t.name, [])
        port = Port(t.name, f"in{i}_{identifier(t.name)}"[:48], size,
                    port_width(size, streams.width[targets[0]] if targets else 1))
        stream, feeding = streams.feed(targets, size, port.width, port.port, buffers.get(t.name))
        _rename(stream, port.port, layer_inputs, feeding)  # the port is the producer's stream
        streams.width[port.port] = port.width
        inputs.append(port)
        steps += feeding
    arrays, partitions, wmem_parts, offset = [], [], [], 0
    for i, (layer, ins) in enumerate(zip(design.layers, layer_inputs, strict=True)):
        size = KERNELS[layer.kernel].output_size(layer.config, layer.arrays, layer.rows)
        out, feeding = streams.feed(readers.get(layer.output, []), size, produced[layer.output], layer.output,
                                    buffers.get(layer.output))
        if layer.kernel == "concat":
            constants, ins = _concat_constants(layer, i, ins, streams, arrays)
            steps += constants + _concat_steps(layer, i, ins, out, streams)
        elif layer.kernel == "add" and "b" in layer.arrays:  # a constant operand, streamed per pixel
            constant = streams.new(f"const{i}", layer_widths(layer)[1])
            steps.append(Step("broadcast", "hls/ops/broadcast.j2", f"l{i}_b_cfg",
                              {"SIZE": size, "C": int(layer.arrays["b"].size), "L": streams.width[constant]}, [],
                              out=constant, prefix=f"l{i}"))
            arrays.append(_array(f"l{i}_b", "int8_t", layer.arrays["b"]))
            steps.append(Step("add", KERNELS["add"].template, f"l{i}_cfg", _layer_config(layer), [*ins, constant],
                              out=out, prefix=f"l{i}", op=layer.op))
        else:
            step = Step(layer.kernel, KERNELS[layer.kernel].template, f"l{i}_cfg", _layer_config(layer), ins, out=out,
                        prefix=f"l{i}", rows=layer.rows, op=layer.op)
            if KERNELS[layer.kernel].uses_dsp and "w" in layer.arrays:  # a weight matrix (not matmul's operands)
                step.w, step.w_offset, offset, members = _weights(layer, step.prefix, arrays, partitions, wmem_parts,
                                                                  offset)
                if stored_weight_bits(layer) < 8:
                    step.config["WB"] = stored_weight_bits(layer)
                step.config.update(members)
            else:  # a lane stage's constant arrays (a table's 256 values, a shuffle's permutation, an average
                # pool's rescale per count)
                arrays += [_array(f"{step.prefix}_{name}", C_TYPES[np.asarray(values).dtype.name], values)
                           for name, values in layer.arrays.items()]
            steps.append(step)
        steps += feeding
    for stage, step in enumerate(steps):
        step.config["STAGE"] = stage
    wmem = np.concatenate(wmem_parts) if wmem_parts else np.zeros(0, dtype=np.int8)
    ports = {p.port for p in [*inputs, *outputs]}
    depths = {slot: fifo_beats(held, streams.width[slot]) for tensor, slots in readers.items()
              for slot, held in zip(slots, buffers[tensor], strict=True) if slot not in streams.packed}
    depths |= streams.depth
    used = [{"name": name, "width": streams.width[name], "depth": depths.get(name, PLAIN_BEATS),
             "impl": "uram" if name in streams.depth else ""}
            for name in _used_streams(steps) if name not in ports]
    return CorePlan(top, inputs, outputs, steps, used, arrays, partitions, int(wmem.size), wmem, buffers)


def _used_streams(steps: list[Step]) -> list[str]:
    """Every stream the steps read or write, in first-use order."""
    return list(dict.fromkeys(name for step in steps for name in [*step.ins, step.out, *step.outs] if name))


def _rename(stream: str, port: str, layer_inputs: list[list[str]], steps: list[Step]) -> None:
    """Make readers of ``stream`` (a layer's input slot or a converter's input) read ``port``."""
    for slots in layer_inputs:
        slots[:] = [port if slot == stream else slot for slot in slots]
    for step in steps:
        step.ins = [port if name == stream else name for name in step.ins]
        step.outs = [port if name == stream else name for name in step.outs]


def _weights(layer: Layer, prefix: str, arrays: list, partitions: list, wmem_parts: list,
             offset: int) -> tuple[str, int, int, dict[str, int]]:
    """Register a dot-product layer's arrays; returns the name of its on-chip weight array (""
    when streamed), its offset in wmem, the next free offset there and its threshold stage's C++
    members (``_thresholds``; none without one)."""
    channel = {name: layer.arrays[name] for name in ("bias", "mult", "shift")}
    members = _thresholds(layer, prefix, arrays, channel) if "thresholds" in layer.arrays else {}
    for name, ctype in (("bias", "int32_t"), ("mult", "int32_t"), ("shift", "int8_t")):
        arrays.append(_array(f"{prefix}_{name}", ctype, channel[name]))
        partitions.append({"name": f"{prefix}_{name}", "factor": layer.folding.pe, "impl": ""})
    bits = stored_weight_bits(layer)
    w = packed_weights(fold_weights(layer.arrays["w"], layer.folding.pe, layer.folding.simd), bits)
    if layer.resident:
        arrays.append(_array(f"{prefix}_w", "int8_t", w))
        partitions.append({"name": f"{prefix}_w", "factor": max(1, layer.folding.pe * layer.folding.simd * bits // 8),
                           "impl": "uram" if layer.folding.uram else ""})
        return f"{prefix}_w", 0, offset, members
    wmem_parts.append(w)
    return "", offset, offset + w.size, members


def _thresholds(layer: Layer, prefix: str, arrays: list, channel: dict[str, np.ndarray]) -> dict[str, int]:
    """Register a threshold output stage's table (``fpgaplace.hw.threshold``, one word a fold) and
    set ``channel["bias"]`` to the bias less each channel's offset (``dense.lane_thresholds``);
    returns the stage's C++ members (``fp::OutputStage``): ``TH_W`` bits a threshold, ``TH_PE``
    channels, ``TH_BYTES`` bytes a word (``threshold.table_bytes``) and ``STEP`` between the codes it
    writes (``threshold.code_step``). O(weights + C*T)."""
    stored, offsets, dot = lane_thresholds(layer.config, layer.arrays,
                                           KERNELS[layer.kernel].width_members(layer.widths, layer.arrays))
    channel["bias"] = (np.asarray(layer.arrays["bias"], np.int64) - offsets).astype(np.int32)
    arrays.append(_array(f"{prefix}_thresholds", "uint8_t", threshold.table_bytes(stored, dot, layer.folding.pe)))
    return {"TH_W": threshold.stored_bits(dot), "TH_PE": layer.folding.pe,
            "TH_BYTES": threshold.word_bits(layer.folding.pe, int(stored.shape[1]), dot) // 8,
            "STEP": threshold.code_step(layer.config)}


def stored_weight_bits(layer: Layer) -> int:
    """Bits a dot-product layer's weights are kept at in C++, on chip or streamed from wmem: its
    lane width (``Kernel.width_members``' ``WB``: a low-bit dense or conv layer's, what the folding
    prices its weight memory and its streamed bytes at, ``Kernel.weight_bytes``), else 8. O(weights)."""
    return KERNELS[layer.kernel].width_members(layer.widths, layer.arrays).get("WB", 8)


def packed_weights(w: np.ndarray, bits: int) -> np.ndarray:
    """``w`` (int8 values of ``bits`` bits) as the bytes C++'s ``fp::detail::weight<bits>`` reads:
    itself at 8 bits, else ``8 / bits`` weights a byte, the first in the lowest bits, two's
    complement codes (+-1 as 1 / 0 at one bit), the last byte padded with zeros. O(w)."""
    flat = np.asarray(w).reshape(-1).astype(np.int64)
    if bits == 8:
        return flat.astype(np.int8)
    codes = (flat > 0).astype(np.int64) if bits == 1 else flat & ((1 << bits) - 1)
    per = 8 // bits
    codes = np.pad(codes, (0, -codes.size % per)).reshape(-1, per)
    return (codes << (bits * np.arange(per))).sum(axis=1).astype(np.uint8).view(np.int8)


# "-128," ... " 127,": every int8 as a C literal of five characters (leading blanks are fine in C)
_INT8_LITERALS = np.array([f"{v:>4},".encode() for v in range(-128, 128)], dtype="S5")


def c_literals(values: np.ndarray) -> str:
    """The comma-separated C initializer of ``values``; int8 arrays (the weights, millions of
    them for ResNet-50) through a table of fixed-width literals, O(n) in numpy."""
    flat = np.asarray(values).reshape(-1)
    if flat.dtype == np.int8:
        return _INT8_LITERALS[flat.astype(np.int16) + 128].tobytes().decode().rstrip(",")
    return ",".join(map(str, flat.tolist()))


# numpy dtype -> the C type of a constant array
C_TYPES = {"int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t"}


def _array(name: str, ctype: str, values: np.ndarray) -> dict:
    flat = np.asarray(values).reshape(-1)
    return {"name": name, "ctype": ctype, "size": max(1, flat.size), "data": c_literals(flat)}


def render_core(design: CoreDesign, plan: CorePlan, folder: Path, context: dict) -> list[Path]:
    """Write the core's files into ``folder``; returns the paths of the text files (the streamed
    weights, if any, go to ``WEIGHTS_FILE`` as raw bytes, low-bit ones packed (``packed_weights``):
    no C initializer of them is written, the C entry takes the file itself)."""
    env = environment()
    common = {**context, "top": plan.top, "inputs": plan.inputs, "outputs": plan.outputs,
              "streamed": plan.streamed}
    written = {
        f"{plan.top}.cpp": env.get_template("hls/core_top.cpp.j2").render(
            **common, core=design, steps=plan.steps, streams=plan.streams, partitions=plan.partitions),
        "weights.h": env.get_template("hls/weights.h.j2").render(core=design.name, arrays=plan.arrays),
        "csim_entry.cpp": env.get_template("hls/csim_entry.cpp.j2").render(**common, core=design.name,
                                                                            stages=len(plan.steps)),
        "run_hls.tcl": env.get_template("project/run_hls.tcl.j2").render(
            **common, core=design.name, clock_mhz=design.core.clock_mhz,
            period_ns=f"{1e3 / design.core.clock_mhz:.3f}"),
    }
    if plan.streamed:  # the C entry embeds weights.bin (fpgaplace csim) or reads it at run time (Vitis HLS)
        (folder / WEIGHTS_FILE).write_bytes(plan.wmem.astype(np.int8).tobytes())
    paths = []
    for name, text in written.items():
        (folder / name).write_text(text)
        paths.append(folder / name)
    return paths
