"""Encode a list of samples in promtool's expanding notation ("0+60x10 _x5 600x3")."""

from __future__ import annotations

import marshal
import struct
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from itertools import compress, count, groupby, islice
from math import copysign, isfinite
from operator import ne, sub


def _number(value: float) -> str:
    # repr round-trips exactly: a counter written with fewer digits can step backwards
    # between runs, which Prometheus reads as a counter reset (a huge false rate).
    text = repr(float(value))
    return text.removesuffix(".0")


# A staleness marker, as Prometheus writes when a target leaves service discovery.
STALE = "stale"


def is_gap(value: float | str | None) -> bool:
    """A missing sample (None) or a staleness marker: no number to scale, kept as it is."""
    return value is None or value == STALE


# Encodings of test files, keyed by the samples' exact bits. A job's fault tests repeat the
# healthy series (llama-8b: 1,970 series, 450 distinct), and jobs of one shape share their
# GPUs', targets' and peers' series whatever their objectives: each distinct list is encoded
# once. Used inside `shared_encodings()` blocks only; kept across them, cleared past a bound
# (a miss only costs the encoding).
_memo: dict[bytes | tuple[bytes], str] = {}
_MEMO_MAX = 8192
# A constant series' text: (value, length, its sign) -> "valuexlength-1"; cleared past _MEMO_MAX.
_constants: dict[tuple[float, int, float], str] = {}
_sharing = False


@contextmanager
def shared_encodings() -> Iterator[None]:
    """Within this block `encode_shared` encodes each distinct list of samples once."""
    global _sharing
    outer = _sharing
    _sharing = True
    try:
        yield
    finally:
        _sharing = outer


def encode_shared(values: Sequence[float | str | None]) -> str:
    """`encode`, memoised inside a `shared_encodings()` block."""
    first = values[0] if values else None
    # A constant (most test series): one run. (Not NaN or inf: their steps are NaN.)
    # (The last sample first: a counter's differs, and count() would compare every sample.)
    if (
        type(first) in (int, float)
        and isfinite(first)
        and values[-1] == first
        and values.count(first) == len(values)
    ):
        # Its text from the memo: a spec's tests ask for a few dozen (value, length) pairs,
        # each hundreds of times. The sign is in the key: 0.0 == -0.0, but "-0" is written.
        key = (first, len(values), copysign(1.0, first))
        text = _constants.get(key)
        if text is None:
            if len(_constants) >= _MEMO_MAX:
                _constants.clear()
            text = _constants[key] = _run(first, 0, len(values) - 1)
        return text
    if not _sharing:
        return encode(values)
    key = _memo_key(values)
    if key is None:
        return encode(values)
    text = _memo.get(key)
    if text is None:  # numbers only (a key of their bits alone): no gaps to look for
        text = " ".join(_runs(list(values))) if isinstance(key, bytes) else encode(values)
        if len(_memo) >= _MEMO_MAX:
            _memo.clear()
        _memo[key] = text
    return text


def _memo_key(values: Sequence[float | str | None]) -> bytes | tuple[bytes] | None:
    """Equal keys, equal samples: numbers only, their float64 bits (bytes: and no gaps to
    look for); with gaps, a 1-tuple of exact_key's bytes. None: not memoised (a type marshal
    does not write)."""
    try:
        return _float64s(values)
    except struct.error:  # a gap (or an int past float64: encoded as exactly, by encode())
        pass
    try:
        return (exact_key(values),)
    except ValueError:
        return None


def _float64s(values: Sequence[float | str | None]) -> bytes:
    """Each sample's float64 bits; struct.error for one that is not a number. (struct takes
    a list of floats twice as fast as array("d"), which parses each item as an argument.)"""
    return _packer(len(values)).pack(*values)


@lru_cache(maxsize=256)  # a spec's tests have a few dozen lengths
def _packer(length: int) -> struct.Struct:
    return struct.Struct(f"{length}d")


def exact_key(values: Sequence[float | str | None]) -> bytes:
    """Equal keys, equal samples to the last bit (and equal encodings), unlike a tuple, which
    equates 0.0 and -0.0: marshal's bytes (format 2: no back-references, so they follow from
    the values alone) hold each sample's type and float64 bits, or its text. One pass in C.
    ValueError for a type marshal does not write."""
    return marshal.dumps(values, 2)


