"""The bit-exact integer reference of every FPGA kernel (numpy), per the int8 hardware spec.

Tensors are one sample, channels last: ``[H, W, C]`` for images and ``[C]`` for vectors; values
int8, weights int8 ``[Cout, KH, KW, Cin/groups]`` / ``[N, K]``, bias int32, per-output-channel
multipliers ``m`` and shifts ``s`` (see ``fpgaplace.hw.quant``). The C++ kernels in
``hls_templates/hls/include/fpgaplace/kernels.h`` compute exactly the same int8 outputs.

Convolution and dense run as an im2col matrix product in float64 (BLAS). That is exact: every
product ``(x - zx) * w`` is an integer of magnitude at most 255 * 128 = 32,640 < 2**15, so every
partial sum of a dot product of length K is an integer of magnitude below K * 2**15, which is
exactly representable in float64 (53-bit significand) for K < 2**38 -- whatever order BLAS adds
in, each addition of two exactly representable integers whose sum is below 2**53 is exact. The
result is converted back to int64 before the bias is added.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt

from fpgaplace.hw.quant import INT8_MAX, INT8_MIN, requantize, requantize2, requantize_affine

# Exactness bound of the float64 matrix product (see the module docstring).
MAX_EXACT_DOT_LENGTH = 2**53 // (255 * 128)
# Below every int8 value: marks padded positions for max pooling.
_MAXPOOL_PAD = np.int16(INT8_MIN - 1)


def _int8(name: str, array: npt.ArrayLike, ndim: int | tuple[int, ...]) -> np.ndarray:
    """``array`` checked to be int8 with ``ndim`` dimensions (one of them, for a tuple)."""
    value = np.asarray(array)
    allowed = (ndim,) if isinstance(ndim, int) else ndim
    if value.dtype != np.int8:
        raise ValueError(f"{name} must be int8, got dtype {value.dtype}")
    if value.ndim not in allowed:
        raise ValueError(f"{name} must have {' or '.join(map(str, allowed))} dimensions, got shape {value.shape}")
    return value


def _per_channel(name: str, values: npt.ArrayLike, channels: int) -> np.ndarray:
    """An integer scalar or length-``channels`` vector (bias, multipliers, shifts) as int64."""
    array = np.asarray(values)
    if array.dtype.kind not in "iu":
        raise ValueError(f"{name} must be integers, got dtype {array.dtype}")
    if array.shape not in ((), (channels,)):
        raise ValueError(f"{name} must be a scalar or have shape ({channels},), got shape {array.shape}")
    return np.broadcast_to(array.astype(np.int64), (channels,))


def _pair(name: str, value: Sequence[int], minimum: int) -> tuple[int, int]:
    """A (height, width) pair of ints, each at least ``minimum``."""
    pair = tuple(int(v) for v in value)
    if len(pair) != 2 or min(pair) < minimum:
        raise ValueError(f"{name} must be two integers >= {minimum}, got {tuple(value)}")
    return pair[0], pair[1]


def _pads(pads: Sequence[int]) -> tuple[int, int, int, int]:
    """(top, left, bottom, right), each >= 0."""
    quad = tuple(int(p) for p in pads)
    if len(quad) != 4 or min(quad) < 0:
        raise ValueError(f"pads must be four integers (top, left, bottom, right) >= 0, got {tuple(pads)}")
    return quad[0], quad[1], quad[2], quad[3]


def output_size(size: int, kernel: int, stride: int, pad_before: int, pad_after: int, dilation: int = 1) -> int:
    """``(size + pad_before + pad_after - dilation*(kernel-1) - 1) // stride + 1``; ValueError if
    the (dilated) kernel does not fit in the padded input."""
    span = dilation * (kernel - 1) + 1
    padded = size + pad_before + pad_after
    if padded < span:
        raise ValueError(f"kernel of extent {span} does not fit in a padded input of size {padded}")
    return (padded - span) // stride + 1


def _window_views(
    padded: np.ndarray,
    kernel: tuple[int, int],
    stride: tuple[int, int],
    dilation: tuple[int, int],
    out_hw: tuple[int, int],
) -> Iterator[np.ndarray]:
    """For each kernel tap (kh, kw) in row-major order, the ``[Ho, Wo, C]`` view of ``padded``
    that the tap reads at every output position (a strided slice, no copy)."""
    (kh_size, kw_size), (sh, sw), (dh, dw), (ho, wo) = kernel, stride, dilation, out_hw
    for kh in range(kh_size):
        for kw in range(kw_size):
            top, left = kh * dh, kw * dw
            yield padded[top : top + (ho - 1) * sh + 1 : sh, left : left + (wo - 1) * sw + 1 : sw, :]


def _pad_hw(x: np.ndarray, pads: tuple[int, int, int, int], value: int) -> np.ndarray:
    """``x [H, W, C]`` padded by (top, left, bottom, right) with ``value``."""
    top, left, bottom, right = pads
    return np.pad(x, ((top, bottom), (left, right), (0, 0)), constant_values=value)


def conv2d_accumulate(
    x: npt.ArrayLike,
    w: npt.ArrayLike,
    bias: npt.ArrayLike,
    *,
    zx: int,
    stride: Sequence[int] = (1, 1),
    pads: Sequence[int] = (0, 0, 0, 0),
    dilation: Sequence[int] = (1, 1),
    groups: int = 1,
) -> np.ndarray:
    """The int64 accumulators ``acc[Ho, Wo, Cout]`` of ``conv2d`` before requantization:
    ``bias[co] + Σ (x - zx) * w`` over the (grouped) window, padded positions contributing 0.

    im2col (``Ho*Wo`` rows of ``KH*KW*Cin/g``) then one batched float64 matrix product per group
    (exact, see the module docstring); O(Ho*Wo*Cout*KH*KW*Cin/g) time, O(Ho*Wo*KH*KW*Cin) memory.
    """
    x, w = _int8("conv2d x", x, 3), _int8("conv2d w", w, 4)
    height, width, cin = x.shape
    cout, kh, kw, cin_per_group = w.shape
    if groups < 1 or cin % groups or cout % groups or cin // groups != cin_per_group:
        raise ValueError(
            f"conv2d: groups={groups} must divide Cin={cin} and Cout={cout} with Cin/groups equal to "
            f"the weights' last dimension {cin_per_group}"
        )
    if kh * kw * cin_per_group >= MAX_EXACT_DOT_LENGTH:
        raise ValueError(f"conv2d: dot product length {kh * kw * cin_per_group} is too long to stay exact")
    bias64 = _per_channel("conv2d bias", bias, cout)
    sh, sw = _pair("conv2d stride", stride, 1)
    dh, dw = _pair("conv2d dilation", dilation, 1)
    top, left, bottom, right = _pads(pads)
    ho = output_size(height, kh, sh, top, bottom, dh)
    wo = output_size(width, kw, sw, left, right, dw)
    centred = _pad_hw(x.astype(np.float64) - zx, (top, left, bottom, right), 0)
    taps = list(_window_views(centred, (kh, kw), (sh, sw), (dh, dw), (ho, wo)))
    columns = np.stack(taps, axis=2)  # [Ho, Wo, KH*KW, Cin]
    columns = columns.reshape(ho * wo, kh * kw, groups, cin_per_group).transpose(2, 0, 1, 3)
    columns = columns.reshape(groups, ho * wo, kh * kw * cin_per_group)
    weights = w.astype(np.float64).reshape(groups, cout // groups, kh * kw * cin_per_group)
    products = np.matmul(columns, weights.transpose(0, 2, 1))  # [groups, Ho*Wo, Cout/g]
    acc = products.transpose(1, 0, 2).reshape(ho, wo, cout).astype(np.int64)
    return acc + bias64


def conv2d(
    x: npt.ArrayLike,
    w: npt.ArrayLike,
    bias: npt.ArrayLike,
    m: npt.ArrayLike,
    s: npt.ArrayLike,
    *,
    zx: int,
    zy: int,
    lo: int = INT8_MIN,
    hi: int = INT8_MAX,
    stride: Sequence[int] = (1, 1),
    pads: Sequence[int] = (0, 0, 0, 0),
    dilation: Sequence[int] = (1, 1),
    groups: int = 1,
) -> np.ndarray:
    """int8 ``y[Ho, Wo, Cout] = requantize(conv2d_accumulate(...), m[co], s[co], zy, lo, hi)`` for
    ``x[H, W, Cin]`` and ``w[Cout, KH, KW, Cin/groups]`` (grouped and depthwise included)."""
    acc = conv2d_accumulate(x, w, bias, zx=zx, stride=stride, pads=pads, dilation=dilation, groups=groups)
    cout = acc.shape[-1]
    return requantize(acc, _per_channel("conv2d m", m, cout), _per_channel("conv2d s", s, cout), zy, lo, hi)


def dense_accumulate(x: npt.ArrayLike, w: npt.ArrayLike, bias: npt.ArrayLike, *, zx: int) -> np.ndarray:
    """int64 ``acc[n] = bias[n] + Σ_k (x[k] - zx) * w[n, k]`` (float64 product, exact); O(N*K)."""
    x, w = _int8("dense x", x, 1), _int8("dense w", w, 2)
    n, k = w.shape
    if x.shape != (k,):
        raise ValueError(f"dense: x has shape {x.shape}, expected ({k},) to match w of shape {w.shape}")
    if k >= MAX_EXACT_DOT_LENGTH:
        raise ValueError(f"dense: dot product length {k} is too long to stay exact")
    bias64 = _per_channel("dense bias", bias, n)
    products = w.astype(np.float64) @ (x.astype(np.float64) - zx)
    return products.astype(np.int64) + bias64


def dense(
    x: npt.ArrayLike,
    w: npt.ArrayLike,
    bias: npt.ArrayLike,
    m: npt.ArrayLike,
    s: npt.ArrayLike,
    *,
    zx: int,
    zy: int,
    lo: int = INT8_MIN,
    hi: int = INT8_MAX,
) -> np.ndarray:
    """int8 ``y[N] = requantize(dense_accumulate(x, w, bias), m[n], s[n], zy, lo, hi)``."""
    acc = dense_accumulate(x, w, bias, zx=zx)
    n = acc.shape[0]
    return requantize(acc, _per_channel("dense m", m, n), _per_channel("dense s", s, n), zy, lo, hi)


def _pool_geometry(
    x: np.ndarray, kernel: Sequence[int], stride: Sequence[int], pads: Sequence[int]
) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int, int, int], tuple[int, int]]:
    """Checked (kernel, stride, pads, (Ho, Wo)) of a pooling window over ``x [H, W, C]``."""
    kernel_hw, stride_hw, quad = _pair("pool kernel", kernel, 1), _pair("pool stride", stride, 1), _pads(pads)
    out_hw = (
        output_size(x.shape[0], kernel_hw[0], stride_hw[0], quad[0], quad[2]),
        output_size(x.shape[1], kernel_hw[1], stride_hw[1], quad[1], quad[3]),
    )
    return kernel_hw, stride_hw, quad, out_hw


def maxpool(
    x: npt.ArrayLike,
    *,
    kernel: Sequence[int],
    stride: Sequence[int] = (1, 1),
    pads: Sequence[int] = (0, 0, 0, 0),
    zx: int,
    m: int,
    s: int,
    zy: int,
    lo: int = INT8_MIN,
    hi: int = INT8_MAX,
) -> np.ndarray:
    """int8 ``y[Ho, Wo, C] = requantize(max over the window's non-padded x - zx, m, s, zy, lo, hi)``
    (``m = 2**30, s = 30`` with ``zy = zx`` is the identity). ValueError if a window holds only
    padding. O(Ho*Wo*C*KH*KW)."""
    x = _int8("maxpool x", x, 3)
    kernel_hw, stride_hw, quad, out_hw = _pool_geometry(x, kernel, stride, pads)
    padded = _pad_hw(x.astype(np.int16), quad, _MAXPOOL_PAD)
    largest = np.full((*out_hw, x.shape[2]), _MAXPOOL_PAD, dtype=np.int16)
    for tap in _window_views(padded, kernel_hw, stride_hw, (1, 1), out_hw):
        np.maximum(largest, tap, out=largest)
    if (largest == _MAXPOOL_PAD).any():
        raise ValueError(f"maxpool: a window of kernel {kernel_hw} with pads {quad} covers only padding")
    return requantize(largest.astype(np.int64) - zx, m, s, zy, lo, hi)


def avgpool(
    x: npt.ArrayLike,
    *,
    kernel: Sequence[int],
    stride: Sequence[int] = (1, 1),
    pads: Sequence[int] = (0, 0, 0, 0),
    zx: int,
    m: int,
    s: int,
    zy: int,
    lo: int = INT8_MIN,
    hi: int = INT8_MAX,
    tie: int = 0,
) -> np.ndarray:
    """int8 ``y[Ho, Wo, C] = requantize(Σ over the window's non-padded (x - zx), m, s, zy, lo, hi,
    tie)``; the caller folds 1/count into ``m``, ``s`` (and its midpoint band into ``tie``,
    ``quant.tie_bits``). Global average pooling is kernel (H, W), stride 1, no pads.
    O(Ho*Wo*C*KH*KW)."""
    x = _int8("avgpool x", x, 3)
    kernel_hw, stride_hw, quad, out_hw = _pool_geometry(x, kernel, stride, pads)
    padded = _pad_hw(x.astype(np.int64) - zx, quad, 0)
    total = np.zeros((*out_hw, x.shape[2]), dtype=np.int64)
    for tap in _window_views(padded, kernel_hw, stride_hw, (1, 1), out_hw):
        total += tap
    return requantize(total, m, s, zy, lo, hi, tie)


def avgpool_exclude_pad(
    x: npt.ArrayLike,
    *,
    kernel: Sequence[int],
    stride: Sequence[int] = (1, 1),
    pads: Sequence[int] = (0, 0, 0, 0),
    zx: int,
    ms: npt.ArrayLike,
    ss: npt.ArrayLike,
    zy: int,
    lo: int = INT8_MIN,
    hi: int = INT8_MAX,
    ties: npt.ArrayLike | None = None,
) -> np.ndarray:
    """int8 average pooling without ``count_include_pad``: ``requantize(Σ over the window's n
    non-padded (x - zx), ms[n], ss[n], zy, lo, hi, ties[n])`` (``ms``, ``ss``, ``ties``: tables of
    KH*KW + 1 entries; no ``ties`` is all 0, the plain midpoint test). O(Ho*Wo*C*KH*KW)."""
    x = _int8("avgpool x", x, 3)
    kernel_hw, stride_hw, quad, out_hw = _pool_geometry(x, kernel, stride, pads)
    padded = _pad_hw(x.astype(np.int64) - zx, quad, 0)
    inside = _pad_hw(np.ones((*x.shape[:2], 1), dtype=np.int64), quad, 0)
    total = np.zeros((*out_hw, x.shape[2]), dtype=np.int64)
    counts = np.zeros((*out_hw, 1), dtype=np.int64)
    for tap, one in zip(_window_views(padded, kernel_hw, stride_hw, (1, 1), out_hw),
                        _window_views(inside, kernel_hw, stride_hw, (1, 1), out_hw), strict=True):
        total += tap
        counts += one
    ms, ss = np.asarray(ms, dtype=np.int64), np.asarray(ss, dtype=np.int64)
    ts = np.zeros_like(ms) if ties is None else np.asarray(ties, dtype=np.int64)
    if ms.shape != (kernel_hw[0] * kernel_hw[1] + 1,) or ss.shape != ms.shape or ts.shape != ms.shape:
        raise ValueError(f"avgpool: tables of {ms.shape} multipliers, {ss.shape} shifts and {ts.shape} tie bits; "
                         f"expected {kernel_hw[0] * kernel_hw[1] + 1} of each")
    return requantize(total, ms[counts], ss[counts], zy, lo, hi, ts[counts])


def add(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    *,
    za: int,
    ma: int,
    zb: int,
    mb: int,
    s: int,
    zy: int,
    lo: int = INT8_MIN,
    hi: int = INT8_MAX,
) -> np.ndarray:
    """int8 ``requantize2(a - za, ma, b - zb, mb, s, zy, lo, hi)`` for ``a`` and ``b`` of the same
    shape (no broadcasting)."""
    a, b = _int8("add a", a, (1, 2, 3)), _int8("add b", b, (1, 2, 3))
    if a.shape != b.shape:
        raise ValueError(f"add: inputs must have the same shape, got {a.shape} and {b.shape}")
    return requantize2(a.astype(np.int64) - za, ma, b.astype(np.int64) - zb, mb, s, zy, lo, hi)


def requant(
    x: npt.ArrayLike, *, zx: int, m: int, s: int, zy: int, lo: int = INT8_MIN, hi: int = INT8_MAX
) -> np.ndarray:
    """int8 ``requantize(x - zx, m, s, zy, lo, hi)`` elementwise (standalone ReLU/Clip/rescale)."""
    x = _int8("requant x", x, (1, 2, 3))
    return requantize(x.astype(np.int64) - zx, m, s, zy, lo, hi)


def affine(
    x: npt.ArrayLike, m: npt.ArrayLike, b: npt.ArrayLike, *, zx: int, s: int, zy: int, lo: int = INT8_MIN,
    hi: int = INT8_MAX
) -> np.ndarray:
    """int8 ``requantize_affine(x - zx, m[c], b[c], s, zy, lo, hi)`` of a flat stream ``x`` (channels
    last) whose element ``e`` is of channel ``c = e mod len(m)``: a per-channel (or, with one value,
    per-tensor) affine map ``y = x * a[c] + b[c]`` in fixed point. O(n)."""
    x = _int8("affine x", x, 1)
    m64, b64 = np.asarray(m, dtype=np.int64).reshape(-1), np.asarray(b, dtype=np.int64).reshape(-1)
    if m64.size == 0 or m64.shape != b64.shape or x.size % m64.size:
        raise ValueError(f"affine: {m64.size} multipliers and {b64.size} offsets must be equal in number and "
                         f"divide the {x.size} elements")
    channel = np.arange(x.size) % m64.size
    return requantize_affine(x.astype(np.int64) - zx, m64[channel], b64[channel], s, zy, lo, hi)


def concat(
    xs: Sequence[npt.ArrayLike],
    *,
    zxs: Sequence[int],
    ms: Sequence[int],
    ss: Sequence[int],
    zy: int,
    lo: int = INT8_MIN,
    hi: int = INT8_MAX,
) -> np.ndarray:
    """Each ``xs[i]`` requantized to the output (``requant(xs[i], zxs[i], ms[i], ss[i], zy, lo,
    hi)``), concatenated along the last (channel) axis; inputs ``[H, W, C_i]`` or ``[C_i]``."""
    arrays = [_int8(f"concat input {i}", x, (1, 3)) for i, x in enumerate(xs)]
    if not arrays:
        raise ValueError("concat: needs at least one input")
    if not len(arrays) == len(zxs) == len(ms) == len(ss):
        raise ValueError(
            f"concat: {len(arrays)} inputs but {len(zxs)} zero points, {len(ms)} multipliers, {len(ss)} shifts"
        )
    leading = {a.shape[:-1] for a in arrays}
    if len(leading) != 1 or len({a.ndim for a in arrays}) != 1:
        raise ValueError(f"concat: inputs must agree on all but the last axis, got {[a.shape for a in arrays]}")
    parts = [requant(a, zx=zx, m=m, s=s, zy=zy, lo=lo, hi=hi) for a, zx, m, s in zip(arrays, zxs, ms, ss, strict=True)]
    return np.concatenate(parts, axis=-1)


def slice_window(x: npt.ArrayLike, h0: int, hn: int, sh: int, w0: int, wn: int, sw: int, c0: int,
                 cn: int) -> np.ndarray:
    """The rows ``h0 + i*sh`` (i < hn), pixels ``w0 + j*sw`` (j < wn) and channels ``[c0, c0 + cn)``
    of an ``[H, W, C]`` tensor (ONNX Slice / Split with positive steps)."""
    x = _int8("slice x", x, 3)
    if min(hn, wn, cn, sh, sw) < 1 or min(h0, w0, c0) < 0 or h0 + (hn - 1) * sh >= x.shape[0] or (
            w0 + (wn - 1) * sw >= x.shape[1] or c0 + cn > x.shape[2]):
        raise ValueError(f"slice: window rows {h0}+{hn}x{sh}, pixels {w0}+{wn}x{sw}, channels {c0}+{cn} "
                         f"outside the input's {x.shape}")
    return x[h0:h0 + (hn - 1) * sh + 1:sh, w0:w0 + (wn - 1) * sw + 1:sw, c0:c0 + cn]


def upsample(x: npt.ArrayLike, rh: int, rw: int) -> np.ndarray:
    """Nearest upsampling of an ``[H, W, C]`` tensor: each row ``rh`` times, each pixel ``rw`` times."""
    x = _int8("upsample x", x, 3)
    if rh < 1 or rw < 1:
        raise ValueError(f"upsample: factors {rh}x{rw} must be at least 1")
    return np.repeat(np.repeat(x, rh, axis=0), rw, axis=1)


def pad(x: npt.ArrayLike, pads: tuple[int, int, int, int], value: int) -> np.ndarray:
    """An ``[H, W, C]`` tensor inside a border of ``value``: ``pads`` (top, left, bottom, right) rows and pixels."""
    x = _int8("pad x", x, 3)
    top, left, bottom, right = pads
    if min(pads) < 0 or not INT8_MIN <= value <= INT8_MAX:
        raise ValueError(f"pad: pads {pads} must be >= 0 and the value {value} int8")
    return np.pad(x, ((top, bottom), (left, right), (0, 0)), constant_values=np.int8(value))


def fold_weights(w: npt.ArrayLike, pe: int, simd: int) -> np.ndarray:
    """The flat int8 weight array the C++ ``fp::conv2d`` / ``fp::dense`` read: ``w`` (``[Cout, KH,
    KW, Cin/g]`` or ``[N, K]``) as ``[Cout/PE][KK/SIMD][PE][SIMD]`` (KK the dot-product length),
    so the PE*SIMD weights one cycle needs are consecutive and a cyclic ARRAY_PARTITION by
    PE*SIMD puts each in its own bank. Element ``(co = nf*PE + p, k = t*SIMD + i)`` lands at
    ``((nf*TILES + t)*PE + p)*SIMD + i``."""
    weights = np.asarray(w)
    if weights.dtype != np.int8 or weights.ndim not in (2, 4):
        raise ValueError(f"fold_weights: w must be int8 with 2 or 4 dimensions, got {weights.dtype} {weights.shape}")
    rows = weights.reshape(weights.shape[0], -1)
    cout, length = rows.shape
    if pe < 1 or simd < 1 or cout % pe or length % simd:
        raise ValueError(f"fold_weights: PE={pe} must divide {cout} and SIMD={simd} must divide {length}")
    folded = rows.reshape(cout // pe, pe, length // simd, simd).transpose(0, 2, 1, 3)
    return np.ascontiguousarray(folded).reshape(-1)


def binary(
    op: str,
    x: npt.ArrayLike,
    g: npt.ArrayLike,
    *,
    zx: int,
    mx: int,
    sx: int,
    zg: int,
    mg: int,
    sg: int,
    s: int,
    zy: int,
    lo: int = INT8_MIN,
    hi: int = INT8_MAX,
) -> np.ndarray:
    """int8 ``op`` (add, sub, mul, max, min) of ``x`` and ``g`` of the same shape, with ``dx = sx
    * (x - zx)`` and ``dg = sg * (g - zg)`` (signs +-1: a Sub negates its subtracted operand): mul
    ``requantize(dx * dg, mx, s, ...)``; add and sub ``requantize2(dx, mx, dg, mg, s, ...)``; max and
    min the larger / smaller of ``requantize(dx, mx, s, ...)`` and ``requantize(dg, mg, s, ...)``. O(n)."""
    x, g = _int8(f"{op} x", x, (1, 2, 3)), _int8(f"{op} g", g, (1, 2, 3))
    if x.shape != g.shape:
        raise ValueError(f"{op}: inputs must have the same shape, got {x.shape} and {g.shape}")
    if sx not in (1, -1) or sg not in (1, -1):
        raise ValueError(f"{op}: signs must be 1 or -1, got {sx} and {sg}")
    dx, dg = sx * (x.astype(np.int64) - zx), sg * (g.astype(np.int64) - zg)
    if op == "mul":
        return requantize(dx * dg, mx, s, zy, lo, hi)
    if op in ("add", "sub"):
        return requantize2(dx, mx, dg, mg, s, zy, lo, hi)
    if op in ("max", "min"):
        pick = np.maximum if op == "max" else np.minimum
        return pick(requantize(dx, mx, s, zy, lo, hi), requantize(dg, mg, s, zy, lo, hi))
    raise ValueError(f"binary: op {op!r}; expected add, sub, mul, max or min")
