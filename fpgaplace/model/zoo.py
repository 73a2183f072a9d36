"""Small real models built with onnx.helper (seeded random weights) and the onnx package's
shipped model-zoo structures. Used by the demo and the tests; no downloads.

Every builder returns a checked ``onnx.ModelProto``. Weights come from
``numpy.random.default_rng(seed)`` so two calls give the same model.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from fpgaplace.util.errors import FpgaplaceError

LIGHT_MODELS = (
    "resnet50",
    "densenet121",
    "inception_v1",
    "inception_v2",
    "shufflenet",
    "squeezenet",
    "vgg19",
    "zfnet512",
    "bvlc_alexnet",
)
DEFAULT_OPSET = 17  # LayerNormalization needs 17


class _Builder:
    """Collects nodes and seeded initializers of one graph; names nodes '<prefix><op>_<n>'."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._count = 0

    def weight(self, name: str, shape: tuple[int, ...], scale: float | None = None) -> str:
        fan_in = math.prod(shape[1:]) if len(shape) > 1 else shape[0]
        std = scale if scale is not None else 1.0 / math.sqrt(max(fan_in, 1))
        values = (self.rng.standard_normal(shape) * std).astype(np.float32)
        self.initializers.append(numpy_helper.from_array(values, name))
        return name

    def const(self, name: str, values: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(values, name))
        return name

    def node(self, op_type: str, inputs: list[str], output: str | None = None, **attrs) -> str:
        """Append one node; its output tensor is ``output`` or the node's own name."""
        self._count += 1
        name = f"{op_type.lower()}_{self._count}"
        self.nodes.append(helper.make_node(op_type, inputs, [output or name], name=name, **attrs))
        return output or name

    def model(
        self,
        name: str,
        inputs: list[onnx.ValueInfoProto],
        outputs: list[onnx.ValueInfoProto],
        opset: int = DEFAULT_OPSET,
    ) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, name, inputs, outputs, initializer=self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="fpgaplace")
        model.ir_version = min(model.ir_version, 8)  # readable by older onnxruntime builds too
        onnx.checker.check_model(model)
        return model


def _float_input(name: str, shape: list[int | str]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def mlp(batch: int | str = 1, sizes: tuple[int, ...] = (64, 128, 64, 10), seed: int = 0) -> onnx.ModelProto:
    """Gemm/Relu layers ending in Softmax. ``batch`` may be a symbol such as "N"."""
    b = _Builder(seed)
    x = "x"
    for i, (fan_in, fan_out) in enumerate(zip(sizes, sizes[1:], strict=False)):
        w = b.weight(f"fc{i}_w", (fan_out, fan_in))
        bias = b.weight(f"fc{i}_b", (fan_out,), scale=0.1)
        x = b.node("Gemm", [x, w, bias], transB=1)
        if i < len(sizes) - 2:
            x = b.node("Relu", [x])
    b.node("Softmax", [x], output="y", axis=-1)
    return b.model("mlp", [_float_input("x", [batch, sizes[0]])], [_float_input("y", [batch, sizes[-1]])])


def _conv_bn(b: _Builder, x: str, prefix: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1) -> str:
    w = b.weight(f"{prefix}_w", (cout, cin // group, k, k))
    y = b.node("Conv", [x, w], kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4, group=group)
    scale = b.const(f"{prefix}_bn_scale", (1.0 + 0.1 * b.rng.standard_normal(cout)).astype(np.float32))
    bias = b.const(f"{prefix}_bn_bias", (0.1 * b.rng.standard_normal(cout)).astype(np.float32))
    mean = b.const(f"{prefix}_bn_mean", (0.1 * b.rng.standard_normal(cout)).astype(np.float32))
    var = b.const(f"{prefix}_bn_var", (1.0 + 0.1 * b.rng.random(cout)).astype(np.float32))
    return b.node("BatchNormalization", [y, scale, bias, mean, var], epsilon=1e-5)


def _residual_block(b: _Builder, x: str, prefix: str, cin: int, cout: int, stride: int) -> str:
    """conv3x3-bn-relu, depthwise conv3x3-bn, conv1x1-bn, + shortcut (1x1 projection if needed), relu."""
    y = b.node("Relu", [_conv_bn(b, x, f"{prefix}a", cin, cout, 3, stride)])
    y = b.node("Relu", [_conv_bn(b, y, f"{prefix}b", cout, cout, 3, group=cout)])
    y = _conv_bn(b, y, f"{prefix}c", cout, cout, 1)
    shortcut = x if stride == 1 and cin == cout else _conv_bn(b, x, f"{prefix}proj", cin, cout, 1, stride)
    return b.node("Relu", [b.node("Add", [y, shortcut])])


def cnn_residual(batch: int | str = "N", image: int = 32, classes: int = 10, seed: int = 1) -> onnx.ModelProto:
    """A small ResNet-style CNN: stem conv-bn-relu, max pool, two residual blocks, global pool, Gemm."""
    b = _Builder(seed)
    x = b.node("Relu", [_conv_bn(b, "image", "stem", 3, 16, 3)])
    x = b.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = _residual_block(b, x, "block1", 16, 16, 1)
    x = _residual_block(b, x, "block2", 16, 32, 2)
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x])], axis=1)
    w = b.weight("fc_w", (classes, 32))
    bias = b.weight("fc_b", (classes,), scale=0.1)
    b.node("Gemm", [x, w, bias], output="logits", transB=1)
    return b.model(
        "cnn_residual",
        [_float_input("image", [batch, 3, image, image])],
        [_float_input("logits", [batch, classes])],
    )


