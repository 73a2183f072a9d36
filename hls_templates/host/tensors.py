"""The tensor conventions every host driver of an fpgaplace project shares (``host/driver.py`` on
PYNQ, ``host/uart_driver.py`` over an ECP5 board's UART): int8 quantization as QuantizeLinear and
DequantizeLinear do it, and a boundary tensor's stream order (design.json's ``shape``,
``sample_shape``, ``channels_last``). Needs numpy only.
"""

from __future__ import annotations

import numpy as np


class DriverError(Exception):
    """A problem a user can fix: the one-line message names the file, tensor or core."""


def quantize(x: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """int8 ``clip(rint(x / scale) + zero_point)``, the division in float32 (QuantizeLinear)."""
    quotient = np.asarray(x, dtype=np.float32) / np.float32(scale)
    return np.clip(np.rint(quotient).astype(np.float64) + zero_point, -128, 127).astype(np.int8)


def dequantize(q: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """float32 ``(q - zero_point) * scale`` (DequantizeLinear)."""
    return (np.asarray(q).astype(np.int32) - np.int32(zero_point)).astype(np.float32) * np.float32(scale)


def to_stream(array: np.ndarray, tensor: dict) -> list[np.ndarray]:
    """The per-sample stream-order bytes of a boundary tensor (NCHW becomes HWC); a call holds
    as many samples as ``sample_shape`` fits in ``shape``."""
    batch = array.reshape(tensor["shape"])
    count = max(1, batch.size // max(1, int(np.prod(tensor["sample_shape"]))))
    samples = np.split(batch, count) if batch.ndim else [batch]
    if tensor["channels_last"]:
        return [np.ascontiguousarray(np.transpose(s, (0, 2, 3, 1))).reshape(-1) for s in samples]
    return [s.reshape(-1) for s in samples]


def from_stream(samples: list[np.ndarray], tensor: dict) -> np.ndarray:
    """The inverse of ``to_stream``: per-sample stream bytes back to the tensor's shape."""
    shape = tensor["shape"]
    if tensor["channels_last"]:
        _, c, h, w = shape
        return np.concatenate([s.reshape(-1, h, w, c).transpose(0, 3, 1, 2) for s in samples]).reshape(shape)
    return np.concatenate([s.reshape(-1) for s in samples]).reshape(shape)
