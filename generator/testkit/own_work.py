"""One rank's own work over a job timeline, as the straggler rules read it
(generator/signals/straggler.py): its own-work counter, step seconds and start time.

The straggler tests (generator/rules/straggler_tests.py) give ~20 ranks their own work over a
few long timelines per spec, the same in every job of one shape: the samples are kept across
specs in a bounded memo keyed on exactly what they follow from (README, "Generating a fleet's
specs"), not worked out minute by minute again for each spec.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice, repeat
from operator import gt

from trainsignals.generator.signals.straggler import OWN_WORK, STARTED, STEP_SECONDS
from trainsignals.generator.testkit.faults import JobTimeline
from trainsignals.generator.testkit.input_series import RawSeries
from trainsignals.generator.testkit.job_series import HEALTHY_OWN_SHARE, incarnations
from trainsignals.generator.testkit.series_notation import exact_key

Samples = tuple[tuple[str, list], ...]  # (series name, samples) of one rank


class OwnWork:
    """The own work of ranks over one built timeline (read once: build it before)."""

    def __init__(self, t: JobTimeline) -> None:
        self._t = t
        end = t.minutes + 1
        # Everything the samples follow from besides a rank's factor: whether each minute
        # steps (only that of the speed: `rate > 0`), its data wait, the start times, the
        # outage (cut out, counters restarting) and the length; each field's exact bits.
        steps = islice(t.steps_per_second, 1, end)
        self._key = (
            end,
            t.outage,
            bytes(map(gt, steps, repeat(0))),
            exact_key(t.data_wait_share[1:end]),
            exact_key(t.process_start),
        )

    def samples(self, factor: Sequence[float]) -> Samples:
        """A rank's series doing `factor[m]` times a healthy rank's own work in minute m
        (job_series; the job's pauses and outages are everyone's, and so are its steps:
        synchronous ranks step together). Shared: callers copy before they bend them."""
        key = (*self._key, exact_key(factor[1 : self._key[0]]))
        samples = _MEMO.get(key)
        if samples is None:
            if len(_MEMO) >= _MEMO_MAX:
                _MEMO.clear()
            samples = _MEMO[key] = _samples(self._t, factor)
        return samples

    def series(self, labels: dict[str, str], factor: Sequence[float]) -> list[RawSeries]:
        """samples(factor) as the series of the rank with these labels (beyond the job's)."""
        rank = {**self._t.ctx.spec.selector_labels, **labels}
        return [RawSeries(name, rank, [*values]) for name, values in self.samples(factor)]


# (the timeline's key, a factor's exact bits) -> samples. A spec adds ~20; cleared past the
# bound (a fleet's jobs come in a few shapes, and a miss only costs the samples).
_MEMO: dict[tuple, Samples] = {}
_MEMO_MAX = 512


def own_work_series(
    t: JobTimeline, labels: dict[str, str], factor: Sequence[float]
) -> list[RawSeries]:
    """One rank's own-work counter, step seconds and start time over a built job timeline
    (OwnWork.samples), with these labels beyond the job's."""
    return OwnWork(t).series(labels, factor)


def _samples(t: JobTimeline, factor: Sequence[float]) -> Samples:
    total, values, stepped, steps = 0.0, [0.0], 0.0, [0.0]
    end = t.minutes + 1
    minutes = zip(
        islice(t.steps_per_second, 1, end),
        islice(t.data_wait_share, 1, end),
        islice(factor, 1, end),
        strict=False,
    )
    # A minute's increment follows from its data wait and factor: worked out again only where
    # they are other objects than the last minute's (runs of minutes share them).
    wait_then = factor_then = None
    increment = 0.0
    for rate, wait, f in minutes:
        if rate > 0:
            if wait is not wait_then or f is not factor_then:
                own = 60 * HEALTHY_OWN_SHARE * (1 - wait) * f
                increment = round(own * 64) / 64  # exact in binary floating point (job_series)
                wait_then, factor_then = wait, f
            total += increment
            stepped += 60.0
        values.append(total)
        steps.append(stepped)
    return tuple(
        (name, incarnations(t, name, series))
        for name, series in (
            (OWN_WORK, values),
            (STEP_SECONDS, steps),
            (STARTED, [*t.process_start]),
        )
    )
