"""The on-call dashboard: pages and tickets per day and per shift, by team and alert name."""

from __future__ import annotations

from grafanalib import core as g

from trainsignals import __version__
from trainsignals.generator.dashboards.grafana_normalize import grafanalib_json, normalize_dashboard
from trainsignals.generator.dashboards.kit import DATASOURCE, multi_value_variable, over_count
from trainsignals.generator.oncall.policy import (
    ALERT,
    DASHBOARD_UID,
    FIRING,
    NAME,
    PANEL_IDS,
    STARTED,
    OncallPolicy,
)
from trainsignals.generator.signals.promql import matchers, regex
from trainsignals.generator.spec.job import Links

SCHEMA_VERSION = 39  # as the job dashboards
TEAM = regex("$team")
GREEN, RED, BLUE = "green", "red", "blue"


class _Grid:
    """Left-to-right placement on Grafana's 24-column grid; row ids from 100."""

    def __init__(self) -> None:
        self.x = self.y = self.line = 0
        self.row_id = 100

    def place(self, w: int, h: int) -> g.GridPos:
        if self.x + w > 24:
            self.newline()
        pos = g.GridPos(h=h, w=w, x=self.x, y=self.y)
        self.x += w
        self.line = max(self.line, h)
        return pos

    def newline(self) -> None:
        self.y += self.line
        self.x = self.line = 0

    def row(self, title: str) -> g.RowPanel:
        self.newline()
        self.row_id += 1
        row = g.RowPanel(title=title, id=self.row_id, gridPos=self.place(24, 1))
        self.newline()
        return row


def _target(expr: str, legend: str = "", **kwargs: object) -> g.Target:
    return g.Target(
        expr=expr, legendFormat=legend, refId="A", datasource=DATASOURCE, intervalFactor=1, **kwargs
    )


def _limit_steps(limit: int) -> list[g.Threshold]:
    # Grafana colours a step from its value up (>=); the alert is `> limit`.
    return [g.Threshold(GREEN, 0, 0.0), g.Threshold(RED, 1, over_count(limit))]


def _started(severity: str) -> str:
    return STARTED + matchers({"severity": severity, "team": TEAM})


def _per_day(severity: str, by: str) -> str:
    return f"sum by ({by}) (sum_over_time({_started(severity)}[1d]))"


def _top(severity: str) -> str:
    return f"topk(10, sum by (team, alertname) (sum_over_time({_started(severity)}[7d])))"


