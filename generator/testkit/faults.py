"""The fault vocabulary of the generated promtool tests: a healthy job, minute by minute, and
the ways an alert's definition bends it (generator/alerts/definitions/ names one fault per alert).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from trainsignals.generator.signals.healthy_job import (
    HEALTHY_DATA_WAIT,
    Pattern,
    healthy_pattern,
    healthy_phase,
)
from trainsignals.generator.signals.promql import RuleContext

# A healthy job runs close to its step-time bound: 3% of its steps are slower than the bound
# (p95 under it), the rest between half the bound and the bound.
HEALTHY_SLOW_STEPS = 0.03
FAULT_ONSET = 40  # minutes: startup and warm-up are over, the job trains


@dataclass
class JobTimeline:
    """Per-minute state of a healthy job, which a fault then bends."""

    ctx: RuleContext
    minutes: int
    fault: Callable[[JobTimeline, int], None] | None = None
    # Per-minute values, filled by build().
    phase: list[str] = field(default_factory=list)
    tokens_per_second: list[float] = field(default_factory=list)
    steps_per_second: list[float] = field(default_factory=list)
    # Share of steps slower than the step-time bound: they take 3x the bound, the rest 0.75x.
    slow_step_share: list[float] = field(default_factory=list)
    data_wait_share: list[float] = field(default_factory=list)
    loss: list[float | None] = field(default_factory=list)
    nonfinite_per_minute: list[float] = field(default_factory=list)
    dropped_per_minute: list[float] = field(default_factory=list)
    checkpoint_ok: list[bool] = field(default_factory=list)
    disk_free_ratio: list[float] = field(default_factory=list)
    process_start: list[float] = field(default_factory=list)  # this incarnation's start time
    # False: the ranks were started without TRAINSIGNALS_STEP_TIME_BOUND_SECONDS, so their
    # step histograms have only the instrumentation's default buckets, none at the bound.
    bound_bucket: bool = True
    # (first, last) minute with every rank gone; None: the job runs throughout. Counters of the
    # incarnation after it start again from zero, as a restarted process's do.
    outage: tuple[int, int] | None = None
    # Minute the job finished cleanly (phase "done"); its ranks' series end after it.
    completed: int | None = None

    @property
    def step_time_bound(self) -> float:
        return self.ctx.spec.objectives.step_time_max_seconds or 2.0

    @property
    def healthy_tokens(self) -> float:
        """Job tokens/s at 1.5x the MFU floor (0 for step-based specs)."""
        shape = self.ctx.spec.shape
        if shape.model_flops_per_token is None:
            return 0.0
        return (
            1.5
            * self.ctx.spec.objectives.mfu_min_ratio
            * shape.peak_flops
            / (shape.model_flops_per_token)
        )

    @property
    def healthy_steps(self) -> float:
        shape = self.ctx.spec.shape
        if shape.model_flops_per_step is None:
            return 1.0 / (0.8 * self.step_time_bound)
        return (
            1.5
            * self.ctx.spec.objectives.mfu_min_ratio
            * shape.peak_flops
            / (shape.model_flops_per_step)
        )

    def build(self) -> JobTimeline:
        count = self.minutes + 1
        # Column by column: every value of a minute follows from its phase alone (and the loss
        # from the minute), as when this was one loop over the minutes.
        pattern = healthy_pattern(self.ctx.spec.cadence)
        self.phase += _healthy_phases(count, pattern)
        self.tokens_per_second += _at_speed(self.healthy_tokens, count, pattern)
        self.steps_per_second += _at_speed(self.healthy_steps, count, pattern)
        self.slow_step_share += [HEALTHY_SLOW_STEPS] * count
        self.data_wait_share += _at_speed(HEALTHY_DATA_WAIT, count, pattern, flat=True)
        self.loss += _healthy_loss(count)
        self.nonfinite_per_minute += [0.0] * count
        self.dropped_per_minute += [0.0] * count
        self.checkpoint_ok += [True] * count
        self.disk_free_ratio += [0.5] * count
        self.process_start += [0.0] * count
        if isinstance(self.fault, FromOnset):
            # Its change applied from the onset on, without a call per healthy minute before.
            for minute in range(self.fault.onset, self.minutes + 1):
                self.fault.change(self, minute)
        elif self.fault:
            for minute in range(self.minutes + 1):
                self.fault(self, minute)
        return self

    def first(self, length: int) -> JobTimeline:
        """The timeline's first `length` minutes (every series is a prefix: none looks ahead)."""
        columns = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        cut = {name: value[:length] for name, value in columns.items() if isinstance(value, list)}
        return dataclasses.replace(self, minutes=length - 1, **cut)


# Phases a job steps in, and its speed there (warm-up runs at 0.6x).
_SPEED = {"warmup": 0.6, "train": 1.0}


