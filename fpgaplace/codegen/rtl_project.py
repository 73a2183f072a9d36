"""The project's RTL: per-core Verilog tops from design.json and their cocotb jobs.

``render_core(record, arrays, macs_per_dsp)`` renders each layer of a core with the RTL op
library (``fpgaplace.codegen.rtl.render_op``, the folding design.json records) and wires them into
one top (``hls_templates/rtl/core.v.j2``) as the HLS top does: a tensor read by several layers
is forked, each reader behind a FIFO as deep as ``hw.buffers`` says it waits, and streams of
different beat widths meet in a gearbox. ``write_rtl_project`` writes ``rtl/<core>/`` (Verilog,
ROMs) and ``sim/`` (a cocotb job per core, each layer's ports for checking it alone, and
``run_rtl.py``, which runs them with cocotb's runner on Icarus) into a project;
``fpgaplace.sim.rtl_project`` simulates what is written there.

Rendering is O(weights).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np

from fpgaplace.board.model import Board, FpgaCore
from fpgaplace.codegen import rtl
from fpgaplace.hw import KERNELS, Folding
from fpgaplace.hw.buffers import fifo_storage
from fpgaplace.hw.gearbox import Gearbox
from fpgaplace.hw.rtl_values import WEIGHTS_APART, index_bits
from fpgaplace.project.arrays import load_arrays, random_samples
from fpgaplace.project.board import project_board
from fpgaplace.project.layout import JOB_FILE, RTL_DIR, SIM_DIR, STAGES_FILE, cell_name
from fpgaplace.project.record import Core, DesignRecord, Layer
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.templates import environment

TESTBENCH_PACKAGE, RUNNER_SCRIPT = "fpgaplace.testbenches", "run_rtl.py"  # the repository's sim/; copied into sim/


@dataclass(frozen=True)
class CoreRtl:
    """A core's rendered top: files (its Verilog, the library and the layers' ROMs) and ports."""

    module: rtl.RtlModule
    inputs: tuple[rtl.Port, ...]
    outputs: tuple[rtl.Port, ...]
    layers: tuple[rtl.OpModule, ...] = ()  # each layer's module and ports, for checking it alone


@dataclass
class Netlist:
    """Streams, assignments and instances of a core top, built edge by edge."""

    streams: list[dict[str, Any]] = field(default_factory=list)
    assigns: list[tuple[str, str]] = field(default_factory=list)
    instances: list[dict[str, Any]] = field(default_factory=list)

    def stream(self, name: str, elems: int) -> tuple[str, int]:
        self.streams.append({"name": name, "elems": elems})
        return name, elems

    def instance(self, module: str, name: str, params: dict[str, Any], ports: dict[str, str]) -> None:
        self.instances.append({"module": module, "name": name, "params": params, "ports": ports})


def bundle(port: str, stream: str) -> dict[str, str]:
    """Port connections of an AXI-Stream ``port`` (``s_axis`` / ``m_axis``) to ``stream``."""
    return {f"{port}_tdata": f"{stream}_tdata", f"{port}_tvalid": f"{stream}_tvalid",
            f"{port}_tready": f"{stream}_tready"}


def add_fifo(net: Netlist, source: tuple[str, int], name: str, depth_bits: int, uram: bool = False
             ) -> tuple[str, int]:
    """A FIFO of ``2^depth_bits`` beats after ``source`` (``fp_fifo``; ``fp_fifo_uram``, its words
    in URAM, where ``uram``)."""
    out = net.stream(name, source[1])
    net.instance("fp_fifo_uram" if uram else "fp_fifo", f"{name}_fifo",
                 {"WIDTH": source[1] * 8, "DEPTH_BITS": depth_bits},
                 bundle("s_axis", source[0]) | bundle("m_axis", out[0]))
    return out


def add_gearbox(net: Netlist, source: tuple[str, int], name: str, elems: int) -> tuple[str, int]:
    """``source`` as beats of ``elems`` (itself when the widths agree)."""
    if source[1] == elems:
        return source
    out = net.stream(name, elems)
    gearbox = Gearbox(source[1], elems, source[1].bit_length(), full=True)
    net.instance("fp_gearbox", f"{name}_gearbox", gearbox.params(),
                 bundle("s_axis", source[0]) | {"s_axis_tcount": f"{gearbox.count_bits}'d{source[1]}"}
                 | bundle("m_axis", out[0]))
    return out


def add_branches(net: Netlist, source: tuple[str, int], name: str, count: int) -> list[tuple[str, int]]:
    """``count`` copies of ``source`` (fp_fork when more than one)."""
    if count == 1:
        return [source]
    branches = [net.stream(f"{name}_b{k}", source[1]) for k in range(count)]
    for branch, _ in branches:
        net.assigns.append((f"{branch}_tdata", f"{source[0]}_tdata"))
    valid = [f"{b}_tvalid" for b, _ in reversed(branches)]  # a list: the template concatenates it
    ready = [f"{b}_tready" for b, _ in reversed(branches)]
    net.instance("fp_fork", f"{name}_fork", {"WIDTH": source[1] * 8, "N": count},
                 {"s_axis_tdata": f"{source[0]}_tdata", "s_axis_tvalid": f"{source[0]}_tvalid",
                  "s_axis_tready": f"{source[0]}_tready", "m_axis_tdata": "", "m_axis_tvalid": valid,
                  "m_axis_tready": ready})
    return branches


def connect(net: Netlist, producers: dict[str, tuple[str, int]], consumers: dict[str, list[tuple[str, int]]],
            lengths: dict[str, int], buffers: dict[str, list[int]], where: str, uram: bool = False) -> None:
    """Join every tensor's producing stream to its readers' streams (``name``, elements a beat):
    forked when several read it, each branch through a FIFO of the elements ``buffers`` gives its
    reader (``hw.buffers.reader_buffers``, stored as ``hw.buffers.fifo_storage`` says: in its
    words rounded up to a power of two, packed through gearboxes where ``uram`` puts it in URAM;
    where the record has none, a whole sample of ``lengths[tensor]`` elements on a forked branch,
    else two beats) and a gearbox to the reader's beat. O(streams)."""
    for t, (tensor, readers) in enumerate(consumers.items()):
        if tensor not in producers:
            raise FpgaplaceError(f"{where}: tensor {tensor} is read but not produced")
        branches = add_branches(net, producers[tensor], f"t{t}", len(readers))
        held = buffers.get(tensor) or [lengths[tensor] if len(readers) > 1 else 0] * len(readers)
        if len(held) != len(readers):
            raise FpgaplaceError(f"{where}: buffers.{tensor} has {len(held)} readers' FIFOs, expected {len(readers)}")
        for b, ((reader, elems), branch) in enumerate(zip(readers, branches, strict=True)):
            storage = fifo_storage(held[b], producers[tensor][1], lengths[tensor], uram)
            packed = add_gearbox(net, branch, f"t{t}_r{b}_p", storage.pack)
            buffered = add_fifo(net, packed, f"t{t}_r{b}", index_bits(storage.words), storage.uram)
            fitted = add_gearbox(net, buffered, f"t{t}_r{b}_w", elems)
            net.assigns.extend([(f"{reader}_tdata", f"{fitted[0]}_tdata"), (f"{reader}_tvalid", f"{fitted[0]}_tvalid"),
                                (f"{fitted[0]}_tready", f"{reader}_tready")])


