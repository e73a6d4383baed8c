"""Self-healing failed: the pages of a job that restarts itself (recovery.mode auto_restart)."""

from __future__ import annotations

from trainsignals.generator.alerts.model import (
    CHECKPOINT_INCIDENT,
    INCIDENT_CONSEQUENCE,
    PROGRESS_INCIDENT,
    AlertGroup,
    Explains,
    Rule,
    incident_alerts,
)
from trainsignals.generator.signals.goodput import HIGH_WATER_LOOKBACK
from trainsignals.generator.signals.gpu import gpu_source
from trainsignals.generator.signals.hang_suspects import suspects_annotation
from trainsignals.generator.signals.promql import RuleContext, matchers, regex
from trainsignals.generator.spec.durations import format_duration
from trainsignals.generator.spec.job import CRASH_LOOP_RESTARTS
from trainsignals.generator.testkit.faults import (
    FAULT_ONSET,
    GPU_HEALTHY,
    FaultCase,
    JobTimeline,
    from_onset,
    restart,
)

GROUP = AlertGroup()
# Names other modules import (no module outside a definition types an alert's name).
TRAINING_RESTARTS_ON_BAD_NODE = "TrainingRestartsOnBadNode"
TRAINING_NO_PROGRESS = "TrainingNoProgress"
TRAINING_CRASH_LOOPING = "TrainingCrashLooping"
onset = FAULT_ONSET


def completed(ctx: RuleContext) -> str:
    """`unless` a clean exit (phase "done") or a planned stop every rank announced (phase
    "stopping") was the job's last word: no incident, until a new incarnation starts."""
    r = ctx.recorded()
    return (
        f" unless on (training_job) (job:trainsignals_completed:bool{r} == 1 "
        f"or job:trainsignals_stopped:bool{r} == 1)"
    )


# The page of an incident whose restarts failed: what else the job shows is that incident.
SELF_HEALING_FAILED = Explains(
    "No progress (or a crash loop) beyond the restart budget is the page for the incident; "
    "the stall, the missing ranks, the slowdown, the aging checkpoint and the goodput "
    "burn it causes are the same incident.",
    roles=(INCIDENT_CONSEQUENCE,),
    page_only=True,
)


def _incident_pages(ctx: RuleContext, *incidents: str) -> str:
    """The firing pages of the job's alerts that declare one of `incidents`."""
    names = [name for incident in incidents for name in incident_alerts(incident)]
    return "ALERTS" + matchers(
        {
            "alertname": regex("|".join(names)),
            "alertstate": "firing",
            "severity": "page",
            "training_job": ctx.job,
        }
    )


def paged_incident_ended_within(ctx: RuleContext, seconds: int) -> str:
    """`unless` an incident that stopped progress paged within `seconds` and is over: while
    it lasts Alertmanager inhibits its consequences; after it, what it left in a window
    (the goodput it burned) is still that incident, not a second one. Both kinds: a stopped
    job (PROGRESS_INCIDENT), and unsaved work (CHECKPOINT_INCIDENT: the restarts of a job
    whose checkpoints failed redo hours of steps, goodput the stale-checkpoint page is about)."""
    pages = _incident_pages(ctx, PROGRESS_INCIDENT, CHECKPOINT_INCIDENT)
    return (
        f" unless on (training_job) (max_over_time({pages}[{ctx.range(seconds)}]) "
        f"unless on (training_job) {pages})"
    )


