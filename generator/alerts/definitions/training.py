"""The training process: ranks up, progress, speed, data and dropped batches."""

from __future__ import annotations

from trainsignals.generator.alerts.definitions.recovery import completed
from trainsignals.generator.alerts.definitions.restarts import INCIDENT_BURN, PLANNED_STOP_QUIET
from trainsignals.generator.alerts.model import (
    PROGRESS_INCIDENT,
    PROGRESS_SYMPTOM,
    AlertGroup,
    Explains,
    Rule,
)
from trainsignals.generator.signals.durable import NEWEST_START
from trainsignals.generator.signals.gpu_activity import activity_now
from trainsignals.generator.signals.hang_suspects import suspects_annotation
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.spec.durations import format_duration
from trainsignals.generator.testkit.faults import (
    FAULT_ONSET,
    FaultCase,
    JobTimeline,
    from_onset,
    slow,
    stall,
)

GROUP = AlertGroup()
# Names other modules import (no module outside a definition types an alert's name).
DATA_LOADER_STARVED = "DataLoaderStarved"
DROPPED_BATCHES_ABOVE_TOLERANCE = "DroppedBatchesAboveTolerance"
TRAINING_TARGETS_DOWN = "TrainingTargetsDown"
TRAINING_STALLED = "TrainingStalled"
THROUGHPUT_BELOW_FLOOR = "ThroughputBelowFloor"
STEP_TIME_ABOVE_BOUND = "StepTimeAboveBound"
MFU_BELOW_FLOOR = "MfuBelowFloor"
onset = FAULT_ONSET

# Window of the training-time averages below. A `for` on an instantaneous phase gate would
# restart at every eval or checkpoint pause: a job pausing more often than the `for` could
# never alert. Averaging only the samples taken while training, pauses leave gaps instead.
TRAINING_WINDOW = 900
STEP_TIME_QUANTILE = 0.95  # the step-time bound is on p95
RESTART_SETTLE = 300  # seconds after a restart before speed counts again (one rate window)
STEPPING = "job:trainsignals_stepping:ratio_rate5m"  # share of wall time ranks spend in steps
# A window with less stepping than this says too little about speed (a few steps after a
# restart or around a long pause): the while-stepping averages skip it.
MIN_STEPPING_SHARE = 0.25


def training(ctx: RuleContext) -> str:
    return f"on (training_job) job:trainsignals_phase_train:min{ctx.recorded()} == 1"


def steady(ctx: RuleContext) -> str:
    """Training, stepping and settled: the samples the speed averages may see.

    A hang (no step for half of stall_after) is TrainingStalled's and TrainingNoProgress's
    business, and the minutes after a restart ramp up from zero as rate() windows fill: neither
    says the job is slow, and averaging them in paged ThroughputBelowFloor for hangs and
    restarts that healed themselves (found by the fleet replay).
    """
    r, o = ctx.recorded(), ctx.spec.objectives
    stalled = f"job:trainsignals_last_step:age_seconds{r} > {ctx.seconds(o.stall_after / 2):g}"
    restarted = (
        f"time() - job:trainsignals_incarnation_start:max{r} < {ctx.seconds(RESTART_SETTLE):g}"
    )
    return f"{training(ctx)} unless on (training_job) ({stalled} or {restarted})"


def while_stepping(ctx: RuleContext, rate: str, window: int = TRAINING_WINDOW) -> str:
    """A per-wall-second rate (recorded series) per second the ranks spent stepping.

    The ratio of the two sums over the window is work done / time spent in steps. Pauses,
    hangs and restarts add to neither sum, so they do not drag the speed down: a hang or a
    crash loop is TrainingNoProgress's and TrainingCrashLooping's page, not a slow job, and
    checkpoint minutes no longer dip the average (the fleet replay found both as extra pages).
    """
    r, w = ctx.recorded(), ctx.range(window)
    stepping = f"{STEPPING}{r}"
    return (
        f"(sum_over_time({rate}{r}[{w}]) / sum_over_time({stepping}[{w}]) "
        f"and on (training_job) avg_over_time({stepping}[{w}]) > {MIN_STEPPING_SHARE:g})"
    )


def training_average(ctx: RuleContext, expr: str) -> str:
    """`expr` averaged over the steady training samples of the last 15 minutes."""
    window = f"[{ctx.range(TRAINING_WINDOW)}:{ctx.range(60)}]"
    return f"avg_over_time(({expr} and {steady(ctx)}){window})"


