"""Write the small models fpgaplace builds itself to ONNX files, for trying the CLI on them.

    python examples/make_models.py [FOLDER]      # default: examples/models/

Writes cnn_residual.onnx (the demo's CNN), bert_encoder_layer.onnx, mlp.onnx and multi_io.onnx,
all built with onnx.helper and seeded random weights (no download). Then, for example:

    fpgaplace inspect FOLDER/cnn_residual.onnx --input-shape image=1x3x32x32
    fpgaplace place FOLDER/bert_encoder_layer.onnx --board zcu104
"""

from __future__ import annotations

import argparse
from pathlib import Path

import onnx

from fpgaplace.model import zoo as models

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


def parse_folder(argv: list[str] | None = None) -> Path:
    """The output folder from the command line (``--help`` explains the script)."""
    summary, _, usage = __doc__.partition("\n\n")
    parser = argparse.ArgumentParser(description=summary, epilog=usage, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("folder", nargs="?", type=Path, default=Path(__file__).parent / "models",
                        help="where to write the .onnx files (created if missing; default: examples/models/)")
    return parser.parse_args(argv).folder


if __name__ == "__main__":
    main(parse_folder())