@GROUP.alert(
    TRAINING_NO_PROGRESS,
    signal="errors",
    severity="off",
    auto_restart="page",
    incident=PROGRESS_INCIDENT,
    explains=(SELF_HEALING_FAILED,),
    meaning="No training step completed for longer than recovery.restart_budget, counted "
    "across restarts: the job is down, hung, or automatic restarts do not bring it back to a "
    "first step. The self-healing loop failed.",
)
def no_progress(ctx: RuleContext) -> Rule:
    o, r, rec = ctx.spec.objectives, ctx.recorded(), ctx.spec.recovery
    budget, pause_limit = rec.restart_budget, max(rec.restart_budget, o.max_pause)
    # The restart budget runs from the last step or announced pause (a clean stop right after
    # an eval is not late); a pause itself may last max_pause from the last step. Both are
    # carried by the rules (signals/durable.py) for as long as the incident lasts, whatever
    # restart_window is: no range runs out of samples.
    since_healthy = f"time() - job:trainsignals_last_progress:timestamp{r}"
    since_step = f"time() - job:trainsignals_last_step:timestamp_max{r}"

    def gone_for_good(t: JobTimeline, m: int) -> None:
        if m == onset:
            restart(t, onset, t.minutes)

    def restart_loop(t: JobTimeline, m: int) -> None:
        # Every 15 minutes a new incarnation, which dies before its first step.
        t.process_start[m] = 60.0 * (onset + 15 * ((m - onset) // 15))
        t.phase[m] = "startup"
        t.tokens_per_second[m] = t.steps_per_second[m] = t.data_wait_share[m] = 0.0

    return Rule(
        expr=f"(({since_healthy} > {ctx.seconds(budget):g} unless on (training_job) "
        f"job:trainsignals_phase_paused:max{r} == 1) "
        f"or {since_step} > {ctx.seconds(pause_limit):g})" + completed(ctx),
        for_seconds=60,
        summary="{{ $labels.training_job }}: no training progress for "
        "{{ $value | humanizeDuration }}",
        description="No rank has completed a training step (or been in an announced "
        "eval/checkpoint pause) for {{ $value | humanizeDuration }} (across restarts), longer "
        f"than the restart budget of {format_duration(budget)} (or no step for "
        f"{format_duration(pause_limit)} in a pause). The job is "
        "down, hung, or restarts keep dying before their first step: the self-healing loop "
        "failed and a human must act.",
        panel="step_progress",
        threshold=f"no step for > {format_duration(budget)}",
        window="instant",
        faults=[
            FaultCase("", rec.restart_budget // 60 + 3, job_fault=gone_for_good),
            FaultCase(
                "",
                rec.restart_budget // 60 + 2,
                job_fault=from_onset(restart_loop),
                what="on restarts every 15m that never reach a step",
            ),
        ],
        annotations=suspects_annotation(ctx),
    )


@GROUP.alert(
    TRAINING_CRASH_LOOPING,
    signal="errors",
    severity="ticket",
    auto_restart="page",
    incident=PROGRESS_INCIDENT,
    explains=(
        Explains(
            "Self-healing jobs (recovery: auto_restart): a crash loop is the diagnosis of an "
            "incident whose restarts keep failing; when the restarts finally stop, the lack of "
            "progress that follows is the same incident, which already paged.",
            alerts=(TRAINING_NO_PROGRESS,),
            page_only=True,
        ),
        SELF_HEALING_FAILED,
    ),
    meaning="The job restarted at least 3 times within recovery.restart_window without "
    "progress (the global step's high-water mark did not advance): every incarnation dies "
    "before it gets past the work the last one lost (a bad node, a bad checkpoint, a software "
    "bug). A restart loop that never steps at all pages as TrainingNoProgress instead.",
)
def crash_looping(ctx: RuleContext) -> Rule:
    r, rec = ctx.recorded(), ctx.spec.recovery
    window, lookback = ctx.range(rec.restart_window), ctx.range(HIGH_WATER_LOOKBACK)
    name = format_duration(rec.restart_window)
    restarts = f"job:trainsignals_restarts:changes{name}{r}"
    high = f"job:trainsignals_global_step:max{r}"
    # Restarts that never reach a step are TrainingNoProgress's incident, also for the window
    # after it (the job then redoes the steps its checkpoint lost: no progress yet either).
    no_progress = matchers(
        {"alertname": TRAINING_NO_PROGRESS, "alertstate": "firing", "training_job": ctx.job}
    )
    loop = (
        f"{restarts} >= {CRASH_LOOP_RESTARTS} and on (training_job) "
        f"max_over_time({high}[{window}]) <= on (training_job) "
        f"max_over_time({high}[{lookback}] offset {window})"
    )
    if rec.max_restarts is not None:
        loop = f"({loop}) or {restarts} > {rec.max_restarts}"

    def crash_loop(t: JobTimeline, m: int) -> None:
        # A new incarnation every 10 minutes, restored from the checkpoint at the fault: it
        # steps for a few minutes, then dies before it passes the step it started from.
        t.process_start[m] = 60.0 * (onset + 10 * ((m - onset) // 10))
        t.checkpoint_ok[m] = False  # it dies before its next checkpoint
        if (m - onset) % 10 < 2:
            t.phase[m] = "startup"
            t.tokens_per_second[m] = t.steps_per_second[m] = t.data_wait_share[m] = 0.0

    return Rule(
        expr=f"({loop}) unless on (training_job) max_over_time(ALERTS{no_progress}[{window}])",
        for_seconds=60,
        summary="{{ $labels.training_job }}: {{ $value }} restarts in "
        + name
        + " without progress",
        description="The job restarted {{ $value }} times in the last " + name + " and its "
        "global step never got past its high-water mark: each incarnation dies before it "
        "gets back the work the previous one lost"
        + ("" if rec.max_restarts is None else f" (or more than {rec.max_restarts} restarts)")
        + ". Look for the node, GPU or checkpoint that every restart trips over (the infra "
        "tickets of the same window name it).",
        panel="restarts",
        threshold=f">= {CRASH_LOOP_RESTARTS} restarts in {name} without progress",
        window=name,
        faults=[
            FaultCase(
                "",
                rec.restart_window // 60 + 2,
                job_fault=from_onset(crash_loop),
            )
        ],
    )


@GROUP.alert(
    TRAINING_RESTARTS_ON_BAD_NODE,
    signal="errors",
    severity="ticket",
    auto_restart="page",
    incident=PROGRESS_INCIDENT,
    explains=(
        Explains(
            "A job restarted onto a bad node is the diagnosis; the crash loop and the lack of "
            "progress it leads to are the same incident, which already paged.",
            alerts=(TRAINING_CRASH_LOOPING, TRAINING_NO_PROGRESS),
            page_only=True,
        ),
        SELF_HEALING_FAILED,
    ),
    meaning="The same node was named by hardware faults (GPU lost, critical XID, uncorrectable "
    "memory errors, node down) in two separate incidents within recovery.restart_window while "
    "the job restarted: automation keeps putting the job back on a bad node.",
)
def restarts_on_bad_node(ctx: RuleContext) -> Rule:
    r, rec = ctx.recorded(), ctx.spec.recovery
    window = format_duration(rec.restart_window)
    source = gpu_source(ctx)
    lost = 0 if source.reports_gpu_up else None
    healthy = GPU_HEALTHY[source.presence_signal]
    # GPU 0 of node-0 lost twice, the job restarted after each: the node was not drained.
    twice_lost = FaultCase(
        "",
        45,
        labels=("node",),
        targets_down=lambda kind, node, m: False,  # every node present: 0 between faults
        job_fault=from_onset(
            lambda t, m: t.process_start.__setitem__(
                m, 60.0 * (onset + 5 if m < onset + 35 else onset + 35)
            )
        ),
        gpu_overrides={
            source.presence_signal: lambda m: (
                lost if onset <= m < onset + 10 or onset + 30 <= m < onset + 40 else healthy
            )
        },
    )
    return Rule(
        # Three changes of the 0/1 fault indicator = a second incident on that node.
        expr=f"changes(node:trainsignals_hardware_fault:bool{r}"
        f"[{ctx.range(rec.restart_window)}]) >= 3 and on (training_job) "
        f"job:trainsignals_restarts:changes{window}{r} >= 2",
        for_seconds=60,
        summary="{{ $labels.training_job }}: node {{ $labels.node }} failed again after a restart",
        description="Hardware fault alerts named {{ $labels.node }} in two separate incidents "
        f"within the last {window}, and the job restarted in between: it is being restarted "
        "onto the node that broke it. Drain the node and restart without it.",
        panel="restarts",
        threshold=f"2 hardware incidents on one node + >= 2 restarts in {window}",
        window=window,
        faults=[twice_lost],
    )
