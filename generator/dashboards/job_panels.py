"""The job dashboard's own rows: golden signals, training (with restarts and SLO budget), alerts.

Each row is a function of the job's `PanelBuilder` (dashboards/kit.py), as the goodput,
hardware and where-slow rows are; dashboards/job.py lays the rows out.
"""

from __future__ import annotations

from grafanalib import core as g

from trainsignals.generator.alerts.definitions.gpu_conditions import GPU_MEMORY_NEAR_FULL
from trainsignals.generator.alerts.definitions.recovery import TRAINING_CRASH_LOOPING
from trainsignals.generator.alerts.definitions.slo_burn import SLO_ERROR_BUDGET_BURN_FAST
from trainsignals.generator.alerts.definitions.training import (
    MFU_BELOW_FLOOR,
    STEP_TIME_ABOVE_BOUND,
    THROUGHPUT_BELOW_FLOOR,
    while_stepping,
)
from trainsignals.generator.dashboards.kit import (
    DATASOURCE,
    GREEN,
    ORANGE,
    RED,
    WIDTH,
    PanelBuilder,
    by_name,
    json_thresholds,
    neutral,
    red_above,
    red_above_count,
    red_below,
)
from trainsignals.generator.signals.panels import PANEL_IDS
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.spec.durations import format_duration
from trainsignals.generator.spec.job import CRASH_LOOP_RESTARTS


def golden_signal_panels(b: PanelBuilder) -> list[g.Panel]:
    """The golden signals (step time, throughput, errors, GPU saturation, MFU) as stat panels
    with the thresholds the alerts use."""
    o, r = b.o, b.r
    series, what, floor = _throughput(b.ctx)
    dropped = "dropped batches (ratio)"
    nonfinite = "non-finite losses (5m)"
    memory = "max GPU memory used"
    return [
        b.stat(
            "step_time",
            "Step time p95",
            "95th percentile optimizer step time over 5m"
            + (
                f"; red above the bound of {o.step_time_max_seconds:g}s "
                f"({STEP_TIME_ABOVE_BOUND})."
                if o.step_time_max_seconds is not None
                else "; no bound set in the spec."
            ),
            [b.target(f"job:trainsignals_step_duration_seconds:p95_5m{r}", "p95")],
            "s",
            red_above(o.step_time_max_seconds),
        ),
        b.stat(
            "throughput",
            f"Throughput ({what})",
            f"{what} over 5m; red below the floor of {floor:.4g} ({THROUGHPUT_BELOW_FLOOR}).",
            [b.target(f"{series}{r}", what)],
            "short",
            red_below(floor),
        ),
        b.stat(
            "errors",
            "Errors",
            f"Non-finite losses in 5m (red above {o.nonfinite_losses_max}), failed steps/s, "
            f"dropped batch ratio (red above {o.dropped_batches_max_ratio:g}).",
            b.targets(
                (f"job:trainsignals_nonfinite_losses:increase5m{r}", nonfinite),
                (f"job:trainsignals_failed_steps:rate5m{r}", "failed steps/s"),
                (f"job:trainsignals_batches_dropped:ratio_rate5m{r}", dropped),
            ),
            "short",
            [(GREEN, None)],
            overrides=[
                by_name(
                    nonfinite,
                    {
                        "id": "thresholds",
                        "value": json_thresholds(red_above_count(o.nonfinite_losses_max)),
                    },
                ),
                by_name(
                    dropped,
                    {
                        "id": "thresholds",
                        "value": json_thresholds(red_above(o.dropped_batches_max_ratio)),
                    },
                ),
            ],
            w=6,
        ),
        b.stat(
            "gpu_saturation",
            "GPU saturation",
            "Average GPU utilization of the job, and the fullest GPU's memory "
            f"(red above {o.gpu_memory_max_ratio:.0%}, {GPU_MEMORY_NEAR_FULL}).",
            b.targets(
                (f"avg(gpu:trainsignals_gpu_utilization:ratio{r})", "avg utilization"),
                (f"max(gpu:trainsignals_gpu_memory_used:ratio{r})", memory),
            ),
            "percentunit",
            neutral(),
            overrides=[
                by_name(
                    memory,
                    {
                        "id": "thresholds",
                        "value": json_thresholds(red_above(o.gpu_memory_max_ratio)),
                    },
                )
            ],
        ),
        b.stat(
            "mfu",
            "MFU",
            f"Model FLOPs utilization over 5m; red below the floor of {o.mfu_min_ratio:.0%} "
            f"({MFU_BELOW_FLOOR} averages it over "
            f"{b.ctx.range(o.mfu_window)}).",
            [b.target(f"job:trainsignals_mfu:ratio_rate5m{r}", "MFU")],
            "percentunit",
            red_below(o.mfu_min_ratio),
            w=3,
        ),
    ]

