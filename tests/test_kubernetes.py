"""deploy/kubernetes/: every object validates against the vendored prometheus-operator CRD
schemas or Kubernetes' own (kubernetes-validate), and carries what the rules and
kube-prometheus-stack need: selector labels, node and job on targets, the release label, the
sidecar label, Secret references."""

from __future__ import annotations

import copy
import json
import subprocess
from functools import cache
from pathlib import Path

import pytest
import yaml

from trainsignals.generator.deploy.scrape_config import NODE_EXPORTER_JOB
from trainsignals.generator.loader import SpecError, load_specs, parse_spec, spec_files
from trainsignals.generator.pipeline import generate_all
from trainsignals.generator.spec.monitoring import DEFAULT_SETTINGS

from .conftest import JOBS, ROOT, require_tool
from .kube_schemas import problems


@cache
def generated() -> dict[str, str]:
    specs = load_specs(spec_files(JOBS))
    return generate_all([(s, f"jobs/{s.name}.yaml") for s in specs])


def objects(job: str) -> dict[str, dict]:
    """{kind or kind/suffix: object} of one job's generated file."""
    found = {}
    for obj in yaml.safe_load_all(generated()[f"deploy/kubernetes/{job}.yaml"]):
        name = obj["metadata"]["name"]
        suffix = name.rsplit("-", 1)[1] if obj["kind"] == "PodMonitor" else ""
        found[f"{obj['kind']}/{suffix}".rstrip("/")] = obj
    return found


K8S_JOBS = sorted(
    path.stem for path in spec_files(JOBS) if load_specs([path])[0].deploy.kubernetes is not None
)


def test_example_specs_cover_both_gpu_sources() -> None:
    assert K8S_JOBS == ["gpt-70b-pretrain", "llama-8b-finetune"]
    assert sorted(objects("llama-8b-finetune")) == [
        "AlertmanagerConfig",
        "ConfigMap",
        "DaemonSet",
        "PodMonitor/gpu",
        "PodMonitor/training",
        "PrometheusRule",
    ]
    assert "DaemonSet" not in objects("gpt-70b-pretrain")  # dcgm-exporter is the cluster's
    # Multi-node: node_exporter's InfiniBand series for the fabric alerts.
    assert "PodMonitor/node" in objects("gpt-70b-pretrain")


@pytest.mark.parametrize("job", K8S_JOBS)
def test_every_object_validates_against_its_schema(job: str) -> None:
    for obj in objects(job).values():
        assert problems(obj) == []


