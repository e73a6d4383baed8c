"""Alerting rules: one definition per alert, thresholds straight from the spec's objectives."""

from __future__ import annotations

from dataclasses import dataclass

from . import slo
from .alert_catalog import BY_NAME
from .durations import format_duration
from .gpu_sources import gpu_source
from .panels import PANEL_IDS, dashboard_uid
from .promql import RuleContext


@dataclass(frozen=True)
class AlertRule:
    name: str
    expr: str
    for_seconds: int  # nominal (unscaled)
    summary: str
    description: str
    panel: str
    threshold: str  # for `explain` and the runbook: the value that fires it, in words
    window: str  # the evaluation window(s), in words


def _training(ctx: RuleContext) -> str:
    return f"on (training_job) job:trainsignals_phase_train:min{ctx.recorded()} == 1"


# Window of the training-time averages below. A `for` on an instantaneous phase gate would
# restart at every eval or checkpoint pause: a job pausing more often than the `for` could
# never alert. Averaging only the samples taken while training, pauses leave gaps instead.
TRAINING_WINDOW = 900
STEP_TIME_QUANTILE = 0.95  # the step-time bound is on p95


def _training_average(ctx: RuleContext, expr: str) -> str:
    """`expr` averaged over the samples of the last 15 minutes taken while training."""
    return (
        f"avg_over_time(({expr} and {_training(ctx)})"
        f"[{ctx.range(TRAINING_WINDOW)}:{ctx.range(60)}])"
    )


def _recovery_alerts(ctx: RuleContext) -> list[AlertRule]:
    """The symptoms that the self-healing loop (restart from checkpoint) failed."""
    spec, o, r = ctx.spec, ctx.spec.objectives, ctx.recorded()
    rec = spec.recovery
    budget, pause_limit = rec.restart_budget, max(rec.restart_budget, o.max_pause)
    # The last step of any rank, remembered through a restart or an outage (when every target
    # is gone the recorded series stops, max_over_time keeps its last value).
    since = (
        f"time() - max_over_time(job:trainsignals_last_step:timestamp_max{r}"
        f"[{ctx.range(rec.restart_window)}])"
    )
    window = format_duration(rec.restart_window)
    return [
        AlertRule(
            "TrainingNoProgress",
            f"({since} > {ctx.seconds(budget):g} unless on (training_job) "
            f"job:trainsignals_phase_paused:max{r} == 1) or {since} > {ctx.seconds(pause_limit):g}",
            60,
            "{{ $labels.training_job }}: no training progress for {{ $value | humanizeDuration }}",
            "No rank has completed a training step for {{ $value | humanizeDuration }}, longer "
            f"than the restart budget of {format_duration(budget)} (or "
            f"{format_duration(pause_limit)} in an announced eval/checkpoint pause). The job is "
            "down, hung, or an automatic restart did not bring it back: the self-healing loop "
            "failed and a human must act.",
            "step_progress",
            f"no step for > {format_duration(budget)}",
            "instant",
        ),
        AlertRule(
            "TrainingCrashLooping",
            f"job:trainsignals_restarts:changes{window}{r} > {rec.max_restarts}",
            60,
            "{{ $labels.training_job }}: {{ $value }} restarts in " + window,
            "The job restarted {{ $value }} times in the last " + window + " (allowed: "
            f"{rec.max_restarts}). Automatic restarts keep failing: look for the node, GPU or "
            "checkpoint that every restart trips over (the infra tickets of the same window name "
            "it).",
            "restarts",
            f"> {rec.max_restarts} restarts in {window}",
            window,
        ),
        AlertRule(
            "TrainingRestartsOnBadNode",
            # Three changes of the 0/1 fault indicator = a second incident on that node.
            f"changes(node:trainsignals_hardware_fault:bool{r}[{ctx.range(rec.restart_window)}]) "
            f">= 3 and on (training_job) job:trainsignals_restarts:changes{window}{r} >= 2",
            60,
            "{{ $labels.training_job }}: node {{ $labels.node }} failed again after a restart",
            "Hardware fault alerts named {{ $labels.node }} in two separate incidents within "
            f"the last {window}, and the job restarted in between: it is being restarted onto "
            "the node that broke it. Drain the node and restart without it.",
            "restarts",
            f"2 hardware incidents on one node + >= 2 restarts in {window}",
            window,
        ),
    ]


