"""The compile step: a placed int8 design -> a buildable project folder with ``design.json``.

``compile_design`` lowers the ops of every FPGA core (``lower``), folds them within the core's
budget (``fpgaplace.hw.folding``), renders each core's HLS C++ and scripts from the Jinja2
templates (``render``), writes the per-device ONNX split (the CPU pieces run in onnxruntime),
and records every decision in ``design.json``: board, part, clock, precision, placement by
board identity, per core its layers with folding, cycles and resources, the tensors at its
boundary and the planned load beside the folded interval. The folder is written elsewhere
first and moved into place, so a failure leaves nothing half-written.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from fpgaplace import __version__, hw
from fpgaplace.board.model import FpgaCore
from fpgaplace.codegen.build_scripts import write_build_scripts
from fpgaplace.codegen.host import write_host_driver
from fpgaplace.codegen.lower import CoreDesign, layer_macs, per_sample_shape
from fpgaplace.codegen.render import environment, include_dir, layer_widths, plan_core, render_core
from fpgaplace.codegen.rtl_project import write_rtl_project
from fpgaplace.flow.refine import planned_compute_us, refine, say
from fpgaplace.hw.lowering import graph_batch
from fpgaplace.model.quantize import check_qdq
from fpgaplace.project.record import DESIGN_FILE, DESIGN_FORMAT, transfer_channel
from fpgaplace.util.errors import FpgaplaceError

if TYPE_CHECKING:
    from fpgaplace.flow.design import Design



@dataclass
class CompileResult:
    project: Path
    cores: list[dict]
    cpu_ops: list[str]
    design: dict
    quantized_here: bool = False
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"project": str(self.project), "cores": self.cores, "cpu_ops": self.cpu_ops,
                "quantized_here": self.quantized_here, "board": self.design["board"]["name"],
                "interval_us": self.design["interval_us"], "fps": self.design["fps"],
                "refinement": self.design["placement"].get("refinement")}


def check_project_dir(out_dir: Path) -> None:
    """Refuse an output path that is a file, or a non-empty folder that is not a project (a
    previous project, with its ``design.json``, is replaced)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise FpgaplaceError(f"out_dir {out_dir}: is a file; expected a folder for the project")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not (out_dir / DESIGN_FILE).is_file():
        raise FpgaplaceError(f"out_dir {out_dir}: exists and is not a project folder (no {DESIGN_FILE}); "
                             "expected an empty folder or a previous project")


