"""Real model structures built with onnx.helper (no torch), as exporters write them, and an
independent MAC count to check the front end against.

Models (``REAL_MODELS``: name -> ``RealModel``), each small by default and full size on request:

- ``yolo``: a YOLOv8-style detector, dynamic ``batch``/``height``/``width``: Conv-SiLU stages, C2f
  blocks (Split, bottlenecks, Concat), SPPF, an upsampling neck (Resize by scales), heads reshaped
  to ``[batch, 4 * 16 + classes, anchors]`` by a target computed from ``Shape`` (torch's ``view``);
- ``bert``: a BERT encoder with dynamic ``batch`` and ``sequence``: embeddings (Gather, positions
  sliced to the sequence length by a ``Shape``-driven Slice), an attention mask, and head
  split/merge reshapes whose targets come from ``Shape -> Gather -> Concat``, as torch exports
  them; 1 layer of hidden 256 by default, BERT-base (12 layers, hidden 768, 12 heads) at full size;
- ``ocr``: a text recognizer: a conv backbone over a ``[batch, 1, 32, width]`` line image, the
  feature map reshaped (computed target) to a sequence, attention of learned queries over it;
- ``crnn``: conv, then the feature map as a sequence over the width, a bidirectional LSTM, a classifier;
- ``if``: a model whose body sits in the branches of an ``If`` on a data-dependent condition;
- ``qdq``: the built-in residual CNN quantized to int8 QDQ by ``fpgaplace.model.quantize``;
- ``qonnx``: a Brevitas-style QONNX CNN: 8-bit input, 4-bit weights and activations, 2-bit FC
  weights, a ``Trunc`` after average pooling, a ``BipolarQuant`` output.
- ``yolox``: a YOLOX-style detector on a fixed input: a Focus stem (four stride-2 spatial Slices,
  channel Concat), Conv+SiLU, CSP blocks, SPP max pools, nearest upsampling, decoupled heads with
  Sigmoid; YOLOX-s at 416 x 416 at full size;
- ``dbnet``: a DB text detector as PaddleOCR exports it: MobileNetV3-large backbone with HardSwish
  as ``x * Clip(x + 3, 0, 6) / 6``, squeeze-excite gates (HardSigmoid, a ``[N, C, 1, 1]`` Mul), an
  FPN neck (Resize, Add, channel Concat), a head with ConvTranspose upsampling and Sigmoid; 640 x
  640 at full size;
- ``mobilenetv3``: a MobileNetV3-small classifier as torch exports it (the HardSwish op, SE
  blocks, GlobalAveragePool, Flatten, Gemm), its batch dim the symbolic ``batch``; 224 x 224 at
  full size.

``independent_macs`` counts the dot-product MACs (Conv, ConvTranspose, MatMul, Gemm, LSTM/GRU/RNN,
Einsum: the published convention) without fpgaplace: with the ``onnx-tool`` package (recurrent ops
and ConvTranspose by the operator spec from an onnxruntime run's shapes), on each
``If`` branch as a model of its own (its outer-scope tensors as inputs shaped by an onnxruntime
run), and with the ``qonnx`` package's ``inference_cost`` for QONNX models.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FLOAT = TensorProto.FLOAT
OPSET = 17
QONNX_DOMAIN = "qonnx.custom_op.general"
DOT_PRODUCT_OPS = frozenset({"Conv", "ConvTranspose", "MatMul", "Gemm", "LSTM", "GRU", "RNN", "Einsum"})


class Builder:
    """Nodes, initializers and seeded weights of one model; every node gets a unique name."""

    def __init__(self, seed: int, prefix: str = "") -> None:
        self.prefix = prefix
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.scalars: dict[float, str] = {}

    def node(self, op_type: str, inputs: list[str], output: str | None = None, domain: str = "",
             outputs: int = 1, **attrs) -> str:
        name = f"{self.prefix}{op_type.lower()}_{len(self.nodes)}"
        names = [output or name] if outputs == 1 else [f"{name}_{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, names, name=name, domain=domain, **attrs))
        return names[0] if outputs == 1 else names

    def const(self, name: str, value: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def scalar(self, value: float) -> str:
        """A float32 scalar constant, one initializer per value."""
        if value not in self.scalars:
            self.scalars[value] = self.const(f"{self.prefix}scalar_{len(self.scalars)}", np.array(value, np.float32))
        return self.scalars[value]

    def ints(self, values: list[int]) -> str:
        """A 1-D int64 constant (a Slice's starts, a Reshape's target, ...)."""
        return self.const(f"{self.prefix}ints_{len(self.initializers)}", np.array(values, np.int64))

    def weight(self, name: str, shape: tuple[int, ...], fan_in: int | None = None) -> str:
        fan_in = fan_in or int(np.prod(shape[1:])) or 1
        return self.const(name, (self.rng.standard_normal(shape) / math.sqrt(fan_in)).astype(np.float32))

    def model(self, name: str, inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto],
              opsets: list[onnx.OperatorSetIdProto] | None = None) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.initializers)
        model = helper.make_model(graph, opset_imports=opsets or [helper.make_opsetid("", OPSET)])
        model.ir_version = 8
        onnx.checker.check_model(model)
        return model

    def dims_of(self, tensor: str, axes: list[int]) -> list[str]:
        """1-element int64 tensors of ``tensor``'s dims ``axes`` (Shape -> Gather -> Unsqueeze)."""
        shape = self.node("Shape", [tensor])
        return [self.node("Unsqueeze", [self.node("Gather", [shape, self.const(f"axis_{len(self.nodes)}",
                                                                                 np.array(axis, np.int64))]),
                                         self.const(f"zero_{len(self.nodes)}", np.array([0], np.int64))])
                for axis in axes]

    def reshape_computed(self, tensor: str, kept: list[str], tail: list[int]) -> str:
        """``tensor`` reshaped to ``kept`` (computed dims) + ``tail`` (constants), as torch's view exports."""
        tail_name = self.const(f"tail_{len(self.nodes)}", np.array(tail, np.int64))
        return self.node("Reshape", [tensor, self.node("Concat", [*kept, tail_name], axis=0)])


