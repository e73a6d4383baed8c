"""Placeholders fail loudly: readiness checks that a page can be delivered (secret files exist,
Alertmanager's notifications do not fail), and validate/generate name every placeholder.

Live Alertmanager 0.25 on 127.0.0.1, a new user's spec written here whose PagerDuty key file
does not exist (as in the issue: 83 failed notifications while readiness said PASS)."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from trainsignals.cli.main import main
from trainsignals.generator.loader import load_specs
from trainsignals.generator.routing.alertmanager import alertmanager_config
from trainsignals.ops.readiness.delivery import check_notifications, check_secret_files
from trainsignals.stacks.stack import FAST_TIMING

from .conftest import STACK_GROUP
from .live_alertmanager import live_alertmanager, wait_until
from .pager_shaped import PagerShaped

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group(STACK_GROUP)]


def write_spec(folder: Path, routing: dict) -> Path:
    path = folder / "jobs" / "whisper.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    spec = {
        "name": "whisper",
        "team": "speech",
        "shape": {"gpu_model": "H100-SXM", "model_flops_per_token": 1e9},
        "routing": routing,
    }
    path.write_text(yaml.safe_dump(spec))
    return path


def test_missing_key_file_and_failing_notifications_fail_readiness(
    tmp_path: Path, shaped: PagerShaped
) -> None:
    key = tmp_path / "secrets" / "speech-pd"  # referenced, never written
    routing = {
        "page": {"kind": "pagerduty", "secret": {"file": str(key)}},
        "ticket": {"kind": "email", "target": "speech@corp.test"},
    }
    specs = load_specs([write_spec(tmp_path, routing)])
    config = alertmanager_config(
        specs,
        "# test\n",
        timing=FAST_TIMING,
        global_config={"pagerduty_url": f"{shaped.url}/pagerduty"},
    )
    with live_alertmanager(config, tmp_path / "am") as am:
        files = check_secret_files(config, am.url)
        assert not files.ok
        ((problem, _fix),) = files.problems
        assert "routing_key_file" in problem and str(key) in problem and "does not exist" in problem
        assert check_notifications(am.url).ok  # nothing sent yet

        am.post({"alertname": "TrainingStalled", "severity": "page", "team": "speech"})
        assert wait_until(lambda: am.metric("alertmanager_notifications_failed_total") > 0)
        failing = check_notifications(am.url)
        assert not failing.ok
        assert "pagerduty notifications failed" in failing.problems[0][0]

        # With the key in place the same Alertmanager delivers (the check can pass).
        key.parent.mkdir()
        key.write_text(secrets.token_hex(16))
        assert check_secret_files(config, am.url).ok
    assert shaped.snapshot() == []  # nothing reached the pager while the key was missing


def test_validate_and_generate_name_every_placeholder(tmp_path: Path) -> None:
    jobs = write_spec(
        tmp_path,
        {
            "page": {"kind": "webhook", "target": "https://pager.example.com/hook"},
            "ticket": {"kind": "email", "target": "speech@corp.test"},
        },
    ).parent
    settings = tmp_path / "monitoring.yaml"
    settings.write_text(
        yaml.safe_dump(
            {
                "heartbeat": {"url": "https://deadmansswitch.example.com/ping/x", "secret": None},
                "routing": {
                    "page": {"kind": "pagerduty", "secret": {"file": "/run/secrets/sre-pd"}},
                    "ticket": {"kind": "email", "target": "sre@corp.test"},
                },
            }
        )
    )
    runner = CliRunner()
    for args in (["validate"], ["generate", "--out", str(tmp_path / "out")]):
        result = runner.invoke(main, [*args, "--jobs", str(jobs), "--monitoring", str(settings)])
        assert result.exit_code == 0, result.output
        assert "routing.page: https://pager.example.com/hook is a placeholder host" in result.output
        assert "heartbeat.url: https://deadmansswitch.example.com/ping/x is a placeholder" in (
            result.output
        )
    # The built-in example monitoring settings are said to be examples.
    result = runner.invoke(main, ["validate", "--jobs", str(jobs)])
    assert "built-in example settings are in use" in result.output


def test_generate_refuses_a_route_to_nowhere_naming_file_and_field(tmp_path: Path) -> None:
    jobs = write_spec(tmp_path, {"ticket": {"kind": "email", "target": "speech@corp.test"}}).parent
    result = CliRunner().invoke(main, ["generate", "--jobs", str(jobs), "--out", str(tmp_path)])
    assert result.exit_code == 1
    line = next(x for x in result.output.splitlines() if "routing.page" in x)
    assert line.startswith(f"{jobs / 'whisper.yaml'}: routing.page: team 'speech' gets pages")
    assert "routing.notify_nobody" in line
    assert not (tmp_path / "alerts").exists()  # nothing written
