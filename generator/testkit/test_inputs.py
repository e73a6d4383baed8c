"""The input series of one spec's promtool tests, encoded, with what recurs encoded once.

A spec's test file holds ~40 tests, each with its own copy of the healthy job bent by one
fault: the same series again and again, at different lengths. Here the healthy job's series
are computed and encoded once, at the longest length a test asks for (series_notation's
Prefixes then cut each encoding to a test's length), and a test's timeline recomputes only the
groups of series (job_series.SIGNAL_GROUPS) whose timeline fields its fault changed.

What a group's series are follows from its fields' samples alone (and the step-time bound,
which places the histogram's buckets), not from the spec's names: the encodings are kept
across specs in a bounded memo keyed on those samples' exact bits, so jobs whose timelines
agree (one throughput objective, one fault vocabulary) encode each group once. Groups that
read the speed only as stepping or not (job_series.READS_ONLY_STEPPING) are keyed on that:
jobs of one shape share them whatever their throughput objectives.
`job_series` stays the plain path: tests/test_test_inputs.py checks this one against it.
"""

from __future__ import annotations

from trainsignals.generator.signals.promql import RuleContext, matchers
from trainsignals.generator.testkit.faults import JobTimeline
from trainsignals.generator.testkit.input_series import RawSeries
from trainsignals.generator.testkit.job_series import (
    READS_ONLY_STEPPING,
    READS_STEP_TIME_BOUND,
    REPORTING_RANKS,
    SIGNAL_GROUPS,
    incarnations,
    one_gpu_series,
    progress_once,
    rank_labels,
    xid_series,
)
from trainsignals.generator.testkit.series_notation import (
    Prefixes,
    encode_shared,
    exact_key,
)

Input = dict[str, str]  # {"series": selector, "values": encoded samples}
# A group's series for one rank: (name, extra labels, encoding or healthy Prefixes).
Encoded = list[tuple[str, dict, str]]
HealthyGroup = list[tuple[str, dict, Prefixes]]

# Every field some group reads: what a timeline is fingerprinted on.
_FIELDS = tuple(dict.fromkeys(field for fields, _ in SIGNAL_GROUPS for field in fields))


