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


def conv_ticks(cfg: dict[str, int], width_in: int, width_out: int) -> int:
    """Iterations of a convolution stage: the line-buffered rows with ceil(WO/MMV) pixel groups
    of COUT/PE x KKG/SIMD steps a row, then, when its outputs leave through a reorder buffer
    (MMV > 1 with PE < COUT or a short last group), the last group's beats."""
    folds = cfg["COUT"] // cfg["PE"] * (cfg["KH"] * cfg["KW"] * cfg["CIN"] // cfg["GROUPS"] // cfg["SIMD"])
    groups = -(-cfg["WO"] // cfg["MMV"])
    last = cfg["WO"] - (groups - 1) * cfg["MMV"]
    reordered = cfg["MMV"] > 1 and (cfg["PE"] < cfg["COUT"] or last < cfg["MMV"])
    drain = last * cfg["COUT"] // width_out if reordered else 0
    rows = cfg["DH"] * (cfg["KH"] - 1) + 1
    return sliding_ticks(cfg, cfg["CIN"], width_in, rows, groups * folds) + drain
