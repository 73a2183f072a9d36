"""``fpgaplace csim``: C-simulate a project, every core bit-exact and the outputs within 1 LSB
(or every layer within 1 LSB on onnxruntime's own inputs: ``fpgaplace.sim.csim.LayerCheck``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fpgaplace.cli.options import JsonOption, ProjectArgument, SeedOption
from fpgaplace.cli.output import print_csim, print_json, progress
from fpgaplace.util.errors import FpgaplaceError, first_line
from fpgaplace.util.files import write_with


def csim(
    project: ProjectArgument,
    samples: Annotated[int, typer.Option("--samples", "-n", help="Random inputs to simulate.")] = 1,
    seed: SeedOption = 0,
    inputs_file: Annotated[
        Path | None,
        typer.Option("--inputs", help="A .npy of samples for the model's one input, shape (N, *input shape "
                     "without its batch of 1); replaces --samples random inputs."),
    ] = None,
    save_outputs: Annotated[
        Path | None, typer.Option("--save-outputs", help="Write the outputs of every sample to this .npz file.")
    ] = None,
    layers: Annotated[
        bool, typer.Option("--layers", help="Check every sample piece by piece: each core layer and CPU piece fed "
                           "onnxruntime's own inputs and compared with its output (done anyway for a sample whose "
                           "outputs are more than 1 LSB off).")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """C-simulate a project: every core bit-exact, outputs within 1 LSB. Exit 1 when not.

    Each core is built with g++ and checked bit-exactly against its integer reference; the
    model's outputs are compared with onnxruntime running the QDQ model. Where a deep model
    carries a one-step rounding difference to more than 1 LSB at an output, the sample still
    passes if every core layer and CPU piece, fed onnxruntime's own inputs, is within 1 LSB of
    onnxruntime's output of it (the check csim then prints; --layers runs it on every sample).

    Example: fpgaplace csim project/ --samples 8
    """
    from fpgaplace.sim.csim import run_csim

    if samples < 1:
        raise FpgaplaceError(f"--samples: expected a positive number of inputs, got {samples}")
    if not project.is_dir():
        raise FpgaplaceError(f"{project}: not a folder; expected a project written by `fpgaplace compile`")
    given = _load_samples(inputs_file) if inputs_file is not None else None
    if save_outputs is not None and not save_outputs.parent.is_dir():
        raise FpgaplaceError(f"--save-outputs {save_outputs}: folder {save_outputs.parent} does not exist")
    result = run_csim(project, samples=samples, seed=seed, progress=progress, inputs=given, layers=layers)
    if save_outputs is not None:
        _write_npz_atomically(save_outputs, result.values)
    document = result.to_json()
    if as_json:
        print_json(document)
    else:
        print_csim(document)
    if not document.get("ok"):
        raise typer.Exit(1)


def _load_samples(path: Path):
    """The samples of ``--inputs``: a numeric .npy array with a leading sample axis."""
    import numpy as np

    try:
        samples = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as error:
        raise FpgaplaceError(f"--inputs {path}: not a readable .npy array ({first_line(error)})") from None
    if samples.ndim < 1 or samples.dtype.kind not in "fiub":
        raise FpgaplaceError(f"--inputs {path}: expected a numeric array of shape (N, ...), got {samples.dtype} "
                             f"{list(samples.shape)}")
    return samples


def _write_npz_atomically(path: Path, arrays: dict) -> None:
    import numpy as np

    def save(temporary: Path) -> None:
        with temporary.open("wb") as stream:  # a file object: numpy adds no .npz suffix
            np.savez(stream, **arrays)

    try:
        write_with(path, save)
    except OSError as error:
        raise FpgaplaceError(f"--save-outputs {path}: cannot write ({error.strerror})") from None
