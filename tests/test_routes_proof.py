"""Proof by amtool that every alert the generated rules can emit reaches a real integration.

The alert names, severities and teams are parsed from the generated rule files (jobs, meta and
on-call), not listed here; `amtool config routes test` says which receiver Alertmanager picks,
and that receiver must have an integration (pagerduty, slack, webhook, email). Run on the
repository's committed output and on a new user's own spec.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from trainsignals.cli.main import main
from trainsignals.generator.loader import load_specs
from trainsignals.generator.pipeline import Options, generate_all
from trainsignals.generator.routing.check import RoutingError

from .conftest import ROOT, require_tool

INTEGRATIONS = ("pagerduty_configs", "slack_configs", "webhook_configs", "email_configs")


def emitted_alerts(rule_texts: list[str], teams: set[str]) -> set[tuple[str, str, str, str]]:
    """(alertname, severity, team, training_job) of every alerting rule; a templated team
    (the on-call ticket names the paged team) is expanded to every team routed."""
    found = set()
    for text in rule_texts:
        for group in yaml.safe_load(text)["groups"]:
            for rule in group["rules"]:
                if "alert" not in rule:
                    continue
                labels = rule.get("labels", {})
                team = labels.get("team", "")
                job = labels.get("training_job", "")
                for each in sorted(teams) if "{{" in team else [team]:
                    found.add((rule["alert"], labels.get("severity", ""), each, job))
    return found


def real_integration(receiver: dict) -> bool:
    """Any integration, but not a placeholder webhook on this host (it notifies no one)."""
    hooks = [h["url"] for h in receiver.get("webhook_configs", [])]
    if any("127.0.0.1" in url or "localhost" in url for url in hooks):
        return False
    return any(receiver.get(kind) for kind in INTEGRATIONS)


def receiver_of(config: Path, labels: dict[str, str]) -> str:
    done = subprocess.run(
        [
            require_tool("amtool"),
            "config",
            "routes",
            "test",
            f"--config.file={config}",
            *(f"{k}={v}" for k, v in labels.items()),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip()


def assert_every_alert_reaches_an_integration(files: dict[str, str], folder: Path) -> int:
    config = folder / "alertmanager.yaml"
    config.write_text(files["alerts/alertmanager.yaml"])
    parsed = yaml.safe_load(config.read_text())
    receivers = {r["name"]: r for r in parsed["receivers"]}
    teams = {
        m.split('"')[1]
        for r in parsed["route"]["routes"]
        for m in r.get("matchers", [])
        if m.startswith("team=")
    }
    rules = [text for path, text in files.items() if path.endswith(".rules.yaml")]
    alerts = emitted_alerts(rules, teams)
    assert len(alerts) > 20
    nowhere = []
    for alertname, severity, team, job in sorted(alerts):
        labels = {"alertname": alertname, "severity": severity, "team": team}
        if job:
            labels["training_job"] = job
        for name in receiver_of(config, labels).split(","):
            if not real_integration(receivers[name]):
                nowhere.append(f"{labels} -> {name}")
    assert nowhere == [], "alerts that reach no integration:\n" + "\n".join(nowhere)
    return len(alerts)


def test_every_committed_alert_reaches_an_integration(tmp_path: Path) -> None:
    files = {
        str(p.relative_to(ROOT)): p.read_text(encoding="utf-8")
        for p in (ROOT / "alerts").glob("*.yaml")
    }
    assert assert_every_alert_reaches_an_integration(files, tmp_path) > 90


@pytest.mark.parametrize("mode", ["manual", "auto_restart"])
def test_a_new_users_spec_reaches_an_integration_or_is_refused(tmp_path: Path, mode: str) -> None:
    spec_file = tmp_path / "jobs" / "resnet-sweep.yaml"
    spec_file.parent.mkdir()
    data = {
        "name": "resnet-sweep",
        "team": "vision",
        "shape": {
            "nodes": 2,
            "gpus_per_node": 8,
            "gpu_model": "A100",
            "model_flops_per_token": 1e9,
        },
        "routing": {
            "page": {"kind": "pagerduty", "secret": {"file": "/run/secrets/vision-pd"}},
            "ticket": {"kind": "email", "target": "vision@corp.test"},
        },
        "recovery": {
            "mode": mode,
            "infra_team": "hw",
            "infra_routing": {"ticket": {"kind": "webhook", "target": "https://jira.corp.test/hw"}},
        },
    }
    spec_file.write_text(yaml.safe_dump(data))
    pairs = [(spec, str(spec_file)) for spec in load_specs([spec_file])]
    options = Options(with_tests=False, with_dashboards=False)
    assert_every_alert_reaches_an_integration(generate_all(pairs, options), tmp_path)
    # Without the infra team's receiver its tickets would reach no one: refused, by field.
    data["recovery"].pop("infra_routing")
    spec_file.write_text(yaml.safe_dump(data))
    pairs = [(spec, str(spec_file)) for spec in load_specs([spec_file])]
    with pytest.raises(RoutingError) as error:
        generate_all(pairs, options)
    (line,) = error.value.problems
    assert "recovery.infra_routing.ticket: team 'hw' gets tickets" in line


def test_no_receiver_without_integration_and_strays_reach_the_monitoring_tickets(
    tmp_path: Path,
) -> None:
    """gpu-infra gets only tickets: an alert labelled team="gpu-infra", severity="page" (no
    rule emits it today; a future one might) must not land in a receiver that notifies no one.
    Every receiver of the committed config has an integration, except those a spec's
    `notify_nobody` names; the stray falls through to the monitoring team's tickets."""
    config = tmp_path / "alertmanager.yaml"
    config.write_text((ROOT / "alerts" / "alertmanager.yaml").read_text(encoding="utf-8"))
    parsed = yaml.safe_load(config.read_text())
    empty = [r["name"] for r in parsed["receivers"] if not real_integration(r)]
    assert empty == [], f"receivers that notify no one: {empty}"
    stray = {"alertname": "GpuLost", "severity": "page", "team": "gpu-infra"}
    assert receiver_of(config, stray) == "meta-monitoring-ticket"


