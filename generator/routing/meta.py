"""Alertmanager routes and receivers for the meta-monitoring alerts (generator/meta/rules.py).

Two routes go before every team's: the Watchdog heartbeat to the dead man's switch, repeated
every `heartbeat.interval` for as long as the pipeline works, and the other meta alerts to the
monitoring team's page / ticket receivers. They match on alert name and team, so a job team that
happens to be called like the monitoring team keeps its own routes.
"""

from __future__ import annotations

from trainsignals.generator.meta.names import ONCALL_ALERT, SHARD_ALERT
from trainsignals.generator.meta.rules import HEARTBEAT
from trainsignals.generator.routing.receivers import _receiver_config
from trainsignals.generator.spec.durations import format_duration
from trainsignals.generator.spec.monitoring import META_ALERT_NAMES, MonitoringSettings
from trainsignals.generator.spec.receivers import Receiver

SWITCH_RECEIVER = "deadmansswitch"
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


def meta_routes(settings: MonitoringSettings, timing_of: dict[str, dict[str, str]]) -> list[dict]:
    """[heartbeat route, meta alerts route]; `timing_of` maps page/ticket to their timing.

    The on-call ticket of the monitoring team itself (OncallPageLoadHigh{team=<it>}) is theirs
    too: it matched no route before and fell to a receiver that notified nobody. So is
    ShardNotReporting (deploy.shards), labelled with their team."""

    meta = (n for n in META_ALERT_NAMES if n != HEARTBEAT)
    names = "|".join([*meta, ONCALL_ALERT, SHARD_ALERT])
    return [
        {
            "receiver": SWITCH_RECEIVER,
            "matchers": [f'alertname="{HEARTBEAT}"'],
            **heartbeat_timing(settings),
        },
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
    config = _receiver_config(SWITCH_RECEIVER, receiver)
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
        receivers.append({"name": name} if receiver is None else _receiver_config(name, receiver))
    return receivers


COMMENT = (
    f"Meta-monitoring first: the always-firing {HEARTBEAT} goes only to the dead man's switch "
    "(it pages when these pings stop: Prometheus, Alertmanager or their host is down); the "
    "other meta alerts go to the monitoring team, whoever owns the job."
)
