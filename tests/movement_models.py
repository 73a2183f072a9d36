"""Small float models of the data movement ops (Split, Slice, Resize, Pad, pools) around
convolutions, built with onnx.helper and seeded weights; compile quantizes them."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


class Graph:
    """Nodes and initializers of one model under construction."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def const(self, name: str, values) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(values), name))
        return name

    def node(self, op: str, inputs: list[str], outputs: int | list[str] = 1, **attrs) -> list[str]:
        name = f"{op.lower()}{len(self.nodes)}"
        names = outputs if isinstance(outputs, list) else [f"{name}_y{i}" if outputs > 1 else name
                                                            for i in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, names, name=name, **attrs))
        return names

    def conv(self, x: str, cin: int, cout: int, k: int = 3, relu: bool = True, output: str | None = None) -> str:
        w = self.const(f"w{len(self.inits)}", (self.rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k))
                       .astype(np.float32))
        b = self.const(f"b{len(self.inits)}", (0.1 * self.rng.standard_normal(cout)).astype(np.float32))
        (y,) = self.node("Conv", [x, w, b], [output] if output and not relu else 1, kernel_shape=[k, k],
                         pads=[k // 2] * 4)
        return self.node("Relu", [y], [output] if output else 1)[0] if relu else y

    def model(self, name: str, shape: list[int], out_shape: list[int]) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = 8
        onnx.checker.check_model(model)
        return model


def split_concat(channels: int = 8, size: int = 8, parts: tuple[int, ...] = (4, 4), seed: int = 0) -> onnx.ModelProto:
    """Conv -> Split along channels -> one Conv per part -> Concat -> Conv (YOLOv8's C2f)."""
    g = Graph(seed)
    x = g.conv("x", 3, channels)
    halves = g.node("Split", [x, g.const("split", np.array(parts, dtype=np.int64))], len(parts), axis=1)
    ys = [g.conv(h, c, c) for h, c in zip(halves, parts, strict=True)]
    (y,) = g.node("Concat", [*ys, x], axis=1)
    g.conv(y, 2 * channels, 4, k=1, relu=False, output="y")
    return g.model("split_concat", [1, 3, size, size], [1, 4, size, size])


def focus(size: int = 8, seed: int = 1, on_input: bool = False) -> onnx.ModelProto:
    """YOLOX's Focus stem: four stride-2 Slices of the image (offsets 0/1 on H and W) -> Concat
    -> Conv, after a Conv so the slices read a core's stream; ``on_input``: of the model's float
    input itself, as YOLOX has it (the quantizer must put the input's Q/DQ before the slices)."""
    g = Graph(seed)
    x = "x" if on_input else g.conv("x", 3, 4)
    parts = []
    for h0, w0 in ((0, 0), (1, 0), (0, 1), (1, 1)):
        starts, ends = g.const(f"st{h0}{w0}", np.array([h0, w0], np.int64)), g.const(f"en{h0}{w0}",
                                                                                       np.array([size, size], np.int64))
        parts += g.node("Slice", [x, starts, ends, g.const(f"ax{h0}{w0}", np.array([2, 3], np.int64)),
                                  g.const(f"sp{h0}{w0}", np.array([2, 2], np.int64))])
    (y,) = g.node("Concat", parts, axis=1)
    g.conv(y, 12 if on_input else 16, 4, relu=False, output="y")
    return g.model("focus", [1, 3, size, size], [1, 4, size // 2, size // 2])


def channel_slice(size: int = 6, seed: int = 2) -> onnx.ModelProto:
    """Conv -> Slice of channels [2, 6) (axis 1, step 1) -> Conv."""
    g = Graph(seed)
    x = g.conv("x", 3, 8)
    (y,) = g.node("Slice", [x, g.const("st", np.array([2], np.int64)), g.const("en", np.array([6], np.int64)),
                            g.const("ax", np.array([1], np.int64))])
    g.conv(y, 4, 4, relu=False, output="y")
    return g.model("channel_slice", [1, 3, size, size], [1, 4, size, size])


def upsample(size: int = 6, factor: int = 2, transform: str = "asymmetric", rounding: str = "floor",
             by_sizes: bool = False, seed: int = 3) -> onnx.ModelProto:
    """Conv -> Resize nearest x``factor`` (a ``scales`` or a ``sizes`` input) -> Conv (a YOLO neck)."""
    g = Graph(seed)
    x = g.conv("x", 3, 4)
    out = size * factor
    if by_sizes:
        inputs = [x, "", "", g.const("sizes", np.array([1, 4, out, out], np.int64))]
    else:
        inputs = [x, "", g.const("scales", np.array([1, 1, factor, factor], np.float32))]
    (y,) = g.node("Resize", inputs, mode="nearest", coordinate_transformation_mode=transform, nearest_mode=rounding)
    g.conv(y, 4, 4, relu=False, output="y")
    return g.model("upsample", [1, 3, size, size], [1, 4, out, out])


def pooled(pool: str = "MaxPool", kernel: int = 5, stride: int = 1, pad: int = 2, size: int = 8,
           count_include_pad: int = 0, tail: bool = True, seed: int = 4) -> onnx.ModelProto:
    """Conv -> a pool with ``pad`` on every side (-> Conv with ``tail``) (YOLOv8's SPPF pools 5x5,
    stride 1, pad 2)."""
    g = Graph(seed)
    x = g.conv("x", 3, 4)
    attrs = {"count_include_pad": count_include_pad} if pool == "AveragePool" else {}
    (y,) = g.node(pool, [x], ["y"] if not tail else 1, kernel_shape=[kernel, kernel], strides=[stride, stride],
                  pads=[pad] * 4, **attrs)
    out = (size + 2 * pad - kernel) // stride + 1
    if tail:
        g.conv(y, 4, 4, relu=False, output="y")
    return g.model("pooled", [1, 3, size, size], [1, 4, out, out])


def padded(pads: tuple[int, int, int, int] = (1, 2, 0, 1), size: int = 6, value: float | None = None,
           seed: int = 5) -> onnx.ModelProto:
    """Conv -> Pad (constant ``value``, default 0; pads top, left, bottom, right) -> Conv without padding."""
    g = Graph(seed)
    x = g.conv("x", 3, 4)
    t, left, b, r = pads
    inputs = [x, g.const("pads", np.array([0, 0, t, left, 0, 0, b, r], np.int64))]
    inputs += [] if value is None else [g.const("value", np.array(value, np.float32))]
    (y,) = g.node("Pad", inputs, mode="constant")
    w = g.const("wp", (g.rng.standard_normal((4, 4, 3, 3)) / 6).astype(np.float32))
    g.node("Conv", [y, w], ["y"], kernel_shape=[3, 3])
    return g.model("padded", [1, 3, size, size], [1, 4, size + t + b - 2, size + left + r - 2])


def neck(size: int = 16, seed: int = 6) -> onnx.ModelProto:
    """A YOLOv8-style stem, C2f, SPPF and FPN neck of the ops in this file: Conv -> Split (C2f) ->
    Conv -> Concat; SPPF: three chained 5x5 stride-1 max pools, Concat; a stride-2 Conv, nearest
    upsampling x2 back, Concat with the earlier map, Pad and an unpadded Conv."""
    g = Graph(seed)
    x = g.conv("x", 3, 8)
    a, b = g.node("Split", [x, g.const("split", np.array([4, 4], np.int64))], 2, axis=1)
    (c2f,) = g.node("Concat", [a, b, g.conv(b, 4, 4)], axis=1)
    c2f = g.conv(c2f, 12, 8, k=1)
    pools = [c2f]
    for _ in range(3):
        pools += g.node("MaxPool", [pools[-1]], kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2])
    (sppf,) = g.node("Concat", pools, axis=1)
    down = g.node("Conv", [g.conv(sppf, 32, 8, k=1), g.const("wd", (g.rng.standard_normal((8, 8, 3, 3)) / 8)
                                                                       .astype(np.float32))],
                  kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])[0]
    (up,) = g.node("Resize", [g.node("Relu", [down])[0], "", g.const("scales", np.array([1, 1, 2, 2], np.float32))],
                   mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    (merged,) = g.node("Concat", [up, c2f], axis=1)
    (p,) = g.node("Pad", [merged, g.const("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))], mode="constant")
    g.node("Conv", [p, g.const("wo", (g.rng.standard_normal((4, 16, 3, 3)) / 12).astype(np.float32))], ["y"],
           kernel_shape=[3, 3])
    return g.model("neck", [1, 3, size, size], [1, 4, size, size])