def encode(values: Sequence[float | str | None]) -> str:
    """Run-length encode samples as arithmetic runs; None is a missing sample (`_`), STALE a
    staleness marker (`stale`).

    promtool's `a+bxn` stands for n+1 samples a, a+b, ..., a+n*b; `_xn` for n missing ones.
    """
    values = list(values)
    if _numbers_only(values):  # most series: one stretch of numbers
        return " ".join(_runs(values))
    parts: list[str] = []
    # Stretches of numbers, of missing samples and of staleness markers, told apart in C.
    for gap, stretch in groupby(values, _GAPS.get):
        samples = list(stretch)
        if gap is None:
            parts += _runs(samples)
        elif gap == STALE:  # promtool has no `stalexn`: one marker vanishes the series
            parts += [STALE] * len(samples)
        else:
            parts.append("_" if len(samples) == 1 else f"_x{len(samples)}")
    return " ".join(parts)


def _numbers_only(values: Sequence[float | str | None]) -> bool:
    """No gaps (None) or staleness markers (faster than two scans). An int past float64 counts
    as a gap here: encode() and Prefixes then take the path for stretches, with the same text."""
    try:
        _float64s(values)
    except struct.error:
        return False
    return True


# A sample's kind for encode(): None for a number.
_GAPS = {None: "_", STALE: STALE}


def _runs(values: list[float]) -> list[str]:
    """Samples without gaps as greedy arithmetic runs: each run takes the step between its
    first two samples and extends while the next step is within 1e-9 (relative) of it."""
    return [_run(values[i], step, j - i) for i, j, step in _run_spans(values)]


def _run_spans(values: list[float]) -> list[tuple[int, int, float]]:
    """_runs' runs as (index of the first sample, index of the last, step)."""
    deltas = list(map(sub, islice(values, 1, None), values))  # (islice: no copies)
    # Where each stretch of equal steps ends (exclusive, in delta indices): the run test then
    # runs once per stretch instead of once per sample, with the same greedy outcome.
    ends = [*compress(count(1), map(ne, islice(deltas, 1, None), deltas)), len(deltas)]
    spans: list[tuple[int, int, float]] = []
    i = stretch = 0
    last = len(values) - 1
    while i <= last:
        if i == last:
            spans.append((i, i, 0.0))
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
        spans.append((i, j, step))
        i = j + 1
    return spans


def _run(start: float, step: float, count: int) -> str:
    if count == 0:
        return _number(start)
    if step == 0:
        return f"{_number(start)}x{count}"
    sign = "+" if step >= 0 else "-"
    return f"{_number(start)}{sign}{_number(abs(step))}x{count}"


class Prefixes:
    """One series' encoding, and that of each of its prefixes without encoding again.

    The greedy runs never look back: the first n samples encode as the whole series' runs up
    to the one holding sample n-1, that one cut short there. A test job's healthy series are
    encoded once at the longest length any test asks for; each test takes its prefix.
    """

    def __init__(self, values: Sequence[float | str | None]) -> None:
        # Per part: (first sample, last sample, start, step); start None for a gap, STALE
        # for a staleness marker, else the run's first value.
        self._spans: list[tuple[int, int, float | str | None, float]] = []
        first = 0
        # Numbers only (most series): one stretch, no gaps to look for.
        stretches = [(None, values)] if _numbers_only(values) else groupby(values, _GAPS.get)
        for gap, stretch in stretches:
            samples = list(stretch)
            if gap is None:
                self._spans += [
                    (first + i, first + j, samples[i], step) for i, j, step in _run_spans(samples)
                ]
            elif gap == STALE:  # one part per marker, as encode() writes them
                self._spans += [(first + i, first + i, STALE, 0.0) for i in range(len(samples))]
            else:
                self._spans.append((first, first + len(samples) - 1, None, 0.0))
            first += len(samples)
        self._parts = [_part(*span) for span in self._spans]
        self._lasts = [span[1] for span in self._spans]
        self._texts: dict[int, str] = {}
        self.length = first

    def text(self, length: int) -> str:
        """encode() of the first `length` samples (1 <= length <= self.length)."""
        text = self._texts.get(length)
        if text is None:
            last = length - 1
            k = bisect_left(self._lasts, last)  # the part holding the last sample
            first, end, start, step = self._spans[k]
            tail = self._parts[k] if end == last else _part(first, last, start, step)
            text = " ".join([*self._parts[:k], tail])
            self._texts[length] = text
        return text


def _part(first: int, last: int, start: float | str | None, step: float) -> str:
    if start is None:
        return "_" if first == last else f"_x{last - first + 1}"
    if start == STALE:
        return STALE
    return _run(start, step, last - first)
