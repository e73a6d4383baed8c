"""The generated test that one ordinary restart never pages CheckpointTooOld (issue 26, 9).

The worst ordinary restart for the checkpoint's age: every rank dies in the last minute of
a save (the save is lost: the restored checkpoint is the one before, an interval old), the
job is back at its first step after the whole restart budget, and saves again one checkpoint
interval of steps later, as a trainer that saves every N steps does. The newest checkpoint
then reaches 2 x interval + restart budget + save time (generator/signals/feasibility.py),
which the spec's checkpoint_max_age is checked to allow: CheckpointTooOld must stay silent.
"""

from __future__ import annotations

from trainsignals.generator.alerts.definitions.loss_checkpoint import CHECKPOINT_TOO_OLD
from trainsignals.generator.signals.healthy_job import HEALTHY_DATA_WAIT, healthy_pattern
from trainsignals.generator.signals.promql import RuleContext, matchers
from trainsignals.generator.testkit.faults import JobTimeline, restart
from trainsignals.generator.testkit.job_series import target_series
from trainsignals.generator.testkit.test_inputs import TestInputs

STARTUP = 2  # minutes the new incarnation starts up before its first step
ALERT_FOR = 10  # minutes: CheckpointTooOld's `for`, and some more to look past it
LOOK_PAST = 15


def worst_crash(ctx: RuleContext) -> tuple[int, int]:
    """(minute every rank dies, minute of the new incarnation's first step): in the last
    minute of the second save, back after the whole restart budget."""
    every, save, _, _ = healthy_pattern(ctx.spec.cadence)
    crash = 2 * every + save - 1
    return crash, crash + max(STARTUP + 1, ctx.spec.recovery.restart_budget // 60)


def restarted_timeline(ctx: RuleContext, minutes: int, crash: int, first_step: int) -> JobTimeline:
    """The healthy job dying at `crash` and stepping again at `first_step`, then saving every
    checkpoint interval of steps from there (no eval: the age is what is tested)."""
    every, save, _, _ = healthy_pattern(ctx.spec.cadence)
    t = JobTimeline(ctx, minutes).build()
    restart(t, crash, first_step - STARTUP - 1, startup=STARTUP)
    steps, tokens = t.healthy_steps, t.healthy_tokens
    for m in range(first_step, minutes + 1):
        since = m - first_step
        saving = since >= every and since % every < save
        t.phase[m] = "checkpoint" if saving else "train"
        t.steps_per_second[m] = 0.0 if saving else steps
        t.tokens_per_second[m] = 0.0 if saving else tokens
        t.data_wait_share[m] = 0.0 if saving else HEALTHY_DATA_WAIT
    return t


def checkpoint_restart_test(
    ctx: RuleContext, inputs: TestInputs, crash: int | None = None, back: int | None = None
) -> dict:
    """One ordinary restart (the worst one, or `crash` .. `back` at the first step): no
    CheckpointTooOld while the newest checkpoint ages through it and the next save."""
    worst = worst_crash(ctx)
    crash, back = crash if crash is not None else worst[0], back if back is not None else worst[1]
    every, save, _, _ = healthy_pattern(ctx.spec.cadence)
    minutes = back + every + save + ALERT_FOR + LOOK_PAST
    down = (crash, back - STARTUP - 1)
    timeline = restarted_timeline(ctx, minutes, crash, back)
    series = (
        inputs.raw(
            target_series(
                ctx, minutes, lambda kind, node, m: kind == "training" and down[0] <= m <= down[1]
            )
        )
        + inputs.gpus(minutes)
        + inputs.job(timeline)
    )
    too_old = matchers({"alertname": CHECKPOINT_TOO_OLD, "training_job": ctx.job})
    return {
        "name": f"one ordinary restart (crash at {crash}m, stepping at {back}m, saves every "
        f"{every}m of steps) keeps the checkpoint under checkpoint_max_age: "
        f"no {CHECKPOINT_TOO_OLD}",
        "interval": "1m",
        "input_series": series,
        "promql_expr_test": [
            {
                "expr": f"count_over_time(ALERTS{too_old}[{minutes}m])",
                "eval_time": f"{minutes}m",
                "exp_samples": [],
            },
        ],
    }
