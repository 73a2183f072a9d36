"""What makes a model a QDQ model, defined once: it carries QuantizeLinear/DequantizeLinear nodes
(onnxruntime's static quantization writes one pair around every int8 tensor). The front end, the
optimizer's choice of passes, quantization (which refuses to quantize twice) and the op library's
lowering check all ask here. Whether the nodes are valid is ``fpgaplace.model.quantize.check_qdq``'s
question. O(nodes).
"""

from __future__ import annotations

import json

import onnx

QDQ_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})
QDQ_DOMAINS = frozenset({"", "ai.onnx", "com.microsoft"})


def qdq_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """The model's QuantizeLinear and DequantizeLinear nodes (default or Microsoft domain), in order."""
    return [n for n in model.graph.node if n.op_type in QDQ_OPS and n.domain in QDQ_DOMAINS]


def is_qdq(model: onnx.ModelProto) -> bool:
    """True if the model is in QDQ form: it has QuantizeLinear or DequantizeLinear nodes."""
    return bool(qdq_nodes(model))


WIDTHS_KEY = "fpgaplace.widths"
"""The model metadata key holding the width of each int8 tensor narrower than 8 bits (a QONNX
model rewritten, ``fpgaplace.model.qonnx_qdq``; weights quantized below 8 bits,
``fpgaplace.model.quantize.narrow_weights``): JSON of tensor name -> ``{"bits", "signed",
"bipolar", "node"}``; the front end gives the tensors the DequantizeLinear nodes make of them
these widths."""


def read_widths(model: onnx.ModelProto) -> dict[str, dict]:
    """The widths ``model`` records (``WIDTHS_KEY``), or none. O(metadata)."""
    text = next((p.value for p in model.metadata_props if p.key == WIDTHS_KEY), None)
    return json.loads(text) if text else {}


def write_widths(model: onnx.ModelProto, widths: dict[str, dict]) -> None:
    """Record ``widths`` in ``model`` (in place), beside the widths it records already."""
    merged = {**read_widths(model), **widths}
    kept = [p for p in model.metadata_props if p.key != WIDTHS_KEY]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    model.metadata_props.add(key=WIDTHS_KEY, value=json.dumps(merged, sort_keys=True))


FROM_QONNX_KEY = "fpgaplace.from_qonnx"
"""Model metadata marking a QDQ model rewritten from a QONNX model (``fpgaplace.model.qonnx_qdq``),
whose values qonnx defines node by node in float: onnxruntime runs its CPU pieces without graph
optimizations (``fpgaplace.util.onnxrt.session``'s ``optimized``), as qonnx runs each node: its QDQ
fusions (integer QLinear kernels) and float fusions (a Conv and its BatchNormalization) round some
values one step away from the node-by-node definition."""


def is_from_qonnx(model: onnx.ModelProto) -> bool:
    """Whether ``model`` is a QDQ model rewritten from a QONNX model (``FROM_QONNX_KEY``)."""
    return any(p.key == FROM_QONNX_KEY for p in model.metadata_props)
