"""Every alert name in any generated text exists.

ScrapeTargetsVanished{vanished="node"} told on-call that IbPortDown, IbPortFlapping and
IbPortErrors were blind: no such alerts ever existed (they are InfinibandPort...). An alert
name typed in a second place goes stale; this finds them. Candidates are the CamelCase words
of every generated file (rules, promtool tests, runbooks, alertmanager.yaml, docs, deploy
objects, dashboards); each must be an alert the generated rules define or the catalogue
(job, meta and on-call alerts) knows, or one of the few CamelCase words below that are not
alert names.
"""

from __future__ import annotations

import re

import yaml

from trainsignals.generator.alerts.catalog import ALERTS
from trainsignals.generator.spec.monitoring import META_ALERT_NAMES
from trainsignals.generator.spec.pipeline_alerts import ONCALL_ALERT, SHARD_ALERT
from trainsignals.metrics.gpu_models import PEAK_DENSE_FLOPS

from .conftest import ROOT

GENERATED = ("alerts", "runbooks", "docs", "deploy", "dashboards")
CAMEL = re.compile(r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b")
# CamelCase words of the generated text that are not alert names: Kubernetes kinds and
# fields, Alertmanager template fields, product names, schema class names, counters.
NOT_ALERTS = frozenset(
    {
        "AlertName", "AlertmanagerConfig", "CommonAnnotations", "CommonLabels", "ConfigMap",
        "DaemonSet", "ExitCode", "GpuExporter", "GroupLabels", "InfiniBand", "JobID", "JobSpec",
        "LinkDownedCounter", "LinkErrorRecoveryCounter", "MiB", "NaN", "NaNs", "NoExecute",
        "NoSchedule", "NodeList", "NotReady", "PagerDuty", "PodMonitor", "PreferNoSchedule",
        "PriorityClass", "PromQL", "PrometheusRule", "PyTorch", "RollingUpdate",
        "RuntimeClass", "RuntimeDefault", "ScrapeJobs", "SecretRef", "SymbolErrorCounter",
    }
)  # fmt: skip


def defined_alerts(files: dict[str, str]) -> set[str]:
    """Alert names of every generated rule (rule files, PrometheusRules) and the catalogue."""
    names = {d.name for d in ALERTS} | set(META_ALERT_NAMES) | {ONCALL_ALERT, SHARD_ALERT}
    for path, text in files.items():
        if path.endswith((".yaml", ".yml")) and "alert:" in text:
            for document in yaml.safe_load_all(text):
                names |= set(_alerts_in(document))
    return names


def _alerts_in(node: object):
    if isinstance(node, dict):
        if isinstance(node.get("alert"), str):
            yield node["alert"]
        for value in node.values():
            yield from _alerts_in(value)
    elif isinstance(node, list):
        for value in node:
            yield from _alerts_in(value)


def unknown_names(files: dict[str, str]) -> dict[str, str]:
    """{CamelCase word that is no alert and not a known non-alert word: the first file}."""
    # The GPU model names the spec reference lists (L40S) are the table's, not alerts.
    known = defined_alerts(files) | NOT_ALERTS | set(PEAK_DENSE_FLOPS)
    unknown: dict[str, str] = {}
    for path, text in sorted(files.items()):
        for word in CAMEL.findall(text):
            if word not in known:
                unknown.setdefault(word, path)
    return unknown


def generated_files() -> dict[str, str]:
    return {
        str(p.relative_to(ROOT)): p.read_text(encoding="utf-8", errors="replace")
        for folder in GENERATED
        for p in sorted((ROOT / folder).rglob("*"))
        if p.is_file()
    }


def test_every_alert_name_in_generated_text_exists() -> None:
    files = generated_files()
    assert len(files) > 50
    unknown = unknown_names(files)
    assert unknown == {}, (
        "names in generated text that no generated rule or catalogue alert has (a renamed or "
        "invented alert; if a word is not an alert name, add it to NOT_ALERTS): "
        + ", ".join(f"{word} ({path})" for word, path in sorted(unknown.items()))
    )


def test_a_stale_alert_name_is_found() -> None:
    text = "the InfiniBand alerts (IbPortDown, InfinibandPortDown) read node_exporter"
    assert unknown_names({"alerts/meta.rules.yaml": text}) == {
        "IbPortDown": "alerts/meta.rules.yaml"
    }
