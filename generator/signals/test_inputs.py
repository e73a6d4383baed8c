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
        self._healthy = JobTimeline(ctx, horizon).build()
        # Per group, per series: name, extra labels and the healthy encoding's prefixes.
        self._healthy_groups = [
            [(name, extra, Prefixes(values)) for name, extra, values in group(self._healthy)]
            for _, group in SIGNAL_GROUPS
        ]
        self._selectors: dict[tuple, str] = {}
        self._rank_labels = [
            {**ctx.spec.selector_labels, "node": "node-0", "rank": str(rank)}
            for rank in range(REPORTING_RANKS)
        ]

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
        signals: list[tuple[str, dict, str]] = []
        for (fields, group), healthy in zip(SIGNAL_GROUPS, self._healthy_groups, strict=True):
            if changed is not None and changed.isdisjoint(fields):
                signals += [(name, extra, p.text(length)) for name, extra, p in healthy]
            else:
                signals += [
                    (name, extra, encode_shared(incarnations(t, name, values)[:length]))
                    for name, extra, values in group(t)
                ]
        return [
            {"series": self._rank_selector(rank, name, extra), "values": text}
            for rank in range(REPORTING_RANKS)
            for name, extra, text in signals
        ]

    def _changed(self, t: JobTimeline, length: int) -> set[str] | None:
        """The timeline fields that differ from the healthy job's in the first `length`
        minutes; None: every series must be computed (an outage, or past the horizon)."""
        if t.outage is not None or length > self.horizon + 1:
            return None
        fields = {field for fields, _ in SIGNAL_GROUPS for field in fields}
        return {f for f in fields if _differs(getattr(t, f), getattr(self._healthy, f), length)}

    def _rank_selector(self, rank: int, name: str, extra: dict) -> str:
        key = (rank, name, *extra.items())
        text = self._selectors.get(key)
        if text is None:
            text = self._selectors[key] = name + matchers({**self._rank_labels[rank], **extra})
        return text


def _first(t: JobTimeline, length: int) -> JobTimeline:
    """The timeline's first `length` minutes (every series is a prefix: none looks ahead)."""
    columns = {f.name: getattr(t, f.name) for f in dataclasses.fields(t)}
    cut = {name: value[:length] for name, value in columns.items() if isinstance(value, list)}
    return dataclasses.replace(t, minutes=length - 1, **cut)


def _differs(value: object, healthy: object, length: int) -> bool:
    """Does a timeline field differ from the healthy job's in its first `length` minutes?"""
    if not isinstance(value, list):
        return value != healthy
    value, healthy = value[:length], healthy[:length]
    if value != healthy:
        return True
    if isinstance(value[0], str):  # phases: == is exact
        return False
    # == takes 0.0 for -0.0, which a series passed on as is (a loss) would write as "-0".
    try:
        return exact_key(value) != exact_key(healthy)
    except (TypeError, OverflowError):  # not samples: computed, to be safe
        return True
