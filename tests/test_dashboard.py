"""The generated Grafana dashboard: schema-valid, deterministic, and tied to the spec and alerts."""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
from pathlib import Path
from urllib.parse import urlparse

import pytest
from jsonschema import Draft7Validator
from trainsignals.generator.alerts.rules import AlertRule, alert_rules
from trainsignals.generator.dashboards.grafana_normalize import normalize_dashboard
from trainsignals.generator.dashboards.job import build_dashboard, raw_dashboard
from trainsignals.generator.dashboards.kit import iter_panels, panel_queries
from trainsignals.generator.loader import load_specs, spec_files
from trainsignals.generator.signals.panels import PANEL_IDS, dashboard_uid
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.signals.recording import recording_rules
from trainsignals.generator.spec.job import JobSpec, Objectives, Shape

from trainsignals import __version__
from trainsignals.metrics.catalog import known_series_names

ROOT = Path(__file__).resolve().parents[1]
# Grafana's own dashboard schemas, vendored unchanged (see schemas/grafana/SOURCE.md) so a
# clean clone validates without the shared folder beside it.
SCHEMAS = ROOT / "schemas" / "grafana"
VERSION = __version__
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def _schema(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.jsonschema.json").read_text())


def _definition(schema: dict, name: str) -> dict:
    """A sub-schema of a panel schema file, keeping its (local) definitions for $ref."""
    return {"$ref": f"#/definitions/{name}", "definitions": schema["definitions"]}


def _dcgm_spec() -> JobSpec:
    return JobSpec(
        name="dcgm-job",
        team="infra",
        gpu_metrics="dcgm",
        shape=Shape(nodes=2, gpus_per_node=8, gpu_model="H100-SXM", model_flops_per_token=4.2e10),
    )


def _per_step_spec() -> JobSpec:
    return JobSpec(
        name="vision-steps",
        team="vision",
        shape=Shape(nodes=4, gpus_per_node=4, gpu_model="H100-SXM", model_flops_per_step=3.0e15),
        objectives=Objectives(step_time_max_seconds=2.5, nonfinite_losses_max=3),
        links={"runbook_base_url": "https://runbooks.example.com/trainsignals/"},
    )


SPECS = [
    *load_specs(spec_files(ROOT / "jobs")),
    _dcgm_spec(),
    _per_step_spec(),
]


def _hash(spec: JobSpec) -> str:
    return hashlib.sha256(spec.model_dump_json().encode()).hexdigest()


def _build(spec: JobSpec) -> tuple[dict, list[AlertRule], RuleContext]:
    ctx = RuleContext(spec)
    alerts = alert_rules(ctx)
    return build_dashboard(ctx, alerts, _hash(spec), VERSION), alerts, ctx


@pytest.fixture(params=SPECS, ids=[s.name for s in SPECS])
def spec(request: pytest.FixtureRequest) -> JobSpec:
    return request.param


@pytest.fixture
def built(spec: JobSpec) -> tuple[dict, list[AlertRule], RuleContext]:
    return _build(spec)


def _panels(dashboard: dict) -> dict[int, dict]:
    return {p["id"]: p for p in iter_panels(dashboard)}


def _stat_steps(dashboard: dict, key: str) -> list[tuple[str, float | None]]:
    panel = _panels(dashboard)[PANEL_IDS[key]]
    assert panel["type"] == "stat"
    steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
    return [(s["color"], s["value"]) for s in steps]


def _override_steps(dashboard: dict, key: str, name: str) -> list[tuple[str, float | None]]:
    panel = _panels(dashboard)[PANEL_IDS[key]]
    for override in panel["fieldConfig"]["overrides"]:
        if override["matcher"]["options"]["names"] == [name]:
            (prop,) = [p for p in override["properties"] if p["id"] == "thresholds"]
            return [(s["color"], s["value"]) for s in prop["value"]["steps"]]
    raise AssertionError(f"no thresholds override for {name!r} on {key}")


# --- schema ----------------------------------------------------------------------------------


def test_schema_has_only_local_refs() -> None:
    # All $refs are "#/definitions/..." so a plain Draft7Validator resolves them; an external
    # ref would need a registry built from the schema folder.
    text = (SCHEMAS / "dashboard.jsonschema.json").read_text()
    refs = set(re.findall(r'"\$ref":\s*"([^"]*)"', text))
    assert refs and all(r.startswith("#/") for r in refs)


def test_dashboard_validates_against_grafana_schema(built: tuple) -> None:
    dashboard, _, _ = built
    errors = list(Draft7Validator(_schema("dashboard")).iter_errors(dashboard))
    assert errors == [], "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:20])


def test_raw_grafanalib_output_needs_the_normaliser(spec: JobSpec) -> None:
    ctx = RuleContext(spec)
    raw = raw_dashboard(ctx, alert_rules(ctx), _hash(spec), VERSION)
    errors = list(Draft7Validator(_schema("dashboard")).iter_errors(raw))
    assert len(errors) > 10
    # The legacy keys the normaliser exists for.
    assert {"rows", "style", "sharedCrosshair", "__inputs"} <= raw.keys()
    assert isinstance(raw["panels"][0]["datasource"], str)
    normalized = normalize_dashboard(raw)
    assert list(Draft7Validator(_schema("dashboard")).iter_errors(normalized)) == []


def test_the_one_pass_build_equals_raw_then_normalised(spec: JobSpec) -> None:
    # build_dashboard converts and normalises grafanalib's data in one pass (generation speed).
    ctx = RuleContext(spec)
    alerts = alert_rules(ctx)
    raw = raw_dashboard(ctx, alerts, _hash(spec), VERSION)
    built = build_dashboard(ctx, alerts, _hash(spec), VERSION)
    assert json.dumps(built) == json.dumps(normalize_dashboard(raw))


def test_normaliser_is_pure(spec: JobSpec) -> None:
    ctx = RuleContext(spec)
    raw = raw_dashboard(ctx, alert_rules(ctx), _hash(spec), VERSION)
    before = copy.deepcopy(raw)
    normalize_dashboard(raw)
    assert raw == before
    assert normalize_dashboard(raw) == normalize_dashboard(before)


def test_panel_options_and_targets_validate_against_panel_schemas(built: tuple) -> None:
    dashboard, _, _ = built
    prometheus = Draft7Validator(_schema("prometheus"))
    field_configs = {"timeseries": "GraphFieldConfig", "table": "TableFieldOptions"}
    problems = []
    for panel in iter_panels(dashboard):
        if panel["type"] == "row":
            continue
        schema = _schema(panel["type"])
        checks = [(_definition(schema, "Options"), panel["options"], "options")]
        if panel["type"] in field_configs:
            checks.append(
                (
                    _definition(schema, field_configs[panel["type"]]),
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
    first, _, _ = _build(spec)
    second, _, _ = _build(spec)
    assert first == second
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)


def test_uid_title_tags_description(built: tuple, spec: JobSpec) -> None:
    dashboard, _, _ = built
    spec_hash = _hash(spec)
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
    other = build_dashboard(ctx, alert_rules(ctx), _hash(changed), "9.9.9")
    assert other["uid"] == _build(spec)[0]["uid"]


# --- thresholds: the alerts' values from the same spec fields ---------------------------------


def test_stat_thresholds_are_the_spec_objectives(built: tuple, spec: JobSpec) -> None:
    dashboard, _, _ = built
    o = spec.objectives
    assert _stat_steps(dashboard, "mfu") == [("red", None), ("green", o.mfu_min_ratio)]
    throughput = _stat_steps(dashboard, "throughput")
    if spec.tokens_per_second_floor is not None:
        assert throughput == [("red", None), ("green", spec.tokens_per_second_floor)]
    else:
        expected = 0.5 * o.mfu_min_ratio * spec.shape.peak_flops / spec.shape.model_flops_per_step
        assert throughput[0] == ("red", None)
        assert throughput[1][1] == pytest.approx(expected)
    step_time = _stat_steps(dashboard, "step_time")
    if o.step_time_max_seconds is None:
        assert [c for c, _ in step_time] == ["green"]
    else:
        assert step_time == [("green", None), ("red", o.step_time_max_seconds)]
    nonfinite = _override_steps(dashboard, "errors", "non-finite losses (5m)")
    # Red strictly above the tolerated count, as the alert's `>`.
    assert nonfinite == [("green", None), ("red", math.nextafter(o.nonfinite_losses_max, math.inf))]
    assert _override_steps(dashboard, "errors", "dropped batches (ratio)") == [
        ("green", None),
        ("red", o.dropped_batches_max_ratio),
    ]
    assert _override_steps(dashboard, "gpu_saturation", "max GPU memory used")[-1] == (
        "red",
        o.gpu_memory_max_ratio,
    )


def test_changing_an_objective_moves_the_threshold() -> None:
    base = _per_step_spec()
    changed = base.model_copy(
        update={
            "objectives": base.objectives.model_copy(
                update={
                    "mfu_min_ratio": 0.42,
                    "step_time_max_seconds": 7.0,
                    "nonfinite_losses_max": 5,
                    "tokens_per_second_min": 1234.0,
                }
            )
        }
    )
    before, _, _ = _build(base)
    after, _, _ = _build(changed)
    assert _stat_steps(before, "mfu")[1] == ("green", 0.30)
    assert _stat_steps(after, "mfu")[1] == ("green", 0.42)
    assert _stat_steps(after, "step_time")[1] == ("red", 7.0)
    assert _stat_steps(after, "throughput")[1] == ("green", 1234.0)
    assert 5 < _override_steps(after, "errors", "non-finite losses (5m)")[1][1] < 5 + 1e-9
    # The temperature line of the per-GPU panel follows the spec too.
    hot = changed.model_copy(
        update={
            "objectives": changed.objectives.model_copy(
                update={"gpu_temperature_max_celsius": 75.0}
            )
        }
    )
    temperature = _panels(_build(hot)[0])[PANEL_IDS["gpu_temperature"]]
    assert temperature["fieldConfig"]["defaults"]["thresholds"]["steps"][-1]["value"] == 75.0


# --- panels, ids, alerts, links ----------------------------------------------------------------


def test_every_panel_id_is_present(built: tuple, spec: JobSpec) -> None:
    panels = _panels(built[0])
    assert (PANEL_IDS["slo"] in panels) == bool(spec.slos)  # the SLO panel needs an SLO
    multi_node = spec.shape.nodes > 1
    assert (PANEL_IDS["fabric"] in panels) == multi_node  # InfiniBand: multi-node jobs only
    for key, panel_id in PANEL_IDS.items():
        if (key == "slo" and not spec.slos) or (key == "fabric" and not multi_node):
            continue
        assert panel_id in panels, f"no panel for {key} (id {panel_id})"
        assert panels[panel_id]["type"] != "row"


def test_top_row_is_the_golden_signals(built: tuple) -> None:
    top = [p for p in built[0]["panels"] if p["gridPos"]["y"] == 0]
    assert [p["id"] for p in top] == [
        PANEL_IDS[k] for k in ("step_time", "throughput", "errors", "gpu_saturation", "mfu")
    ]
    assert {p["type"] for p in top} == {"stat"}


def test_panel_ids_unique_and_extras_from_100(built: tuple) -> None:
    ids = [p["id"] for p in iter_panels(built[0])]
    assert len(ids) == len(set(ids))
    extras = set(ids) - set(PANEL_IDS.values())
    assert extras and min(extras) >= 100


def test_every_alert_panel_exists(built: tuple) -> None:
    dashboard, alerts, _ = built
    panels = _panels(dashboard)
    for alert in alerts:
        assert PANEL_IDS[alert.panel] in panels, alert.name


def test_runbook_links(built: tuple, spec: JobSpec) -> None:
    dashboard, alerts, _ = built
    base = spec.links.runbook_base_url.rstrip("/")
    assert any(link["url"] == spec.links.runbook_base_url for link in dashboard["links"])
    panels = _panels(dashboard)
    seen = set()
    for panel in panels.values():
        for link in panel.get("links", []):
            name = link["title"].removeprefix("Runbook: ")
            assert link["title"] == f"Runbook: {name}" and re.fullmatch(r"[A-Z][A-Za-z]+", name)
            assert link["url"] == f"{base}/{name}.md"
            url = urlparse(link["url"])
            assert url.scheme in ("http", "https") and url.netloc and "//" not in url.path
            assert link["type"] == "link"
            seen.add((panel["id"], name))
    # Every alert is linked from the panel its dashboard_url points at.
    assert seen == {(PANEL_IDS[a.panel], a.name) for a in alerts}


def test_datasources_are_the_template_variable(built: tuple) -> None:
    dashboard, _, _ = built
    for panel in iter_panels(dashboard):
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == DATASOURCE
        assert panel["targets"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE
    for annotation in dashboard["annotations"]["list"]:
        assert annotation["datasource"] == DATASOURCE


def test_template_variables(built: tuple, spec: JobSpec) -> None:
    variables = {v["name"]: v for v in built[0]["templating"]["list"]}
    assert list(variables) == ["datasource", "job", "node", "gpu"]
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["job"]["query"] == spec.name
    selector = f'training_job="{spec.name}"'
    node, gpu = variables["node"], variables["gpu"]
    assert node["query"] == (
        f"label_values(gpu:trainsignals_gpu_utilization:ratio{{{selector}}}, node)"
    )
    assert gpu["query"] == (
        f'label_values(gpu:trainsignals_gpu_utilization:ratio{{node=~"$node",{selector}}}, gpu)'
    )
    for variable in (node, gpu):
        assert variable["multi"] and variable["includeAll"]
        assert variable["datasource"] == DATASOURCE


def test_per_gpu_panels_filter_by_node_and_gpu(built: tuple) -> None:
    queries = dict(panel_queries(built[0]))
    for key in (
        "gpu_utilization",
        "gpu_memory",
        "gpu_power",
        "gpu_temperature",
        "gpu_throttle",
        "gpu_errors",
    ):
        expr = queries[PANEL_IDS[key]]
        assert 'node=~"$node"' in expr and 'gpu=~"$gpu"' in expr, key
    for key in ("disk", "network", "gpu_count"):
        assert 'node=~"$node"' in queries[PANEL_IDS[key]], key


def test_firing_alerts_panel_and_annotation(built: tuple, spec: JobSpec) -> None:
    dashboard, _, _ = built
    expr = f'ALERTS{{alertstate="firing",training_job="{spec.name}"}}'
    panel = _panels(dashboard)[PANEL_IDS["firing_alerts"]]
    assert [t["expr"] for t in panel["targets"]] == [expr]
    (annotation,) = [a for a in dashboard["annotations"]["list"] if a["expr"] == expr]
    assert annotation["titleFormat"] == "{{alertname}}"
    assert annotation["tagKeys"] == "severity"
    assert annotation["enable"]


def test_loss_panel_marks_non_finite_losses(built: tuple) -> None:
    exprs = [e for pid, e in panel_queries(built[0]) if pid == PANEL_IDS["loss"]]
    assert any(e.startswith("job:trainsignals_loss:avg{") for e in exprs)
    assert any("job:trainsignals_nonfinite_losses:increase5m" in e and "> 0" in e for e in exprs)


def test_gpu_errors_panel_by_source(spec: JobSpec) -> None:
    dashboard, _, _ = _build(spec)
    exprs = " ".join(e for pid, e in panel_queries(dashboard) if pid == PANEL_IDS["gpu_errors"])
    for name in (
        "gpu:trainsignals_gpu_ecc_uncorrected:increase10m",
        "gpu:trainsignals_gpu_xid_critical:seen10m",
        "gpu:trainsignals_gpu_xid_other:seen10m",
        "gpu:trainsignals_gpu_remapped_rows:pending",
    ):
        assert name in exprs
    # dcgm-exporter has no NVML error counter, so no such rule and no such query.
    assert ("nvml_errors" in exprs) == (spec.gpu_metrics == "trainsignals")


# --- queries -------------------------------------------------------------------------------------

PROMQL_WORDS = frozenset(
    {
        "and",
        "or",
        "unless",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "by",
        "without",
        "bool",
        "offset",
        "atan2",
        "sum",
        "avg",
        "min",
        "max",
        "count",
        "stddev",
        "stdvar",
        "topk",
        "bottomk",
        "quantile",
        "count_values",
        "group",
        "inf",
        "nan",
        "label_values",
    }
)
# A name followed by a selector, a range, whitespace or the end; not part of a longer token.
METRIC_NAME = re.compile(r"(?<![\w:.$])([a-zA-Z_:][a-zA-Z0-9_:]*)(?=\s*[{\[]|\s|$)")
STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def metric_names(expr: str) -> set[str]:
    names = set(METRIC_NAME.findall(STRING.sub('""', expr)))
    return {n for n in names if n.lower() not in PROMQL_WORDS}


def test_metric_name_tokenizer() -> None:
    expr = (
        'avg_over_time(job:a:b{x="y z"}[5m]) and on (training_job) sum by (node) '
        '(rate(c_total{d=~"$node"}[1m])) > 0 or up'
    )
    assert metric_names(expr) == {"job:a:b", "c_total", "up"}


def test_queries_read_only_recorded_or_catalogued_series(built: tuple) -> None:
    dashboard, _, ctx = built
    allowed = {r["record"] for r in recording_rules(ctx)} | known_series_names()
    exprs = [e for _, e in panel_queries(dashboard)]
    exprs += [a["expr"] for a in dashboard["annotations"]["list"]]
    exprs += [v["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    for expr in exprs:
        names = metric_names(expr)
        assert names, f"no metric name found in {expr!r}"
        assert names <= allowed, f"{expr!r} reads {sorted(names - allowed)}"


def test_queries_are_plain_promql(built: tuple) -> None:
    # The end-to-end test substitutes $node and $gpu and runs every query on Prometheus.
    for panel_id, expr in panel_queries(built[0]):
        plain = expr.replace("$node", ".*").replace("$gpu", ".*").replace("$__range", "1h")
        assert "$" not in plain, (panel_id, expr)
        assert plain.count("(") == plain.count(")") and plain.count("{") == plain.count("}")


def test_panel_queries_cover_nested_rows() -> None:
    dashboard = {
        "panels": [
            {"type": "stat", "id": 1, "targets": [{"expr": "up", "refId": "A"}]},
            {
                "type": "row",
                "id": 100,
                "collapsed": True,
                "panels": [
                    {
                        "type": "timeseries",
                        "id": 2,
                        "targets": [{"expr": "a", "refId": "A"}, {"expr": "b", "refId": "B"}],
                    },
                ],
            },
        ]
    }
    assert panel_queries(dashboard) == [(1, "up"), (2, "a"), (2, "b")]


def test_every_panel_has_queries(built: tuple) -> None:
    dashboard, _, _ = built
    with_queries = {pid for pid, _ in panel_queries(dashboard)}
    for panel in iter_panels(dashboard):
        if panel["type"] != "row":
            assert panel["id"] in with_queries, panel["title"]
