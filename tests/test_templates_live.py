"""Every notification template renders non-empty and useful, for a group of one and of many:
a live Alertmanager 0.25 posts to local PagerDuty- and Slack-shaped receivers that reject what
the real services reject (tests/pager_shaped.py). Spec written here, as a new user would."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from trainsignals.generator.loader import load_specs
from trainsignals.generator.routing.alertmanager import alertmanager_config
from trainsignals.generator.routing.receivers import SLACK_SHOWN
from trainsignals.stacks.stack import FAST_TIMING

from .conftest import STACK_GROUP
from .live_alertmanager import live_alertmanager, wait_until
from .pager_shaped import PagerShaped

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group(STACK_GROUP)]


def config_for(tmp_path: Path, shaped: PagerShaped) -> str:
    key, hook = tmp_path / "pd-key", tmp_path / "slack-url"
    key.write_text(secrets.token_hex(16) + "\n")
    hook.write_text(f"{shaped.url}/slack/T0/B0/{secrets.token_hex(8)}\n")
    spec_file = tmp_path / "jobs" / "bert.yaml"
    spec_file.parent.mkdir()
    spec_file.write_text(
        yaml.safe_dump(
            {
                "name": "bert",
                "team": "nlp",
                "shape": {"gpu_model": "H100-SXM", "model_flops_per_token": 1e9},
                "routing": {
                    "page": {"kind": "pagerduty", "secret": {"file": str(key)}},
                    "ticket": {"kind": "slack", "secret": {"file": str(hook)}},
                },
            }
        )
    )
    return alertmanager_config(
        load_specs([spec_file]),
        "# test\n",
        timing=FAST_TIMING,
        global_config={"pagerduty_url": f"{shaped.url}/pagerduty"},
    )


def alert(name: str, severity: str, job: str, summary: str, **labels: str) -> dict:
    return {
        "labels": {
            "alertname": name,
            "severity": severity,
            "team": "nlp",
            "training_job": job,
            **labels,
        },
        "annotations": {
            "summary": summary,
            "description": f"{summary}. " + "Free space is below the floor on this node. " * 8,
            "runbook_url": f"https://runbooks.corp.test/{name}.md",
            "dashboard_url": f"https://grafana.corp.test/d/ts-{job}?viewPanel=3",
        },
    }


def test_groups_of_one_and_many_reach_the_pager_and_chat(tmp_path: Path, shaped) -> None:
    alerts = [
        alert("GpuLost", "page", "bert", "bert: GPU lost on node-1 3", node="node-1", gpu="3"),
        # Two lost GPUs of one job: one group, summaries differ (no common summary).
        *(
            alert(
                "GpuLost", "page", "gpt", f"gpt: GPU lost on node-{n} {g}", node=f"node-{n}", gpu=g
            )
            for n, g in (("2", "0"), ("5", "7"))
        ),
        # 64 nodes sharing one file system.
        *(
            alert(
                "CheckpointDiskAlmostFull",
                "page",
                "gpt",
                f"gpt: checkpoint disk {i}% free on node-{i}",
                node=f"node-{i}",
            )
            for i in range(64)
        ),
        *(
            alert("DataLoaderStarved", "ticket", "t5", f"t5: rank {i} starved", node=f"node-{i}")
            for i in range(12)
        ),
    ]
    with live_alertmanager(config_for(tmp_path, shaped), tmp_path / "am") as am:
        am._call("/api/v2/alerts", alerts)
        got = wait_until(
            lambda: (
                (s := shaped.snapshot())
                and len([r for r in s if r.path.startswith("/pagerduty")]) >= 3
                and any(r.path.startswith("/slack") for r in s)
                and s
            )
        )
        assert got, [(r.path, r.status, r.errors) for r in shaped.snapshot()]
        # Resolve them all: the resolved notifications must render too.
        now = datetime.now(UTC).isoformat()
        am._call("/api/v2/alerts", [{**a, "endsAt": now} for a in alerts])
        wait_until(
            lambda: (
                len([r for r in shaped.snapshot() if r.body.get("event_action") == "resolve"]) >= 3
            )
        )
        failed = am.metric("alertmanager_notifications_failed_total")
    received = shaped.snapshot()
    refused = [(r.path, r.errors) for r in received if r.status != 202]
    assert refused == [] and failed == 0, refused
    triggers = {
        r.body["payload"]["summary"]: r.body
        for r in received
        if r.body.get("event_action") == "trigger"
    }
    assert "[FIRING:1] GpuLost on bert: bert: GPU lost on node-1 3" in triggers
    assert "[FIRING:2] GpuLost on gpt: gpt: GPU lost on node-2 0 (1 of 2)" in triggers
    (disk,) = [s for s in triggers if "CheckpointDiskAlmostFull" in s]
    assert disk.startswith("[FIRING:64] CheckpointDiskAlmostFull on gpt: ") and "(1 of 64)" in disk
    for event in triggers.values():
        assert event["payload"]["severity"] == "critical"
        hrefs = [link["href"] for link in event.get("links", [])]
        assert hrefs and all(h.startswith("https://") for h in hrefs), hrefs
    (slack, *_) = [r.body["attachments"][0] for r in received if r.path.startswith("/slack")]
    assert slack["title"] == "[FIRING:12] DataLoaderStarved on t5"
    assert "12 alerts in all" in slack["text"] and "Runbook: https://" in slack["text"]
    # Bounded: the first SLACK_SHOWN alerts written out, the rest counted.
    assert slack["text"].count(": rank ") == 2 * SLACK_SHOWN  # summary + description each
