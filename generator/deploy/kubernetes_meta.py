"""The pipeline's own rules on Kubernetes: `deploy/kubernetes/meta.yaml`.

The meta-monitoring rules (generator/meta/rules.py: Watchdog, rule failures, vanished targets...),
`alerts/oncall.rules.yaml` (page load per team) and `alerts/nodes.rules.yaml` (hardware
incidents per node across the release's jobs) as PrometheusRules, once per (namespace,
release) that the specs' `deploy.kubernetes` sections name, so the Prometheus that evaluates
the jobs' rules also evaluates the rules that say it is broken.

The meta rules select Prometheus and Alertmanager by `job`, and kube-prometheus-stack names
those jobs after its release (`<fullname>-prometheus`, `<fullname>-alertmanager`,
generator/deploy/kube_prometheus_stack.py), not `prometheus` / `alertmanager` as a plain setup does:
with the plain names every rule-failure and notification alert would select nothing and
AlertmanagerClusterDegraded (`or vector(0)`) would fire forever. So each release gets the meta
rules rebuilt with its own job names and Alertmanager replicas (overridable in
deploy.kubernetes), and with only the specs deployed there.

Routing stays in the Alertmanager's main configuration (alerts/alertmanager.yaml; with
kube-prometheus-stack, its `alertmanager.config` value): the Watchdog heartbeat must reach the
dead man's switch whatever namespace it comes from, and an AlertmanagerConfig object only
routes alerts labelled with its own namespace. kube-prometheus-stack ships a Watchdog of its
own; the generated route sends both to the switch, which is harmless.
"""

from __future__ import annotations

from trainsignals.generator.deploy.kube_prometheus_stack import chart_jobs
from trainsignals.generator.deploy.kubernetes import MONITORING
from trainsignals.generator.deploy.operator_version import operator_comment
from trainsignals.generator.meta.rules import NAME, rules_document
from trainsignals.generator.output.yaml import dump
from trainsignals.generator.spec.deploy import Kubernetes
from trainsignals.generator.spec.job import JobSpec
from trainsignals.generator.spec.monitoring import MonitoringSettings
from trainsignals.generator.spec.pipeline_alerts import HEARTBEAT

PATH = f"deploy/kubernetes/{NAME}.yaml"
# What a release's meta rules depend on: specs deploying to one release must agree on these.
RELEASE_FIELDS = (
    "fullname_override",
    "name_override",
    "prometheus_job",
    "alertmanager_job",
    "alertmanager_replicas",
)


def release_settings(settings: MonitoringSettings, k8s: Kubernetes) -> MonitoringSettings:
    """The monitoring settings with the release's Prometheus and Alertmanager job names."""
    jobs = chart_jobs(k8s.release, k8s.name_override or "", k8s.fullname_override or "")
    return settings.model_copy(
        update={
            "prometheus_job": k8s.prometheus_job or jobs.prometheus,
            "alertmanager_job": k8s.alertmanager_job or jobs.alertmanager,
            "alertmanager_replicas": k8s.alertmanager_replicas,
        }
    )


def releases(specs: list[JobSpec]) -> dict[tuple[str, str], list[JobSpec]]:
    """{(namespace, release): its specs}; ValueError when they disagree on the release."""
    found: dict[tuple[str, str], list[JobSpec]] = {}
    for spec in sorted(specs, key=lambda s: s.name):
        k8s = spec.deploy.kubernetes
        if k8s is None:
            continue
        group = found.setdefault((k8s.namespace, k8s.release), [])
        if group:
            first = group[0].deploy.kubernetes
            assert first is not None
            for name in RELEASE_FIELDS:
                if getattr(first, name) != getattr(k8s, name):
                    raise ValueError(
                        f"specs {group[0].name!r} and {spec.name!r} deploy to release "
                        f"{k8s.release!r} in namespace {k8s.namespace!r} but disagree on "
                        f"deploy.kubernetes.{name} ({getattr(first, name)!r} vs "
                        f"{getattr(k8s, name)!r}); give both the release's value"
                    )
        group.append(spec)
    return dict(sorted(found.items()))


def _rule_object(stem: str, namespace: str, release: str, groups: list) -> dict:
    labels = {"app.kubernetes.io/managed-by": "trainsignals", "release": release}
    return {
        "apiVersion": MONITORING,
        "kind": "PrometheusRule",
        "metadata": {
            "name": f"trainsignals-{stem}",
            "namespace": namespace,
            "labels": dict(sorted(labels.items())),
        },
        "spec": {"groups": groups},
    }


def monitoring_files(
    specs: list[JobSpec],
    header: str,
    settings: MonitoringSettings,
    shared_rules: dict[str, dict],
) -> dict[str, str]:
    """{PATH: the PrometheusRules}, or nothing when no spec deploys to Kubernetes.
    `shared_rules`: {name: rules document} of the rule files all jobs share (on-call, nodes)."""
    documents, objects = [], []
    for (namespace, release), group in releases(specs).items():
        k8s = group[0].deploy.kubernetes
        assert k8s is not None
        # Every spec's receivers: the main Alertmanager configuration routes all teams.
        meta = rules_document(release_settings(settings, k8s), group, routed=specs)["groups"]
        objects.append(_rule_object(NAME, namespace, release, meta))
        # The on-call load and the lemon-node record read this Prometheus' own ALERTS.
        for stem, document in shared_rules.items():
            objects.append(_rule_object(stem, namespace, release, document["groups"]))
    documents = [dump(obj) for obj in objects]
    if not documents:
        return {}
    comment = (
        "# kubectl apply --server-side -f this file. Route the meta alerts with the routes\n"
        "# of alerts/alertmanager.yaml in the Alertmanager's main configuration\n"
        f"# (kube-prometheus-stack: alertmanager.config): the {HEARTBEAT} must reach the dead\n"
        "# man's switch from any namespace.\n" + operator_comment(objects)
    )
    return {PATH: header + comment + "---\n".join(documents)}
