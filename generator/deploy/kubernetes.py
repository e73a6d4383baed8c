"""prometheus-operator objects (kube-prometheus-stack): `deploy/kubernetes/<job>.yaml`.

One multi-document file per spec with a `deploy.kubernetes` section:
- PrometheusRule: the job's generated rule groups, unchanged but for a `namespace` label on
  each alert (the operator's AlertmanagerConfig routes only alerts of its own namespace);
- PodMonitor for the training pods: one endpoint per local rank (training_base_port + r);
- PodMonitor for the GPU exporters, plus a DaemonSet of trainsignals-gpu-exporter on the job's
  nodes (generator/deploy/daemonset.py; gpu_metrics: dcgm instead selects the cluster's
  dcgm-exporter pods on those nodes);
- multi-node jobs: PodMonitor for the release's node_exporter pods on the job's nodes, keeping
  only the InfiniBand series the fabric alerts read (the release scrapes the rest already);
- ConfigMap with the dashboard, labelled for the Grafana sidecar (`grafana_dashboard: "1"`);
- AlertmanagerConfig (v1alpha1): generator/routing/kubernetes.py.

The PodMonitors attach what the rules select on, as the plain scrape config does: `job` of
the spec's scrape_jobs, the selector labels, and `node`: the Kubernetes node name from target
metadata (`__meta_kubernetes_pod_node_name`), never a label the pod exports. A pod's host
name is the pod's name: the training ranks' `node` is gethostname() and dcgm-exporter's
`Hostname` is the pod name unless NODE_NAME is set, and node-keyed inhibitions, infra tickets
and the dashboards' `$node` would miss. So the target's labels win (honorLabels false; the
exporter's clashing copies, renamed `exported_*`, are dropped), and for dcgm-exporter, whose
`pod`/`namespace`/`container` name the GPU's workload and must be honored, `Hostname` and
`hostname` are rewritten to the target's node. PodMonitors rather than ServiceMonitors:
neither the ranks nor the exporters need a Service. Every object carries
`release: <deploy.kubernetes.release>`, which kube-prometheus-stack selects on.
"""

from __future__ import annotations

import re

from trainsignals.generator.deploy.daemonset import (
    EXPORTER_NAME,
    exporter_labels,
    gpu_exporter_daemonset,
)
from trainsignals.generator.deploy.operator_version import operator_comment
from trainsignals.generator.deploy.scrape_config import NODE_EXPORTER_JOB
from trainsignals.generator.output.yaml import dump
from trainsignals.generator.routing.kubernetes import alertmanager_config_object
from trainsignals.generator.signals.fabric import fabric_enabled
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.spec.deploy import Kubernetes
from trainsignals.generator.spec.job import JobSpec

MONITORING = "monitoring.coreos.com/v1"
__all__ = ["EXPORTER_NAME", "exporter_labels", "kubernetes_files", "kubernetes_objects"]
NODE_META = "__meta_kubernetes_pod_node_name"
# dcgm-exporter's host label: `Hostname` up to 4.8.2, `hostname` after NVIDIA/dcgm-exporter#655.
DCGM_HOST_LABELS = ("Hostname", "hostname")


def _k8s(spec: JobSpec) -> Kubernetes:
    assert spec.deploy.kubernetes is not None
    return spec.deploy.kubernetes


def pod_labels(spec: JobSpec) -> dict[str, str]:
    return dict(sorted((_k8s(spec).pod_labels or {"trainsignals.io/job": spec.name}).items()))


def metadata(spec: JobSpec, name: str, extra: dict[str, str] | None = None) -> dict:
    k8s = _k8s(spec)
    labels = {
        "app.kubernetes.io/managed-by": "trainsignals",
        "app.kubernetes.io/part-of": spec.name,
        "release": k8s.release,
        **(extra or {}),
    }
    return {"name": name, "namespace": k8s.namespace, "labels": dict(sorted(labels.items()))}