def layer_folding(layer: Layer) -> Folding:
    return Folding(layer.pe, layer.simd, layer.mmv, layer.uram)


def layer_config(layer: Layer, arrays: dict[str, np.ndarray]) -> dict:
    """The config a layer's RTL unit is rendered from: design.json's members, its rows, the
    members of its element widths (``Kernel.width_members`` of the record's ``widths``: a low-bit
    dense layer's lanes at its weights' and inputs' widths and signedness), and ``WEIGHTS_APART``
    where the design keeps the weights in DRAM (streamed) or URAM: the unit's weight ROM is then a
    module of its own, which synthesis counts apart (``sim.yosys.unpriced_counts``)."""
    widths = layer.widths.to_json() if layer.widths else None
    apart = {WEIGHTS_APART: 1} if layer.uram or not layer.resident else {}
    return layer.config | {"ROWS": layer.rows} | KERNELS[layer.kernel].width_members(widths, arrays) | apart


def render_layers(record: Core, arrays: list[dict[str, np.ndarray]], macs_per_dsp: int,
                  fpga_core: FpgaCore | None = None) -> list[rtl.OpModule]:
    """Every layer of a core through the RTL op library, named ``<core>_<index>_<kernel>``, built
    for ``fpga_core`` (the board's core of the record's name; ``rtl.render_op``)."""
    core = cell_name(record.name)
    return [rtl.render_op(layer.kernel, layer_config(layer, layer_arrays), layer_arrays,
                          layer_folding(layer), layer.cycles, f"{core}_{i}_{layer.kernel}", macs_per_dsp, fpga_core)
            for i, (layer, layer_arrays) in enumerate(zip(record.layers, arrays, strict=True))]


