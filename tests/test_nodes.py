"""Lemon nodes (generator/nodes/): the incident record's rules, their promtool tests, routing."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from trainsignals.generator.alerts.catalog import ALERTS
from trainsignals.generator.alerts.model import (
    hardware_fault_alerts,
    hardware_ticket_alerts,
    is_hardware_ticket,
)
from trainsignals.generator.loader import load_specs, spec_files
from trainsignals.generator.nodes.files import nodes_files
from trainsignals.generator.nodes.policy import ALERT
from trainsignals.generator.pipeline import Options, generate_all
from trainsignals.generator.signals.node_incidents import (
    INCIDENT_START,
    INCIDENTS,
    SCORE,
    TICKET_START,
)
from trainsignals.generator.spec.errors import SpecError
from trainsignals.generator.spec.job import JobSpec, Shape
from trainsignals.generator.spec.monitoring import (
    DEFAULT_SETTINGS,
    MonitoringSettings,
    load_monitoring,
)
from trainsignals.ops.lint import lint_rules

from .conftest import JOBS
from .promtool_subsets import changed_rules, promtool_test

RULES, TESTS, LONG = (
    "alerts/nodes.rules.yaml",
    "alerts/nodes.test.yaml",
    "alerts/nodes.long.test.yaml",
)
RUNBOOK = f"runbooks/{ALERT}.md"


def example_specs() -> list[tuple[JobSpec, str]]:
    return [(s, f"jobs/{s.name}.yaml") for s in load_specs(spec_files(JOBS))]


@pytest.fixture(scope="module")
def files() -> dict[str, str]:
    return nodes_files(example_specs())


def rules_of(text: str) -> list[dict]:
    return [rule for group in yaml.safe_load(text)["groups"] for rule in group["rules"]]


def record(text: str, name: str) -> dict:
    return next(r for r in rules_of(text) if r.get("record") == name)


def run_promtool(
    folder: Path, files: dict[str, str], test: str, reading: set[str] | None = None
) -> str:
    """promtool's report where the tests fail, "" where they pass (`reading`: only the test
    groups that run one of these rules)."""
    for path in (RULES, test):
        (folder / Path(path).name).write_text(files[path])
    done = promtool_test(Path(test).name, cwd=folder, timeout=300, reading=reading)
    return done.stdout + done.stderr if done.returncode else ""


# --- wiring -----------------------------------------------------------------------------------


def test_generate_all_writes_the_node_files_and_loads_them() -> None:
    generated = generate_all(example_specs())
    for path in (RULES, TESTS, LONG, RUNBOOK):
        assert path in generated
    assert generated[RULES] == nodes_files(example_specs())[RULES]
    config = yaml.safe_load(generated["deploy/prometheus/prometheus.yml"])
    assert any(path.endswith("nodes.rules.yaml") for path in config["rule_files"])


def test_the_faults_are_the_declared_hardware_faults(files: dict[str, str]) -> None:
    expr = record(files[RULES], INCIDENT_START)["expr"]
    assert f'alertname=~"{"|".join(hardware_fault_alerts())}"' in expr


def test_the_tickets_are_the_infra_teams_node_alerts_that_are_no_fault(
    files: dict[str, str],
) -> None:
    """Non-fatal evidence is derived from the declarations: what the infra team gets about one
    node that is no hardware fault (a declaration may say otherwise); the job team's alerts
    (a disk filling up, GPU memory near full) and job-level alerts are never evidence."""
    tickets = hardware_ticket_alerts()
    assert tickets and not set(tickets) & set(hardware_fault_alerts())
    for alert in ALERTS:
        derived = alert.owner == "infra" and alert.node_scoped and not alert.hardware_fault
        assert (alert.name in tickets) == derived, alert.name
    expr = record(files[RULES], TICKET_START)["expr"]
    assert f'alertname=~"{"|".join(tickets)}"' in expr
    assert is_hardware_ticket(False, "infra", True, False) is False
    assert is_hardware_ticket(True, "job", False, False) is True
    assert is_hardware_ticket(True, "infra", True, True) is False  # a fault is never a ticket


def test_a_job_named_nodes_is_refused() -> None:
    spec = JobSpec(
        name="nodes", team="t", shape=Shape(gpu_model="H100-SXM", model_flops_per_token=4.2e10)
    )
    with pytest.raises(ValueError, match="may not be named 'nodes'"):
        nodes_files([(spec, "jobs/nodes.yaml")])


def test_time_scale_scales_the_windows_and_drops_the_tests() -> None:
    fast = nodes_files(example_specs(), Options(time_scale=60))
    assert TESTS not in fast and LONG not in fast
    assert "[12h]" in record(fast[RULES], INCIDENTS)["expr"]
    assert "offset 1s" in record(fast[RULES], INCIDENT_START)["expr"]


def test_rules_are_lint_clean_alone_and_with_every_rule_file() -> None:
    generated = generate_all(example_specs())
    assert lint_rules({RULES: yaml.safe_load(generated[RULES])}) == []
    everything = {
        path: yaml.safe_load(text)
        for path, text in generated.items()
        if path.endswith(".rules.yaml")
    }
    assert lint_rules(everything) == []


# --- threshold and routing --------------------------------------------------------------------


def test_the_threshold_is_the_setting_and_the_tests_follow_it(tmp_path: Path) -> None:
    settings = MonitoringSettings(lemon_node_incidents=5, lemon_tickets_per_incident=2)
    files = nodes_files(example_specs(), settings=settings)
    alerts = [r for r in rules_of(files[RULES]) if r.get("alert") == ALERT]
    assert alerts and all(f"{SCORE} >= 5" in r["expr"] for r in alerts)
    assert "/ 2 or" in record(files[RULES], SCORE)["expr"]
    assert run_promtool(tmp_path, files, TESTS) == ""


def test_a_bad_threshold_names_file_field_and_fix(tmp_path: Path) -> None:
    path = tmp_path / "monitoring.yaml"
    path.write_text("lemon_node_incidents: 1\n")
    with pytest.raises(SpecError) as error:
        load_monitoring(path)
    text = str(error.value)
    assert (
        str(path) in text
        and "lemon_node_incidents" in text
        and "greater than or equal to 2" in text
    )
    assert DEFAULT_SETTINGS.lemon_node_incidents == 3


def test_the_ticket_goes_to_the_infra_team_of_the_nodes_last_job(files: dict[str, str]) -> None:
    """One rule; its `team` label is joined from the node's last job (the promtool tests
    check a node of each team)."""
    specs = [spec for spec, _ in example_specs()]
    alerts = [r for r in rules_of(files[RULES]) if r.get("alert") == ALERT]
    assert len(alerts) == 1
    assert alerts[0]["labels"] == {
        "job": "nodes",
        "severity": "ticket",
        "team": "{{ $labels.team }}",
    }
    for team in {spec.infra_team for spec in specs}:
        assert f'"team", "{team}"' in alerts[0]["expr"]


def test_the_ticket_is_routed_to_the_infra_ticket_receiver() -> None:
    am = yaml.safe_load(generate_all(example_specs())["alerts/alertmanager.yaml"])
    route = next(r for r in am["route"]["routes"] if r.get("matchers") == ['team="gpu-infra"'])
    assert [r["receiver"] for r in route["routes"] if 'severity="ticket"' in r["matchers"]] == [
        "gpu-infra-ticket"
    ]


# --- promtool ---------------------------------------------------------------------------------


@pytest.mark.parametrize("test", [TESTS, LONG])
def test_promtool_passes(files: dict[str, str], test: str, tmp_path: Path) -> None:
    assert run_promtool(tmp_path, files, test) == ""


BROKEN = {
    # Every minute of a firing alert counted, not its start.
    "minutes, not starts": (TESTS, "  unless on (node)\n", "  and on (node)\n"),
    # No merge window: a flap or a restart of the job is a second incident.
    "no merge window": (TESTS, "[10m] offset 1m", "[1m] offset 1m"),
    # The ticket one incident late.
    "threshold off by one": (TESTS, f"{SCORE} >= 3", f"{SCORE} > 3"),
    # A longer memory than 30 days.
    "window": (LONG, f"{INCIDENT_START}[30d]", f"{INCIDENT_START}[40d]"),
    # Tickets remembered longer than 30 days.
    "ticket window": (LONG, f"{TICKET_START}[30d]", f"{TICKET_START}[40d]"),
    # A ticket weighing half an incident, not a third: 1 incident and 5 tickets would flag.
    "tickets weigh too much": (TESTS, "/ 3 or", "/ 2 or"),
    # Tickets ignored: a count of incidents alone (the old rule) flags no lemon early.
    "incidents only": (TESTS, f"{SCORE} >= 3", f"{INCIDENTS} >= 3"),
    # A ticket right after a fault counted (the merge window reads tickets only).
    "tickets outside incidents": (
        TESTS,
        'count_over_time(ALERTS{alertname=~"' + "|".join(hardware_fault_alerts()),
        'count_over_time(ALERTS{alertname=~"' + hardware_ticket_alerts()[0],
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_the_tests_catch_a_broken_rule(files: dict[str, str], case: str, tmp_path: Path) -> None:
    test, old, new = BROKEN[case]
    assert old in files[RULES], case
    broken = {**files, RULES: files[RULES].replace(old, new)}
    changed = changed_rules(yaml.safe_load(files[RULES]), yaml.safe_load(broken[RULES]))
    assert "FAILED" in run_promtool(tmp_path, broken, test, reading=changed)


def test_the_setting_is_in_the_spec_reference() -> None:
    """docs/spec.md documents lemon_node_incidents with its default, bounds and meaning."""
    doc = (JOBS.parent / "docs/spec.md").read_text(encoding="utf-8")
    line = next(x for x in doc.splitlines() if x.startswith("| `lemon_node_incidents` |"))
    assert "`3`" in line and "&gt;= 2" in line and ALERT in line
    line = next(x for x in doc.splitlines() if x.startswith("| `lemon_tickets_per_incident` |"))
    assert "`3`" in line and "&gt;= 1" in line