# The healthy phases and loss of the first `count` minutes: the same for every spec of one
# cadence, asked for at a few dozen lengths (one per test): each length computed once.
@lru_cache(maxsize=256)
def _healthy_phases(count: int, pattern: Pattern) -> tuple[str, ...]:
    return tuple(healthy_phase(minute, pattern) for minute in range(count))


def _at_speed(rate: float, count: int, pattern: Pattern, flat: bool = False) -> tuple[float, ...]:
    """Per healthy minute: `rate` times its phase's speed (`flat`: times 1) while stepping,
    else 0. A spec's tests ask for a few dozen lengths of its own rates: each rate is worked
    out once, at the longest length asked for yet, and a shorter column is its prefix."""
    key = (rate, pattern, flat)
    column = _COLUMNS.get(key)
    if column is None or len(column) < count:
        phases = _healthy_phases(count, pattern)
        if flat:
            column = tuple([rate if p in _SPEED else 0.0 for p in phases])
        else:
            column = tuple([rate * _SPEED[p] if p in _SPEED else 0.0 for p in phases])
        if len(_COLUMNS) >= _COLUMNS_MAX:
            _COLUMNS.clear()
        _COLUMNS[key] = column
    return column if len(column) == count else column[:count]


# (rate, pattern, flat) -> _at_speed's longest column yet; cleared past the bound (a spec adds
# two or three rates, and a miss only costs the column).
_COLUMNS: dict[tuple[float, Pattern, bool], tuple[float, ...]] = {}
_COLUMNS_MAX = 256


@lru_cache(maxsize=256)
def _healthy_loss(count: int) -> tuple[float | None, ...]:
    return tuple(2 + 8 / math.sqrt(minute + 10) if minute >= 5 else None for minute in range(count))


def restart(t: JobTimeline, first: int, last: int, startup: int = 2) -> None:
    """Every rank dies at `first`, is gone until `last`, then a new incarnation starts up."""
    t.outage = (first, last)
    for m in range(first, t.minutes + 1):
        t.process_start[m] = (last + 1) * 60.0
        if m <= last + startup:
            t.phase[m] = "startup"
            t.tokens_per_second[m] = t.steps_per_second[m] = t.data_wait_share[m] = 0.0


GPU_HEALTHY = {
    "up": 1,
    "utilization": 0.95,
    "memory_used_ratio": 0.75,
    "temperature": 65.0,
    "sm_clock": 1.98e9,  # hertz: an H100's boost clock under load
    "thermal_throttle": 0,
    "power_throttle": 0,
    "ecc_uncorrected": 0,
    "remapped_rows_pending": 0,
    "remapped_rows_failed": 0,
    "nvml_errors": 0,
}


@dataclass(frozen=True)
class FaultCase:
    """How to break the healthy job so one alert must fire, and when to look."""

    alert: str  # filled in from the definition
    fires_after: int  # minutes after onset at which the alert must be firing
    labels: tuple[str, ...] = ()  # labels the alert carries beyond the job's own
    job_fault: Callable[[JobTimeline, int], None] | None = None
    targets_down: Callable[[str, str, int], bool] | None = None
    gpu_overrides: dict[str, Callable[[int], float | None]] | None = None
    onset: int = FAULT_ONSET
    extra_labels: dict[str, str] = field(default_factory=dict)
    what: str = "on its fault"  # names the test when an alert has several faults
    # Minutes after fires_after the alert must keep firing without a break: an intermittent
    # fault is one incident, one page episode (keep_firing_for).
    holds_for: int = 0
    # Input series beyond the job's, targets' and GPUs' (node_exporter's InfiniBand ports):
    # (ctx, minutes) -> list of RawSeries.
    raw_series: Callable[..., list] | None = None
    # False: a quiet case: the alert must never be pending or firing over the whole test
    # (healthy hardware that differs a little from its peers, everyone idle together).
    fires: bool = True


def after(onset: int, value: float | None, before: float | None = None):
    """A GPU signal that is `before` until `onset`, then `value`."""
    return lambda m: value if m >= onset else before


@dataclass(frozen=True, eq=False)
class FromOnset:
    """A job fault that changes every minute from `onset` on and leaves the minutes before it
    healthy (JobTimeline.build starts it at its onset). Called, it is a fault like any other."""

    change: Callable[[JobTimeline, int], None]
    onset: int = FAULT_ONSET

    def __call__(self, t: JobTimeline, m: int) -> None:
        if m >= self.onset:
            self.change(t, m)


def from_onset(change: Callable[[JobTimeline, int], None], onset: int = FAULT_ONSET) -> FromOnset:
    """A job fault applied to every minute from `onset` on."""
    return FromOnset(change, onset)


def stall(t: JobTimeline, m: int) -> None:
    """A hung job: it says it trains, but no step completes."""
    t.phase[m] = "train"
    t.tokens_per_second[m] = t.steps_per_second[m] = t.data_wait_share[m] = 0.0


def slow(t: JobTimeline, m: int) -> None:
    """A fifth of the healthy throughput."""
    t.tokens_per_second[m] *= 0.2
    t.steps_per_second[m] *= 0.2
