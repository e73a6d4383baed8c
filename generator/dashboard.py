"""The job's Grafana dashboard: golden signals on top, then training, GPU and node drill-downs.

Panels are built with grafanalib and normalised once (`grafana_normalize`) into the JSON model
Grafana's schema accepts. Every query reads recorded series (the rules already rate and
aggregate), so panels and alerts show the same numbers, and stat thresholds come from the same
spec fields the alerts compare against.
"""

from __future__ import annotations

from grafanalib import core as g

from .alertdefs.training import while_stepping
from .alerts import AlertRule
from .dashboard_hardware import gpu_panels, node_panels
from .dashboard_kit import (  # noqa: F401  (iter_panels, panel_queries: the dashboard's readers)
    BLUE,
    DATASOURCE,
    GREEN,
    ORANGE,
    RED,
    SCHEMA_VERSION,
    WIDTH,
    PanelBuilder,
    by_name,
    iter_panels,
    json_thresholds,
    multi_value_variable,
    neutral,
    panel_queries,
    red_above,
    red_above_count,
    red_below,
)
from .durations import format_duration
from .goodput_panels import goodput_panels
from .grafana_normalize import grafanalib_json, normalized_grafanalib
from .panels import PANEL_IDS, dashboard_uid
from .promql import RuleContext, regex
from .spec import CRASH_LOOP_RESTARTS


