"""promtool tests of the goodput recording rules, and the goodput series of the test jobs.

The expected values come from the test's own minute-by-minute timeline (what each minute was
spent on, which steps were new progress), never from the PromQL being tested. Values are
compared within 1e-9 (an `abs(...) < bool 1e-9` query), as the ratios are not exact binary
fractions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from itertools import accumulate, groupby, repeat

from trainsignals.exporters.training.timeaccount import ACTIVITIES
from trainsignals.generator.signals.goodput import CATEGORIES, badput_name, goodput_name
from trainsignals.generator.signals.promql import RuleContext, matchers
from trainsignals.generator.testkit.input_series import RawSeries
from trainsignals.generator.testkit.series_notation import encode

PHASE_ACTIVITY = {
    "startup": "startup",
    "eval": "eval",
    "checkpoint": "checkpoint_save",
    "done": "other",
    "stopping": "other",
}
DATA_WAIT = 3.0  # seconds of each training minute spent waiting for data
STEPS_PER_MINUTE = 10
RANKS = 2
TOLERANCE = 1e-9


def activity_seconds(phase: str, steps: float, data_wait_share: float) -> dict[str, float]:
    """What one minute of a JobTimeline phase adds to each activity counter."""
    if phase in ("warmup", "train"):
        if steps <= 0:
            return {"other": 60.0}  # in phase train without completing a step: a hang
        wait = round(60.0 * data_wait_share * 64) / 64
        return {"train": 60.0 - wait, "data_wait": wait}
    return {PHASE_ACTIVITY[phase]: 60.0}


def timeline_series(
    labels: dict[str, str],
    phases: Sequence[str],
    steps_per_second: Sequence[float],
    data_wait_share: Sequence[float],
) -> list[RawSeries]:
    """Time counters of one rank of a JobTimeline (one process). (Its global step, which
    restores a checkpoint's after a restart, is job_series.progress_series'.)"""
    # A timeline runs in stretches of equal minutes: each stretch's seconds worked out once.
    added: dict[str, list[float]] = {a: [] for a in ACTIVITIES}
    minutes = zip(phases[1:], steps_per_second[1:], data_wait_share[1:], strict=True)
    for minute, stretch in groupby(minutes):
        length = len(list(stretch))  # (counted in C)
        seconds = activity_seconds(*minute)
        for activity, column in added.items():
            column += repeat(seconds.get(activity, 0.0), length)
    return [
        RawSeries(
            "trainsignals_time_seconds_total",
            {**labels, "activity": a},
            list(accumulate(added[a], initial=0.0)),
        )
        for a in ACTIVITIES
    ]


@dataclass(frozen=True)
class Minute:
    """What the job did in the minute ending at this sample; None: no process alive."""

    activity: str | None
    new_process: bool = False  # a process (re)started at the start of this minute
    restore_to_checkpoint: bool = False
    gone: bool = False  # no process and no target either (pods Pending): `up` has no series


def _minutes(spec: list[tuple[int, str | None]]) -> list[Minute]:
    out = [Minute("startup")]  # minute 0: the first sample, counters at 0
    previous: str | None = "startup"
    for count, activity in spec:
        for _ in range(count):
            restart = previous is None and activity is not None
            out.append(Minute(activity, new_process=restart, restore_to_checkpoint=restart))
            previous = activity
    return out


def healthy_minutes() -> list[Minute]:
    """Start-up 5m, training with a 3m checkpoint each hour and a 10m eval at 1h30."""
    return _minutes(
        [
            (5, "startup"),
            (55, "train"),
            (3, "checkpoint_save"),
            (27, "train"),
            (10, "eval"),
            (20, "train"),
            (3, "checkpoint_save"),
            (57, "train"),
        ]
    )


def restart_minutes() -> list[Minute]:
    """The healthy job crashes at 1h40 (37m after its checkpoint), is down 4m, restarts:
    3m start-up, 2m restoring the checkpoint, then 37m redoing lost steps before progress."""
    return _minutes(
        [
            (5, "startup"),
            (55, "train"),
            (3, "checkpoint_save"),
            (37, "train"),
            (4, None),
            (3, "startup"),
            (2, "checkpoint_restore"),
            (60, "train"),
        ]
    )


def dead_minutes() -> list[Minute]:
    """The healthy job's first hour, then its pods Pending for two hours: no rank target at
    all (issue 26, 1). The dead hours are wall time, all of it recovery."""
    return [*_minutes([(5, "startup"), (55, "train")]), *repeat(Minute(None, gone=True), 120)]


@dataclass
class Replay:
    """Counters and ground truth of a Minute list, for RANKS identical ranks."""

    minutes: list[Minute]

    def __post_init__(self) -> None:
        self.counters: dict[str, list[float | None]] = {a: [] for a in ACTIVITIES}
        self.steps: list[float | None] = []
        self.global_step: list[float | None] = []
        self.truth: list[str] = []  # the category of each minute (index 0: none)
        self.process_start: list[float | None] = []
        totals = dict.fromkeys(ACTIVITIES, 0.0)
        steps_total = step = high_water = checkpoint = started = 0
        for index, minute in enumerate(self.minutes):
            if minute.new_process:
                totals = dict.fromkeys(ACTIVITIES, 0.0)
                steps_total = 0
                started = 60 * (index - 1)  # at the start of this minute
            if minute.restore_to_checkpoint:
                step = checkpoint
            category = minute.activity or "recovery"
            if minute.activity == "train":
                totals["train"] += 60.0 - DATA_WAIT
                totals["data_wait"] += DATA_WAIT
                steps_total += STEPS_PER_MINUTE
                step += STEPS_PER_MINUTE
                category = "train" if step > high_water else "lost_progress"
                high_water = max(high_water, step)
            elif minute.activity is not None:
                totals[minute.activity] += 60.0
                if minute.activity == "checkpoint_save":
                    checkpoint = step
            self.truth.append(category)
            alive = minute.activity is not None
            for a in ACTIVITIES:
                self.counters[a].append(totals[a] if alive else None)
            self.steps.append(float(steps_total) if alive else None)
            self.global_step.append(float(step) if alive else None)
            self.process_start.append(float(started) if alive else None)
        self.truth[0] = "none"
        self.up = [None if m.gone else 0.0 if m.activity is None else 1.0 for m in self.minutes]
        # Its series encoded once: they are the same for every spec (_replays keeps them).
        own = (*self.counters.values(), self.steps, self.global_step, self.up, self.process_start)
        self._encoded = {id(values): encode(values) for values in own}

    def encoded(self, values: list) -> str:
        """encode(values), looked up for this replay's own lists of samples."""
        text = self._encoded.get(id(values))  # its lists live as long as it does
        return encode(values) if text is None else text

    def shares(self, end: int, length: int = 60) -> dict[str, float]:
        """Ground truth over the minutes (end - length, end]: goodput and every category."""
        window = self.truth[end - length + 1 : end + 1]
        out = {c: 0.0 for c in ("goodput", *CATEGORIES)}
        for category in window:
            if category == "train":
                out["goodput"] += 57 / 3600  # its data wait is badput
                out["data_wait"] += 3 / 3600
            elif category == "lost_progress":
                out["lost_progress"] += 57 / 3600
                out["data_wait"] += 3 / 3600
            else:
                out[category] += 60 / 3600
        return out

    def series(self, ctx: RuleContext) -> list[RawSeries]:
        spec = ctx.spec
        series = []
        for rank in range(RANKS):
            labels = {**spec.selector_labels, "node": "node-0", "rank": str(rank)}
            for a in ACTIVITIES:
                series.append(
                    RawSeries(
                        "trainsignals_time_seconds_total",
                        {**labels, "activity": a},
                        self.counters[a],
                    )
                )
            series.append(RawSeries("trainsignals_steps_total", labels, self.steps))
            series.append(RawSeries("trainsignals_global_step", labels, self.global_step))
            series.append(
                RawSeries("trainsignals_process_start_time_seconds", labels, self.process_start)
            )
            series.append(RawSeries("up", {**labels, "job": spec.scrape_jobs.training}, self.up))
        return series


