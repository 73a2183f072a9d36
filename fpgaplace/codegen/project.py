"""The project writer: a placed int8 design and its lowered, folded cores -> a buildable
project folder with ``design.json``.

``write_project`` is the compile step's last part (``fpgaplace.flow.compile`` places, lowers
and refines first): it renders each core's HLS C++ and scripts from the Jinja2 templates
(``render``), writes the per-device ONNX split (the CPU pieces run in onnxruntime), and records
every decision in ``design.json`` (``fpgaplace.project.record``): board, part, clock,
precision, placement by board identity, per core its layers with folding, cycles and
resources, the tensors at its boundary and the planned load beside the folded interval. The
folder is written elsewhere first and moved into place, so a failure leaves nothing
half-written. The design is read through ``PlacedDesign``: codegen does not import the flow.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from fpgaplace import __version__, hw
from fpgaplace.board.model import FpgaCore
from fpgaplace.codegen.blockdesign.write import write_build_scripts
from fpgaplace.codegen.host import write_host_driver
from fpgaplace.codegen.lower import CoreDesign, layer_macs, layer_widths, per_sample_shape
from fpgaplace.codegen.render import include_dir, plan_core, render_core
from fpgaplace.codegen.rtl_project import write_rtl_project
from fpgaplace.hw.lowering import graph_batch
from fpgaplace.hw.registry import core_latency
from fpgaplace.model.ir import OpGraph
from fpgaplace.model.qdq import is_from_qonnx
from fpgaplace.project import layout, record
from fpgaplace.project.manifest import Manifest
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.files import new_folder
from fpgaplace.util.templates import environment


class PlacedDesign(Protocol):
    """What the writer reads of a placed design (``fpgaplace.flow.design.Design`` is one)."""

    graph: OpGraph
    board: Any  # fpgaplace.board.model.Board
    placement: Any  # its SolveResult: placement, value, evaluation
    problem: Any  # its PlacementProblem

    def devices(self) -> list: ...

    def device_names(self) -> list[str]: ...

    def op_devices(self) -> dict: ...

    def split(self, out_dir: Path, check: bool = True) -> tuple[Manifest, Any]: ...


@dataclass
class CompileResult:
    project: Path
    cores: list[dict]
    cpu_ops: list[str]
    design: dict
    quantized_here: bool = False
    notes: list[str] = field(default_factory=list)
    left_on_cpus: dict | None = None  # the CPU ops by reason and what they cost (``flow.compile.left_on_cpus``)

    def layer_widths(self) -> list[dict]:
        """Each core layer's core, op, kernel and widths (design.json's ``widths``), in core order."""
        return [{"core": core["name"], "op": layer["op"], "kernel": layer["kernel"], "widths": layer.get("widths")}
                for core in self.design["cores"] for layer in core["layers"]]

    def to_json(self) -> dict:
        return {"project": str(self.project), "cores": self.cores, "cpu_ops": self.cpu_ops,
                "layers": self.layer_widths(), "quantized_here": self.quantized_here,
                "board": self.design["board"]["name"],
                "interval_us": self.design["interval_us"], "fps": self.design["fps"],
                "refinement": self.design["placement"].get("refinement"), "left_on_cpus": self.left_on_cpus}


def check_project_dir(out_dir: Path) -> None:
    """Refuse an output path that is a file, or a non-empty folder that is not a project (a
    previous project, with its ``design.json``, is replaced)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise FpgaplaceError(f"out_dir {out_dir}: is a file; expected a folder for the project")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not (out_dir / layout.DESIGN_FILE).is_file():
        raise FpgaplaceError(f"out_dir {out_dir}: exists and is not a project folder (no {layout.DESIGN_FILE}); "
                             "expected an empty folder or a previous project")


