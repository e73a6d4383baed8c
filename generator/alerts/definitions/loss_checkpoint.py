"""Loss-curve sanity and the checkpoints that bound the work a crash loses."""

from __future__ import annotations

import math

from trainsignals.generator.alerts.definitions.recovery import completed
from trainsignals.generator.alerts.model import CHECKPOINT_INCIDENT, AlertGroup, Rule
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.spec.durations import format_duration
from trainsignals.generator.testkit.faults import FAULT_ONSET, FaultCase, JobTimeline, from_onset

GROUP = AlertGroup()
# Names other modules import (no module outside a definition types an alert's name).
NON_FINITE_LOSS = "NonFiniteLoss"
LOSS_DIVERGING = "LossDiverging"
LOSS_PLATEAU = "LossPlateau"
CHECKPOINT_TOO_OLD = "CheckpointTooOld"
CHECKPOINT_DISK_ALMOST_FULL = "CheckpointDiskAlmostFull"
CHECKPOINT_DISK_FILLING_UP = "CheckpointDiskFillingUp"
onset = FAULT_ONSET
# NaN bursts closer than this (after the 5m window) are one incident: one page episode.
NONFINITE_KEEP = 1800
NAN_EVERY = 8  # minutes between the intermittent fault's bursts


@GROUP.alert(
    NON_FINITE_LOSS,
    signal="errors",
    severity="page",
    meaning="The loss was NaN or infinite more often than the spec tolerates.",
)
def nonfinite_loss(ctx: RuleContext) -> Rule:
    o, r = ctx.spec.objectives, ctx.recorded()
    too_many = o.nonfinite_losses_max + 1

    def every_8_minutes(t: JobTimeline, m: int) -> None:
        if (m - onset) % NAN_EVERY == 0:
            t.nonfinite_per_minute[m] = too_many

    return Rule(
        expr=f"job:trainsignals_nonfinite_losses:increase5m{r} > {o.nonfinite_losses_max}",
        for_seconds=60,
        summary="{{ $labels.training_job }}: {{ $value | humanize }} NaN/Inf losses in 5m",
        description="The loss was NaN or infinite {{ $value | humanize }} times in the last 5 "
        f"minutes (tolerated: {o.nonfinite_losses_max}). Updates after a non-finite loss "
        "corrupt the weights unless the step is skipped. The alert stays firing for "
        f"{format_duration(NONFINITE_KEEP)} after the last one: bursts that far apart are one "
        "incident.",
        panel="loss",
        threshold=f"> {o.nonfinite_losses_max} in 5m",
        window=f"5m, held {format_duration(NONFINITE_KEEP)}",
        keep_firing_for=NONFINITE_KEEP,
        faults=[
            FaultCase(
                "",
                4,
                job_fault=from_onset(lambda t, m: t.nonfinite_per_minute.__setitem__(m, too_many)),
            ),
            # Intermittent: one burst every 8 minutes used to open a page episode each.
            FaultCase(
                "",
                4,
                job_fault=from_onset(every_8_minutes),
                what="once, on a burst every 8 minutes,",
                holds_for=60,
            ),
        ],
    )


@GROUP.alert(
    LOSS_DIVERGING,
    signal="loss",
    severity="page",
    meaning="The loss (10m average) rose above loss_spike_factor x its best 10m average of "
    "loss_divergence_window and stayed there: a spike or a steady climb.",
)
def loss_diverging(ctx: RuleContext) -> Rule:
    o, r = ctx.spec.objectives, ctx.recorded()
    window = format_duration(o.loss_divergence_window)

    def spike(t: JobTimeline, m: int) -> None:
        if t.loss[m] is not None:
            t.loss[m] *= 4 * o.loss_spike_factor

    def climb(t: JobTimeline, m: int) -> None:
        if t.loss[m] is not None:
            t.loss[m] = t.loss[onset] * (1 + 0.5 * (m - onset) / 60)

    return Rule(
        expr=f"job:trainsignals_loss:avg10m{r} > {o.loss_spike_factor:g} * "
        f"min_over_time(job:trainsignals_loss:avg10m{r}"
        f"[{ctx.range(o.loss_divergence_window)}])",
        for_seconds=300,
        summary="{{ $labels.training_job }}: loss {{ $value | humanize }} is over "
        f"{o.loss_spike_factor:g}x its best of the last {window}",
        description="The loss averaged over ranks and 10 minutes is {{ $value | humanize }}, "
        f"more than {o.loss_spike_factor:g} times its lowest 10-minute average of the last "
        f"{window}, for 5 minutes: the run is diverging (a sudden spike or a steady climb).",
        panel="loss",
        threshold=f"> {o.loss_spike_factor:g} x best 10m average",
        window=f"{window} baseline",
        faults=[
            FaultCase("", 9, job_fault=from_onset(spike)),
            # A steady climb of 50% of the onset loss per hour: it passes spike_factor x its
            # best after (factor - 1) / 0.5 hours; a trailing-hour baseline would climb along.
            FaultCase(
                "",
                math.ceil(60 * (o.loss_spike_factor - 1) / 0.5) + 15,
                job_fault=from_onset(climb),
                what="on a steady climb",
            ),
        ],
    )


