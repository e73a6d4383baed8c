"""The monitoring pipeline's alert names (defined in generator/spec/pipeline_alerts.py, below
the spec's settings that override their severities), for the generator layers above."""

from __future__ import annotations

from trainsignals.generator.spec.pipeline_alerts import (
    ALERTMANAGER_RELOAD_FAILED,
    CLUSTER_DEGRADED,
    CONFIG_INCONSISTENT,
    HEARTBEAT,
    NOT_CONNECTED_TO_ALERTMANAGERS,
    NOTIFICATIONS_FAILING,
    ONCALL_ALERT,
    PROMETHEUS_NOTIFICATIONS_FAILING,
    PROMETHEUS_RELOAD_FAILED,
    RULE_FAILURES,
    RULE_GROUP_SLOW,
    SHARD_ALERT,
    TARGETS_VANISHED,
    TICKET_NOTIFICATIONS_FAILING,
)

__all__ = [
    "ALERTMANAGER_RELOAD_FAILED",
    "CLUSTER_DEGRADED",
    "CONFIG_INCONSISTENT",
    "HEARTBEAT",
    "NOTIFICATIONS_FAILING",
    "NOT_CONNECTED_TO_ALERTMANAGERS",
    "ONCALL_ALERT",
    "PROMETHEUS_NOTIFICATIONS_FAILING",
    "PROMETHEUS_RELOAD_FAILED",
    "RULE_FAILURES",
    "RULE_GROUP_SLOW",
    "SHARD_ALERT",
    "TARGETS_VANISHED",
    "TICKET_NOTIFICATIONS_FAILING",
]
