"""Fault tests: the real Prometheus and Alertmanager (a cluster where it matters), broken on
purpose; each asserts what reaches the receivers, how often and when.

Time: the meta rules run at time scale 60 (a 5m window is 5 s, a 10m `for` 10 s) and
Prometheus' for-grace-period is 10m / 60; resend delay 3 s, so a firing alert lives in
Alertmanager for 12 s without a resend. Each test records its row of the fault table
(tests/chaos/conftest.py). The short ones (and the page receiver answering 500, one
Alertmanager) run in `make test`; all of them in `make chaos`.
"""

from __future__ import annotations

import itertools
import signal
import subprocess
import time

import pytest

from tests.chaos.conftest import Row, page_rule, wait_until
from tests.conftest import require_tool

# No xdist group: in `make test` these run beside the long end-to-end group, not after it;
# `timed`: at normal priority there (they measure page delays), not at the CPU-bound nice 10.
pytestmark = [pytest.mark.e2e, pytest.mark.timed]

PAGE = "/chaos/page"
META_PAGE, META_TICKET = "/monitoring/page", "/monitoring/ticket"
SWITCH = "/deadmansswitch"
OBSERVE = 12.0  # seconds of quiet after the last expected page: duplicates would show here


def _at(receiver, path: str, alertname: str) -> list:
    return [d for d in receiver.delivered(alertname) if d.path == path]


def test_rule_failure_pages_and_heartbeat_stops_with_prometheus(pipeline_factory, fault_table):
    """A rule that fails every evaluation raises PrometheusRuleFailures (one page to the
    monitoring team, nothing else); the Watchdog reaches the dead man's switch every interval
    and stops once Prometheus is stopped."""
    broken = {
        # Evaluation error on every run: many series on the `one` side of a one-to-one match.
        "alert": "ChaosBrokenRule",
        "expr": "up * on () group_left () up",
        "for": "1s",
        "labels": {"severity": "page", "team": "chaos"},
    }
    pipe = pipeline_factory([broken], alertmanagers=1)
    started = time.monotonic()
    receiver, stack = pipe.receiver, pipe.stack
    first = wait_until(
        lambda: _at(receiver, META_PAGE, "PrometheusRuleFailures"),
        60,
        "PrometheusRuleFailures at the monitoring page receiver",
    )[0]
    assert first.labels["team"] == "monitoring" and first.labels["rule_group"].endswith(";chaos")
    delay = first.arrived - started
    # window 5 s, for 10 s, evaluation and group_wait: 12-20 s after the first failing run.
    assert delay < 35, delay

    beats = wait_until(
        lambda: (b := receiver.delivered("Watchdog")) and len(b) >= 3 and b, 30, "3 heartbeats"
    )
    assert all(b.path == SWITCH for b in beats)
    gaps = [b.arrived - a.arrived for a, b in itertools.pairwise(beats)]
    # repeat_interval 4 s checked every group_interval (1 s): 4-5 s apart, some slack for load.
    assert all(2.5 < gap < 8 for gap in gaps), gaps

    stopped = time.monotonic()
    stack.kill("prometheus", signal.SIGTERM)
    # Alertmanager keeps the Watchdog until its endsAt (4 x resend delay = 12 s after the last
    # resend), pinging on; then nothing more reaches the switch.
    time.sleep(12 + 4 + 3 + OBSERVE)
    after = [b.arrived - stopped for b in receiver.delivered("Watchdog") if b.arrived > stopped]
    assert after, "no heartbeat at all after the stop: expected pings until endsAt"
    last = max(after)
    assert last < 12 + 4 + 3, after  # and then at least OBSERVE seconds of silence

    pages = [d for d in receiver.snapshot() if d.path == META_PAGE and d.status == "firing"]
    assert {d.alertname for d in pages} == {"PrometheusRuleFailures"}, pages
    failures = _at(receiver, META_PAGE, "PrometheusRuleFailures")
    assert len(failures) == 1, failures
    fault_table.append(
        Row(
            "a rule fails evaluation",
            1,
            len(failures),
            len(failures) - 1,
            f"{delay:.1f} s",
            "PrometheusRuleFailures to the monitoring page receiver; no other meta page",
        )
    )
    fault_table.append(
        Row(
            "Prometheus stopped: heartbeat to the dead man's switch",
            0,
            0,
            0,
            f"last ping {last:.1f} s after the stop",
            f"pings every {min(gaps):.1f}-{max(gaps):.1f} s before; none after "
            f"{last:.1f} s (alive until endsAt = 4 x resend delay)",
        )
    )


