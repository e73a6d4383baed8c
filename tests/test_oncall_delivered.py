"""On-call load counts pages Alertmanager sends, not `ALERTS`: one incident with two inhibited
consequences is one page and raises no OncallPageLoadHigh ticket (promtool on the generated
on-call rules), and a live Alertmanager 0.25 with the generated config mutes exactly the two
consequences the rules leave out."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from trainsignals.generator.loader import load_specs
from trainsignals.generator.oncall.policy import ALERT, OncallPolicy
from trainsignals.generator.output.yaml import dump
from trainsignals.generator.routing.alertmanager import alertmanager_config
from trainsignals.generator.signals.promql import matchers

from .conftest import ROOT, STACK_GROUP, run_tool
from .live_alertmanager import live_alertmanager, wait_until

TEAM, JOB = "speech", "whisper"
# NodeDown pages; the stall and the slowdown it causes are the same incident (inhibited).
INCIDENT = (
    ("NodeDown", {"node": "node-3"}),
    ("TrainingStalled", {}),
    ("ThroughputBelowFloor", {}),
)


def labels(alertname: str, extra: dict[str, str]) -> dict[str, str]:
    return {
        "alertname": alertname,
        "severity": "page",
        "team": TEAM,
        "training_job": JOB,
        "job": JOB,
        **extra,
    }


def test_one_incident_with_inhibited_consequences_is_one_page(tmp_path: Path) -> None:
    policy = OncallPolicy()
    assert len(INCIDENT) > policy.max_pages_per_shift  # ALERTS alone would raise the ticket
    (tmp_path / "oncall.rules.yaml").write_text((ROOT / "alerts/oncall.rules.yaml").read_text())
    # Three incidents an hour apart, each a NodeDown with its two consequences: 3 pages,
    # over the limit of 2; counting ALERTS made it 9.
    values = " ".join(["1x20 stale _x39"] * 3)
    series = [
        {
            "series": "ALERTS" + matchers({**labels(name, extra), "alertstate": "firing"}),
            "values": values,
        }
        for name, extra in INCIDENT
    ]
    load = policy.per_shift_record + matchers({"team": TEAM, "severity": "page"})
    suite = {
        "rule_files": ["oncall.rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [
                    {
                        "expr": load,
                        "eval_time": "50m",
                        "exp_samples": [{"labels": load, "value": 1}],
                    },
                    {
                        "expr": f"ALERTS{matchers({'alertname': ALERT, 'team': TEAM})}",
                        "eval_time": "70m",
                        "exp_samples": [],
                    },
                    {
                        "expr": load,
                        "eval_time": "170m",
                        "exp_samples": [{"labels": load, "value": 3}],
                    },
                ],
            }
        ],
    }
    (tmp_path / "test.yaml").write_text(dump(suite))
    done = run_tool("promtool", "test", "rules", "test.yaml", cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.e2e
@pytest.mark.xdist_group(STACK_GROUP)
def test_live_alertmanager_mutes_what_the_load_rules_leave_out(tmp_path: Path) -> None:
    spec_file = tmp_path / "whisper.yaml"
    spec_file.write_text(
        yaml.safe_dump(
            {
                "name": JOB,
                "team": TEAM,
                "shape": {"gpu_model": "H100-SXM", "model_flops_per_token": 1e9},
                "routing": {"notify_nobody": ["page", "ticket"]},
            }
        )
    )
    config = alertmanager_config(load_specs([spec_file]), "# test\n")
    with live_alertmanager(config, tmp_path / "am") as am:
        am.post(*(labels(name, extra) for name, extra in INCIDENT))
        assert wait_until(lambda: am.inhibited("ThroughputBelowFloor"))
        assert am.inhibited("TrainingStalled") is True
        assert am.inhibited("NodeDown") is False