def _job_alerts(ctx: RuleContext) -> list[AlertRule]:
    spec, o, r = ctx.spec, ctx.spec.objectives, ctx.recorded()
    expected_ranks = spec.shape.gpus
    rules = [
        AlertRule(
            "TrainingTargetsDown",
            f"job:trainsignals_ranks_up:sum{r} < {expected_ranks}",
            # Restarting ranks are missing for a while; only longer than that is news.
            spec.recovery.restart_budget if spec.recovery.automatic else 120,
            "{{ $labels.training_job }}: only {{ $value }} of "
            f"{expected_ranks} training ranks are up",
            "Prometheus scrapes {{ $value }} healthy training targets where the spec expects "
            f"{expected_ranks} ({spec.shape.nodes} nodes x {spec.shape.gpus_per_node} GPUs). "
            "A rank crashed, was evicted, or its target vanished from service discovery.",
            "targets_up",
            f"< {expected_ranks} ranks up",
            "instant",
        ),
        AlertRule(
            "TrainingStalled",
            f"(job:trainsignals_last_step:age_seconds{r} > {ctx.seconds(o.stall_after):g} "
            f"and {_training(ctx)}) "
            f"or job:trainsignals_last_step:age_seconds{r} > {ctx.seconds(o.max_pause):g}",
            60,
            "{{ $labels.training_job }}: no training step for {{ $value | humanizeDuration }}",
            "The slowest rank last completed a step {{ $value | humanizeDuration }} ago while "
            f"the processes are up (limit {format_duration(o.stall_after)} while training, "
            f"{format_duration(o.max_pause)} in eval/checkpoint/warm-up pauses). GPUs may still "
            "look busy: a hung collective (NCCL) spins at 100% utilization.",
            "step_progress",
            f"no step for > {format_duration(o.stall_after)} (train) / "
            f"{format_duration(o.max_pause)} (any phase)",
            "instant",
        ),
        AlertRule(
            "NonFiniteLoss",
            f"job:trainsignals_nonfinite_losses:increase5m{r} > {o.nonfinite_losses_max}",
            60,
            "{{ $labels.training_job }}: {{ $value | humanize }} NaN/Inf losses in 5m",
            "The loss was NaN or infinite {{ $value | humanize }} times in the last 5 minutes "
            f"(tolerated: {o.nonfinite_losses_max}). Updates after a non-finite loss corrupt "
            "the weights unless the step is skipped.",
            "loss",
            f"> {o.nonfinite_losses_max} in 5m",
            "5m",
        ),
        AlertRule(
            "LossDiverging",
            f"job:trainsignals_loss:avg10m{r} > {o.loss_spike_factor:g} * "
            f"min_over_time(job:trainsignals_loss:avg10m{r}"
            f"[{ctx.range(o.loss_divergence_window)}])",
            300,
            "{{ $labels.training_job }}: loss {{ $value | humanize }} is over "
            f"{o.loss_spike_factor:g}x its best of the last "
            f"{format_duration(o.loss_divergence_window)}",
            "The loss averaged over ranks and 10 minutes is {{ $value | humanize }}, more than "
            f"{o.loss_spike_factor:g} times its lowest 10-minute average of the last "
            f"{format_duration(o.loss_divergence_window)}, for 5 minutes: the run is diverging "
            "(a sudden spike or a steady climb).",
            "loss",
            f"> {o.loss_spike_factor:g} x best 10m average",
            f"{format_duration(o.loss_divergence_window)} baseline",
        ),
    ]
    floor = spec.tokens_per_second_floor
    if floor is not None:
        rules.append(
            AlertRule(
                "ThroughputBelowFloor",
                f"{_training_average(ctx, f'job:trainsignals_tokens:rate5m{r}')} < {floor:.6g}",
                300,
                "{{ $labels.training_job }}: {{ $value | humanize }} tokens/s, floor "
                f"{floor:.4g}",
                "Over its last 15 minutes of training the job averaged "
                "{{ $value | humanize }} tokens/s, below the floor "
                f"of {floor:.4g} tokens/s (eval and checkpoint pauses are left out).",
                "throughput",
                f"< {floor:.4g} tokens/s",
                "15m of training",
            )
        )
    else:
        steps_floor = spec.steps_per_second_floor or 0.0
        rules.append(
            AlertRule(
                "ThroughputBelowFloor",
                f"{_training_average(ctx, f'job:trainsignals_steps:rate5m{r}')} "
                f"< {steps_floor:.6g}",
                300,
                "{{ $labels.training_job }}: {{ $value | humanize }} steps/s, floor "
                f"{steps_floor:.4g}",
                "Over its last 15 minutes of training the job averaged "
                "{{ $value | humanize }} steps/s, below the floor "
                f"of {steps_floor:.4g} steps/s (eval and checkpoint pauses are left out).",
                "throughput",
                f"< {steps_floor:.4g} steps/s",
                "15m of training",
            )
        )
    if o.step_time_max_seconds is not None:
        rules.append(
            AlertRule(
                "StepTimeAboveBound",
                # p95 > bound exactly when more than 5% of steps are slower than the bound.
                _training_average(
                    ctx, f"job:trainsignals_step_duration_seconds:above_bound_ratio_rate5m{r}"
                )
                + f" > {1 - STEP_TIME_QUANTILE:g}",
                300,
                "{{ $labels.training_job }}: {{ $value | humanizePercentage }} of steps slower "
                f"than {o.step_time_max_seconds:g}s",
                "Over the last 15 minutes of training, {{ $value | humanizePercentage }} of steps "
                f"took longer than the bound of {o.step_time_max_seconds:g}s: the p95 step time "
                f"is above it (more than {1 - STEP_TIME_QUANTILE:.0%} of steps over).",
                "step_time",
                f"p95 > {o.step_time_max_seconds:g}s "
                f"(> {1 - STEP_TIME_QUANTILE:.0%} of steps over)",
                "15m of training",
            )
        )
    mfu_window = ctx.range(o.mfu_window)
    dropped = ctx.range(o.dropped_batches_window)
    raw = ctx.raw()
    plateau_avg = ctx.range(min(3600, o.loss_plateau_window / 6))
    rules += [
        AlertRule(
            "DataLoaderStarved",
            f"{_training_average(ctx, f'job:trainsignals_data_wait:ratio_rate5m{r}')} "
            f"> {o.data_wait_max_ratio:g}",
            300,
            "{{ $labels.training_job }}: ranks wait for data {{ $value | humanizePercentage }} "
            "of the time",
            "Over the last 15 minutes of training, ranks spent {{ $value | humanizePercentage }} "
            "of wall time waiting for the data loader (tolerated: "
            f"{o.data_wait_max_ratio:.0%}). The GPUs are busy-but-starved: utilization looks "
            "fine between waits while throughput suffers.",
            "data_wait",
            f"> {o.data_wait_max_ratio:.0%} of wall time",
            "15m of training",
        ),
        AlertRule(
            "MfuBelowFloor",
            # MFU while training, averaged over the window: pauses are goodput's business, and a
            # phase gate outside the average would reset the 1h `for` at every checkpoint.
            f"avg_over_time((job:trainsignals_mfu:ratio_rate5m{r} and {_training(ctx)})"
            f"[{mfu_window}:{ctx.range(300)}]) < {o.mfu_min_ratio:g}",
            3600,
            "{{ $labels.training_job }}: MFU {{ $value | humanizePercentage }} over "
            f"{format_duration(o.mfu_window)}",
            "Model FLOPs utilization averaged {{ $value | humanizePercentage }} over the last "
            f"{format_duration(o.mfu_window)}, below the floor of {o.mfu_min_ratio:.0%}. "
            "Slow leaks (a straggler, a throttling node, a growing data wait) show here first.",
            "mfu",
            f"< {o.mfu_min_ratio:.0%}",
            format_duration(o.mfu_window),
        ),
        AlertRule(
            "DroppedBatchesAboveTolerance",
            f"sum(increase(trainsignals_batches_dropped_total{raw}[{dropped}])) / "
            f"(sum(increase(trainsignals_batches_dropped_total{raw}[{dropped}])) + "
            f"sum(increase(trainsignals_steps_total{raw}[{dropped}]))) "
            f"> {o.dropped_batches_max_ratio:g}",
            1800,
            "{{ $labels.training_job }}: {{ $value | humanizePercentage }} of batches dropped",
            "{{ $value | humanizePercentage }} of batches were dropped over the last "
            f"{format_duration(o.dropped_batches_window)} (tolerated: "
            f"{o.dropped_batches_max_ratio:.1%}). The model silently sees less data.",
            "dropped_batches",
            f"> {o.dropped_batches_max_ratio:.1%}",
            format_duration(o.dropped_batches_window),
        ),
        AlertRule(
            "LossPlateau",
            f"(avg_over_time(job:trainsignals_loss:avg{r}[{plateau_avg}] "
            f"offset {ctx.duration(o.loss_plateau_window)}) - "
            f"avg_over_time(job:trainsignals_loss:avg{r}[{plateau_avg}])) / "
            f"avg_over_time(job:trainsignals_loss:avg{r}[{plateau_avg}] "
            f"offset {ctx.duration(o.loss_plateau_window)}) "
            f"< {o.loss_plateau_min_improvement_ratio:g}",
            3600,
            "{{ $labels.training_job }}: loss improved {{ $value | humanizePercentage }} in "
            f"{format_duration(o.loss_plateau_window)}",
            "The loss improved by {{ $value | humanizePercentage }} over the last "
            f"{format_duration(o.loss_plateau_window)} (expected at least "
            f"{o.loss_plateau_min_improvement_ratio:.0%}). Compute may be wasted.",
            "loss",
            f"< {o.loss_plateau_min_improvement_ratio:.0%} improvement",
            format_duration(o.loss_plateau_window),
        ),
        AlertRule(
            "CheckpointTooOld",
            f"job:trainsignals_last_checkpoint:age_seconds{r} > "
            f"{ctx.seconds(o.checkpoint_max_age):g}",
            600,
            "{{ $labels.training_job }}: last checkpoint {{ $value | humanizeDuration }} ago",
            "The newest successful checkpoint is {{ $value | humanizeDuration }} old (limit "
            f"{format_duration(o.checkpoint_max_age)}). A crash now loses all work since then.",
            "checkpoint_age",
            f"> {format_duration(o.checkpoint_max_age)}",
            "instant",
        ),
        AlertRule(
            "CheckpointDiskAlmostFull",
            f"node:trainsignals_checkpoint_disk_free:ratio{r} < {o.disk_free_min_ratio:g}",
            300,
            "{{ $labels.training_job }}: checkpoint disk on {{ $labels.node }} "
            "{{ $value | humanizePercentage }} free",
            "{{ $labels.path }} on {{ $labels.node }} has {{ $value | humanizePercentage }} "
            f"free (floor {o.disk_free_min_ratio:.0%}). The next checkpoint may fail to write.",
            "disk",
            f"< {o.disk_free_min_ratio:.0%} free",
            "instant",
        ),
        AlertRule(
            "CheckpointDiskFillingUp",
            # The trend of the last hour, sustained for 15 minutes: a 6h regression plus a 1h
            # `for` needed over two hours to ticket a disk that fills in three.
            f"predict_linear(node:trainsignals_checkpoint_disk_free:bytes{r}"
            f"[{ctx.range(3600)}], "
            f"{ctx.seconds(o.disk_full_horizon):g}) < 0",
            900,
            "{{ $labels.training_job }}: checkpoint disk on {{ $labels.node }} fills within "
            f"{format_duration(o.disk_full_horizon)}",
            "At the rate of the last hour (sustained for 15 minutes), {{ $labels.path }} on "
            "{{ $labels.node }} runs out of space within "
            f"{format_duration(o.disk_full_horizon)}.",
            "disk",
            f"full within {format_duration(o.disk_full_horizon)}",
            "1h trend",
        ),
    ]
    return rules


