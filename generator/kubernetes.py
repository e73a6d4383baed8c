"""prometheus-operator objects (kube-prometheus-stack): `deploy/kubernetes/<job>.yaml`.

One multi-document file per spec with a `deploy.kubernetes` section:
- PrometheusRule: the job's generated rule groups, unchanged but for a `namespace` label on
  each alert (the operator's AlertmanagerConfig routes only alerts of its own namespace);
- PodMonitor for the training pods: one endpoint per local rank (training_base_port + r);
- PodMonitor for the GPU exporters, plus a DaemonSet of trainsignals-gpu-exporter on the job's
  nodes (gpu_metrics: dcgm instead selects the cluster's dcgm-exporter pods on those nodes);
- ConfigMap with the dashboard, labelled for the Grafana sidecar (`grafana_dashboard: "1"`);
- AlertmanagerConfig (v1alpha1): generator/kubernetes_alertmanager.py.

Both PodMonitors attach what the rules select on, as the plain scrape config does: `job` of
the spec's scrape_jobs, the selector labels, and `node` (the pod's node), with honorLabels.
PodMonitors rather than ServiceMonitors: neither the ranks nor the exporters need a Service.
Every object carries `release: <deploy.kubernetes.release>`, which kube-prometheus-stack
selects on.
"""

from __future__ import annotations

import re

import yaml

from .deploy import Kubernetes
from .kubernetes_alertmanager import alertmanager_config_object
from .spec import JobSpec
from .yaml_out import dump

MONITORING = "monitoring.coreos.com/v1"
EXPORTER_NAME = "trainsignals-gpu-exporter"


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


def prometheus_rule(spec: JobSpec, rules_text: str) -> dict:
    groups = yaml.load(rules_text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))["groups"]
    namespace = _k8s(spec).namespace
    for group in groups:
        for rule in group["rules"]:
            if "alert" in rule:
                rule["labels"] = {**rule.get("labels", {}), "namespace": namespace}
    return {
        "apiVersion": MONITORING,
        "kind": "PrometheusRule",
        "metadata": metadata(spec, f"trainsignals-{spec.name}"),
        "spec": {"groups": groups},
    }


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
                    "honorLabels": True,
                    "relabelings": relabelings,
                }
                for rank in range(ranks)
            ],
        },
    }


def _meta_label(label: str) -> str:
    """Prometheus's __meta_kubernetes_node_label_<name> spelling of a Kubernetes label."""
    return "__meta_kubernetes_node_label_" + re.sub(r"[^a-zA-Z0-9_]", "_", label)


def gpu_pod_monitor(spec: JobSpec) -> dict:
    k8s = _k8s(spec)
    relabelings = _target_relabelings(spec, spec.scrape_jobs.gpu)
    endpoint: dict = {"path": "/metrics", "honorLabels": True, "relabelings": relabelings}
    body: dict
    if spec.gpu_metrics == "dcgm":
        # The cluster's one dcgm-exporter DaemonSet serves every node: keep the exporters on
        # nodes labelled with this job (node metadata needs attachMetadata).
        keep = {
            "action": "keep",
            "sourceLabels": [_meta_label(k8s.node_label)],
            "regex": re.escape(spec.name),
        }
        endpoint |= {"port": "metrics", "relabelings": [keep, *relabelings]}
        body = {
            "selector": {"matchLabels": dict(sorted(k8s.dcgm_exporter_labels.items()))},
            "namespaceSelector": {"matchNames": [k8s.dcgm_exporter_namespace]},
            "attachMetadata": {"node": True},
        }
    else:
        endpoint["port"] = "metrics"
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


def exporter_labels(spec: JobSpec) -> dict[str, str]:
    return {"app.kubernetes.io/instance": spec.name, "app.kubernetes.io/name": EXPORTER_NAME}


def gpu_exporter_daemonset(spec: JobSpec) -> dict:
    """trainsignals-gpu-exporter on every node labelled `<node_label>=<job>`."""
    k8s = _k8s(spec)
    port = spec.deploy.gpu_exporter_port
    container = {
        "name": "exporter",
        "image": k8s.gpu_exporter_image,
        "command": ["trainsignals-gpu-exporter"],
        "args": [f"--port={port}", "--node=$(NODE_NAME)"],
        "env": [
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            # NVIDIA's container runtime exposes every GPU for NVML without allocating one.
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
        ],
        "ports": [{"name": "metrics", "containerPort": port, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/metrics", "port": "metrics"}},
        "resources": {
            "requests": {"cpu": "50m", "memory": "64Mi"},
            "limits": {"memory": "256Mi"},
        },
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True},
    }
    labels = exporter_labels(spec)
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": metadata(spec, f"trainsignals-{spec.name}-gpu-exporter", labels),
        "spec": {
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {k8s.node_label: spec.name},
                    "tolerations": [
                        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
                    ],
                    "containers": [container],
                },
            },
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


def kubernetes_objects(spec: JobSpec, files: dict[str, str]) -> list[dict]:
    """Every object of the job; `files` holds its generated rules and dashboard."""
    objects = [prometheus_rule(spec, files[f"alerts/{spec.name}.rules.yaml"])]
    objects += [training_pod_monitor(spec), gpu_pod_monitor(spec)]
    if spec.gpu_metrics == "trainsignals":
        objects.append(gpu_exporter_daemonset(spec))
    dashboard = files.get(f"dashboards/{spec.name}.json")
    if dashboard is not None:
        objects.append(dashboard_config_map(spec, dashboard))
    objects.append(alertmanager_config_object(spec, metadata(spec, f"trainsignals-{spec.name}")))
    return objects


def kubernetes_files(spec: JobSpec, header: str, files: dict[str, str]) -> dict[str, str]:
    documents = [dump(obj) for obj in kubernetes_objects(spec, files)]
    comment = (
        "# kubectl apply --server-side -f this file. Label the job's nodes "
        f"{_k8s(spec).node_label}={spec.name}; receivers read Secrets in "
        f"namespace {_k8s(spec).namespace}.\n"
    )
    return {f"deploy/kubernetes/{spec.name}.yaml": header + comment + "---\n".join(documents)}
