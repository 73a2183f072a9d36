"""Rendering: a lowered core -> its HLS C++ top, weight headers, C-simulation entry, run_hls.tcl.

The C++ lives in templates (``hls_templates/hls``) and in the kernel headers; this module only
plans what the templates need: one *step* per stage (its config struct, streams in and out,
weight arrays) in dataflow order, and the forks that copy a stream read by several stages.
A tensor read by k readers gets k - 1 two-way forks. O(layers + weight elements).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path

import jinja2
import numpy as np

from fpgaplace.codegen.lower import IDENTITY, CoreDesign, Layer, numel, per_sample_shape
from fpgaplace.hw.reference import fold_weights

TEMPLATE_PACKAGE = "fpgaplace.hls_templates"
POOL_KERNELS = ("maxpool", "avgpool", "globalavgpool")


def environment() -> jinja2.Environment:
    """The Jinja2 environment over the shipped templates (undefined names are errors)."""
    loader = jinja2.FileSystemLoader(str(files(TEMPLATE_PACKAGE)))
    return jinja2.Environment(loader=loader, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)


def include_dir() -> Path:
    """The kernel headers every project copies (``include/fpgaplace``)."""
    return Path(str(files(TEMPLATE_PACKAGE))) / "hls" / "include"


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


@dataclass
class Port:
    name: str  # the int8 tensor
    port: str
    size: int  # elements per sample


@dataclass
class CorePlan:
    top: str
    inputs: list[Port]
    outputs: list[Port]
    steps: list[Step]
    streams: list[str]
    arrays: list[dict]
    partitions: list[dict]
    streamed: int  # bytes of weights read over m_axi
    wmem: np.ndarray


class _Streams:
    """Names of the streams a tensor's readers read, and the forks that feed them."""

    def __init__(self) -> None:
        self.internal: list[str] = []
        self.forks = 0

    def new(self, base: str) -> str:
        name = f"s{len(self.internal)}_{identifier(base)}"[:60]
        self.internal.append(name)
        return name

    def fan_out(self, source: str, targets: list[str], size: int) -> list[Step]:
        """Forks copying ``source`` into every target stream (none when there is one target)."""
        steps = []
        current = source
        for i, target in enumerate(targets[:-1]):
            rest = targets[-1] if i == len(targets) - 2 else self.new(f"fork{self.forks}")
            self.forks += 1
            steps.append(Step("fork", "hls/ops/fork.j2", f"fork{self.forks}_cfg", {"SIZE": size}, [current],
                              outs=[target, rest]))
            current = rest
        return steps


def _layer_config(layer: Layer) -> dict[str, int]:
    config = dict(layer.config)
    if layer.kernel in ("conv2d", "dense"):
        config.update(PE=layer.folding.pe, SIMD=layer.folding.simd, MMV=layer.folding.mmv)
    return config


def _concat_steps(layer: Layer, index: int, ins: list[str], out: str, streams: _Streams) -> list[Step]:
    """A concat of n inputs as n - 1 chained two-input concats; the chain's partial results are
    already at the output scale (identity rescale)."""
    a = layer.arrays
    steps = []
    left, left_c, left_z, left_m, left_s = ins[0], int(a["channels"][0]), int(a["zero_points"][0]), int(
        a["mult"][0]), int(a["shift"][0])
    for j in range(1, len(ins)):
        target = out if j == len(ins) - 1 else streams.new(f"concat{index}_{j}")
        config = {"PIXELS": layer.config["PIXELS"], "C0": left_c, "C1": int(a["channels"][j]), "Z0": left_z,
                  "M0": left_m, "S0": left_s, "Z1": int(a["zero_points"][j]), "M1": int(a["mult"][j]),
                  "S1": int(a["shift"][j]), "ZY": layer.config["ZY"], "LO": layer.config["LO"],
                  "HI": layer.config["HI"]}
        steps.append(Step("concat", "hls/ops/concat.j2", f"l{index}_{j}_cfg", config, [left, ins[j]], out=target))
        left, left_c, left_z = target, left_c + int(a["channels"][j]), layer.config["ZY"]
        left_m, left_s = IDENTITY
    return steps


