"""The suspects and lemon-node panels: ids 70-79, the series the rules record, the ticket's
threshold from the same setting, and their place in the "Where is it slow" row."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.dashboards.helpers import ROOT, load_schema, panel_schema_problems
from trainsignals.generator.alerts.rules import alert_rules
from trainsignals.generator.dashboards.job import build_dashboard
from trainsignals.generator.dashboards.kit import iter_panels
from trainsignals.generator.loader import load_specs
from trainsignals.generator.nodes.files import nodes_files
from trainsignals.generator.nodes.policy import ALERT
from trainsignals.generator.signals.hang_suspects import SUSPECT
from trainsignals.generator.signals.node_incidents import SCORE
from trainsignals.generator.signals.panels import PANEL_IDS
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.spec.monitoring import DEFAULT_SETTINGS, MonitoringSettings

KEYS = ("suspects", "nodes_by_incidents")


def _panels(dashboard: dict) -> dict[int, dict]:
    return {p["id"]: p for p in iter_panels(dashboard)}


def _build(job: str, settings: MonitoringSettings | None = None) -> dict:
    ctx = RuleContext(load_specs([ROOT / "jobs" / f"{job}.yaml"])[0])
    return build_dashboard(ctx, alert_rules(ctx), "0" * 64, "test", settings)


def _rule_threshold(settings: MonitoringSettings | None) -> float:
    specs = [(s, f"jobs/{s.name}.yaml") for s in load_specs(sorted((ROOT / "jobs").glob("*.yaml")))]
    text = nodes_files(specs, settings=settings)["alerts/nodes.rules.yaml"]
    alert = next(
        r for g in yaml.safe_load(text)["groups"] for r in g["rules"] if r.get("alert") == ALERT
    )
    return float(alert["expr"].split(f"{SCORE} >= ")[1].split(")")[0].split()[0])


def test_ids_and_queries() -> None:
    panels = _panels(_build("minimal"))
    ids = [PANEL_IDS[key] for key in KEYS]
    assert all(70 <= i <= 79 for i in ids) and set(ids) <= panels.keys()
    assert SUSPECT in panels[PANEL_IDS["suspects"]]["targets"][0]["expr"]
    assert SCORE in panels[PANEL_IDS["nodes_by_incidents"]]["targets"][0]["expr"]


def test_the_threshold_shown_is_the_rules(tmp_path: Path) -> None:
    """The bar gauge turns red where NodeIncidentsRecurring fires, for the default and for
    another setting: both read MonitoringSettings.lemon_node_incidents."""
    for settings in (None, MonitoringSettings(lemon_node_incidents=7)):
        panel = _panels(_build("llama-8b-finetune", settings))[PANEL_IDS["nodes_by_incidents"]]
        steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
        assert steps[-1]["value"] == _rule_threshold(settings)
        assert steps[-1]["value"] == (settings or DEFAULT_SETTINGS).lemon_node_incidents


def test_the_panels_validate_against_grafanas_schemas() -> None:
    dashboard = _build("gpt-70b-pretrain")
    assert panel_schema_problems(dashboard) == []
    from jsonschema import Draft7Validator

    assert list(Draft7Validator(load_schema("dashboard")).iter_errors(dashboard)) == []


def test_the_job_dashboards_place_them_in_the_where_is_it_slow_row() -> None:
    for path in sorted((ROOT / "dashboards").glob("*.json")):
        panels = json.loads(path.read_text())["panels"]
        if not any(p.get("title") == "Where is it slow" for p in panels):
            assert path.stem == "oncall", path
            continue
        rows = [i for i, p in enumerate(panels) if p["type"] == "row"]
        where = next(i for i in rows if panels[i]["title"] == "Where is it slow")
        end = min([i for i in rows if i > where], default=len(panels))
        inside = {p["id"] for p in panels[where + 1 : end]}
        assert {PANEL_IDS[key] for key in KEYS} <= inside, path.name
