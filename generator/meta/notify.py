"""Failing notifications per integration: a page, or a ticket where only tickets use it.

Alertmanager counts failed notifications per `integration` (pagerduty, slack, webhook,
email) and nothing finer (no receiver label, prometheus/alertmanager#2527), so whether a
failure loses pages depends on which receivers use that integration (generator/meta/rules.py).
"""

from __future__ import annotations

from trainsignals.generator.meta.rule import MetaRule
from trainsignals.generator.signals.promql import matchers, regex
from trainsignals.generator.spec.job import JobSpec
from trainsignals.generator.spec.monitoring import MonitoringSettings
from trainsignals.generator.spec.pipeline_alerts import (
    NOTIFICATIONS_FAILING,
    TICKET_NOTIFICATIONS_FAILING,
)
from trainsignals.generator.spec.receivers import Routing

# The alerts about a failing integration (label `integration`): generator/routing/meta.py sends
# them around the integration they name, and the heartbeat stops while pages fail.
PAGES_FAILING = NOTIFICATIONS_FAILING
TICKETS_FAILING = TICKET_NOTIFICATIONS_FAILING


def _routings(settings: MonitoringSettings, specs: list[JobSpec]) -> list[Routing]:
    routings = [settings.routing]
    for spec in specs:
        routings.append(spec.routing)
        if spec.recovery.infra_team not in (None, spec.team):
            routings.append(spec.recovery.infra_routing)
    return routings


def integrations(settings: MonitoringSettings, specs: list[JobSpec]) -> tuple[list[str], list[str]]:
    """(integrations that carry pages, integrations that carry tickets only), sorted.

    Alertmanager counts failures per `integration` (pagerduty, slack, webhook, email) and
    nothing finer, so a failing integration is a ticket only when no page receiver uses it.
    The dead man's switch is left out: when its webhook fails, the switch pages by itself.
    """
    used: dict[str, set[str]] = {"page": set(), "ticket": set()}
    for routing in _routings(settings, specs):
        for severity, kinds in used.items():
            # A severity without a receiver (routing.notify_nobody) uses no integration.
            if receiver := getattr(routing, severity):
                kinds.add(receiver.kind)
    return sorted(used["page"]), sorted(used["ticket"] - used["page"])


def notifications_failing(
    settings: MonitoringSettings, alert: str, kinds: list[str], sev: str, w5: str, what: str
) -> list[MetaRule]:
    """Notifications of these integrations keep failing (none: no rule)."""
    if not kinds:
        return []
    am = matchers({"job": settings.alertmanager_job, "integration": regex("|".join(kinds))})
    return [
        MetaRule(
            alert,
            # Requests fail on every retry while a receiver is down (continuous);
            # notifications_failed counts once per group interval, after the retries.
            "sum by (integration) "
            f"(increase(alertmanager_notification_requests_failed_total{am}[{w5}])) > 0"
            " or sum by (integration) "
            f"(increase(alertmanager_notifications_failed_total{am}[{w5}])) > 0",
            600,  # longer than the window: one failed retry round is not an alert
            sev,
            settings.alertmanager_job,
            "Alertmanager fails to deliver {{ $labels.integration }} notifications",
            "{{ $labels.integration }} notification requests keep failing "
            f"({{{{ $value | humanize }}}} in {w5}): the receiver rejects them or cannot be "
            f"reached. {what} Alertmanager keeps retrying.",
            f"{settings.alertmanager_url}/#/status",
        )
    ]


def heartbeat_expr(page_kinds: list[str], pages_failing_on: bool) -> str:
    """The Watchdog: always firing, except while notifications of an integration that carries
    pages keep failing (PAGES_FAILING firing). Then the pings stop and the external dead man's
    switch pages: the one path that does not go through the failing integration when the
    monitoring team has no other (check.delivery_warnings warns about that setup)."""
    if not page_kinds or not pages_failing_on:
        return "vector(1)"
    return f'vector(1) unless on () ALERTS{{alertname="{PAGES_FAILING}",alertstate="firing"}}'
