"""The dashboard's thresholds are the spec's objectives; its panels, ids, alert panels, links
and template variables."""

from __future__ import annotations

import re
from urllib.parse import urlparse

import pytest

from tests.dashboards.helpers import (
    DATASOURCE,
    build_job_dashboard,
    override_steps,
    panels_by_id,
    per_step_spec,
    stat_steps,
)
from trainsignals.generator.dashboards.kit import iter_panels, panel_queries
from trainsignals.generator.signals.panels import PANEL_IDS
from trainsignals.generator.spec.job import JobSpec

# --- thresholds: the alerts' values from the same spec fields ---------------------------------


def test_stat_thresholds_are_the_spec_objectives(built: tuple, spec: JobSpec) -> None:
    dashboard, _, _ = built
    o = spec.objectives
    assert stat_steps(dashboard, "mfu") == [("red", None), ("green", o.mfu_min_ratio)]
    throughput = stat_steps(dashboard, "throughput")
    if spec.tokens_per_second_floor is not None:
        assert throughput == [("red", None), ("green", spec.tokens_per_second_floor)]
    else:
        expected = 0.5 * o.mfu_min_ratio * spec.shape.peak_flops / spec.shape.model_flops_per_step
        assert throughput[0] == ("red", None)
        assert throughput[1][1] == pytest.approx(expected)
    step_time = stat_steps(dashboard, "step_time")
    if o.step_time_max_seconds is None:
        assert [c for c, _ in step_time] == ["green"]
    else:
        assert step_time == [("green", None), ("red", o.step_time_max_seconds)]
    nonfinite = override_steps(dashboard, "errors", "non-finite losses (5m)")
    # Red strictly above the tolerated count, as the alert's `>`.
    assert nonfinite == [("green", None), ("red", o.nonfinite_losses_max + 0.001)]
    assert override_steps(dashboard, "errors", "dropped batches (ratio)") == [
        ("green", None),
        ("red", o.dropped_batches_max_ratio),
    ]
    assert override_steps(dashboard, "gpu_saturation", "max GPU memory used")[-1] == (
        "red",
        o.gpu_memory_max_ratio,
    )


def test_changing_an_objective_moves_the_threshold() -> None:
    base = per_step_spec()
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
    before, _, _ = build_job_dashboard(base)
    after, _, _ = build_job_dashboard(changed)
    assert stat_steps(before, "mfu")[1] == ("green", 0.30)
    assert stat_steps(after, "mfu")[1] == ("green", 0.42)
    assert stat_steps(after, "step_time")[1] == ("red", 7.0)
    assert stat_steps(after, "throughput")[1] == ("green", 1234.0)
    assert override_steps(after, "errors", "non-finite losses (5m)")[1][1] == 5.001
    # The temperature line of the per-GPU panel follows the spec too.
    hot = changed.model_copy(
        update={
            "objectives": changed.objectives.model_copy(
                update={"gpu_temperature_max_celsius": 75.0}
            )
        }
    )
    temperature = panels_by_id(build_job_dashboard(hot)[0])[PANEL_IDS["gpu_temperature"]]
    assert temperature["fieldConfig"]["defaults"]["thresholds"]["steps"][-1]["value"] == 75.0


# --- panels, ids, alerts, links ----------------------------------------------------------------


# Panels of the InfiniBand fabric: multi-node jobs only.
FABRIC_PANELS = ("fabric", "where_slow_links", "where_slow_link_rate", "where_slow_nccl")


def test_every_panel_id_is_present(built: tuple, spec: JobSpec) -> None:
    panels = panels_by_id(built[0])
    assert (PANEL_IDS["slo"] in panels) == bool(spec.slos)  # the SLO panel needs an SLO
    multi_node = spec.shape.nodes > 1
    assert (PANEL_IDS["fabric"] in panels) == multi_node  # InfiniBand: multi-node jobs only
    for key, panel_id in PANEL_IDS.items():
        if (key == "slo" and not spec.slos) or (key in FABRIC_PANELS and not multi_node):
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
    panels = panels_by_id(dashboard)
    for alert in alerts:
        assert PANEL_IDS[alert.panel] in panels, alert.name


def test_runbook_links(built: tuple, spec: JobSpec) -> None:
    dashboard, alerts, _ = built
    base = spec.links.runbook_base_url.rstrip("/")
    assert any(link["url"] == spec.links.runbook_base_url for link in dashboard["links"])
    panels = panels_by_id(dashboard)
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
    panel = panels_by_id(dashboard)[PANEL_IDS["firing_alerts"]]
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
    dashboard, _, _ = build_job_dashboard(spec)
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