def _node_alerts(ctx: RuleContext) -> list[AlertRule]:
    spec, o, r = ctx.spec, ctx.spec.objectives, ctx.recorded()
    source = gpu_source(ctx)
    gpus = spec.shape.gpus_per_node
    rules = [
        AlertRule(
            "NodeDown",
            f"node:trainsignals_targets_up:max{r} == 0",
            120,
            "{{ $labels.training_job }}: node {{ $labels.node }} is down",
            "Neither the GPU exporter nor any training rank on {{ $labels.node }} answers "
            "scrapes. The node crashed, lost its network, or was preempted.",
            "targets_up",
            "every target of a node down",
            "instant",
        ),
        AlertRule(
            "GpuLost",
            f"gpu:trainsignals_gpu_up:value{r} == 0 or on (training_job, node) "
            f"node:trainsignals_gpus:count{r} < {gpus}",
            60,
            "{{ $labels.training_job }}: GPU lost on {{ $labels.node }} {{ $labels.gpu }}",
            "A GPU on {{ $labels.node }} stopped answering NVML (fell off the bus, XID 79) or "
            f"the node reports fewer than {gpus} GPUs (value: {{{{ $value }}}}).",
            "gpu_count",
            f"GPU unreachable or < {gpus} per node",
            "instant",
        ),
        AlertRule(
            "GpuUncorrectableEccErrors",
            f"gpu:trainsignals_gpu_ecc_uncorrected:increase10m{r} > 0",
            60,
            "{{ $labels.training_job }}: uncorrectable ECC errors on {{ $labels.node }} "
            "GPU {{ $labels.gpu }}",
            "GPU {{ $labels.gpu }} on {{ $labels.node }} reported {{ $value | humanize }} "
            "uncorrectable ECC errors in 10 minutes. Results computed there may be corrupt.",
            "gpu_errors",
            "> 0 in 10m",
            "10m",
        ),
        AlertRule(
            "GpuXidCritical",
            f"gpu:trainsignals_gpu_xid_critical:seen10m{r} > 0",
            60,
            "{{ $labels.training_job }}: critical XID on {{ $labels.node }} GPU {{ $labels.gpu }}",
            "GPU {{ $labels.gpu }} on {{ $labels.node }} reported XID {{ $labels.xid }} "
            f"(page codes: {', '.join(map(str, o.xid_page_codes))}).",
            "gpu_errors",
            f"XID in {list(o.xid_page_codes)}",
            "10m",
        ),
        AlertRule(
            "GpuXidError",
            f"gpu:trainsignals_gpu_xid_other:seen10m{r} > 0",
            60,
            "{{ $labels.training_job }}: XID {{ $labels.xid }} on {{ $labels.node }} GPU "
            "{{ $labels.gpu }}",
            "GPU {{ $labels.gpu }} on {{ $labels.node }} reported an XID error outside the "
            "page list, usually an application fault (13, 31, 43, 45).",
            "gpu_errors",
            "other XID",
            "10m",
        ),
        AlertRule(
            "GpuRemappedRowsPending",
            f"gpu:trainsignals_gpu_remapped_rows:pending{r} > 0",
            600,
            "{{ $labels.training_job }}: row remapping pending on {{ $labels.node }} GPU "
            "{{ $labels.gpu }}",
            "GPU {{ $labels.gpu }} on {{ $labels.node }} has a pending or failed memory row "
            "remapping; it needs a reset at the next restart.",
            "gpu_errors",
            "pending",
            "instant",
        ),
        AlertRule(
            "GpuThermalThrottling",
            f"avg_over_time(gpu:trainsignals_gpu_thermal_throttle:active{r}"
            f"[{ctx.range(900)}]) > {o.throttle_max_ratio:g}",
            900,
            "{{ $labels.training_job }}: {{ $labels.node }} GPU {{ $labels.gpu }} thermally "
            "throttled {{ $value | humanizePercentage }} of the time",
            "Thermal slowdown held GPU {{ $labels.gpu }} on {{ $labels.node }} down for "
            "{{ $value | humanizePercentage }} of the last 15 minutes (tolerated "
            f"{o.throttle_max_ratio:.0%}). The whole job runs at the slowest GPU's pace.",
            "gpu_throttle",
            f"> {o.throttle_max_ratio:.0%} of time",
            "15m",
        ),
        AlertRule(
            "GpuPowerThrottling",
            f"avg_over_time(gpu:trainsignals_gpu_power_throttle:active{r}"
            f"[{ctx.range(900)}]) > {o.throttle_max_ratio:g}",
            900,
            "{{ $labels.training_job }}: {{ $labels.node }} GPU {{ $labels.gpu }} power "
            "throttled {{ $value | humanizePercentage }} of the time",
            "Power capping or power brake held GPU {{ $labels.gpu }} on {{ $labels.node }} "
            "down for {{ $value | humanizePercentage }} of the last 15 minutes (tolerated "
            f"{o.throttle_max_ratio:.0%}).",
            "gpu_throttle",
            f"> {o.throttle_max_ratio:.0%} of time",
            "15m",
        ),
        AlertRule(
            "GpuTemperatureHigh",
            f"gpu:trainsignals_gpu_temperature:celsius{r} > {o.gpu_temperature_max_celsius:g}",
            600,
            "{{ $labels.training_job }}: {{ $labels.node }} GPU {{ $labels.gpu }} at "
            "{{ $value }} C",
            "GPU {{ $labels.gpu }} on {{ $labels.node }} runs at {{ $value }} C, above "
            f"{o.gpu_temperature_max_celsius:g} C, for 10 minutes.",
            "gpu_temperature",
            f"> {o.gpu_temperature_max_celsius:g} C",
            "instant",
        ),
        AlertRule(
            "GpuMemoryNearFull",
            f"gpu:trainsignals_gpu_memory_used:ratio{r} > {o.gpu_memory_max_ratio:g}",
            1800,
            "{{ $labels.training_job }}: {{ $labels.node }} GPU {{ $labels.gpu }} memory "
            "{{ $value | humanizePercentage }} used",
            "GPU {{ $labels.gpu }} on {{ $labels.node }} uses {{ $value | humanizePercentage }} "
            f"of its memory (limit {o.gpu_memory_max_ratio:.0%}) for 30 minutes.",
            "gpu_memory",
            f"> {o.gpu_memory_max_ratio:.0%}",
            "instant",
        ),
        AlertRule(
            "GpuExporterDown",
            f"up{ctx.gpu_targets()} == 0 and on (node) "
            f"max by (node) (up{ctx.training_targets()}) > 0",
            600,
            "{{ $labels.training_job }}: GPU exporter on {{ $labels.node }} is down",
            "The GPU exporter on {{ $labels.node }} does not answer scrapes while the node's "
            "training ranks do: GPU faults on that node go unseen.",
            "gpu_count",
            "exporter down, node up",
            "instant",
        ),
    ]
    if source.reports_nvml_errors:
        rules.append(
            AlertRule(
                "GpuExporterNvmlErrors",
                f"gpu:trainsignals_gpu_nvml_errors:rate15m{r} > 0",
                900,
                "{{ $labels.training_job }}: NVML errors on {{ $labels.node }} GPU "
                "{{ $labels.gpu }}",
                "The GPU exporter gets {{ $value | humanize }} NVML errors per second for GPU "
                "{{ $labels.gpu }} on {{ $labels.node }}; some of its metrics are missing.",
                "gpu_errors",
                "> 0/s",
                "15m",
            )
        )
    return rules


