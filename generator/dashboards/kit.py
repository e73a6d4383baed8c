"""The kit the dashboards are built with: threshold steps, the grid layout, a panel builder
(stat and time-series panels with runbook links and stable ids), template variables, and
readers for the finished JSON. generator/dashboards/job.py lays out the job's sections with it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field

from grafanalib import core as g

from trainsignals.generator.alerts.model import AlertRule
from trainsignals.generator.signals.panels import PANEL_IDS
from trainsignals.generator.signals.promql import RuleContext, regex

DATASOURCE = "${datasource}"
SCHEMA_VERSION = 39  # Grafana 10.x/11.x model; newer Grafana migrates it on load
FIRST_EXTRA_ID = 100  # ids below are reserved for PANEL_IDS (alerts link to them)
WIDTH = 24

GREEN, RED, ORANGE, BLUE = "green", "red", "orange", "blue"


# --- thresholds: (color, value) steps, base first -------------------------------------------


def neutral() -> list[tuple[str, float | None]]:
    return [(BLUE, None)]


def red_below(floor: float) -> list[tuple[str, float | None]]:
    """Red under `floor`: Grafana colours a step from its value up, matching an alert `< floor`."""
    return [(RED, None), (GREEN, floor)]


def red_above(bound: float | None) -> list[tuple[str, float | None]]:
    """Red from `bound` up (continuous quantities, where `>=` and `>` do not differ)."""
    return [(GREEN, None)] if bound is None else [(GREEN, None), (RED, bound)]


def red_above_count(max_count: float) -> list[tuple[str, float | None]]:
    """Red for counts over `max_count`: at exactly the tolerated count (usually 0) it stays green.

    Grafana steps mean `>=`, so the step sits just above the tolerance (`over_count`).
    """
    return [(GREEN, None), (RED, over_count(max_count))]


def over_count(max_count: float) -> float:
    """Where `> max_count` starts on a Grafana step (`>=`), as a person reads it: 2.001, not the
    next float (2.0000000000000004, 5e-324). Counts are whole, and increase()'s extrapolations
    only stretch a whole delta upwards, so nothing real falls in the thousandth between."""
    return round(max_count + 0.001, 3)


def g_thresholds(steps: list[tuple[str, float | None]]) -> list[g.Threshold]:
    return [g.Threshold(color, i, float(value or 0)) for i, (color, value) in enumerate(steps)]


def json_thresholds(steps: list[tuple[str, float | None]]) -> dict:
    """Thresholds as an override value (grafanalib writes those only as raw JSON)."""
    return {"mode": "absolute", "steps": [{"color": c, "value": v} for c, v in steps]}


def by_name(name: str, *properties: dict) -> dict:
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


class PanelBuilder:
    """Panels of one job: ids, links to the runbooks of the alerts each panel backs."""

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
            thresholds=g_thresholds(steps),
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
            thresholds=g_thresholds(steps or neutral()),
            thresholdsStyleMode="dashed" if steps and len(steps) > 1 else "off",
            legendDisplayMode="list",
            tooltipMode="multi",
            tooltipSort="desc",
            overrides=overrides or [],
            links=self.runbook_links(key) if key else [],
            maxDataPoints=None,
            **kwargs,
        )


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
