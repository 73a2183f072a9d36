"""A core's arrays (weights, biases, requantization factors, tables), as compile stores them in
``cores/<core>/layers.npz`` under ``<layer index>.<array name>`` and design.json's layers name
them. O(bytes of the archive)."""

from __future__ import annotations

import math
import zipfile
from pathlib import Path

import numpy as np

from fpgaplace.project.layout import LAYERS_FILE
from fpgaplace.project.record import Core
from fpgaplace.util.errors import FpgaplaceError, first_line


def load_arrays(project: Path, record: Core) -> list[dict[str, np.ndarray]]:
    """Each layer's arrays from the core's ``layers.npz``; a missing, damaged or incomplete
    archive is a one-line error naming it."""
    path = project / record.folder / LAYERS_FILE
    try:
        with np.load(path) as archive:
            return [{key: archive[f"{i}.{key}"] for key in layer.arrays} for i, layer in enumerate(record.layers)]
    except FileNotFoundError:
        raise FpgaplaceError(f"{path}: missing; expected the arrays of core {record.name} (compile writes it)"
                             ) from None
    except KeyError as error:
        raise FpgaplaceError(f"{path}: no array {first_line(error)}; expected the arrays design.json's layers of "
                             f"{record.name} name") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
        raise FpgaplaceError(f"{path}: not a readable archive ({first_line(error)})") from None


def weight_bytes(project: Path, core: Core) -> tuple[int, int] | None:
    """Bytes of weights (every array of a layer) held on chip and streamed, from the core's
    ``layers.npz`` (sizes from the archive's headers: nothing is loaded); None without the file."""
    path = project / core.folder / LAYERS_FILE
    if not path.is_file():
        return None
    resident = [layer.resident for layer in core.layers]
    onchip = streamed = 0
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                layer = info.filename.split(".", 1)[0]
                nbytes = _npy_data_bytes(archive, info)
                if layer.isdigit() and int(layer) < len(resident) and not resident[int(layer)]:
                    streamed += nbytes
                else:
                    onchip += nbytes
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
        raise FpgaplaceError(f"{path}: not a readable .npz of layer arrays ({first_line(error)})") from None
    return onchip, streamed


def _npy_data_bytes(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> int:
    """The data bytes of one .npy member: its size less the header the format puts first."""
    with archive.open(info) as stream:
        version = np.lib.format.read_magic(stream)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read_header(stream)
    return int(np.dtype(dtype).itemsize * math.prod(shape))


def random_samples(record: Core, count: int, seed: int) -> list[list[np.ndarray]]:
    """``count`` random int8 samples for the core's input ports (the RTL tests' stimulus), seeded:
    each port's values the codes its layers read (``input_codes``: a low-bit input's range, as the
    layer before it on another core writes them), else the whole int8 range."""
    rng = np.random.default_rng(seed)
    codes = [input_codes(record, t.name) for t in record.inputs]
    return [[rng.integers(-128, 128, math.prod(t.sample_shape), dtype=np.int8) if values is None else
             rng.choice(values, math.prod(t.sample_shape)).astype(np.int8)
             for t, values in zip(record.inputs, codes, strict=True)] for _ in range(count)]


def input_codes(record: Core, tensor: str) -> np.ndarray | None:
    """The codes the core's layers read from ``tensor`` where their recorded widths
    (``LayerWidths``) narrow it below 8 bits: +-1 at one signed bit, ``[-2^(b-1), 2^(b-1))`` signed,
    ``[0, 2^b)`` unsigned (the narrowest reader's); None for int8. O(layers)."""
    ranges = []
    for layer in record.layers:
        widths = layer.widths
        if widths is None or tensor not in layer.inputs:
            continue
        k = layer.inputs.index(tensor)
        bits = widths.inputs[k] if k < len(widths.inputs) else 8
        signed = widths.inputs_signed[k] if widths.inputs_signed and k < len(widths.inputs_signed) else True
        if bits < 8:
            ranges.append(np.array([-1, 1]) if bits == 1 and signed else
                          np.arange(-(2 ** (bits - 1)), 2 ** (bits - 1)) if signed else np.arange(2**bits))
    return min(ranges, key=len) if ranges else None
