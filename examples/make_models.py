"""Write the small models fpgaplace builds itself to ONNX files, for trying the CLI on them.

    python examples/make_models.py [FOLDER]      # default: examples/models/

Writes cnn_residual.onnx (the demo's CNN), bert_encoder_layer.onnx, mlp.onnx and multi_io.onnx,
all built with onnx.helper and seeded random weights (no download).
"""

from __future__ import annotations

import sys
from pathlib import Path

import onnx

from fpgaplace import models

BUILDERS = {
    "cnn_residual": models.cnn_residual,
    "bert_encoder_layer": models.bert_encoder_layer,
    "mlp": models.mlp,
    "multi_io": models.multi_io,
}


def main(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, build in BUILDERS.items():
        path = folder / f"{name}.onnx"
        onnx.save(build(), path)
        print(path)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "models")
