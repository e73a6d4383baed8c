"""The job's Grafana dashboard: golden signals on top, then training, GPU and node drill-downs.

Panels are built with grafanalib and normalised once (`grafana_normalize`) into the JSON model
Grafana's schema accepts. Every query reads recorded series (the rules already rate and
aggregate), so panels and alerts show the same numbers, and stat thresholds come from the same
spec fields the alerts compare against.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field

from grafanalib import core as g

from .alertdefs.training import while_stepping
from .alerts import AlertRule
from .durations import format_duration
from .fabric import fabric_panels
from .goodput_panels import goodput_panels
from .gpu_activity import gpu_activity_panels
from .gpu_mig_panels import mig_panels, nvlink_panel
from .gpu_sources import gpu_source
from .grafana_normalize import grafanalib_json, normalize_dashboard
from .panels import PANEL_IDS, dashboard_uid
from .promql import RuleContext, regex

DATASOURCE = "${datasource}"
SCHEMA_VERSION = 39  # Grafana 10.x/11.x model; newer Grafana migrates it on load
FIRST_EXTRA_ID = 100  # ids below are reserved for PANEL_IDS (alerts link to them)
WIDTH = 24

GREEN, RED, ORANGE, BLUE = "green", "red", "orange", "blue"


# --- thresholds: (color, value) steps, base first -------------------------------------------


def _neutral() -> list[tuple[str, float | None]]:
    return [(BLUE, None)]


def _red_below(floor: float) -> list[tuple[str, float | None]]:
    """Red under `floor`: Grafana colours a step from its value up, matching an alert `< floor`."""
    return [(RED, None), (GREEN, floor)]


def _red_above(bound: float | None) -> list[tuple[str, float | None]]:
    """Red from `bound` up (continuous quantities, where `>=` and `>` do not differ)."""
    return [(GREEN, None)] if bound is None else [(GREEN, None), (RED, bound)]


def _red_above_count(max_count: float) -> list[tuple[str, float | None]]:
    """Red for counts over `max_count`: at exactly the tolerated count (usually 0) it stays green.

    Grafana steps mean `>=`, so the step sits at the next float above the tolerance; that is
    the alert's `> max_count` exactly, including for increase()'s fractional extrapolations.
    """
    return [(GREEN, None), (RED, math.nextafter(max_count, math.inf))]


def _g_thresholds(steps: list[tuple[str, float | None]]) -> list[g.Threshold]:
    return [g.Threshold(color, i, float(value or 0)) for i, (color, value) in enumerate(steps)]


def _json_thresholds(steps: list[tuple[str, float | None]]) -> dict:
    """Thresholds as an override value (grafanalib writes those only as raw JSON)."""
    return {"mode": "absolute", "steps": [{"color": c, "value": v} for c, v in steps]}


def _by_name(name: str, *properties: dict) -> dict:
    # `byNames` takes an options object; Grafana's schema types override options as objects.
    return {
        "matcher": {"id": "byNames", "options": {"mode": "include", "names": [name]}},
        "properties": list(properties),
    }


# --- layout ----------------------------------------------------------------------------------


@dataclass
class _Layout:
    """Places panels left to right, wrapping at the grid width; ids for extra panels."""

    y: int = 0
    x: int = 0
    line_height: int = 0
    ids: Iterator[int] = field(default_factory=lambda: itertools.count(FIRST_EXTRA_ID))

    def place(self, w: int, h: int) -> g.GridPos:
        if self.x + w > WIDTH:
            self.newline()
        pos = g.GridPos(h=h, w=w, x=self.x, y=self.y)
        self.x += w
        self.line_height = max(self.line_height, h)
        return pos

    def newline(self) -> None:
        self.y += self.line_height
        self.x = self.line_height = 0

    def row(self, title: str) -> g.RowPanel:
        self.newline()
        row = g.RowPanel(title=title, id=next(self.ids), gridPos=self.place(WIDTH, 1))
        self.newline()
        return row


# --- the builder -----------------------------------------------------------------------------


class _Builder:
    def __init__(self, ctx: RuleContext, alerts: list[AlertRule]) -> None:
        self.ctx = ctx
        self.spec = ctx.spec
        self.o = ctx.spec.objectives
        self.r = ctx.recorded()
        # Per-node and per-GPU panels follow the template variables.
        self.r_node = ctx.recorded(node=regex("$node"))
        self.r_gpu = ctx.recorded(node=regex("$node"), gpu=regex("$gpu"))
        self.layout = _Layout()
        self.alerts_by_panel: dict[str, list[str]] = {}
        for alert in alerts:
            self.alerts_by_panel.setdefault(alert.panel, []).append(alert.name)

    # Targets and links.

    @staticmethod
    def target(expr: str, legend: str, ref: str = "A", **kwargs: object) -> g.Target:
        return g.Target(
            expr=expr,
            legendFormat=legend,
            refId=ref,
            datasource=DATASOURCE,
            intervalFactor=1,
            **kwargs,
        )

    def targets(self, *pairs: tuple[str, str]) -> list[g.Target]:
        return [
            self.target(expr, legend, ref)
            for (expr, legend), ref in zip(pairs, "ABCDEFGH", strict=False)
        ]

    def runbook_links(self, key: str) -> list[g.DashboardLink]:
        base = self.spec.links.runbook_base_url.rstrip("/")
        return [
            g.DashboardLink(
                type="link",
                title=f"Runbook: {name}",
                uri=f"{base}/{name}.md",
                icon="doc",
                tooltip=f"What to do when {name} fires",
                targetBlank=True,
                keepTime=False,
            )
            for name in self.alerts_by_panel.get(key, [])
        ]

    def panel_id(self, key: str | None) -> int:
        return PANEL_IDS[key] if key is not None else next(self.layout.ids)

    # Panel kinds.

    def stat(
        self,
        key: str,
        title: str,
        description: str,
        targets: list[g.Target],
        unit: str,
        steps: list[tuple[str, float | None]],
        overrides: list[dict] | None = None,
        w: int = 5,
    ) -> g.Stat:
        return g.Stat(
            id=self.panel_id(key),
            title=title,
            description=description,
            targets=targets,
            dataSource=DATASOURCE,
            gridPos=self.layout.place(w, 5),
            format=unit,
            thresholds=_g_thresholds(steps),
            color={"mode": "thresholds"},
            reduceCalc="lastNotNull",
            graphMode="area",
            noValue="no data",
            textMode="value_and_name" if len(targets) > 1 else "value",
            overrides=overrides or [],
            links=self.runbook_links(key),
            maxDataPoints=None,
        )

    def series(
        self,
        key: str | None,
        title: str,
        description: str,
        targets: list[g.Target],
        unit: str,
        steps: list[tuple[str, float | None]] | None = None,
        overrides: list[dict] | None = None,
        w: int = 8,
        **kwargs: object,
    ) -> g.TimeSeries:
        return g.TimeSeries(
            id=self.panel_id(key),
            title=title,
            description=description,
            targets=targets,
            dataSource=DATASOURCE,
            gridPos=self.layout.place(w, 8),
            unit=unit,
            thresholds=_g_thresholds(steps or _neutral()),
            thresholdsStyleMode="dashed" if steps and len(steps) > 1 else "off",
            legendDisplayMode="list",
            tooltipMode="multi",
            tooltipSort="desc",
            overrides=overrides or [],
            links=self.runbook_links(key) if key else [],
            maxDataPoints=None,
            **kwargs,
        )

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
                _red_above(o.step_time_max_seconds),
            ),
            self.stat(
                "throughput",
                f"Throughput ({what})",
                f"{what} over 5m; red below the floor of {floor:.4g} (ThroughputBelowFloor).",
                [self.target(f"{series}{r}", what)],
                "short",
                _red_below(floor),
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
                    _by_name(
                        nonfinite,
                        {
                            "id": "thresholds",
                            "value": _json_thresholds(_red_above_count(o.nonfinite_losses_max)),
                        },
                    ),
                    _by_name(
                        dropped,
                        {
                            "id": "thresholds",
                            "value": _json_thresholds(_red_above(o.dropped_batches_max_ratio)),
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
                _neutral(),
                overrides=[
                    _by_name(
                        memory,
                        {
                            "id": "thresholds",
                            "value": _json_thresholds(_red_above(o.gpu_memory_max_ratio)),
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
                _red_below(o.mfu_min_ratio),
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
                _red_above(o.step_time_max_seconds),
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
                _red_below(floor),
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
                _red_below(o.mfu_min_ratio),
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
                    _by_name(marker, {"id": "color", "value": {"mode": "fixed", "fixedColor": RED}})
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
                _red_above(o.data_wait_max_ratio),
            ),
            self.series(
                "dropped_batches",
                "Dropped batches",
                "Dropped batches as a share of batches over 5m (the alert uses "
                f"{ctx.range(o.dropped_batches_window)}).",
                self.targets((f"job:trainsignals_batches_dropped:ratio_rate5m{r}", "dropped")),
                "percentunit",
                _red_above(o.dropped_batches_max_ratio),
            ),
            self.series(
                "checkpoint_age",
                "Checkpoint age",
                "Time since the newest successful checkpoint.",
                self.targets((f"job:trainsignals_last_checkpoint:age_seconds{r}", "age")),
                "s",
                _red_above(ctx.seconds(o.checkpoint_max_age)),
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
                _red_below(spec.shape.gpus),
            ),
            self.restarts(),
            *self.slo_budget(),
        ]

    def restarts(self) -> g.Panel:
        rec, r = self.spec.recovery, self.r
        window = format_duration(rec.restart_window)
        return self.series(
            "restarts",
            "Restarts",
            f"Job restarts (new incarnations of rank 0) per hour, per day and per {window}: "
            f"red past {rec.max_restarts} in {window}, where TrainingCrashLooping fires "
            f"({rec.mode}).",
            self.targets(
                (f"job:trainsignals_restarts:changes1h{r}", "restarts 1h"),
                (f"job:trainsignals_restarts:changes1d{r}", "restarts 1d"),
                (f"job:trainsignals_restarts:changes{window}{r}", f"restarts {window}"),
            ),
            "short",
            _red_above_count(rec.max_restarts),
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
                _red_below(0.0),
                w=6,
            )
        ]

    def gpus(self) -> list[g.Panel]:
        o, r, spec = self.o, self.r_gpu, self.spec
        legend = "{{node}}/{{gpu}}"
        w15 = self.ctx.range(900)
        errors = [
            (f"gpu:trainsignals_gpu_ecc_uncorrected:increase10m{r}", f"{legend} ECC uncorrected"),
            (f"gpu:trainsignals_gpu_xid_critical:seen10m{r}", f"{legend} XID {{{{xid}}}} critical"),
            (f"gpu:trainsignals_gpu_xid_other:seen10m{r}", f"{legend} XID {{{{xid}}}}"),
            (f"gpu:trainsignals_gpu_remapped_rows:pending{r}", f"{legend} remapped rows pending"),
        ]
        if gpu_source(self.ctx).reports_nvml_errors:
            errors.append(
                (f"gpu:trainsignals_gpu_nvml_errors:rate15m{r}", f"{legend} NVML errors/s")
            )
        return [
            self.layout.row("GPUs (per node and GPU)"),
            self.series(
                "gpu_utilization",
                "GPU utilization",
                "Share of time a kernel was running.",
                self.targets((f"gpu:trainsignals_gpu_utilization:ratio{r}", legend)),
                "percentunit",
                valueMin=0,
                valueMax=1,
            ),
            *gpu_activity_panels(self, r, legend),
            self.series(
                "gpu_memory",
                "GPU memory used",
                "Device memory used as a share of the total.",
                self.targets((f"gpu:trainsignals_gpu_memory_used:ratio{r}", legend)),
                "percentunit",
                _red_above(o.gpu_memory_max_ratio),
            ),
            self.series(
                None,
                "GPU memory used (bytes)",
                "Device memory used.",
                self.targets((f"gpu:trainsignals_gpu_memory_used:bytes{r}", legend)),
                "bytes",
            ),
            self.series(
                "gpu_power",
                "GPU power",
                "Power draw.",
                self.targets((f"gpu:trainsignals_gpu_power:watts{r}", legend)),
                "watt",
            ),
            self.series(
                "gpu_temperature",
                "GPU temperature",
                "GPU core temperature.",
                self.targets((f"gpu:trainsignals_gpu_temperature:celsius{r}", legend)),
                "celsius",
                _red_above(o.gpu_temperature_max_celsius),
            ),
            self.series(
                "gpu_throttle",
                "GPU throttling",
                f"Share of the last {w15} with thermal or power throttling active.",
                self.targets(
                    (
                        f"avg_over_time(gpu:trainsignals_gpu_thermal_throttle:active{r}[{w15}])",
                        f"{legend} thermal",
                    ),
                    (
                        f"avg_over_time(gpu:trainsignals_gpu_power_throttle:active{r}[{w15}])",
                        f"{legend} power",
                    ),
                ),
                "percentunit",
                _red_above(o.throttle_max_ratio),
            ),
            self.series(
                None,
                "SM clock",
                "Streaming-multiprocessor clock; drops when throttled.",
                self.targets((f"gpu:trainsignals_gpu_sm_clock:hertz{r}", legend)),
                "hertz",
            ),
            self.series(
                "gpu_errors",
                "GPU errors",
                "Uncorrectable ECC errors and XID events in 10m, pending row remaps"
                + (", NVML errors." if len(errors) > 4 else "."),
                self.targets(*errors),
                "short",
                showPoints="always",
            ),
            *nvlink_panel(self, r, legend),
            self.series(
                "gpu_count",
                "GPUs per node",
                f"GPUs reporting per node (the spec expects {spec.shape.gpus_per_node}) and "
                "whether the node's GPU exporter answers scrapes.",
                self.targets(
                    (f"node:trainsignals_gpus:count{self.r_node}", "{{node}} GPUs"),
                    (
                        f"up{self.ctx.raw(job=spec.scrape_jobs.gpu, node=regex('$node'))}",
                        "{{node}} exporter up",
                    ),
                ),
                "short",
                _red_below(spec.shape.gpus_per_node),
            ),
            *mig_panels(self, r),
        ]

    def nodes(self) -> list[g.Panel]:
        o, r = self.o, self.r_node
        return [
            self.layout.row("Nodes: checkpoint disk and network"),
            self.series(
                "disk",
                "Checkpoint disk free",
                "Free share of the file system holding the checkpoint directory.",
                self.targets(
                    (f"node:trainsignals_checkpoint_disk_free:ratio{r}", "{{node}} {{path}}")
                ),
                "percentunit",
                _red_below(o.disk_free_min_ratio),
            ),
            self.series(
                None,
                "Checkpoint disk free (bytes)",
                "Free bytes; CheckpointDiskFillingUp extrapolates this trend.",
                self.targets(
                    (f"node:trainsignals_checkpoint_disk_free:bytes{r}", "{{node}} {{path}}")
                ),
                "bytes",
            ),
            self.series(
                "network",
                "Network",
                "Bytes per second over all devices but lo.",
                self.targets(
                    (f"node:trainsignals_network_receive_bytes:rate5m{r}", "{{node}} receive"),
                    (f"node:trainsignals_network_transmit_bytes:rate5m{r}", "{{node}} transmit"),
                ),
                "Bps",
            ),
            *fabric_panels(self, r),
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


def multi_value_variable(name: str, label: str, query: str, **extra: object) -> g.Template:
    """A Prometheus query variable with "All" (matching `.*`) selected by default."""
    return g.Template(
        name=name,
        label=label,
        dataSource=DATASOURCE,
        query=query,
        default="$__all",
        includeAll=True,
        multi=True,
        allValue=".*",
        refresh=g.REFRESH_ON_TIME_RANGE_CHANGE,
        **extra,
    )


def build_dashboard(
    ctx: RuleContext, alerts: list[AlertRule], spec_hash: str, generator_version: str
) -> dict:
    """The job's dashboard as Grafana JSON (schema-valid, deterministic)."""
    return normalize_dashboard(raw_dashboard(ctx, alerts, spec_hash, generator_version))


def raw_dashboard(
    ctx: RuleContext, alerts: list[AlertRule], spec_hash: str, generator_version: str
) -> dict:
    """grafanalib's JSON before normalisation (the tests show why the normaliser exists)."""
    spec = ctx.spec
    b = _Builder(ctx, alerts)
    panels = [*b.golden_signals(), *b.training(), *goodput_panels(b), *b.gpus(), *b.nodes()]
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
    return grafanalib_json(dashboard)


def iter_panels(dashboard: dict) -> Iterator[dict]:
    """Every panel, rows and the panels nested in (collapsed) rows included."""
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def panel_queries(dashboard: dict) -> list[tuple[int, str]]:
    """(panel id, expr) of every query target in the dashboard."""
    return [
        (panel["id"], target["expr"])
        for panel in iter_panels(dashboard)
        for target in panel.get("targets", [])
        if target.get("expr")
    ]