def training_panels(b: PanelBuilder) -> list[g.Panel]:
    """The training row: step time, throughput, MFU, loss, data wait, dropped batches,
    checkpoint age and progress over time, then restarts and the SLOs' error budget."""
    spec, o, r, ctx = b.spec, b.o, b.r, b.ctx
    series, what, floor = _throughput(ctx)
    marker = "non-finite loss seen"
    progress = [(GREEN, None), (ORANGE, ctx.seconds(o.stall_after))]
    if o.max_pause > o.stall_after:
        progress.append((RED, ctx.seconds(o.max_pause)))
    return [
        b.layout.row("Training"),
        b.series(
            "step_time_series",
            "Step time",
            "Optimizer step time quantiles over 5m, data wait included.",
            b.targets(
                (f"job:trainsignals_step_duration_seconds:p50_5m{r}", "p50"),
                (f"job:trainsignals_step_duration_seconds:p95_5m{r}", "p95"),
            ),
            "s",
            red_above(o.step_time_max_seconds),
        ),
        b.series(
            "throughput_series",
            f"Throughput ({what})",
            f"{what} over 5m, and over the last 15m while stepping (what "
            f"{THROUGHPUT_BELOW_FLOOR} compares with the floor: pauses, hangs and restarts "
            "left out).",
            b.targets(
                (f"{series}{r}", what),
                (while_stepping(ctx, series), f"{what} while stepping (15m)"),
            ),
            "short",
            red_below(floor),
        ),
        b.series(
            "mfu_series",
            "MFU",
            f"Model FLOPs utilization (5m), and over the {MFU_BELOW_FLOOR} window while "
            "stepping (what the alert compares with the floor: pauses, hangs and restarts "
            "left out).",
            b.targets(
                (f"job:trainsignals_mfu:ratio_rate5m{r}", "MFU 5m"),
                (
                    while_stepping(ctx, "job:trainsignals_mfu:ratio_rate5m", o.mfu_window),
                    f"MFU while stepping ({format_duration(o.mfu_window)})",
                ),
            ),
            "percentunit",
            red_below(o.mfu_min_ratio),
        ),
        b.series(
            "loss",
            "Loss",
            "Average loss over ranks. Red points: loss at times non-finite (NaN/Inf) losses "
            "were counted in the last 5m.",
            b.targets(
                (f"job:trainsignals_loss:avg{r}", "loss"),
                (
                    f"job:trainsignals_loss:avg{r} and on (training_job) "
                    f"job:trainsignals_nonfinite_losses:increase5m{r} > 0",
                    marker,
                ),
            ),
            "short",
            overrides=[
                by_name(marker, {"id": "color", "value": {"mode": "fixed", "fixedColor": RED}})
            ],
            showPoints="auto",
            pointSize=6,
        ),
        b.series(
            "data_wait",
            "Data-loader wait share",
            "Share of wall time ranks spend waiting for data.",
            b.targets((f"job:trainsignals_data_wait:ratio_rate5m{r}", "data wait")),
            "percentunit",
            red_above(o.data_wait_max_ratio),
        ),
        b.series(
            "dropped_batches",
            "Dropped batches",
            "Dropped batches as a share of batches over 5m (the alert uses "
            f"{ctx.range(o.dropped_batches_window)}).",
            b.targets((f"job:trainsignals_batches_dropped:ratio_rate5m{r}", "dropped")),
            "percentunit",
            red_above(o.dropped_batches_max_ratio),
        ),
        b.series(
            "checkpoint_age",
            "Checkpoint age",
            "Time since the newest successful checkpoint.",
            b.targets((f"job:trainsignals_last_checkpoint:age_seconds{r}", "age")),
            "s",
            red_above(ctx.seconds(o.checkpoint_max_age)),
        ),
        b.series(
            "step_progress",
            "Time since last step",
            "Age of the slowest rank's last step: orange past the stall limit (while "
            "training), red past the pause limit.",
            b.targets((f"job:trainsignals_last_step:age_seconds{r}", "last step age")),
            "s",
            progress,
        ),
        b.series(
            "targets_up",
            "Targets up",
            f"Training ranks up (the spec expects {spec.shape.gpus}) and, per node, whether "
            "any of its targets answers.",
            b.targets(
                (f"job:trainsignals_ranks_up:sum{r}", "ranks up"),
                (f"node:trainsignals_targets_up:max{b.r_node}", "{{node}} up"),
            ),
            "short",
            red_below(spec.shape.gpus),
        ),
        _restarts_panel(b),
        *_slo_budget_panels(b),
    ]