def write_project(design: PlacedDesign, out_dir: Path, cores: list[CoreDesign], host_ops: list[str],
                  refinement: dict, planned_compute: dict[str, float], progress=None) -> CompileResult:
    """Write the project of ``design`` (placed, its FPGA cores lowered and folded into ``cores``,
    ``host_ops`` left to the host) into ``out_dir``; ``refinement`` (the placement <-> folding
    rounds) and ``planned_compute`` (each core's planned compute, us) go into design.json."""
    say = progress or (lambda message: None)
    out_dir = Path(out_dir)
    graph, board, result = design.graph, design.board, design.placement
    with new_folder(out_dir, check_project_dir) as tmp:
        say("writing the per-device split")
        # Not checked here against the whole model in float: onnxruntime fuses Q/DQ differently in a
        # piece and in the whole model, so a dequantized tensor may differ by one step; csim checks
        # the placed model against the whole QDQ model in steps (LSB).
        manifest, _ = design.split(tmp / layout.SPLIT_DIR, check=False)
        pieces = [s.device for s in manifest.submodels]
        for c in cores:
            if pieces.count(c.name) != 1:
                raise FpgaplaceError(
                    f"{c.name}: its ops form {pieces.count(c.name)} separate pieces of the model; a core builds one "
                    "dataflow, so place with contiguous device sets"
                )
        shutil.copytree(include_dir(), tmp / layout.INCLUDE_DIR)
        (tmp / layout.MODEL_FILE).write_bytes(graph.model.SerializeToString())
        context = {"model": graph.name, "board": board.name}
        records = []
        for c in cores:
            say(f"rendering {c.name} ({len(c.layers)} stages)")
            folder = tmp / layout.core_folder(c.name)
            folder.mkdir(parents=True)
            plan = plan_core(c)
            render_core(c, plan, folder, {**context, "part": board.node_board(c.core.node).part})
            np.savez(folder / layout.LAYERS_FILE, **{f"{i}.{k}": v for i, layer in enumerate(c.layers)
                                                     for k, v in layer.arrays.items()})
            records.append(_core_record(c, plan, design, planned_compute[c.name]))
        written = _design_record(design, result, records, manifest, refinement, host_ops)
        document = written.to_json()
        record.DesignRecord.from_json(document, f"compile's own {out_dir / layout.DESIGN_FILE}")
        (tmp / layout.DESIGN_FILE).write_text(json.dumps(document, indent=2) + "\n")
        (tmp / layout.README_FILE).write_text(environment().get_template("project/README.md.j2").render(
            model=graph.name, board=board.name, version=__version__, cores=[_summary(c) for c in written.cores],
            cpu_ops=written.cpu_ops))
        # The later stages' files, each from design.json and the folder written so far.
        write_rtl_project(written, tmp)  # rtl/ and sim/: Verilog tops and cocotb testbenches
        write_build_scripts(written, tmp)  # vivado/, vitis/ or ecp5/ (which reads rtl/), Makefile
        write_host_driver(written, tmp)  # host/: the PYNQ driver
    return CompileResult(out_dir, [_summary(c) for c in written.cores], written.cpu_ops, document)


def _core_record(c: CoreDesign, plan, design: PlacedDesign, compute_us: float) -> record.Core:
    core: FpgaCore = c.core
    device = design.device_names().index(c.name)
    planned_us = float(design.placement.evaluation.loads[device])
    interval = c.folding.interval
    return record.Core(
        name=c.name, folder=layout.core_folder(c.name), top=plan.top, node=core.node,
        part=design.board.node_board(core.node).part, slr=core.region, clock_mhz=core.clock_mhz, ops=c.ops,
        layers=[record.Layer(
            op=layer.op, kernel=layer.kernel, inputs=layer.inputs, output=layer.output, config=layer.config,
            pe=layer.folding.pe, simd=layer.folding.simd, mmv=layer.folding.mmv, uram=layer.folding.uram,
            rows=layer.rows, beats=_beats(layer), resident=layer.resident, cycles=layer.cycles,
            macs=layer_macs(layer), resources=layer.resources.to_json(), arrays=sorted(layer.arrays),
            widths=record.LayerWidths(**layer.widths) if layer.widths else None)
            for layer in c.layers],
        inputs=[_tensor(t, c.batch, p) for t, p in zip(c.inputs, plan.inputs, strict=True)],
        outputs=[_tensor(t, c.batch, p) for t, p in zip(c.outputs, plan.outputs, strict=True)],
        stages=[_stage(step, c.layers) for step in plan.steps], aliases=c.aliases,
        streamed_weight_bytes=plan.streamed, resources=(c.folding.resources + c.fifo_resources).to_json(),
        budget=hw.geometry.core_budget(core).to_json(), compute_interval_cycles=c.folding.compute_interval,
        dram_cycles=c.folding.dram_cycles, binding=c.folding.binding(), interval_cycles=interval,
        interval_us=hw.cycles_to_us(interval, core), planned_load_us=planned_us, planned_compute_us=compute_us,
        latency_cycles=core_latency(c.layers, [c.aliases.get(t.name, t.name) for t in c.outputs], interval),
        buffers=plan.buffers, fifo_resources=c.fifo_resources.to_json(), fifo_uram=c.fifo_uram,
        narrow_lanes=c.core.narrow_lanes)


