"""Kubernetes names as kube-prometheus-stack makes them: the chart's fullname, and the meta
rules each release's PrometheusRule carries, which must select that release's own Prometheus
and Alertmanager scrape jobs (promtool, with the generated meta test cases)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from trainsignals.generator.deploy.kube_prometheus_stack import fullname
from trainsignals.generator.deploy.kubernetes_meta import release_settings, releases
from trainsignals.generator.loader import load_specs, spec_files
from trainsignals.generator.meta.unit_tests import meta_rule_tests
from trainsignals.generator.spec.monitoring import DEFAULT_SETTINGS

from .conftest import JOBS, run_tool
from .test_kubernetes import generated

# kube-prometheus-stack's fullname template (charts/kube-prometheus-stack/templates/
# _helpers.tpl, chart 88.5.3): (release, nameOverride, fullnameOverride) -> fullname.
CHART_FULLNAMES = [
    ("kube-prometheus-stack", "", "", "kube-prometheus-stack"),
    ("prometheus", "", "", "prometheus-kube-prometheus"),  # trunc 26
    ("monitoring", "", "", "monitoring-kube-prometheus"),
    ("kps", "", "", "kps-kube-prometheus-stack"),
    ("my-kube-prometheus-stack-prod", "", "", "my-kube-prometheus-stack-p"),
    ("kps-prod", "kps", "", "kps-prod"),
    ("x", "", "obs-stack-with-a-long-override-", "obs-stack-with-a-long-over"),
    ("x", "", "twenty-five-characters-x-", "twenty-five-characters-x"),  # trimSuffix "-"
]


@pytest.mark.parametrize(("release", "name", "full", "expected"), CHART_FULLNAMES)
def test_chart_fullname_is_computed_as_the_chart_does(
    release: str, name: str, full: str, expected: str
) -> None:
    assert fullname(release, name, full) == expected


# The Service names, hence `job`, of the example releases' Prometheus and Alertmanager, as
# kube-prometheus-stack's ServiceMonitors scrape them (no jobLabel: the Service name).
RELEASE_JOBS = {
    "kube-prometheus-stack": (
        "kube-prometheus-stack-prometheus",
        "kube-prometheus-stack-alertmanager",
    ),
    "prometheus": (
        "prometheus-kube-prometheus-prometheus",
        "prometheus-kube-prometheus-alertmanager",
    ),
}


def _meta_rule_objects() -> list[dict]:
    return [
        o
        for o in yaml.safe_load_all(generated()["deploy/kubernetes/meta.yaml"])
        if o["metadata"]["name"] == "trainsignals-meta"
    ]


def _promtool_test(folder: Path, groups: list, tests: list[dict]) -> str:
    (folder / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    document = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": tests}
    (folder / "test.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    result = run_tool("promtool", "test", "rules", "test.yaml", cwd=folder, timeout=120)
    return "" if result.returncode == 0 else result.stdout + result.stderr


def test_meta_rules_on_kubernetes_select_the_releases_scrape_jobs(tmp_path: Path) -> None:
    """A failing rule group of the release's own Prometheus pages, and its one Alertmanager
    (the chart's default replicas) up is no AlertmanagerClusterDegraded (promtool)."""
    for obj in _meta_rule_objects():
        prometheus, alertmanager = RELEASE_JOBS[obj["metadata"]["labels"]["release"]]
        prom = f'{{job="{prometheus}",instance="10.0.0.5:9090"}}'
        test = {
            "interval": "1m",
            "input_series": [
                {
                    "series": f"prometheus_rule_evaluation_failures_total{prom[:-1]},"
                    'rule_group="g"}',
                    "values": "0x20 1+1x40",
                },
                {
                    "series": f'up{{job="{alertmanager}",instance="10.0.0.6:9093"}}',
                    "values": "1x60",
                },
            ],
            "promql_expr_test": [
                {
                    "expr": 'ALERTS{alertname="PrometheusRuleFailures",alertstate="firing"}',
                    "eval_time": "45m",
                    "exp_samples": [
                        {
                            "labels": 'ALERTS{alertname="PrometheusRuleFailures",'
                            f'alertstate="firing",instance="10.0.0.5:9090",job="{prometheus}",'
                            'rule_group="g",severity="page",team="monitoring"}',
                            "value": 1,
                        }
                    ],
                },
                {
                    "expr": 'ALERTS{alertname="AlertmanagerClusterDegraded"}',
                    "eval_time": "45m",
                    "exp_samples": [],
                },
            ],
        }
        folder = tmp_path / obj["metadata"]["namespace"]
        folder.mkdir()
        failed = _promtool_test(folder, obj["spec"]["groups"], [test])
        assert not failed, f"{obj['metadata']['namespace']}: {failed}"


def test_every_meta_alert_fires_on_kubernetes_with_the_release_names(tmp_path: Path) -> None:
    """The generated meta cases, input series labelled with the release's job names, pass
    against each release's PrometheusRule (promtool)."""
    specs = load_specs(spec_files(JOBS))
    by_release = releases(specs)
    for obj in _meta_rule_objects():
        namespace = obj["metadata"]["namespace"]
        release = obj["metadata"]["labels"]["release"]
        group = by_release[(namespace, release)]
        k8s = group[0].deploy.kubernetes
        settings = release_settings(DEFAULT_SETTINGS, k8s)
        assert (settings.prometheus_job, settings.alertmanager_job) == RELEASE_JOBS[release]
        tests = meta_rule_tests(settings, group, "rules.yaml", routed=specs)["tests"]
        folder = tmp_path / namespace
        folder.mkdir()
        failed = _promtool_test(folder, obj["spec"]["groups"], tests)
        assert not failed, f"{namespace}: {failed}"