def _restarts_panel(b: PanelBuilder) -> g.Panel:
    rec, r = b.spec.recovery, b.r
    window = format_duration(rec.restart_window)
    red_from = CRASH_LOOP_RESTARTS if rec.max_restarts is None else rec.max_restarts + 1
    counts = [
        (f"job:trainsignals_restarts:changes1h{r}", "restarts 1h"),
        (f"job:trainsignals_restarts:changes1d{r}", "restarts 1d"),
    ]
    if window not in ("1h", "1d"):
        counts.append((f"job:trainsignals_restarts:changes{window}{r}", f"restarts {window}"))
    return b.series(
        "restarts",
        "Restarts",
        f"Job restarts (new incarnations of rank 0) per {_windows(window)}. "
        f"{TRAINING_CRASH_LOOPING} ({rec.mode}) fires for {CRASH_LOOP_RESTARTS} restarts in "
        f"{window} without progress (the global step's high-water mark did not advance)"
        + ("" if rec.max_restarts is None else f", or past {rec.max_restarts} in any case")
        + ".",
        b.targets(*counts),
        "short",
        red_above_count(red_from - 1),
    )

def _slo_budget_panels(b: PanelBuilder) -> list[g.Panel]:
    """Error budget left per SLO; only for specs that declare SLOs (else it is empty)."""
    if not b.spec.slos:
        return []
    return [
        b.stat(
            "slo",
            "Error budget remaining",
            "Share of each SLO's error budget left over its period (burn-rate alerts: "
            f"{SLO_ERROR_BUDGET_BURN_FAST} / Slow). Red once the budget is spent.",
            [
                b.target(
                    "job:trainsignals_slo_error_budget:remaining_ratio"
                    + b.ctx.recorded(slo=slo.sli),
                    f"{slo.sli} ({slo.objective:.4g})",
                    ref=chr(ord("A") + i),
                )
                for i, slo in enumerate(b.spec.slos)
            ],
            "percentunit",
            red_below(0.0),
            w=6,
        )
    ]

def firing_alerts_panels(b: PanelBuilder) -> list[g.Panel]:
    """The last row: the job's alerts firing now, as a table."""
    return [
        b.layout.row("Alerts"),
        g.Table(
            id=PANEL_IDS["firing_alerts"],
            title="Firing alerts",
            description="Alerts of this job firing now, as Prometheus evaluates them.",
            targets=[b.target(firing_alerts_expr(b.ctx), "", format="table", instant=True)],
            dataSource=DATASOURCE,
            gridPos=b.layout.place(WIDTH, 8),
            sortBy=[g.TableSortByField(displayName="alertname")],
            maxDataPoints=None,
            transformations=[
                {
                    "id": "organize",
                    "options": {
                        "excludeByName": {
                            "Time": True,
                            "Value": True,
                            "__name__": True,
                            "alertstate": True,
                        }
                    },
                }
            ],
        ),
    ]


def firing_alerts_expr(ctx: RuleContext) -> str:
    """The job's firing alerts: the Alerts row's table and the dashboard's annotation."""
    return f"ALERTS{ctx.recorded(alertstate='firing')}"


def _throughput(ctx: RuleContext) -> tuple[str, str, float]:
    """(recorded series, unit in words, floor) as ThroughputBelowFloor uses them
    (generator/alerts/definitions/training.py).

    Tokens/s when the spec has a tokens/s floor (explicit, or derived from FLOPs per token);
    otherwise steps/s against half the step rate the MFU floor implies.
    """
    spec = ctx.spec
    if spec.tokens_per_second_floor is not None:
        return "job:trainsignals_tokens:rate5m", "tokens/s", spec.tokens_per_second_floor
    return "job:trainsignals_steps:rate5m", "steps/s", spec.steps_per_second_floor or 0.0


def _windows(window: str) -> str:
    """ "hour and day", or "hour, day and 6h": the restart window once, not "per 1h" again."""
    names = ["hour", "day"] + ([] if window in ("1h", "1d") else [window])
    return ", ".join(names[:-1]) + " and " + names[-1]
