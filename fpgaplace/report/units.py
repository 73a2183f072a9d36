"""Numbers as the report writes them, in users' units: microseconds beside milliseconds, fps, binary
byte prefixes, shares of a budget, gaps; an infinity or NaN (JSON null) is a dash.
"""

from __future__ import annotations

import math


def finite(value) -> float | None:
    """``value`` as a float when it is a finite number, else None."""
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def format_us(us) -> str:
    """Microseconds with milliseconds beside them: ``3.413 µs (0.003413 ms)``."""
    value = finite(us)
    return "–" if value is None else f"{value:.4g} µs ({value / 1e3:.4g} ms)"


def format_fps(fps) -> str:
    value = finite(fps)
    if value is None:
        return "–"
    return f"{value:,.0f} fps" if value >= 100 else f"{value:.4g} fps"


def format_bytes(count) -> str:
    """Bytes in B, KiB, MiB or GiB (binary prefixes)."""
    value = finite(count)
    if value is None:
        return "–"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(value) >= size:
            return f"{value / size:.4g} {unit}"
    return f"{value:.0f} B"


def format_share(used, available) -> str:
    """``used / available (percent)``; integers with thousands separators."""
    used_value, available_value = finite(used), finite(available)
    if used_value is None:
        return "–"
    text = f"{used_value:,.0f}" if used_value == int(used_value) else f"{used_value:,.4g}"
    if not available_value:
        return text
    return f"{text} / {available_value:,.0f} ({used_value / available_value:.1%})"


def format_gap(gap) -> str:
    value = finite(gap)
    return "none proven" if value is None else f"{value:.2%}"


def format_number(value) -> str:
    number = finite(value)
    if number is None:
        return "–" if value is None or isinstance(value, int | float) else str(value)
    return f"{number:,.0f}" if number == int(number) and abs(number) >= 1 else f"{number:.4g}"
