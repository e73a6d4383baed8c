"""Names kube-prometheus-stack gives its scrape jobs, computed from the release as the chart does.

The meta-monitoring rules select Prometheus and Alertmanager by `job`. On Kubernetes those
jobs come from the chart's ServiceMonitors, not from the monitoring settings (read in
prometheus-community/helm-charts, charts/kube-prometheus-stack 88.5.3):

- `_helpers.tpl`, "kube-prometheus-stack.fullname": fullnameOverride (trunc 26), else the
  release name when it contains the chart name (or nameOverride), else `<release>-<name>`,
  truncated to 26 characters and a trailing `-` trimmed;
- `templates/prometheus/service.yaml` and `servicemonitor.yaml`: the Service is
  `<fullname>-prometheus` and its ServiceMonitor sets no `jobLabel`, so the job is the Service
  name (prometheus-operator's default); the same for `<fullname>-alertmanager`
  (`templates/alertmanager/`) and the operator's `<fullname>-operator`;
- `templates/exporters/kubelet/servicemonitor.yaml`: `jobLabel: k8s-app` on a Service labelled
  `k8s-app: kubelet`, so `kubelet`;
- the prometheus-node-exporter subchart: `jobLabel: jobLabel` with the Service label
  `jobLabel: node-exporter` (values.yaml), so `node-exporter`.

So a release named `prometheus` scrapes itself as `prometheus-kube-prometheus-prometheus`, and
a rule selecting `job="prometheus"` there selects nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

CHART = "kube-prometheus-stack"
FULLNAME_MAX = 26  # the chart truncates its fullname to leave room for its suffixes
KUBELET_JOB = "kubelet"
NODE_EXPORTER_JOB = "node-exporter"


def fullname(release: str, name_override: str = "", fullname_override: str = "") -> str:
    """The chart's "kube-prometheus-stack.fullname" template."""
    if fullname_override:
        return fullname_override[:FULLNAME_MAX].removesuffix("-")
    name = name_override or CHART
    if name in release:
        return release[:FULLNAME_MAX].removesuffix("-")
    return f"{release}-{name}"[:FULLNAME_MAX].removesuffix("-")


@dataclass(frozen=True)
class ChartJobs:
    """The `job` label of each component the chart's ServiceMonitors scrape."""

    prometheus: str
    alertmanager: str
    operator: str
    kubelet: str = KUBELET_JOB
    node_exporter: str = NODE_EXPORTER_JOB


def chart_jobs(release: str, name_override: str = "", fullname_override: str = "") -> ChartJobs:
    full = fullname(release, name_override, fullname_override)
    return ChartJobs(
        prometheus=f"{full}-prometheus",
        alertmanager=f"{full}-alertmanager",
        operator=f"{full}-operator",
    )
