"""Random int8 layers for the RTL op tests: config members as the code generator writes them,
arrays as layers.npz holds them, scales calibrated so the outputs spread over the int8 range."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from fpgaplace.board.model import FpgaCore
from fpgaplace.codegen.rtl import OpModule, Port, RtlModule, render_dense
from fpgaplace.hw import KERNELS, reference
from fpgaplace.hw.dense import DENSE_MEMBERS
from fpgaplace.hw.geometry import Folding, Geometry
from fpgaplace.hw.kernel import Lanes, lane_choice, with_precision
from fpgaplace.hw.quant import quantize_multiplier
from fpgaplace.hw.rtl_values import PORT_IN, PORT_OUT
from fpgaplace.sim.rtl import StreamSimulation, simulate_stream
from fpgaplace.util.errors import FpgaplaceError


def out_size(size: int, kernel: int, stride: int, before: int, after: int, dilation: int = 1) -> int:
    return (size + before + after - dilation * (kernel - 1) - 1) // stride + 1


def conv_case(h: int, w: int, cin: int, cout: int, k: int, stride: int, pad: int, groups: int, folding: Folding,
              seed: int, samples: int = 3, dilation: int = 1):
    """(config, arrays, inputs [samples, H*W*CIN], folding) of a random square convolution."""
    rng = np.random.default_rng(seed)
    ho, wo = out_size(h, k, stride, pad, pad, dilation), out_size(w, k, stride, pad, pad, dilation)
    config = {"H": h, "W": w, "CIN": cin, "COUT": cout, "KH": k, "KW": k, "SH": stride, "SW": stride, "PT": pad,
              "PL": pad, "PB": pad, "PR": pad, "DH": dilation, "DW": dilation, "GROUPS": groups, "HO": ho, "WO": wo,
              "ZX": int(rng.integers(-128, 128)), "ZY": int(rng.integers(-20, 20)), "LO": -100, "HI": 120}
    weights = rng.integers(-128, 128, (cout, k, k, cin // groups), dtype=np.int8)
    bias = rng.integers(-2**12, 2**12, cout).astype(np.int32)
    inputs = rng.integers(-128, 128, (samples, h * w * cin), dtype=np.int8)
    acc = np.stack([reference.conv2d_accumulate(x.reshape(h, w, cin), weights, bias, zx=config["ZX"],
                                                stride=(stride, stride), pads=(pad,) * 4,
                                                dilation=(dilation, dilation), groups=groups) for x in inputs])
    largest = np.abs(acc).reshape(-1, cout).max(axis=0)
    pairs = [quantize_multiplier(float(r)) for r in rng.uniform(0.5, 1.5, cout) * 100 / (largest + 1)]
    arrays = {"w": weights, "bias": bias, "mult": np.array([m for m, _ in pairs], dtype=np.int64),
              "shift": np.array([s for _, s in pairs], dtype=np.int64)}
    return config, arrays, inputs, folding


def lowbit_conv_case(h: int, cin: int, cout: int, k: int, stride: int, pad: int, groups: int, folding: Folding,
                     weight_bits: int, activation_bits: int, unsigned: bool, seed: int, samples: int = 3):
    """A random square convolution (``conv_case``) with ``weight_bits`` weights and ``activation_bits``
    inputs (``unsigned``: 0 .. 2^bits - 1; 1 bit: +-1), the widths in the config (``WB, XB, XU``),
    its zero point a value of the inputs' range (padding reads it into the lanes)."""
    rng = np.random.default_rng(seed)
    config, arrays, _, _ = conv_case(h, h, cin, cout, k, stride, pad, groups, folding, seed, samples)
    w = rng.choice(value_range(weight_bits), arrays["w"].shape).astype(np.int8)
    values = value_range(activation_bits, unsigned)
    inputs = rng.choice(values, (samples, h * h * cin)).astype(np.int8)
    zx = int(rng.choice(values)) if activation_bits > 1 else 0
    bias = rng.integers(-4 * w[0].size, 4 * w[0].size + 1, cout).astype(np.int32)
    acc = np.stack([reference.conv2d_accumulate(x.reshape(h, h, cin), w, bias, zx=zx, stride=(stride, stride),
                                                pads=(pad,) * 4, groups=groups) for x in inputs])
    largest = np.abs(acc).reshape(-1, cout).max(axis=0)
    pairs = [quantize_multiplier(float(r)) for r in rng.uniform(0.5, 1.5, cout) * 100 / (largest + 1)]
    config |= {"ZX": zx, "WB": weight_bits, "XB": activation_bits, "XU": int(unsigned)}
    arrays = {"w": w, "bias": bias, "mult": np.array([m for m, _ in pairs], dtype=np.int64),
              "shift": np.array([s for _, s in pairs], dtype=np.int64)}
    return config, arrays, inputs, folding