def probe_module(record: Core, index: int, arrays: dict[str, np.ndarray], macs_per_dsp: int,
                 fpga_core: FpgaCore | None = None) -> rtl.RtlModule | None:
    """The DSP probe of layer ``index`` of a core (``Kernel.probe_layer``: a smaller layer with its
    DSPs) rendered as ``<core>_<index>_<kernel>_probe``, or None where its kernel has none. O(PE weights)."""
    layer = record.layers[index]
    folding = layer_folding(layer)
    probe = KERNELS[layer.kernel].probe_layer(layer_config(layer, arrays), arrays, folding)
    if probe is None:
        return None
    top = f"{cell_name(record.name)}_{index}_{layer.kernel}_probe"
    return rtl.render_op(layer.kernel, probe[0], probe[1], folding, layer.cycles, top, macs_per_dsp, fpga_core).module


def render_core(record: Core, arrays: list[dict[str, np.ndarray]], macs_per_dsp: int = 1,
                fpga_core: FpgaCore | None = None) -> CoreRtl:
    """The RTL top ``<core>_rtl`` of a design.json core record built for ``fpga_core`` (None: the
    default budgets, ``hw.kernel.lane_choice``); O(weights)."""
    core = cell_name(record.name)
    ops = render_layers(record, arrays, macs_per_dsp, fpga_core)
    net = Netlist()
    producers: dict[str, tuple[str, int]] = {}
    consumers: dict[str, list[tuple[str, int]]] = {}
    for i, layer in enumerate(record.layers):
        producers[layer.output] = net.stream(f"l{i}_out", ops[i].output.elems)
        for j, tensor in enumerate(layer.inputs):
            consumers.setdefault(tensor, []).append((f"l{i}_in{j}", ops[i].inputs[j].elems))
    outputs = []
    for k, tensor in enumerate(record.outputs):
        source = record.aliases.get(tensor.name, tensor.name)
        if source not in producers:
            raise FpgaplaceError(f"design.json core {record.name}: output {tensor.name} has no producing layer")
        consumers.setdefault(source, []).append((f"m{k}_axis", producers[source][1]))
        outputs.append(rtl.Port(f"m{k}_axis", producers[source][1], math.prod(tensor.sample_shape)))
    inputs = []
    for k, tensor in enumerate(record.inputs):
        readers = consumers.get(tensor.name, [])
        inputs.append(rtl.Port(f"s{k}_axis", readers[0][1] if readers else 1, math.prod(tensor.sample_shape)))
        producers[tensor.name] = (f"s{k}_axis", inputs[-1].elems)
    lengths = {t.name: math.prod(t.sample_shape) for t in record.inputs} | {
        layer.output: op.output.length for layer, op in zip(record.layers, ops, strict=True)}
    connect(net, producers, consumers, lengths, record.buffers, f"design.json core {record.name}", record.fifo_uram)
    for i, op in enumerate(ops):
        ports = bundle("m_axis", f"l{i}_out")
        for j, port in enumerate(op.inputs):
            net.stream(f"l{i}_in{j}", port.elems)
            ports |= bundle(port.name, f"l{i}_in{j}")
        net.instance(op.module.top, f"layer{i}", {}, ports)
    top = f"{core}_rtl"
    ports = [{"name": p.name, "elems": p.elems, "direction": "input", "back": "output"} for p in inputs] + [
        {"name": p.name, "elems": p.elems, "direction": "output", "back": "input"} for p in outputs]
    layers = [f"layer{i}: {layer.op}, {layer.kernel}, PE={layer.pe} SIMD={layer.simd} MMV={layer.mmv}, "
              f"{layer.cycles} cycles" for i, layer in enumerate(record.layers)]
    verilog = environment().get_template("rtl/core.v.j2").render(
        name=top, core=record.name, ports=ports, streams=net.streams, assigns=net.assigns,
        instances=net.instances, layers=layers)
    files = {**rtl.library(), f"{top}.v": verilog}
    for op in ops:
        files |= op.module.files
    return CoreRtl(rtl.RtlModule(top, files), tuple(inputs), tuple(outputs), tuple(ops))


