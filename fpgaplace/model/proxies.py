"""Shape proxies for contrib ops: for a node onnx shape inference does not know, default-domain
nodes writing the same first output with the same shape (``OpClass.shape_proxy``). O(attributes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import onnx
from onnx import helper

ShapeProxy = Callable[[onnx.NodeProto], onnx.NodeProto | list[onnx.NodeProto] | None]


def proxy(op_type: str, inputs: Iterable[int], *, optional: int = 0, keep_attrs: bool = True,
           dropped_attrs: Iterable[str] = (), refused_attrs: Iterable[str] = ()) -> ShapeProxy:
    """A proxy builder: ``op_type`` over the node's ``inputs`` (positions; the last ``optional``
    of them may be missing), writing its first output, with the node's attributes (if
    ``keep_attrs``) minus ``dropped_attrs`` and ``refused_attrs``; it builds none when a
    ``refused_attrs`` one is set (non-zero) or a required input is missing."""
    positions, dropped, refused = tuple(inputs), frozenset(dropped_attrs), frozenset(refused_attrs)
    required = positions[:len(positions) - optional]

    def build(node: onnx.NodeProto) -> onnx.NodeProto | None:
        if any(a.name in refused and helper.get_attribute_value(a) for a in node.attribute):
            return None
        if any(i >= len(node.input) or not node.input[i] for i in required):
            return None
        present = [node.input[i] for i in positions if i < len(node.input)]
        proxy = helper.make_node(op_type, present, node.output[:1], name=node.name)
        if keep_attrs:
            proxy.attribute.extend(a for a in node.attribute if a.name not in dropped | refused)
        return proxy

    return build


def fused_matmul_proxy(node: onnx.NodeProto) -> onnx.NodeProto | None:
    """FusedMatMul as MatMul, or with transA/transB as an Einsum over the last two dims (equal
    operand ranks only: onnx infers no shape for a broadcast ellipsis); none with transBatch."""
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if attrs.get("transBatchA") or attrs.get("transBatchB") or len(node.input) < 2:
        return None
    trans_a, trans_b = bool(attrs.get("transA")), bool(attrs.get("transB"))
    if not trans_a and not trans_b:
        return helper.make_node("MatMul", list(node.input[:2]), node.output[:1], name=node.name)
    equation = f"...{'km' if trans_a else 'mk'},...{'nk' if trans_b else 'kn'}->...mn"
    return helper.make_node("Einsum", list(node.input[:2]), node.output[:1], name=node.name,
                            equation=equation)


SAME_AS_INPUT = proxy("Identity", [0], keep_attrs=False)


def channels_last(proxy: ShapeProxy) -> ShapeProxy:
    """``proxy`` of the node without its ``channels_last`` attribute; when that is set (NHWC
    tensors, as onnxruntime's layout transformer leaves them), between Transposes of the first
    input to channels-first and of the output back. The rank is kernel_shape's plus 2, else 4."""

    def build(node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
        channels_last = any(a.name == "channels_last" and helper.get_attribute_value(a) for a in node.attribute)
        plain = onnx.NodeProto()
        plain.CopyFrom(node)
        del plain.attribute[:]
        plain.attribute.extend(a for a in node.attribute if a.name != "channels_last")
        inner = proxy(plain)
        if inner is None or not channels_last:
            return inner
        (inner,) = [inner] if isinstance(inner, onnx.NodeProto) else inner
        kernel = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "kernel_shape"), None)
        rank = len(kernel) + 2 if kernel else 4
        source, target = inner.input[0], inner.output[0]
        inner.input[0], inner.output[0] = f"{source}__channels_first", f"{target}__channels_first"
        return [
            helper.make_node("Transpose", [source], [inner.input[0]], perm=[0, rank - 1, *range(1, rank - 1)]),
            inner,
            helper.make_node("Transpose", [inner.output[0]], [target], perm=[0, *range(2, rank), 1]),
        ]

    return build


_GEMM_OF_A_AND_B = proxy("Gemm", [0, 3])


def qgemm_proxy(node: onnx.NodeProto) -> onnx.NodeProto | None:
    """QGemm as Gemm over A and B when its output is quantized (y_scale given); none when it is
    float, which no default-domain node over int8 inputs gives."""
    if len(node.input) < 8 or not node.input[7]:
        return None
    return _GEMM_OF_A_AND_B(node)


def qlinear_concat_proxy(node: onnx.NodeProto) -> onnx.NodeProto | None:
    """QLinearConcat (y_scale, y_zero_point, then (x, x_scale, x_zero_point) per input) as Concat."""
    tensors = list(node.input[2::3])
    if not tensors or not all(tensors):
        return None
    proxy = helper.make_node("Concat", tensors, node.output[:1], name=node.name)
    proxy.attribute.extend(a for a in node.attribute if a.name == "axis")
    return proxy
