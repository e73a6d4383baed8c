"""A restart nobody announced: in recovery mode manual nothing is trusted to heal the job, so
each unexpected interruption is an incident of its own, one page for all of it (issue 26)."""

from __future__ import annotations

from trainsignals.generator.alerts.definitions.recovery import completed
from trainsignals.generator.alerts.definitions.slo_burn import SLO_ERROR_BUDGET_BURN_FAST
from trainsignals.generator.alerts.model import (
    CHECKPOINT_INCIDENT,
    PROGRESS_INCIDENT,
    PROGRESS_SYMPTOM,
    AlertGroup,
    Explains,
    Rule,
    hardware_fault_alerts,
    incident_alerts,
)
from trainsignals.generator.signals.durable import LAST_STEP, NEWEST_START, UNPLANNED_START
from trainsignals.generator.signals.promql import RuleContext, matchers, regex
from trainsignals.generator.spec.durations import format_duration
from trainsignals.generator.testkit.faults import FAULT_ONSET, FaultCase, JobTimeline, restart

GROUP = AlertGroup()
# Names other modules import (no module outside a definition types an alert's name).
TRAINING_RESTARTED = "TrainingRestarted"
onset = FAULT_ONSET

# The newest incarnation is healthy again once it steps this long after its start: a crash
# loop (incarnations dying within minutes) stays one incident, one page, until it ends.
HEALED_AFTER_S = 15 * 60
# A restart after an outage another page already covered (the targets down, the node, the
# GPU) is the end of that incident, not a second one, if that page fired this recently.
COVERED_WITHIN_S = 30 * 60

# Goodput spent by an interruption that paged is that incident's, not a second page.
INCIDENT_BURN = Explains(
    "An interruption that paged (a crash, a restart, ranks gone, a stall) spends the goodput "
    "budget while it lasts: the fast burn is the same incident.",
    alerts=(SLO_ERROR_BUDGET_BURN_FAST,),
    page_only=True,
)


def planned_stop(t: JobTimeline, m: int) -> None:
    """Every rank announces a planned stop at the onset, exits, and is back 8 minutes later."""
    if m == onset:
        t.phase[onset] = "stopping"
        t.tokens_per_second[onset] = t.steps_per_second[onset] = t.data_wait_share[onset] = 0.0
        restart(t, onset + 1, onset + 8)


# Every rank announces a planned stop, then all are down for 8 minutes: a human's act, no
# incident (issue 26: the fleet replay paged each planned stop). Quiet for every alert that
# a stop could fire (TrainingRestarted here, TrainingTargetsDown in training.py).
PLANNED_STOP_QUIET = FaultCase(
    "",
    30,
    job_fault=planned_stop,
    targets_down=lambda kind, node, m: kind == "training" and onset < m <= onset + 8,
    fires=False,
    what="on a planned stop every rank announced",
)


def other_pages(ctx: RuleContext, besides: tuple[str, ...]) -> str:
    """ALERTS of the firing pages of a stopped job or of a hardware fault of its nodes (the
    alert model's declarations), but `besides`."""
    names = [
        n
        for n in (
            *incident_alerts(PROGRESS_INCIDENT),
            *incident_alerts(CHECKPOINT_INCIDENT),
            *hardware_fault_alerts(),
        )
        if n not in besides
    ]
    return "ALERTS" + matchers(
        {
            "alertname": regex("|".join(dict.fromkeys(names))),
            "alertstate": "firing",
            "severity": "page",
            "training_job": ctx.job,
        }
    )


def covered_by_other_pages(ctx: RuleContext, seconds: int) -> str:
    """`unless` another page of a stopped job (or a hardware fault of its nodes) fired within
    `seconds`: the restart that ends an outage belongs to the outage's page."""
    # The stall too: a hung job a human killed and restarted is the hang's incident. (A restart
    # loop never stalls: TrainingStalled's limits run from the newest incarnation's start.)
    pages = other_pages(ctx, (TRAINING_RESTARTED,))
    return f" unless on (training_job) max_over_time({pages}[{ctx.range(seconds)}])"


@GROUP.alert(
    TRAINING_RESTARTED,
    signal="errors",
    severity="page",
    auto_restart="off",
    incident=PROGRESS_INCIDENT,
    explains=(
        Explains(
            "A job that crashed and restarted (recovery mode manual) is the incident: the "
            "stall of its restarts and the slow steps of its warm-up are the same one.",
            roles=(PROGRESS_SYMPTOM,),
            page_only=True,
        ),
        INCIDENT_BURN,
    ),
    meaning="The job's processes exited without announcing a planned stop and a new "
    "incarnation started (torchrun --max-restarts, the scheduler, a human): in recovery mode "
    "manual every unexpected interruption is an incident. One page for the interruption, "
    "held while restarts keep coming (a crash loop is one incident); a restart ending an "
    "outage that already paged (ranks down, a node or GPU fault) is that outage's.",
)
def restarted(ctx: RuleContext) -> Rule:
    r = ctx.recorded()
    healed = format_duration(HEALED_AFTER_S)
    # The newest incarnation followed an unannounced exit and has not yet stepped
    # HEALED_AFTER_S after its start: carried state (signals/durable.py), however long the
    # incident lasts. Healed stays healed (the last step only grows): a later hang or a long
    # eval is TrainingStalled's, not this restart's.
    expr = (
        f"{UNPLANNED_START}{r} >= on (training_job) {NEWEST_START}{r} "
        f"unless on (training_job) {LAST_STEP}{r} - on (training_job) {NEWEST_START}{r} "
        f"> {ctx.seconds(HEALED_AFTER_S):g}"
    )

    def crash(t: JobTimeline, m: int) -> None:
        if m == onset:
            restart(t, onset, onset + 1)

    return Rule(
        expr=f"({expr})" + covered_by_other_pages(ctx, COVERED_WITHIN_S) + completed(ctx),
        for_seconds=60,
        summary="{{ $labels.training_job }}: the job restarted after an unexpected exit",
        description='The job\'s processes exited without a planned stop (phase "stopping" on '
        "every rank, metrics.stopping()) and a new incarnation started. Find why the "
        "last one died (its logs, the node's kernel log, NCCL's watchdog) before it happens "
        f"again. This page holds until the job steps {healed} after its restart: a crash "
        "loop stays this one page.",
        panel="restarts",
        threshold=f"an unannounced restart, until a step {healed} after it",
        window="instant",
        faults=[
            FaultCase(
                "",
                4,
                job_fault=crash,
                # The ranks' targets are down for the two minutes of the crash (one short of
                # TrainingTargetsDown's `for`): the restart alone is the incident.
                targets_down=lambda kind, node, m: kind == "training" and onset <= m <= onset + 1,
                what="on a crash and restart",
            ),
            PLANNED_STOP_QUIET,
        ],
    )
