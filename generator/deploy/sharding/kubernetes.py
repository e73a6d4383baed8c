"""The sharded topology on prometheus-operator: `deploy/kubernetes/<job>.sharded.yaml`.

One `Prometheus` resource per shard (rather than `shards:` on one resource: each shard's
remote write labels its heartbeat with its own index, which a shared spec cannot), each
selecting its own PodMonitors (the job's, with a hashmod partition of `node` added) and the
edge PrometheusRule; the global PrometheusRule is labelled for the global ruler (e.g. the
VictoriaMetrics operator's vmalert, which reads PrometheusRules). None of these objects carries
the `release` label, so kube-prometheus-stack's own Prometheus does not scrape or evaluate them
twice. The GPU exporter DaemonSet, dashboard and AlertmanagerConfig are the single-server file's.
"""

from __future__ import annotations

import copy

from trainsignals.generator.deploy.kubernetes import (
    MONITORING,
    gpu_pod_monitor,
    kubernetes_objects,
    metadata,
    training_pod_monitor,
)
from trainsignals.generator.deploy.kubernetes import prometheus_rule as k8s_prometheus_rule
from trainsignals.generator.deploy.operator_version import operator_comment
from trainsignals.generator.deploy.sharding.topology import (
    HEARTBEAT,
    SHARD_LABEL,
    WRITTEN,
    split_document,
)
from trainsignals.generator.output.yaml import dump
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.spec.job import JobSpec
from trainsignals.generator.spec.monitoring import MonitoringSettings

SHARD_KEY = "trainsignals.io/shard"
RULES_KEY = "trainsignals.io/rules"
JOB_KEY = "trainsignals.io/job"


def _meta(spec: JobSpec, name: str, extra: dict[str, str]) -> dict:
    meta = metadata(spec, name, {JOB_KEY: spec.name, **extra})
    meta["labels"].pop("release")  # not for kube-prometheus-stack's own Prometheus
    return meta


def _partitioned(monitor: dict, spec: JobSpec, shard: int) -> dict:
    monitor = copy.deepcopy(monitor)
    name = f"{monitor['metadata']['name']}-shard-{shard}"
    monitor["metadata"] = _meta(spec, name, {SHARD_KEY: str(shard)})
    for endpoint in monitor["spec"]["podMetricsEndpoints"]:
        endpoint["relabelings"] = endpoint["relabelings"] + [
            {
                "action": "hashmod",
                "sourceLabels": ["node"],
                "modulus": spec.deploy.shards,
                "targetLabel": "__tmp_trainsignals_shard",
            },
            {"action": "keep", "sourceLabels": ["__tmp_trainsignals_shard"], "regex": str(shard)},
        ]
    return monitor


def _prometheus(spec: JobSpec, shard: int) -> dict:
    assert spec.deploy.kubernetes is not None
    return {
        "apiVersion": MONITORING,
        "kind": "Prometheus",
        "metadata": _meta(spec, f"trainsignals-{spec.name}-shard-{shard}", {SHARD_KEY: str(shard)}),
        "spec": {
            "replicas": 1,
            "scrapeInterval": "15s",
            "evaluationInterval": "1m",
            "retention": "1d",  # the global store keeps history; a shard only its windows
            "serviceAccountName": f"{spec.deploy.kubernetes.release}-prometheus",
            "podMonitorSelector": {"matchLabels": {JOB_KEY: spec.name, SHARD_KEY: str(shard)}},
            "ruleSelector": {"matchLabels": {JOB_KEY: spec.name, RULES_KEY: "edge"}},
            # The edge alerts (per node and GPU) go to kube-prometheus-stack's Alertmanager.
            "alerting": {
                "alertmanagers": [
                    {
                        "namespace": spec.deploy.kubernetes.namespace,
                        "name": f"{spec.deploy.kubernetes.release}-alertmanager",
                        "port": "http-web",
                    }
                ]
            },
            "remoteWrite": [
                {
                    "url": spec.deploy.global_write_url,
                    "writeRelabelConfigs": [
                        {"sourceLabels": ["__name__"], "regex": WRITTEN, "action": "keep"},
                        {
                            "sourceLabels": ["__name__"],
                            "regex": HEARTBEAT,
                            "targetLabel": SHARD_LABEL,
                            "replacement": str(shard),
                            "action": "replace",
                        },
                    ],
                }
            ],
        },
    }


def _rule(spec: JobSpec, doc: dict, kind: str) -> dict:
    rule = k8s_prometheus_rule(spec, doc)
    rule["metadata"] = _meta(spec, f"trainsignals-{spec.name}-{kind}", {RULES_KEY: kind})
    return rule


def sharded_kubernetes_objects(
    spec: JobSpec, document: dict, dashboard: str | None, monitoring: MonitoringSettings
) -> list:
    """Every object of the sharded job; `dashboard` as for kubernetes_objects."""
    edge, global_rules = split_document(RuleContext(spec), document, monitoring)
    objects = [_rule(spec, edge, "edge"), _rule(spec, global_rules, "global")]
    for shard in range(spec.deploy.shards):
        objects.append(_prometheus(spec, shard))
        objects += [
            _partitioned(training_pod_monitor(spec), spec, shard),
            _partitioned(gpu_pod_monitor(spec), spec, shard),
        ]
    objects += [
        obj
        for obj in kubernetes_objects(spec, document, dashboard)
        if obj["kind"] not in ("PrometheusRule", "PodMonitor")
    ]
    return objects


def sharded_kubernetes_files(
    spec: JobSpec,
    header: str,
    rules: dict,
    dashboard: str | None,
    monitoring: MonitoringSettings,
) -> dict[str, str]:
    """`deploy/kubernetes/<job>.sharded.yaml` for a sharded job on Kubernetes (else nothing),
    headed with `header`; `rules` and `dashboard` as for kubernetes_objects."""
    if spec.deploy.kubernetes is None or spec.deploy.shards == 1:
        return {}
    objects = sharded_kubernetes_objects(spec, rules, dashboard, monitoring)
    comment = (
        f"# Sharded ({spec.deploy.shards} shards): apply this file instead of {spec.name}.yaml;"
        " the global ruler loads the PrometheusRule labelled trainsignals.io/rules=global.\n"
        + operator_comment(objects)
    )
    return {
        f"deploy/kubernetes/{spec.name}.sharded.yaml": (
            header + comment + "---\n".join(dump(obj) for obj in objects)
        )
    }
