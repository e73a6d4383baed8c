"""Self-healing failed: the pages of a job that restarts itself (recovery.mode auto_restart)."""

from __future__ import annotations

from ..alert_model import AlertGroup, Rule
from ..durations import format_duration
from ..faults import FAULT_ONSET, GPU_HEALTHY, FaultCase, JobTimeline, from_onset, restart
from ..gpu_sources import gpu_source
from ..promql import RuleContext

GROUP = AlertGroup()
onset = FAULT_ONSET


@GROUP.alert(
    "TrainingNoProgress",
    signal="errors",
    severity="off",
    auto_restart="page",
    meaning="No training step completed for longer than recovery.restart_budget: the job is "
    "down, hung, or an automatic restart did not bring it back. The self-healing loop failed.",
)
def no_progress(ctx: RuleContext) -> Rule:
    o, r, rec = ctx.spec.objectives, ctx.recorded(), ctx.spec.recovery
    budget, pause_limit = rec.restart_budget, max(rec.restart_budget, o.max_pause)
    # The last step of any rank, remembered through a restart or an outage (when every target
    # is gone the recorded series stops, max_over_time keeps its last value).
    since = (
        f"time() - max_over_time(job:trainsignals_last_step:timestamp_max{r}"
        f"[{ctx.range(rec.restart_window)}])"
    )

    def gone_for_good(t: JobTimeline, m: int) -> None:
        if m == onset:
            restart(t, onset, t.minutes)

    return Rule(
        expr=f"({since} > {ctx.seconds(budget):g} unless on (training_job) "
        f"job:trainsignals_phase_paused:max{r} == 1) or {since} > {ctx.seconds(pause_limit):g}",
        for_seconds=60,
        summary="{{ $labels.training_job }}: no training progress for "
        "{{ $value | humanizeDuration }}",
        description="No rank has completed a training step for {{ $value | humanizeDuration }}, "
        f"longer than the restart budget of {format_duration(budget)} (or "
        f"{format_duration(pause_limit)} in an announced eval/checkpoint pause). The job is "
        "down, hung, or an automatic restart did not bring it back: the self-healing loop "
        "failed and a human must act.",
        panel="step_progress",
        threshold=f"no step for > {format_duration(budget)}",
        window="instant",
        faults=[FaultCase("", rec.restart_budget // 60 + 3, job_fault=gone_for_good)],
    )


@GROUP.alert(
    "TrainingCrashLooping",
    signal="errors",
    severity="ticket",
    auto_restart="page",
    meaning="The job restarted more than recovery.max_restarts times within "
    "recovery.restart_window: automatic restarts keep failing (a bad node, a bad checkpoint, "
    "a software bug).",
)
def crash_looping(ctx: RuleContext) -> Rule:
    r, rec = ctx.recorded(), ctx.spec.recovery
    window = format_duration(rec.restart_window)

    def crash_loop(t: JobTimeline, m: int) -> None:
        # A new incarnation every 10 minutes: each one fails a little after it starts.
        t.process_start[m] = 60.0 * (onset + 10 * ((m - onset) // 10))

    return Rule(
        expr=f"job:trainsignals_restarts:changes{window}{r} > {rec.max_restarts}",
        for_seconds=60,
        summary="{{ $labels.training_job }}: {{ $value }} restarts in " + window,
        description="The job restarted {{ $value }} times in the last " + window + " (allowed: "
        f"{rec.max_restarts}). Automatic restarts keep failing: look for the node, GPU or "
        "checkpoint that every restart trips over (the infra tickets of the same window name "
        "it).",
        panel="restarts",
        threshold=f"> {rec.max_restarts} restarts in {window}",
        window=window,
        faults=[FaultCase("", 10 * (rec.max_restarts + 1) + 2, job_fault=from_onset(crash_loop))],
    )


@GROUP.alert(
    "TrainingRestartsOnBadNode",
    signal="errors",
    severity="ticket",
    auto_restart="page",
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