def test_alertmanager_killed_while_page_pending(pipeline_factory, fault_table):
    """Alertmanager holds the page in group_wait and is SIGKILLed: after its restart
    Prometheus re-sends the alert and the page arrives once. Then a clean restart (SIGTERM)
    after delivery does not page again: the notification log was saved to --storage.path."""
    pipe = pipeline_factory(
        [page_rule("ChaosPageA", "a", "2s")], alertmanagers=1, page_group_wait="5s"
    )
    receiver, stack = pipe.receiver, pipe.stack
    fault_at = time.monotonic()
    pipe.set_fault("a", 1)
    wait_until(
        lambda: any(a["labels"]["alertname"] == "ChaosPageA" for a in stack.am_alerts(0)),
        30,
        "ChaosPageA in Alertmanager",
    )
    stack.kill("alertmanager-0")  # SIGKILL inside the 5 s group_wait
    assert not receiver.delivered("ChaosPageA"), "delivered before the kill: no pending page"
    time.sleep(3)
    restarted = time.monotonic()
    stack.restart("alertmanager-0")
    first = wait_until(lambda: _at(receiver, PAGE, "ChaosPageA"), 40, "ChaosPageA after restart")
    time.sleep(OBSERVE)
    delivered = _at(receiver, PAGE, "ChaosPageA")
    assert len(delivered) == 1, delivered
    fault_table.append(
        Row(
            "Alertmanager SIGKILLed with the page in group_wait, restarted 3 s later",
            1,
            len(delivered),
            len(delivered) - 1,
            f"{first[0].arrived - fault_at:.1f} s from the fault "
            f"({first[0].arrived - restarted:.1f} s from the restart)",
            "Prometheus re-sends (resend delay 3 s); group_wait 5 s again",
        )
    )

    stack.kill("alertmanager-0", signal.SIGTERM)
    stack.restart("alertmanager-0")
    time.sleep(3 + 5 + OBSERVE)  # a resend, a full group_wait, then quiet
    delivered = _at(receiver, PAGE, "ChaosPageA")
    assert len(delivered) == 1, delivered
    fault_table.append(
        Row(
            "Alertmanager restarted cleanly (SIGTERM) after the page was sent",
            0,
            len(delivered) - 1,
            len(delivered) - 1,
            "-",
            "notification log restored from --storage.path: no second page",
        )
    )


