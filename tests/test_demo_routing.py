"""`make demo` shows every page it would send: its Alertmanager posts all receivers to the local
printer, whatever the spec's real receivers (here PagerDuty and Slack by key files that do not
exist on this machine), and each printed line says where the real config sends it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from trainsignals.demo import destinations, print_notification
from trainsignals.generator.loader import load_specs
from trainsignals.stacks.stack import Stack

from .conftest import STACK_GROUP
from .live_alertmanager import LiveAlertmanager, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group(STACK_GROUP)]


def test_demo_prints_pages_whose_real_receivers_do_not_exist_here(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec_file = tmp_path / "jobs" / "mamba.yaml"
    spec_file.parent.mkdir()
    spec_file.write_text(
        yaml.safe_dump(
            {
                "name": "mamba",
                "team": "ssm",
                "shape": {"gpu_model": "H100-SXM", "model_flops_per_token": 1e9},
                "routing": {
                    "page": {"kind": "pagerduty", "secret": {"file": "/nonexistent/pd"}},
                    "ticket": {"kind": "slack", "secret": {"file": "/nonexistent/slack"}},
                },
            }
        )
    )
    spec = load_specs([spec_file])[0]
    would_go = destinations([spec])
    stack = Stack(
        tmp_path / "stack",
        [spec],
        [tmp_path / "sd"],
        [],
        on_notify=lambda n: print_notification(n, would_go),
    )
    with stack:
        am = LiveAlertmanager(stack.alertmanager_url)
        am.post(
            {
                "alertname": "TrainingStalled",
                "severity": "page",
                "team": "ssm",
                "training_job": "mamba",
            },
            {
                "alertname": "LossPlateau",
                "severity": "ticket",
                "team": "ssm",
                "training_job": "mamba",
            },
            annotations={"suspects": "rank 3 on mamba-node1 (phase); "},
        )
        assert wait_until(lambda: len(stack.receiver.snapshot()) >= 2)
        time.sleep(0.2)
        failed = am.metric("alertmanager_notifications_failed_total")
    out = capsys.readouterr().out
    assert failed == 0
    assert (
        "PAGE   firing   TrainingStalled mamba -> ssm-page: pagerduty secret /nonexistent/pd" in out
    )
    assert "TICKET firing   LossPlateau mamba -> ssm-ticket: slack secret /nonexistent/slack" in out
    assert "         suspects: rank 3 on mamba-node1 (phase)\n" in out
