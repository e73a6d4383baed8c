"""The sharded rule split (generator/deploy/sharding/): placement, partials, guard, configs."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import JOBS, require_tool
from tests.live_prometheus import live_prometheus
from trainsignals.generator.deploy.sharding import (
    HEARTBEAT,
    META_FILE,
    REPORTING,
    SHARD_ALERTS,
    WRITTEN,
    ShardingError,
)
from trainsignals.generator.deploy.sharding.split import SplitState, is_raw, rewrite_global
from trainsignals.generator.loader import load_specs
from trainsignals.generator.pipeline import generate_job, spec_hash
from trainsignals.generator.spec.pipeline_alerts import SHARD_ALERT
from trainsignals.metrics.promql_reads import names
from trainsignals.stacks.ports import free_port

SPECS = sorted(JOBS.glob("*.yaml"))
AGGREGATION = r"\b(sum|avg|min|max|count|quantile|topk|bottomk)\b"


def _sharded(path: Path, shards: int = 4):
    spec = load_specs([path])[0]
    return spec.model_copy(update={"deploy": spec.deploy.model_copy(update={"shards": shards})})


def test_single_server_specs_are_unchanged() -> None:
    spec = load_specs([JOBS / "minimal.yaml"])[0]
    assert "shards" not in spec.model_dump()["deploy"]
    assert not [p for p in generate_job(spec, "x") if "sharded" in p]
    assert spec_hash(_sharded(JOBS / "minimal.yaml")) != spec_hash(spec)


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_split_reads_raw_series_only_on_the_shards(path: Path, tmp_path: Path) -> None:
    spec = _sharded(path)
    files = generate_job(spec, "x")
    folder = f"deploy/sharded/{spec.name}"
    edge = yaml.safe_load(files[f"{folder}/{spec.name}.edge.rules.yaml"])
    glob = yaml.safe_load(files[f"{folder}/{spec.name}.global.rules.yaml"])
    single = yaml.safe_load(files[f"alerts/{spec.name}.rules.yaml"])
    edge_rules = [r for g in edge["groups"] for r in g["rules"]]
    global_rules = [r for g in glob["groups"] for r in g["rules"]]
    # Every alert runs once, with the single server's labels: per-node and per-GPU ones on
    # the shards, the rest on the global ruler.
    alerts = {r["alert"]: r["labels"] for g in single["groups"] for r in g["rules"] if "alert" in r}
    moved = {r["alert"]: r["labels"] for r in global_rules if "alert" in r}
    at_edge = {r["alert"]: r["labels"] for r in edge_rules if "alert" in r}
    assert moved.pop(SHARD_ALERT)["severity"] == "ticket"
    assert moved | at_edge == alerts and not set(moved) & set(at_edge)
    assert {"GpuLost", "NodeDown"} <= set(at_edge) and "TrainingStalled" in moved
    # The global ruler never reads a raw series; edge partials keep `node`.
    for rule in global_rules:
        assert not {n for n in names(rule["expr"]) if is_raw(n)}, rule
    recorded = {r["record"] for r in global_rules if "record" in r} | {
        r["record"] for r in edge_rules if "record" in r
    }
    assert {n for r in global_rules for n in names(r["expr"]) if ":" in n} <= recorded
    # (A partial without aggregation, such as a rank's incarnation age, keeps every label.)
    for rule in edge_rules:
        if rule.get("record", "").startswith("edge:") and rule["record"] != HEARTBEAT:
            aggregates = re.search(
                r"\b(sum|avg|min|max|count|quantile|topk|bottomk)\b", rule["expr"]
            )
            assert "node" in rule["expr"] or not aggregates, rule
    # What combines partials is guarded: nothing while a shard is missing.
    tokens = next(r for r in global_rules if r.get("record") == "job:trainsignals_tokens:rate5m")
    assert f"unless on () ({REPORTING}" in tokens["expr"]
    require_tool("promtool")
    for name, doc in (("edge", edge), ("global", glob)):
        rule_file = tmp_path / f"{name}.rules.yaml"
        rule_file.write_text(yaml.safe_dump(doc), encoding="utf-8")
        result = subprocess.run(
            ["promtool", "check", "rules", str(rule_file)], capture_output=True, text=True
        )
        assert result.returncode == 0, result.stdout + result.stderr


def test_partials_combine_as_the_aggregation() -> None:
    state = SplitState(recorded=set(), edge=set())
    avg = rewrite_global('avg(sum by (rank) (rate(x{j="a"}[5m])))', state, "a", slow=False)
    (pushed,) = [p.expr for p in state.pushdowns.values()]
    # Ranks are combined globally: a restarted rank may have run on two nodes in the window.
    assert pushed == 'sum by (node, rank) (rate(x{j="a"}[5m]))'
    assert avg.partial and avg.text.startswith("avg (sum by (rank) (edge:x:sum_")
    count = rewrite_global('count(count by (rank) (x{j="a"}))', state, "a", slow=False)
    assert count.text.startswith("count (sum by (rank) (edge:x:count_")
    mean = rewrite_global('avg(x{j="a"})', state, "a", slow=False)
    assert mean.text.startswith("(sum (edge:x:sum_") and "/ sum (edge:x:count_" in mean.text


def test_unsplittable_rule_names_the_problem() -> None:
    state = SplitState(recorded=set(), edge=set())
    with pytest.raises(ShardingError, match="range over raw series"):
        rewrite_global('absent_over_time(x{j="a"}[5m])', state, "a", slow=False)


def test_shard_configs_partition_the_nodes() -> None:
    spec = _sharded(JOBS / "minimal.yaml", shards=3)
    files = generate_job(spec, "x")
    for shard in range(3):
        config = yaml.safe_load(files[f"deploy/sharded/minimal/shard-{shard}.prometheus.yml"])
        *jobs, itself = config["scrape_configs"]  # the last one: the shard scraping itself
        assert itself["static_configs"][0]["labels"] == {"shard": str(shard)}
        for job in jobs:
            hashmod, keep = job["relabel_configs"][-2:]
            assert hashmod["modulus"] == 3 and hashmod["source_labels"] == ["node"]
            assert keep == {
                "source_labels": ["__tmp_trainsignals_shard"],
                "regex": str(shard),
                "action": "keep",
            }
        write = config["remote_write"][0]["write_relabel_configs"]
        assert write[0] == {"source_labels": ["__name__"], "regex": WRITTEN, "action": "keep"}
        assert config["alerting"]["alertmanagers"]
        assert write[1]["replacement"] == str(shard)


def test_kubernetes_form_validates_against_the_crds() -> None:
    from tests.kube_schemas import problems
    from trainsignals.generator.pipeline import Options, generate_all

    spec = _sharded(JOBS / "gpt-70b-pretrain.yaml", shards=3)
    files = generate_all([(spec, "x")], Options(with_tests=False))
    text = files["deploy/kubernetes/gpt-70b-pretrain.sharded.yaml"]
    objects = [obj for obj in yaml.safe_load_all(text) if obj]
    kinds = [obj["kind"] for obj in objects]
    assert kinds.count("Prometheus") == 3 and kinds.count("PodMonitor") == 6
    assert kinds.count("PrometheusRule") == 2
    for obj in objects:
        assert problems(obj) == [], obj["kind"]
        # kube-prometheus-stack's own Prometheus must not select them too.
        if obj["kind"] in ("Prometheus", "PodMonitor", "PrometheusRule"):
            assert "release" not in obj["metadata"]["labels"]
    shard = next(o for o in objects if o["metadata"]["name"].endswith("shard-2"))
    assert shard["spec"]["remoteWrite"][0]["writeRelabelConfigs"][1]["replacement"] == "2"
    edge_names = {
        r.get("record")
        for o in objects
        if o["kind"] == "PrometheusRule" and o["metadata"]["name"].endswith("-edge")
        for g in o["spec"]["groups"]
        for r in g["rules"]
    }
    assert HEARTBEAT in edge_names


def test_single_store_rules_hold_both_sides_and_every_shard_heartbeat() -> None:
    from trainsignals.generator.deploy.sharding import single_store_rules

    spec = load_specs([JOBS / "minimal.yaml"])[0]
    single = yaml.safe_load(generate_job(spec, "x")[f"alerts/{spec.name}.rules.yaml"])
    doc = single_store_rules(spec, single, 3)
    rules = [r for g in doc["groups"] for r in g["rules"]]
    beats = [r["labels"]["shard"] for r in rules if r.get("record") == HEARTBEAT]
    assert beats == ["0", "1", "2"]
    names = [r["alert"] for r in rules if "alert" in r]
    single_alerts = [r["alert"] for g in single["groups"] for r in g["rules"] if "alert" in r]
    assert sorted(names) == sorted([*single_alerts, SHARD_ALERT])


def test_the_node_record_runs_on_the_global_ruler_only() -> None:
    """Lemon nodes count across jobs: the record is one file for the global ruler, fed by the
    hardware alerts the shards remote-write; no shard loads it."""
    from trainsignals.generator.deploy.sharding.nodes import PATH
    from trainsignals.generator.pipeline import generate_all

    spec = _sharded(JOBS / "minimal.yaml", 2)
    files = generate_all([(spec, "x")])
    assert yaml.safe_load(files[PATH]) == yaml.safe_load(files["alerts/nodes.rules.yaml"])
    assert files[PATH].startswith("# Generated by")
    for shard in range(2):
        config = yaml.safe_load(files[f"deploy/sharded/{spec.name}/shard-{shard}.prometheus.yml"])
        assert not [f for f in config["rule_files"] if "nodes" in f]
        assert "ALERTS" in config["remote_write"][0]["write_relabel_configs"][0]["regex"]
    assert PATH not in generate_all([(load_specs([JOBS / "minimal.yaml"])[0], "x")])


def test_shard_not_reporting_reaches_the_monitoring_team(tmp_path: Path) -> None:
    """A dead shard's Prometheus is the monitoring team's to restart: Alertmanager (amtool)
    routes its ticket to their ticket receiver, on the plain files and on Kubernetes."""
    from tests.test_routes_proof import receiver_of
    from trainsignals.generator.pipeline import generate_all
    from trainsignals.generator.routing.meta import receiver_name
    from trainsignals.generator.spec.monitoring import DEFAULT_SETTINGS

    spec = _sharded(JOBS / "gpt-70b-pretrain.yaml", shards=2)
    assert spec.team != DEFAULT_SETTINGS.team  # else this proves nothing
    files = generate_all([(spec, "jobs/gpt-70b-pretrain.yaml")])
    texts = [
        files[f"deploy/sharded/{spec.name}/{spec.name}.global.rules.yaml"],
        *(
            yaml.safe_dump(obj["spec"])
            for obj in yaml.safe_load_all(files[f"deploy/kubernetes/{spec.name}.sharded.yaml"])
            if obj
            and obj["kind"] == "PrometheusRule"
            and obj["metadata"]["name"].endswith("global")
        ),
    ]
    config = tmp_path / "alertmanager.yaml"
    config.write_text(files["alerts/alertmanager.yaml"])
    labels = [
        rule["labels"]
        for text in texts
        for group in yaml.safe_load(text)["groups"]
        for rule in group["rules"]
        if rule.get("alert") == SHARD_ALERT
    ]
    assert len(labels) == 2
    for found in labels:
        assert found["team"] == DEFAULT_SETTINGS.team
        routed = receiver_of(config, {"alertname": SHARD_ALERT, **found})
        assert routed == receiver_name(DEFAULT_SETTINGS, "ticket")


def test_a_shard_watches_itself_on_a_real_prometheus(tmp_path: Path) -> None:
    """The generated shard config as Prometheus loads it: the shard scrapes itself under the
    monitoring settings' job name and evaluates the shard meta alerts, so the series they
    read exist (a wrong job name or a missing self-scrape leaves them blind)."""
    spec = _sharded(JOBS / "minimal.yaml", shards=2)
    files = generate_job(spec, "x")
    folder = f"deploy/sharded/{spec.name}"
    port = free_port()
    config = yaml.safe_load(files[f"{folder}/shard-1.prometheus.yml"])
    # On this host: its own port, local rule files, 1 s intervals, file_sd in tmp.
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    for path in config["rule_files"]:
        name = path.rsplit("/", 1)[1]
        (tmp_path / name).write_text(files[f"{folder}/{name}"])
    config["rule_files"] = [str(tmp_path / p.rsplit("/", 1)[1]) for p in config["rule_files"]]
    assert config["rule_files"][-1].endswith(META_FILE)
    for job in config["scrape_configs"]:
        for sd in job.get("file_sd_configs", []):
            sd["files"] = [str(tmp_path / "sd" / "*.json")]
        for static in job.get("static_configs", []):
            static["targets"] = [f"127.0.0.1:{port}"]
    config["remote_write"][0]["url"] = f"http://127.0.0.1:{free_port()}/api/v1/write"
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    checked = subprocess.run(
        [require_tool("promtool"), "check", "config", str(tmp_path / "prometheus.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # Run without the remote write: a queue to nowhere holds Prometheus' shutdown a minute.
    del config["remote_write"]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))

    with live_prometheus(tmp_path / "prometheus.yml", port) as prom:
        wanted = 'prometheus_rule_group_last_duration_seconds{job="prometheus",shard="1"}'
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                group = next(g for g in prom.rule_groups() if g["file"].endswith(META_FILE))
                evaluated = all(
                    r.get("lastEvaluation", "0").startswith("2") and r["health"] != "unknown"
                    for r in group["rules"]
                )
                if prom.query(wanted) and evaluated:
                    break
            except (OSError, StopIteration):
                pass
            time.sleep(0.3)
        else:
            pytest.fail(f"shard not watching itself; {prom.log_tail()}")
        assert sorted(r["name"] for r in group["rules"]) == sorted(SHARD_ALERTS)
        assert {r["health"] for r in group["rules"]} == {"ok"}, group["rules"]
        # Every series the shard meta alerts read is there, with the shard's label.
        (up,) = prom.query('up{job="prometheus"}')
        assert up["metric"]["shard"] == "1" and up["value"][1] == "1"
        for series in (
            "prometheus_rule_evaluation_failures_total",
            "prometheus_notifications_alertmanagers_discovered",
            "prometheus_config_last_reload_successful",
        ):
            assert prom.query(f'{series}{{job="prometheus",shard="1"}}'), series
