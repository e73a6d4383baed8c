"""promtool tests of TrainingStraggler beyond its generated fault test: ranks that differ.

The healthy job's reporting ranks (job_series) all do the same work; these tests add ranks of
their own (own-work counter and start time, generator/alerts/definitions/straggler.py) that
differ from them: near the threshold (4% quiet, 6% fires), with noise, through a restart and
through a pause, and the healthy job whose ranks always differ a little (uneven data, the last
pipeline stage), which must stay quiet for hours.
"""

from __future__ import annotations

import random
from functools import lru_cache
from operator import mul

from trainsignals.generator.alerts.definitions.straggler import TRAINING_STRAGGLER
from trainsignals.generator.signals.promql import RuleContext, matchers
from trainsignals.generator.signals.straggler import (
    FOR_SECONDS,
    OWN_WORK,
    SMOOTHING,
    STARTED,
    STEP_SECONDS,
    straggler_enabled,
)
from trainsignals.generator.testkit.faults import FAULT_ONSET, JobTimeline, restart
from trainsignals.generator.testkit.input_series import RawSeries
from trainsignals.generator.testkit.job_series import HEALTHY_OWN_SHARE
from trainsignals.generator.testkit.own_work import OwnWork
from trainsignals.generator.testkit.test_inputs import TestInputs

# What the rules read of the reporting ranks: own work, step seconds, start time, time accounts
# (stepping).
_READS = frozenset({OWN_WORK, STEP_SECONDS, STARTED, "trainsignals_time_seconds_total"})
PEERS = 5  # extra healthy ranks: the median stays a healthy rank's with two odd ones
FIRES_AFTER = SMOOTHING // 60 + FOR_SECONDS // 60 + 3  # minutes after onset
Factor = list[float]  # per minute: own work relative to a healthy rank's


def _excess(cost: float) -> float:
    """The own-work factor that costs the job `cost` of its stepping time (data wait 2%)."""
    return 1 + cost / (HEALTHY_OWN_SHARE * 0.98)


def _rank(rank: int) -> dict[str, str]:
    """Extra ranks: rank r on node-r's first GPU (the reporting ranks are node-0's 0 and 1)."""
    return {"node": f"node-{rank}", "rank": str(rank), "local_rank": "0"}


def _ranks(t: JobTimeline, factors: dict[int, Factor]) -> list[RawSeries]:
    """PEERS healthy extra ranks (2..) plus the ranks of `factors` (rank -> factor)."""
    work = OwnWork(t)
    # The healthy extra ranks differ in their labels alone: their samples worked out once.
    healthy = work.samples([1.0] * (t.minutes + 1))
    series: list[RawSeries] = []
    for rank in range(2, 2 + PEERS):
        labels = {**t.ctx.spec.selector_labels, **_rank(rank)}  # as OwnWork.series labels
        series += [RawSeries(name, labels, values) for name, values in healthy]
    for rank, factor in factors.items():
        series += work.series(_rank(rank), factor)
    return series


def _alerts(ctx: RuleContext, rank: str | None = None, state: str | None = "firing") -> str:
    labels = {"alertname": TRAINING_STRAGGLER, "training_job": ctx.job}
    labels |= {"alertstate": state} if state else {}
    return "ALERTS" + matchers(labels | ({"rank": rank} if rank else {}))


def _test(name: str, inputs: TestInputs, t: JobTimeline, factors: dict, checks: list) -> dict:
    return {
        "name": f"{TRAINING_STRAGGLER} {name}",
        "interval": "1m",
        "input_series": inputs.job(t, _READS) + inputs.raw(_ranks(t, factors)),
        "promql_expr_test": checks,
    }


def _never(
    ctx: RuleContext, minutes: int, rank: str | None = None, state: str | None = None
) -> dict:
    """Never in `state` (None: neither pending nor firing) at any evaluation of the test."""
    return {
        "expr": f"count_over_time({_alerts(ctx, rank, state)}[{minutes}m])",
        "eval_time": f"{minutes}m",
        "exp_samples": [],
    }


def _fires(ctx: RuleContext, rank: str, at: int) -> dict:
    return {
        "expr": f"count by (rank, node, gpu) ({_alerts(ctx, rank)})",
        "eval_time": f"{at}m",
        "exp_samples": [
            {"labels": matchers({"gpu": "0", "node": f"node-{rank}", "rank": rank}), "value": 1}
        ],
    }


def _step(t: JobTimeline, onset: int, factor: float) -> Factor:
    """`factor` from minute `onset` on, 1 before."""
    return [1.0] * onset + [factor] * (t.minutes + 1 - onset)


@lru_cache(maxsize=8)
def _noise(seed: int, ranks: int, minutes: int, spread: float) -> tuple[tuple[float, ...], ...]:
    """Each of `ranks` ranks' factor jittering by +-`spread`, minute by minute: the same in
    every spec (drawn once)."""
    rng = random.Random(seed)
    return tuple(
        tuple(1 + rng.uniform(-spread, spread) for _ in range(minutes + 1)) for _ in range(ranks)
    )


