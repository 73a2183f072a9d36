"""Two computations of one tensor compared: the norm-wise relative error to report, and the
elementwise ``Tolerance`` rule that decides whether they agree (split, fusion, quantized pieces)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def relative_error(actual: np.ndarray, expected: np.ndarray) -> float:
    """max |actual - expected| / max |expected| (norm-wise; 0 when both are all zero)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape:
        return float("inf")
    if not np.issubdtype(expected.dtype, np.number) or np.issubdtype(expected.dtype, np.integer):
        return 0.0 if np.array_equal(actual, expected) else float("inf")
    diff = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
    both_nan = np.isnan(actual) & np.isnan(expected)
    diff = np.where(both_nan, 0.0, diff)
    scale = float(np.nanmax(np.abs(expected))) if expected.size else 0.0
    worst = float(diff.max()) if diff.size else 0.0
    if np.isnan(worst):
        return float("inf")
    return worst / scale if scale > 0 else worst


@dataclass(frozen=True)
class Tolerance:
    """When a tensor computed two ways agrees: elementwise, ``numpy.allclose``'s rule

        |actual - expected| <= atol + rtol * |expected|,
        atol = range_rtol * max|expected| + floor_ulps * eps(dtype of expected),

    with NaN equal to NaN, an infinity equal only to itself, and integer and boolean tensors
    equal exactly. ``atol``'s first term scales with the tensor's own range (max over the
    tensor), so a tensor whose values are all tiny is judged at its own scale and not against
    an absolute 1e-5; the floor covers float rounding of the intermediates a tiny output is
    computed from (a split or fusion reorders and fuses arithmetic: onnxruntime folds a
    BatchNormalization into the Conv before it only when both sit in one model). The default
    floor, 64 eps (float32: 7.6e-6), is one rounding step of values near 64, or a few steps of
    values near 8 (the tiny-output test model differs by 9.5e-7, one step at 8). Real
    differences (a changed weight, a wrong tensor) move an output by a share of its own
    range and still fail.
    """

    rtol: float = 1e-5
    range_rtol: float = 1e-5
    floor_ulps: float = 64.0

    def atol(self, expected: np.ndarray) -> float:
        """The absolute term for ``expected`` (a floating tensor)."""
        finite = np.abs(expected[np.isfinite(expected)])
        scale = float(finite.max()) if finite.size else 0.0
        return self.range_rtol * scale + self.floor_ulps * float(np.finfo(expected.dtype).eps)


@dataclass(frozen=True)
class Comparison:
    """The worst element of a comparison: ``used`` is its |difference| over what ``Tolerance``
    allows there (<= 1 agrees; inf for a shape mismatch, unequal exact values or a stray NaN)."""

    used: float
    index: tuple[int, ...] | None = None  # None: no element was compared (shapes differ, or empty)
    actual: float | int | bool = 0.0
    expected: float | int | bool = 0.0
    allowed: float = 0.0
    note: str = ""  # why the values could not be compared elementwise, or why they must be equal

    @property
    def agrees(self) -> bool:
        return self.used <= 1.0

    def describe(self) -> str:
        """Where and by how much (one line), e.g. for an error message."""
        if self.index is None:
            return f"({self.note})"
        where = f"at index {self.index}: {_number(self.actual)} vs {_number(self.expected)}"
        if self.note:
            return f"{where} ({self.note})"
        return f"{where} (|difference| {abs(self.actual - self.expected):.3g} > allowed {self.allowed:.3g})"


def _number(value: float | int | bool) -> str:
    return f"{value:.6g}" if isinstance(value, float) else repr(value)


def compare_tensors(actual: np.ndarray, expected: np.ndarray, tolerance: Tolerance = Tolerance()) -> Comparison:
    """Compare ``actual`` with ``expected`` by ``tolerance``'s rule; the worst element. O(size)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape:
        return Comparison(math.inf, note=f"shape {list(actual.shape)} where {list(expected.shape)} was expected")
    if not np.issubdtype(expected.dtype, np.floating):
        if np.array_equal(actual, expected):
            return Comparison(0.0)
        index = tuple(int(i) for i in np.argwhere(actual != expected)[0])
        return Comparison(math.inf, index, actual[index].item(), expected[index].item(),
                          note=f"{expected.dtype} values must be equal")
    if expected.size == 0:
        return Comparison(0.0)
    if not (np.issubdtype(actual.dtype, np.number) or actual.dtype == np.bool_):
        return Comparison(math.inf, note=f"{actual.dtype} values where {expected.dtype} was expected")
    a, b = actual.astype(np.float64), expected.astype(np.float64)
    same = (a == b) | (np.isnan(a) & np.isnan(b))  # equal infinities and NaN pairs agree
    allowed = tolerance.atol(expected) + tolerance.rtol * np.abs(b)
    with np.errstate(invalid="ignore", divide="ignore"):
        used = np.where(same, 0.0, np.abs(a - b) / allowed)
    used = np.where(np.isnan(used), math.inf, used)
    flat = int(np.argmax(used))
    index = tuple(int(i) for i in np.unravel_index(flat, used.shape))
    return Comparison(float(used.flat[flat]), index, float(a.flat[flat]), float(b.flat[flat]),
                      float(np.broadcast_to(allowed, used.shape).flat[flat]))
