"""What the ``fpgaplace`` command prints: the two consoles, progress lines, ``--json`` output,
the error mapping (an ``FpgaplaceError`` or a refused read or write is one ``error:`` line on
stderr and exit status 1, never a traceback; a library error names a parameter, the line names
the flag that sets it) and the printers more than one command shares.
"""

from __future__ import annotations

import functools
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from typer.core import TyperGroup

from fpgaplace.util.errors import FpgaplaceError, first_line

out = Console()
err = Console(stderr=True)


# ---- errors ------------------------------------------------------------------------------

def print_error(message: str) -> None:
    """``error: message`` as one line on stderr (the message's whitespace collapsed)."""
    err.print(f"[bold red]error:[/] {escape(' '.join(message.split()))}", highlight=False, soft_wrap=True)


class OneLineErrorGroup(TyperGroup):
    """The command group with click's usage errors (a bad value, an unknown option, a missing
    argument) printed as one ``error:`` line, like every other error, instead of a boxed panel."""

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except typer.Abort:
            print_error("aborted")
            sys.exit(1)
        except typer.TyperException as error:  # typer's (vendored click's) usage errors
            if type(error).__name__ == "NoArgsIsHelpError":  # no arguments: the help, as click prints it
                error.show()
            else:
                print_error(error.format_message() + _help_hint(error))
            sys.exit(getattr(error, "exit_code", 2))
        sys.exit(code if isinstance(code, int) else 0)


def _help_hint(error: Exception) -> str:
    context = getattr(error, "ctx", None)
    return f" (see `{context.command_path} --help`)" if context is not None else ""


# Library errors name a parameter; the user typed a flag.
PARAMETER_FLAGS = {
    "input_shapes": "--input-shape",
    "time_limit": "--time-limit",
    "random_samples": "--random",
    "calib_dir": "--calib",
    "input_ranges": "--input-range",
    "subgraphs_per_device": "--subgraphs-per-device",
    "out_dir": "--out",
}
LEADING_PARAMETERS = ("precision", "target", "objective", "method", "samples", "board", "batch")  # flag = --name


def flag_message(message: str) -> str:
    """``message`` with the parameter names it uses replaced by the flags that set them: the
    ``PARAMETER_FLAGS`` anywhere, the ``LEADING_PARAMETERS`` where they lead the message or
    follow the name of the file it is about ("model.onnx: batch must be ..."); an example value
    ``input_shapes={'x': (1, 3, h, w)}`` becomes ``--input-shape x=1x3x<h>x<w>``."""
    message = re.sub(r"input_shapes=\{'([^']*)': \(([^)]*)\)\}", _input_shape_flag, message)
    for parameter, flag in PARAMETER_FLAGS.items():
        message = re.sub(rf"(?<![\w-]){parameter}\b", flag, message)
    return re.sub(rf"(^|: )({'|'.join(LEADING_PARAMETERS)})(?=[: ])", r"\1--\2", message)


def _input_shape_flag(match: re.Match) -> str:
    """``input_shapes={'x': (1, 3, h, w)}`` (groups: name, dims) as ``--input-shape x=1x3x<h>x<w>``."""
    dims = [dim.strip() for dim in match[2].split(",") if dim.strip()]
    return f"--input-shape {match[1]}=" + "x".join(dim if dim.isdigit() else f"<{dim}>" for dim in dims)


