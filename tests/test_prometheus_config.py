"""deploy/prometheus/prometheus.yml: promtool accepts it with the generated rules in place, and
every `job` the loaded rules select is a job the config scrapes (the meta rules read Prometheus'
and Alertmanager's own metrics under the monitoring settings' job names)."""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import yaml

from trainsignals.generator.deploy.prometheus_config import PATH, RULES_DIR
from trainsignals.generator.loader import load_specs, spec_files
from trainsignals.generator.pipeline import Options, generate_all
from trainsignals.generator.spec.monitoring import DEFAULT_SETTINGS

from .conftest import JOBS, ROOT, require_tool

SPECS = load_specs(spec_files(JOBS))
JOB_MATCHER = re.compile(r'\bjob="([^"]+)"')


@cache
def generated() -> dict[str, str]:
    return generate_all([(s, f"jobs/{s.name}.yaml") for s in SPECS])


def config(files: dict[str, str]) -> dict:
    return yaml.safe_load(files[PATH])


def scraped_jobs(document: dict) -> set[str]:
    """`job` labels the config gives its targets: job_name, or a relabelled `job`."""
    jobs = set()
    for scrape in document["scrape_configs"]:
        relabelled = [
            r["replacement"]
            for r in scrape.get("relabel_configs", [])
            if r.get("target_label") == "job"
        ]
        jobs.update(relabelled or [scrape["job_name"]])
    return jobs


def test_promtool_accepts_the_config_and_its_rules(tmp_path: Path) -> None:
    files = generated()
    document = config(files)
    plain = [s.name for s in SPECS if s.deploy.kubernetes is None]
    assert plain, "the example specs include a plain-Prometheus job"
    expected = sorted(
        f"{RULES_DIR}/{name}.rules.yaml" for name in [*plain, "meta", "oncall", "nodes"]
    )
    assert sorted(document["rule_files"]) == expected
    # Install the rules where the config says, relative to a temporary root.
    for path in document["rule_files"]:
        name = Path(path).name
        (tmp_path / name).write_text(files[f"alerts/{name}"], encoding="utf-8")
    document["rule_files"] = [str(tmp_path / Path(p).name) for p in document["rule_files"]]
    config_path = tmp_path / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(document), encoding="utf-8")
    result = subprocess.run(
        [require_tool("promtool"), "check", "config", str(config_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr


def test_every_job_the_rules_select_is_scraped() -> None:
    files = generated()
    document = config(files)
    kubernetes_jobs = [s.name for s in SPECS if s.deploy.kubernetes is not None]
    selected = set()
    for path in document["rule_files"]:
        rules = yaml.safe_load(files[f"alerts/{Path(path).name}"])
        for group in rules["groups"]:
            for rule in group["rules"]:
                # Meta rules about Kubernetes jobs run where those jobs are (meta.yaml).
                if not any(name in rule["expr"] for name in kubernetes_jobs):
                    selected.update(JOB_MATCHER.findall(rule["expr"]))
    assert {DEFAULT_SETTINGS.prometheus_job, DEFAULT_SETTINGS.alertmanager_job} <= selected
    assert selected <= scraped_jobs(document)


def test_renamed_self_scrape_jobs_follow_the_monitoring_settings() -> None:
    settings = DEFAULT_SETTINGS.model_copy(
        update={"prometheus_job": "prom-self", "alertmanager_job": "am"}
    )
    files = generate_all([(s, f"jobs/{s.name}.yaml") for s in SPECS], Options(monitoring=settings))
    document = config(files)
    assert {"prom-self", "am"} <= scraped_jobs(document)
    meta = files["alerts/meta.rules.yaml"]
    assert 'job="prom-self"' in meta and 'job="prometheus"' not in meta


def test_committed_config_is_the_generated_one() -> None:
    assert (ROOT / PATH).read_text(encoding="utf-8") == generated()[PATH]