def bottleneck(batch: int | str = 1, image: int = 8, channels: int = 256, inner: int = 32,
               classes: int = 10, seed: int = 5) -> onnx.ModelProto:
    """One ResNet bottleneck block (He et al., 2016) on a wide tensor: stem conv3x3-bn-relu to
    ``channels``, conv1x1-bn-relu to ``inner``, conv3x3-bn-relu, conv1x1-bn to ``channels``, plus
    the identity, relu, global pool, Gemm. Its skip waits the branch's four rows of a sample of
    ``image`` x ``image`` x ``channels`` (a deep FIFO on a small model)."""
    b = _Builder(seed)
    x = b.node("Relu", [_conv_bn(b, "image", "stem", 3, channels, 3)])
    y = b.node("Relu", [_conv_bn(b, x, "reduce", channels, inner, 1)])
    y = b.node("Relu", [_conv_bn(b, y, "middle", inner, inner, 3)])
    y = b.node("Relu", [b.node("Add", [_conv_bn(b, y, "expand", inner, channels, 1), x])])
    y = b.node("Flatten", [b.node("GlobalAveragePool", [y])], axis=1)
    b.node("Gemm", [y, b.weight("fc_w", (classes, channels)), b.weight("fc_b", (classes,), scale=0.1)],
           output="logits", transB=1)
    return b.model("bottleneck", [_float_input("image", [batch, 3, image, image])],
                   [_float_input("logits", [batch, classes])])


def _inverted_residual(b: _Builder, x: str, prefix: str, cin: int, cout: int, stride: int, expand: int) -> str:
    """MobileNetV2 block: 1x1 expand-bn-relu6, 3x3 depthwise-bn-relu6, 1x1 project-bn (+ x)."""
    hidden = cin * expand
    low = b.const(f"{prefix}_relu6_min", np.array(0.0, np.float32))
    high = b.const(f"{prefix}_relu6_max", np.array(6.0, np.float32))
    y = x
    if expand != 1:
        y = b.node("Clip", [_conv_bn(b, y, f"{prefix}_expand", cin, hidden, 1), low, high])
    y = b.node("Clip", [_conv_bn(b, y, f"{prefix}_dw", hidden, hidden, 3, stride, group=hidden), low, high])
    y = _conv_bn(b, y, f"{prefix}_project", hidden, cout, 1)
    return b.node("Add", [y, x]) if stride == 1 and cin == cout else y


MOBILENET_V2_BLOCKS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                       (6, 320, 1, 1))
"""(expansion, output channels, repeats, first stride) of MobileNetV2's bottleneck stages (Sandler et al., 2018)."""


def mobilenet_v2(batch: int | str = 1, image: int = 224, classes: int = 1000, seed: int = 4) -> onnx.ModelProto:
    """MobileNetV2 (width 1.0) with seeded random weights: stem conv, 17 inverted residual
    blocks, 1x1 conv to 1280, global average pool, classifier; about 300 M MACs at 224x224."""
    b = _Builder(seed)
    low = b.const("stem_relu6_min", np.array(0.0, np.float32))
    high = b.const("stem_relu6_max", np.array(6.0, np.float32))
    x = b.node("Clip", [_conv_bn(b, "image", "stem", 3, 32, 3, 2), low, high])
    cin = 32
    for stage, (expand, cout, repeats, stride) in enumerate(MOBILENET_V2_BLOCKS):
        for i in range(repeats):
            x = _inverted_residual(b, x, f"s{stage}b{i}", cin, cout, stride if i == 0 else 1, expand)
            cin = cout
    x = b.node("Clip", [_conv_bn(b, x, "head", cin, 1280, 1), low, high])
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x])], axis=1)
    w = b.weight("classifier_w", (classes, 1280))
    bias = b.weight("classifier_b", (classes,), scale=0.1)
    b.node("Gemm", [x, w, bias], output="logits", transB=1)
    return b.model("mobilenet_v2", [_float_input("image", [batch, 3, image, image])],
                   [_float_input("logits", [batch, classes])])


