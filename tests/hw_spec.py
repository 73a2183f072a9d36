"""Iteration counts the kernel header documents (hls_templates/hls/include/fpgaplace/kernels.h),
written out independently of fpgaplace.hw so that tests compare the C kernels' measured loop
counts and the op library's cycle model against the same statement."""

from __future__ import annotations


def sliding_ticks(cfg: dict[str, int], channels: int, width: int, window_rows: int, steps: int) -> int:
    """Iterations of a line-buffered stage per sample: the input rows output row 0 needs (read
    ``width`` elements a beat), then per output row the larger of the beats of the rows the next
    output row needs (all remaining rows after the last) and the row's ``steps``."""
    row_beats = cfg["W"] * channels // width
    row = max(0, min(cfg["H"], window_rows - cfg["PT"]))
    total = row * row_beats
    for ho in range(cfg["HO"]):
        top = ho * cfg["SH"] - cfg["PT"]
        wanted = min(cfg["H"], top + cfg["SH"] + window_rows) if ho + 1 < cfg["HO"] else cfg["H"]
        total += max(max(0, wanted - row) * row_beats, steps)
        row = max(row, wanted)
    return total