def test_cluster_member_killed_mid_incident(pipeline_factory, fault_table):
    """Two gossiping Alertmanagers: the member that sent the first page is SIGKILLed; the
    second page of the incident comes from the survivor, exactly once, and the first page is
    not repeated. The degraded cluster is a ticket for the monitoring team, not a page."""
    rules = [page_rule("ChaosPageA", "a", "2s"), page_rule("ChaosPageB", "b", "2s")]
    pipe = pipeline_factory(rules, alertmanagers=2)
    receiver, stack = pipe.receiver, pipe.stack
    # The clustered configuration is valid for the tools too.
    for tool, args in (
        ("amtool", ["check-config", str(stack.workdir / "alertmanager.yml")]),
        ("promtool", ["check", "config", str(stack.workdir / "prometheus.yml")]),
    ):
        checked = subprocess.run(
            [require_tool(tool), *args], capture_output=True, text=True, timeout=60
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr
    fault_a = time.monotonic()
    pipe.set_fault("a", 1)
    first = wait_until(lambda: _at(receiver, PAGE, "ChaosPageA"), 45, "ChaosPageA")[0]
    delay_a = first.arrived - fault_a
    sender = stack.alertmanager_urls.index(first.sender)
    # Mid-incident: a second after the page, its notification log entry has been gossiped
    # (every 200 ms). A kill within that window re-sends: see the next test.
    time.sleep(1)
    stack.kill(stack.am_name(sender))
    killed = time.monotonic()
    pipe.set_fault("b", 1)
    second = wait_until(lambda: _at(receiver, PAGE, "ChaosPageB"), 45, "ChaosPageB")[0]
    assert second.sender == stack.alertmanager_urls[1 - sender]
    time.sleep(OBSERVE)
    pages_a, pages_b = _at(receiver, PAGE, "ChaosPageA"), _at(receiver, PAGE, "ChaosPageB")
    seen = [
        (d.alertname, d.sender, round(d.arrived - fault_a, 1))
        for d in receiver.snapshot()
        if d.path == PAGE
    ]
    assert len(pages_a) == 1, (seen, round(killed - fault_a, 1))
    assert len(pages_b) == 1, (seen, round(killed - fault_a, 1))
    # One member down: a ticket (cluster degraded), never a "notifications failing" page.
    ticket = wait_until(
        lambda: _at(receiver, META_TICKET, "AlertmanagerClusterDegraded"),
        40,
        "AlertmanagerClusterDegraded ticket",
    )
    assert not [d for d in receiver.snapshot() if d.path == META_PAGE], "meta page on 1 of 2"
    fault_table.append(
        Row(
            "one of two clustered Alertmanagers SIGKILLed mid-incident",
            2,
            len(pages_a) + len(pages_b),
            len(pages_a) + len(pages_b) - 2,
            f"first {delay_a:.1f} s; second {second.arrived - killed:.1f} s after the kill",
            f"second page sent by the survivor; ClusterDegraded ticket "
            f"{ticket[0].arrived - killed:.1f} s after the kill",
        )
    )


@pytest.mark.chaos_full
def test_cluster_member_killed_right_after_sending(pipeline_factory, fault_table):
    """The member that sent a page is SIGKILLed the moment the page arrives, before its
    notification log entry can reach the peer by gossip: the page is not lost; the survivor
    may send it again once its peer timeout passes (Alertmanager's cluster promises at least
    once). Measured, and bounded: never lost, at most one extra."""
    pipe = pipeline_factory([page_rule("ChaosPageA", "a", "2s")], alertmanagers=2)
    receiver, stack = pipe.receiver, pipe.stack
    fault_at = time.monotonic()
    pipe.set_fault("a", 1)
    first = wait_until(lambda: _at(receiver, PAGE, "ChaosPageA"), 45, "ChaosPageA", step=0.01)
    stack.kill(stack.am_name(stack.alertmanager_urls.index(first[0].sender)))
    killed = time.monotonic()
    time.sleep(2 + OBSERVE)  # the survivor's peer timeout, then quiet
    delivered = _at(receiver, PAGE, "ChaosPageA")
    assert 1 <= len(delivered) <= 2, delivered
    fault_table.append(
        Row(
            "clustered Alertmanager SIGKILLed right after sending "
            f"({(killed - first[0].arrived) * 1000:.0f} ms later)",
            1,
            len(delivered),
            len(delivered) - 1,
            f"{first[0].arrived - fault_at:.1f} s"
            + (
                f"; repeat {delivered[1].arrived - killed:.1f} s after the kill"
                if len(delivered) > 1
                else ""
            ),
            "at-least-once: the survivor re-sends when the kill beats the gossip",
        )
    )


@pytest.mark.chaos_full
def test_prometheus_restart_keeps_for_state(pipeline_factory, fault_table):
    """Prometheus restarted with one alert firing and one pending (`for: 40s`): the firing one
    does not page again; the pending one fires after the rest of its `for`, not a whole new
    one (for-state restored from ALERTS_FOR_STATE; its remaining time is above the 10 s
    for-grace-period, 10m / 60, so no grace is added)."""
    for_seconds = 40
    rules = [
        page_rule("ChaosSlowX", "x", f"{for_seconds}s"),
        page_rule("ChaosSlowY", "y", f"{for_seconds}s"),
    ]
    pipe = pipeline_factory(rules, alertmanagers=2)
    receiver, stack = pipe.receiver, pipe.stack
    pipe.set_fault("x", 1)
    time.sleep(20)
    y_at = time.monotonic()
    pipe.set_fault("y", 1)
    wait_until(lambda: _at(receiver, PAGE, "ChaosSlowX"), 60, "ChaosSlowX firing")
    down = time.monotonic()
    stack.kill("prometheus", signal.SIGTERM)
    stack.restart("prometheus")
    ready = time.monotonic()
    pending_left = for_seconds - (down - y_at)
    y = wait_until(lambda: _at(receiver, PAGE, "ChaosSlowY"), 60, "ChaosSlowY after restart")[0]
    y_delay = y.arrived - ready
    # Restored: the rest of its `for` (plus an evaluation, a scrape and group_wait). A lost
    # state would wait the whole `for` again.
    assert y_delay < pending_left + 10, (y_delay, pending_left)
    assert y_delay < for_seconds - 5, (y_delay, pending_left)
    time.sleep(OBSERVE)
    xs, ys = _at(receiver, PAGE, "ChaosSlowX"), _at(receiver, PAGE, "ChaosSlowY")
    assert len(xs) == 1, xs
    assert len(ys) == 1, ys
    assert not [d for d in receiver.snapshot() if d.status == "resolved" and d.path == PAGE]
    fault_table.append(
        Row(
            f"Prometheus restarted with one page firing and one pending (for {for_seconds} s)",
            2,
            len(xs) + len(ys),
            len(xs) + len(ys) - 2,
            f"pending one fired {y_delay:.1f} s after the restart ({pending_left:.1f} s of "
            f"its for left; restart took {ready - down:.1f} s)",
            "firing one not re-paged, no resolved flap",
        )
    )


@pytest.mark.chaos_full
@pytest.mark.parametrize(
    ("grace", "pages"),
    [("20s", 2), ("2s", 1)],
    ids=["default-grace-10m-repages", "grace-1m-restores"],
)
def test_prometheus_restart_short_for_and_grace_period(pipeline_factory, fault_table, grace, pages):
    """Production's flags divided by 30 (a real restart takes seconds, i.e. a minute or two at
    this scale): resend delay 1m -> 2 s (Alertmanager drops an alert 4 resend delays after the
    last resend: 8 s), for-grace-period 10m -> 20 s, a page with `for: 5m` -> 10 s.
    A `for` below the grace period is not restored: after a restart the firing page goes back to
    pending for its whole `for`, Alertmanager resolves it meanwhile, and it pages again. With a
    grace period below the shortest page `for` (1m -> 2 s) it is restored and pages once."""
    pipe = pipeline_factory(
        [page_rule("ChaosPageA", "a", "10s")],
        alertmanagers=1,
        resend_delay="2s",
        for_grace_period=grace,
    )
    receiver, stack = pipe.receiver, pipe.stack
    pipe.set_fault("a", 1)
    wait_until(lambda: _at(receiver, PAGE, "ChaosPageA"), 45, "ChaosPageA firing")
    time.sleep(2)
    down = time.monotonic()
    stack.kill("prometheus", signal.SIGTERM)
    stack.restart("prometheus")
    restart = time.monotonic() - down
    time.sleep(10 + 8 + OBSERVE)
    firing = _at(receiver, PAGE, "ChaosPageA")
    resolved = [d for d in receiver.delivered("ChaosPageA", "resolved") if d.path == PAGE]
    assert len(firing) == pages, (len(firing), len(resolved), restart)
    fault_table.append(
        Row(
            f"Prometheus restarted, page with for 5m firing, for-grace-period "
            f"{'10m (default)' if pages == 2 else '1m'}, resend delay 1m (all / 30)",
            1,
            len(firing),
            len(firing) - 1,
            f"second page {firing[1].arrived - down:.1f} s after the restart"
            if len(firing) > 1
            else "-",
            f"{len(resolved)} resolved notification(s) in between; restart took {restart:.1f} s",
        )
    )


# One Alertmanager in `make test` too: run only by `make chaos`, this test rotted unseen (the
# stack's meta rules had lost AlertmanagerNotificationsFailing, issue 27); the cluster in chaos.
@pytest.mark.parametrize("members", [1, pytest.param(2, marks=pytest.mark.chaos_full)])
def test_page_receiver_answering_500(pipeline_factory, fault_table, members):
    """The page receiver answers 500: Alertmanager retries, AlertmanagerNotificationsFailing
    reaches the monitoring team (another receiver) meanwhile, and the page arrives once the
    receiver recovers: once from one Alertmanager. A cluster's members each retry on their
    own (the notification log records only successes), so when the receiver recovers more
    than one retry can land: at most one per member."""
    pipe = pipeline_factory([page_rule("ChaosPageA", "a", "2s")], alertmanagers=members)
    receiver, stack = pipe.receiver, pipe.stack
    receiver.failing.add(PAGE)
    fault_at = time.monotonic()
    pipe.set_fault("a", 1)
    meta = wait_until(
        lambda: _at(receiver, META_PAGE, "AlertmanagerNotificationsFailing"),
        90,
        "AlertmanagerNotificationsFailing while the receiver fails",
    )[0]
    assert meta.labels["integration"] == "webhook"
    assert not receiver.delivered("ChaosPageA"), "a page was accepted during the outage"
    recovered = time.monotonic()
    receiver.failing.clear()
    page = wait_until(lambda: _at(receiver, PAGE, "ChaosPageA"), 60, "ChaosPageA after recovery")
    time.sleep(OBSERVE)
    delivered = _at(receiver, PAGE, "ChaosPageA")
    senders = [(d.sender, round(d.arrived - recovered, 2)) for d in delivered]
    assert 1 <= len(delivered) <= members, senders
    if members > 1 and len(delivered) > 1:
        assert len({d.sender for d in delivered}) == len(delivered), senders
    refused = [d for d in receiver.snapshot() if d.answered == 500]
    fault_table.append(
        Row(
            f"page receiver answering 500 for {recovered - fault_at:.0f} s "
            f"({members} Alertmanager{'s' if members > 1 else ''})",
            1,
            len(delivered),
            len(delivered) - 1,
            f"{page[0].arrived - recovered:.1f} s after recovery",
            f"{len(refused)} attempts refused; AlertmanagerNotificationsFailing paged the "
            f"monitoring team {meta.arrived - fault_at:.1f} s after the fault",
        )
    )
    del stack