def _layer_norm(b: _Builder, x: str, prefix: str, hidden: int, output: str | None = None) -> str:
    gamma = b.const(f"{prefix}_gamma", (1.0 + 0.1 * b.rng.standard_normal(hidden)).astype(np.float32))
    beta = b.const(f"{prefix}_beta", (0.1 * b.rng.standard_normal(hidden)).astype(np.float32))
    return b.node("LayerNormalization", [x, gamma, beta], output=output, axis=-1, epsilon=1e-5)


def _dense(b: _Builder, x: str, prefix: str, fan_in: int, fan_out: int) -> str:
    w = b.weight(f"{prefix}_w", (fan_in, fan_out))
    bias = b.weight(f"{prefix}_b", (fan_out,), scale=0.02)
    return b.node("Add", [b.node("MatMul", [x, w]), bias])


def _gelu(b: _Builder, x: str) -> str:
    """GELU as the erf chain exporters emit: x * 0.5 * (1 + erf(x / sqrt(2)))."""
    sqrt2 = b.const(f"sqrt2_{len(b.nodes)}", np.array(math.sqrt(2.0), np.float32))
    one = b.const(f"one_{len(b.nodes)}", np.array(1.0, np.float32))
    half = b.const(f"half_{len(b.nodes)}", np.array(0.5, np.float32))
    erf = b.node("Erf", [b.node("Div", [x, sqrt2])])
    return b.node("Mul", [b.node("Mul", [x, b.node("Add", [erf, one])]), half])


def bert_encoder_layer(
    seq: int = 16, hidden: int = 64, heads: int = 4, batch: int | str = "batch", seed: int = 2
) -> onnx.ModelProto:
    """One post-LN BERT encoder layer: multi-head self-attention and a GELU feed-forward block."""
    if hidden % heads:
        raise FpgaplaceError(f"bert_encoder_layer: hidden={hidden} must be a multiple of heads={heads}")
    b = _Builder(seed)
    _encoder_block(b, "hidden_states", seq, hidden, heads, output="encoded")
    return b.model(
        "bert_encoder_layer",
        [_float_input("hidden_states", [batch, seq, hidden])],
        [_float_input("encoded", [batch, seq, hidden])],
    )


def multi_io(seed: int = 3) -> onnx.ModelProto:
    """Two inputs, two outputs: y1 = relu(a @ W + b), y2 = sigmoid(a * b) + y1."""
    b = _Builder(seed)
    w = b.weight("w", (8, 8))
    y1 = b.node("Relu", [b.node("Add", [b.node("MatMul", ["a", w]), "b"])], output="y1")
    b.node("Add", [b.node("Sigmoid", [b.node("Mul", ["a", "b"])]), y1], output="y2")
    shape = [1, 8]
    return b.model(
        "multi_io",
        [_float_input("a", shape), _float_input("b", shape)],
        [_float_input("y1", shape), _float_input("y2", shape)],
    )


def with_random_weights(model: onnx.ModelProto, seed: int = 5) -> onnx.ModelProto:
    """``model`` with every ConstantOfShape-filled weight (the light model zoo stores weights that
    way) replaced by a seeded random initializer of its shape: He-scaled for 4-D and 2-D weights,
    near 1 for batch-norm scales and variances, small elsewhere; so that quantization and
    numerics behave as with trained weights. Inputs that are initializers are dropped."""
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(seed)
    work = onnx.ModelProto()
    work.CopyFrom(model)
    graph = work.graph
    shapes = {t.name: nh.to_array(t) for t in graph.initializer}
    keep, new = [], []
    for node in graph.node:
        if node.op_type != "ConstantOfShape" or node.input[0] not in shapes:
            keep.append(node)
            continue
        shape = tuple(int(d) for d in shapes[node.input[0]])
        name = node.output[0]
        if len(shape) in (2, 4):
            values = rng.standard_normal(shape) * math.sqrt(2.0 / max(1, math.prod(shape[1:])))
        elif name.endswith(("_s_0", "_scale", "_var_0", "_var", "_riv_0")):
            values = 1.0 + 0.1 * rng.random(shape)
        else:
            values = 0.05 * rng.standard_normal(shape)
        new.append(nh.from_array(values.astype(np.float32), name))
    del graph.node[:]
    graph.node.extend(keep)
    graph.initializer.extend(new)
    used = {t for node in graph.node for t in node.input}
    kept_init = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept_init)
    initializers = {t.name for t in graph.initializer}
    inputs = [i for i in graph.input if i.name not in initializers and i.name in used]
    del graph.input[:]
    graph.input.extend(inputs)
    work.ir_version = max(work.ir_version, 4)  # from IR 4 on, initializers need not be graph inputs
    onnx.checker.check_model(work)
    return work


def light_model_path(name: str) -> Path:
    """Path of ``onnx/backend/test/data/light/light_<name>.onnx`` shipped with the onnx package."""
    path = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / f"light_{name}.onnx"
    if not path.is_file():
        raise FpgaplaceError(
            f"light model '{name}': {path} not found; expected one of {', '.join(LIGHT_MODELS)}"
        )
    return path