class _Builder(PanelBuilder):
    # Sections.

    def golden_signals(self) -> list[g.Panel]:
        o, r = self.o, self.r
        series, what, floor = _throughput(self.ctx)
        dropped = "dropped batches (ratio)"
        nonfinite = "non-finite losses (5m)"
        memory = "max GPU memory used"
        return [
            self.stat(
                "step_time",
                "Step time p95",
                "95th percentile optimizer step time over 5m"
                + (
                    f"; red above the bound of {o.step_time_max_seconds:g}s (StepTimeAboveBound)."
                    if o.step_time_max_seconds is not None
                    else "; no bound set in the spec."
                ),
                [self.target(f"job:trainsignals_step_duration_seconds:p95_5m{r}", "p95")],
                "s",
                red_above(o.step_time_max_seconds),
            ),
            self.stat(
                "throughput",
                f"Throughput ({what})",
                f"{what} over 5m; red below the floor of {floor:.4g} (ThroughputBelowFloor).",
                [self.target(f"{series}{r}", what)],
                "short",
                red_below(floor),
            ),
            self.stat(
                "errors",
                "Errors",
                f"Non-finite losses in 5m (red above {o.nonfinite_losses_max}), failed steps/s, "
                f"dropped batch ratio (red above {o.dropped_batches_max_ratio:g}).",
                self.targets(
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
            self.stat(
                "gpu_saturation",
                "GPU saturation",
                "Average GPU utilization of the job, and the fullest GPU's memory "
                f"(red above {o.gpu_memory_max_ratio:.0%}, GpuMemoryNearFull).",
                self.targets(
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
            self.stat(
                "mfu",
                "MFU",
                f"Model FLOPs utilization over 5m; red below the floor of {o.mfu_min_ratio:.0%} "
                "(MfuBelowFloor averages it over "
                f"{self.ctx.range(o.mfu_window)}).",
                [self.target(f"job:trainsignals_mfu:ratio_rate5m{r}", "MFU")],
                "percentunit",
                red_below(o.mfu_min_ratio),
                w=3,
            ),
        ]

    def training(self) -> list[g.Panel]:
        spec, o, r, ctx = self.spec, self.o, self.r, self.ctx
        series, what, floor = _throughput(ctx)
        marker = "non-finite loss seen"
        progress = [(GREEN, None), (ORANGE, ctx.seconds(o.stall_after))]
        if o.max_pause > o.stall_after:
            progress.append((RED, ctx.seconds(o.max_pause)))
        return [
            self.layout.row("Training"),
            self.series(
                "step_time_series",
                "Step time",
                "Optimizer step time quantiles over 5m, data wait included.",
                self.targets(
                    (f"job:trainsignals_step_duration_seconds:p50_5m{r}", "p50"),
                    (f"job:trainsignals_step_duration_seconds:p95_5m{r}", "p95"),
                ),
                "s",
                red_above(o.step_time_max_seconds),
            ),
            self.series(
                "throughput_series",
                f"Throughput ({what})",
                f"{what} over 5m, and over the last 15m while stepping (what "
                "ThroughputBelowFloor compares with the floor: pauses, hangs and restarts left "
                "out).",
                self.targets(
                    (f"{series}{r}", what),
                    (while_stepping(ctx, series), f"{what} while stepping (15m)"),
                ),
                "short",
                red_below(floor),
            ),
            self.series(
                "mfu_series",
                "MFU",
                "Model FLOPs utilization (5m), and over the MfuBelowFloor window while stepping "
                "(what the alert compares with the floor: pauses, hangs and restarts left out).",
                self.targets(
                    (f"job:trainsignals_mfu:ratio_rate5m{r}", "MFU 5m"),
                    (
                        while_stepping(ctx, "job:trainsignals_mfu:ratio_rate5m", o.mfu_window),
                        f"MFU while stepping ({format_duration(o.mfu_window)})",
                    ),
                ),
                "percentunit",
                red_below(o.mfu_min_ratio),
            ),
            self.series(
                "loss",
                "Loss",
                "Average loss over ranks. Red points: loss at times non-finite (NaN/Inf) losses "
                "were counted in the last 5m.",
                self.targets(
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
            self.series(
                "data_wait",
                "Data-loader wait share",
                "Share of wall time ranks spend waiting for data.",
                self.targets((f"job:trainsignals_data_wait:ratio_rate5m{r}", "data wait")),
                "percentunit",
                red_above(o.data_wait_max_ratio),
            ),
            self.series(
                "dropped_batches",
                "Dropped batches",
                "Dropped batches as a share of batches over 5m (the alert uses "
                f"{ctx.range(o.dropped_batches_window)}).",
                self.targets((f"job:trainsignals_batches_dropped:ratio_rate5m{r}", "dropped")),
                "percentunit",
                red_above(o.dropped_batches_max_ratio),
            ),
            self.series(
                "checkpoint_age",
                "Checkpoint age",
                "Time since the newest successful checkpoint.",
                self.targets((f"job:trainsignals_last_checkpoint:age_seconds{r}", "age")),
                "s",
                red_above(ctx.seconds(o.checkpoint_max_age)),
            ),
            self.series(
                "step_progress",
                "Time since last step",
                "Age of the slowest rank's last step: orange past the stall limit (while "
                "training), red past the pause limit.",
                self.targets((f"job:trainsignals_last_step:age_seconds{r}", "last step age")),
                "s",
                progress,
            ),
            self.series(
                "targets_up",
                "Targets up",
                f"Training ranks up (the spec expects {spec.shape.gpus}) and, per node, whether "
                "any of its targets answers.",
                self.targets(
                    (f"job:trainsignals_ranks_up:sum{r}", "ranks up"),
                    (f"node:trainsignals_targets_up:max{self.r_node}", "{{node}} up"),
                ),
                "short",
                red_below(spec.shape.gpus),
            ),
            self.restarts(),
            *self.slo_budget(),
        ]

    def restarts(self) -> g.Panel:
        rec, r = self.spec.recovery, self.r
        window = format_duration(rec.restart_window)
        red_from = CRASH_LOOP_RESTARTS if rec.max_restarts is None else rec.max_restarts + 1
        counts = [
            (f"job:trainsignals_restarts:changes1h{r}", "restarts 1h"),
            (f"job:trainsignals_restarts:changes1d{r}", "restarts 1d"),
        ]
        if window not in ("1h", "1d"):
            counts.append((f"job:trainsignals_restarts:changes{window}{r}", f"restarts {window}"))
        return self.series(
            "restarts",
            "Restarts",
            f"Job restarts (new incarnations of rank 0) per hour, per day and per {window}. "
            f"TrainingCrashLooping ({rec.mode}) fires for {CRASH_LOOP_RESTARTS} restarts in "
            f"{window} without progress (the global step's high-water mark did not advance)"
            + ("" if rec.max_restarts is None else f", or past {rec.max_restarts} in any case")
            + ".",
            self.targets(*counts),
            "short",
            red_above_count(red_from - 1),
        )

    def slo_budget(self) -> list[g.Panel]:
        """Error budget left per SLO; only for specs that declare SLOs (else it is empty)."""
        if not self.spec.slos:
            return []
        return [
            self.stat(
                "slo",
                "Error budget remaining",
                "Share of each SLO's error budget left over its period (burn-rate alerts: "
                "SloErrorBudgetBurnFast / Slow). Red once the budget is spent.",
                [
                    self.target(
                        "job:trainsignals_slo_error_budget:remaining_ratio"
                        + self.ctx.recorded(slo=slo.sli),
                        f"{slo.sli} ({slo.objective:.4g})",
                        ref=chr(ord("A") + i),
                    )
                    for i, slo in enumerate(self.spec.slos)
                ],
                "percentunit",
                red_below(0.0),
                w=6,
            )
        ]

    def firing_alerts(self) -> list[g.Panel]:
        return [
            self.layout.row("Alerts"),
            g.Table(
                id=PANEL_IDS["firing_alerts"],
                title="Firing alerts",
                description="Alerts of this job firing now, as Prometheus evaluates them.",
                targets=[self.target(_alerts_expr(self.ctx), "", format="table", instant=True)],
                dataSource=DATASOURCE,
                gridPos=self.layout.place(WIDTH, 8),
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


def _alerts_expr(ctx: RuleContext) -> str:
    return f"ALERTS{ctx.recorded(alertstate='firing')}"


def _throughput(ctx: RuleContext) -> tuple[str, str, float]:
    """(recorded series, unit in words, floor) as ThroughputBelowFloor in alerts.py uses them.

    Tokens/s when the spec has a tokens/s floor (explicit, or derived from FLOPs per token);
    otherwise steps/s against half the step rate the MFU floor implies.
    """
    spec = ctx.spec
    if spec.tokens_per_second_floor is not None:
        return "job:trainsignals_tokens:rate5m", "tokens/s", spec.tokens_per_second_floor
    return "job:trainsignals_steps:rate5m", "steps/s", spec.steps_per_second_floor or 0.0


def build_dashboard(
    ctx: RuleContext, alerts: list[AlertRule], spec_hash: str, generator_version: str
) -> dict:
    """The job's dashboard as Grafana JSON (schema-valid, deterministic)."""
    return normalized_grafanalib(_dashboard(ctx, alerts, spec_hash, generator_version))


def raw_dashboard(
    ctx: RuleContext, alerts: list[AlertRule], spec_hash: str, generator_version: str
) -> dict:
    """grafanalib's JSON before normalisation (the tests show why the normaliser exists)."""
    return grafanalib_json(_dashboard(ctx, alerts, spec_hash, generator_version))


def _dashboard(
    ctx: RuleContext, alerts: list[AlertRule], spec_hash: str, generator_version: str
) -> g.Dashboard:
    spec = ctx.spec
    b = _Builder(ctx, alerts)
    panels = [
        *b.golden_signals(),
        *b.training(),
        *goodput_panels(b),
        *gpu_panels(b),
        *node_panels(b),
    ]
    panels += b.firing_alerts()
    gpu_series = f"gpu:trainsignals_gpu_utilization:ratio{ctx.recorded()}"
    node_gpu_series = f"gpu:trainsignals_gpu_utilization:ratio{ctx.recorded(node=regex('$node'))}"
    dashboard = g.Dashboard(
        title=f"Training: {spec.name}",
        uid=dashboard_uid(spec.name),
        description=(
            f"Training job {spec.name} (team {spec.team}). Generated by trainsignals "
            f"{generator_version} from jobs/{spec.name}.yaml (spec sha256 {spec_hash}); "
            "do not edit: change the spec and run `make dashboards`."
        ),
        tags=[
            "trainsignals",
            f"generator:{generator_version}",
            f"spec:{spec_hash[:12]}",
            f"team:{spec.team}",
        ],
        editable=False,  # edits would be overwritten by the next generation
        graphTooltip=g.GRAPH_TOOLTIP_MODE_SHARED_CROSSHAIR,
        schemaVersion=SCHEMA_VERSION,
        time=g.Time("now-6h", "now"),
        refresh="30s",
        timezone="utc",
        panels=panels,
        links=[
            g.DashboardLink(
                type="link",
                title="Runbooks",
                uri=spec.links.runbook_base_url,
                icon="doc",
                tooltip="Runbooks of this job's alerts",
                targetBlank=True,
                keepTime=False,
            )
        ],
        templating=g.Templating(
            list=[
                g.Template(
                    name="datasource", label="Data source", type="datasource", query="prometheus"
                ),
                g.Template(
                    name="job",
                    label="Job",
                    type="constant",
                    query=spec.name,
                    default=spec.name,
                    hide=g.HIDE_VARIABLE,
                ),
                multi_value_variable("node", "Node", f"label_values({gpu_series}, node)"),
                multi_value_variable(
                    "gpu", "GPU", f"label_values({node_gpu_series}, gpu)", sort=g.SORT_NUMERIC_ASC
                ),
            ]
        ),
        annotations=g.Annotations(
            list=[
                {
                    "name": "Firing alerts",
                    "datasource": DATASOURCE,
                    "enable": True,
                    "hide": False,
                    "iconColor": RED,
                    "expr": _alerts_expr(ctx),
                    "titleFormat": "{{alertname}}",
                    "textFormat": "{{severity}}: {{alertname}}",
                    "tagKeys": "severity",
                    "useValueForTime": False,
                },
                {
                    # Vertical markers on the loss panel where NaN/Inf losses were counted.
                    "name": "Non-finite losses",
                    "datasource": DATASOURCE,
                    "enable": True,
                    "hide": False,
                    "iconColor": "purple",
                    "expr": f"job:trainsignals_nonfinite_losses:increase5m{ctx.recorded()} > 0",
                    "titleFormat": "non-finite loss",
                    "filter": {"ids": [PANEL_IDS["loss"]]},
                },
            ]
        ),
    )
    return dashboard