def _beats(layer) -> dict:
    """Elements per beat of the layer's input streams and its output stream."""
    ins, out = layer_widths(layer)
    return {"inputs": ins, "output": out}


def _stage(step, layers) -> record.Stage:
    """One dataflow stage of a core: its kernel, the layer it computes (none for forks, width
    converters and constants) and that layer's model cycles."""
    cycles = next((layer.cycles for layer in layers if layer.op == step.op), None) if step.op else None
    return record.Stage(step.config["STAGE"], step.kernel, step.op or None, cycles)


def _tensor(t, batch: int, port) -> record.BoundaryTensor:
    return record.BoundaryTensor(
        name=t.name, port=port.port, beat=port.width, shape=list(t.shape),
        sample_shape=list(per_sample_shape(t, batch)), channels_last=t.channels_last, scale=t.scale,
        zero_point=t.zero_point, views=[record.View(v["name"], list(v["shape"])) for v in t.views],
        quantized_from=t.quantized_from)


def _design_record(design: PlacedDesign, result, cores: list[record.Core], manifest, refinement: dict,
                   host_ops: list[str]) -> record.DesignRecord:
    board = design.board
    devices = design.op_devices()
    cpu_ops = [op for op, device in devices.items() if not isinstance(device, FpgaCore)]
    transfers = _transfers(design, manifest)
    on_cores = {c.name for c in cores}
    intervals = [c.interval_us for c in cores] + [float(x) for d, x in enumerate(result.evaluation.loads)
                                                 if design.devices()[d].name not in on_cores]
    interval_us = max([*intervals, *_channel_busy_us(design, transfers).values()], default=0.0)
    return record.DesignRecord(
        fpgaplace=__version__,
        model=record.ModelInfo(design.graph.name, layout.MODEL_FILE, graph_batch(design.graph),
                               is_from_qonnx(design.graph.model)),
        board=record.BoardInfo(board.name, board.part, board.cores[0].clock_mhz if board.cores else 0,
                               board.source, None if board.fixed_cores or board.is_cluster else len(board.cores)),
        precision="int8",
        placement=record.PlacementInfo(
            result.placement.method, result.value, result.placement.bound, result.placement.gap, "us",
            {op: device.name for op, device in devices.items()}, refinement),
        devices=_devices(design, result), cores=cores, cpu_ops=cpu_ops + host_ops, split=layout.SPLIT_MANIFEST,
        transfers=transfers, interval_us=interval_us,
        fps=graph_batch(design.graph) * 1e6 / interval_us if interval_us > 0 else None, host_ops=host_ops)


def _channel_busy_us(design: PlacedDesign, transfers: list[record.TransferInfo]) -> dict[str, float]:
    """Each physical link's time per sample: the transfers that take turns on it (a link can be
    the pipeline's bottleneck, as ``fpgaplace sim`` shows)."""
    nodes = {device.name: device.node for device in design.devices()}
    busy: dict[str, float] = {}
    for transfer in transfers:
        if transfer.us is not None:
            channel = record.transfer_channel(transfer, nodes)
            busy[channel] = busy.get(channel, 0.0) + float(transfer.us)
    return busy


