"""``fpgaplace run-cluster``: a split model as a pipeline of Ray actors, its throughput measured."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fpgaplace.cli.options import JsonOption
from fpgaplace.cli.output import err, out, print_json


def run_cluster(
    split_dir: Annotated[Path, typer.Argument(help="A split folder written by `fpgaplace split` (has manifest.json).")],
    samples: Annotated[int, typer.Option("--samples", "-n", min=1, help="Random inputs to stream through.")] = 32,
    address: Annotated[
        str | None, typer.Option("--address", help="Join this Ray cluster (host:port); default: start a local one.")
    ] = None,
    timeout: Annotated[float, typer.Option("--timeout", min=0.1, help="Seconds to wait for any one sample.")] = 60.0,
    max_restarts: Annotated[int, typer.Option("--max-restarts", min=0, help="Restarts allowed per actor.")] = 1,
    whole_model: Annotated[
        Path | None, typer.Option("--compare", help="The unsplit ONNX model: also time it in one session.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Run a split model as a pipeline of Ray actors (one per device) and measure its throughput.

    Example: fpgaplace split model.onnx --board cluster-2x-zcu104 --out split/
             && fpgaplace run-cluster split/ -n 64 --compare model.onnx
    """
    from fpgaplace.deploy.cluster import run_cluster as run_pipeline
    from fpgaplace.deploy.cluster import run_whole

    with err.status(f"streaming {samples} samples through Ray actors..."):
        result = run_pipeline(split_dir, samples, address=address, timeout_s=timeout, max_restarts=max_restarts)
    document = {
        "samples": result.samples,
        "devices": result.devices,
        "wall_s": result.wall_s,
        "samples_per_s": result.throughput,
        "stage_busy_s": result.stage_busy_s,
        "restarts": result.restarts,
        "address": result.address,
    }
    if whole_model is not None:
        whole = run_whole(whole_model, samples)
        document["whole_samples_per_s"] = whole.throughput
        document["speedup"] = result.throughput / whole.throughput if whole.throughput else None
    if as_json:
        print_json(document)
        return
    out.print(
        f"{result.samples} samples through {len(result.devices)} actors ({', '.join(result.devices)}): "
        f"{result.throughput:.1f} samples/s"
        + (f", restarts {result.restarts}" if any(result.restarts.values()) else "")
    )
    if whole_model is not None:
        out.print(
            f"whole model, one session: {document['whole_samples_per_s']:.1f} samples/s "
            f"(speed-up {document['speedup']:.2f}x)"
        )
