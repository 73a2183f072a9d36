"""A core's arrays (weights, biases, requantization factors, tables), as compile stores them in
``cores/<core>/layers.npz`` under ``<layer index>.<array name>`` and design.json's layers name
them. O(bytes of the archive)."""

from __future__ import annotations

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
