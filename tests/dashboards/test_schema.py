"""The dashboard validates against Grafana's schemas; it is deterministic, and its identity
(uid, title, tags) follows from the spec's name and hash."""

from __future__ import annotations

import copy
import json
import re

from jsonschema import Draft7Validator
from trainsignals.generator.alerts.rules import alert_rules
from trainsignals.generator.dashboards.grafana_normalize import normalize_dashboard
from trainsignals.generator.dashboards.job import build_dashboard, raw_dashboard
from trainsignals.generator.dashboards.kit import iter_panels
from trainsignals.generator.signals.panels import dashboard_uid
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.spec.job import JobSpec

from tests.dashboards.helpers import (
    SCHEMAS,
    VERSION,
    build_job_dashboard,
    hash_of,
    load_schema,
    schema_definition,
)

# --- schema ----------------------------------------------------------------------------------


def test_schema_has_only_local_refs() -> None:
    # All $refs are "#/definitions/..." so a plain Draft7Validator resolves them; an external
    # ref would need a registry built from the schema folder.
    text = (SCHEMAS / "dashboard.jsonschema.json").read_text()
    refs = set(re.findall(r'"\$ref":\s*"([^"]*)"', text))
    assert refs and all(r.startswith("#/") for r in refs)


def test_dashboard_validates_against_grafana_schema(built: tuple) -> None:
    dashboard, _, _ = built
    errors = list(Draft7Validator(load_schema("dashboard")).iter_errors(dashboard))
    assert errors == [], "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:20])


def test_raw_grafanalib_output_needs_the_normaliser(spec: JobSpec) -> None:
    ctx = RuleContext(spec)
    raw = raw_dashboard(ctx, alert_rules(ctx), hash_of(spec), VERSION)
    errors = list(Draft7Validator(load_schema("dashboard")).iter_errors(raw))
    assert len(errors) > 10
    # The legacy keys the normaliser exists for.
    assert {"rows", "style", "sharedCrosshair", "__inputs"} <= raw.keys()
    assert isinstance(raw["panels"][0]["datasource"], str)
    normalized = normalize_dashboard(raw)
    assert list(Draft7Validator(load_schema("dashboard")).iter_errors(normalized)) == []


def test_the_one_pass_build_equals_raw_then_normalised(spec: JobSpec) -> None:
    # build_dashboard converts and normalises grafanalib's data in one pass (generation speed).
    ctx = RuleContext(spec)
    alerts = alert_rules(ctx)
    raw = raw_dashboard(ctx, alerts, hash_of(spec), VERSION)
    built = build_dashboard(ctx, alerts, hash_of(spec), VERSION)
    assert json.dumps(built) == json.dumps(normalize_dashboard(raw))


def test_normaliser_is_pure(spec: JobSpec) -> None:
    ctx = RuleContext(spec)
    raw = raw_dashboard(ctx, alert_rules(ctx), hash_of(spec), VERSION)
    before = copy.deepcopy(raw)
    normalize_dashboard(raw)
    assert raw == before
    assert normalize_dashboard(raw) == normalize_dashboard(before)


def test_panel_options_and_targets_validate_against_panel_schemas(built: tuple) -> None:
    dashboard, _, _ = built
    prometheus = Draft7Validator(load_schema("prometheus"))
    field_configs = {"timeseries": "GraphFieldConfig", "table": "TableFieldOptions"}
    problems = []
    for panel in iter_panels(dashboard):
        if panel["type"] == "row":
            continue
        schema = load_schema(panel["type"])
        checks = [(schema_definition(schema, "Options"), panel["options"], "options")]
        if panel["type"] in field_configs:
            checks.append(
                (
                    schema_definition(schema, field_configs[panel["type"]]),
                    panel["fieldConfig"]["defaults"].get("custom", {}),
                    "custom",
                )
            )
        for sub_schema, instance, what in checks:
            problems += [
                f"panel {panel['id']} {what}: {e.message}"
                for e in Draft7Validator(sub_schema).iter_errors(instance)
            ]
        for target in panel["targets"]:
            problems += [
                f"panel {panel['id']} target: {e.message}" for e in prometheus.iter_errors(target)
            ]
    assert problems == []


# --- identity and determinism ----------------------------------------------------------------


def test_deterministic(spec: JobSpec) -> None:
    first, _, _ = build_job_dashboard(spec)
    second, _, _ = build_job_dashboard(spec)
    assert first == second
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)


def test_uid_title_tags_description(built: tuple, spec: JobSpec) -> None:
    dashboard, _, _ = built
    spec_hash = hash_of(spec)
    assert dashboard["uid"] == dashboard_uid(spec.name) == f"ts-{spec.name}"
    assert dashboard["title"] == f"Training: {spec.name}"
    assert {"trainsignals", f"generator:{VERSION}", f"spec:{spec_hash[:12]}"} <= set(
        dashboard["tags"]
    )
    description = dashboard["description"]
    assert spec_hash in description and VERSION in description
    assert f"Generated by trainsignals {VERSION} from jobs/{spec.name}.yaml" in description
    assert "do not edit" in description


def test_uid_does_not_depend_on_the_spec_contents(spec: JobSpec) -> None:
    changed = spec.model_copy(update={"team": "someone-else"})
    ctx = RuleContext(changed)
    other = build_dashboard(ctx, alert_rules(ctx), hash_of(changed), "9.9.9")
    assert other["uid"] == build_job_dashboard(spec)[0]["uid"]
