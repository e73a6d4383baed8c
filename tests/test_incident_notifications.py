"""One notification group per long incident on a live Alertmanager 0.25 (issue 26).

The promtool long-horizon tests (alerts/<job>.long.test.yaml, generator/rules/long_horizon.py)
prove each incident's page fires at every evaluation until the recovery. Here that page, sent
as Prometheus sends a firing alert (re-sent with a short endsAt while it fires, then resolved),
goes through the generated routing to a webhook receiver: each incident is one group, notified
once firing and once resolved, in both recovery modes. A page that resolved in the middle of
its incident (the old rules) arrives as two firing notifications: the last case checks that
the count sees it.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from trainsignals.generator.alerts.rules import alert_rules, render_alert
from trainsignals.generator.routing.alertmanager import alertmanager_config
from trainsignals.generator.rules.long_horizon import progress_page
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.spec.job import JobSpec
from trainsignals.stacks.stack import FAST_TIMING, WebhookReceiver

from .conftest import STACK_GROUP
from .live_alertmanager import live_alertmanager, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group(STACK_GROUP)]

BASE = {
    "name": "durable",
    "team": "ml",
    "shape": {"gpu_model": "H100-SXM", "model_flops_per_token": 4.2e10},
    "routing": {"notify_nobody": ["page", "ticket"]},
}
RESEND_S = 0.5  # Prometheus re-sends a firing alert every evaluation (compressed here)
INCIDENT_S = 4.0  # the incident's hours, compressed


def _at(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


@pytest.mark.parametrize("mode", ["manual", "auto_restart"])
def test_each_long_incident_is_one_group_notified_once(mode: str, tmp_path: Path) -> None:
    spec = JobSpec.model_validate({**BASE, "recovery": {"mode": mode}})
    ctx = RuleContext(spec)
    rendered = {a.name: render_alert(ctx, a) for a in alert_rules(ctx)}
    page = progress_page(ctx)
    whole = [(0.0, INCIDENT_S)]
    # incident -> the alerts it raises, each with the stretches it fires, and the one page
    # that must reach the pager. A dead job's ranks are down too: in the default mode that
    # page is TrainingTargetsDown, which inhibits the stall (firing throughout, carried).
    down = "TrainingTargetsDown"
    incidents: dict[str, tuple[dict[str, list[tuple[float, float]]], str]] = {
        "dead-8h": (
            {down: whole, page: [(1.0, INCIDENT_S)]},
            page if ctx.spec.recovery.automatic else down,
        ),
        "restart-loop-4h": ({page: whole}, page),
        "checkpoints-broken": ({"CheckpointTooOld": whole}, "CheckpointTooOld"),
        # The old rules: the page resolved in the middle of the incident and fired again.
        "flapped": ({page: [(0.0, 1.5), (3.0, INCIDENT_S)]}, page),
    }
    receiver = WebhookReceiver()
    receiver.start()
    try:
        config = alertmanager_config(
            [spec], "# test\n", local_webhook_base=receiver.url, timing=FAST_TIMING
        )
        with live_alertmanager(config, tmp_path / "am") as am:
            began = time.time()
            while (now := time.time()) - began < INCIDENT_S + 1:
                alerts = []
                for job, (raised, _) in incidents.items():
                    for alert, stretches in raised.items():
                        labels = {
                            **rendered[alert]["labels"],
                            "alertname": alert,
                            "training_job": job,
                        }
                        firing = any(a <= now - began < b for a, b in stretches)
                        ends = now + 3 * RESEND_S if firing else now
                        if firing or any(now - began >= b for _, b in stretches):
                            alerts.append(
                                {"labels": labels, "startsAt": _at(began), "endsAt": _at(ends)}
                            )
                am._call("/api/v2/alerts", alerts)
                time.sleep(RESEND_S)
            wait_until(
                lambda: (
                    {
                        n.labels["training_job"]
                        for n in receiver.snapshot()
                        if n.status == "resolved"
                    }
                    >= set(incidents)
                ),
                timeout=20,
            )
    finally:
        receiver.stop()
    for job, (_, alert) in incidents.items():
        pages = [
            n
            for n in receiver.snapshot()
            if n.labels["training_job"] == job and n.severity == "page"
        ]
        got = [n for n in pages if n.alertname == alert]
        firing = {n.notification for n in got if n.status == "firing"}
        assert {n.alertname for n in pages} == {alert}, (job, pages)  # one group of pages
        expected = 2 if job == "flapped" else 1
        assert len(firing) == expected, (job, got)
        assert len({n.notification for n in got if n.status == "resolved"}) == expected, job


# One faulty part, one PagerDuty incident: the pages a GPU fault raises reach the pager as one
# notification group whichever fires first. Inhibition (GpuUncorrectableEccErrors mutes
# GpuXidCritical{xid="48"}) only helps when the cause fires first; the 54-day fleet replay
# (manual mode) saw the XID page minutes before the ECC page: two incidents.
def test_a_gpu_fault_is_one_group_whichever_alert_fires_first(tmp_path: Path) -> None:
    spec = JobSpec.model_validate({**BASE, "recovery": {"mode": "manual"}})
    ctx = RuleContext(spec)
    rendered = {a.name: render_alert(ctx, a)["labels"] for a in alert_rules(ctx)}

    def page(name: str, **labels: str) -> dict[str, str]:
        return {**rendered[name], "alertname": name, "training_job": spec.name, **labels}

    part = {"node": "gpu-node-17.cluster.local", "gpu": "6"}
    xid = page("GpuXidCritical", xid="48", **part)
    ecc = page("GpuUncorrectableEccErrors", **part)
    other_gpu = page("GpuXidCritical", xid="79", node=part["node"], gpu="2")
    receiver = WebhookReceiver()
    receiver.start()
    try:
        config = alertmanager_config(
            [spec], "# test\n", local_webhook_base=receiver.url, timing=FAST_TIMING
        )
        with live_alertmanager(config, tmp_path / "am") as am:
            am.post(xid, other_gpu)  # the XID first ...
            ok = wait_until(lambda: len({n.notification for n in receiver.snapshot()}) >= 2)
            assert ok, [(n.notification, n.alertname, n.severity) for n in receiver.snapshot()]
            time.sleep(1.5)
            am.post(xid, other_gpu, ecc)  # ... the ECC counter a scrape later
            assert wait_until(
                lambda: any(n.alertname == ecc["alertname"] for n in receiver.snapshot())
            )
            time.sleep(2.5)  # a few group intervals: a second group would have notified
    finally:
        receiver.stop()
    groups: dict[str, set[tuple[str, str]]] = {}  # group key -> (alert, gpu) in it
    for n in receiver.snapshot():
        assert n.severity == "page" and n.group_key
        groups.setdefault(n.group_key, set()).add((n.alertname, n.labels.get("gpu", "")))
    # The XID and the ECC page of GPU 6: one group (the XID muted once its cause fires).
    # GPU 2 of the same node is another part, another group.
    assert sorted(groups.values(), key=sorted) == sorted(
        [{("GpuXidCritical", "6"), ("GpuUncorrectableEccErrors", "6")}, {("GpuXidCritical", "2")}],
        key=sorted,
    ), groups
