"""What the dashboard tests share: the specs they build (the examples, a dcgm-exporter job and
a per-step FLOPs job), Grafana's vendored schemas, and readers of the built dashboard."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from jsonschema import Draft7Validator

from trainsignals import __version__
from trainsignals.generator.alerts.rules import AlertRule, alert_rules
from trainsignals.generator.dashboards.job import build_dashboard
from trainsignals.generator.dashboards.kit import iter_panels
from trainsignals.generator.loader import load_specs, spec_files
from trainsignals.generator.signals.panels import PANEL_IDS
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.spec.job import JobSpec, Objectives, Shape

ROOT = Path(__file__).resolve().parents[2]
# Grafana's own dashboard schemas, vendored unchanged (see schemas/grafana/SOURCE.md) so a
# clean clone validates without the shared folder beside it.
SCHEMAS = ROOT / "schemas" / "grafana"
VERSION = __version__
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def load_schema(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.jsonschema.json").read_text())


def schema_definition(schema: dict, name: str) -> dict:
    """A sub-schema of a panel schema file, keeping its (local) definitions for $ref."""
    return {"$ref": f"#/definitions/{name}", "definitions": schema["definitions"]}


def dcgm_spec() -> JobSpec:
    return JobSpec(
        name="dcgm-job",
        team="infra",
        gpu_metrics="dcgm",
        shape=Shape(nodes=2, gpus_per_node=8, gpu_model="H100-SXM", model_flops_per_token=4.2e10),
    )


def per_step_spec() -> JobSpec:
    return JobSpec(
        name="vision-steps",
        team="vision",
        shape=Shape(nodes=4, gpus_per_node=4, gpu_model="H100-SXM", model_flops_per_step=3.0e15),
        objectives=Objectives(step_time_max_seconds=2.5, nonfinite_losses_max=3),
        links={"runbook_base_url": "https://runbooks.example.com/trainsignals/"},
    )


SPECS = [
    *load_specs(spec_files(ROOT / "jobs")),
    dcgm_spec(),
    per_step_spec(),
]


def hash_of(spec: JobSpec) -> str:
    return hashlib.sha256(spec.model_dump_json().encode()).hexdigest()


def build_job_dashboard(spec: JobSpec) -> tuple[dict, list[AlertRule], RuleContext]:
    ctx = RuleContext(spec)
    alerts = alert_rules(ctx)
    return build_dashboard(ctx, alerts, hash_of(spec), VERSION), alerts, ctx


def panels_by_id(dashboard: dict) -> dict[int, dict]:
    return {p["id"]: p for p in iter_panels(dashboard)}


def stat_steps(dashboard: dict, key: str) -> list[tuple[str, float | None]]:
    panel = panels_by_id(dashboard)[PANEL_IDS[key]]
    assert panel["type"] == "stat"
    steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
    return [(s["color"], s["value"]) for s in steps]


def override_steps(dashboard: dict, key: str, name: str) -> list[tuple[str, float | None]]:
    panel = panels_by_id(dashboard)[PANEL_IDS[key]]
    for override in panel["fieldConfig"]["overrides"]:
        if override["matcher"]["options"]["names"] == [name]:
            (prop,) = [p for p in override["properties"] if p["id"] == "thresholds"]
            return [(s["color"], s["value"]) for s in prop["value"]["steps"]]
    raise AssertionError(f"no thresholds override for {name!r} on {key}")


# Panel types whose `fieldConfig.defaults.custom` has a schema definition of its own.
FIELD_CONFIGS = {"timeseries": "GraphFieldConfig", "table": "TableFieldOptions"}


def panel_schema_problems(dashboard: dict) -> list[str]:
    """Every panel's options, custom field config and Prometheus targets checked against
    Grafana's panel schemas: one line per problem (none for a valid dashboard)."""
    prometheus = Draft7Validator(load_schema("prometheus"))
    problems = []
    for panel in iter_panels(dashboard):
        if panel["type"] == "row":
            continue
        schema = load_schema(panel["type"])
        checks = [(schema_definition(schema, "Options"), panel["options"], "options")]
        if panel["type"] in FIELD_CONFIGS:
            custom = panel["fieldConfig"]["defaults"].get("custom", {})
            checks.append(
                (schema_definition(schema, FIELD_CONFIGS[panel["type"]]), custom, "custom")
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
    return problems
