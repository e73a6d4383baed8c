"""Recovery modes: what pages and who gets the ticket when the job heals itself."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from trainsignals.exporters.training.metrics import TrainingMetrics
from trainsignals.generator.alerts.catalog import ALERTS
from trainsignals.generator.alerts.definitions.loss_checkpoint import CHECKPOINT_TOO_OLD
from trainsignals.generator.alerts.definitions.recovery import TRAINING_NO_PROGRESS
from trainsignals.generator.alerts.definitions.slo_burn import SLO_ERROR_BUDGET_BURN_FAST
from trainsignals.generator.alerts.rules import alert_rules, render_alert
from trainsignals.generator.loader import SpecError, load_specs
from trainsignals.generator.routing.alertmanager import alertmanager_config
from trainsignals.generator.signals.promql import RuleContext, matchers
from trainsignals.generator.spec.job import JobSpec

from .conftest import require_tool
from .test_alertmanager import HEADER, needs_amtool, routes_to, write

BASE = {
    "name": "selfheal",
    "team": "ml",
    "shape": {"gpu_model": "H100-SXM", "model_flops_per_token": 4.2e10},
    "routing": {"notify_nobody": ["page", "ticket"]},  # routing only, no integration needed
}
CAUSES = ("GpuLost", "GpuXidCritical", "GpuUncorrectableEccErrors", "NodeDown")


def spec(**recovery: object) -> JobSpec:
    return JobSpec.model_validate({**BASE, "recovery": recovery} if recovery else BASE)


def rendered(job: JobSpec) -> dict[str, dict]:
    ctx = RuleContext(job)
    return {a.name: render_alert(ctx, a) for a in alert_rules(ctx)}


def test_manual_is_the_default_and_causes_that_stop_the_job_page() -> None:
    rules = rendered(spec())
    assert "TrainingNoProgress" not in rules  # manual: stall and targets-down cover it
    for name in (*CAUSES, "TrainingTargetsDown", "TrainingStalled"):
        assert rules[name]["labels"]["severity"] == "page", name
        assert rules[name]["labels"]["team"] == "ml", name
    assert rules["TrainingCrashLooping"]["labels"]["severity"] == "ticket"


def test_auto_restart_pages_symptoms_and_tickets_causes_to_the_infra_team() -> None:
    rules = rendered(spec(mode="auto_restart", infra_team="gpu-infra"))
    pages = sorted(n for n, r in rules.items() if r["labels"]["severity"] == "page")
    assert pages == sorted(
        [
            "TrainingNoProgress",
            "TrainingCrashLooping",
            "TrainingRestartsOnBadNode",
            "NonFiniteLoss",
            "LossDiverging",
            "ThroughputBelowFloor",
            "CheckpointTooOld",
            "CheckpointDiskAlmostFull",
        ]
    )
    for name in CAUSES:
        assert rules[name]["labels"]["severity"] == "ticket", name
        assert rules[name]["labels"]["team"] == "gpu-infra", name
    # The job's own tickets stay with the job's team.
    assert rules["MfuBelowFloor"]["labels"]["team"] == "ml"
    assert rules["GpuMemoryNearFull"]["labels"]["team"] == "ml"


def test_auto_restart_budget_sets_no_progress_and_missing_rank_patience() -> None:
    rules = rendered(spec(mode="auto_restart", restart_budget="25m"))
    assert "> 1500" in rules["TrainingNoProgress"]["expr"]
    assert rules["TrainingTargetsDown"]["for"] == "30m"  # budget + 5m: no-progress pages first
    # A crash loop: 3 restarts without progress; no count cap unless the spec sets one.
    looping = rules["TrainingCrashLooping"]["expr"]
    assert "changes1h" in looping and ">= 3" in looping and "global_step:max" in looping
    assert "> 3" not in looping
    capped = rendered(spec(mode="auto_restart", max_restarts=6))
    assert "changes1h" in capped["TrainingCrashLooping"]["expr"]
    assert "> 6" in capped["TrainingCrashLooping"]["expr"]


def test_no_progress_waits_for_announced_pauses_longer_than_the_budget() -> None:
    job = JobSpec.model_validate(
        {
            **BASE,
            "recovery": {"mode": "auto_restart", "restart_budget": "15m"},
            "objectives": {"max_pause": "45m"},
        }
    )
    expr = rendered(job)["TrainingNoProgress"]["expr"]
    assert "> 900 unless on (training_job) job:trainsignals_phase_paused:max" in expr
    assert "> 2700" in expr


def test_every_alert_has_a_severity_for_both_modes_and_a_known_owner() -> None:
    for alert in ALERTS:
        for mode in ("manual", "auto_restart"):
            assert alert.severity_for(mode) in ("page", "ticket", "off"), alert.name
        assert alert.owner in ("job", "infra"), alert.name


def test_a_spec_severity_still_overrides_the_mode_default() -> None:
    job = JobSpec.model_validate(
        {**BASE, "recovery": {"mode": "auto_restart"}, "alerts": {"GpuLost": "page"}}
    )
    assert rendered(job)["GpuLost"]["labels"]["severity"] == "page"
    # A page goes to whoever must act now: the job's team, even for a hardware cause.
    assert rendered(job)["GpuLost"]["labels"]["team"] == "ml"


@pytest.mark.parametrize(
    ("recovery", "field", "hint"),
    [
        ("  mode: automatic\n", "recovery.mode", "'auto_restart'"),
        ("  restart_budget: soon\n", "recovery.restart_budget", "10m"),
        ("  max_restarts: 0\n", "recovery.max_restarts", "greater than or equal to 1"),
        ("  restart_budget: 2h\n  restart_window: 1h\n", "recovery", "restart_window: 6h"),
        ("  restart_budjet: 15m\n", "recovery.restart_budjet", "unknown key"),
        ("  infra_routing: {ticket: {target: http://x}}\n", "", "infra_team"),
    ],
)
def test_bad_recovery_names_file_field_and_fix(
    tmp_path: Path, recovery: str, field: str, hint: str
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(BASE) + "recovery:\n" + recovery)
    with pytest.raises(SpecError) as caught:
        load_specs([path])
    found = caught.value.problems
    assert len(found) == 1, found
    assert found[0].startswith(f"{path}: {field}")
    assert hint in found[0]


@needs_amtool
def test_infra_tickets_route_to_the_infra_team_and_symptoms_page_the_job_team(
    tmp_path: Path,
) -> None:
    job = JobSpec.model_validate(
        {
            **BASE,
            "recovery": {
                "mode": "auto_restart",
                "infra_team": "gpu-infra",
                "infra_routing": {"notify_nobody": ["ticket"]},
            },
        }
    )
    config = write(tmp_path, alertmanager_config([job], HEADER))
    labels = {n: r["labels"] for n, r in rendered(job).items()}
    assert routes_to(config, "gpu-infra-ticket", **labels["GpuXidCritical"]).returncode == 0
    assert routes_to(config, "ml-page", **labels["TrainingNoProgress"]).returncode == 0
    assert routes_to(config, "ml-ticket", **labels["MfuBelowFloor"]).returncode == 0


def test_crash_loop_page_covers_the_no_progress_that_follows() -> None:
    doc = yaml.safe_load(alertmanager_config([spec(mode="auto_restart")], HEADER))
    rules = doc["inhibit_rules"]
    assert any(
        'alertname="TrainingCrashLooping"' in r["source_matchers"]
        and r["target_matchers"] == ['alertname="TrainingNoProgress"']
        for r in rules
    )
    # No cause (a ticket in auto_restart) may ever silence the no-progress page: only the
    # two pages that diagnose the same incident more precisely do.
    for rule in rules:
        if any("TrainingNoProgress" in m for m in rule["target_matchers"]):
            assert rule["source_matchers"][0] in (
                'alertname="TrainingCrashLooping"',
                'alertname="TrainingRestartsOnBadNode"',
            )
            assert 'severity="page"' in rule["source_matchers"]


def test_instrumentation_reports_its_incarnation_from_torchrun() -> None:
    metrics = TrainingMetrics.from_env(
        {"RANK": "3", "LOCAL_RANK": "3", "WORLD_SIZE": "8", "TORCHELASTIC_RESTART_COUNT": "2"},
        node="n1",
        start_time=1234.5,
    )
    text = metrics.exposition().decode()
    assert 'trainsignals_incarnation{local_rank="3",node="n1",rank="3"} 2.0' in text
    assert (
        'trainsignals_process_start_time_seconds{local_rank="3",node="n1",rank="3"} 1234.5' in text
    )


def _burn_after_page(tmp_path: Path, page: str | None) -> subprocess.CompletedProcess:
    """promtool: the goodput SLO burns at 100% for 3 h; `page` (an alert name) paged for its
    first 30 minutes and resolved. Passes when SloErrorBudgetBurnFast never fires."""
    job = JobSpec.model_validate(
        {**BASE, "slos": [{"sli": "goodput", "objective": 0.8}], "recovery": {"mode": "manual"}}
    )
    ctx = RuleContext(job)
    burn = next(a for a in alert_rules(ctx) if a.name == SLO_ERROR_BUDGET_BURN_FAST)
    rules = tmp_path / "burn.rules.yaml"
    rules.write_text(
        yaml.safe_dump({"groups": [{"name": "g", "rules": [render_alert(ctx, burn)]}]})
    )
    slo = {"slo": "goodput", "training_job": job.name}
    series = [
        {"series": f"job:trainsignals_slo_errors:ratio_rate{w}{matchers(slo)}", "values": "1x180"}
        for w in ("5m", "30m", "1h", "6h")
    ]
    if page is not None:
        fired = {"alertname": page, "alertstate": "firing", "severity": "page"}
        series.append({"series": f"ALERTS{matchers(fired | slo)}", "values": "1x30"})
    test = {
        "rule_files": [rules.name],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    {
                        "eval_time": f"{m}m",
                        "alertname": SLO_ERROR_BUDGET_BURN_FAST,
                        "exp_alerts": [],
                    }
                    for m in (60, 120, 170)
                ],
            }
        ],
    }
    (tmp_path / "burn.test.yaml").write_text(yaml.safe_dump(test))
    return subprocess.run(
        [require_tool("promtool"), "test", "rules", "burn.test.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )


def test_goodput_burn_after_a_stale_checkpoint_page_is_that_incident(tmp_path: Path) -> None:
    """Issue 26 (fleet replay): broken checkpointing pages CheckpointTooOld; the restarts that
    follow redo hours of steps, and the goodput they burn paged SloErrorBudgetBurnFast a
    second time. The checkpoint incident's page covers its burn for 6 h, as a no-progress
    page does; a burn with no page before it still pages."""
    assert _burn_after_page(tmp_path, CHECKPOINT_TOO_OLD).returncode == 0
    assert _burn_after_page(tmp_path, TRAINING_NO_PROGRESS).returncode == 0
    unpaged = _burn_after_page(tmp_path, None)
    assert unpaged.returncode != 0
    assert SLO_ERROR_BUDGET_BURN_FAST in unpaged.stdout + unpaged.stderr