@GROUP.alert(
    TRAINING_TARGETS_DOWN,
    signal="errors",
    severity="page",
    auto_restart="ticket",
    incident_consequence=True,
    incident=PROGRESS_INCIDENT,
    explains=(
        Explains(
            "A crashed rank (targets down) stops every step: stall, throughput, step time, MFU "
            "and data-wait alerts follow from it.",
            roles=(PROGRESS_SYMPTOM,),
        ),
        INCIDENT_BURN,
    ),
    meaning="Fewer training ranks are scraped than the spec's shape: a rank crashed or its "
    "target is missing.",
)
def targets_down(ctx: RuleContext) -> Rule:
    spec, r, rec = ctx.spec, ctx.recorded(), ctx.spec.recovery
    expected_ranks = spec.shape.gpus
    return Rule(
        # A completed job's targets leaving service discovery is no incident.
        expr=f"job:trainsignals_ranks_up:sum{r} < {expected_ranks}" + completed(ctx),
        # Restarting ranks are missing for a while; only longer than that is news, and a job
        # that is gone altogether pages as TrainingNoProgress first (which covers this one).
        for_seconds=rec.restart_budget + 300 if rec.automatic else 120,
        summary="{{ $labels.training_job }}: only {{ $value }} of "
        f"{expected_ranks} training ranks are up",
        description="Prometheus scrapes {{ $value }} healthy training targets where the spec "
        f"expects {expected_ranks} ({spec.shape.nodes} nodes x {spec.shape.gpus_per_node} "
        "GPUs). A rank crashed, was evicted, or its target vanished from service discovery.",
        panel="targets_up",
        threshold=f"< {expected_ranks} ranks up",
        window="instant",
        faults=[
            FaultCase(
                "",
                (rec.restart_budget // 60 + 8) if rec.automatic else 5,
                targets_down=lambda kind, node, m: (
                    kind == "training" and node == "node-0" and m >= onset
                ),
            ),
            PLANNED_STOP_QUIET,
        ],
    )


@GROUP.alert(
    TRAINING_STALLED,
    signal="latency",
    severity="page",
    auto_restart="ticket",
    progress_symptom=True,
    incident_consequence=True,
    incident=PROGRESS_INCIDENT,
    explains=(
        Explains(
            "A stalled job (no steps while processes are up) has zero throughput and MFU and "
            "unbounded step time; a hung data loader is one of the stall's causes and its "
            "runbook covers it: report the stall only.",
            roles=(PROGRESS_SYMPTOM,),
        ),
        INCIDENT_BURN,
    ),
    meaning="No step has completed for longer than the job allows (hung collective, deadlock, "
    "or a pause that never ended), while the processes are up.",
)
def stalled(ctx: RuleContext) -> Rule:
    o, r = ctx.spec.objectives, ctx.recorded()
    stall_after, max_pause = ctx.seconds(o.stall_after), ctx.seconds(o.max_pause)
    since_start = f"time() - {NEWEST_START}{r}"
    return Rule(
        # While training, the limit runs from the last step or the end of an announced pause
        # (the first step after an eval may recompile); any pause may last max_pause from the
        # last step. Ages are carried across restarts (signals/durable.py), but a stall is of
        # processes that are up: neither limit runs before the newest incarnation started. A
        # job back from an outage (ranks down, a node: that page's incident) or restarting in
        # a loop (TrainingRestarted's) is not stalled (issue 26: the stall paged when a job
        # dead for hours came back).
        expr=f"((job:trainsignals_last_step:age_seconds{r} > {stall_after:g} "
        f"and {training(ctx)} unless on (training_job) "
        f"time() - job:trainsignals_last_progress:timestamp{r} <= {stall_after:g} "
        f"unless on (training_job) {since_start} <= {stall_after:g})"
        f" or (job:trainsignals_last_step:age_seconds{r} > {max_pause:g} "
        f"unless on (training_job) {since_start} <= {max_pause:g}))" + completed(ctx),
        # A finished job's last step only gets older: no incident.
        for_seconds=60,
        summary="{{ $labels.training_job }}: no training step for {{ $value | humanizeDuration }}",
        description="The slowest rank last completed a step {{ $value | humanizeDuration }} ago "
        f"while the processes are up (limit {format_duration(o.stall_after)} while training, "
        f"{format_duration(o.max_pause)} in eval/checkpoint/warm-up pauses). GPUs may still "
        "look busy: a hung collective (NCCL) spins at 100% utilization." + activity_now(ctx),
        panel="step_progress",
        threshold=f"no step for > {format_duration(o.stall_after)} (train) / "
        f"{format_duration(o.max_pause)} (any phase)",
        window="instant",
        faults=[FaultCase("", o.stall_after // 60 + 5, job_fault=from_onset(stall))],
        annotations=suspects_annotation(ctx),
    )


@GROUP.alert(
    THROUGHPUT_BELOW_FLOOR,
    signal="traffic",
    severity="page",
    progress_symptom=True,
    incident_consequence=True,
    meaning="Tokens per second while stepping are below the floor (pauses, hangs and restarts "
    "are left out: a hang pages as TrainingNoProgress or TrainingStalled, not as slowness).",
)
def throughput_below_floor(ctx: RuleContext) -> Rule:
    spec = ctx.spec
    if spec.tokens_per_second_floor is not None:
        floor, series, unit = (
            spec.tokens_per_second_floor,
            "job:trainsignals_tokens:rate5m",
            "tokens/s",
        )
    else:
        floor, series, unit = (
            spec.steps_per_second_floor or 0.0,
            "job:trainsignals_steps:rate5m",
            "steps/s",
        )
    return Rule(
        expr=f"{while_stepping(ctx, series)} < {floor:.6g}",
        for_seconds=300,
        summary=f"{{{{ $labels.training_job }}}}: {{{{ $value | humanize }}}} {unit}, floor "
        f"{floor:.4g}",
        description="Over its last 15 minutes the job averaged "
        f"{{{{ $value | humanize }}}} {unit} while stepping, below the floor "
        f"of {floor:.4g} {unit} (eval and checkpoint pauses, hangs and restarts are left "
        "out: they are goodput's and TrainingNoProgress's business).",
        panel="throughput",
        threshold=f"< {floor:.4g} {unit}",
        window="15m of training",
        faults=[FaultCase("", 50, job_fault=from_onset(slow))],
    )


@GROUP.alert(
    STEP_TIME_ABOVE_BOUND,
    signal="latency",
    severity="ticket",
    progress_symptom=True,
    incident_consequence=True,
    meaning="More than 5% of training steps are slower than step_time_max_seconds: p95 step "
    "time is above the bound (counted at a histogram bucket placed at the bound; in processes "
    "started without it, at the next default bucket above the bound).",
)
def step_time_above_bound(ctx: RuleContext) -> Rule | None:
    o, r = ctx.spec.objectives, ctx.recorded()
    if o.step_time_max_seconds is None:
        return None
    over = 1 - STEP_TIME_QUANTILE

    def slower(t: JobTimeline, m: int) -> None:
        if m >= onset:
            t.slow_step_share[m] = 0.10

    def slower_without_bucket(t: JobTimeline, m: int) -> None:
        t.bound_bucket = False
        slower(t, m)

    return Rule(
        # p95 > bound exactly when more than 5% of steps are slower than the bound.
        expr=training_average(
            ctx, f"job:trainsignals_step_duration_seconds:above_bound_ratio_rate5m{r}"
        )
        + f" > {over:g}",
        for_seconds=300,
        summary="{{ $labels.training_job }}: {{ $value | humanizePercentage }} of steps slower "
        f"than {o.step_time_max_seconds:g}s",
        description="Over the last 15 minutes of training, {{ $value | humanizePercentage }} of "
        f"steps took longer than the bound of {o.step_time_max_seconds:g}s: the p95 step time "
        f"is above it (more than {over:.0%} of steps over). Ranks started without "
        "TRAINSIGNALS_STEP_TIME_BOUND_SECONDS have no histogram bucket at the bound: their "
        "steps count from the next bucket above it, so they read fewer slow steps.",
        panel="step_time",
        threshold=f"p95 > {o.step_time_max_seconds:g}s (> {over:.0%} of steps over)",
        window="15m of training",
        # 10% of steps over the bound: p95 above it, the rest of the job unchanged.
        faults=[
            FaultCase("", 50, job_fault=slower),
            FaultCase(
                "",
                50,
                job_fault=slower_without_bucket,
                what="without a bucket at the bound",
            ),
        ],
    )


@GROUP.alert(
    DATA_LOADER_STARVED,
    signal="saturation",
    severity="ticket",
    progress_symptom=True,
    incident_consequence=True,
    meaning="Ranks spend more than data_wait_max_ratio of wall time waiting for data: GPUs "
    "busy-but-starved.",
)
def data_loader_starved(ctx: RuleContext) -> Rule:
    o, r = ctx.spec.objectives, ctx.recorded()

    def starve(t: JobTimeline, m: int) -> None:
        t.data_wait_share[m] = (
            min(0.95, 2 * o.data_wait_max_ratio) if t.phase[m] == "train" else 0.0
        )

    return Rule(
        # Of wall time, not of step time: between-step work (logging, callbacks) is time the
        # GPUs do not wait for data either, and a small model's fast steps would otherwise
        # read as starved (found by the Lightning test's tiny model).
        expr=f"{training_average(ctx, f'job:trainsignals_data_wait:ratio_rate5m{r}')} "
        f"> {o.data_wait_max_ratio:g}",
        for_seconds=300,
        summary="{{ $labels.training_job }}: ranks wait for data "
        "{{ $value | humanizePercentage }} of the time",
        description="Over the last 15 minutes of training, ranks spent "
        "{{ $value | humanizePercentage }} of wall time waiting for the data loader "
        "(tolerated: "
        f"{o.data_wait_max_ratio:.0%}). The GPUs are busy-but-starved: utilization looks "
        "fine between waits while throughput suffers." + activity_now(ctx),
        panel="data_wait",
        threshold=f"> {o.data_wait_max_ratio:.0%} of wall time",
        window="15m of training",
        faults=[FaultCase("", 50, job_fault=from_onset(starve))],
    )


@GROUP.alert(
    MFU_BELOW_FLOOR,
    signal="saturation",
    severity="ticket",
    progress_symptom=True,
    incident_consequence=True,
    meaning="Model FLOPs utilization while stepping, over mfu_window, is below mfu_min_ratio "
    "(the slow leak).",
)
def mfu_below_floor(ctx: RuleContext) -> Rule:
    o = ctx.spec.objectives

    def mfu_leak(t: JobTimeline, m: int) -> None:
        t.tokens_per_second[m] /= 3  # 1.5x the floor -> 0.5x the floor
        t.steps_per_second[m] /= 3

    return Rule(
        # MFU while stepping over the window: pauses are goodput's business, and a phase gate
        # outside the average would reset the 1h `for` at every checkpoint.
        expr=f"{while_stepping(ctx, 'job:trainsignals_mfu:ratio_rate5m', o.mfu_window)} "
        f"< {o.mfu_min_ratio:g}",
        for_seconds=3600,
        summary="{{ $labels.training_job }}: MFU {{ $value | humanizePercentage }} over "
        f"{format_duration(o.mfu_window)}",
        description="Model FLOPs utilization averaged {{ $value | humanizePercentage }} over the "
        f"last {format_duration(o.mfu_window)}, below the floor of {o.mfu_min_ratio:.0%}. "
        "Slow leaks (a straggler, a throttling node, a growing data wait) show here first.",
        panel="mfu",
        threshold=f"< {o.mfu_min_ratio:.0%}",
        window=format_duration(o.mfu_window),
        faults=[FaultCase("", 90, job_fault=from_onset(mfu_leak))],
    )


@GROUP.alert(
    DROPPED_BATCHES_ABOVE_TOLERANCE,
    signal="errors",
    severity="ticket",
    meaning="The share of dropped batches over dropped_batches_window is above tolerance.",
)
def dropped_batches(ctx: RuleContext) -> Rule:
    o, raw = ctx.spec.objectives, ctx.raw()
    dropped = ctx.range(o.dropped_batches_window)

    def drop(t: JobTimeline, m: int) -> None:
        t.dropped_per_minute[m] = t.steps_per_second[m] * 60 * 5 * o.dropped_batches_max_ratio

    return Rule(
        expr=f"sum(increase(trainsignals_batches_dropped_total{raw}[{dropped}])) / "
        f"(sum(increase(trainsignals_batches_dropped_total{raw}[{dropped}])) + "
        f"sum(increase(trainsignals_steps_total{raw}[{dropped}]))) "
        f"> {o.dropped_batches_max_ratio:g}",
        for_seconds=1800,
        summary="{{ $labels.training_job }}: {{ $value | humanizePercentage }} of batches dropped",
        description="{{ $value | humanizePercentage }} of batches were dropped over the last "
        f"{format_duration(o.dropped_batches_window)} (tolerated: "
        f"{o.dropped_batches_max_ratio:.1%}). The model silently sees less data.",
        panel="dropped_batches",
        threshold=f"> {o.dropped_batches_max_ratio:.1%}",
        window=format_duration(o.dropped_batches_window),
        faults=[
            FaultCase(
                "", int(0.25 * o.dropped_batches_window / 60) + 45, job_fault=from_onset(drop)
            )
        ],
    )