def user_errors(command):
    """Turn ``FpgaplaceError`` into one line on stderr and exit status 1."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except FpgaplaceError as error:
            print_error(flag_message(str(error)))
            raise typer.Exit(1) from None
        except OSError as error:  # the system refused a read or write: name the file and the reason
            where = f"{error.filename}: " if error.filename else ""
            print_error(f"{where}{error.strerror or first_line(error)}")
            raise typer.Exit(1) from None

    return wrapper


# ---- progress, JSON, numbers -------------------------------------------------------------

def progress(message: str) -> None:
    """One dim line on stderr per stage or solver report."""
    err.print(f"[dim]{escape(message)}[/]", highlight=False, soft_wrap=True)


def print_json(data) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=_json_default) + "\n")


def _json_default(value):
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def write_json_atomically(path: Path, data) -> None:
    """``data`` as the JSON ``--json`` prints, written to ``path`` through a temporary file."""
    from fpgaplace.util.files import write_file  # here: shutil and tempfile cost the CLI's start 7 ms

    try:
        write_file(path, json.dumps(data, indent=2, default=_json_default) + "\n")
    except OSError as error:
        raise FpgaplaceError(f"{path}: cannot write the placement: {error.strerror}") from None


def finite(value: float) -> float | None:
    """``value``, or None (JSON null) for an infinity or NaN."""
    return value if math.isfinite(value) else None


def human(value: float, unit: str = "") -> str:
    """1234567 -> '1.23 M'; keeps tables narrow."""
    if not math.isfinite(value):
        return "—"
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {suffix}{unit}"
    return f"{value:.3g} {unit}".rstrip()


# ---- printers shared by commands (place and demo; compile, csim and demo) ----------------

def print_results(problem, results, objective: str, names: list[str] | None = None) -> None:
    """One row per placement result (method, value, bound, gap, status, seconds, feasible); for
    one result, its devices' loads and ops too."""
    unit = problem.meta.get("unit", "")
    table = Table(title=f"{problem.source}: {objective}" + (f" ({unit})" if unit else ""))
    for column in ("method", "value", "bound", "gap", "status", "seconds", "feasible"):
        table.add_column(column, justify="left" if column in ("method", "status") else "right")
    for r in results:
        p = r.placement
        table.add_row(
            p.method,
            f"{r.value:.6g}",
            f"{p.bound:.6g}" if math.isfinite(p.bound) else "—",
            f"{p.gap:.2%}" if math.isfinite(p.gap) else "—",
            p.status,
            f"{p.seconds:.2f}",
            "yes" if r.evaluation.feasible else "; ".join(r.evaluation.violations)[:60],
        )
    out.print(table)
    if len(results) == 1:
        _print_devices(problem, results[0], names)


def _print_devices(problem, result, names: list[str] | None) -> None:
    names = names or [problem.device_name(d) for d in range(len(problem.devices()))]
    table = Table(title="placement")
    for column in ("device", "load", "ops"):
        table.add_column(column)
    for device, load in enumerate(result.evaluation.loads):
        members = [problem.names[v] for v in range(problem.n) if result.placement.device[v] == device]
        if members:
            shown = ", ".join(members[:6]) + (f", … ({len(members)} ops)" if len(members) > 6 else "")
            table.add_row(names[device], f"{load:.6g}", shown)
    out.print(table)


def print_compile(document: dict, board) -> None:
    """Per-core table (core, ops, DSP, BRAM36, URAM, LUT, cycles, fps), each core's folded
    interval against the placement's plan and what binds it (a core folded for ``--fps``: against
    that rate, as its plan is the fastest folding's), and the CPU ops."""
    table = Table(title=f"project {document.get('project', '')} on {board.name}")
    for column in ("core", "ops", "DSP", "BRAM36", "URAM", "LUT", "cycles", "fps"):
        table.add_column(column, justify="left" if column == "core" else "right")
    for core in document.get("cores", []):
        ops = core.get("ops", [])
        cycles, fps = core.get("cycles"), core.get("fps")
        table.add_row(core["name"], str(len(ops) if isinstance(ops, list) else ops),
                      *[str(core.get(key, "—")) for key in ("dsp", "bram36", "uram", "lut")],
                      f"{cycles:,}" if isinstance(cycles, int) else str(cycles),
                      human(fps) if isinstance(fps, int | float) else "—")
    out.print(table)
    target = (document.get("refinement") or {}).get("fps_target")
    for core in document.get("cores", []):
        interval, plan = core.get("interval_us"), core.get("planned_compute_us")
        if isinstance(interval, int | float) and target and core.get("binding") == ["fps"]:
            out.print(f"{core['name']}: folded interval {interval:.4g} us ({human(core.get('fps') or 0)} fps) on its "
                      f"cheapest foldings that keep up with the {human(target)} fps asked for (--fps)")
        elif isinstance(interval, int | float) and plan:
            binding = ", ".join(BINDING_WORDS.get(name, name) for name in core.get("binding", [])) or \
                "nothing (every stage at its fastest folding)"
            lanes = {"dsp": "; its 2-4-bit lanes packed into DSPs (faster than on LUTs here)",
                     "lut": "; its 2-4-bit lanes on LUTs (faster than packed into DSPs here)"}.get(
                core.get("narrow_lanes"), "")
            out.print(f"{core['name']}: folded interval {interval:.4g} us, {interval / plan - 1:+.0%} against the "
                      f"plan; bound by {binding}{lanes}")
    print_layer_widths(document.get("layers", []))
    print_left_on_cpus(document.get("left_on_cpus") or {"ops": len(document.get("cpu_ops", [])), "groups": []})
    if isinstance(document.get("fps"), int | float):
        out.print(f"pipeline: {document['interval_us']:.4g} us per batch, {document['fps']:.4g} samples/s")