def threshold_conv_case(h: int, cin: int, cout: int, k: int, stride: int, pad: int, folding: Folding, lo: int,
                        count: int, seed: int, samples: int = 3):
    """A ``conv_case`` with a threshold output stage (``with_conv_thresholds``), as a MobileNetV1
    w4a4's first layer (int8 in, a BatchNorm and a 4-bit unsigned quantizer after it: 15
    thresholds from 0)."""
    case = conv_case(h, h, cin, cout, k, stride, pad, 1, folding, seed, samples)
    return with_conv_thresholds(case, lo, count, seed)


def with_conv_thresholds(case, lo: int, count: int, seed: int, step: int = 1):
    """The conv ``case`` with a threshold output stage in place of its requantizer: ``count``
    ascending thresholds per channel on the accumulator (``bias + sum (x - ZX) w``) drawn over the
    accumulators the inputs reach, one channel's far outside the int32 range (clamped by the RTL
    to its dot product's); outputs every ``step``-th code of ``lo .. lo + step * count`` (``ZY = LO``,
    ``threshold.code_step``)."""
    config, arrays, inputs, folding = case
    rng = np.random.default_rng(seed)
    c = config
    acc = np.stack([reference.conv2d_accumulate(x.reshape(c["H"], c["W"], c["CIN"]), arrays["w"], arrays["bias"],
                                                zx=c["ZX"], stride=(c["SH"], c["SW"]), pads=(c["PT"],) * 4,
                                                groups=c["GROUPS"]) for x in inputs])
    spread = acc.reshape(-1, c["COUT"])
    table = np.sort(np.stack([rng.integers(spread[:, j].min() - 2, spread[:, j].max() + 3, count)
                              for j in range(c["COUT"])]), axis=1)
    table[0] = np.linspace(-(2**31) + 1, 2**31 - 1, count).astype(np.int64)
    config = config | {"ZY": lo, "LO": lo, "HI": lo + step * count, "T": count, "STEP": step}
    return config, arrays | {"thresholds": table.astype(np.int32)}, inputs, folding


def pool_case(kernel: str, h: int, w: int, c: int, k: int, stride: int, pad: int, folding: Folding, seed: int,
              samples: int = 3):
    """A random max or average pool (``kernel`` maxpool / avgpool / globalavgpool)."""
    rng = np.random.default_rng(seed)
    if kernel == "globalavgpool":
        k, stride, pad = h, 1, 0
    ho, wo = out_size(h, k, stride, pad, pad), out_size(w, k, stride, pad, pad)
    zx = int(rng.integers(-128, 128))
    scale = 1.0 if kernel == "maxpool" else rng.uniform(0.5, 1.5) / (k * k)
    m, s = quantize_multiplier(scale)
    config = {"H": h, "W": w, "C": c, "KH": k, "KW": k, "SH": stride, "SW": stride, "PT": pad, "PL": pad, "PB": pad,
              "PR": pad, "HO": ho, "WO": wo, "ZX": zx, "M": m, "S": s, "ZY": int(rng.integers(-20, 20)),
              "LO": -110, "HI": 115}
    inputs = rng.integers(-128, 128, (samples, h * w * c), dtype=np.int8)
    return config, {}, inputs, folding


