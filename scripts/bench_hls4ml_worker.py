"""The hls4ml half of scripts/bench_csim.py; runs under the benchmark's own hls4ml venv, not fpgaplace's.

    .bench/hls4ml-venv/bin/python scripts/bench_hls4ml_worker.py REQUEST.json RESULT.json

REQUEST.json holds ``model`` (a float ONNX file, batch 1, NCHW for CNNs, every Conv/MaxPool attribute
explicit), ``samples`` (a .npy of N inputs, the model's input shape without the batch axis),
``output_dir`` (a fresh folder for the hls4ml project), ``io_type`` (io_parallel or io_stream),
``precision`` (e.g. fixed<16,6>) and ``backend`` (Vitis). RESULT.json gets ``prepare_seconds``
(qonnx cleanup, channels-last, Gemm to MatMul), ``convert_seconds`` (config + convert_from_onnx_model),
``compile_seconds`` (writing the C++ and building it with g++ into a shared library),
``build_seconds`` (their sum), ``run_seconds`` (one ``predict()`` over all N samples),
``samples``, ``hls4ml_version`` and ``outputs`` (N rows of floats). hls4ml's own chatter goes to
stdout; nothing else is printed.

The recipe is hls4ml's documented ONNX path (docs/frontend/qonnx.rst in hls4ml 1.3.0): qonnx's
``cleanup_model``, ``ConvertToChannelsLastAndClean``, ``GemmToMatMul``, ``cleanup_model`` again, then
``config_from_onnx_model(granularity='name')``. Softmax uses the 'legacy' implementation, as hls4ml's
own ONNX tests do: the default 'stable' one indexes its exp table by the top bits of its input type,
and the auto-sized Dense result feeding it (ap_fixed<38,18> here) makes that table lookup wrong
(top-1 agreement 36% on the 16-64-32-5 MLP against 99% with 'legacy').
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np


def prepare(model_path: str):
    """qonnx clean-up and channels-last conversion that hls4ml's ONNX frontend requires."""
    import qonnx.util.cleanup
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.channels_last import ConvertToChannelsLastAndClean
    from qonnx.transformation.gemm_to_matmul import GemmToMatMul

    model = qonnx.util.cleanup.cleanup_model(ModelWrapper(model_path))
    model = model.transform(ConvertToChannelsLastAndClean())
    model = model.transform(GemmToMatMul())
    return qonnx.util.cleanup.cleanup_model(model)


def convert(model, request: dict):
    """hls4ml config (per-layer names, one default precision) and the converted ModelGraph."""
    import hls4ml

    config = hls4ml.utils.config.config_from_onnx_model(
        model, granularity="name", backend=request["backend"], default_precision=request["precision"]
    )
    for name, layer in config["LayerName"].items():
        if name.startswith("Softmax"):
            layer["Implementation"] = "legacy"
    return hls4ml.converters.convert_from_onnx_model(
        model,
        output_dir=request["output_dir"],
        io_type=request["io_type"],
        backend=request["backend"],
        hls_config=config,
    )


class ConversionRefused(Exception):
    """hls4ml's conversion raised; the message is one line: the stage, the exception's first line and
    the last warning hls4ml gave before it (often the real reason, e.g. an unsupported MatMul)."""


