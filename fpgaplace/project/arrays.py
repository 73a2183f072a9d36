"""A core's layer arrays as compile stores them: ``cores/<core>/layers.npz``, keys ``<i>.<name>``
(layer ``i``'s weights, bias, multipliers, ...). Read by the RTL writer and the RTL simulation;
O(the arrays)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from fpgaplace.util.errors import FpgaplaceError

LAYER_ARRAYS = "layers.npz"


def load_layer_arrays(project: Path, record: dict[str, Any]) -> list[dict[str, np.ndarray]]:
    """Each layer's arrays of the core ``record`` of ``project`` (its layers name their arrays)."""
    path = Path(project) / record["folder"] / LAYER_ARRAYS
    if not path.is_file():
        raise FpgaplaceError(f"{path}: missing; expected the core's layer arrays (compile writes them)")
    with np.load(path) as stored:
        return [{key: stored[f"{i}.{key}"] for key in layer["arrays"]} for i, layer in enumerate(record["layers"])]