class _Builder:
    def __init__(self, policy: OncallPolicy, links: Links) -> None:
        self.policy = policy
        self.links = links
        self.grid = _Grid()

    def runbook_link(self) -> g.DashboardLink:
        return g.DashboardLink(
            type="link",
            title=f"Runbook: {ALERT}",
            uri=f"{self.links.runbook_base_url.rstrip('/')}/{ALERT}.md",
            icon="doc",
            tooltip=f"What to do when {ALERT} fires",
            targetBlank=True,
            keepTime=False,
        )

    def stat(
        self,
        key: str,
        title: str,
        description: str,
        expr: str,
        legend: str,
        thresholds: list[g.Threshold],
        links: list[g.DashboardLink] | None = None,
    ) -> g.Stat:
        return g.Stat(
            id=PANEL_IDS[key],
            title=title,
            description=description,
            targets=[_target(expr, legend)],
            dataSource=DATASOURCE,
            gridPos=self.grid.place(8, 5),
            format="short",
            thresholds=thresholds,
            color={"mode": "thresholds"},
            reduceCalc="lastNotNull",
            graphMode="none",
            noValue="0",
            textMode="value_and_name",
            links=links or [],
            maxDataPoints=None,
        )

    def series(
        self,
        key: str,
        title: str,
        description: str,
        target: g.Target,
        *,
        bars: bool = False,
        thresholds: list[g.Threshold] | None = None,
        links: list[g.DashboardLink] | None = None,
    ) -> g.TimeSeries:
        return g.TimeSeries(
            id=PANEL_IDS[key],
            title=title,
            description=description,
            targets=[target],
            dataSource=DATASOURCE,
            gridPos=self.grid.place(12, 8),
            unit="short",
            drawStyle="bars" if bars else "line",
            fillOpacity=80 if bars else 10,
            stacking={"mode": "normal" if bars else "none", "group": "A"},
            thresholds=thresholds or [g.Threshold(BLUE, 0, 0.0)],
            thresholdsStyleMode="dashed" if thresholds else "off",
            legendDisplayMode="list",
            tooltipMode="multi",
            tooltipSort="desc",
            links=links or [],
            maxDataPoints=None,
        )

    def table(
        self, key: str, title: str, description: str, expr: str, sort: str = "Value"
    ) -> g.Table:
        return g.Table(
            id=PANEL_IDS[key],
            title=title,
            description=description,
            targets=[_target(expr, format="table", instant=True)],
            dataSource=DATASOURCE,
            gridPos=self.grid.place(8, 8),
            sortBy=[g.TableSortByField(displayName=sort, desc=True)],
            maxDataPoints=None,
            transformations=[{"id": "organize", "options": {"excludeByName": {"Time": True}}}],
        )

    def per_day(self, key: str, severity: str, by: str) -> g.TimeSeries:
        what = f"{severity}s"
        return self.series(
            key,
            f"{what.capitalize()} per day by {by}",
            f"{what.capitalize()} started per UTC day: one per firing episode of a training "
            "job's alert (Alertmanager's notification group), however long it fires.",
            # One point per day: the step is at least a day, each point sums that day.
            _target(_per_day(severity, by), "{{" + by + "}}", interval="1d"),
            bars=True,
        )

    def panels(self) -> list[g.Panel]:
        p, limit = self.policy, self.policy.max_pages_per_shift
        load = p.per_shift_record
        per_shift = (
            f"rolling {p.shift} window (the shift); one per firing episode of a training "
            "job's alert"
        )
        return [
            self.stat(
                "pages_this_shift",
                f"Pages in the last {p.shift}",
                f"Pages per team in the last {p.shift}; red above the budget of {limit} ({ALERT}).",
                load + matchers({"severity": "page", "team": TEAM}),
                "{{team}}",
                _limit_steps(limit),
                [self.runbook_link()],
            ),
            self.stat(
                "tickets_this_shift",
                f"Tickets in the last {p.shift}",
                f"Tickets per team in the last {p.shift}.",
                load + matchers({"severity": "ticket", "team": TEAM}),
                "{{team}}",
                [g.Threshold(BLUE, 0, 0.0)],
            ),
            self.stat(
                "firing_now",
                "Firing now",
                "Alerts firing now per team and severity (series, before Alertmanager "
                "grouping, silences and inhibition).",
                f"sum by (team, severity) ({FIRING}{matchers({'team': TEAM})})",
                "{{team}} {{severity}}",
                [g.Threshold(GREEN, 0, 0.0)],
            ),
            self.grid.row("Per day"),
            self.per_day("pages_per_day", "page", "team"),
            self.per_day("tickets_per_day", "ticket", "team"),
            self.grid.row("Per shift"),
            self.series(
                "pages_per_shift",
                f"Pages per {p.shift} shift vs. the budget",
                f"Pages per team in a {per_shift}. Dashed line: the budget of {limit} "
                f"per shift; above it {ALERT} opens a ticket.",
                _target(load + matchers({"severity": "page", "team": TEAM}), "{{team}}"),
                thresholds=_limit_steps(limit),
                links=[self.runbook_link()],
            ),
            self.series(
                "tickets_per_shift",
                f"Tickets per {p.shift} shift",
                f"Tickets per team in a {per_shift}.",
                _target(load + matchers({"severity": "ticket", "team": TEAM}), "{{team}}"),
            ),
            self.grid.row("By alert name"),
            self.per_day("pages_per_day_by_alert", "page", "alertname"),
            self.per_day("tickets_per_day_by_alert", "ticket", "alertname"),
            self.table(
                "top_pages",
                "Top alerts by pages (7d)",
                "The ten alert names that paged most in the last 7 days: fix, demote to "
                "ticket or inhibit these first.",
                _top("page"),
            ),
            self.table(
                "top_tickets",
                "Top alerts by tickets (7d)",
                "The ten alert names that opened most tickets in the last 7 days.",
                _top("ticket"),
            ),
            self.table(
                "firing_by_alert",
                "Firing now by team and alert",
                "Alert series firing now, per team, alert name and severity.",
                f"{FIRING}{matchers({'team': TEAM})}",
            ),
        ]


def build_dashboard(policy: OncallPolicy, links: Links, description: str) -> dict:
    """The on-call dashboard as Grafana JSON (schema-valid, deterministic)."""
    return normalize_dashboard(raw_dashboard(policy, links, description))


def raw_dashboard(policy: OncallPolicy, links: Links, description: str) -> dict:
    builder = _Builder(policy, links)
    dashboard = g.Dashboard(
        title="On-call load",
        uid=DASHBOARD_UID,
        description=description,
        tags=["trainsignals", f"generator:{__version__}", NAME],
        editable=False,
        graphTooltip=g.GRAPH_TOOLTIP_MODE_SHARED_CROSSHAIR,
        schemaVersion=SCHEMA_VERSION,
        time=g.Time("now-7d", "now"),
        refresh="5m",
        timezone="utc",
        panels=builder.panels(),
        links=[builder.runbook_link()],
        templating=g.Templating(
            list=[
                g.Template(
                    name="datasource", label="Data source", type="datasource", query="prometheus"
                ),
                multi_value_variable(
                    "team", "Team", f"label_values({policy.per_shift_record}, team)"
                ),
            ]
        ),
        annotations=g.Annotations(
            list=[
                {
                    "name": "Pages",
                    "datasource": DATASOURCE,
                    "enable": True,
                    "hide": False,
                    "iconColor": RED,
                    "expr": "ALERTS"
                    + matchers({"alertstate": "firing", "severity": "page", "team": TEAM}),
                    "titleFormat": "{{alertname}}",
                    "textFormat": "{{team}}: {{alertname}} ({{training_job}})",
                    "tagKeys": "team",
                    "useValueForTime": False,
                }
            ]
        ),
    )
    return grafanalib_json(dashboard)