def _close(expr: str, expected: float, labels: dict[str, str]) -> dict:
    return {
        "expr": f"abs({expr} - {expected!r}) < bool {TOLERANCE:g}",
        "labels": matchers(labels),
    }


def _checks(ctx: RuleContext, replay: Replay, end: int) -> list[dict]:
    shares = replay.shares(end)
    job = ctx.job_label
    r = ctx.recorded()
    checks = [_close(f"{goodput_name('1h')}{r}", shares["goodput"], job)]
    for category in CATEGORIES:
        checks.append(
            _close(
                f"sum without (category) ({badput_name('1h')}{ctx.recorded(category=category)})",
                shares[category],
                job,
            )
        )
    badput = f"sum by (training_job) ({badput_name('1h')}{r})"
    total = f"({goodput_name('1h')}{r} + on (training_job) {badput})"
    checks.append(_close(total, 1.0, job))
    return [
        {
            "expr": c["expr"],
            "eval_time": f"{end}m",
            "exp_samples": [{"labels": c["labels"], "value": 1}],
        }
        for c in checks
    ]


@cache  # the same replays for every spec: replayed and encoded once
def _replays() -> tuple[Replay, Replay, Replay]:
    return Replay(healthy_minutes()), Replay(restart_minutes()), Replay(dead_minutes())


def goodput_tests(ctx: RuleContext) -> list[dict]:
    healthy, restart, dead = _replays()
    return [
        _case(
            ctx,
            "goodput: a healthy job's goodput is its time in steps; the pauses are badput",
            healthy,
            (120, 180),
        ),
        _case(
            ctx,
            "goodput: a restart moves time to recovery, start-up, restore, lost progress",
            restart,
            (160, 169),
        ),
        _case(
            ctx,
            "goodput: hours with no rank target at all (pods Pending) are recovery",
            dead,
            (150, 180),
        ),
    ]


def _case(ctx: RuleContext, name: str, replay: Replay, minutes: tuple[int, ...]) -> dict:
    """One promtool test group: the replay's series, checked at each of `minutes`."""
    return {
        "name": name,
        "interval": "1m",
        "input_series": [
            {"series": s.selector(), "values": replay.encoded(s.values)}
            for s in replay.series(ctx)
        ],
        "promql_expr_test": [check for at in minutes for check in _checks(ctx, replay, at)],
    }
