"""The pager itself down: real Prometheus and Alertmanager on 127.0.0.1, the generated routing
with real integration kinds posting to local PagerDuty- and Slack-shaped receivers
(tests/pager_shaped.py), and PagerDuty answering 500 throughout.

What must happen: the job's page is lost while PagerDuty is down, but a human is told through
another integration (AlertmanagerNotificationsFailing{integration="pagerduty"} reaches the
monitoring team's Slack), and the Watchdog heartbeat stops, so the external dead man's switch
pages too. Before issue 27 the failing alert went to the monitoring team's PagerDuty receiver,
failed like the page, and the heartbeat kept arriving: nobody learnt that pages were lost.

Time scale 60 (HAStack): a second here is a minute in production.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.chaos.conftest import rules_file, wait_until
from tests.conftest import STACK_GROUP, require_tool
from tests.pager_shaped import PagerShaped
from tests.stacks.ha import HAStack
from trainsignals.generator.routing.alertmanager import alertmanager_config
from trainsignals.generator.spec.durations import parse_duration
from trainsignals.generator.spec.job import JobSpec
from trainsignals.generator.spec.monitoring import MonitoringSettings
from trainsignals.generator.spec.receivers import Receiver, Routing
from trainsignals.generator.spec.secrets import SecretRef
from trainsignals.stacks.stack import FAST_TIMING

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group(STACK_GROUP)]

TEAM = "nlp"
# Production minutes at time scale 60: window 5m + for 10m + evaluation + group_wait, and
# the alert's first failing retry round; measured 15-17 s here.
TOLD_WITHIN_S = 30
HEARTBEAT_S = 4  # HAStack's heartbeat interval (production 1m)


def _routing(secrets_dir: Path) -> Routing:
    key, hook = secrets_dir / "pd-key", secrets_dir / "slack-url"
    return Routing(
        page=Receiver(kind="pagerduty", secret=SecretRef(file=str(key))),
        ticket=Receiver(kind="slack", secret=SecretRef(file=str(hook))),
    )


@dataclass
class RealIntegrations(HAStack):
    """HAStack whose Alertmanager config is the generated one with PagerDuty and Slack
    receivers (not the local webhooks every other stack uses), pointed at `pager`."""

    pager_url: str = ""
    secrets_dir: Path = field(default_factory=Path)

    def _write_alertmanager_config(self, monitoring: MonitoringSettings | None = None) -> Path:
        assert monitoring is not None
        # The meta rules (written next) follow the same routing: PagerDuty carries pages.
        self.settings = monitoring.model_copy(update={"routing": _routing(self.secrets_dir)})
        text = alertmanager_config(
            list(self.specs),
            "# test\n",
            timing=self.timing,
            monitoring=self.settings,
            global_config={"pagerduty_url": f"{self.pager_url}/pagerduty"},
        )
        path = self.workdir / "alertmanager.yml"
        path.write_text(text, encoding="utf-8")
        return path


def _slack_alertnames(shaped: PagerShaped) -> list[tuple[str, str]]:
    """(title, text) of the Slack messages the stand-in accepted."""
    found = []
    for item in shaped.snapshot():
        if item.path.startswith("/slack") and item.status < 300:
            attachment = (item.body.get("attachments") or [{}])[0]
            found.append((attachment.get("title", ""), attachment.get("text", "")))
    return found


def test_pagerduty_down_is_told_through_slack_and_stops_the_heartbeat(
    tmp_path: Path, shaped: PagerShaped
) -> None:
    require_tool("prometheus")
    require_tool("prometheus-alertmanager")
    (tmp_path / "pd-key").write_text(secrets.token_hex(16) + "\n")
    (tmp_path / "slack-url").write_text(f"{shaped.url}/slack/T0/B0/{secrets.token_hex(8)}\n")
    spec = JobSpec.model_validate(
        {
            "name": "bert",
            "team": TEAM,
            "shape": {"gpu_model": "H100-SXM", "model_flops_per_token": 1e9},
            "routing": _routing(tmp_path).model_dump(exclude_none=True),
        }
    )
    page = {
        "alert": "BertPage",
        "expr": "vector(1)",
        "for": "1s",
        "labels": {"severity": "page", "team": TEAM, "training_job": "bert"},
        "annotations": {"summary": "bert pages", "description": "a page of the job"},
    }
    (tmp_path / "sd").mkdir()
    shaped.failing.add("/pagerduty")  # PagerDuty is down from the start
    stack = RealIntegrations(
        tmp_path / "stack",
        [spec],
        [tmp_path / "sd"],
        [rules_file(tmp_path / "job.rules.yaml", [page])],
        {k: dict(v) for k, v in FAST_TIMING.items()},
        alertmanagers=1,
        heartbeat_seconds=HEARTBEAT_S,
        pager_url=shaped.url,
        secrets_dir=tmp_path,
    )
    with stack:
        started = time.monotonic()
        receiver = stack.receiver
        assert receiver is not None
        wait_until(lambda: len(receiver.delivered("Watchdog")) >= 2, 30, "two heartbeats")

        def told() -> list[tuple[str, str]]:
            return [
                m for m in _slack_alertnames(shaped) if "AlertmanagerNotificationsFailing" in m[0]
            ]

        (_title, text), *_ = wait_until(
            told, TOLD_WITHIN_S + 10, "AlertmanagerNotificationsFailing in the monitoring Slack"
        )
        told_at = time.monotonic()
        assert "pagerduty notification requests keep failing" in text, text
        # Then the heartbeat stops: a quiet spell of 3 intervals after the last ping, which a
        # dead man's switch reads as "the pipeline is down". Alertmanager holds an alert it
        # hears no more of for 4 resend intervals, and pings on its flush ticks; Prometheus'
        # resolved notice comes late on a loaded machine (pings 8, 13 and 17 s after the Slack
        # message in one CI run), so the last ping may come held + 2 intervals late:
        # production's 4m + 2m, inside a dead man's switch period.
        held = 4 * parse_duration(stack.resend_delay)
        latest_stop = told_at + held + 2 * HEARTBEAT_S

        def quiet_for_three_intervals() -> bool:
            last = max(p.arrived for p in receiver.delivered("Watchdog"))
            return time.monotonic() - last >= 3 * HEARTBEAT_S

        wait_until(
            quiet_for_three_intervals,
            latest_stop - time.monotonic() + 3 * HEARTBEAT_S + 5,
            "the Watchdog's pings to stop",
        )
        pings = [p.arrived for p in receiver.delivered("Watchdog")]
        late = [round(p - told_at, 1) for p in pings]
        assert pings and max(pings) < latest_stop, late
        config = (stack.workdir / "alertmanager.yml").read_text()

    delay = told_at - started
    assert delay < TOLD_WITHIN_S, delay
    pd = [r for r in shaped.snapshot() if r.path.startswith("/pagerduty")]
    assert pd and all(r.status == 500 for r in pd), [r.status for r in pd]
    # Only the job's page was tried on PagerDuty: the failing alert goes around it.
    summaries = {json.dumps(r.body.get("payload", {}).get("summary", "")) for r in pd}
    assert not any("AlertmanagerNotificationsFailing" in s for s in summaries), summaries
    assert any("BertPage" in s for s in summaries), summaries
    assert 'integration="pagerduty"' in config
    print(
        f"\nPagerDuty down: told through Slack {delay:.1f} s after start (x60: minutes), "
        f"{len(pd)} PagerDuty attempts refused; heartbeat stopped "
        f"{told_at - max(pings):.1f} s before the Slack message arrived"
        if max(pings) < told_at
        else f"\nheartbeat's last ping {max(pings) - told_at:.1f} s after the Slack message"
    )
