"""What the benches print their timings against, so two runs of `make bench` agree.

This machine's speed swings by up to 1.8x within minutes (the reference loop below took 79 ms,
then 144, then 81 on an idle machine), and a shared 2-core box adds other processes' bursts.
So a bench does not print the milliseconds it measured: it measures the reference loop around
each measurement and prints the time the measurement would have taken on the README's machine,
where the loop takes REFERENCE_MS (`RoundSpeed`). A figure then moves when the code's cost
moves, much less when the machine's speed does: for the CPU-bound exporter and
instrumentation, not for work that waits on memory (the generator, Prometheus), whose speed
this loop follows only partly. Figures made of many samples print a median of
rounds, not one round's tail or a difference of two nearby timings.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

# The loop's cost on the README's machine (README, "Generating a fleet's specs").
REFERENCE_MS = 37.0


def reference_ms(repeats: int = 3) -> float:
    """A fixed pure-Python workload (string building and dict lookups, as the generator does),
    the median of `repeats`, in CPU milliseconds. The median, not the best: what it scales
    ran through the same neighbours' bursts, not only the quietest moment between them."""
    runs = []
    for _ in range(repeats):
        started = time.process_time()
        memo: dict[str, str] = {}
        for i in range(200_000):
            key = f'series{{node="node-{i % 64}",rank="{i % 512}"}}'
            memo[key] = memo.get(key, "") or key.replace('"', "'")
        runs.append(time.process_time() - started)
    return statistics.median(runs) * 1000


class RoundSpeed:
    """The factor that turns consecutive measurements' timings into the README machine's:
    REFERENCE_MS over the loop's cost timed just before and just after each (the loop after
    one measurement is the loop before the next)."""

    def __init__(self) -> None:
        self._before = reference_ms()

    def factor(self) -> float:
        """The factor of the measurement since the last call (or since this was made)."""
        after = reference_ms()
        factor = REFERENCE_MS / ((self._before + after) / 2)
        self._before = after
        return factor


def median_at_reference(one_round: Callable[[], dict[str, float]], rounds: int) -> dict[str, float]:
    """Each figure of `one_round` (a dict of timings) at the README machine's speed, the median
    over `rounds` rounds, each scaled by the loop measured just before and after it: a round
    lasts a fraction of a second, so its factor is the speed it ran at. One round's p99 is its
    two or three slowest samples, which one scheduler hiccup sets; the median round's is the
    code's."""
    collected: dict[str, list[float]] = {}
    speed = RoundSpeed()
    for _ in range(rounds):
        figures = one_round()
        factor = speed.factor()
        for key, value in figures.items():
            collected.setdefault(key, []).append(value * factor)
    return {key: statistics.median(values) for key, values in collected.items()}
