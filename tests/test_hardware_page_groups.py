"""One faulty part, one PagerDuty incident (issue 26): the pages a GPU fault raises reach the
pager as one notification group whichever fires first. Inhibition (GpuUncorrectableEccErrors
mutes GpuXidCritical{xid="48"}) only helps when the cause fires first; the 54-day fleet replay
(manual mode) saw the XID page a few minutes before the ECC page, two incidents. Live
Alertmanager 0.25, the alerts' labels as the generated rules give them."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from trainsignals.generator.alerts.rules import alert_rules, render_alert
from trainsignals.generator.routing.alertmanager import alertmanager_config
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.spec.job import JobSpec

from trainsignals.stacks.stack import FAST_TIMING, WebhookReceiver

from .live_alertmanager import live_alertmanager, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("real-stack")]

SPEC = {
    "name": "vit-22b",
    "team": "vision",
    "shape": {"gpu_model": "H100-SXM", "model_flops_per_token": 1.3e11},
    "routing": {"notify_nobody": ["page", "ticket"]},
    "recovery": {"mode": "manual"},
}


def test_a_gpu_fault_is_one_group_whichever_alert_fires_first(tmp_path: Path) -> None:
    spec = JobSpec.model_validate(SPEC)
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
