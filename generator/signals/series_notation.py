"""Encode a list of samples in promtool's expanding notation ("0+60x10 _x5 600x3")."""

from __future__ import annotations

from collections.abc import Sequence


def _number(value: float) -> str:
    # repr round-trips exactly: a counter written with fewer digits can step backwards
    # between runs, which Prometheus reads as a counter reset (a huge false rate).
    text = repr(float(value))
    return text.removesuffix(".0")


# A staleness marker, as Prometheus writes when a target leaves service discovery.
STALE = "stale"


def encode(values: Sequence[float | str | None]) -> str:
    """Run-length encode samples as arithmetic runs; None is a missing sample (`_`), STALE a
    staleness marker (`stale`).

    promtool's `a+bxn` stands for n+1 samples a, a+b, ..., a+n*b; `_xn` for n missing ones.
    """
    parts: list[str] = []
    i = 0
    while i < len(values):
        if values[i] == STALE:  # promtool has no `stalexn`: one marker vanishes the series
            parts.append(STALE)
            i += 1
            continue
        if values[i] is None:
            j = i
            while j + 1 < len(values) and values[j + 1] is None:
                j += 1
            parts.append("_" if j == i else f"_x{j - i + 1}")
            i = j + 1
            continue
        start = values[i]
        step: float | None = None
        tolerance = 0.0
        j = i
        # One pass with locals only: this runs for every sample of every test series.
        while j + 1 < len(values):
            following = values[j + 1]
            if following is None or following == STALE:
                break
            delta = following - values[j]
            if step is None:
                step = delta
                tolerance = 1e-9 * (abs(step) if abs(step) > 1 else 1.0)
            elif delta - step > tolerance or step - delta > tolerance:
                break
            j += 1
        count = j - i
        if count == 0:
            parts.append(_number(start))
        elif step == 0:
            parts.append(f"{_number(start)}x{count}")
        else:
            sign = "+" if step >= 0 else "-"
            parts.append(f"{_number(start)}{sign}{_number(abs(step))}x{count}")
        i = j + 1
    return " ".join(parts)