def test_a_failing_integrations_alert_goes_around_it(tmp_path: Path) -> None:
    """AlertmanagerNotificationsFailing{integration="pagerduty"} must not travel through
    PagerDuty (the monitoring team's page receiver): it goes to their Slack tickets; a
    failing Slack (tickets only) goes to their pager; other meta pages are unchanged."""
    config = tmp_path / "alertmanager.yaml"
    config.write_text((ROOT / "alerts" / "alertmanager.yaml").read_text(encoding="utf-8"))
    monitoring = {"team": "monitoring", "job": "alertmanager"}
    cases = [
        ("AlertmanagerNotificationsFailing", "page", "pagerduty", "meta-monitoring-ticket"),
        ("AlertmanagerTicketNotificationsFailing", "ticket", "slack", "meta-monitoring-page"),
        ("AlertmanagerTicketNotificationsFailing", "ticket", "webhook", "meta-monitoring-ticket"),
        ("PrometheusRuleFailures", "page", "", "meta-monitoring-page"),
    ]
    for alertname, severity, integration, expected in cases:
        labels = {**monitoring, "alertname": alertname, "severity": severity}
        if integration:
            labels["integration"] = integration
        assert receiver_of(config, labels) == expected, labels


def test_validate_warns_when_the_monitoring_teams_only_integration_carries_pages(
    tmp_path: Path,
) -> None:
    settings = tmp_path / "monitoring.yaml"
    pd = {"kind": "pagerduty", "secret": {"file": "/run/secrets/sre-pd"}}
    for ticket, warned in ((pd, True), ({"kind": "email", "target": "sre@corp.test"}, False)):
        settings.write_text(yaml.safe_dump({"routing": {"page": pd, "ticket": ticket}}))
        result = CliRunner().invoke(
            main, ["validate", "--jobs", str(ROOT / "jobs"), "--monitoring", str(settings)]
        )
        assert result.exit_code == 0, result.output
        line = (
            "monitoring settings: routing: every receiver of the monitoring team uses "
            "pagerduty, which carries pages"
        )
        assert (line in result.output) is warned, result.output
        if warned:
            assert "give routing.ticket another integration" in result.output
