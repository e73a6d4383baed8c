"""What the culprit scenarios (scenarios_culprit.py) change in a tick: a slow host's ranks do
more own work per step, and a rank stuck in its data loader idles its GPU."""

from __future__ import annotations

import random
from collections.abc import Sequence

from .cluster import Node, Rank
from .scenarios import Conditions


def host_factors(c: Conditions, nodes: Sequence[Node]) -> dict[int, float]:
    """{node index: own-work factor} of the slow hosts (none when healthy)."""
    return {nodes[n].index: factor for n, factor in c.slow_hosts}


def pace(factors: dict[int, float]) -> float:
    """How much longer the job's compute takes: the slowest rank's own work sets the step."""
    return max(1.0, *factors.values()) if factors else 1.0


def own_work(
    factors: dict[int, float], node: int, seconds: float, wait: float, rng: random.Random
) -> float | None:
    """A rank's own work in a step of `seconds` (`wait`: its data-wait share); None without a
    slow host (then the instrumentation's default, step time less data wait, is the truth).

    The slow host's ranks set the pace; the others do their usual work, then wait in the
    collectives for them (that wait is not own work). 1% noise per rank and step.
    """
    if not factors:
        return None
    compute = seconds * (1.0 - wait) * factors.get(node, 1.0) / pace(factors)
    return compute * (1.0 + rng.uniform(-0.01, 0.01))


def stuck_ranks(c: Conditions, ranks: Sequence[Rank]) -> set[int]:
    """The ranks (numbers) whose data wait never ends."""
    return {ranks[r].rank for r in c.data_stuck}


def open_data_waits(c: Conditions, ranks: Sequence[Rank]) -> None:
    """At onset: each stuck rank enters a data wait it never leaves, as a loop blocked in
    `with metrics.data_wait(): next(loader)` does (its open wait then grows in real time)."""
    for r in c.data_stuck:
        ranks[r].metrics.data_wait().__enter__()