def elementwise_case(kernel: str, shape: tuple[int, int, int], folding: Folding, seed: int, samples: int = 3):
    """A random add (two inputs) or requantize (ReLU-like lower bound) over ``shape`` (C, H, W)."""
    rng = np.random.default_rng(seed)
    size = int(np.prod(shape))
    zy = int(rng.integers(-20, 20))
    config = {"SIZE": size, "PIXELS": size // shape[0], "CHANNELS": [shape[0]], "CONST_PERIOD": 0, "ZY": zy,
              "LO": max(-128, zy), "HI": 127}
    if kernel == "add":
        shift = 31  # one shift for both multipliers, as requantize2 takes them
        ma, mb = (int(round(r * 2**shift)) for r in rng.uniform(0.3, 0.6, 2))
        config |= {"ZA": int(rng.integers(-128, 128)), "MA": ma, "ZB": int(rng.integers(-128, 128)), "MB": mb,
                   "S": shift}
        inputs = [rng.integers(-128, 128, (samples, size), dtype=np.int8) for _ in range(2)]
    else:
        m, s = quantize_multiplier(rng.uniform(0.5, 2.0))
        config |= {"ZX": int(rng.integers(-128, 128)), "M": m, "S": s}
        inputs = [rng.integers(-128, 128, (samples, size), dtype=np.int8)]
    return config, {}, inputs, folding


def constant_add_case(shape: tuple[int, int, int], per_channel: bool, folding: Folding, seed: int, samples: int = 3):
    """A random Add of an int8 constant (one value per channel, or one in all) to an input of
    ``shape`` (C, H, W), as the code generator lowers it (config of ``add``, the constant ``b``)."""
    config, _, inputs, _ = elementwise_case("add", shape, folding, seed, samples)
    rng = np.random.default_rng(seed + 1)
    constant = rng.integers(-128, 128, shape[0] if per_channel else 1, dtype=np.int8)
    config["ZB"] = int(constant.mean())  # keeps the sums near the output's range
    return config | {"LO": -128}, {"b": constant}, inputs[:1], folding


def concat_case(pixels: tuple[int, ...], channels: list[int], folding: Folding, seed: int, samples: int = 3,
                constant_at: tuple[int, ...] = ()):
    """A random channel Concat of ``len(channels)`` inputs of ``pixels`` (H, W) or none (vectors),
    each with its own zero point and scale to the output's; the inputs at ``constant_at`` constants
    (a class token: one sample's values in ``arrays``, as ``Concat.lower`` writes them), the others streamed."""
    rng = np.random.default_rng(seed)
    count = int(np.prod(pixels)) if pixels else 1
    pairs = [quantize_multiplier(float(r)) for r in rng.uniform(0.4, 1.6, len(channels))]
    zy = int(rng.integers(-20, 20))
    config = {"PIXELS": count, "ZY": zy, "LO": max(-128, zy - 90), "HI": 125}
    arrays = {"channels": np.array(channels, dtype=np.int64),
              "zero_points": rng.integers(-128, 128, len(channels)).astype(np.int64),
              "mult": np.array([m for m, _ in pairs], dtype=np.int64),
              "shift": np.array([s for _, s in pairs], dtype=np.int64)}
    inputs = [rng.integers(-128, 128, (samples, count * ch), dtype=np.int8) for ch in channels]
    if constant_at:
        arrays["constant_at"] = np.array(constant_at, dtype=np.int64)
        arrays["constant"] = np.concatenate([inputs[j][0] for j in constant_at])
        inputs = [x for j, x in enumerate(inputs) if j not in constant_at]
    return config, arrays, inputs, folding


