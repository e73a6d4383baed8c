"""`trainsignals readiness` parts that need no live Prometheus: selectors, routing, runbooks.

The live checks (series, rule health, targets) run against real Prometheus in
tests/e2e/test_readiness.py.
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from tests.conftest import JOBS, ROOT, require_tool
from trainsignals.cli.main import main
from trainsignals.generator.loader import load_specs, spec_files
from trainsignals.metrics.promql_reads import Matcher
from trainsignals.metrics.series_check import dashboard_expr, selectors
from trainsignals.ops.readiness import Job, check_routing, check_runbooks
from trainsignals.ops.readiness.diagnose import _label_fix
from trainsignals.stacks.ports import free_port


def _minimal():
    return load_specs([JOBS / "minimal.yaml"])[0]


def test_selectors_follow_recording_rules_to_the_alerts_that_depend_on_them() -> None:
    records = {
        "job:tokens:rate5m": ['sum(rate(tokens_total{training_job="a"}[5m]))'],
        "job:mfu:ratio": ['job:tokens:rate5m{training_job="a"} / 10'],
        "node:net:rate5m": ['rate(node_network_receive_bytes_total{device!~"lo"}[5m])'],
        # One name, a rule per SLO: each rule's inputs count (not only the last rule's).
        "job:slo:errors": ['steps_total{slo="a"} * 0', 'tokens_total{training_job="a"} * 0'],
    }
    alerts = {
        "MfuLow": ['job:mfu:ratio{training_job="a"} < 0.3'],
        "SloBurn": ["job:slo:errors > 0.1"],
    }
    panels = [("panel 1", dashboard_expr('up{node=~"$node",gpu=~"${gpu}"}[$__rate_interval]'))]
    found = {s.text(): s for s in selectors(records, alerts, panels)}
    assert set(found) == {
        'tokens_total{training_job="a"}',
        'steps_total{slo="a"}',
        'node_network_receive_bytes_total{device!~"lo"}',
        'up{gpu=~".*",node=~".*"}',
    }
    assert found['tokens_total{training_job="a"}'].alerts == ["MfuLow", "SloBurn"]
    assert found['steps_total{slo="a"}'].alerts == ["SloBurn"]  # the first of two rules
    assert found['node_network_receive_bytes_total{device!~"lo"}'].alerts == []
    assert found['up{gpu=~".*",node=~".*"}'].readers == ["panel 1"]


def test_label_fix_names_the_label_and_what_the_targets_carry() -> None:
    selector_labels = {"training_job": "llama"}
    problem, fix = _label_fix(
        Matcher("job", "=", "trainsignals-gpu"), ["gpu", "trainsignals-gpus"], "llama", {}
    )
    assert problem == (
        'label job: the rules match job="trainsignals-gpu", '
        'the series carry job="trainsignals-gpus"'
    )
    assert "scrape_jobs in jobs/llama.yaml" in fix
    problem, fix = _label_fix(Matcher("training_job", "=", "llama"), [""], "llama", selector_labels)
    assert problem.endswith("no series carries a training_job label")
    assert 'give the targets the label training_job="llama"' in fix


def test_routing_fails_when_the_alertmanager_config_lost_the_team(tmp_path: Path) -> None:
    require_tool("amtool")
    spec = _minimal()
    moved = spec.model_copy(update={"team": "other-team"})  # config from an older spec
    stale = check_routing(Job.generate(spec, [moved]), None)
    assert not stale.ok
    assert any(
        p.startswith("TrainingStalled (page) routes to default, not ml-research-page")
        for p, _ in stale.problems
    ), stale.problems
    fresh = check_routing(Job.generate(spec, [spec]), None)
    assert fresh.ok, fresh.problems


def test_runbooks_must_be_urls_with_a_runbook_behind_them(tmp_path: Path) -> None:
    spec = _minimal()
    assert check_runbooks(Job.generate(spec, [spec]), ROOT).ok
    empty = check_runbooks(Job.generate(spec, [spec]), tmp_path)  # no runbooks/ there
    assert not empty.ok and "has no runbook runbooks/" in empty.problems[0][0]
    links = spec.links.model_copy(update={"runbook_base_url": "wiki/runbooks"})
    relative = spec.model_copy(update={"links": links})
    bad = check_runbooks(Job.generate(relative, [relative]), ROOT)
    assert not bad.ok and "is not an http(s) URL" in bad.problems[0][0]


def test_cli_fails_clearly_without_prometheus_or_job() -> None:

    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    args = ["readiness", "--prometheus", url, "--jobs", str(JOBS), "--root", str(ROOT)]
    down = CliRunner().invoke(main, [*args, "--job", "minimal"])
    assert down.exit_code == 1, down.output
    assert f"FAIL  Prometheus ready at {url}" in down.output
    assert "fix: start Prometheus or pass the right --prometheus URL" in down.output
    unknown = CliRunner().invoke(main, [*args, "--job", "nope"])
    assert unknown.exit_code == 1 and "no job 'nope'" in unknown.output, unknown.output


def test_every_committed_job_routes_on_the_generated_config() -> None:
    """Including recovery causes, which route to the infra team's receivers."""
    require_tool("amtool")
    specs = load_specs(spec_files(JOBS))
    for spec in specs:
        check = check_routing(Job.generate(spec, specs), None)
        assert check.ok, (spec.name, check.problems)