def near_threshold_test(ctx: RuleContext, inputs: TestInputs) -> dict:
    minutes = FAULT_ONSET + FIRES_AFTER
    t = JobTimeline(ctx, minutes).build()
    cost = ctx.spec.objectives.straggler_cost_min_ratio
    factors = {
        8: _step(t, FAULT_ONSET, _excess(0.8 * cost)),
        9: _step(t, FAULT_ONSET, _excess(1.2 * cost)),
    }
    return _test(
        f"{0.8 * cost:.0%} cost stays quiet, {1.2 * cost:.0%} fires naming node, rank and GPU",
        inputs,
        t,
        factors,
        [_never(ctx, minutes, "8"), _fires(ctx, "9", minutes)],
    )


def noise_test(ctx: RuleContext, inputs: TestInputs) -> dict:
    """Two ranks' own work jitters +-3% a minute; one of them slows by 1.6x the threshold's
    cost an hour after onset."""
    minutes = FAULT_ONSET + FIRES_AFTER + 60
    t = JobTimeline(ctx, minutes).build()
    eight, nine = _noise(28, 2, minutes, 0.03)
    slow = _excess(1.6 * ctx.spec.objectives.straggler_cost_min_ratio)
    factors = {8: list(eight), 9: list(map(mul, nine, _step(t, FAULT_ONSET + 60, slow)))}
    return _test(
        "noisy ranks stay quiet; a noisy rank that slows fires",
        inputs,
        t,
        factors,
        [_never(ctx, FAULT_ONSET + 60, "8"), _never(ctx, minutes, "8"), _fires(ctx, "9", minutes)],
    )


def restart_test(ctx: RuleContext, inputs: TestInputs) -> dict:
    """After a restart one rank does 30% more own work for 12 minutes (its start-up, a
    compile): a restart is no straggler."""
    minutes = 150
    t = JobTimeline(ctx, minutes).build()
    down = (FAULT_ONSET + 20, FAULT_ONSET + 23)
    restart(t, *down)
    back = down[1] + 3
    factors = {8: [1.3 if back <= m < back + 12 else 1.0 for m in range(minutes + 1)]}
    return _test("a rank slow for its first minutes after a restart never tickets", inputs, t,
                 factors, [_never(ctx, minutes, state="firing")])  # fmt: skip


def pause_test(ctx: RuleContext, inputs: TestInputs) -> dict:
    """A straggler through the job's longest pause (an eval): one ticket, held through it."""
    pause = max(ctx.spec.cadence.eval_time, ctx.spec.cadence.checkpoint_save_time) // 60
    fires = FAULT_ONSET + FIRES_AFTER
    minutes = fires + pause + 10
    t = JobTimeline(ctx, minutes).build()
    for m in range(fires + 2, fires + 2 + pause):
        t.phase[m] = "eval"
        t.tokens_per_second[m] = t.steps_per_second[m] = t.data_wait_share[m] = 0.0
    factors = {8: _step(t, FAULT_ONSET, _excess(2 * ctx.spec.objectives.straggler_cost_min_ratio))}
    firing = f"{_alerts(ctx, '8')} or on () vector(0)"
    held = f"min(min_over_time(({firing})[{minutes - fires}m:1m]))"
    return _test(
        f"a straggler fires and keeps firing through a {pause}m pause",
        inputs,
        t,
        factors,
        [{"expr": held, "eval_time": f"{minutes}m", "exp_samples": [{"labels": "{}", "value": 1}]}],
    )


def uneven_ranks_test(ctx: RuleContext, inputs: TestInputs) -> dict:
    """Ranks that always differ (the last pipeline stage 10% more, uneven data +-3%, with
    noise) for seven hours: their baseline is their normal, nothing tickets."""
    minutes = 420
    t = JobTimeline(ctx, minutes).build()
    (noise,) = _noise(6, 1, minutes, 0.02)
    factors = {
        8: [1.10 * n for n in noise],  # the last pipeline stage: the loss head
        9: [1.03 * n for n in reversed(noise)],
        10: [0.97] * (minutes + 1),
    }
    return _test("ranks that always differ a little stay quiet for 7h", inputs, t, factors,
                 [_never(ctx, minutes)])  # fmt: skip


def straggler_tests(ctx: RuleContext, inputs: TestInputs, alerts: list[str]) -> list[dict]:
    """The tests above, for a spec that has the alert (several ranks, not switched off)."""
    if not straggler_enabled(ctx) or TRAINING_STRAGGLER not in alerts:
        return []
    builders = (near_threshold_test, noise_test, restart_test, pause_test, uneven_ranks_test)
    return [build(ctx, inputs) for build in builders]