def _devices(design: PlacedDesign, result) -> list[record.DeviceInfo]:
    """Every device of the board with its ops and its planned load (the trusted evaluator's, in
    us, transfers included) and planned compute (the sum of its ops' latencies)."""
    problem = design.problem
    rows = []
    for index, device in enumerate(design.devices()):
        members = [v for v in range(problem.n) if result.placement.device[v] == index]
        kind = problem.devices()[index][0]
        rows.append(record.DeviceInfo(
            name=device.name, kind="fpga" if isinstance(device, FpgaCore) else "cpu", node=device.node,
            ops=[problem.names[v] for v in members], load_us=float(result.evaluation.loads[index]),
            compute_us=float(sum(problem.latency[v, kind] for v in members)),
        ))
    return rows


def _transfers(design: PlacedDesign, manifest) -> list[record.TransferInfo]:
    """Every tensor crossing devices, with the link that joins them (``Board.link_between``),
    the bytes it moves (int8 for a dequantized view of an int8 tensor) and the time that takes."""
    from fpgaplace.hw.qdq import qdq_index

    graph, board = design.graph, design.board
    by_name = {device.name: device for device in design.devices()}
    index = qdq_index(graph.model)
    rows = []
    for transfer in manifest.transfers:
        source, target = by_name.get(transfer.source_device), by_name.get(transfer.target_device)
        info = graph.tensors.get(transfer.tensor)
        quantized = index.int_source(transfer.tensor) is not None
        nbytes = (info.numel if quantized else info.nbytes) if info is not None else transfer.nbytes
        row = record.TransferInfo(transfer.tensor, transfer.source_device, transfer.target_device, transfer.source,
                                  transfer.target, nbytes, quantized)
        if source is not None and target is not None and nbytes is not None:
            link = board.link_between(source, target)
            row.link, row.link_type, row.us = link.kind, link.type, link.transfer_us(nbytes)
        rows.append(row)
    return rows + _host_transfers(design, manifest)


def _host_transfers(design: PlacedDesign, manifest) -> list[record.TransferInfo]:
    """On a board without CPUs whose host link joins it to the host computer (an ECP5 board's
    UART), the model's inputs come over that link to the cores that read them and its outputs go
    back: one transfer each, int8 (the cores' ports), charged at the link's time."""
    board = design.board
    if board.cpus or board.host is None:
        return []
    link, rows = board.host, []
    device_of = {piece.name: piece.device for piece in manifest.submodels}
    for piece in manifest.submodels:
        for entry in manifest.graph_inputs:
            if piece.sources.get(entry["name"]) == "":
                rows.append(_host_row(design, entry["name"], layout.HOST_DEVICE, device_of[piece.name], link))
        for entry in manifest.graph_outputs:
            if entry["name"] in piece.outputs:
                rows.append(_host_row(design, entry["name"], device_of[piece.name], layout.HOST_DEVICE, link))
    return rows


def _host_row(design: PlacedDesign, tensor: str, source: str, target: str, link) -> record.TransferInfo:
    nbytes = design.graph.tensors[tensor].numel
    return record.TransferInfo(tensor, source, target, bytes=nbytes, int8=True, link=link.kind, link_type=link.type,
                               us=link.transfer_us(nbytes))


def _summary(core: record.Core) -> dict:
    r = core.resources
    return {"name": core.name, "ops": len(core.ops), "stages": len(core.layers), "dsp": r["dsp"],
            "bram36": r["bram36"], "uram": r["uram"], "lut": r["lut"], "cycles": core.interval_cycles,
            "interval_us": core.interval_us, "planned_us": core.planned_load_us,
            "planned_compute_us": core.planned_compute_us, "binding": core.binding,
            "narrow_lanes": core.narrow_lanes, "fps": 1e6 / core.interval_us if core.interval_us else None}