def _target_relabelings(spec: JobSpec, job_label: str) -> list[dict]:
    rules = [{"action": "replace", "targetLabel": "job", "replacement": job_label}]
    rules += [
        {"action": "replace", "targetLabel": label, "replacement": value}
        for label, value in spec.selector_labels.items()
    ]
    rules.append(
        {
            "action": "replace",
            "sourceLabels": ["__meta_kubernetes_pod_node_name"],
            "targetLabel": "node",
        }
    )
    return rules


def _drop_exported(spec: JobSpec) -> list[dict]:
    """With honorLabels false a scraped label the target also sets is kept as `exported_<name>`:
    drop the copies of what the target decides (job, instance, node, the selector labels)."""
    names = sorted({"job", "instance", "node", *spec.selector_labels})
    return [{"action": "labeldrop", "regex": f"exported_({'|'.join(names)})"}]


def _dcgm_host_is_node() -> list[dict]:
    """Rewrite dcgm-exporter's host label, where a series has one, to the target's `node`.

    Its pod labels must stay honored, so the target's `node` cannot simply win; the rules
    take `node` from the host label (generator/signals/dcgm_source.py)."""
    return [
        {
            "action": "replace",
            "sourceLabels": [host, "node"],
            "regex": ".+;(.+)",
            "targetLabel": host,
            "replacement": "$1",
        }
        for host in DCGM_HOST_LABELS
    ]


def prometheus_rule(spec: JobSpec, rules: dict) -> dict:
    """`rules`: a rules document (left as it is: the object gets copies of what it changes)."""
    namespace = _k8s(spec).namespace
    groups = [
        {**group, "rules": [_namespaced(rule, namespace) for rule in group["rules"]]}
        for group in rules["groups"]
    ]
    return {
        "apiVersion": MONITORING,
        "kind": "PrometheusRule",
        "metadata": metadata(spec, f"trainsignals-{spec.name}"),
        "spec": {"groups": groups},
    }


def _namespaced(rule: dict, namespace: str) -> dict:
    if "alert" not in rule:
        return rule
    return {**rule, "labels": {**rule.get("labels", {}), "namespace": namespace}}


def training_pod_monitor(spec: JobSpec) -> dict:
    k8s = _k8s(spec)
    ranks = k8s.ranks_per_pod or spec.shape.gpus_per_node
    relabelings = _target_relabelings(spec, spec.scrape_jobs.training)
    return {
        "apiVersion": MONITORING,
        "kind": "PodMonitor",
        "metadata": metadata(spec, f"trainsignals-{spec.name}-training"),
        "spec": {
            "selector": {"matchLabels": pod_labels(spec)},
            "namespaceSelector": {"matchNames": [k8s.training_namespace or k8s.namespace]},
            "podMetricsEndpoints": [
                {
                    "portNumber": spec.deploy.training_base_port + rank,
                    "path": "/metrics",
                    "honorLabels": False,
                    "relabelings": relabelings,
                    "metricRelabelings": _drop_exported(spec),
                }
                for rank in range(ranks)
            ],
        },
    }


def _meta_label(label: str) -> str:
    """Prometheus's __meta_kubernetes_node_label_<name> spelling of a Kubernetes label."""
    return "__meta_kubernetes_node_label_" + re.sub(r"[^a-zA-Z0-9_]", "_", label)


def _keep_jobs_nodes(spec: JobSpec) -> dict:
    """Keep only targets on nodes labelled `<node_label>=<job>` (needs attachMetadata)."""
    return {
        "action": "keep",
        "sourceLabels": [_meta_label(_k8s(spec).node_label)],
        "regex": re.escape(spec.name),
    }


