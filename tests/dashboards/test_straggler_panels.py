"""The straggler row renders, with the ticket's threshold and the recorded series it reads."""

from __future__ import annotations

import json
from pathlib import Path

from grafanalib._gen import DashboardEncoder

from trainsignals.generator.alerts.rules import alert_rules
from trainsignals.generator.dashboards.kit import PanelBuilder
from trainsignals.generator.dashboards.straggler_panels import straggler_panels
from trainsignals.generator.loader import load_specs
from trainsignals.generator.signals.panels import PANEL_IDS
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.signals.straggler import COST, RATIO


def test_straggler_row_renders_with_the_rules_threshold() -> None:
    ctx = RuleContext(load_specs([Path("jobs/llama-8b-finetune.yaml")])[0])
    panels = straggler_panels(PanelBuilder(ctx, alert_rules(ctx)))
    rendered = [json.loads(json.dumps(p.to_json_data(), cls=DashboardEncoder)) for p in panels]
    ids = [p["id"] for p in rendered]
    assert ids == [PANEL_IDS["straggler"], PANEL_IDS["straggler_heatmap"]]
    assert all(60 <= i <= 64 for i in ids)
    cost, spread = rendered
    steps = cost["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert steps[-1]["value"] == ctx.spec.objectives.straggler_cost_min_ratio
    assert COST in cost["targets"][0]["expr"] and RATIO in spread["targets"][0]["expr"]


def test_the_job_dashboard_places_them_in_the_where_is_it_slow_row() -> None:
    dashboard = json.loads(Path("dashboards/llama-8b-finetune.json").read_text())
    panels = dashboard["panels"]
    rows = [i for i, p in enumerate(panels) if p["type"] == "row"]
    where = next(i for i in rows if panels[i]["title"] == "Where is it slow")
    end = min([i for i in rows if i > where], default=len(panels))
    inside = {p["id"] for p in panels[where + 1 : end]}
    assert {PANEL_IDS["straggler"], PANEL_IDS["straggler_heatmap"]} <= inside