def convert_or_explain(model, request: dict):
    """``convert`` with hls4ml's warnings kept, so that a failure can name what hls4ml warned about."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return convert(model, request)
        except Exception as error:  # noqa: BLE001 -- any failure inside hls4ml is the answer reported
            first_line = (str(error).splitlines() or [""])[0].strip()
            warned = [str(w.message).splitlines()[0] for w in caught if issubclass(w.category, UserWarning)]
            note = f"; hls4ml warned: {warned[-1]}" if warned else ""
            raise ConversionRefused(f"convert_from_onnx_model: {type(error).__name__}: {first_line}{note}") from error


# The softmax's exp and 1/sum tables: HGQ2's default table entries have 4 bits (max abs error 1.15 on
# the 2-head layer against 0.0102 with 12, HGQ2's largest allowed width).
SOFTMAX_TABLE_BITS = 12


def fixed_bits(precision: str) -> tuple[int, int]:
    """Integer bits without the sign and fraction bits of ``fixed<W,I>`` (HGQ2's kif i and f)."""
    width, integer = (int(part) for part in precision.split("<", 1)[1].rstrip(">").split(","))
    return integer - 1, width - integer


def hgq2_attention(model_path: str, precision: str):
    """The bench's self-attention ONNX model (scripts/bench_csim.py ``self_attention``) as a Keras 3
    model of one HGQ2 QMultiHeadAttention with the same weights, every quantizer kif at ``precision``
    saturating (wrapping overflows the scores at fixed<16,6>), the softmax tables of
    SOFTMAX_TABLE_BITS with one integer bit. HGQ2's layer has no key bias: q·b_k
    is the same for every key of a query, so the softmax, and the layer, do not change without it."""
    import os

    os.environ.setdefault("KERAS_BACKEND", "jax")
    import keras
    import onnx
    from hgq.config import QuantizerConfigScope
    from hgq.layers import QMultiHeadAttention
    from onnx import numpy_helper

    graph = onnx.load(model_path).graph
    weights = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    seq, hidden = (d.dim_value for d in graph.input[0].type.tensor_type.shape.dim[1:])
    heads = int(weights["split_heads_shape"][2]) if "split_heads_shape" in weights else 1
    head_dim = hidden // heads
    integer, fraction = fixed_bits(precision)
    x = keras.Input((seq, hidden))
    with (QuantizerConfigScope(place=("datalane", "weight", "bias"), q_type="kif", default_q_type="kif",
                               i0=integer, f0=fraction, overflow_mode="SAT"),
          QuantizerConfigScope(place="table", q_type="kbi", b0=SOFTMAX_TABLE_BITS, i0=1)):
        layer = QMultiHeadAttention(num_heads=heads, key_dim=head_dim)
        keras_model = keras.Model(x, layer(x, x))
    for dense, name in ((layer._query_dense, "query"), (layer._key_dense, "key"), (layer._value_dense, "value")):
        dense.kernel.assign(weights[f"{name}_w"].reshape(hidden, heads, head_dim))
        if name != "key":
            dense.bias.assign(weights[f"{name}_b"].reshape(heads, head_dim))
    layer._output_dense.kernel.assign(weights["attn_out_w"].reshape(heads, head_dim, hidden))
    layer._output_dense.bias.assign(weights["attn_out_b"])
    return keras_model


def convert_hgq2(request: dict):
    """hls4ml's Keras 3 path for the HGQ2 attention model (its only multi-head attention layer)."""
    import hls4ml

    keras_model = hgq2_attention(request["model"], request["precision"])
    config = hls4ml.utils.config_from_keras_model(keras_model, granularity="name", backend=request["backend"])
    return hls4ml.converters.convert_from_keras_model(
        keras_model, hls_config=config, output_dir=request["output_dir"], io_type=request["io_type"],
        backend=request["backend"],
    )


def run(request: dict) -> dict:
    """Build the C simulation of ``request['model']`` and run it on ``request['samples']``.
    ``request['frontend']`` 'hgq2' takes the attention model through HGQ2 and Keras 3 instead of ONNX."""
    import hls4ml

    samples = np.ascontiguousarray(np.load(request["samples"]).astype(np.float32))
    start = time.perf_counter()
    if request.get("frontend") == "hgq2":
        prepared = start
        hls_model = convert_hgq2(request)
    else:
        model = prepare(request["model"])
        prepared = time.perf_counter()
        hls_model = convert_or_explain(model, request)
    converted = time.perf_counter()
    hls_model.compile()
    compiled = time.perf_counter()
    outputs = np.asarray(hls_model.predict(samples), dtype=np.float64).reshape(len(samples), -1)
    finished = time.perf_counter()
    return {
        "hls4ml_version": hls4ml.__version__,
        "prepare_seconds": prepared - start,
        "convert_seconds": converted - prepared,
        "compile_seconds": compiled - converted,
        "build_seconds": compiled - start,
        "run_seconds": finished - compiled,
        "samples": len(samples),
        "outputs": outputs.tolist(),
    }


def main() -> None:
    request_path, result_path = sys.argv[1:3]
    result = run(json.loads(Path(request_path).read_text()))
    Path(result_path).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