def demo_model() -> onnx.ModelProto:
    """The model ``fpgaplace demo`` places: the residual CNN at batch 1."""
    return cnn_residual(batch=1)


def _recurrent(b: _Builder, op: str, x: str, prefix: str, inputs: int, hidden: int, bidirectional: bool) -> str:
    """An LSTM or GRU over ``x [T, B, inputs]`` (its Y output ``[T, D, B, hidden]``), seeded weights."""
    gates, directions = {"LSTM": 4, "GRU": 3}[op], 2 if bidirectional else 1
    w = b.weight(f"{prefix}_w", (directions, gates * hidden, inputs), scale=1.0 / math.sqrt(inputs))
    r = b.weight(f"{prefix}_r", (directions, gates * hidden, hidden), scale=1.0 / math.sqrt(hidden))
    bias = b.weight(f"{prefix}_b", (directions, 2 * gates * hidden), scale=0.1)
    return b.node(op, [x, w, r, bias], hidden_size=hidden,
                  direction="bidirectional" if bidirectional else "forward")


def crnn_lstm(height: int = 8, width: int = 16, classes: int = 12, hidden: int = 16, bidirectional: bool = True,
              seed: int = 11) -> onnx.ModelProto:
    """A CRNN (text-line recogniser shape): two conv-relu layers with pooling over a grey
    ``[1, 1, height, width]`` image, a max pool over the remaining height, the columns as a sequence
    ``[W', 1, C]`` into an LSTM (bidirectional by default) and a dense classifier of every step:
    ``logits [W', classes]`` with ``W' = width / 2``."""
    b = _Builder(seed)
    x = b.node("Relu", [b.node("Conv", ["image", b.weight("conv1_w", (8, 1, 3, 3)), b.weight("conv1_b", (8,), 0.1)],
                               kernel_shape=[3, 3], pads=[1, 1, 1, 1])])
    x = b.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = b.node("Relu", [b.node("Conv", [x, b.weight("conv2_w", (16, 8, 3, 3)), b.weight("conv2_b", (16,), 0.1)],
                               kernel_shape=[3, 3], pads=[1, 1, 1, 1])])
    steps = width // 2
    x = b.node("MaxPool", [x], kernel_shape=[height // 2, 1], strides=[height // 2, 1])  # [1, 16, 1, W']
    x = b.node("Transpose", [b.node("Squeeze", [x, b.const("squeeze_axes", np.array([2]))])], perm=[2, 0, 1])
    y = _recurrent(b, "LSTM", x, "lstm", 16, hidden, bidirectional)  # [W', D, 1, hidden]
    directions = 2 if bidirectional else 1
    y = b.node("Reshape", [y, b.const("steps_shape", np.array([steps, directions * hidden]))])
    b.node("Gemm", [y, b.weight("fc_w", (classes, directions * hidden)), b.weight("fc_b", (classes,), 0.1)],
           output="logits", transB=1)
    return b.model("crnn_lstm", [_float_input("image", [1, 1, height, width])],
                   [_float_input("logits", [steps, classes])])


def lstm_sequence(steps: int = 4, inputs: int = 6, hidden: int = 4, seed: int = 13) -> onnx.ModelProto:
    """One forward LSTM over a sequence and nothing else: ``x [1, steps, inputs]`` reshaped (free) to
    ``[steps, 1, inputs]``, the LSTM's hidden states ``Y`` reshaped to ``y [1, steps * hidden]``. The
    smallest recurrence, for measuring a step's time and the cell state's numerics over long sequences."""
    b = _Builder(seed)
    x = b.node("Reshape", ["x", b.const("time_shape", np.array([steps, 1, inputs]))])
    y = _recurrent(b, "LSTM", x, "lstm", inputs, hidden, False)  # [steps, 1, 1, hidden]
    b.node("Reshape", [y, b.const("flat_shape", np.array([1, steps * hidden]))], output="y")
    return b.model("lstm_sequence", [_float_input("x", [1, steps, inputs])], [_float_input("y", [1, steps * hidden])])


def byte_classifier(length: int = 16, embedding: int = 16, hidden: int = 16, classes: int = 4, recurrent: str = "GRU",
                    seed: int = 12) -> onnx.ModelProto:
    """A byte-sequence classifier: ``bytes [1, length]`` int32 (0..255) -> Gather of a 256-row
    embedding table -> ``[length, 1, embedding]`` -> a GRU (or ``recurrent="conv"``: a conv1d
    over the sequence and a global average pool) -> its last hidden state -> Gemm -> ``logits [1, classes]``."""
    b = _Builder(seed)
    table = b.weight("embedding", (256, embedding), scale=1.0)
    x = b.node("Gather", [table, "bytes"], axis=0)  # [1, length, embedding]
    if recurrent == "conv":
        x = b.node("Transpose", [x], perm=[0, 2, 1])  # [1, embedding, length]
        x = b.node("Unsqueeze", [x, b.const("unsqueeze_axes", np.array([2]))])  # [1, embedding, 1, length]
        weights = [b.weight("conv_w", (hidden, embedding, 1, 3)), b.weight("conv_b", (hidden,), 0.1)]
        x = b.node("Relu", [b.node("Conv", [x, *weights], kernel_shape=[1, 3], pads=[0, 1, 0, 1])])
        last = b.node("Flatten", [b.node("GlobalAveragePool", [x])], axis=1)
    else:
        x = b.node("Transpose", [x], perm=[1, 0, 2])  # [length, 1, embedding]
        weights = [b.weight("gru_w", (1, 3 * hidden, embedding), 1.0 / math.sqrt(embedding)),
                   b.weight("gru_r", (1, 3 * hidden, hidden), 1.0 / math.sqrt(hidden)),
                   b.weight("gru_b", (1, 6 * hidden), 0.1)]
        b.nodes.append(helper.make_node(recurrent, [x, *weights], ["gru_y", "gru_last"], name="gru",
                                        hidden_size=hidden))  # Y unread; Y_h [1, 1, hidden]
        last = b.node("Reshape", ["gru_last", b.const("last_shape", np.array([1, hidden]))])
    b.node("Gemm", [last, b.weight("fc_w", (classes, hidden)), b.weight("fc_b", (classes,), 0.1)],
           output="logits", transB=1)
    return b.model("byte_classifier", [helper.make_tensor_value_info("bytes", TensorProto.INT32, [1, length])],
                   [_float_input("logits", [1, classes])])

def _encoder_block(b: _Builder, x: str, seq: int, hidden: int, heads: int, prefix: str = "",
                   output: str | None = None) -> str:
    """One post-LN encoder block on ``x [B, seq, hidden]``: multi-head self-attention with the
    heads as exporters write them (Reshape to [B, S, H, D], Transpose to [B, H, S, D], Kᵀ as [B, H,
    D, S]), residual and layer norm, then a GELU feed-forward block (4 x hidden), residual and
    layer norm. Weight names start with ``prefix``."""
    head_dim = hidden // heads
    split_shape = b.const(f"{prefix}split_heads_shape", np.array([0, seq, heads, head_dim], np.int64))
    merge_shape = b.const(f"{prefix}merge_heads_shape", np.array([0, seq, hidden], np.int64))

    def heads_first(t: str, perm: list[int]) -> str:
        return b.node("Transpose", [b.node("Reshape", [t, split_shape])], perm=perm)

    q = heads_first(_dense(b, x, f"{prefix}query", hidden, hidden), [0, 2, 1, 3])  # [B, H, S, D]
    k = heads_first(_dense(b, x, f"{prefix}key", hidden, hidden), [0, 2, 3, 1])  # [B, H, D, S]
    v = heads_first(_dense(b, x, f"{prefix}value", hidden, hidden), [0, 2, 1, 3])  # [B, H, S, D]
    scale = b.const(f"{prefix}attention_scale", np.array(1.0 / math.sqrt(head_dim), np.float32))
    scores = b.node("Mul", [b.node("MatMul", [q, k]), scale])
    probs = b.node("Softmax", [scores], axis=-1)
    context = b.node("Transpose", [b.node("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    context = b.node("Reshape", [context, merge_shape])
    attended = _layer_norm(b, b.node("Add", [_dense(b, context, f"{prefix}attn_out", hidden, hidden), x]),
                           f"{prefix}ln1", hidden)
    inner = _gelu(b, _dense(b, attended, f"{prefix}ffn_in", hidden, 4 * hidden))
    ffn = _dense(b, inner, f"{prefix}ffn_out", 4 * hidden, hidden)
    return _layer_norm(b, b.node("Add", [ffn, attended]), f"{prefix}ln2", hidden, output=output)


def vit_encoder(image: int = 32, patch: int = 8, hidden: int = 64, heads: int = 4, layers: int = 4,
                classes: int = 10, channels: int = 3, batch: int | str = 1, seed: int = 6) -> onnx.ModelProto:
    """A ViT-style classifier (Dosovitskiy et al., 2021) with seeded random weights: the patch
    embedding as a Conv of kernel and stride ``patch``, the patches as tokens ``[B, P, hidden]``
    (Reshape, Transpose), a class token (Concat of a constant) in front, a position embedding (Add
    of a constant), ``layers`` post-LN encoder blocks and a classifier (MatMul, Add) on the class
    token (a Slice of the flattened tokens). At the defaults 17 tokens of 64."""
    if image % patch or hidden % heads:
        raise FpgaplaceError(f"vit_encoder: image={image} must be a multiple of patch={patch} and hidden={hidden} "
                             f"of heads={heads}")
    b = _Builder(seed)
    patches = (image // patch) ** 2
    tokens = patches + 1
    w = b.weight("patch_w", (hidden, channels, patch, patch))
    x = b.node("Conv", ["image", w, b.weight("patch_b", (hidden,), scale=0.02)], kernel_shape=[patch, patch],
               strides=[patch, patch])
    x = b.node("Reshape", [x, b.const("patches_shape", np.array([0, hidden, patches], np.int64))])
    x = b.node("Transpose", [x], perm=[0, 2, 1])  # [B, P, hidden]
    cls = b.const("class_token", (0.02 * b.rng.standard_normal((1, 1, hidden))).astype(np.float32))
    x = b.node("Concat", [cls, x], axis=1)
    x = b.node("Add", [x, b.const("position_embedding",
                                  (0.02 * b.rng.standard_normal((1, tokens, hidden))).astype(np.float32))])
    for i in range(layers):
        x = _encoder_block(b, x, tokens, hidden, heads, prefix=f"layer{i}_")
    x = b.node("Reshape", [x, b.const("tokens_flat", np.array([0, tokens * hidden], np.int64))])
    starts, ends, axes = (b.const(name, np.array([v], np.int64)) for name, v in
                          (("class_start", 0), ("class_end", hidden), ("class_axis", 1)))
    x = b.node("Slice", [x, starts, ends, axes])  # the class token: the first hidden values of a sample
    b.node("Add", [b.node("MatMul", [x, b.weight("head_w", (hidden, classes))]),
                   b.weight("head_b", (classes,), scale=0.02)], output="logits")
    return b.model("vit_encoder", [_float_input("image", [batch, channels, image, image])],
                   [_float_input("logits", [batch, classes])])

# ---- QONNX low-bit networks (Brevitas-style exports, built directly) ---------------------------

QONNX_DOMAIN = "qonnx.custom_op.general"


class _QonnxBuilder(_Builder):
    """A ``_Builder`` that writes QONNX quantizers. Every scale is a power of two, so that a
    layer's real rescaling ``sx * sw / sy`` is one too and the integer cores can equal qonnx's
    float execution exactly; the scales are chosen so that each quantizer's range is used."""

    def quant(self, x: str, scale: float | np.ndarray, bits: int, signed: bool = True, narrow: bool = False) -> str:
        """``x`` through a QONNX quantizer: a BipolarQuant at one signed bit, else a Quant."""
        s = self.const(f"q{self._count + 1}_scale", np.asarray(scale, np.float32))
        if bits == 1 and signed:
            return self.node("BipolarQuant", [x, s], domain=QONNX_DOMAIN)
        zero = self.const(f"q{self._count + 1}_zero", np.array(0.0, np.float32))
        width = self.const(f"q{self._count + 1}_bits", np.array(float(bits), np.float32))
        return self.node("Quant", [x, s, zero, width], domain=QONNX_DOMAIN, signed=int(signed), narrow=int(narrow),
                         rounding_mode="ROUND")

    def qweight(self, name: str, shape: tuple[int, ...], bits: int, axis: int = 0) -> tuple[str, float]:
        """A weight of ``bits`` bits (1: bipolar; 2: ternary, narrow) with one power-of-two scale per
        channel of ``axis`` (two exponents apart at most) and float values that round to random codes;
        the quantizer's output and the smallest scale."""
        if bits == 1:
            codes = self.rng.choice([-1.0, 1.0], size=shape)
            noise = codes * self.rng.uniform(-0.5, 0.5, size=shape)
        else:
            high = 2 ** (bits - 1) - 1
            codes = self.rng.integers(-high, high + 1, size=shape).astype(np.float64)
            noise = self.rng.uniform(-0.45, 0.45, size=shape)
        channel_shape = [n if a == axis else 1 for a, n in enumerate(shape)]
        base = 2.0 ** -int(self.rng.integers(3, 6))
        scale = (base * 2.0 ** self.rng.integers(0, 2, size=channel_shape)).astype(np.float32)
        values = ((codes + noise) * scale).astype(np.float32)
        self.initializers.append(numpy_helper.from_array(values, name))
        return self.quant(name, scale, bits, signed=True, narrow=bits == 2), base

    def batch_norm(self, x: str, prefix: str, channels: int, spread: float) -> str:
        """A BatchNormalization whose outputs spread about ``spread`` around its random shifts; one
        channel in four has a negative scale (its output falls as its input rises)."""
        signs = np.where(self.rng.random(channels) < 0.25, -1.0, 1.0)
        gamma = self.const(f"{prefix}_bn_scale", (signs * self.rng.uniform(0.5, 1.5, channels)).astype(np.float32))
        beta = self.const(f"{prefix}_bn_bias", self.rng.uniform(-0.5, 0.5, channels).astype(np.float32))
        mean = self.const(f"{prefix}_bn_mean", (0.2 * spread * self.rng.standard_normal(channels)).astype(np.float32))
        var = self.const(f"{prefix}_bn_var", (spread**2 * self.rng.uniform(0.5, 1.5, channels)).astype(np.float32))
        return self.node("BatchNormalization", [x, gamma, beta, mean, var], epsilon=1e-5)


def _typical_code(bits: int) -> float:
    """A typical magnitude of a ``bits``-bit code (1 for bipolar)."""
    return max(1.0, 2.0 ** (bits - 1) / 2)


def _act_scale(spread: float, bits: int, signed: bool) -> float:
    """The power-of-two scale at which a value of magnitude ``spread`` is a typical ``bits``-bit code."""
    return float(2.0 ** round(math.log2(spread / _typical_code(bits + (not signed)))))


def _qonnx_layer(b: _QonnxBuilder, x: str, prefix: str, dot, fan_in: int, x_scale: float, x_bits: int,
                 w: tuple[str, float], w_bits: int, act: tuple[int, bool], batch_norm: bool, channels: int,
                 relu: bool = False) -> tuple[str, float]:
    """``dot`` (a function of the weight's quantizer output) on ``x``, a BatchNormalization if asked,
    a ReLU if asked, and the activation quantizer of ``act = (bits, signed)``; its output and scale."""
    y = dot(w[0])
    spread = math.sqrt(fan_in) * _typical_code(x_bits) * x_scale * _typical_code(w_bits) * w[1]
    if batch_norm:
        y, spread = b.batch_norm(y, prefix, channels, spread), 1.0
    if relu:
        y = b.node("Relu", [y])
    bits, signed = act
    scale = _act_scale(spread, bits, signed)
    return b.quant(y, scale, bits, signed=signed, narrow=False), scale


def _qonnx_model(b: _QonnxBuilder, name: str, image: int, batch: int, classes: int, x: str) -> onnx.ModelProto:
    b.nodes[-1].output[0] = "logits"
    opsets = [helper.make_opsetid("", 13), helper.make_opsetid(QONNX_DOMAIN, 1)]
    graph = helper.make_graph(b.nodes, name, [_float_input("image", [batch, 3, image, image])],
                              [_float_input("logits", [batch, classes])], initializer=b.initializers)
    model = helper.make_model(graph, opset_imports=opsets, producer_name="fpgaplace")
    model.ir_version = 8
    return model


def _dense_stack(b: _QonnxBuilder, x: str, x_scale: float, x_bits: int, sizes: tuple[int, ...], w_bits: int,
                 act: tuple[int, bool], batch_norm: bool, last_bits: int) -> None:
    """Flatten, then MatMul layers of ``sizes`` (fan-ins first); the last one's weights at
    ``last_bits`` and its output an 8-bit signed quantizer (the logits)."""
    x = b.node("Flatten", [x], axis=1)
    for i, (fan_in, fan_out) in enumerate(zip(sizes, sizes[1:], strict=False)):
        last = i == len(sizes) - 2
        bits = last_bits if last else w_bits
        w = b.qweight(f"fc{i}_w", (fan_in, fan_out), bits, axis=1)
        x, x_scale = _qonnx_layer(b, x, f"fc{i}", lambda wq, x=x: b.node("MatMul", [x, wq]), fan_in, x_scale,
                                  x_bits, w, bits, (8, True) if last else act, batch_norm and not last, fan_out)
        x_bits = act[0]


def cnv_output_size(image: int) -> int:
    """The side of CNV's last feature map for an ``image`` x ``image`` input (``cnv``: each 3x3
    convolution takes 2 pixels, each pool halves). O(1)."""
    size = image
    for i in range(6):
        size -= 2
        if i in (1, 3):
            size //= 2
    return size


CNV_MIN_IMAGE = next(i for i in range(1, 1024) if cnv_output_size(i) >= 1)  # 32: the least image CNV maps


def cnv(weight_bits: int = 1, act_bits: int = 1, image: int = 32,
        channels: tuple[int, ...] = (64, 64, 128, 128, 256, 256), dense: tuple[int, ...] = (512, 512),
        classes: int = 10, batch_norm: bool = False,
        first_last_bits: int | None = None, batch: int = 1, seed: int = 7) -> onnx.ModelProto:
    """FINN's CNV for CIFAR-10 as a QONNX model: an 8-bit signed input quantizer, six 3x3 convolutions
    without padding (``channels``), a 2x2 max pool after the second and the fourth, and three
    MatMul layers (``dense`` hidden sizes, then ``classes``), with ``weight_bits``-bit weights
    (1: bipolar) and ``act_bits``-bit signed activations (1: bipolar), an optional BatchNormalization
    before each activation quantizer, the first and last layers' weights at ``first_last_bits``
    (default ``weight_bits``), and 8-bit signed logits. With 32x32 images the last convolution is 1x1."""
    if len(channels) != 6:
        raise FpgaplaceError(f"cnv: channels {channels}; expected six convolution widths")
    if cnv_output_size(image) < 1:
        raise FpgaplaceError(f"cnv: image {image}; expected at least {CNV_MIN_IMAGE} pixels (six unpadded 3x3 "
                             "convolutions and two 2x2 pools)")
    b = _QonnxBuilder(seed)
    x_scale, x_bits = 2.0**-7, 8
    x = b.quant("image", x_scale, 8)
    act = (act_bits, True)
    cin, size = 3, image
    for i, cout in enumerate(channels):
        bits = first_last_bits or weight_bits if i == 0 else weight_bits
        w = b.qweight(f"conv{i}_w", (cout, cin, 3, 3), bits)
        x, x_scale = _qonnx_layer(b, x, f"conv{i}", lambda wq, x=x: b.node("Conv", [x, wq], kernel_shape=[3, 3]),
                                  9 * cin, x_scale, x_bits, w, bits, act, batch_norm, cout)
        x_bits, cin, size = act_bits, cout, size - 2
        if i in (1, 3):
            x, size = b.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2]), size // 2
    _dense_stack(b, x, x_scale, x_bits, (cin * size * size, *dense, classes), weight_bits, act, batch_norm,
                 first_last_bits or weight_bits)
    return _qonnx_model(b, f"cnv_w{weight_bits}a{act_bits}", image, batch, classes, x)


MOBILENET_V1 = ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), *[(512, 1)] * 5, (1024, 2), (1024, 1))
"""MobileNetV1's depthwise-separable blocks: (pointwise output channels, depthwise stride)."""


def mobilenet_v1_lowbit(weight_bits: int = 4, act_bits: int = 4, image: int = 224, width: float = 1.0,
                        classes: int = 1000, first_last_bits: int = 8, blocks: int = 13, batch: int = 1,
                        seed: int = 11) -> onnx.ModelProto:
    """MobileNetV1 as a QONNX model (Brevitas' quantized MobileNetV1): a 3x3 stride-2 convolution,
    ``blocks`` of its 13 depthwise 3x3 + pointwise 1x1 blocks, each convolution followed by a
    BatchNormalization, a ReLU and an unsigned ``act_bits``-bit quantizer, global average pooling, and
    a MatMul classifier; weights at ``weight_bits`` except the first and last layers'
    (``first_last_bits``), channels scaled by ``width``."""
    b = _QonnxBuilder(seed)
    x_scale, x_bits = 2.0**-7, 8
    x = b.quant("image", x_scale, 8)
    act = (act_bits, False)

    def conv(x: str, prefix: str, cin: int, cout: int, k: int, stride: int, group: int, bits: int,
             x_scale: float, x_bits: int) -> tuple[str, float]:
        w = b.qweight(f"{prefix}_w", (cout, cin // group, k, k), bits)
        return _qonnx_layer(b, x, prefix, lambda wq: b.node("Conv", [x, wq], kernel_shape=[k, k], strides=[stride] * 2,
                                                            pads=[k // 2] * 4, group=group),
                            k * k * cin // group, x_scale, x_bits, w, bits, act, True, cout, relu=True)

    cin = max(8, int(32 * width))
    x, x_scale = conv(x, "conv0", 3, cin, 3, 2, 1, first_last_bits, x_scale, x_bits)
    for i, (channels, stride) in enumerate(MOBILENET_V1[:blocks]):
        cout = max(8, int(channels * width))
        x, x_scale = conv(x, f"dw{i}", cin, cin, 3, stride, cin, weight_bits, x_scale, act_bits)
        x, x_scale = conv(x, f"pw{i}", cin, cout, 1, 1, 1, weight_bits, x_scale, act_bits)
        cin = cout
    x = b.quant(b.node("GlobalAveragePool", [x]), x_scale, 8, signed=False)
    _dense_stack(b, x, x_scale, 8, (cin, classes), weight_bits, act, False, first_last_bits)
    return _qonnx_model(b, f"mobilenet_v1_w{weight_bits}a{act_bits}", image, batch, classes, x)


def qonnx_mlp(weight_bits: int = 2, act_bits: int = 2, image: int = 4, hidden: tuple[int, ...] = (32, 16),
              classes: int = 10, signed: bool = True, batch_norm: bool = False, batch: int = 1,
              seed: int = 13) -> onnx.ModelProto:
    """A small QONNX MLP (a low-bit dense stack, FINN's TFC at toy size): an 8-bit signed input
    quantizer on a ``3 x image x image`` image, flattened, then MatMul layers of ``hidden`` sizes
    with ``weight_bits``-bit weights (1: bipolar; 2: ternary) and ``act_bits``-bit activations
    (``signed``, else unsigned codes; a signed 1 bit is bipolar), a BatchNormalization before each
    hidden activation quantizer if asked, and a last layer of ``classes`` 8-bit signed logits."""
    b = _QonnxBuilder(seed)
    x = b.quant("image", 2.0**-7, 8)
    _dense_stack(b, x, 2.0**-7, 8, (3 * image * image, *hidden, classes), weight_bits, (act_bits, signed),
                 batch_norm, weight_bits)
    return _qonnx_model(b, f"mlp_w{weight_bits}a{act_bits}{'' if signed else 'u'}", image, batch, classes, x)