def plan_core(design: CoreDesign) -> CorePlan:
    """Steps, streams, ports and arrays of one core (see the module docstring)."""
    top = identifier(f"{design.name}_top")
    inputs = [Port(t.name, f"in{i}_{identifier(t.name)}"[:48], numel(per_sample_shape(t, design.batch)))
              for i, t in enumerate(design.inputs)]
    outputs = [Port(t.name, f"out{i}_{identifier(t.name)}"[:48], numel(per_sample_shape(t, design.batch)))
               for i, t in enumerate(design.outputs)]
    streams = _Streams()
    readers: dict[str, list[str]] = {}  # tensor -> stream of each reader, in reader order
    layer_inputs: list[list[str]] = []
    for layer in design.layers:
        slots = []
        for tensor in layer.inputs:
            slots.append(streams.new(tensor))
            readers.setdefault(tensor, []).append(slots[-1])
        layer_inputs.append(slots)
    for port in outputs:
        source = design.aliases.get(port.name, port.name)
        readers.setdefault(source, []).append(port.port)
    steps: list[Step] = []
    for port in inputs:
        targets = readers.get(port.name, [])
        steps += _connect(port.port, targets, port.size, streams, layer_inputs)
    arrays, partitions, wmem_parts, offset = [], [], [], 0
    for i, (layer, ins) in enumerate(zip(design.layers, layer_inputs, strict=True)):
        targets = readers.get(layer.output, [])
        size = _output_size(design, layer)
        out = targets[0] if len(targets) == 1 else streams.new(layer.output)
        if layer.kernel == "concat":
            steps += _concat_steps(layer, i, ins, out, streams)
        elif layer.kernel == "add" and "b" in layer.arrays:  # a constant operand, streamed per pixel
            constant = streams.new(f"const{i}")
            steps.append(Step("broadcast", "hls/ops/broadcast.j2", f"l{i}_b_cfg",
                              {"SIZE": size, "C": int(layer.arrays["b"].size)}, [], out=constant, prefix=f"l{i}"))
            arrays.append(_array(f"l{i}_b", "int8_t", layer.arrays["b"]))
            steps.append(Step("add", _template("add"), f"l{i}_cfg", _layer_config(layer), [*ins, constant], out=out,
                              prefix=f"l{i}"))
        else:
            step = Step(layer.kernel, _template(layer.kernel), f"l{i}_cfg", _layer_config(layer), ins, out=out,
                        prefix=f"l{i}", rows=layer.rows)
            if layer.kernel in ("conv2d", "dense"):
                step.w, step.w_offset, offset = _weights(layer, step.prefix, arrays, partitions, wmem_parts, offset)
            steps.append(step)
        if len(targets) > 1:
            steps += streams.fan_out(out, targets, size)
    wmem = np.concatenate(wmem_parts) if wmem_parts else np.zeros(0, dtype=np.int8)
    used = _used_streams(steps, [p.port for p in [*inputs, *outputs]])
    return CorePlan(top, inputs, outputs, steps, used, arrays, partitions, int(wmem.size), wmem)


def _used_streams(steps: list[Step], ports: list[str]) -> list[str]:
    """Internal streams the steps read or write (ports are the top's arguments)."""
    used = dict.fromkeys(name for step in steps for name in [*step.ins, step.out, *step.outs] if name)
    return [name for name in used if name not in ports]


def _connect(source: str, targets: list[str], size: int, streams: _Streams, layer_inputs: list[list[str]]):
    """Feed an input port to its readers: directly when it has one (the reader reads the port)."""
    if len(targets) == 1:
        for slots in layer_inputs:
            for j, slot in enumerate(slots):
                if slot == targets[0]:
                    slots[j] = source
        return []
    return streams.fan_out(source, targets, size)


def _template(kernel: str) -> str:
    return "hls/ops/pool.j2" if kernel in POOL_KERNELS else f"hls/ops/{kernel}.j2"