def dense_case(k: int, n: int, folding: Folding, seed: int, samples: int = 3):
    """A random dense layer ``y[N] = W[N, K] x`` as the code generator lowers it (config members
    ``K, N, ZX, ZY, LO, HI``), per-channel scales calibrated on the inputs."""
    rng = np.random.default_rng(seed)
    w = rng.integers(-128, 128, (n, k), dtype=np.int8)
    bias = rng.integers(-2**14, 2**14, n).astype(np.int32)
    zx, zy = int(rng.integers(-128, 128)), int(rng.integers(-30, 30))
    inputs = rng.integers(-128, 128, (samples, k), dtype=np.int8)
    largest = np.abs(np.stack([reference.dense_accumulate(x, w, bias, zx=zx) for x in inputs])).max(axis=0)
    pairs = [quantize_multiplier(float(r)) for r in rng.uniform(0.5, 1.5, n) * 100 / (largest + 1)]
    config = {"K": k, "N": n, "ZX": zx, "ZY": zy, "LO": max(-128, zy - 60), "HI": 120}
    arrays = {"w": w, "bias": bias, "mult": np.array([m for m, _ in pairs], dtype=np.int64),
              "shift": np.array([s for _, s in pairs], dtype=np.int64)}
    return config, arrays, inputs, folding


def value_range(bits: int, unsigned: bool = False) -> list[int]:
    """The int8 values an element of ``bits`` takes: +-1 at one bit, else signed or unsigned."""
    if bits == 1:
        return [-1, 1]
    return list(range(0, 2**bits)) if unsigned else list(range(-2 ** (bits - 1), 2 ** (bits - 1)))


def lowbit_dense_case(k: int, n: int, weight_bits: int, activation_bits: int, unsigned: bool, seed: int,
                      samples: int = 3):
    """A random dense layer (``dense_case``) with ``weight_bits`` weights and ``activation_bits``
    inputs (``unsigned``: 0 .. 2^bits - 1), the widths in the config (``WB, XB, XU``)."""
    rng = np.random.default_rng(seed)
    w = rng.choice(value_range(weight_bits), (n, k)).astype(np.int8)
    inputs = rng.choice(value_range(activation_bits, unsigned), (samples, k)).astype(np.int8)
    bias = rng.integers(-2 * k, 2 * k + 1, n).astype(np.int32)
    zx, zy = int(rng.integers(-3, 4)), int(rng.integers(-30, 30))
    largest = np.abs(np.stack([reference.dense_accumulate(x, w, bias, zx=zx) for x in inputs])).max(axis=0)
    pairs = [quantize_multiplier(float(r)) for r in rng.uniform(0.5, 1.5, n) * 100 / (largest + 1)]
    config = {"K": k, "N": n, "ZX": zx, "ZY": zy, "LO": max(-128, zy - 60), "HI": 120, "WB": weight_bits,
              "XB": activation_bits, "XU": int(unsigned)}
    arrays = {"w": w, "bias": bias, "mult": np.array([m for m, _ in pairs], dtype=np.int64),
              "shift": np.array([s for _, s in pairs], dtype=np.int64)}
    return config, arrays, inputs


def threshold_dense_case(k: int, n: int, weight_bits: int, activation_bits: int, unsigned: bool, lo: int,
                         count: int, seed: int, samples: int = 5, step: int = 1):
    """A ``lowbit_dense_case`` with a threshold output stage in place of its requantizer: ``count``
    ascending thresholds per channel on the accumulator (``bias + W (x - ZX)``), drawn over the
    accumulators the inputs reach and a little beyond, one channel's far outside the int32 range
    the RTL clamps to its dot product's; outputs every ``step``-th code of ``lo .. lo + step *
    count`` (``ZY = LO``, ``threshold.code_step``)."""
    rng = np.random.default_rng(seed)
    config, arrays, inputs = lowbit_dense_case(k, n, weight_bits, activation_bits, unsigned, seed, samples)
    acc = np.stack([reference.dense_accumulate(x, arrays["w"], arrays["bias"], zx=config["ZX"]) for x in inputs])
    table = np.sort(rng.integers(acc.min() - 2, acc.max() + 3, (n, count)), axis=1)
    table[0] = np.linspace(-(2**31) + 1, 2**31 - 1, count).astype(np.int64)
    config |= {"ZY": lo, "LO": lo, "HI": lo + step * count, "T": count, "STEP": step}
    return config, arrays | {"thresholds": table.astype(np.int32)}, inputs