@GROUP.alert(
    LOSS_PLATEAU,
    signal="loss",
    severity="ticket",
    meaning="The loss improved less than loss_plateau_min_improvement_ratio over "
    "loss_plateau_window.",
)
def loss_plateau(ctx: RuleContext) -> Rule:
    o, r = ctx.spec.objectives, ctx.recorded()
    plateau_avg = ctx.range(min(3600, o.loss_plateau_window / 6))
    then = f"avg_over_time(job:trainsignals_loss:avg{r}[{plateau_avg}] " + (
        f"offset {ctx.duration(o.loss_plateau_window)})"
    )
    now = f"avg_over_time(job:trainsignals_loss:avg{r}[{plateau_avg}])"

    def plateau(t: JobTimeline, m: int) -> None:
        t.loss[m] = t.loss[60]

    return Rule(
        expr=f"({then} - {now}) / {then} < {o.loss_plateau_min_improvement_ratio:g}",
        for_seconds=3600,
        summary="{{ $labels.training_job }}: loss improved {{ $value | humanizePercentage }} in "
        f"{format_duration(o.loss_plateau_window)}",
        description="The loss improved by {{ $value | humanizePercentage }} over the last "
        f"{format_duration(o.loss_plateau_window)} (expected at least "
        f"{o.loss_plateau_min_improvement_ratio:.0%}). Compute may be wasted.",
        panel="loss",
        threshold=f"< {o.loss_plateau_min_improvement_ratio:.0%} improvement",
        window=format_duration(o.loss_plateau_window),
        faults=[
            FaultCase(
                "",
                o.loss_plateau_window // 60 + 60 + 70,
                onset=60,
                job_fault=from_onset(plateau, onset=60),
            )
        ],
    )


def _all_up(kind: str, node: str, m: int) -> bool:
    """Every target up: no missing-rank page that would explain the checkpoint's age."""
    return False


CHECKPOINTED = 70  # minutes: the healthy job's first checkpoint (at 1h03) is written