class TestInputs:
    """Encoded input series for one spec's tests; lives as long as that spec's test file.

    Use inside a series_notation.shared_encodings() block: raw series (targets, GPUs) that
    differ from the healthy ones are memoised there.
    """

    __test__ = False  # not a pytest class

    def __init__(self, ctx: RuleContext, horizon: int) -> None:
        """`horizon`: the most minutes a test's job timeline has (longer ones are computed
        in full)."""
        self.ctx = ctx
        self.horizon = horizon
        healthy = JobTimeline(ctx, horizon).build()
        self._selectors: dict[tuple, object] = {}
        self._healthy_gpus: dict[tuple[int, int], list[Input]] = {}
        self._rank_labels = rank_labels(ctx)
        self._healthy = healthy
        healthy_prints = _fingerprints(healthy, horizon + 1)
        self._healthy_prints = healthy_prints  # over the whole horizon
        self._healthy_groups = _healthy_groups(healthy, healthy_prints)
        # Each group's series names (the same in every timeline): `job(names=...)` asks.
        self._group_names = [frozenset(name for name, _, _ in g) for g in self._healthy_groups]
        # Each healthy series' selectors (of every rank), for the tests that keep it: made
        # once here, not looked up again in each of them.
        self._healthy_selectors = [
            [self._rank_selectors(name, extra) for name, extra, _ in group]
            for group in self._healthy_groups
        ]

    def raw(self, series: list[RawSeries]) -> list[Input]:
        """Series as built: each encoded (memoised) with its selector."""
        # Series that share one list of samples (ranks alike but for their labels) encode it
        # once, not packed again for the memo's key.
        texts: dict[int, str] = {}
        inputs = []
        for s in series:
            text = texts.get(id(s.values))
            if text is None:
                text = texts[id(s.values)] = encode_shared(s.values)
            inputs.append({"series": self._selector(s), "values": text})
        return inputs

    def gpus(self, minutes: int, overrides: dict | None = None) -> list[Input]:
        """raw(gpu_series(ctx, minutes, overrides)): a GPU no override bends is the same in
        every test of one length, its inputs built once per length."""
        inputs: list[Input] = []
        for gpu in range(self.ctx.spec.shape.gpus_per_node):
            if gpu == 0 and overrides:
                inputs += self.raw(one_gpu_series(self.ctx, minutes, gpu, overrides))
                continue
            healthy = self._healthy_gpus.get((minutes, gpu))
            if healthy is None:
                healthy = self.raw(one_gpu_series(self.ctx, minutes, gpu))
                self._healthy_gpus[minutes, gpu] = healthy
            inputs += healthy
        return inputs + self.raw(xid_series(self.ctx, minutes, overrides))

    def _selector(self, s: RawSeries) -> str:
        # The same series recur in every test: each selector is written once.
        key = (s.name, *s.labels.items())
        text = self._selectors.get(key)
        if text is None:
            text = self._selectors[key] = s.selector()
        return text  # type: ignore[return-value]

    def job(self, t: JobTimeline, names: frozenset[str] | None = None) -> list[Input]:
        """job_series(ctx, t), encoded: the groups the fault left alone from the healthy job's
        encodings, the others from the memo or computed. `names`: only series of these
        names (None: all); a group with none of them is not worked out at all."""
        length = t.minutes + 1 if t.completed is None else t.completed + 1
        # The groups with a wanted series (a group's names are the same in every timeline),
        # and the fields they read: only those are fingerprinted and compared.
        groups = [
            (index, healthy)
            for index, healthy in enumerate(self._healthy_groups)
            if names is None or not names.isdisjoint(self._group_names[index])
        ]
        fields_read = {field for index, _ in groups for field in SIGNAL_GROUPS[index][0]}
        prints = _fingerprints(t, length, fields_read)
        changed = self._changed(t, length, prints)
        computed = _Computed(t, length, every=1)
        selectors: list[tuple[str, ...]] = []  # of each rank
        texts: list[str] = []
        for index, healthy in groups:
            fields = SIGNAL_GROUPS[index][0]
            if changed is not None and changed.isdisjoint(fields):
                kept = zip(healthy, self._healthy_selectors[index], strict=True)
                for (name, _, prefixes), rank_selectors in kept:
                    if names is None or name in names:
                        selectors.append(rank_selectors)
                        texts.append(prefixes.text(length))
                continue
            for name, extra, text in computed.encoded(index, prints):
                if names is None or name in names:
                    selectors.append(self._rank_selectors(name, extra))
                    texts.append(text)
        return [
            {"series": rank_selectors[rank], "values": text}
            for rank in range(REPORTING_RANKS)
            for rank_selectors, text in zip(selectors, texts, strict=True)
        ]

    def _changed(self, t: JobTimeline, length: int, prints: dict) -> set[str] | None:
        """The fingerprinted fields that differ from the healthy job's in the first `length`
        minutes; None: every series must be computed (an outage, or past the horizon)."""
        if t.outage is not None or length > self.horizon + 1:
            return None
        whole = self._healthy_prints
        return {
            name for name, fingerprint in prints.items() if not _starts(whole[name], fingerprint)
        }

    def _rank_selectors(self, name: str, extra: dict) -> tuple[str, ...]:
        """The selector of each reporting rank's series `name` with `extra` labels."""
        key = (name, *extra.items())
        selectors = self._selectors.get(key)
        if selectors is None:
            selectors = self._selectors[key] = tuple(
                name + matchers({**labels, **extra}) for labels in self._rank_labels
            )
        return selectors  # type: ignore[return-value]


class _Computed:
    """A timeline's groups worked out (the timeline cut to `length`, its progress once), one
    sample every `every` minutes, encoded; or taken from the memo."""

    def __init__(self, t: JobTimeline, length: int, every: int) -> None:
        self._t, self._length, self._every = t, length, every
        self._progress = None
        self._stepping: Fingerprint | None = None

    def encoded(self, index: int, prints: dict) -> Encoded:
        """Group `index`'s series: from the memo where a timeline had the same samples of the
        group's fields (`prints`: _fingerprints of at least those), else worked out."""
        t = self._t
        if SIGNAL_GROUPS[index][1] in READS_ONLY_STEPPING and self._stepping is None:
            self._stepping = _stepping(t, self._length)
        key = (index, self._length, self._every, t.outage, _bound(t, index))
        key += _key_prints(index, prints, self._stepping)
        encoded = _GROUPS.get(key)
        if encoded is None:
            encoded = _remember(key, self.group(index))
            _NAMES[index] = frozenset(name for name, _, _ in encoded)
        return encoded

    def group(self, index: int) -> Encoded:
        t, length, every = self._t, self._length, self._every
        if self._progress is None:
            if length <= t.minutes and t.outage is None:  # a job that ended: its first minutes
                self._t = t = t.first(length)
            self._progress = progress_once(t)
        return [
            (name, extra, encode_shared(incarnations(t, name, values)[:length][::every]))
            for name, extra, values in SIGNAL_GROUPS[index][1](t, self._progress)
        ]


def sampled_job_series(t: JobTimeline, names: frozenset[str] | None, every: int) -> Encoded:
    """One reporting rank's series of job_series(ctx, t) (every rank's are alike), of `names`
    only (None: all), one sample every `every` minutes, encoded: (name, extra labels, text).
    Each group from the memo where a timeline with the same samples of its fields had it (the
    long-horizon tests: jobs of one shape share them, and most groups whatever their
    objectives)."""
    length = t.minutes + 1 if t.completed is None else t.completed + 1
    groups = [
        index
        for index in range(len(SIGNAL_GROUPS))
        if names is None or index not in _NAMES or not names.isdisjoint(_NAMES[index])
    ]
    prints = _fingerprints(t, length, {f for i in groups for f in SIGNAL_GROUPS[i][0]})
    computed = _Computed(t, length, every)
    return [
        (name, extra, text)
        for index in groups
        for name, extra, text in computed.encoded(index, prints)
        if names is None or name in names
    ]