def test_validation_is_strict_and_can_fail() -> None:
    monitor = copy.deepcopy(objects("llama-8b-finetune")["PodMonitor/training"])
    monitor["spec"]["podMetricsEndpoints"][0]["relabelings"][0]["targetLable"] = "job"
    monitor["metadata"]["labels"]["release"] = "not a label value"
    daemonset = copy.deepcopy(objects("llama-8b-finetune")["DaemonSet"])
    daemonset["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "x"
    config = copy.deepcopy(objects("llama-8b-finetune")["AlertmanagerConfig"])
    config["spec"]["receivers"][0]["pagerdutyConfigs"][0]["routingKey"] = "literal"
    assert any("targetLable" in p for p in problems(monitor))
    assert any("release" in p for p in problems(monitor))
    assert any("containerPort" in p for p in problems(daemonset))
    assert any("routingKey" in p for p in problems(config))


@pytest.mark.parametrize("job", K8S_JOBS)
def test_monitors_attach_job_selector_labels_node_and_release(job: str) -> None:
    spec = load_specs([JOBS / f"{job}.yaml"])[0]
    k8s = spec.deploy.kubernetes
    found = objects(job)
    for obj in found.values():
        assert obj["metadata"]["labels"]["release"] == k8s.release
        assert obj["metadata"]["namespace"] == k8s.namespace
    kinds = [("training", spec.scrape_jobs.training), ("gpu", spec.scrape_jobs.gpu)]
    if "PodMonitor/node" in found:
        kinds.append(("node", NODE_EXPORTER_JOB))
    for kind, job_label in kinds:
        for endpoint in found[f"PodMonitor/{kind}"]["spec"]["podMetricsEndpoints"]:
            # The target's node wins over a pod's host name (dcgm: its host label rewritten).
            dcgm = kind == "gpu" and spec.gpu_metrics == "dcgm"
            assert endpoint["honorLabels"] is dcgm
            set_to = {
                r["targetLabel"]: r.get("replacement", r.get("sourceLabels"))
                for r in endpoint["relabelings"]
                if r["action"] == "replace"
            }
            assert set_to == {
                "job": job_label,
                **spec.selector_labels,
                "node": ["__meta_kubernetes_pod_node_name"],
            }
    training = found["PodMonitor/training"]["spec"]
    assert [e["portNumber"] for e in training["podMetricsEndpoints"]] == [
        spec.deploy.training_base_port + r for r in range(spec.shape.gpus_per_node)
    ]
    assert training["namespaceSelector"] == {"matchNames": [k8s.training_namespace]}


def test_gpu_exporter_daemonset_runs_on_the_jobs_nodes_and_matches_its_monitor() -> None:
    found = objects("llama-8b-finetune")
    pod = found["DaemonSet"]["spec"]["template"]
    assert pod["spec"]["nodeSelector"] == {"trainsignals.io/job": "llama-8b-finetune"}
    selector = found["PodMonitor/gpu"]["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod["metadata"]["labels"].items()
    (port,) = pod["spec"]["containers"][0]["ports"]
    assert port == {"name": "metrics", "containerPort": 9842, "protocol": "TCP"}
    assert found["PodMonitor/gpu"]["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"


def test_dcgm_monitor_keeps_only_exporters_on_the_jobs_nodes() -> None:
    monitor = objects("gpt-70b-pretrain")["PodMonitor/gpu"]["spec"]
    assert monitor["attachMetadata"] == {"node": True}
    keep = monitor["podMetricsEndpoints"][0]["relabelings"][0]
    assert keep == {
        "action": "keep",
        "sourceLabels": ["__meta_kubernetes_node_label_trainsignals_io_job"],
        "regex": "gpt\\-70b\\-pretrain",
    }


@pytest.mark.parametrize("job", K8S_JOBS)
def test_dashboard_config_map_holds_the_generated_dashboard(job: str) -> None:
    config_map = objects(job)["ConfigMap"]
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    (text,) = config_map["data"].values()
    assert text == generated()[f"dashboards/{job}.json"]
    assert json.loads(text)["uid"]


@pytest.mark.parametrize("job", K8S_JOBS)
def test_prometheus_rule_is_the_generated_rules_with_a_namespace_label(
    job: str, tmp_path: Path
) -> None:
    rule = objects(job)["PrometheusRule"]
    namespace = rule["metadata"]["namespace"]
    plain = yaml.safe_load(generated()[f"alerts/{job}.rules.yaml"])["groups"]
    wrapped = rule["spec"]["groups"]
    for group in wrapped:
        for item in group["rules"]:
            if "alert" in item:
                assert item["labels"].pop("namespace") == namespace
    assert wrapped == plain
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    result = subprocess.run(
        [require_tool("promtool"), "check", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_alertmanager_config_routes_by_severity_with_secret_references() -> None:
    spec = objects("llama-8b-finetune")["AlertmanagerConfig"]["spec"]
    assert spec["route"]["matchers"] == [
        {"name": "training_job", "matchType": "=", "value": "llama-8b-finetune"}
    ]
    (team,) = spec["route"]["routes"]
    assert team["matchers"] == [{"name": "team", "matchType": "=", "value": "applied-ml"}]
    assert [(r["receiver"], r["matchers"][0]["value"]) for r in team["routes"]] == [
        ("page", "page"),  # a hardware fault's pages, grouped by node and GPU
        ("page", "page"),
        ("ticket", "ticket"),
    ]
    assert team["routes"][0]["matchers"][1] == {
        "name": "fault_class",
        "matchType": "=",
        "value": "hardware",
    }
    assert team["routes"][0]["groupBy"] == ["training_job", "node", "gpu"]
    receivers = {r["name"]: r for r in spec["receivers"]}
    assert receivers["page"]["pagerdutyConfigs"][0]["routingKey"] == {
        "name": "applied-ml-pagerduty",
        "key": "routing-key",
    }
    hook = receivers["ticket"]["webhookConfigs"][0]
    assert hook["httpConfig"]["authorization"]["credentials"] == {
        "name": "applied-ml-tickets",
        "key": "token",
    }
    slack = objects("gpt-70b-pretrain")["AlertmanagerConfig"]["spec"]["receivers"][1]
    assert slack["slackConfigs"][0]["apiURL"] == {"name": "fm-training-slack", "key": "webhook-url"}
    node_down = next(r for r in spec["inhibitRules"] if r["sourceMatch"][0]["value"] == "NodeDown")
    assert node_down["sourceMatch"] == [
        {"name": "alertname", "matchType": "=", "value": "NodeDown"},
        {"name": "severity", "matchType": "=", "value": "page"},  # only a page mutes a page
    ]
    assert spec["route"]["receiver"] == "ticket"  # unmatched: the team's tickets, not nobody


def test_kubernetes_spec_with_a_file_only_secret_is_refused() -> None:
    text = (
        (JOBS / "llama-8b-finetune.yaml")
        .read_text()
        .replace(
            "secret: {name: applied-ml-pagerduty, key: routing-key}",
            "secret: {file: /run/secrets/pd}",
        )
    )
    with pytest.raises(SpecError) as error:
        parse_spec(Path("jobs/x.yaml"), text)
    (line,) = error.value.problems
    assert line.startswith("jobs/x.yaml: routing.page.secret:") and "`name` and `key`" in line


def test_committed_kubernetes_files_are_the_generated_ones() -> None:
    for job in K8S_JOBS:
        path = ROOT / "deploy" / "kubernetes" / f"{job}.yaml"
        assert path.read_text(encoding="utf-8") == generated()[f"deploy/kubernetes/{job}.yaml"]


def test_hardware_tickets_of_a_self_healing_job_route_to_the_infra_team() -> None:
    spec = objects("gpt-70b-pretrain")["AlertmanagerConfig"]["spec"]
    teams = [r["matchers"][0]["value"] for r in spec["route"]["routes"]]
    assert teams == ["foundation-models", "gpu-infra"]
    infra = spec["route"]["routes"][1]["routes"]
    # The infra team gets only tickets from a self-healing job: no empty page receiver.
    assert [r["receiver"] for r in infra] == ["infra-ticket"]
    names = [r["name"] for r in spec["receivers"]]
    assert names == ["page", "ticket", "infra-ticket"]
    infra_ticket = spec["receivers"][2]["slackConfigs"][0]["apiURL"]
    assert infra_ticket == {"name": "gpu-infra-slack", "key": "webhook-url"}


def test_meta_oncall_and_node_rules_are_deployed_where_the_jobs_rules_are() -> None:
    """Who watches the watchers on Kubernetes: the Prometheus of each (namespace, release)
    that holds a job's PrometheusRule also gets the meta, on-call and lemon-node rules."""
    meta = list(yaml.safe_load_all(generated()["deploy/kubernetes/meta.yaml"]))
    where = {
        (o["metadata"]["namespace"], o["metadata"]["labels"]["release"])
        for job in K8S_JOBS
        for o in [objects(job)["PrometheusRule"]]
    }
    assert len(where) == 2  # the example specs deploy to two namespaces and releases
    assert sorted(
        (o["metadata"]["namespace"], o["metadata"]["labels"]["release"]) for o in meta
    ) == sorted([w for w in where for _ in ("meta", "oncall", "nodes")])
    for obj in meta:
        assert problems(obj) == []
        stem = obj["metadata"]["name"].removeprefix("trainsignals-")
        plain = yaml.safe_load(generated()[f"alerts/{stem}.rules.yaml"])["groups"]
        if stem in ("oncall", "nodes"):
            assert obj["spec"]["groups"] == plain
        else:  # the same alerts, rebuilt with the release's job names
            names = {r["alert"] for r in obj["spec"]["groups"][0]["rules"]}
            assert names <= {r["alert"] for r in plain[0]["rules"]}
    assert (ROOT / "deploy/kubernetes/meta.yaml").read_text(encoding="utf-8") == generated()[
        "deploy/kubernetes/meta.yaml"
    ]


@pytest.mark.parametrize("shards", [1, 4])
def test_objects_wrap_the_rules_document_as_its_file_says(shards: int) -> None:
    """The Kubernetes kind wraps each job's typed rules document (JobOutput.rules), never the
    rules file read back: building the objects (single-server and sharded) must leave the
    document as its file says, and the PrometheusRule carries the file's groups."""
    from trainsignals.generator.artifacts.kind import Run
    from trainsignals.generator.deploy.files import KubernetesKind
    from trainsignals.generator.output.yaml import dump
    from trainsignals.generator.pipeline import Options, job_output

    for spec in load_specs(spec_files(JOBS)):
        if spec.deploy.kubernetes is None:
            continue
        spec = spec.model_copy(update={"deploy": spec.deploy.model_copy(update={"shards": shards})})
        source = f"jobs/{spec.name}.yaml"
        job = job_output(spec, source)
        written = dump(job.rules)
        files = KubernetesKind().job_files(job, Run([(spec, source)], Options(), DEFAULT_SETTINGS))
        assert len(files) == (2 if shards > 1 else 1)
        assert dump(job.rules) == written, f"{spec.name}: the document was changed"
        objects = yaml.safe_load_all(files[f"deploy/kubernetes/{spec.name}.yaml"])
        rule = next(obj for obj in objects if obj and obj["kind"] == "PrometheusRule")
        names = [group["name"] for group in rule["spec"]["groups"]]
        assert names == [group["name"] for group in yaml.safe_load(written)["groups"]]