def compile_design(design: Design, out_dir: Path, progress=None) -> CompileResult:
    """Write the project of ``design`` (an int8 QDQ design; placed with defaults if it is not)
    into ``out_dir``."""
    out_dir = Path(out_dir)
    check_project_dir(out_dir)
    if not design.is_qdq:
        raise FpgaplaceError(f"{design.name}: compile needs an int8 QDQ model; quantize it first")
    check_qdq(design.graph.model)  # a bad scale or zero point is named by its Q/DQ node, before any work
    refined = refine(design, progress)  # placed with the defaults first if it is not
    if refined.design is not design:
        design.take_placement(refined.design)
    cores, host_ops = refined.lowered.cores, refined.lowered.host_ops
    graph, board, result = design.graph, design.board, design.placement
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        say(progress, "writing the per-device split")
        # Not checked here against the whole model in float: onnxruntime fuses Q/DQ differently in a
        # piece and in the whole model, so a dequantized tensor may differ by one step; csim checks
        # the placed model against the whole QDQ model in steps (LSB).
        manifest, _ = design.split(tmp / "split", check=False)
        pieces = [s.device for s in manifest.submodels]
        for c in cores:
            if pieces.count(c.name) != 1:
                raise FpgaplaceError(
                    f"{c.name}: its ops form {pieces.count(c.name)} separate pieces of the model; a core builds one "
                    "dataflow, so place with contiguous device sets"
                )
        shutil.copytree(include_dir(), tmp / "include")
        (tmp / "model.qdq.onnx").write_bytes(graph.model.SerializeToString())
        context = {"model": graph.name, "board": board.name}
        records = []
        for c in cores:
            say(progress, f"rendering {c.name} ({len(c.layers)} stages)")
            folder = tmp / "cores" / c.name
            folder.mkdir(parents=True)
            plan = plan_core(c)
            render_core(c, plan, folder, {**context, "part": board.node_board(c.core.node).part})
            np.savez(folder / "layers.npz", **{f"{i}.{k}": v for i, layer in enumerate(c.layers)
                                                for k, v in layer.arrays.items()})
            records.append(_core_record(c, plan, design, result))
        document = _design_json(design, result, records, manifest)
        document["placement"]["refinement"] = {"rounds": refined.rounds, "chosen": refined.chosen}
        document["host_ops"] = host_ops
        document["cpu_ops"] += host_ops
        (tmp / DESIGN_FILE).write_text(json.dumps(document, indent=2) + "\n")
        (tmp / "README.md").write_text(environment().get_template("project/README.md.j2").render(
            model=graph.name, board=board.name, version=__version__, cores=[_summary(r) for r in document["cores"]],
            cpu_ops=document["cpu_ops"]))
        # The later stages' files, each from design.json and the folder written so far.
        write_build_scripts(document, tmp)  # vivado/ or vitis/, Makefile
        write_host_driver(document, tmp)  # host/: the PYNQ driver
        write_rtl_project(document, tmp)  # rtl/ and sim/: Verilog tops and cocotb testbenches
        check_project_dir(out_dir)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        tmp.rename(out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return CompileResult(out_dir, [_summary(r) for r in document["cores"]], document["cpu_ops"], document)


def _core_record(c: CoreDesign, plan, design: Design, result) -> dict:
    core: FpgaCore = c.core
    device = design.device_names().index(c.name)
    planned_us = float(result.evaluation.loads[device])
    compute_us = planned_compute_us(design, c)
    interval = c.folding.interval
    return {
        "name": c.name,
        "folder": f"cores/{c.name}",
        "top": plan.top,
        "node": core.node,
        "part": design.board.node_board(core.node).part,
        "slr": core.region,
        "clock_mhz": core.clock_mhz,
        "ops": c.ops,
        "layers": [
            {"op": layer.op, "kernel": layer.kernel, "inputs": layer.inputs, "output": layer.output,
             "config": layer.config, "pe": layer.folding.pe, "simd": layer.folding.simd, "mmv": layer.folding.mmv,
             "uram": layer.folding.uram, "rows": layer.rows, "beats": _beats(layer),
             "resident": layer.resident, "cycles": layer.cycles, "macs": layer_macs(layer),
             "resources": layer.resources.to_json(), "arrays": sorted(layer.arrays)}
            for layer in c.layers
        ],
        "inputs": [_tensor(t, c.batch, p) for t, p in zip(c.inputs, plan.inputs, strict=True)],
        "outputs": [_tensor(t, c.batch, p) for t, p in zip(c.outputs, plan.outputs, strict=True)],
        "stages": [_stage(step, c.layers) for step in plan.steps],
        "aliases": c.aliases,
        "streamed_weight_bytes": plan.streamed,
        "resources": c.folding.resources.to_json(),
        "budget": hw.kernel.core_budget(core).to_json(),
        "compute_interval_cycles": c.folding.compute_interval,
        "dram_cycles": c.folding.dram_cycles,
        "binding": c.folding.binding(),
        "interval_cycles": interval,
        "interval_us": hw.cycles_to_us(interval, core),
        "planned_load_us": planned_us,
        "planned_compute_us": compute_us,
    }


def _beats(layer) -> dict:
    """Elements per beat of the layer's input streams and its output stream."""
    ins, out = layer_widths(layer)
    return {"inputs": ins, "output": out}


def _stage(step, layers) -> dict:
    """One dataflow stage of a core: its kernel, the layer it computes (none for forks, width
    converters and constants) and that layer's model cycles."""
    cycles = next((layer.cycles for layer in layers if layer.op == step.op), None) if step.op else None
    return {"stage": step.config["STAGE"], "kernel": step.kernel, "op": step.op or None, "cycles_model": cycles}


def _tensor(t, batch: int, port) -> dict:
    return {"name": t.name, "port": port.port, "beat": port.width, "shape": list(t.shape),
            "sample_shape": list(per_sample_shape(t, batch)),
            "channels_last": t.channels_last, "scale": t.scale, "zero_point": t.zero_point, "views": t.views,
            "quantized_from": t.quantized_from}


def _design_json(design: Design, result, records: list[dict], manifest) -> dict:
    board = design.board
    devices = design.op_devices()
    cpu_ops = [op for op, device in devices.items() if not isinstance(device, FpgaCore)]
    transfers = _transfers(design, manifest)
    intervals = [r["interval_us"] for r in records] + [float(x) for d, x in enumerate(result.evaluation.loads)
                                                      if design.devices()[d].name not in {r["name"] for r in records}]
    interval_us = max([*intervals, *_channel_busy_us(design, transfers).values()], default=0.0)
    return {
        "format": DESIGN_FORMAT,
        "fpgaplace": __version__,
        "model": {"name": design.graph.name, "file": "model.qdq.onnx", "batch": graph_batch(design.graph)},
        "board": {"name": board.name, "part": board.part, "clock_mhz": board.cores[0].clock_mhz if board.cores else 0,
                  "source": board.source},
        "precision": "int8",
        "placement": {
            "method": result.placement.method, "value": result.value,
            "bound": result.placement.bound, "gap": result.placement.gap, "unit": "us",
            "devices": {op: device.name for op, device in devices.items()},
        },
        "devices": _devices(design, result),
        "cores": records,
        "cpu_ops": cpu_ops,
        "split": "split/manifest.json",
        "transfers": transfers,
        "interval_us": interval_us,
        "fps": graph_batch(design.graph) * 1e6 / interval_us if interval_us > 0 else None,
    }


def _channel_busy_us(design: Design, transfers: list[dict]) -> dict[str, float]:
    """Each physical link's time per sample: the transfers that take turns on it (a link can be
    the pipeline's bottleneck, as ``fpgaplace sim`` shows)."""
    nodes = {device.name: device.node for device in design.devices()}
    busy: dict[str, float] = {}
    for transfer in transfers:
        if "us" in transfer:
            channel = transfer_channel(transfer, nodes)
            busy[channel] = busy.get(channel, 0.0) + float(transfer["us"])
    return busy


def _devices(design: Design, result) -> list[dict]:
    """Every device of the board with its ops and its planned load (the trusted evaluator's, in
    us, transfers included) and planned compute (the sum of its ops' latencies)."""
    problem = design.problem
    rows = []
    for index, device in enumerate(design.devices()):
        members = [v for v in range(problem.n) if result.placement.device[v] == index]
        kind = problem.devices()[index][0]
        rows.append({
            "name": device.name, "kind": "fpga" if isinstance(device, FpgaCore) else "cpu", "node": device.node,
            "ops": [problem.names[v] for v in members], "load_us": float(result.evaluation.loads[index]),
            "compute_us": float(sum(problem.latency[v, kind] for v in members)),
        })
    return rows


def _transfers(design: Design, manifest) -> list[dict]:
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
        row = {**transfer.to_dict(), "bytes": nbytes, "int8": quantized}
        if source is not None and target is not None and nbytes is not None:
            link = board.link_between(source, target)
            row.update(link=link.kind, link_type=link.type, us=link.transfer_us(nbytes))
        rows.append(row)
    return rows


def _summary(record: dict) -> dict:
    r = record["resources"]
    return {"name": record["name"], "ops": len(record["ops"]), "stages": len(record["layers"]), "dsp": r["dsp"],
            "bram36": r["bram36"], "uram": r["uram"], "lut": r["lut"], "cycles": record["interval_cycles"],
            "interval_us": record["interval_us"], "planned_us": record["planned_load_us"],
            "planned_compute_us": record["planned_compute_us"], "binding": record["binding"],
            "fps": 1e6 / record["interval_us"] if record["interval_us"] else None}
