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
    ids = [p["id"] for p in rendered if p["type"] != "row"]
    assert ids == [PANEL_IDS["straggler"], PANEL_IDS["straggler_heatmap"]]
    assert all(60 <= i <= 64 for i in ids)
    cost = rendered[1]
    steps = cost["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert steps[-1]["value"] == ctx.spec.objectives.straggler_cost_min_ratio
    assert COST in cost["targets"][0]["expr"] and RATIO in rendered[2]["targets"][0]["expr"]
