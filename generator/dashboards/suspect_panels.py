"""Who to suspect: the current incident's suspect ranks, and the fleet's nodes by incident count.

Panel ids 70-79 (signals/panels.py), placed in the "Where is it slow" row (dashboards/job.py
passes `suspect_panels(threshold)` as one of its `extra` builders):

- "Suspects of the current incident": the hang-suspect recording rules
  (generator/signals/hang_suspects.py), one row per rank and reason, what TrainingStalled's and
  TrainingNoProgress' `suspects` annotation names; empty while the job makes progress.
- "Nodes by incident count": the fleet's nodes with the most hardware incidents in 30 days,
  across jobs and spares (generator/nodes/), the line at the `lemon_node_incidents` setting
  that NodeIncidentsRecurring tickets at: the same value, passed in by the caller.
"""

from __future__ import annotations

from collections.abc import Callable

import attr
from grafanalib import core as g

from trainsignals.generator.dashboards.kit import DATASOURCE, GREEN, RED, PanelBuilder, g_thresholds
from trainsignals.generator.signals.hang_suspects import MAX_NAMED, NO_SUSPECT, SUSPECT
from trainsignals.generator.signals.node_incidents import SCORE
from trainsignals.generator.signals.panels import PANEL_IDS, PANEL_TITLES
from trainsignals.generator.spec.monitoring import DEFAULT_LEMON_NODE_INCIDENTS
from trainsignals.generator.spec.pipeline_alerts import NODE_INCIDENTS_ALERT

TOP_K = 10  # nodes shown: the few worst are the ones to drain


def suspects_panel(b: PanelBuilder) -> g.Panel:
    key = "suspects"
    return g.Table(
        id=PANEL_IDS[key],
        title=PANEL_TITLES[key],
        description=(
            "Ranks that differ from their peers while the job makes no progress: behind (last "
            "step older than the newest rank's), phase (waiting for data while the others "
            "spin in a collective), process_gone, gpu_idle. The pages name the first "
            f"{MAX_NAMED}. Empty while the job steps; when the job stopped and this is "
            f"empty: {NO_SUSPECT}."
        ),
        targets=[b.target(f"{SUSPECT}{b.r}", "", format="table", instant=True)],
        dataSource=DATASOURCE,
        gridPos=b.layout.place(12, 8),
        sortBy=[g.TableSortByField(displayName="rank")],
        maxDataPoints=None,
        transformations=[
            {
                "id": "organize",
                "options": {"excludeByName": {"Time": True, "Value": True, "__name__": True}},
            }
        ],
    )


@attr.s
class _BarGauge(g.Panel):
    """Grafana's bar gauge as its schema has it (grafanalib's BarGauge writes the pre-7
    `fieldOptions`, which the bargauge schema refuses)."""

    options: dict = attr.ib(factory=dict)
    defaults: dict = attr.ib(factory=dict)

    def to_json_data(self) -> dict:
        return self.panel_json(
            {
                "type": "bargauge",
                "options": self.options,
                "fieldConfig": {"defaults": self.defaults, "overrides": []},
            }
        )


def nodes_panel(b: PanelBuilder, threshold: int) -> g.Panel:
    key = "nodes_by_incidents"
    return _BarGauge(
        id=PANEL_IDS[key],
        title=PANEL_TITLES[key],
        description=(
            f"The {TOP_K} nodes of the fleet with the most hardware incidents in 30 days, "
            "counted over every job and spare (a node keeps its name across jobs; overlapping "
            "faults of one node are one incident), non-fatal hardware tickets added as a "
            "fraction of an incident each (monitoring settings: lemon_tickets_per_incident). Red "
            "from "
            f"{threshold}: {NODE_INCIDENTS_ALERT} tickets the infra team to drain the node "
            f"(its runbook: runbooks/{NODE_INCIDENTS_ALERT}.md)."
        ),
        targets=[b.target(f"topk({TOP_K}, {SCORE})", "{{node}}", instant=True)],
        dataSource=DATASOURCE,
        gridPos=b.layout.place(12, 8),
        thresholds=g_thresholds([(GREEN, None), (RED, float(threshold))]),
        options={
            "displayMode": "basic",
            "valueMode": "color",
            "namePlacement": "auto",
            "showUnfilled": True,
            "sizing": "auto",
            "minVizWidth": 8,
            "minVizHeight": 16,
            "maxVizHeight": 300,
            "legend": {
                "displayMode": "list",
                "placement": "bottom",
                "showLegend": False,
                "calcs": [],
            },
            "reduceOptions": {"calcs": ["lastNotNull"], "values": False},
            "orientation": "horizontal",
        },
        defaults={"min": 0, "max": 2 * threshold, "decimals": 1, "unit": "none"},
        maxDataPoints=None,
    )


def suspect_panels(
    threshold: int = DEFAULT_LEMON_NODE_INCIDENTS,
) -> Callable[[PanelBuilder], list[g.Panel]]:
    """The builder for the row's `extra`: both panels, the nodes' red from `threshold`
    (MonitoringSettings.lemon_node_incidents, as in alerts/nodes.rules.yaml)."""

    def build(b: PanelBuilder) -> list[g.Panel]:
        return [suspects_panel(b), nodes_panel(b, threshold)]

    return build
