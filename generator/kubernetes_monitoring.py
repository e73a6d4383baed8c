"""The pipeline's own rules on Kubernetes: `deploy/kubernetes/meta.yaml`.

`alerts/meta.rules.yaml` (who watches the watchers: Watchdog, rule failures, vanished
targets...) and `alerts/oncall.rules.yaml` (page load per team) as PrometheusRules, once per
(namespace, release) that the specs' `deploy.kubernetes` sections name, so the Prometheus that
evaluates the jobs' rules also evaluates the rules that say it is broken.

Routing stays in the Alertmanager's main configuration (alerts/alertmanager.yaml; with
kube-prometheus-stack, its `alertmanager.config` value): the Watchdog heartbeat must reach the
dead man's switch whatever namespace it comes from, and an AlertmanagerConfig object only
routes alerts labelled with its own namespace. kube-prometheus-stack ships a Watchdog of its
own; the generated route sends both to the switch, which is harmless.
"""

from __future__ import annotations

import yaml

from .kubernetes import MONITORING
from .meta import NAME
from .oncall import NAME as ONCALL
from .spec import JobSpec
from .yaml_out import dump

PATH = f"deploy/kubernetes/{NAME}.yaml"


def _rule_objects(namespace: str, release: str, files: dict[str, str]) -> list[dict]:
    objects = []
    for stem in (NAME, ONCALL):
        text = files.get(f"alerts/{stem}.rules.yaml")
        if text is None:
            continue
        labels = {"app.kubernetes.io/managed-by": "trainsignals", "release": release}
        objects.append(
            {
                "apiVersion": MONITORING,
                "kind": "PrometheusRule",
                "metadata": {
                    "name": f"trainsignals-{stem}",
                    "namespace": namespace,
                    "labels": dict(sorted(labels.items())),
                },
                "spec": {"groups": yaml.safe_load(text)["groups"]},
            }
        )
    return objects


def monitoring_files(specs: list[JobSpec], files: dict[str, str], header: str) -> dict[str, str]:
    """{PATH: the PrometheusRules}, or nothing when no spec deploys to Kubernetes."""
    targets = sorted(
        {
            (s.deploy.kubernetes.namespace, s.deploy.kubernetes.release)
            for s in specs
            if s.deploy.kubernetes
        }
    )
    documents = [
        dump(obj)
        for namespace, release in targets
        for obj in _rule_objects(namespace, release, files)
    ]
    if not documents:
        return {}
    comment = (
        "# kubectl apply --server-side -f this file. Route the meta alerts with the routes\n"
        "# of alerts/alertmanager.yaml in the Alertmanager's main configuration\n"
        "# (kube-prometheus-stack: alertmanager.config): the Watchdog must reach the dead\n"
        "# man's switch from any namespace.\n"
    )
    return {PATH: header + comment + "---\n".join(documents)}
