"""On-call recording rules (episodes of notification groups) and the OncallPageLoadHigh ticket."""

from __future__ import annotations

from trainsignals.generator.oncall.delivered import NOTIFIED, notified_expr
from trainsignals.generator.oncall.policy import (
    ALERT,
    ALERTS_GROUP,
    DASHBOARD_UID,
    FIRING,
    NAME,
    NOTIFICATION_GROUP,
    PANEL_IDS,
    RECORDING_GROUP,
    SEVERITIES,
    STARTED,
    OncallPolicy,
)
from trainsignals.generator.signals.promql import matchers, regex
from trainsignals.generator.spec.job import Links
from trainsignals.generator.spec.pipeline_alerts import declared_severity


def _alerts_selector() -> str:
    """Firing alerts Alertmanager notifies: inhibited ones are not pages (delivered.py)."""
    return NOTIFIED + matchers({"severity": regex("|".join(SEVERITIES))})


def started_expr(policy: OncallPolicy) -> str:
    """Notification groups that fire now and did not one step ago, counted by team and alert."""
    group = ", ".join(NOTIFICATION_GROUP)
    firing = _alerts_selector()
    return (
        "count by (team, alertname, severity) (\n"
        f"  count by ({group}) ({firing})\n"
        "  unless\n"
        f"  count by ({group}) ({firing} offset {policy.step})\n"
        ")"
    )


def recording_rules(policy: OncallPolicy) -> list[dict]:
    return [
        {"record": NOTIFIED, "expr": notified_expr()},
        {
            "record": FIRING,
            "expr": f"count by (team, alertname, severity) ({_alerts_selector()})",
        },
        {"record": STARTED, "expr": started_expr(policy)},
        {
            "record": policy.per_shift_record,
            "expr": f"sum by (team, severity) (sum_over_time({STARTED}[{policy.shift_range}]))",
        },
    ]


def _page_load(policy: OncallPolicy) -> str:
    return policy.per_shift_record + matchers({"severity": "page"})


def alert_rule(policy: OncallPolicy, links: Links) -> dict:
    limit, shift = policy.max_pages_per_shift, policy.shift
    return {
        "alert": ALERT,
        "expr": f"{_page_load(policy)} > {limit}",
        "for": policy.for_,
        "labels": {
            "job": NAME,
            "severity": declared_severity(ALERT),
            # The series carries `team` already; spelled out so routing never depends on it.
            "team": "{{ $labels.team }}",
        },
        "annotations": {
            "dashboard_url": f"{links.grafana_base_url.rstrip('/')}/d/{DASHBOARD_UID}/{NAME}"
            f"?viewPanel={PANEL_IDS['pages_per_shift']}",
            "description": (
                "Team {{ $labels.team }} was paged {{ $value }} times in the last "
                f"{shift} (one page per firing episode of a training job's alert); the "
                f"budget is {limit} per {shift} shift. Find the noisiest alerts on the "
                "on-call dashboard and fix, demote or inhibit them."
            ),
            "runbook_url": f"{links.runbook_base_url.rstrip('/')}/{ALERT}.md",
            "summary": (
                f"Team {{{{ $labels.team }}}} is paged more than {limit} times per {shift} shift"
            ),
        },
    }


def rules_document(policy: OncallPolicy, links: Links) -> dict:
    return {
        "groups": [
            {
                "name": RECORDING_GROUP,
                # Pinned to the onset offset: each episode start is seen by exactly one
                # evaluation, whatever the global evaluation_interval is.
                "interval": policy.step,
                "rules": recording_rules(policy),
            },
            {"name": ALERTS_GROUP, "rules": [alert_rule(policy, links)]},
        ]
    }