def core_job(core: CoreRtl, samples: list[list[np.ndarray]], expected_cycles: int, steady: int) -> dict[str, Any]:
    """The stream testbench's job: ``samples`` with backpressure, then ``steady`` back to back."""
    per_port = [np.stack([sample[k] for sample in samples]) for k in range(len(core.inputs))]
    steady_inputs = [np.resize(v, (steady, v.shape[1])) for v in per_port]
    return {"inputs": [p.to_json() for p in core.inputs], "outputs": [p.to_json() for p in core.outputs],
            "cycle_limit": 64 * max(1, expected_cycles) * (len(samples) + steady) + 20000,
            "phases": [{"name": "random", "gap": 0.3, "backpressure": 0.3, "inputs": [v.tolist() for v in per_port]},
                       {"name": "steady", "gap": 0.0, "backpressure": 0.0,
                        "inputs": [v.tolist() for v in steady_inputs]}]}


def written_ports(folder: Path, record: Core) -> tuple[list[rtl.Port], list[rtl.Port]]:
    """The stream ports (inputs, outputs) of the RTL top ``write_rtl_project`` wrote for core
    ``record`` into the project ``folder``, read from its job. The RTL op library picks its own
    beat widths (a max pool's output is two pixels' lanes wide, say), which need not be the HLS
    ones design.json records as ``beat``. O(ports)."""
    job_file = Path(folder) / SIM_DIR / cell_name(record.name) / JOB_FILE
    if not job_file.is_file():
        raise FpgaplaceError(f"{job_file}: missing; expected the ports of core {record.name}'s RTL top "
                             "(write_rtl_project writes them)")
    job = json.loads(job_file.read_text())
    return ([rtl.Port(p["port"], p["elems"], p["length"]) for p in job["inputs"]],
            [rtl.Port(p["port"], p["elems"], p["length"]) for p in job["outputs"]])


def stage_ports(core: CoreRtl) -> list[dict[str, Any]]:
    """Each layer's module name and stream ports, for simulating it alone (``sim/<core>/stages.json``)."""
    return [{"top": op.module.top, "inputs": [port.to_json() for port in op.inputs], "outputs": [op.output.to_json()]}
            for op in core.layers]


def board_cores(board: Board, design: DesignRecord) -> dict[str, FpgaCore]:
    """The board's cores by name, as ``design``'s core records name them, each with the lanes its
    record says compile chose (``narrow_lanes``): each layer's lanes are built for its core as the
    folding priced them (``rtl.render_op``). O(cores)."""
    chosen = {record.name: record.narrow_lanes for record in design.cores}
    return {c.name: replace(c, narrow_lanes=chosen.get(c.name, c.narrow_lanes)) for c in board.cores}


def core_macs_per_dsp(core: FpgaCore | None) -> int:
    """The int8 MACs one multiplier of ``core`` takes (its family's; 1 where the core is unknown):
    each core's RTL pairs MACs as its own family allows, as the op library priced it (a cluster's
    nodes may be of different families)."""
    return core.macs_per_dsp if core is not None else 1


def write_rtl_project(design: DesignRecord, folder: Path) -> None:
    """Write ``rtl/<core>/`` (each core's top, the op library and the ROMs) and ``sim/`` (a cocotb
    job per core and ``run_rtl.py``) of the project whose record is ``design`` into ``folder``. A
    core with a layer the RTL op library lacks gets a ``README.txt`` saying which."""
    folder = Path(folder)
    try:
        board = project_board(design)
        cores = board_cores(board, design)
    except FpgaplaceError:
        cores = {}
    for record in design.cores:
        name = cell_name(record.name)
        rtl_folder, sim_folder = folder / RTL_DIR / name, folder / SIM_DIR / name
        fpga_core = cores.get(record.name)
        try:
            core = render_core(record, load_arrays(folder, record), core_macs_per_dsp(fpga_core), fpga_core)
        except (FpgaplaceError, KeyError, ValueError) as error:  # a layer the RTL library lacks: compile goes on
            rtl_folder.mkdir(parents=True, exist_ok=True)
            (rtl_folder / "README.txt").write_text(f"No RTL for {record.name}: {error}\n")
            continue
        core.module.write(rtl_folder)
        sim_folder.mkdir(parents=True, exist_ok=True)
        job = core_job(core, random_samples(record, 1, 0), record.interval_cycles, 3)
        (sim_folder / JOB_FILE).write_text(json.dumps(job))
        (sim_folder / STAGES_FILE).write_text(json.dumps(stage_ports(core)))
    (folder / SIM_DIR).mkdir(parents=True, exist_ok=True)
    (folder / SIM_DIR / "run_rtl.py").write_text(files(TESTBENCH_PACKAGE).joinpath(RUNNER_SCRIPT).read_text())

