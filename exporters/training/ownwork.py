"""Each rank's own work: its step time less data wait and time blocked in collectives.

In synchronous training every rank has the same step time: the slowest rank's own work sets
it and the others wait for it in the collectives. So step time says nothing about which rank
is slow; own work does. The loop marks collective waits with `metrics.collective_wait()`
(around `dist.all_reduce(...)`, a pipeline `recv`, a `barrier()`); without marks own work is
step time less data wait (the HF and Lightning callbacks: a rank whose loader or host is slow
still shows).
"""

from __future__ import annotations

import time
from typing import Any


class OwnWork:
    """The running sum of blocked seconds, and the counter a step's own work goes to."""

    __slots__ = ("_at_step", "_counter", "blocked")

    def __init__(self, counter: Any) -> None:
        self._counter = counter
        self.blocked = 0.0  # data wait + collective wait, ever
        self._at_step = 0.0  # `blocked` when the last step ended

    def step(self, seconds: float, own_work: float | None = None) -> None:
        """A step of `seconds` ended: its own work is `own_work`, or (None) `seconds` less
        what blocked since the previous step ended. Never negative (a wait timed outside the
        step's block cannot make it so)."""
        if own_work is None:
            own_work = seconds - (self.blocked - self._at_step)
        self._at_step = self.blocked
        if own_work > 0:
            self._counter.inc(own_work)

    def skip(self) -> None:
        """A step failed: what blocked during it belongs to no step."""
        self._at_step = self.blocked


class CollectiveTimer:
    """`with metrics.collective_wait():` time blocked in a collective (not own work)."""

    __slots__ = ("_own", "_start")

    def __init__(self, own: OwnWork) -> None:
        self._own = own
        self._start = 0.0

    def __enter__(self) -> CollectiveTimer:
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self._own.blocked += time.perf_counter() - self._start