# Each group's series names, as seen (the same in every timeline): a group with none of the
# names asked for is not worked out.
_NAMES: dict[int, frozenset[str]] = {}


# Group encodings across specs: (group, length, minutes between samples, outage, step-time
# bound where the group reads it, its fields' samples: _key_prints) -> the group's series. A
# spec adds ~150; cleared past the bound (a fleet's specs come in a few shapes, and a miss only
# costs the encoding).
_GROUPS: dict[tuple, list] = {}
_GROUPS_MAX = 4096


def _bound(t: JobTimeline, index: int) -> float | None:
    """The step-time bound for a group that reads it; None for the others (so specs that differ
    in their bound alone share those groups' encodings)."""
    return t.step_time_bound if SIGNAL_GROUPS[index][1] in READS_STEP_TIME_BOUND else None


def _key_prints(index: int, prints: dict, stepping: Fingerprint | None) -> tuple:
    """The fingerprints group `index`'s memo key holds: of its fields, but for a group that
    reads the speed only as stepping or not, `stepping` (_stepping) in the speed's place."""
    fields, group = SIGNAL_GROUPS[index]
    if group not in READS_ONLY_STEPPING:
        return tuple(prints[f] for f in fields)
    return tuple(stepping if f == "steps_per_second" else prints[f] for f in fields)


def _stepping(t: JobTimeline, length: int) -> Fingerprint:
    """Which of the first `length` minutes step (> 0), which do not (<= 0), which are neither
    (NaN): what the READS_ONLY_STEPPING groups read of steps_per_second."""
    steps = t.steps_per_second[:length]
    return _fingerprint([v > 0 for v in steps]) + _fingerprint([v <= 0 for v in steps])


def _remember(key: tuple, value: list) -> list:
    if len(_GROUPS) >= _GROUPS_MAX:
        _GROUPS.clear()
    _GROUPS[key] = value
    return value


def _healthy_groups(healthy: JobTimeline, prints: dict) -> list[HealthyGroup]:
    """Per group, the healthy job's series with their Prefixes (one per distinct list of
    samples: the step count is the step total, buckets repeat)."""
    length = healthy.minutes + 1
    groups = []
    distinct: dict[object, Prefixes] = {}
    progress = None
    stepping = _stepping(healthy, length)
    for index, (_, group) in enumerate(SIGNAL_GROUPS):
        key = ("healthy", index, length, _bound(healthy, index))
        key += _key_prints(index, prints, stepping)
        encoded = _GROUPS.get(key)
        if encoded is None:
            progress = progress or progress_once(healthy)
            encoded = _remember(
                key,
                [
                    (name, extra, _prefixes(values, distinct))
                    for name, extra, values in group(healthy, progress)
                ],
            )
        groups.append(encoded)
    return groups


def _prefixes(values: list, distinct: dict[object, Prefixes]) -> Prefixes:
    """The healthy encoding of `values`, shared with an equal list's."""
    key = _fingerprint(values)
    prefixes = distinct.get(key)
    if prefixes is None:
        prefixes = distinct[key] = Prefixes(values)
    return prefixes


Fingerprint = bytes | bool


def _fingerprints(
    t: JobTimeline, length: int, fields: set[str] | None = None
) -> dict[str, Fingerprint]:
    """Each field a group reads (of `fields` only, when given), by the exact samples of its
    first `length` minutes."""
    prints = {}
    for name in _FIELDS if fields is None else [f for f in _FIELDS if f in fields]:
        value = getattr(t, name)
        if isinstance(value, list):
            value = _fingerprint(value if len(value) == length else value[:length])
        prints[name] = value
    return prints


def _starts(whole: Fingerprint, first: Fingerprint) -> bool:
    """Whether `first`, a field's first samples fingerprinted, is of `whole`'s first samples
    (the same field over at least as many minutes). Without fingerprinting `whole`'s prefix:
    marshal writes a list as "[", its length in 4 bytes, then each item, each item's bytes
    telling where they end; so the items' bytes of the prefix start those of the whole."""
    if type(whole) is not bytes or type(first) is not bytes:
        return whole == first  # (a field that is one value, not a list)
    return whole.startswith(memoryview(first)[5:], 5)


def _fingerprint(values: list) -> bytes:
    """What tells a timeline field's values apart exactly, hashable: == alone takes 0.0 for
    -0.0, which a series passed on as is (a loss) writes as "-0"."""
    return exact_key(values)