def _slo_alerts(ctx: RuleContext) -> list[AlertRule]:
    if not ctx.spec.slos:
        return []
    budget = "{{ $labels.slo }} SLO of {{ $labels.training_job }}"
    return [
        AlertRule(
            "SloErrorBudgetBurnFast",
            slo.burn_expr(ctx, slo.FAST),
            120,
            f"{budget} burns its error budget fast",
            f"The {budget} loses {{{{ $value | humanizePercentage }}}} of its events: at this "
            "rate a 30-day error budget is gone within days. Long and short windows agree, "
            "so the burn is happening now.",
            "slo",
            slo.describe(ctx, slo.FAST),
            "1h&5m, 6h&30m",
        ),
        AlertRule(
            "SloErrorBudgetBurnSlow",
            slo.burn_expr(ctx, slo.SLOW),
            3600,
            f"{budget} burns its error budget steadily",
            f"The {budget} loses {{{{ $value | humanizePercentage }}}} of its events over a "
            "day or more: the budget runs out before the period ends unless this is fixed.",
            "slo",
            slo.describe(ctx, slo.SLOW),
            "1d&2h, 3d&6h",
        ),
    ]


def alert_rules(ctx: RuleContext) -> list[AlertRule]:
    """Every alert the spec enables, in catalogue order."""
    built = (*_recovery_alerts(ctx), *_job_alerts(ctx), *_node_alerts(ctx), *_slo_alerts(ctx))
    by_name = {a.name: a for a in built}
    return [
        by_name[a.name]
        for a in BY_NAME.values()
        if a.name in by_name and severity(ctx, a.name) != "off"
    ]


