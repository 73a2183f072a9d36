"""examples/make_models.py writes models the front end loads."""

import subprocess
import sys
from pathlib import Path

from fpgaplace.model.frontend.load import load_onnx

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "make_models.py"


def test_make_models_writes_loadable_models(tmp_path):
    result = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    written = sorted(p.name for p in tmp_path.glob("*.onnx"))
    assert written == ["bert_encoder_layer.onnx", "cnn_residual.onnx", "mlp.onnx", "multi_io.onnx"]
    for path in tmp_path.glob("*.onnx"):
        graph = load_onnx(path)
        assert graph.ops and graph.total_macs > 0
