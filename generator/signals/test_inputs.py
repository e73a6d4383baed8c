"""The input series of one spec's promtool tests, encoded, with what recurs encoded once.

A spec's test file holds ~40 tests, each with its own copy of the healthy job bent by one
fault: the same series again and again, at different lengths. Here the healthy job's series
are computed and encoded once, at the longest length a test asks for (series_notation's
Prefixes then cut each encoding to a test's length), and a test's timeline recomputes only the
groups of series (job_series.SIGNAL_GROUPS) whose timeline fields its fault changed.
`job_series` stays the plain path: tests/test_test_inputs.py checks this one against it.
"""

from __future__ import annotations

import dataclasses

from trainsignals.generator.signals.faults import JobTimeline
from trainsignals.generator.signals.gpu_sources import RawSeries
from trainsignals.generator.signals.job_series import (
    REPORTING_RANKS,
    SIGNAL_GROUPS,
    incarnations,
    progress_once,
)
from trainsignals.generator.signals.promql import RuleContext, matchers
from trainsignals.generator.signals.series_notation import (
    Prefixes,
    encode_shared,
    exact_key,
)

Input = dict[str, str]  # {"series": selector, "values": encoded samples}


class TestInputs:
    """Encoded input series for one spec's tests; lives as long as that spec's test file.

    Use inside a series_notation.shared_encodings() block: series that differ from the
    healthy job's are memoised there.
    """

    __test__ = False  # not a pytest class

    def __init__(self, ctx: RuleContext, horizon: int) -> None:
        """`horizon`: the most minutes a test's job timeline has (longer ones are computed
        in full)."""
        self.ctx = ctx
        self.horizon = horizon
        healthy = JobTimeline(ctx, horizon).build()
        self._selectors: dict[tuple, str] = {}
        self._rank_labels = [
            {**ctx.spec.selector_labels, "node": "node-0", "rank": str(rank)}
            for rank in range(REPORTING_RANKS)
        ]
        # Per group, per series: its selector for each rank and the healthy encoding (one
        # per distinct list of samples: the step count is the step total, buckets repeat).
        distinct: dict[object, Prefixes] = {}
        progress = progress_once(healthy)
        self._healthy_groups = [
            [
                (self._rank_selectors(name, extra), _prefixes(fields, values, distinct))
                for name, extra, values in group(healthy, progress)
            ]
            for fields, group in SIGNAL_GROUPS
        ]
        names = {field for fields, _ in SIGNAL_GROUPS for field in fields}
        self._healthy_fields = {name: _fingerprint(getattr(healthy, name)) for name in names}

    def raw(self, series: list[RawSeries]) -> list[Input]:
        """Series as built: each encoded (memoised) with its selector."""
        return [{"series": self._selector(s), "values": encode_shared(s.values)} for s in series]

    def _selector(self, s: RawSeries) -> str:
        # The same series recur in every test: each selector is written once.
        key = (s.name, *s.labels.items())
        text = self._selectors.get(key)
        if text is None:
            text = self._selectors[key] = s.selector()
        return text

    def job(self, t: JobTimeline) -> list[Input]:
        """job_series(ctx, t), encoded: the groups the fault left alone from the healthy job's
        encodings, the others computed."""
        length = t.minutes + 1 if t.completed is None else t.completed + 1
        changed = self._changed(t, length)
        if length <= t.minutes and t.outage is None:  # a job that ended: its first minutes
            t = _first(t, length)
        progress = progress_once(t)
        selectors: list[tuple[str, ...]] = []  # of each rank
        texts: list[str] = []
        for (fields, group), healthy in zip(SIGNAL_GROUPS, self._healthy_groups, strict=True):
            if changed is not None and changed.isdisjoint(fields):
                for rank_selectors, prefixes in healthy:
                    selectors.append(rank_selectors)
                    texts.append(prefixes.text(length))
            else:
                for name, extra, values in group(t, progress):
                    selectors.append(self._rank_selectors(name, extra))
                    texts.append(encode_shared(incarnations(t, name, values)[:length]))
        return [
            {"series": rank_selectors[rank], "values": text}
            for rank in range(REPORTING_RANKS)
            for rank_selectors, text in zip(selectors, texts, strict=True)
        ]

    def _changed(self, t: JobTimeline, length: int) -> set[str] | None:
        """The timeline fields that differ from the healthy job's in the first `length`
        minutes; None: every series must be computed (an outage, or past the horizon)."""
        if t.outage is not None or length > self.horizon + 1:
            return None
        changed = set()
        for name, healthy in self._healthy_fields.items():
            value = getattr(t, name)
            if isinstance(value, list):
                value = _fingerprint(value if len(value) == length else value[:length])
                healthy = _cut(healthy, length)
            if value != healthy:
                changed.add(name)
        return changed

    def _rank_selectors(self, name: str, extra: dict) -> tuple[str, ...]:
        """The selector of each reporting rank's series `name` with `extra` labels."""
        key = (name, *extra.items())
        selectors = self._selectors.get(key)
        if selectors is None:
            selectors = self._selectors[key] = tuple(
                name + matchers({**labels, **extra}) for labels in self._rank_labels
            )
        return selectors


# The healthy loss is the same for every spec (a function of the minute alone): its encoding
# is kept for a few horizons, keyed on its samples. (It has a run per two minutes: ~15% of
# the healthy job's encoding work.)
_LOSS_PREFIXES: dict[object, Prefixes] = {}


def _prefixes(fields: tuple[str, ...], values: list, distinct: dict[object, Prefixes]) -> Prefixes:
    """The healthy encoding of `values`: from `distinct` (this spec's) if it holds them, or
    from the loss's (every spec's) cache."""
    try:
        key = exact_key(values)
    except (TypeError, OverflowError):  # not plain samples: not shared
        return Prefixes(values)
    prefixes = distinct.get(key)
    if prefixes is None and fields == ("loss",):
        prefixes = _LOSS_PREFIXES.get(key)
        if prefixes is None:
            if len(_LOSS_PREFIXES) >= 8:
                _LOSS_PREFIXES.clear()
            prefixes = _LOSS_PREFIXES[key] = Prefixes(values)
    if prefixes is None:
        prefixes = Prefixes(values)
    distinct[key] = prefixes
    return prefixes


def _first(t: JobTimeline, length: int) -> JobTimeline:
    """The timeline's first `length` minutes (every series is a prefix: none looks ahead)."""
    columns = {f.name: getattr(t, f.name) for f in dataclasses.fields(t)}
    cut = {name: value[:length] for name, value in columns.items() if isinstance(value, list)}
    return dataclasses.replace(t, minutes=length - 1, **cut)


Fingerprint = bytes | tuple[bytes, bytes] | list


def _fingerprint(values: list) -> Fingerprint:
    """What tells a timeline field's values apart exactly: == alone takes 0.0 for -0.0, which
    a series passed on as is (a loss) writes as "-0". Phases (strings) are their own."""
    try:
        return exact_key(values)
    except (TypeError, OverflowError):
        return values


def _cut(fingerprint: Fingerprint, length: int) -> Fingerprint:
    """The fingerprint of the first `length` values."""
    if isinstance(fingerprint, bytes):  # float64 bits
        return fingerprint[: 8 * length]
    if isinstance(fingerprint, tuple):  # float64 bits (0 in a gap) and each value's kind
        return fingerprint[0][: 8 * length], fingerprint[1][:length]
    return fingerprint[:length]
