"""What makes a model a QDQ model, defined once: it carries QuantizeLinear/DequantizeLinear nodes
(onnxruntime's static quantization writes one pair around every int8 tensor). The front end, the
optimizer's choice of passes, quantization (which refuses to quantize twice) and the op library's
lowering check all ask here. Whether the nodes are valid is ``fpgaplace.model.quantize.check_qdq``'s
question. O(nodes).
"""

from __future__ import annotations

import onnx

QDQ_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})
QDQ_DOMAINS = frozenset({"", "ai.onnx", "com.microsoft"})


def qdq_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """The model's QuantizeLinear and DequantizeLinear nodes (default or Microsoft domain), in order."""
    return [n for n in model.graph.node if n.op_type in QDQ_OPS and n.domain in QDQ_DOMAINS]


def is_qdq(model: onnx.ModelProto) -> bool:
    """True if the model is in QDQ form: it has QuantizeLinear or DequantizeLinear nodes."""
    return bool(qdq_nodes(model))
