"""Small float models whose quantized form puts a two-activation Mul, Sub, Max or Min on a core:
the same shape, a squeeze-excite gate per channel and a spatial gate per pixel (onnx.helper)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _conv(name: str, x: str, y: str, cin: int, cout: int, k: int, seed: int) -> tuple[onnx.NodeProto, list]:
    """A Conv node with random weights and bias (initializers ``<name>_w``, ``<name>_b``)."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k)).astype(np.float32)
    b = (rng.standard_normal(cout) * 0.1).astype(np.float32)
    node = helper.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [y], name=name, kernel_shape=[k, k],
                            pads=[k // 2] * 4)
    return node, [numpy_helper.from_array(w, f"{name}_w"), numpy_helper.from_array(b, f"{name}_b")]


def _model(nodes: list, inits: list, x_shape: list[int], out_shape: list[int], name: str) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, out_shape)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _stem(c: int, size: int) -> tuple[list, list]:
    """x[1, 4, size, size] -> Conv 3x3 -> Relu -> ``r`` with ``c`` channels."""
    conv, inits = _conv("stem", "x", "stem_out", 4, c, 3, 1)
    return [conv, helper.make_node("Relu", ["stem_out"], ["r"], name="stem_relu")], inits


def two_branches(op: str = "Mul", c: int = 8, size: int = 8, swap: bool = False) -> onnx.ModelProto:
    """Conv -> two 1x1 conv branches (one with a Relu) -> ``op`` of the two -> Conv 1x1."""
    nodes, inits = _stem(c, size)
    for i, (name, out) in enumerate((("left", "a"), ("right", "b0"))):
        conv, w = _conv(name, "r", out, c, c, 1, 10 + i)
        nodes.append(conv)
        inits += w
    nodes.append(helper.make_node("Relu", ["b0"], ["b"], name="right_relu"))
    nodes.append(helper.make_node(op, ["b", "a"] if swap else ["a", "b"], ["m"], name="binary"))
    head, w = _conv("head", "m", "z", c, c, 1, 20)
    return _model([*nodes, head], inits + w, [1, 4, size, size], [1, c, size, size], f"two_branches_{op}")


def squeeze_excite(c: int = 8, size: int = 8, gate: str = "Relu", swap: bool = False,
                   op: str = "Mul") -> onnx.ModelProto:
    """Conv -> r; GlobalAveragePool -> Conv 1x1 -> Relu -> Conv 1x1 -> ``gate`` -> s[1, c, 1, 1];
    ``op``(r, s) -> Conv 1x1."""
    nodes, inits = _stem(c, size)
    nodes.append(helper.make_node("GlobalAveragePool", ["r"], ["p"], name="squeeze"))
    for name, x, y, cin, cout, seed in (("reduce", "p", "q0", c, c // 2, 30), ("expand", "q", "e", c // 2, c, 31)):
        conv, w = _conv(name, x, y, cin, cout, 1, seed)
        nodes.append(conv)
        inits += w
        if name == "reduce":
            nodes.append(helper.make_node("Relu", ["q0"], ["q"], name="reduce_relu"))
    nodes.append(helper.make_node(gate, ["e"], ["s"], name="gate"))
    nodes.append(helper.make_node(op, ["s", "r"] if swap else ["r", "s"], ["m"], name="excite"))
    head, w = _conv("head", "m", "z", c, c, 1, 32)
    return _model([*nodes, head], inits + w, [1, 4, size, size], [1, c, size, size], "squeeze_excite")


def spatial_gate(c: int = 8, size: int = 8, op: str = "Mul") -> onnx.ModelProto:
    """Conv -> r; Conv 1x1 to one channel -> Relu -> m[1, 1, H, W]; ``op``(r, m) -> Conv 1x1."""
    nodes, inits = _stem(c, size)
    conv, w = _conv("attend", "r", "a0", c, 1, 1, 40)
    nodes += [conv, helper.make_node("Relu", ["a0"], ["a"], name="attend_relu"),
              helper.make_node(op, ["r", "a"], ["m"], name="spatial")]
    head, w2 = _conv("head", "m", "z", c, c, 1, 41)
    return _model([*nodes, head], inits + w + w2, [1, 4, size, size], [1, c, size, size], "spatial_gate")
