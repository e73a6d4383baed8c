"""Alertmanager routes and receivers for the meta-monitoring alerts (generator/meta/rules.py).

Two routes go before every team's: the Watchdog heartbeat to the dead man's switch, repeated
every `heartbeat.interval` for as long as the pipeline works, and the other meta alerts to the
monitoring team's page / ticket receivers. They match on alert name and team, so a job team that
happens to be called like the monitoring team keeps its own routes.
"""

from __future__ import annotations

from trainsignals.generator.meta.notify import PAGES_FAILING, TICKETS_FAILING
from trainsignals.generator.meta.rules import HEARTBEAT
from trainsignals.generator.routing.receivers import receiver_config
from trainsignals.generator.spec.durations import format_duration
from trainsignals.generator.spec.monitoring import MonitoringSettings
from trainsignals.generator.spec.pipeline_alerts import MONITORING_ROUTED
from trainsignals.generator.spec.receivers import Receiver

SWITCH_RECEIVER = "deadmansswitch"
# Alerts about an integration failing (label `integration`, generator/meta/notify.py).
FAILING_ALERTS = (PAGES_FAILING, TICKETS_FAILING)
SEVERITIES = ("page", "ticket")


def receiver_name(settings: MonitoringSettings, severity: str) -> str:
    return f"meta-{settings.team}-{severity}"


def heartbeat_timing(settings: MonitoringSettings) -> dict[str, str]:
    """Ping every `interval`: Alertmanager re-sends once `repeat_interval` has passed, checked
    every `group_interval`, so a quarter of it keeps the real period within 1.25 x interval."""
    interval = settings.heartbeat.interval
    return {
        "group_wait": "0s",
        "group_interval": format_duration(max(1, interval // 4)),
        "repeat_interval": format_duration(interval),
    }


def _other(severity: str) -> str:
    return "ticket" if severity == "page" else "page"


def fallback_routes(
    settings: MonitoringSettings, timing_of: dict[str, dict[str, str]]
) -> list[dict]:
    """A failing integration's alert must not travel through that integration: with PagerDuty
    answering 500, AlertmanagerNotificationsFailing{integration="pagerduty"} routed to a
    PagerDuty page receiver is lost like every other page. One route per integration the
    monitoring team's receivers use: a severity whose receiver uses it goes to the team's
    other receiver instead (a page to the ticket channel, a ticket to the pager). Where both
    use it there is no other path (`validate` warns, check.delivery_warnings) and only the
    heartbeat stopping (meta/rules.py) tells the dead man's switch."""
    routing = settings.routing
    kinds = sorted({r.kind for r in (routing.page, routing.ticket) if r is not None})
    routes = []
    for kind in kinds:
        children, moved = [], False
        for severity in SEVERITIES:
            target = severity
            usual, other = getattr(routing, severity), getattr(routing, _other(severity))
            uses_it = usual is not None and usual.kind == kind
            if uses_it and other is not None and other.kind != kind:
                target, moved = _other(severity), True
            children.append(
                {
                    "receiver": receiver_name(settings, target),
                    "matchers": [f'severity="{severity}"'],
                    **timing_of[severity],
                }
            )
        if moved:
            matchers = [
                f'team="{settings.team}"',
                f'alertname=~"{"|".join(FAILING_ALERTS)}"',
                f'integration="{kind}"',
            ]
            routes.append({"matchers": matchers, "routes": children})
    return routes


def meta_routes(settings: MonitoringSettings, timing_of: dict[str, dict[str, str]]) -> list[dict]:
    """[heartbeat route, failing-integration routes, meta alerts route]; `timing_of` maps
    page/ticket to their timing.

    The on-call ticket of the monitoring team itself (OncallPageLoadHigh{team=<it>}) is theirs
    too: it matched no route before and fell to a receiver that notified nobody. So is
    ShardNotReporting (deploy.shards), labelled with their team."""

    names = "|".join(MONITORING_ROUTED)  # declared: generator/spec/pipeline_alerts.py
    return [
        {
            "receiver": SWITCH_RECEIVER,
            "matchers": [f'alertname="{HEARTBEAT}"'],
            **heartbeat_timing(settings),
        },
        *fallback_routes(settings, timing_of),
        {
            "matchers": [f'team="{settings.team}"', f'alertname=~"{names}"'],
            "routes": [
                {
                    "receiver": receiver_name(settings, severity),
                    "matchers": [f'severity="{severity}"'],
                    **timing_of[severity],
                }
                for severity in SEVERITIES
            ],
        },
    ]


def switch_receiver(settings: MonitoringSettings, local_webhook_base: str | None = None) -> dict:
    """The dead man's switch: a webhook (token from a file, never inline), no resolved."""
    receiver = settings.heartbeat.receiver()
    if local_webhook_base is not None:
        receiver = Receiver(kind="webhook", target=f"{local_webhook_base}/{SWITCH_RECEIVER}")
    config = receiver_config(SWITCH_RECEIVER, receiver)
    config["webhook_configs"][0]["send_resolved"] = False
    return config


def meta_receivers(settings: MonitoringSettings, local_webhook_base: str | None) -> list[dict]:
    """The switch and the monitoring team's page / ticket receivers (generator/routing/check.py
    refused missing ones, unless routing.notify_nobody lists them); with `local_webhook_base`,
    all post there instead (test and demo stacks)."""
    receivers = [switch_receiver(settings, local_webhook_base)]
    for severity in SEVERITIES:
        name = receiver_name(settings, severity)
        receiver = getattr(settings.routing, severity)
        if local_webhook_base is not None:
            base = local_webhook_base
            receiver = Receiver(kind="webhook", target=f"{base}/{settings.team}/{severity}")
        receivers.append({"name": name} if receiver is None else receiver_config(name, receiver))
    return receivers


COMMENT = (
    f"Meta-monitoring first: the always-firing {HEARTBEAT} goes only to the dead man's switch "
    "(it pages when these pings stop: Prometheus, Alertmanager or their host is down, or an "
    "integration that carries pages keeps failing); an integration's failure goes to the "
    "monitoring team's receiver that does not use it; the other meta alerts go to the "
    "monitoring team, whoever owns the job."
)
