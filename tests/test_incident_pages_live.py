"""One GPU fault is one page, on a live Alertmanager 0.25 with the generated routing (manual
mode, where hardware faults page): the alerts a fault produces are posted together and a webhook
receiver counts the notification groups that reach the pager.

A GPU off the bus fires GpuLost and GpuXidCritical{xid="79"}; a double-bit ECC error fires
GpuUncorrectableEccErrors and GpuXidCritical{xid="48"}. Each pair is one incident (the alert
definitions declare `explains=`), so one notification group each; the same XID on another GPU
is another fault and still pages.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from trainsignals.generator.alerts.rules import severity, team
from trainsignals.generator.routing.alertmanager import alertmanager_config
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.stacks.stack import WebhookReceiver

from .conftest import STACK_GROUP
from .live_alertmanager import live_alertmanager, wait_until
from .test_routing_live import user_spec

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group(STACK_GROUP)]

TIMING = {
    "default": {"group_wait": "1s", "group_interval": "2s", "repeat_interval": "1h"},
    "page": {"group_wait": "1s", "group_interval": "2s", "repeat_interval": "1h"},
    "ticket": {"group_wait": "1s", "group_interval": "2s", "repeat_interval": "1h"},
}
SETTLE_S = 4.0  # a few group_interval after the first notification: late groups would be here


GPU = {"node": "node-1", "gpu": "3", "uuid": "GPU-3"}
OTHER_GPU = {"node": "node-1", "gpu": "5", "uuid": "GPU-5"}


def _pages(receiver: WebhookReceiver) -> list[tuple[str, ...]]:
    """One entry per webhook POST carrying a firing page: the alert names it carried."""
    posts: dict[int, list[str]] = {}
    for n in receiver.snapshot():
        if n.status == "firing" and n.severity == "page":
            posts.setdefault(n.notification, []).append(n.alertname)
    return [tuple(sorted(names)) for _, names in sorted(posts.items())]


def _labels(ctx: RuleContext, name: str, **labels: str) -> dict[str, str]:
    """What the generated rule labels `name` with in this spec's mode, plus `labels`."""
    return {
        "alertname": name,
        "severity": severity(ctx, name),
        "team": team(ctx, name),
        "training_job": ctx.job,
        **labels,
    }


FAULTS = {
    "gpu-off-the-bus": [("GpuLost", GPU), ("GpuXidCritical", {**GPU, "xid": "79"})],
    "double-bit-ecc": [
        ("GpuUncorrectableEccErrors", GPU),
        ("GpuXidCritical", {**GPU, "xid": "48"}),
    ],
    # The same fault on an A100 / H100: XID 95 (uncontained ECC error) instead of 48.
    "uncontained-ecc": [
        ("GpuUncorrectableEccErrors", GPU),
        ("GpuXidCritical", {**GPU, "xid": "95"}),
    ],
}


# The other relations issue 26 lists, each one incident: (mode, alerts it fires).
INCIDENTS = {
    # A dead node explains its GPUs (and the ranks it took with it).
    "node-down": (
        "manual",
        [
            ("NodeDown", {"node": "node-1"}),
            ("GpuLost", GPU),
            ("GpuXidCritical", {**GPU, "xid": "79"}),
            ("TrainingTargetsDown", {}),
            ("TrainingStalled", {}),
        ],
    ),
    # A crash loop explains the no-progress that follows (self-healing jobs page both).
    "crash-loop": (
        "auto_restart",
        [("TrainingCrashLooping", {}), ("TrainingNoProgress", {}), ("TrainingTargetsDown", {})],
    ),
}


class _Pager:
    """A live Alertmanager on the generated routing of `mode`, and the pages it sends."""

    def __init__(self, tmp_path: Path, mode: str) -> None:
        self.spec = user_spec(tmp_path, recovery={"mode": mode})
        self.ctx = RuleContext(self.spec)
        self.receiver = WebhookReceiver()
        self.config = alertmanager_config(
            [self.spec], "# test\n", local_webhook_base=self.receiver.url, timing=TIMING
        )

    def labels(self, name: str, **labels: str) -> dict[str, str]:
        return _labels(self.ctx, name, **labels)

    def pages(self) -> list[tuple[str, ...]]:
        return _pages(self.receiver)


def _post_and_count(pager: _Pager, am, alerts: list[dict[str, str]]) -> list[tuple[str, ...]]:
    am.post(*alerts)
    assert wait_until(pager.pages, timeout=15), "nothing paged"
    time.sleep(SETTLE_S)
    return pager.pages()


@pytest.mark.parametrize("incident", sorted(INCIDENTS))
def test_one_incident_is_one_page(tmp_path: Path, incident: str) -> None:
    mode, fired = INCIDENTS[incident]
    pager = _Pager(tmp_path, mode)
    pager.receiver.start()
    try:
        with live_alertmanager(pager.config, tmp_path / "am") as am:
            alerts = [pager.labels(name, **labels) for name, labels in fired]
            pages = _post_and_count(pager, am, alerts)
            assert len(pages) == 1, f"{incident}: {len(pages)} pages for one incident: {pages}"
    finally:
        pager.receiver.stop()


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_one_gpu_fault_is_one_page(tmp_path: Path, fault: str) -> None:
    """Before: GpuLost and its XID 79 (or the ECC alert and its XID 48) paged as two groups,
    two PagerDuty incidents for one board."""
    pager = _Pager(tmp_path, "manual")
    pager.receiver.start()
    try:
        with live_alertmanager(pager.config, tmp_path / "am") as am:
            alerts = [pager.labels(name, **labels) for name, labels in FAULTS[fault]]
            assert {a["severity"] for a in alerts} == {"page"}
            pages = _post_and_count(pager, am, alerts)
            assert len(pages) == 1, f"{fault}: {len(pages)} pages for one fault: {pages}"
            # The same XID on another GPU is another fault: it pages too.
            explained, labels = FAULTS[fault][1]
            am.post(pager.labels(explained, **{**labels, **OTHER_GPU}))
            assert wait_until(lambda: len(pager.pages()) == 2, timeout=15), pager.pages()
    finally:
        pager.receiver.stop()