def gpu_pod_monitor(spec: JobSpec) -> dict:
    k8s = _k8s(spec)
    relabelings = _target_relabelings(spec, spec.scrape_jobs.gpu)
    endpoint: dict = {"path": "/metrics", "port": "metrics"}
    body: dict
    if spec.gpu_metrics == "dcgm":
        # The cluster's one dcgm-exporter DaemonSet serves every node: keep the exporters on
        # nodes labelled with this job (node metadata needs attachMetadata).
        endpoint |= {
            "honorLabels": True,
            "relabelings": [_keep_jobs_nodes(spec), *relabelings],
            "metricRelabelings": _dcgm_host_is_node(),
        }
        body = {
            "selector": {"matchLabels": dict(sorted(k8s.dcgm_exporter_labels.items()))},
            "namespaceSelector": {"matchNames": [k8s.dcgm_exporter_namespace]},
            "attachMetadata": {"node": True},
        }
    else:
        endpoint |= {
            "honorLabels": False,
            "relabelings": relabelings,
            "metricRelabelings": _drop_exported(spec),
        }
        body = {
            "selector": {"matchLabels": exporter_labels(spec)},
            "namespaceSelector": {"matchNames": [k8s.namespace]},
        }
    return {
        "apiVersion": MONITORING,
        "kind": "PodMonitor",
        "metadata": metadata(spec, f"trainsignals-{spec.name}-gpu"),
        "spec": {**body, "podMetricsEndpoints": [endpoint]},
    }


def node_exporter_pod_monitor(spec: JobSpec) -> dict:
    """The release's node_exporter pods on the job's nodes, for the fabric alerts.

    kube-prometheus-stack already scrapes node_exporter (job `node-exporter`) without the
    job's selector labels; this second scrape of the job's nodes keeps only the InfiniBand
    series, labelled like the plain scrape config's node_exporter job.
    """
    k8s = _k8s(spec)
    relabelings = [_keep_jobs_nodes(spec), *_target_relabelings(spec, NODE_EXPORTER_JOB)]
    keep = {"action": "keep", "sourceLabels": ["__name__"], "regex": "node_infiniband_.+"}
    endpoint = {
        "path": "/metrics",
        "port": k8s.node_exporter_port,
        "honorLabels": False,
        "relabelings": relabelings,
        "metricRelabelings": [keep, *_drop_exported(spec)],
    }
    return {
        "apiVersion": MONITORING,
        "kind": "PodMonitor",
        "metadata": metadata(spec, f"trainsignals-{spec.name}-node"),
        "spec": {
            "selector": {"matchLabels": dict(sorted(k8s.node_exporter_labels.items()))},
            "namespaceSelector": {"matchNames": [k8s.node_exporter_namespace]},
            "attachMetadata": {"node": True},
            "podMetricsEndpoints": [endpoint],
        },
    }


def dashboard_config_map(spec: JobSpec, dashboard_json: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(
            spec, f"trainsignals-{spec.name}-dashboard", {"grafana_dashboard": "1"}
        ),
        "data": {f"{spec.name}.json": dashboard_json},
    }


def kubernetes_objects(spec: JobSpec, rules: dict, dashboard: str | None = None) -> list[dict]:
    """Every object of the job: `rules` is its rules document, `dashboard` its dashboard's
    JSON text (None: no dashboard ConfigMap)."""
    objects = [prometheus_rule(spec, rules)]
    objects += [training_pod_monitor(spec), gpu_pod_monitor(spec)]
    if fabric_enabled(RuleContext(spec)):
        objects.append(node_exporter_pod_monitor(spec))
    if spec.gpu_metrics == "trainsignals":
        name = f"trainsignals-{spec.name}-gpu-exporter"
        objects.append(gpu_exporter_daemonset(spec, metadata(spec, name, exporter_labels(spec))))
    if dashboard is not None:
        objects.append(dashboard_config_map(spec, dashboard))
    objects.append(alertmanager_config_object(spec, metadata(spec, f"trainsignals-{spec.name}")))
    return objects


def kubernetes_files(
    spec: JobSpec, header: str, rules: dict, dashboard: str | None = None
) -> dict[str, str]:
    """`deploy/kubernetes/<job>.yaml`, headed with `header`; the rest as kubernetes_objects."""
    objects = kubernetes_objects(spec, rules, dashboard)
    documents = [dump(obj) for obj in objects]
    comment = (
        "# kubectl apply --server-side -f this file. Label the job's nodes "
        f"{_k8s(spec).node_label}={spec.name}; receivers read Secrets in "
        f"namespace {_k8s(spec).namespace}.\n" + operator_comment(objects)
    )
    return {f"deploy/kubernetes/{spec.name}.yaml": header + comment + "---\n".join(documents)}
