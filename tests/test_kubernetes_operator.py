"""Where the generated objects look and which prometheus-operator they need (issue 27, item 10).

kube-prometheus-stack runs node-exporter in the release's namespace (`monitoring` in its
install instructions), not in the namespace the job's objects go to; and an operator older
than the newest CRD field the objects use prunes that field (PodMonitor `portNumber`: the
training targets vanish), so each file and the README name the oldest release that works.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import yaml

from trainsignals.generator.deploy.kubernetes import kubernetes_objects, node_exporter_pod_monitor
from trainsignals.generator.deploy.operator_version import (
    FIELD_SINCE,
    OLDEST,
    minimum_operator,
)
from trainsignals.generator.loader import parse_spec

from .conftest import ROOT

SPEC = """\
name: moe-30b
team: ml
shape: {nodes: 16, gpus_per_node: 8, gpu_model: H100-SXM, model_flops_per_token: 1.8e11}
routing:
  page: {kind: pagerduty, secret: {name: ml-pd, key: key}}
  ticket: {kind: slack, secret: {name: ml-slack, key: url}}
deploy:
  kubernetes:
    namespace: ml-observability
    training_namespace: ml-training
KUBERNETES_EXTRA"""


def _spec(tmp_path: Path, extra: str = ""):
    text = SPEC.replace("KUBERNETES_EXTRA", extra)
    return parse_spec(tmp_path / "moe-30b.yaml", text)


def test_node_exporter_is_looked_for_in_the_release_namespace(tmp_path: Path) -> None:
    monitor = node_exporter_pod_monitor(_spec(tmp_path))
    assert monitor["metadata"]["namespace"] == "ml-observability"
    # The chart's node-exporter: the release's namespace, its name label.
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["monitoring"]}
    assert monitor["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "prometheus-node-exporter"
    }
    moved = node_exporter_pod_monitor(_spec(tmp_path, "    node_exporter_namespace: prom\n"))
    assert moved["spec"]["namespaceSelector"] == {"matchNames": ["prom"]}


def _crd_properties(kind: str) -> dict:
    path = ROOT / "schemas" / "prometheus-operator" / f"monitoring.coreos.com_{kind.lower()}s.yaml"
    # The AlertmanagerConfig CRD's bare `=` list item is the YAML 1.1 `!!value` tag to PyYAML.
    text = path.read_text(encoding="utf-8").replace("- =\n", "- '='\n")
    crd = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    assert crd["spec"]["names"]["kind"] == kind
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def test_every_dated_field_is_a_field_of_its_crd() -> None:
    for kind, path in FIELD_SINCE:
        node = _crd_properties(kind)
        for part in path.split("."):
            name = part.removesuffix("[]")
            node = node["properties"][name]
            if part.endswith("[]"):
                node = node["items"]


def test_the_newest_field_used_sets_the_version(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    objects = kubernetes_objects(spec, {"groups": []})
    assert minimum_operator(objects) == (
        "0.79.0",
        "PodMonitor spec.podMetricsEndpoints[].portNumber",
    )
    without = copy.deepcopy(objects)
    for obj in without:
        for endpoint in obj.get("spec", {}).get("podMetricsEndpoints", []):
            endpoint.pop("portNumber", None)
    assert minimum_operator(without)[0] == "0.57.0"  # attachMetadata.node
    assert minimum_operator([]) == (OLDEST, "")


def test_generated_files_and_readme_state_the_version() -> None:
    files = sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml"))
    assert files
    for path in files:
        header = path.read_text(encoding="utf-8").split("\napiVersion:", 1)[0]
        assert re.search(r"^# Needs prometheus-operator >= \d+\.\d+\.\d+", header, re.M), path
    jobs = [p for p in files if p.stem != "meta"]
    assert all("prometheus-operator >= 0.79.0" in p.read_text() for p in jobs)
    assert "prometheus-operator 0.79.0 or newer" in (ROOT / "README.md").read_text()