BINDING_WORDS = {"fps": "the rate asked for (--fps), on its cheapest foldings"}
"""How ``print_compile`` says a core's binding names that are not a resource."""


def print_layer_widths(layers: list[dict]) -> None:
    """Each core layer's widths (``record.LayerWidths.text``: ``w4 a4 -> a4 (thresholds)``), one line
    per layer; one line in all when every layer is int8 and requantizes."""
    from fpgaplace.project.record import LayerWidths

    widths = [(layer, LayerWidths(**layer["widths"])) for layer in layers if layer.get("widths")]
    if all(w.weights in (None, 8) and set(w.inputs) == {8} and w.output == 8 and w.output_stage != "thresholds"
           for _, w in widths):
        out.print(f"layer widths: all {len(widths)} layers int8")
        return
    out.print("layer widths (weights, inputs -> output, output stage):")
    for layer, w in widths:
        out.print(f"  {layer['core']} {escape(layer['op'])} ({layer['kernel']}): {w.text()}")


CPU_GROUPS_SHOWN = 8  # groups of CPU ops printed; the rest are counted (--json lists them all)


def print_left_on_cpus(left: dict) -> None:
    """The ops left on the CPUs by (op type, reason), the largest groups first, and what they
    cost: the fps as placed (and the device that sets it) beside the fps of the cores alone."""
    groups = left.get("groups", [])
    out.print(f"CPU ops: {left.get('ops', 0) or 'none'}" + (" (count × op type: reason)" if groups else ""))
    for group in groups[:CPU_GROUPS_SHOWN]:
        out.print(f"  {group['count']} × {group['op_type']}: {escape(group['reason'])}")
    rest = groups[CPU_GROUPS_SHOWN:]
    if rest:
        out.print(f"  … {sum(g['count'] for g in rest)} more in {len(rest)} groups (--json lists every op)")
    fps, alone = left.get("fps"), left.get("cores_alone_fps")
    if isinstance(fps, int | float) and isinstance(alone, int | float):
        binding = f", set by {left['binding']}" if left.get("binding") else ""
        out.print(f"fps as placed: {human(fps)}{binding}; the cores alone: {human(alone)} "
                  f"({left.get('slowest_core')} the slowest)")


def print_csim(document: dict) -> None:
    """Cores bit-exact yes/no, outputs' max difference in LSB (outside the band of onnxruntime's
    two runs, and from its optimized run), where a sample first differed, build and run seconds."""
    table = Table(title="C simulation")
    table.add_column("core")
    table.add_column("bit-exact")
    for core in document.get("cores", []):
        first = f" ({core['first_mismatch']})" if core.get("first_mismatch") else ""
        table.add_row(core["name"], "yes" if core.get("bit_exact") else f"[red]no[/]{escape(first)}")
    out.print(table)
    outputs = Table(title="model outputs against onnxruntime (QDQ model), LSB outside the band of its two runs")
    outputs.add_column("output")
    outputs.add_column("max diff (LSB)", justify="right")
    outputs.add_column("from the optimized run (LSB)", justify="right")
    for entry in document.get("outputs", []):
        lsb, optimized = entry.get("max_abs_diff_lsb"), entry.get("max_lsb_optimized")
        outputs.add_row(entry["name"], f"{lsb:g}" if lsb is not None else f"— (float {entry['max_abs_diff']:.3g})",
                        "—" if optimized is None else f"{optimized:g}")
    out.print(outputs)
    if document.get("first_difference"):
        out.print(f"first difference: {escape(document['first_difference'])}")
    layers = document.get("layers") or {}
    if layers.get("samples"):
        if layers.get("within_one_step"):
            verdict = "each within 1 LSB: the outputs' larger difference grew from one-step rounding differences"
        elif layers.get("unchecked"):
            verdict = f"not shown: onnxruntime's run lacks the inputs of {', '.join(layers['unchecked'])}"
        else:
            verdict = f"worst {layers.get('worst_lsb'):g} LSB at {layers.get('worst')}"
        out.print(f"piece by piece on onnxruntime's own inputs ({layers['samples']} samples, "
                  f"{layers.get('compared')} layer and piece outputs): {escape(verdict)}")
    out.print(f"built in {document.get('build_seconds', 0):.1f} s, ran in {document.get('run_seconds', 0):.1f} s: "
              + ("[green]ok[/]" if document.get("ok") else "[red]not exact[/]"))