def lowbit_dense_module(k: int, n: int, pe: int, simd: int, weight_bits: int, activation_bits: int,
                        core: FpgaCore, lanes: Lanes | None = None, seed: int = 0) -> tuple[RtlModule, Geometry, Lanes]:
    """The rendered dense unit of a random ``lowbit_dense_case`` folded ``pe`` x ``simd`` with the
    lanes the op library chooses for ``core`` (``lane_choice``) unless ``lanes`` are given, with
    the op library's geometry of the layer at those widths and the lanes."""
    config, arrays, _ = lowbit_dense_case(k, n, weight_bits, activation_bits, False, seed)
    lanes = lanes or lane_choice(core, weight_bits, activation_bits)
    module = render_dense(config | {"PE": pe, "SIMD": simd}, arrays, macs_per_dsp=core.macs_per_dsp, lanes=lanes)
    geometry = with_precision(KERNELS["dense"].config_geometry({"K": k, "N": n}), weight_bits, activation_bits)
    return module, geometry, lanes


def dense_model_cycles(config: dict[str, Any]) -> int:
    """Cycles per vector of the op library's model (``Dense.config_cycles``) for the folding."""
    return KERNELS["dense"].config_cycles(config)  # type: ignore[attr-defined]


def simulate_dense(config: dict[str, Any], arrays: dict[str, Any], vectors: np.ndarray, folder: Path,
                   seed: int = 0, gap: float = 0.3, backpressure: float = 0.3, warmup: int = 2,
                   steady_vectors: int | None = None, macs_per_dsp: int = 1,
                   lanes: Lanes | None = None) -> StreamSimulation:
    """Simulate the rendered dense unit (its ``lanes``, see ``Dense.rtl_values``) on ``vectors [V,
    K]`` (int8) in ``folder`` (``simulate_stream``), every output compared with
    the kernel's integer reference (``Dense.reference``: ``reference.dense``, or its threshold stage)."""
    vectors = np.asarray(vectors)
    if vectors.dtype != np.int8 or vectors.ndim != 2 or vectors.shape[1] != int(config["K"]):
        raise FpgaplaceError(f"rtl dense: vectors must be int8 of shape (V, {config['K']}), got {vectors.shape}")
    expected = np.stack([KERNELS["dense"].reference(config, arrays, [v]) for v in vectors])
    module = render_dense(config, arrays, macs_per_dsp=macs_per_dsp, lanes=lanes)
    op = OpModule(module, (Port(PORT_IN, int(config["SIMD"]), int(config["K"])),),
                  Port(PORT_OUT, int(config["PE"]), int(config["N"])))
    return simulate_stream(op, [vectors], expected, folder, dense_model_cycles(config),
                           {m: int(config[m]) for m in DENSE_MEMBERS}, seed, gap, backpressure, warmup, steady_vectors)


def binary_case(op: str, shape: tuple[int, int, int], mode: int, folding: Folding, seed: int, samples: int = 3):
    """A random ``op`` (sub, mul, max, min) of x of ``shape`` (C, H, W) and g of the same shape
    (mode 0), one value per channel (1) or one per pixel (2), as ``fpgaplace.hw.binary`` lowers it."""
    rng = np.random.default_rng(seed)
    c, h, w = shape
    size = c * h * w
    zx, zg, zy = (int(v) for v in rng.integers(-100, 100, 3))
    if op == "mul":
        (mx, s), mg = quantize_multiplier(rng.uniform(0.5, 2.0) / 128), 0
    else:
        s = 31  # one shift for both multipliers
        mx, mg = (int(round(r * 2**s)) for r in rng.uniform(0.3, 0.9, 2))
    signs = (1, -1) if op == "sub" else (1, 1)
    config = {"SIZE": size, "C": c, "MODE": mode, "ZX": zx, "MX": mx, "SX": signs[0], "ZG": zg, "MG": mg,
              "SG": signs[1], "S": s, "ZY": zy, "LO": -120, "HI": 126}
    other = {0: size, 1: c, 2: h * w}[mode]
    inputs = [rng.integers(-128, 128, (samples, size), dtype=np.int8),
              rng.integers(-128, 128, (samples, other), dtype=np.int8)]
    return config, {}, inputs, folding