def conv(b: Builder, x: str, prefix: str, cin: int, cout: int, k: int, stride: int = 1, groups: int = 1) -> str:
    """A k x k Conv padded to keep the size (divided by ``stride``), seeded weights and a zero bias
    (a batch norm folded in, as exporters write it); ``groups`` = ``cin`` makes it depthwise."""
    grouping = {"group": groups} if groups > 1 else {}
    return b.node("Conv", [x, b.weight(f"{prefix}_w", (cout, cin // groups, k, k)),
                           b.const(f"{prefix}_b", np.zeros(cout, np.float32))],
                  kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4, **grouping)


def conv_silu(b: Builder, x: str, prefix: str, cin: int, cout: int, k: int, stride: int = 1) -> str:
    y = conv(b, x, prefix, cin, cout, k, stride)
    return b.node("Mul", [y, b.node("Sigmoid", [y])])


def c2f(b: Builder, x: str, prefix: str, cin: int, cout: int, repeats: int, shortcut: bool = True) -> str:
    half = cout // 2
    first, second = b.node("Split", [conv_silu(b, x, f"{prefix}_cv1", cin, 2 * half, 1),
                                     b.const(f"{prefix}_split", np.array([half, half], np.int64))], axis=1, outputs=2)
    parts, last = [first, second], second
    for i in range(repeats):
        z = conv_silu(b, conv_silu(b, last, f"{prefix}_m{i}a", half, half, 3), f"{prefix}_m{i}b", half, half, 3)
        last = b.node("Add", [z, last]) if shortcut else z
        parts.append(last)
    return conv_silu(b, b.node("Concat", parts, axis=1), f"{prefix}_cv2", half * (2 + repeats), cout, 1)


def yolo(width: int = 8, depth: int = 1, classes: int = 80) -> onnx.ModelProto:
    """A YOLOv8-style detector with dynamic batch, height and width (see the module docstring)."""
    b = Builder(7)
    w = [width * 2**i for i in range(5)]
    x = conv_silu(b, conv_silu(b, "images", "stem", 3, w[0], 3, 2), "down1", w[0], w[1], 3, 2)
    x = c2f(b, x, "c1", w[1], w[1], depth)
    p3 = c2f(b, conv_silu(b, x, "down2", w[1], w[2], 3, 2), "c2", w[2], w[2], depth)
    p4 = c2f(b, conv_silu(b, p3, "down3", w[2], w[3], 3, 2), "c3", w[3], w[3], depth)
    x = c2f(b, conv_silu(b, p4, "down4", w[3], w[4], 3, 2), "c4", w[4], w[4], depth)
    pooled = [conv_silu(b, x, "sppf_cv1", w[4], w[4] // 2, 1)]
    for _ in range(3):
        pooled.append(b.node("MaxPool", [pooled[-1]], kernel_shape=[5, 5], pads=[2] * 4))
    p5 = conv_silu(b, b.node("Concat", pooled, axis=1), "sppf_cv2", 2 * w[4], w[4], 1)
    scales = b.const("upsample_scales", np.array([1, 1, 2, 2], np.float32))
    n4 = c2f(b, b.node("Concat", [b.node("Resize", [p5, "", scales], mode="nearest"), p4], axis=1), "n4",
             w[4] + w[3], w[3], depth, False)
    o3 = c2f(b, b.node("Concat", [b.node("Resize", [n4, "", scales], mode="nearest"), p3], axis=1), "n3",
             w[3] + w[2], w[2], depth, False)
    o4 = c2f(b, b.node("Concat", [conv_silu(b, o3, "pan3", w[2], w[2], 3, 2), n4], axis=1), "o4", w[2] + w[3], w[3],
             depth, False)
    heads = []
    channels = 64 + classes
    for i, (o, c) in enumerate(((o3, w[2]), (o4, w[3]))):
        box = b.node("Conv", [conv_silu(b, o, f"h{i}_box", c, 64, 3), b.weight(f"h{i}_box_out_w", (64, 64, 1, 1))])
        cls = b.node("Conv", [conv_silu(b, o, f"h{i}_cls", c, classes, 3),
                              b.weight(f"h{i}_cls_out_w", (classes, classes, 1, 1))])
        joined = b.node("Concat", [box, b.node("Sigmoid", [cls])], axis=1)
        heads.append(b.reshape_computed(joined, b.dims_of(joined, [0]), [channels, -1]))
    b.node("Concat", heads, output="detections", axis=2)
    return b.model("yolo_detector", [helper.make_tensor_value_info("images", FLOAT, ["batch", 3, "height", "width"])],
                   [helper.make_tensor_value_info("detections", FLOAT, ["batch", channels, "anchors"])])


def layer_norm(b: Builder, x: str, prefix: str, hidden: int) -> str:
    return b.node("LayerNormalization", [x, b.const(f"{prefix}_g", np.ones(hidden, np.float32)),
                                         b.const(f"{prefix}_b", np.zeros(hidden, np.float32))], axis=-1, epsilon=1e-12)


def gelu(b: Builder, x: str) -> str:
    """x * (1 + erf(x / sqrt 2)) / 2, as torch exports GELU below opset 20."""
    erf = b.node("Erf", [b.node("Div", [x, b.const(f"sqrt2_{len(b.nodes)}", np.array(math.sqrt(2), np.float32))])])
    one_plus = b.node("Add", [erf, b.const(f"one_{len(b.nodes)}", np.array(1.0, np.float32))])
    return b.node("Mul", [b.node("Mul", [x, one_plus]), b.const(f"half_{len(b.nodes)}", np.array(0.5, np.float32))])


def dense(b: Builder, x: str, prefix: str, fan_in: int, fan_out: int) -> str:
    y = b.node("MatMul", [x, b.weight(f"{prefix}_w", (fan_in, fan_out), fan_in)])
    return b.node("Add", [y, b.const(f"{prefix}_b", np.zeros(fan_out, np.float32))])


def bert(layers: int = 1, hidden: int = 256, heads: int = 4, vocab: int = 1000,
         max_positions: int = 512) -> onnx.ModelProto:
    """A BERT encoder (BERT-base with 12 layers, hidden 768, 12 heads) with dynamic batch and
    sequence, torch-style computed reshapes."""
    b = Builder(2)
    head_dim = hidden // heads
    words = b.node("Gather", [b.weight("word_embeddings", (vocab, hidden), hidden), "input_ids"])
    sequence_length = b.dims_of("input_ids", [1])[0]
    positions = b.node("Slice", [b.const("position_ids", np.arange(max_positions, dtype=np.int64)[None, :]),
                                 b.const("slice_start", np.array([0], np.int64)), sequence_length,
                                 b.const("slice_axis", np.array([1], np.int64))])
    embedded = b.node("Add", [words, b.node("Gather", [b.weight("position_embeddings", (max_positions, hidden),
                                                                hidden), positions])])
    x = layer_norm(b, embedded, "embeddings_ln", hidden)
    mask = b.node("Unsqueeze", ["attention_mask", b.const("mask_axes", np.array([1, 2], np.int64))])
    mask = b.node("Mul", [b.node("Sub", [b.const("one", np.array(1.0, np.float32)),
                                         b.node("Cast", [mask], to=FLOAT)]),
                          b.const("mask_value", np.array(-10000.0, np.float32))])
    scale = b.const("attention_scale", np.array(math.sqrt(head_dim), np.float32))
    for layer in range(layers):
        p = f"l{layer}_"
        batch_and_sequence = b.dims_of(x, [0, 1])

        def split_heads(t: str, perm: list[int], kept: list[str] = batch_and_sequence) -> str:
            return b.node("Transpose", [b.reshape_computed(t, kept, [heads, head_dim])], perm=perm)

        q = split_heads(dense(b, x, p + "query", hidden, hidden), [0, 2, 1, 3])
        k = split_heads(dense(b, x, p + "key", hidden, hidden), [0, 2, 3, 1])
        v = split_heads(dense(b, x, p + "value", hidden, hidden), [0, 2, 1, 3])
        scores = b.node("Add", [b.node("Div", [b.node("MatMul", [q, k]), scale]), mask])
        context = b.node("Transpose", [b.node("MatMul", [b.node("Softmax", [scores], axis=-1), v])], perm=[0, 2, 1, 3])
        context = b.reshape_computed(context, batch_and_sequence, [hidden])
        attended = layer_norm(b, b.node("Add", [dense(b, context, p + "attn_out", hidden, hidden), x]), p + "ln1",
                              hidden)
        ffn = dense(b, gelu(b, dense(b, attended, p + "ffn_in", hidden, 4 * hidden)), p + "ffn_out", 4 * hidden,
                    hidden)
        x = layer_norm(b, b.node("Add", [ffn, attended]), p + "ln2", hidden)
    b.node("Identity", [x], output="last_hidden_state")
    inputs = [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])
              for name in ("input_ids", "attention_mask")]
    return b.model("bert_base", inputs,
                   [helper.make_tensor_value_info("last_hidden_state", FLOAT, ["batch", "sequence", hidden])])


def conv_relu(b: Builder, x: str, prefix: str, cin: int, cout: int, pool: tuple[int, int] | None = None) -> str:
    y = b.node("Relu", [b.node("Conv", [x, b.weight(f"{prefix}_w", (cout, cin, 3, 3))], kernel_shape=[3, 3],
                               pads=[1, 1, 1, 1])])
    return b.node("MaxPool", [y], kernel_shape=list(pool), strides=list(pool)) if pool else y


def ocr(channels: int = 32, queries: int = 24, classes: int = 97) -> onnx.ModelProto:
    """A text recognizer: conv backbone, feature map reshaped to a sequence, attention of learned queries."""
    b = Builder(11)
    x = conv_relu(b, "image", "c1", 1, channels // 2, (2, 2))
    x = conv_relu(b, x, "c2", channels // 2, channels, (2, 2))
    x = conv_relu(b, x, "c3", channels, channels, (2, 1))  # [batch, C, 4, width / 4]
    sequence = b.node("Transpose", [b.reshape_computed(x, b.dims_of(x, [0, 1]), [-1])], perm=[0, 2, 1])
    keys = dense(b, sequence, "keys", channels, channels)
    values = dense(b, sequence, "values", channels, channels)
    scores = b.node("MatMul", [b.weight("queries", (queries, channels)), b.node("Transpose", [keys], perm=[0, 2, 1])])
    attended = b.node("MatMul", [b.node("Softmax", [scores], axis=-1), values])  # [batch, queries, C]
    logits = dense(b, attended, "classifier", channels, classes)
    b.node("Identity", [logits], output="logits")
    return b.model("ocr_recognizer", [helper.make_tensor_value_info("image", FLOAT, ["batch", 1, 32, "width"])],
                   [helper.make_tensor_value_info("logits", FLOAT, ["batch", queries, classes])])


def crnn(channels: int = 32, hidden: int = 48, classes: int = 37) -> onnx.ModelProto:
    """Conv stages to a height of 1, the width as a time axis, a bidirectional LSTM, a classifier."""
    b = Builder(13)
    x = conv_relu(b, "image", "c1", 1, channels // 2, (2, 2))
    x = conv_relu(b, x, "c2", channels // 2, channels, (2, 2))
    x = conv_relu(b, x, "c3", channels, channels, (8, 1))  # [batch, C, 1, width / 4]
    steps = b.node("Transpose", [b.node("Squeeze", [x, b.const("height_axis", np.array([2], np.int64))])],
                   perm=[2, 0, 1])  # [T, batch, C]
    gates = 4 * hidden
    lstm = b.node("LSTM", [steps, b.weight("lstm_w", (2, gates, channels), channels),
                           b.weight("lstm_r", (2, gates, hidden), hidden), b.const("lstm_b", np.zeros((2, 2 * gates),
                                                                                                      np.float32))],
                  hidden_size=hidden, direction="bidirectional")
    features = b.reshape_computed(b.node("Transpose", [lstm], perm=[0, 2, 1, 3]), b.dims_of(steps, [0, 1]), [-1])
    logits = dense(b, features, "classifier", 2 * hidden, classes)
    b.node("LogSoftmax", [logits], output="log_probs", axis=-1)
    return b.model("crnn", [helper.make_tensor_value_info("image", FLOAT, ["batch", 1, 32, "width"])],
                   [helper.make_tensor_value_info("log_probs", FLOAT, ["steps", "batch", classes])])


def _branch(name: str, sizes: list[int], seed: int) -> onnx.GraphProto:
    """A branch body: features -> MatMul/Relu chain over ``sizes`` -> ``name``_out."""
    b = Builder(seed, prefix=f"{name}_")
    x = "features"
    for i, (fan_in, fan_out) in enumerate(zip(sizes, sizes[1:], strict=False)):
        x = dense(b, x, f"{name}{i}", fan_in, fan_out)
        if i < len(sizes) - 2:
            x = b.node("Relu", [x])
    b.nodes[-1].output[0] = f"{name}_out"
    return helper.make_graph(b.nodes, name, [], [helper.make_tensor_value_info(f"{name}_out", FLOAT,
                                                                               ["batch", sizes[-1]])], b.initializers)


def if_model(features: int = 64, classes: int = 10) -> onnx.ModelProto:
    """A stem, then the body in an If on a data-dependent condition: a deep branch and a shallow one."""
    b = Builder(17)
    stem = b.node("Relu", [dense(b, "x", "stem", 32, features)], output="features")
    condition = b.node("Greater", [b.node("ReduceSum", [stem], keepdims=0),
                                   b.const("threshold", np.array(0.0, np.float32))])
    b.node("If", [condition], output="logits",
           then_branch=_branch("deep", [features, 256, 256, classes], 18),
           else_branch=_branch("shallow", [features, classes], 19))
    return b.model("if_body", [helper.make_tensor_value_info("x", FLOAT, ["batch", 32])],
                   [helper.make_tensor_value_info("logits", FLOAT, ["batch", classes])])


def qdq(image: int = 16) -> onnx.ModelProto:
    """The built-in residual CNN quantized to int8 QDQ (onnxruntime static, random calibration)."""
    from fpgaplace.model import zoo as models
    from fpgaplace.model.quantize import calibration_inputs, quantize_model

    model = models.cnn_residual(batch=1, image=image)
    return quantize_model(model, calibration_inputs(model, random_samples=4))


def qonnx(channels: int = 16, classes: int = 10) -> onnx.ModelProto:
    """A Brevitas-style QONNX CNN with dynamic batch (see the module docstring)."""
    b = Builder(23)
    bits = {n: b.const(f"bits{n}", np.array(n, np.float32)) for n in (2, 4, 8, 12)}
    zero = b.const("zero_point", np.array(0.0, np.float32))

    def quant(x: str, scale: float, width: int, signed: int = 1, narrow: int = 0) -> str:
        return b.node("Quant", [x, b.const(f"scale_{len(b.nodes)}", np.array(scale, np.float32)), zero, bits[width]],
                      domain=QONNX_DOMAIN, signed=signed, narrow=narrow, rounding_mode="ROUND")

    def qconv(x: str, prefix: str, cin: int, cout: int) -> str:
        w = quant(b.weight(f"{prefix}_w", (cout, cin, 3, 3)), 0.05, 4, narrow=1)
        return quant(b.node("Relu", [b.node("Conv", [x, w], kernel_shape=[3, 3], pads=[1, 1, 1, 1])]), 0.1, 4,
                     signed=0)

    x = quant("image", 1 / 128, 8)
    x = b.node("MaxPool", [qconv(x, "c1", 3, channels)], kernel_shape=[2, 2], strides=[2, 2])
    x = b.node("MaxPool", [qconv(x, "c2", channels, 2 * channels)], kernel_shape=[2, 2], strides=[2, 2])
    x = qconv(x, "c3", 2 * channels, 2 * channels)
    pooled = b.node("GlobalAveragePool", [x])
    pooled = b.node("Trunc", [pooled, b.const("trunc_scale", np.array(0.1, np.float32)), zero, bits[12], bits[8]],
                    domain=QONNX_DOMAIN, rounding_mode="FLOOR")
    flat = b.node("Flatten", [pooled], axis=1)
    fc = b.node("MatMul", [flat, quant(b.weight("fc_w", (2 * channels, classes)), 0.1, 2, narrow=1)])
    b.node("BipolarQuant", [fc, b.const("out_scale", np.array(1.0, np.float32))], output="scores", domain=QONNX_DOMAIN)
    opsets = [helper.make_opsetid("", 13), helper.make_opsetid(QONNX_DOMAIN, 1)]
    model = b.model("qonnx_cnn", [helper.make_tensor_value_info("image", FLOAT, ["batch", 3, 32, 32])],
                    [helper.make_tensor_value_info("scores", FLOAT, ["batch", classes])], opsets)
    return model


# ---- detectors and classifiers with mobile activations ------------------------------------------

INT64_MAX = np.iinfo(np.int64).max
"""The end torch writes for an open slice ``x[a::s]``."""


def upsample(b: Builder, x: str, scale: int) -> str:
    """Nearest upsampling by an integer ``scale`` as torch exports ``F.interpolate``: Resize by scales."""
    scales = b.const(f"up_scales_{len(b.nodes)}", np.array([1, 1, scale, scale], np.float32))
    return b.node("Resize", [x, "", scales], mode="nearest", coordinate_transformation_mode="asymmetric",
                  nearest_mode="floor")


def csp_layer(b: Builder, x: str, prefix: str, cin: int, cout: int, repeats: int, shortcut: bool = True) -> str:
    """YOLOX's CSPLayer: two 1x1 branches, bottlenecks (1x1 then 3x3, residual) on the first, Concat, 1x1."""
    hidden = cout // 2
    first = conv_silu(b, x, f"{prefix}_cv1", cin, hidden, 1)
    second = conv_silu(b, x, f"{prefix}_cv2", cin, hidden, 1)
    for i in range(repeats):
        y = conv_silu(b, conv_silu(b, first, f"{prefix}_m{i}a", hidden, hidden, 1), f"{prefix}_m{i}b", hidden,
                      hidden, 3)
        first = b.node("Add", [y, first]) if shortcut else y
    return conv_silu(b, b.node("Concat", [first, second], axis=1), f"{prefix}_cv3", 2 * hidden, cout, 1)


def focus(b: Builder, x: str) -> str:
    """Space-to-depth as YOLOX's Focus exports it: four stride-2 spatial Slices, then a channel Concat
    in its order (top-left, bottom-left, top-right, bottom-right)."""
    patches = [b.node("Slice", [x, b.ints([row, column]), b.ints([INT64_MAX, INT64_MAX]), b.ints([2, 3]),
                                b.ints([2, 2])]) for row, column in ((0, 0), (1, 0), (0, 1), (1, 1))]
    return b.node("Concat", patches, axis=1)


def yolox_head(b: Builder, x: str, prefix: str, channels: int, hidden: int, classes: int) -> str:
    """A decoupled head: a 1x1 stem, a class branch and a box branch of two 3x3 convs each, box
    (4), objectness and class outputs, the last two through Sigmoid, joined and flattened to
    ``[1, 5 + classes, h * w]``."""
    stem = conv_silu(b, x, f"{prefix}_stem", channels, hidden, 1)
    branches = {}
    for branch in ("cls", "reg"):
        y = conv_silu(b, stem, f"{prefix}_{branch}0", hidden, hidden, 3)
        branches[branch] = conv_silu(b, y, f"{prefix}_{branch}1", hidden, hidden, 3)
    box = conv(b, branches["reg"], f"{prefix}_box", hidden, 4, 1)
    objectness = b.node("Sigmoid", [conv(b, branches["reg"], f"{prefix}_obj", hidden, 1, 1)])
    scores = b.node("Sigmoid", [conv(b, branches["cls"], f"{prefix}_cls", hidden, classes, 1)])
    joined = b.node("Concat", [box, objectness, scores], axis=1)
    return b.node("Reshape", [joined, b.ints([1, 5 + classes, -1])])


def yolox(width: int = 8, depth: int = 1, classes: int = 80, image: int = 64) -> onnx.ModelProto:
    """A YOLOX-style detector on a fixed ``[1, 3, image, image]`` input (YOLOX-s: width 32, depth
    1, image 416): Focus stem, Conv+SiLU, CSP stages (3 x ``depth`` bottlenecks in the middle two),
    YOLOX's SPP (parallel 5, 9 and 13 max pools), a PAFPN neck with nearest upsampling and a
    decoupled head per level; output ``[1, anchors, 5 + classes]``."""
    b = Builder(29)
    w = [width * 2**i for i in range(5)]
    x = conv_silu(b, focus(b, "images"), "stem", 12, w[0], 3)
    dark2 = csp_layer(b, conv_silu(b, x, "dark2", w[0], w[1], 3, 2), "dark2_csp", w[1], w[1], depth)
    dark3 = csp_layer(b, conv_silu(b, dark2, "dark3", w[1], w[2], 3, 2), "dark3_csp", w[2], w[2], 3 * depth)
    dark4 = csp_layer(b, conv_silu(b, dark3, "dark4", w[2], w[3], 3, 2), "dark4_csp", w[3], w[3], 3 * depth)
    x = conv_silu(b, conv_silu(b, dark4, "dark5", w[3], w[4], 3, 2), "spp_cv1", w[4], w[4] // 2, 1)
    pooled = [x] + [b.node("MaxPool", [x], kernel_shape=[k, k], pads=[k // 2] * 4) for k in (5, 9, 13)]
    x = conv_silu(b, b.node("Concat", pooled, axis=1), "spp_cv2", 2 * w[4], w[4], 1)
    dark5 = csp_layer(b, x, "dark5_csp", w[4], w[4], depth, False)
    lateral = conv_silu(b, dark5, "lateral0", w[4], w[3], 1)
    x = csp_layer(b, b.node("Concat", [upsample(b, lateral, 2), dark4], axis=1), "c3_p4", 2 * w[3], w[3], depth,
                  False)
    reduced = conv_silu(b, x, "reduce1", w[3], w[2], 1)
    pan2 = csp_layer(b, b.node("Concat", [upsample(b, reduced, 2), dark3], axis=1), "c3_p3", 2 * w[2], w[2], depth,
                     False)
    x = b.node("Concat", [conv_silu(b, pan2, "bu_conv2", w[2], w[2], 3, 2), reduced], axis=1)
    pan1 = csp_layer(b, x, "c3_n3", 2 * w[2], w[3], depth, False)
    x = b.node("Concat", [conv_silu(b, pan1, "bu_conv1", w[3], w[3], 3, 2), lateral], axis=1)
    pan0 = csp_layer(b, x, "c3_n4", 2 * w[3], w[4], depth, False)
    heads = [yolox_head(b, level, f"head{i}", channels, w[2], classes)
             for i, (level, channels) in enumerate(((pan2, w[2]), (pan1, w[3]), (pan0, w[4])))]
    b.node("Transpose", [b.node("Concat", heads, axis=2)], output="output", perm=[0, 2, 1])
    anchors = sum((image // stride) ** 2 for stride in (8, 16, 32))
    return b.model("yolox_detector", [helper.make_tensor_value_info("images", FLOAT, [1, 3, image, image])],
                   [helper.make_tensor_value_info("output", FLOAT, [1, anchors, 5 + classes])])


def hard_swish(b: Builder, x: str) -> str:
    """HardSwish as paddle (and torch before opset 14) exports it: x * Clip(x + 3, 0, 6) / 6."""
    gate = b.node("Clip", [b.node("Add", [x, b.scalar(3.0)]), b.scalar(0.0), b.scalar(6.0)])
    return b.node("Div", [b.node("Mul", [x, gate]), b.scalar(6.0)])


ACTIVATIONS: dict[str, Callable[[Builder, str], str]] = {
    "relu": lambda b, x: b.node("Relu", [x]),
    "hardswish": hard_swish,
    "HardSwish": lambda b, x: b.node("HardSwish", [x]),
}
"""Activation of a MobileNetV3 block: ``hardswish`` is the exported formula, ``HardSwish`` the
ONNX op (torch from opset 14)."""


def divisible(value: float, divisor: int = 8) -> int:
    """MobileNet's channel rounding: to the nearest multiple of ``divisor``, at least ``divisor``,
    never below 90 % of ``value``."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def squeeze_excite(b: Builder, x: str, prefix: str, channels: int, alpha: float) -> str:
    """GlobalAveragePool -> 1x1 Conv -> Relu -> 1x1 Conv -> HardSigmoid(``alpha``, 0.5) -> Mul: the
    ``[N, C, 1, 1]`` gate scales the whole plane."""
    squeezed = divisible(channels / 4)
    s = b.node("Relu", [conv(b, b.node("GlobalAveragePool", [x]), f"{prefix}_se1", channels, squeezed, 1)])
    gate = b.node("HardSigmoid", [conv(b, s, f"{prefix}_se2", squeezed, channels, 1)], alpha=alpha, beta=0.5)
    return b.node("Mul", [x, gate])


@dataclass(frozen=True)
class Block:
    """One MobileNetV3 inverted residual: kernel, expanded and output channels, squeeze-excite,
    activation (a key of ``ACTIVATIONS``, before the ONNX-op choice), stride."""

    kernel: int
    expand: int
    out: int
    se: bool
    act: str
    stride: int


def inverted_residual(b: Builder, x: str, prefix: str, cin: int, block: Block, scale: float,
                      hardswish: str, alpha: float) -> tuple[str, int]:
    """A MobileNetV3 block (1x1 expand, depthwise, squeeze-excite, 1x1 project, residual when the
    shape is kept) at width ``scale``; the output and its channels."""
    expand, cout = divisible(block.expand * scale), divisible(block.out * scale)
    act = ACTIVATIONS[hardswish if block.act == "hardswish" else block.act]
    y = act(b, conv(b, x, f"{prefix}_expand", cin, expand, 1)) if expand != cin else x
    y = act(b, conv(b, y, f"{prefix}_dw", expand, expand, block.kernel, block.stride, groups=expand))
    if block.se:
        y = squeeze_excite(b, y, prefix, expand, alpha)
    y = conv(b, y, f"{prefix}_project", expand, cout, 1)
    return (b.node("Add", [y, x]) if block.stride == 1 and cin == cout else y), cout


def shallow(blocks: tuple[Block, ...]) -> tuple[Block, ...]:
    """The first block of each run of equal output channels (every stride, activation and
    squeeze-excite kind kept, fewer repeats): the test-size depth."""
    return tuple(block for i, block in enumerate(blocks) if i == 0 or blocks[i - 1].out != block.out)


MOBILENETV3_SMALL = tuple(Block(*row) for row in (
    (3, 16, 16, True, "relu", 2), (3, 72, 24, False, "relu", 2), (3, 88, 24, False, "relu", 1),
    (5, 96, 40, True, "hardswish", 2), (5, 240, 40, True, "hardswish", 1), (5, 240, 40, True, "hardswish", 1),
    (5, 120, 48, True, "hardswish", 1), (5, 144, 48, True, "hardswish", 1), (5, 288, 96, True, "hardswish", 2),
    (5, 576, 96, True, "hardswish", 1), (5, 576, 96, True, "hardswish", 1)))
"""torchvision's mobilenet_v3_small blocks."""

MOBILENETV3_LARGE = tuple(Block(*row) for row in (
    (3, 16, 16, False, "relu", 1), (3, 64, 24, False, "relu", 2), (3, 72, 24, False, "relu", 1),
    (5, 72, 40, True, "relu", 2), (5, 120, 40, True, "relu", 1), (5, 120, 40, True, "relu", 1),
    (3, 240, 80, False, "hardswish", 2), (3, 200, 80, False, "hardswish", 1), (3, 184, 80, False, "hardswish", 1),
    (3, 184, 80, False, "hardswish", 1), (3, 480, 112, True, "hardswish", 1), (3, 672, 112, True, "hardswish", 1),
    (5, 672, 160, True, "hardswish", 2), (5, 960, 160, True, "hardswish", 1), (5, 960, 160, True, "hardswish", 1)))
"""PaddleOCR's MobileNetV3-large blocks (the DB detector's backbone)."""


def mobilenetv3(scale: float = 0.5, classes: int = 10, full_depth: bool = False, image: int = 64) -> onnx.ModelProto:
    """A MobileNetV3-small classifier as torch exports it, the batch dim the symbolic ``batch``
    (full size: scale 1, 1000 classes, every block, ``image`` 224): conv stem, inverted
    residuals with ReLU or the HardSwish op and squeeze-excite gates (HardSigmoid 1/6), a 1x1
    conv, GlobalAveragePool, Flatten, Gemm -> HardSwish -> Gemm."""
    b = Builder(31)
    channels = divisible(16 * scale)
    x = ACTIVATIONS["HardSwish"](b, conv(b, "input", "stem", 3, channels, 3, 2))
    blocks = MOBILENETV3_SMALL if full_depth else shallow(MOBILENETV3_SMALL)
    for i, block in enumerate(blocks):
        x, channels = inverted_residual(b, x, f"b{i}", channels, block, scale, "HardSwish", 1 / 6)
    last = divisible(576 * scale)
    x = ACTIVATIONS["HardSwish"](b, conv(b, x, "last", channels, last, 1))
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x])], axis=1)
    hidden = divisible(1024 * scale)
    x = ACTIVATIONS["HardSwish"](b, b.node("Gemm", [x, b.weight("fc1_w", (hidden, last), last),
                                                    b.const("fc1_b", np.zeros(hidden, np.float32))], transB=1))
    b.node("Gemm", [x, b.weight("fc2_w", (classes, hidden), hidden), b.const("fc2_b", np.zeros(classes, np.float32))],
           output="logits", transB=1)
    return b.model("mobilenetv3_small", [helper.make_tensor_value_info("input", FLOAT, ["batch", 3, image, image])],
                   [helper.make_tensor_value_info("logits", FLOAT, ["batch", classes])])


def dbnet(scale: float = 0.35, neck: int = 32, full_depth: bool = False) -> onnx.ModelProto:
    """A DB text detector as PaddleOCR exports it (full size: scale 0.5, neck 256, every block, a
    640 x 640 input) on ``[batch, 3, height, width]``: a MobileNetV3-large backbone with HardSwish
    as the formula and squeeze-excite gates (HardSigmoid 0.2, 0.5), features at strides 4, 8, 16
    and 32 (the last through a 1x1 conv), the DBFPN neck (1x1 laterals, Resize x2 and Add top-down,
    3x3 convs, Resize x8/x4/x2 to stride 4, channel Concat), and the DB head (3x3 conv, Relu, two
    2x2 stride-2 ConvTransposes, Sigmoid) giving a probability map of the input's size."""
    b = Builder(37)
    channels = divisible(16 * scale)
    x = hard_swish(b, conv(b, "x", "stem", 3, channels, 3, 2))
    blocks = MOBILENETV3_LARGE if full_depth else shallow(MOBILENETV3_LARGE)
    features = []
    for i, block in enumerate(blocks):
        if block.stride == 2 and i > 1:
            features.append((x, channels))
        x, channels = inverted_residual(b, x, f"b{i}", channels, block, scale, "hardswish", 0.2)
    last = divisible(960 * scale)
    features.append((hard_swish(b, conv(b, x, "last", channels, last, 1)), last))
    laterals = [conv(b, f, f"lateral{i}", c, neck, 1) for i, (f, c) in enumerate(features)]
    merged = [laterals[-1]]
    for lateral in reversed(laterals[:-1]):
        merged.insert(0, b.node("Add", [lateral, upsample(b, merged[0], 2)]))
    smoothed = [conv(b, m, f"smooth{i}", neck, neck // 4, 3) for i, m in enumerate(merged)]
    fused = b.node("Concat", [upsample(b, s, 2**i) if i else s for i, s in enumerate(smoothed)][::-1], axis=1)
    quarter = neck // 4
    y = b.node("Relu", [conv(b, fused, "head_conv", neck, quarter, 3)])
    y = b.node("Relu", [conv_transpose(b, y, "head_up1", quarter, quarter)])
    b.node("Sigmoid", [conv_transpose(b, y, "head_up2", quarter, 1)], output="maps")
    return b.model("db_text_detector", [helper.make_tensor_value_info("x", FLOAT, ["batch", 3, "height", "width"])],
                   [helper.make_tensor_value_info("maps", FLOAT, ["batch", 1, "height", "width"])])


def conv_transpose(b: Builder, x: str, prefix: str, cin: int, cout: int) -> str:
    """A 2x2 stride-2 ConvTranspose (doubling height and width) with seeded weights and a zero bias."""
    return b.node("ConvTranspose", [x, b.weight(f"{prefix}_w", (cin, cout, 2, 2), cin),
                                    b.const(f"{prefix}_b", np.zeros(cout, np.float32))],
                  kernel_shape=[2, 2], strides=[2, 2])


def batch_norm(b: Builder, x: str, prefix: str, channels: int) -> str:
    """An inference BatchNormalization over ``channels`` with seeded statistics (not folded into a conv)."""
    stats = {"scale": 1 + 0.1 * b.rng.standard_normal(channels), "bias": 0.1 * b.rng.standard_normal(channels),
             "mean": 0.1 * b.rng.standard_normal(channels), "var": 1 + 0.1 * b.rng.random(channels)}
    return b.node("BatchNormalization", [b.const(f"{prefix}_{k}", v.astype(np.float32)) if k else x
                                         for k, v in [("", None), *stats.items()]], epsilon=1e-5)


def densenet(layers: int = 8, image: int = 48, stem: int = 64, growth: int = 32) -> onnx.ModelProto:
    """One DenseNet dense block as the light zoo's DenseNet-121 has them (Huang et al., CVPR 2017):
    a stem conv, then ``layers`` layers of BN-Relu-Conv 1x1 (to ``4 growth`` channels)-BN-Relu-Conv
    3x3 (``growth`` channels), each layer's output concatenated to its input; a global pool ends it.
    Every 3x3 conv keeps three rows of 128 channels in its line buffer and every batch norm its
    per-channel words, wherever the weights are."""
    b = Builder(seed=21)
    x, channels = conv(b, "image", "stem", 3, stem, 3), stem
    for i in range(layers):
        y = b.node("Relu", [batch_norm(b, x, f"l{i}_bn1", channels)])
        y = conv(b, y, f"l{i}_c1", channels, 4 * growth, 1)
        y = conv(b, b.node("Relu", [batch_norm(b, y, f"l{i}_bn2", 4 * growth)]), f"l{i}_c3", 4 * growth, growth, 3)
        x, channels = b.node("Concat", [x, y], axis=1), channels + growth
    b.node("GlobalAveragePool", [x], output="features")
    return b.model("densenet_block", [helper.make_tensor_value_info("image", FLOAT, [1, 3, image, image])],
                   [helper.make_tensor_value_info("features", FLOAT, [1, channels, 1, 1])])


@dataclass(frozen=True)
class RealModel:
    """A builder and the input shapes that bind its dynamic axes (small, and full size)."""

    build: Callable[..., onnx.ModelProto]
    input_shapes: dict[str, tuple[int, ...]]
    full_size: dict = field(default_factory=dict)
    """Builder keywords of the full-size model (BERT-base's 12 layers, ...)."""
    full_input_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)


REAL_MODELS: dict[str, RealModel] = {
    "yolo": RealModel(yolo, {"images": (1, 3, 64, 96)}, {"width": 16}, {"images": (1, 3, 320, 320)}),
    "bert": RealModel(bert, {"input_ids": (1, 16), "attention_mask": (1, 16)},
                      {"layers": 12, "hidden": 768, "heads": 12, "vocab": 30522},
                      {"input_ids": (1, 128), "attention_mask": (1, 128)}),
    "ocr": RealModel(ocr, {"image": (1, 1, 32, 128)}, {"channels": 128}, {"image": (1, 1, 32, 512)}),
    "crnn": RealModel(crnn, {"image": (1, 1, 32, 100)}, {"channels": 256, "hidden": 256}, {"image": (1, 1, 32, 400)}),
    "if": RealModel(if_model, {"x": (2, 32)}, {"features": 512}, {"x": (8, 32)}),
    "qdq": RealModel(qdq, {}, {"image": 64}, {}),
    "qonnx": RealModel(qonnx, {"image": (1, 3, 32, 32)}, {"channels": 64}, {"image": (1, 3, 32, 32)}),
    "yolox": RealModel(yolox, {}, {"width": 32, "image": 416}, {}),
    "dbnet": RealModel(dbnet, {"x": (1, 3, 64, 64)}, {"scale": 0.5, "neck": 256, "full_depth": True},
                       {"x": (1, 3, 640, 640)}),
    "mobilenetv3": RealModel(mobilenetv3, {"input": (1, 3, 64, 64)},
                             {"scale": 1.0, "classes": 1000, "full_depth": True, "image": 224},
                             {"input": (1, 3, 224, 224)}),
}


def build(name: str, full: bool = False) -> tuple[onnx.ModelProto, dict[str, tuple[int, ...]]]:
    """The model ``name`` and its input shapes (full size when ``full``)."""
    spec = REAL_MODELS[name]
    return (spec.build(**spec.full_size), spec.full_input_shapes) if full else (spec.build(), spec.input_shapes)


# ---- the independent count -------------------------------------------------------------------------


def _feeds(model: onnx.ModelProto, input_shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    initializers = {t.name for t in model.graph.initializer}
    feeds = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        shape = input_shapes.get(value.name) or tuple(d.dim_value for d in tensor.shape.dim)
        if tensor.elem_type == TensorProto.INT64:
            feeds[value.name] = rng.integers(0, 2, shape).astype(np.int64)
        else:
            feeds[value.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def onnxruntime_shapes(model: onnx.ModelProto, input_shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple]:
    """The shape of every top-level tensor of one onnxruntime run (QONNX quantizers as functions)."""
    import onnxruntime as ort

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    if any(node.domain == QONNX_DOMAIN for node in probe.graph.node):
        from fpgaplace.model.passes.qonnx import attach_functions

        attach_functions(probe, probe.graph.name)
    present = {v.name for v in probe.graph.output}
    names = [t for node in probe.graph.node for t in node.output if t and t not in present]
    probe.graph.output.extend(onnx.ValueInfoProto(name=t) for t in names)
    options = ort.SessionOptions()
    options.log_severity_level = 4
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(probe.SerializeToString(), options, providers=["CPUExecutionProvider"])
    feeds = _feeds(model, input_shapes)
    wanted = [v.name for v in probe.graph.output]
    values = session.run(wanted, feeds)
    shapes = {name: tuple(value.shape) for name, value in zip(wanted, values, strict=True)}
    shapes.update({name: value.shape for name, value in feeds.items()})
    shapes.update({t.name: tuple(t.dims) for t in model.graph.initializer})
    return shapes


RECURRENT_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
RECURRENT_ELEMENTWISE = {"LSTM": 8, "GRU": 7, "RNN": 1}
"""Elementwise operations per hidden unit and step by the ONNX operator spec's equations (LSTM: 4
gate activations, C = f*C + i*c as 2, h(C), o*h(C); GRU: 3 activations, r*(...), (1-z)*h' + z*H
as 3; RNN: the activation)."""


def _recurrent_macs(node: onnx.NodeProto, shapes: dict[str, tuple]) -> int:
    """An LSTM/GRU/RNN from its run shapes: onnx-tool's matrix-product term (W and R volumes x batch
    x steps) and bias term (B's volume x batch x steps), and the spec's elementwise work per unit."""
    x, w, r = (shapes[t] for t in node.input[:3])
    layout = next((a.i for a in node.attribute if a.name == "layout"), 0)
    steps, batch = (x[1], x[0]) if layout else (x[0], x[1])
    directions, hidden = w[0], r[2]
    products = (math.prod(w) + math.prod(r)) * batch * steps
    bias = math.prod(shapes[node.input[3]]) * batch * steps if len(node.input) > 3 and node.input[3] else 0
    return products + bias + RECURRENT_ELEMENTWISE[node.op_type] * directions * hidden * batch * steps


def _conv_transpose_macs(node: onnx.NodeProto, shapes: dict[str, tuple]) -> int:
    """A ConvTranspose from its run shapes, by the operator spec: every input element is scattered,
    times its weight, into ``out_channels / group x kernel area`` outputs (weight ``[C_in, C_out /
    group, k...]``), one MAC each."""
    weight = shapes[node.input[1]]
    return math.prod(shapes[node.input[0]]) * math.prod(weight[1:])


def _without_control_flow(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` without its If nodes (onnx-tool cannot infer them), its outputs being what they read;
    a node reading an If's output would lose its count, so it is refused."""
    dropped = [node for node in model.graph.node if node.op_type == "If"]
    if not dropped:
        return model
    produced = {t for node in dropped for t in node.output}
    kept = [node for node in model.graph.node if node.op_type != "If"]
    assert not any(t in produced for node in kept for t in node.input), "an op reads an If output"
    outputs = [helper.make_empty_tensor_value_info(t) for node in dropped for t in node.input]
    graph = helper.make_graph(kept, model.graph.name, list(model.graph.input), outputs, list(model.graph.initializer))
    return helper.make_model(graph, opset_imports=list(model.opset_import), ir_version=model.ir_version)


def _onnx_tool_macs(model: onnx.ModelProto, shapes: dict[str, tuple]) -> dict[str, float]:
    """Dot-product MACs of every top-level node but control flow: onnx-tool's count, less the one
    MAC per output it adds for a Conv or Gemm bias (the published convention leaves bias adds out);
    recurrent ops by ``_recurrent_macs`` (onnx-tool's activation costs follow its own convention),
    ConvTranspose by ``_conv_transpose_macs`` (onnx-tool reads its weight as a Conv's and ignores
    the stride)."""
    import onnx_tool

    model = _without_control_flow(model)
    tool = onnx_tool.Model(model, {"verbose": False})
    graph = tool.graph
    graph.graph_reorder_nodes()
    inputs = {v.name: np.zeros(shapes[v.name], np.float32) for v in model.graph.input
              if v.name not in {t.name for t in model.graph.initializer}}
    graph.shape_infer(inputs)
    graph.profile()
    counts = {}
    for node in model.graph.node:
        if node.op_type in RECURRENT_GATES:
            counts[node.name] = _recurrent_macs(node, shapes)
        elif node.op_type == "ConvTranspose":
            counts[node.name] = _conv_transpose_macs(node, shapes)
        elif node.op_type in DOT_PRODUCT_OPS:
            bias = math.prod(shapes[node.output[0]]) if node.op_type in ("Conv", "Gemm") and len(node.input) > 2 \
                and node.input[2] else 0
            counts[node.name] = float(graph.nodemap[node.name].macs[0]) - bias
    return counts


def _branch_as_model(model: onnx.ModelProto, branch: onnx.GraphProto, shapes: dict[str, tuple]) -> onnx.ModelProto:
    """``branch`` as a model of its own: the outer tensors it reads become inputs with their run shapes."""
    own = {t.name for t in branch.initializer} | {t for node in branch.node for t in node.output}
    outer = sorted({t for node in branch.node for t in node.input if t and t not in own})
    inputs = [helper.make_tensor_value_info(t, FLOAT, list(shapes[t])) for t in outer]
    graph = helper.make_graph(list(branch.node), branch.name, inputs, list(branch.output), list(branch.initializer))
    return helper.make_model(graph, opset_imports=list(model.opset_import), ir_version=model.ir_version)


def macs_by_node(model: onnx.ModelProto, input_shapes: dict[str, tuple[int, ...]]) -> dict[str, float]:
    """The dot-product MACs of every top-level node of ``model`` (no control flow) bound to
    ``input_shapes``, by node name, counted as ``independent_macs`` counts them."""
    return _onnx_tool_macs(model, onnxruntime_shapes(model, input_shapes))


def independent_macs(model: onnx.ModelProto, input_shapes: dict[str, tuple[int, ...]]) -> tuple[float, str]:
    """Dot-product MACs of ``model`` bound to ``input_shapes`` and the tool that counted them: the
    qonnx package's inference_cost for a QONNX model, else onnx-tool (an ``If`` costs its larger
    branch, each branch counted by onnx-tool as a model of its own)."""
    if any(node.domain == QONNX_DOMAIN for node in model.graph.node):
        from qonnx.core.modelwrapper import ModelWrapper
        from qonnx.transformation.change_batchsize import ChangeBatchSize
        from qonnx.util.inference_cost import inference_cost

        wrapper = ModelWrapper(onnx.ModelProto.FromString(model.SerializeToString()))
        batch = next(iter(input_shapes.values()))[0] if input_shapes else 1
        wrapper = wrapper.transform(ChangeBatchSize(batch))
        cost = inference_cost(wrapper, discount_sparsity=False)["total_cost"]
        return float(cost["total_macs"]), "qonnx inference_cost"
    shapes = onnxruntime_shapes(model, input_shapes)
    total = sum(_onnx_tool_macs(model, shapes).values())
    for node in model.graph.node:
        if node.op_type == "If":
            branches = [a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH]
            total += max(sum(_onnx_tool_macs(sub, shapes | {v.name: shapes[v.name] for v in sub.graph.input})
                             .values()) for sub in (_branch_as_model(model, g, shapes) for g in branches))
    return total, "onnx-tool"


# ---- the commands --------------------------------------------------------------------------------

COMMANDS = ("inspect", "cost", "place", "split")


@dataclass
class CommandRun:
    """One CLI command on one model: exit code, JSON output (None if not JSON) and stderr."""

    command: str
    exit_code: int
    document: dict | None
    stderr: str
    seconds: float


def input_shape_flags(input_shapes: dict[str, tuple[int, ...]]) -> list[str]:
    return [flag for name, dims in input_shapes.items() for flag in ("--input-shape", f"{name}=" +
                                                                    "x".join(map(str, dims)))]


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """``fpgaplace ARGV`` in-process (typer's CliRunner): exit code, stdout, stderr."""
    import typer.testing

    from fpgaplace.cli.app import app

    result = typer.testing.CliRunner().invoke(app, argv, catch_exceptions=True)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        import traceback

        stderr = "".join(traceback.format_exception(result.exception))
        return 99, result.stdout, result.stderr + stderr
    return result.exit_code, result.stdout, result.stderr


def run_commands(path, input_shapes: dict[str, tuple[int, ...]], folder,
                 cpu_cost: str = "analytic") -> list[CommandRun]:
    """``inspect``, ``cost``, ``place`` and ``split`` (into ``folder``/split) on the model file ``path``."""
    import json
    import time

    shape_flags = input_shape_flags(input_shapes)
    board = ["--board", "zcu104", "--cpu-cost", cpu_cost]
    argvs = {
        "inspect": ["inspect", str(path), *shape_flags, "--json"],
        "cost": ["cost", str(path), *board, *shape_flags, "--json"],
        "place": ["place", str(path), *board, *shape_flags, "--time-limit", "20", "--json"],
        "split": ["split", str(path), *board, *shape_flags, "--time-limit", "20", "--out", str(folder / "split"),
                  "--json"],
    }
    runs = []
    for command, argv in argvs.items():
        start = time.perf_counter()
        code, stdout, stderr = run_cli(argv)
        try:
            document = json.loads(stdout)
        except ValueError:
            document = None
        runs.append(CommandRun(command, code, document, stderr, time.perf_counter() - start))
    return runs


def _same_shape_up_to_heads(inspected: tuple[int, ...], reference: tuple[int, ...]) -> bool:
    """Equal shapes, or ``reference`` is ``[B, H, ...]`` and ``inspected`` its heads-as-batch ``[B*H, ...]``."""
    if inspected == reference:
        return True
    return (len(reference) == len(inspected) + 1 >= 3 and inspected[0] == reference[0] * reference[1]
            and inspected[1:] == reference[2:])


def shape_mismatches(model: onnx.ModelProto, input_shapes: dict[str, tuple[int, ...]],
                     inspect_document: dict) -> tuple[int, list[str]]:
    """How many ops of ``inspect --json`` were compared with the onnxruntime run's shape of the same
    node's first output, and those that differ (ops the optimizer made anew are not in the run).
    Attention's head-wise ops run with heads as a batch (``model.passes.heads``): ``[B*H, S, D]``
    there matches onnxruntime's ``[B, H, S, D]``."""
    shapes = onnxruntime_shapes(model, input_shapes)
    first_output = {node.name: node.output[0] for node in model.graph.node}
    compared, wrong = 0, []
    for op in inspect_document["ops"]:
        tensor = first_output.get(op["name"])
        if tensor not in shapes:
            continue
        compared += 1
        if not _same_shape_up_to_heads(tuple(op["output_shape"]), tuple(shapes[tensor])):
            wrong.append(f"{op['name']}: {op['output_shape']} != {list(shapes[tensor])}")
    return compared, wrong
