"""The context managers TrainingMetrics hands out (step and data-wait timers, phase, activity
and checkpoint scopes) and the gauge child it creates on first set."""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any, Protocol

from prometheus_client import Gauge

from .ownwork import OwnWork
from .timeaccount import TimeAccount


class _Metrics(Protocol):
    """What the scopes call back on TrainingMetrics (a protocol: metrics.py imports this module)."""

    own: OwnWork

    def observe_step(
        self,
        seconds: float,
        tokens: float = 0,
        samples: float = 0,
        timestamp: float | None = None,
        own_work: float | None = None,
    ) -> None: ...
    def step_failed(self) -> None: ...
    def checkpoint_saved(self, timestamp: float | None = None) -> None: ...
    def phase(self, name: str) -> PhaseScope: ...


class StepTimer:
    """`with metrics.step(...)`: a plain class, cheaper than a generator context manager."""

    __slots__ = ("_blocked", "_metrics", "_samples", "_start", "_tokens")

    def __init__(self, metrics: _Metrics, tokens: float, samples: float) -> None:
        self._metrics = metrics
        self._tokens = tokens
        self._samples = samples
        self._start = 0.0
        self._blocked = 0.0

    def __enter__(self) -> StepTimer:
        # Own work is the block's time less what blocked inside it (ownwork.py).
        self._blocked = self._metrics.own.blocked
        self._start = time.perf_counter()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None:
            # The exception still propagates; the loop decides whether to retry or die.
            self._metrics.step_failed()
            return
        seconds = time.perf_counter() - self._start
        own = seconds - (self._metrics.own.blocked - self._blocked)
        self._metrics.observe_step(seconds, self._tokens, self._samples, None, own)


class WaitTimer:
    __slots__ = ("_account", "_counter", "_own", "_start")

    def __init__(self, counter: Any, account: TimeAccount, own: OwnWork) -> None:
        self._counter = counter
        self._account = account
        self._own = own
        self._start = 0.0

    def __enter__(self) -> WaitTimer:
        self._start = time.perf_counter()
        self._account.waiting_since = self._start  # a hung loader shows while it hangs
        return self

    def __exit__(self, *exc: object) -> None:
        # Counted even when the loader raised: the time was spent waiting either way.
        waited = time.perf_counter() - self._start
        self._account.waiting_since = 0.0
        self._counter.inc(waited)
        self._account.wait_seconds += waited
        self._own.blocked += waited


class PhaseScope:
    """Returned by phase(): ignore it, or use it in `with` to restore the previous phase."""

    __slots__ = ("_metrics", "_previous")

    def __init__(self, metrics: _Metrics, previous: str) -> None:
        self._metrics = metrics
        self._previous = previous

    def __enter__(self) -> PhaseScope:
        return self

    def __exit__(self, *exc: object) -> None:
        self._metrics.phase(self._previous)


class ActivityScope:
    """Accounts the block's time to one activity, then back to what the phase asks for."""

    __slots__ = ("_account", "_activity", "_previous")

    def __init__(self, account: TimeAccount, activity: str) -> None:
        self._account, self._activity, self._previous = account, activity, "startup"

    def __enter__(self) -> ActivityScope:
        self._previous = self._account.switch(self._activity)
        return self

    def __exit__(self, *exc: object) -> None:
        self._account.switch(self._previous)


class CheckpointScope:
    __slots__ = ("_metrics", "_scope")

    def __init__(self, metrics: _Metrics) -> None:
        self._metrics = metrics
        self._scope: PhaseScope | None = None

    def __enter__(self) -> CheckpointScope:
        self._scope = self._metrics.phase("checkpoint")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if self._scope is not None:
            self._scope.__exit__()
        if exc_type is None:
            self._metrics.checkpoint_saved()


class LazyGauge:
    """A labelled gauge child created on first set: absent until then (never a 0)."""

    __slots__ = ("_child", "_family", "_values", "value")

    def __init__(self, family: Gauge, values: list[str]) -> None:
        self._family, self._values = family, values
        self._child: Any = None
        self.value: float | None = None

    def set(self, value: float) -> None:
        if self._child is None:
            self._child = self._family.labels(*self._values)
        self._child.set(value)
        self.value = value

    def set_max(self, value: float) -> None:
        """Set unless a newer time is already there (a restore never moves time back)."""
        if self.value is None or self.value < value:
            self.set(value)
