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
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

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
}
_CLOSED = ("startup", "train", "checkpoint_save", "checkpoint_restore", "eval", "other")


class TimeAccount:
    """Clock time per activity since `start`, plus the hot path's running sums."""

    def __init__(self, clock: Callable[[], float], start: float) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._closed = dict.fromkeys(_CLOSED, 0.0)
        self._activity = "startup"
        self._wanted = "startup"  # what the phase asks for; startup lasts until the first step
        self._since = start
        # Written by the training loop without a lock (float adds), read under the lock.
        self.step_seconds = 0.0
        self.wait_seconds = 0.0
        self.steps = 0
        self.stepped = False
        self._train_step = self._train_wait = 0.0  # closed train intervals
        self._mark_step = self._mark_wait = 0.0
        self.step_base = 0  # global step = step_base + steps

    def switch(self, activity: str) -> str:
        """Account from now on to `activity`; returns the one it asked for before."""
        with self._lock:
            previous = self._wanted
            self._wanted = activity
            if not self.stepped and activity == "train":
                activity = "startup"  # time before the first step is start-up
            self._switch_locked(activity)
            return previous

    def first_step(self) -> None:
        """The first completed step ends start-up (the hot path calls this once)."""
        with self._lock:
            self.stepped = True
            wanted = "train" if self._wanted == "startup" else self._wanted
            if self._activity == "startup":
                self._switch_locked(wanted)
            self._wanted = wanted

    def _switch_locked(self, activity: str) -> None:
        if activity == self._activity:
            return
        now = self._clock()
        self._closed[self._activity] += max(0.0, now - self._since)
        if self._activity == "train":
            self._train_step += self.step_seconds - self._mark_step
            self._train_wait += self.wait_seconds - self._mark_wait
        if activity == "train":
            self._mark_step, self._mark_wait = self.step_seconds, self.wait_seconds
        self._activity, self._since = activity, now

    def snapshot(self) -> dict[str, float]:
        """Seconds per activity now; they add up to the time since start."""
        with self._lock:
            seconds = dict(self._closed)
            seconds[self._activity] += max(0.0, self._clock() - self._since)
            in_steps, waiting = self._train_step, self._train_wait
            if self._activity == "train":
                in_steps += self.step_seconds - self._mark_step
                waiting += self.wait_seconds - self._mark_wait
        train_time = seconds.pop("train")
        data_wait = min(max(waiting, 0.0), train_time)
        train = min(max(in_steps - waiting, 0.0), train_time - data_wait)
        seconds["train"] = train
        seconds["data_wait"] = data_wait
        seconds["other"] += train_time - data_wait - train
        return {a: seconds[a] for a in ACTIVITIES}

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
            "trainsignals_time_seconds",
            "Seconds of this process's life per activity (goodput accounting).",
            labels=[*self._names, "activity"],
        )
        for activity, seconds in self._account.snapshot().items():
            time_family.add_metric([*self._values, activity], seconds)
        yield time_family
        step = GaugeMetricFamily(
            "trainsignals_global_step",
            "The trainer's global step; back at the checkpoint's step after a restart.",
            labels=self._names,
        )
        step.add_metric(self._values, float(self._account.global_step))
        yield step

    def describe(self) -> list:
        return []
