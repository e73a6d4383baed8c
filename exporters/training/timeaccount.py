"""Time accounting for goodput: every second of a rank's life lands in exactly one activity.

Exported as `trainsignals_time_seconds_total{activity}` and computed when scraped, so the hot
path only adds floats (step seconds, data-wait seconds, a step count). Activities:

- startup: process start until the first completed step (imports, NCCL setup, compilation).
- checkpoint_restore: inside `checkpoint_restore()` (loading the checkpoint after a restart).
- train: inside completed steps, minus the data wait inside them.
- data_wait: waiting for the data loader while training.
- checkpoint_save: phase "checkpoint" (the blocking part of a save).
- eval: phase "eval".
- other: the rest of training time: between steps, and a step that never completes (a hang).

The step convention is the README's: data wait happens inside `step()`.
Also exported: `trainsignals_global_step`, the trainer's step number. It continues from the
checkpoint's step after a restart (`checkpoint_restore(step=N)` or `set_global_step(N)`), so it
goes back to that step: the steps between it and the previous high-water mark are redone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from trainsignals.metrics.training import help_text

# Catalogue names (trainsignals/metrics/training.py) of the series collected at scrape.
TIME_SECONDS = "trainsignals_time_seconds_total"
GLOBAL_STEP = "trainsignals_global_step"
WAIT_OPEN = "trainsignals_data_wait_open_seconds"

ACTIVITIES = (
    "startup",
    "train",
    "data_wait",
    "checkpoint_save",
    "checkpoint_restore",
    "eval",
    "other",
)
# Phases (the phase gauge) to the activity their time counts as.
PHASE_ACTIVITY = {
    "startup": "startup",
    "warmup": "train",
    "train": "train",
    "eval": "eval",
    "checkpoint": "checkpoint_save",
    "done": "other",  # after a clean finish, until the process exits
    "stopping": "other",  # after a planned stop was announced, until the process exits
}


class TimeAccount:
    """Clock time per activity since `start`; every exported value only ever grows.

    While training, the time since the last step's end is open: when the next step completes
    (`step_done`, with the timestamp the hot path already takes), the step's duration minus
    its data wait is train, the wait is data_wait, and the rest of the interval (between
    steps) is other. An open interval longer than `grace` (twice the last step, plus 1 s)
    shows as other right away, so a hang is visible while it lasts; the at most `grace`
    seconds still open are not exported yet.
    """

    def __init__(self, clock: Callable[[], float], start: float) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._seconds = dict.fromkeys(ACTIVITIES, 0.0)  # closed time, but for the three below
        self._train = self._wait = self._other = 0.0  # closed training intervals (hot path)
        self._activity = "startup"
        self._wanted = "startup"  # what the phase asks for; startup lasts until the first step
        self._since = start  # start of the open interval (since the last step, in train)
        self.wait_seconds = 0.0  # written by the training loop (float adds)
        # perf_counter() at the start of the data wait in progress, 0.0 when none (WaitTimer).
        self.waiting_since = 0.0
        self._wait_mark = 0.0
        self._grace = 60.0
        self.steps = 0
        self.stepped = False
        self.step_base = 0  # global step = step_base + steps

    def switch(self, activity: str) -> str:
        """Account from now on to `activity`; returns the one it asked for before."""
        with self._lock:
            previous = self._wanted
            self._wanted = activity
            if not self.stepped and activity == "train":
                activity = "startup"  # time before the first step is start-up
            self._switch_locked(activity, self._clock())
            return previous

    def _switch_locked(self, activity: str, now: float) -> None:
        if activity == self._activity:
            return
        elapsed = max(0.0, now - self._since)
        if self._activity == "train":
            self._other += elapsed  # train time after the last step (before a pause) is other
        else:
            self._seconds[self._activity] += elapsed
        self._activity, self._since, self._wait_mark = activity, now, self.wait_seconds

    def step_done(self, seconds: float, now: float) -> None:
        """A step of `seconds` ended at `now` (the hot path: one lock, a few float ops)."""
        with self._lock:
            self.steps += 1
            if self._activity != "train":
                if not self.stepped:  # the first step ends start-up
                    self.stepped = True
                    wanted = "train" if self._wanted in ("startup", "train") else self._wanted
                    self._wanted = wanted
                    if self._activity == "startup":
                        self._switch_locked(wanted, now)
                self._grace = 2.0 * seconds + 1.0
                return
            # Plain comparisons instead of min()/max(): this runs once per training step.
            interval = now - self._since
            if interval < 0.0:
                interval = 0.0
            other = interval - seconds
            late = interval - self._grace  # already exported as other
            if late > other:
                other = late
            if other < 0.0:
                other = 0.0
            room = interval - other
            wait = self.wait_seconds - self._wait_mark
            if wait > room:
                wait = room
            if wait < 0.0:
                wait = 0.0
            self._train += room - wait
            self._wait += wait
            self._other += other
            self._since, self._wait_mark = now, self.wait_seconds
            self._grace = seconds + seconds + 1.0

    def snapshot(self) -> dict[str, float]:
        """Seconds per activity now; they add up to the time since start, less the open
        part of a training interval (at most `grace`)."""
        with self._lock:
            seconds = dict(self._seconds)
            seconds["train"] += self._train
            seconds["data_wait"] += self._wait
            seconds["other"] += self._other
            elapsed = max(0.0, self._clock() - self._since)
            if self._activity == "train":
                seconds["other"] += max(0.0, elapsed - self._grace)
            else:
                seconds[self._activity] += elapsed
        return seconds

    @property
    def global_step(self) -> int:
        return self.step_base + self.steps

    def set_global_step(self, step: int) -> None:
        self.step_base = int(step) - self.steps


class TimeAccountCollector(Collector):
    """`trainsignals_time_seconds_total{activity}` and `trainsignals_global_step`, at scrape."""

    def __init__(self, account: TimeAccount, names: list[str], values: list[str]) -> None:
        self._account, self._names, self._values = account, names, values

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        time_family = CounterMetricFamily(
            TIME_SECONDS, help_text(TIME_SECONDS), labels=[*self._names, "activity"]
        )
        for activity, seconds in self._account.snapshot().items():
            time_family.add_metric([*self._values, activity], seconds)
        yield time_family
        step = GaugeMetricFamily(GLOBAL_STEP, help_text(GLOBAL_STEP), labels=self._names)
        step.add_metric(self._values, float(self._account.global_step))
        yield step
        # Hang attribution: one rank stuck in its data loader while its peers wait in the next
        # collective (generator/signals/hang_suspects.py).
        since = self._account.waiting_since
        waiting = GaugeMetricFamily(WAIT_OPEN, help_text(WAIT_OPEN), labels=self._names)
        waiting.add_metric(self._values, time.perf_counter() - since if since else 0.0)
        yield waiting

    def describe(self) -> list:
        return []