def _saves_fail_and_restarts(every: int):
    """Every save fails from CHECKPOINTED on, and the job restarts every `every` minutes
    (10 minutes less than the allowed age: a new incarnation comes before the limit)."""

    def fault(t: JobTimeline, m: int) -> None:
        t.checkpoint_ok[m] = False
        since = m - CHECKPOINTED
        if since >= every:
            t.process_start[m] = 60.0 * (CHECKPOINTED + every * (since // every))
            if since % every < 3:  # start-up of the new incarnation
                t.phase[m] = "startup"
                t.tokens_per_second[m] = t.steps_per_second[m] = t.data_wait_share[m] = 0.0

    return from_onset(fault, onset=CHECKPOINTED)


@GROUP.alert(
    CHECKPOINT_TOO_OLD,
    signal="errors",
    severity="page",
    incident_consequence=True,
    incident=CHECKPOINT_INCIDENT,
    meaning="The last successful checkpoint is older than checkpoint_max_age: a crash now loses "
    "that much work.",
)
def checkpoint_too_old(ctx: RuleContext) -> Rule:
    o, r = ctx.spec.objectives, ctx.recorded()
    return Rule(
        # Training time since the newest checkpoint, not wall time: the time the job stood
        # still (an outage, a hang: their own pages) is no unsaved work, so neither a long
        # incident nor an unrelated one decides when this pages (signals/durable.py).
        expr=f"job:trainsignals_checkpoint_unsaved:seconds{r} > "
        f"{ctx.seconds(o.checkpoint_max_age):g}" + completed(ctx),
        for_seconds=600,
        summary="{{ $labels.training_job }}: last checkpoint {{ $value | humanizeDuration }} ago",
        description="The newest successful checkpoint is {{ $value | humanizeDuration }} old "
        f"(limit {format_duration(o.checkpoint_max_age)}). A crash now loses all work since "
        "then.",
        panel="checkpoint_age",
        threshold=f"> {format_duration(o.checkpoint_max_age)}",
        window="instant",
        faults=[
            FaultCase(
                "",
                o.checkpoint_max_age // 60 + 20,
                job_fault=from_onset(lambda t, m: t.checkpoint_ok.__setitem__(m, False)),
                targets_down=_all_up,
            ),
            # Every save fails and the job restarts every 110 minutes: each incarnation
            # reports the checkpoint it restored, not its own start (issue 16).
            FaultCase(
                "",
                o.checkpoint_max_age // 60 + 20,
                onset=CHECKPOINTED,
                job_fault=_saves_fail_and_restarts(max(o.checkpoint_max_age // 60 - 10, 5)),
                targets_down=_all_up,
                what="on failing saves across restarts (each before the age limit)",
            ),
        ],
    )


@GROUP.alert(
    CHECKPOINT_DISK_ALMOST_FULL,
    signal="saturation",
    severity="page",
    node_scoped=True,
    meaning="The checkpoint file system has less free space than disk_free_min_ratio.",
)
def checkpoint_disk_almost_full(ctx: RuleContext) -> Rule:
    o, r = ctx.spec.objectives, ctx.recorded()
    return Rule(
        expr=f"node:trainsignals_checkpoint_disk_free:ratio{r} < {o.disk_free_min_ratio:g}",
        for_seconds=300,
        summary="{{ $labels.training_job }}: checkpoint disk on {{ $labels.node }} "
        "{{ $value | humanizePercentage }} free",
        description="{{ $labels.path }} on {{ $labels.node }} has "
        "{{ $value | humanizePercentage }} free (floor "
        f"{o.disk_free_min_ratio:.0%}). The next checkpoint may fail to write.",
        panel="disk",
        threshold=f"< {o.disk_free_min_ratio:.0%} free",
        window="instant",
        faults=[
            FaultCase(
                "",
                8,
                labels=("node", "path"),
                job_fault=from_onset(
                    lambda t, m: t.disk_free_ratio.__setitem__(m, o.disk_free_min_ratio / 2)
                ),
            )
        ],
    )


@GROUP.alert(
    CHECKPOINT_DISK_FILLING_UP,
    signal="saturation",
    severity="ticket",
    node_scoped=True,
    meaning="At the current rate the checkpoint file system fills within disk_full_horizon.",
)
def checkpoint_disk_filling_up(ctx: RuleContext) -> Rule:
    o, r = ctx.spec.objectives, ctx.recorded()
    horizon = format_duration(o.disk_full_horizon)

    def fill_slowly(t: JobTimeline, m: int) -> None:
        t.disk_free_ratio[m] = max(0.01, 0.5 - 0.5 * (m - onset) / 330)

    def fill_in_3h(t: JobTimeline, m: int) -> None:
        t.disk_free_ratio[m] = max(0.0, 0.5 - 0.5 * (m - onset) / 180)

    disk = ("node", "path")
    return Rule(
        # The trend of the last hour, sustained for 15 minutes: a 6h regression plus a 1h
        # `for` needed over two hours to ticket a disk that fills in three.
        expr=f"predict_linear(node:trainsignals_checkpoint_disk_free:bytes{r}"
        f"[{ctx.range(3600)}], {ctx.seconds(o.disk_full_horizon):g}) < 0",
        for_seconds=900,
        summary="{{ $labels.training_job }}: checkpoint disk on {{ $labels.node }} fills within "
        + horizon,
        description="At the rate of the last hour (sustained for 15 minutes), "
        "{{ $labels.path }} on {{ $labels.node }} runs out of space within " + horizon + ".",
        panel="disk",
        threshold=f"full within {horizon}",
        window="1h trend",
        faults=[
            FaultCase("", 200, labels=disk, job_fault=from_onset(fill_slowly)),
            # Half the disk gone in 3 hours: the ticket must come while there is time to act.
            FaultCase(
                "",
                40,
                labels=disk,
                job_fault=from_onset(fill_in_3h),
                what="on a disk that fills in 3 hours",
            ),
        ],
    )