def severity(ctx: RuleContext, name: str) -> str:
    """The spec's choice, else the catalogue's default for the job's recovery mode."""
    return ctx.spec.alerts.get(name, BY_NAME[name].severity_for(ctx.spec.recovery.mode))


def team(ctx: RuleContext, name: str) -> str:
    """Hardware tickets go to whoever repairs hardware; pages to whoever must act now."""
    if BY_NAME[name].owner == "infra" and severity(ctx, name) == "ticket":
        return ctx.spec.infra_team
    return ctx.spec.team


def render_alert(ctx: RuleContext, alert: AlertRule) -> dict:
    spec = ctx.spec
    uid = dashboard_uid(spec.name)
    rule: dict = {"alert": alert.name, "expr": alert.expr}
    if alert.for_seconds:
        rule["for"] = ctx.duration(alert.for_seconds)
    rule["labels"] = {
        "job": spec.name,
        "severity": severity(ctx, alert.name),
        "team": team(ctx, alert.name),
        "training_job": spec.name,
    }
    rule["annotations"] = {
        "dashboard_url": f"{spec.links.grafana_base_url}/d/{uid}/{spec.name}"
        f"?viewPanel={PANEL_IDS[alert.panel]}",
        "description": alert.description,
        "runbook_url": f"{spec.links.runbook_base_url}/{alert.name}.md",
        "summary": alert.summary,
    }
    return rule
