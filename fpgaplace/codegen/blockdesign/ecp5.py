"""A project's open ECP5 flow (a board with an ``ecp5`` section): the board top, pins and Makefile.

``write_ecp5_scripts(document, folder)`` writes, beside the cores' RTL that ``rtl_project`` wrote
into ``rtl/<core>/``:

- ``ecp5/fp_fabric.v``: every core's RTL top (``<core>_rtl``) joined by streams as a core joins
  its layers (``rtl_project.connect``: a FIFO per tensor between two cores, a fork where several
  read one, a gearbox where beat widths differ); the model's input enters and its output leaves
  as streams of one byte a beat;
- ``ecp5/fp_top.v`` and ``ecp5/fp_uart.v``: the board top: the oscillator as the clock, a
  power-on reset, the USB UART (the board's host link, ``Board.ecp5``) receiving a sample into a
  FIFO that holds a whole one and transmitting the result;
- ``ecp5/board.lpf``: the clock and UART pins and the clock's frequency for nextpnr-ecp5;
- the ``Makefile``: ``make bitstream`` runs yosys ``synth_ecp5``, nextpnr-ecp5 and ecppack (all
  from PyPI, the ``ecp5`` extra) into ``bitstream/design.bit``, then ``fpgaplace.sim.nextpnr``
  reads nextpnr's achieved clock and utilisation back into design.json.

What the flow cannot build yet is a one-line error naming the core or tensor: a design with more
than one model input or output (the UART carries one stream each way), a core that streams
weights from the SDRAM (no SDRAM controller), a core without RTL, cores clocked other than the
oscillator (no PLL). Writing is O(cores' ports + the RTL's files).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from fpgaplace.board.model import Board, Ecp5Board
from fpgaplace.codegen.rtl_project import Netlist, bundle, connect, written_ports
from fpgaplace.hw.rtl_values import index_bits
from fpgaplace.project.layout import BITSTREAM_DIR, ECP5_DIR, MAKEFILE, RTL_DIR, bitstream_files, cell_name
from fpgaplace.project.record import BoundaryTensor, Core, DesignRecord
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.templates import environment

FABRIC, TOP = "fp_fabric", "fp_top"
LIBRARY_FILE = "fp_lib.v"  # the shared modules every core's folder holds (one copy is read)


def host_tensors(document: DesignRecord) -> tuple[list[tuple[Core, int]], list[tuple[Core, int]]]:
    """The core ports the host feeds (inputs no core produces) and drains (outputs no core reads),
    as (core, port index). O(ports^2) name-set intersections."""
    produced = [(core, k, tensor.names) for core in document.cores for k, tensor in enumerate(core.outputs)]
    consumed = [(core, k, tensor.names) for core in document.cores for k, tensor in enumerate(core.inputs)]
    fed = [(core, k) for core, k, names in consumed if not any(names & other for _, _, other in produced)]
    drained = [(core, k) for core, k, names in produced if not any(names & other for _, _, other in consumed)]
    return fed, drained


def _check_buildable(document: DesignRecord, folder: Path, ecp5: Ecp5Board) -> None:
    fed, drained = host_tensors(document)
    if len(fed) != 1 or len(drained) != 1:
        raise FpgaplaceError(f"ecp5: the UART carries one model input and one output; this design has {len(fed)} "
                             f"inputs and {len(drained)} outputs on its cores")
    for core in document.cores:
        readme = folder / RTL_DIR / cell_name(core.name) / "README.txt"
        if readme.is_file():
            raise FpgaplaceError(f"ecp5: {readme.read_text().strip()}")
        if core.streamed_weight_bytes:
            raise FpgaplaceError(f"ecp5: core {core.name} streams {core.streamed_weight_bytes} weight bytes from "
                                 "the SDRAM, and the open flow builds no SDRAM controller; expected every "
                                 "weight on chip (a board with more block RAM, or more cores)")
        if core.clock_mhz != ecp5.clock_mhz:
            raise FpgaplaceError(f"ecp5: core {core.name} runs at {core.clock_mhz:g} MHz but the oscillator gives "
                                 f"{ecp5.clock_mhz:g} MHz, and the open flow builds no PLL yet")


def _sample_bytes(tensor: BoundaryTensor) -> int:
    return math.prod(tensor.sample_shape)


def fabric_netlist(document: DesignRecord, folder: Path) -> Netlist:
    """The streams and instances of ``fp_fabric``: each core's top with the ports its RTL has
    (``rtl_project.written_ports``: the RTL op library's beat widths), joined by
    ``rtl_project.connect``, the host's input ``s0_axis`` and output ``m0_axis`` one byte a beat."""
    net = Netlist()
    producers: dict[str, tuple[str, int]] = {}
    consumers: dict[str, list[tuple[str, int]]] = {}
    lengths: dict[str, int] = {}
    fed, drained = host_tensors(document)
    for i, core in enumerate(document.cores):
        ins, outs = written_ports(folder, core)
        ports: dict[str, str] = {}
        for k, (tensor, port) in enumerate(zip(core.inputs, ins, strict=True)):
            stream = net.stream(f"c{i}_in{k}", port.elems)[0]
            consumers.setdefault(tensor.name, []).append((stream, port.elems))
            ports |= bundle(f"s{k}_axis", stream)
        for k, (tensor, port) in enumerate(zip(core.outputs, outs, strict=True)):
            producers[tensor.name] = net.stream(f"c{i}_out{k}", port.elems)
            lengths[tensor.name] = port.length
            ports |= bundle(f"m{k}_axis", f"c{i}_out{k}")
        net.instance(f"{cell_name(core.name)}_rtl", cell_name(core.name), {}, ports)
    (in_core, in_port), (out_core, out_port) = fed[0], drained[0]
    source = in_core.inputs[in_port]
    producers[source.name], lengths[source.name] = ("s0_axis", 1), _sample_bytes(source)
    consumers.setdefault(out_core.outputs[out_port].name, []).append(("m0_axis", 1))
    connect(net, producers, consumers, lengths, {}, "ecp5 fabric")  # between cores: the default FIFOs
    return net


def _core_sources(folder: Path, document: DesignRecord) -> list[str]:
    """The Verilog the top reads, relative to the project: one copy of the shared library, then
    every core's own files (its top and layers)."""
    first = cell_name(document.cores[0].name)
    sources = [f"{RTL_DIR}/{first}/{LIBRARY_FILE}"]
    for core in document.cores:
        name = cell_name(core.name)
        sources += sorted(f"{RTL_DIR}/{name}/{path.name}" for path in (folder / RTL_DIR / name).glob("*.v")
                          if path.name != LIBRARY_FILE)
    return sources


def write_ecp5_scripts(document: DesignRecord, folder: Path, board: Board) -> None:
    """Write ``ecp5/`` (fabric, top, UART, pins) and the Makefile of ``document``'s project into
    ``folder``, whose ``rtl/`` is written; a one-line error for what the flow cannot build."""
    ecp5 = board.ecp5
    assert ecp5 is not None
    folder = Path(folder)
    _check_buildable(document, folder, ecp5)
    target = folder / ECP5_DIR
    target.mkdir(parents=True, exist_ok=True)
    fed, drained = host_tensors(document)
    source, result = fed[0][0].inputs[fed[0][1]], drained[0][0].outputs[drained[0][1]]
    net = fabric_netlist(document, folder)
    env = environment()
    ports = [{"name": "s0_axis", "elems": 1, "direction": "input", "back": "output"},
             {"name": "m0_axis", "elems": 1, "direction": "output", "back": "input"}]
    (target / f"{FABRIC}.v").write_text(env.get_template("rtl/core.v.j2").render(
        name=FABRIC, title=f"the cores of {document.model.name} on {board.name}, joined by streams, and the "
        "host's\n// input (s0_axis) and output (m0_axis), one byte a beat. Generated by fpgaplace.codegen."
        "blockdesign.ecp5\n// from hls_templates/rtl/core.v.j2; Verilog-2005.", parts="cores", core="",
        ports=ports, streams=net.streams, assigns=net.assigns, instances=net.instances,
        layers=[f"{core.name}: {', '.join(layer.op for layer in core.layers)}" for core in document.cores]))
    context = {"board": board.name, "part": board.part, "ecp5": ecp5, "clock_mhz": f"{ecp5.clock_mhz:g}",
               "clock_hz": round(ecp5.clock_mhz * 1e6), "baud": ecp5.baud, "input": source.name,
               "output": result.name, "input_bytes": _sample_bytes(source), "output_bytes": _sample_bytes(result),
               "input_depth_bits": index_bits(_sample_bytes(source))}
    for name, template in ((f"{TOP}.v", "top.v.j2"), ("fp_uart.v", "uart.v.j2"), ("board.lpf", "board.lpf.j2")):
        (target / name).write_text(env.get_template(f"project/ecp5/{template}").render(**context))
    sources = [f"{ECP5_DIR}/{TOP}.v", f"{ECP5_DIR}/fp_uart.v", f"{ECP5_DIR}/{FABRIC}.v",
               *_core_sources(folder, document)]
    (folder / MAKEFILE).write_text(env.get_template("project/ecp5/Makefile.j2").render(
        **context, device=ecp5.device, package=ecp5.package, speed=ecp5.speed, sources=sources,
        build=ECP5_DIR, bit=bitstream_files(1, "", alveo=False)[0], bitstream_dir=BITSTREAM_DIR,
        bin=Path(sys.executable).parent))
