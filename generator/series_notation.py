"""Encode a list of samples in promtool's expanding notation ("0+60x10 _x5 600x3")."""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import compress, count
from operator import ne, sub


def _number(value: float) -> str:
    # repr round-trips exactly: a counter written with fewer digits can step backwards
    # between runs, which Prometheus reads as a counter reset (a huge false rate).
    text = repr(float(value))
    return text.removesuffix(".0")


# A staleness marker, as Prometheus writes when a target leaves service discovery.
STALE = "stale"

# Encodings of one job's test file, keyed by the samples' exact bits (None: not collecting).
# A job's fault tests repeat the healthy series (llama-8b: 1,970 series, 450 distinct), so each
# distinct one is encoded once; the memo lives only as long as one `shared_encodings()` block.
_memo: dict[bytes, str] | None = None


@contextmanager
def shared_encodings() -> Iterator[None]:
    """Within this block `encode_shared` encodes each distinct list of samples once."""
    global _memo
    outer = _memo
    _memo = {} if outer is None else outer
    try:
        yield
    finally:
        _memo = outer


def encode_shared(values: Sequence[float | str | None]) -> str:
    """`encode`, memoised inside a `shared_encodings()` block."""
    if _memo is None:
        return encode(values)
    try:
        # The float64 bits: exact (unlike a tuple, which equates 0.0 and -0.0), cheap to hash.
        key = array("d", values).tobytes()
    except (TypeError, OverflowError):  # gaps (None), staleness markers: rare, not memoised
        return encode(values)
    text = _memo.get(key)
    if text is None:  # numbers only (array() took them all): no gaps to look for
        text = _memo[key] = " ".join(_runs(list(values)))
    return text


def encode(values: Sequence[float | str | None]) -> str:
    """Run-length encode samples as arithmetic runs; None is a missing sample (`_`), STALE a
    staleness marker (`stale`).

    promtool's `a+bxn` stands for n+1 samples a, a+b, ..., a+n*b; `_xn` for n missing ones.
    """
    values = list(values)
    if None not in values and STALE not in values:  # most series: one stretch of numbers
        return " ".join(_runs(values))
    parts: list[str] = []
    i = 0
    while i < len(values):
        if values[i] == STALE:  # promtool has no `stalexn`: one marker vanishes the series
            parts.append(STALE)
            i += 1
            continue
        j = i
        if values[i] is None:
            while j + 1 < len(values) and values[j + 1] is None:
                j += 1
            parts.append("_" if j == i else f"_x{j - i + 1}")
        else:
            while j + 1 < len(values) and values[j + 1] is not None and values[j + 1] != STALE:
                j += 1
            parts += _runs(values[i : j + 1])
        i = j + 1
    return " ".join(parts)


def _runs(values: list[float]) -> list[str]:
    """Samples without gaps as greedy arithmetic runs: each run takes the step between its
    first two samples and extends while the next step is within 1e-9 (relative) of it."""
    deltas = list(map(sub, values[1:], values[:-1]))
    # Where each stretch of equal steps ends (exclusive, in delta indices): the run test then
    # runs once per stretch instead of once per sample, with the same greedy outcome.
    ends = [*compress(count(1), map(ne, deltas[1:], deltas[:-1])), len(deltas)]
    parts: list[str] = []
    i = stretch = 0
    last = len(values) - 1
    while i <= last:
        if i == last:
            parts.append(_number(values[i]))
            break
        step = deltas[i]
        tolerance = 1e-9 * (abs(step) if abs(step) > 1 else 1.0)
        while ends[stretch] <= i:
            stretch += 1
        j = ends[stretch]  # every step of this stretch equals `step`: values i..j are a run
        following = stretch + 1
        while following < len(ends):
            delta = deltas[ends[following - 1]]
            if delta - step > tolerance or step - delta > tolerance:
                break
            j = ends[following]
            following += 1
        parts.append(_run(values[i], step, j - i))
        i = j + 1
    return parts


def _run(start: float, step: float, count: int) -> str:
    if count == 0:
        return _number(start)
    if step == 0:
        return f"{_number(start)}x{count}"
    sign = "+" if step >= 0 else "-"
    return f"{_number(start)}{sign}{_number(abs(step))}x{count}"