def _output_size(design: CoreDesign, layer: Layer) -> int:
    c = layer.config
    if layer.kernel == "conv2d":
        return c["HO"] * c["WO"] * c["COUT"]
    if layer.kernel == "dense":
        return layer.rows * c["N"]
    if layer.kernel in POOL_KERNELS:
        return c["HO"] * c["WO"] * c["C"]
    if layer.kernel == "concat":
        return c["PIXELS"] * int(layer.arrays["channels"].sum())
    return c["SIZE"]


def _weights(layer: Layer, prefix: str, arrays: list, partitions: list, wmem_parts: list,
             offset: int) -> tuple[str, int, int]:
    """Register a dot-product layer's arrays; returns the name of its on-chip weight array (""
    when streamed), its offset in wmem and the next free offset there."""
    for name, ctype in (("bias", "int32_t"), ("mult", "int32_t"), ("shift", "int8_t")):
        arrays.append(_array(f"{prefix}_{name}", ctype, layer.arrays[name]))
        partitions.append({"name": f"{prefix}_{name}", "factor": layer.folding.pe, "impl": ""})
    w = fold_weights(layer.arrays["w"], layer.folding.pe, layer.folding.simd)
    if layer.resident:
        arrays.append(_array(f"{prefix}_w", "int8_t", w))
        partitions.append({"name": f"{prefix}_w", "factor": layer.folding.pe * layer.folding.simd,
                           "impl": "uram" if layer.folding.uram else ""})
        return f"{prefix}_w", 0, offset
    wmem_parts.append(w.astype(np.int8))
    return "", offset, offset + w.size


# "-128," ... " 127,": every int8 as a C literal of five characters (leading blanks are fine in C)
_INT8_LITERALS = np.array([f"{v:>4},".encode() for v in range(-128, 128)], dtype="S5")


def c_literals(values: np.ndarray) -> str:
    """The comma-separated C initializer of ``values``; int8 arrays (the weights, millions of
    them for ResNet-50) through a table of fixed-width literals, O(n) in numpy."""
    flat = np.asarray(values).reshape(-1)
    if flat.dtype == np.int8:
        return _INT8_LITERALS[flat.astype(np.int16) + 128].tobytes().decode().rstrip(",")
    return ",".join(map(str, flat.tolist()))


def _array(name: str, ctype: str, values: np.ndarray) -> dict:
    flat = np.asarray(values).reshape(-1)
    return {"name": name, "ctype": ctype, "size": max(1, flat.size), "data": c_literals(flat)}


def render_core(design: CoreDesign, plan: CorePlan, folder: Path, context: dict) -> list[Path]:
    """Write the core's files into ``folder``; returns their paths."""
    env = environment()
    common = {**context, "top": plan.top, "inputs": plan.inputs, "outputs": plan.outputs,
              "streamed": plan.streamed}
    written = {
        f"{plan.top}.cpp": env.get_template("hls/core_top.cpp.j2").render(
            **common, core=design, steps=plan.steps, streams=plan.streams, partitions=plan.partitions),
        "weights.h": env.get_template("hls/weights.h.j2").render(core=design.name, arrays=plan.arrays),
        "csim_entry.cpp": env.get_template("hls/csim_entry.cpp.j2").render(**common, core=design.name),
        "run_hls.tcl": env.get_template("project/run_hls.tcl.j2").render(
            **common, core=design.name, clock_mhz=design.core.clock_mhz,
            period_ns=f"{1e3 / design.core.clock_mhz:.3f}"),
    }
    if plan.streamed:
        written["wmem.h"] = env.get_template("hls/wmem.h.j2").render(
            core=design.name, size=plan.streamed, values=c_literals(plan.wmem))
        (folder / "weights.bin").write_bytes(plan.wmem.astype(np.int8).tobytes())
    paths = []
    for name, text in written.items():
        (folder / name).write_text(text)
        paths.append(folder / name)
    return paths
