"""The monitoring pipeline's alerts (declared in generator/spec/pipeline_alerts.py, below the
spec's settings that override their severities), for the generator layers above."""

from __future__ import annotations

from trainsignals.generator.spec.pipeline_alerts import (
    ALERTMANAGER_RELOAD_FAILED,
    BY_NAME,
    CLUSTER_DEGRADED,
    CONFIG_INCONSISTENT,
    HEARTBEAT,
    META_SEVERITIES,
    MONITORING_ROUTED,
    NODE_INCIDENTS_ALERT,
    NOT_CONNECTED_TO_ALERTMANAGERS,
    NOTIFICATIONS_FAILING,
    ONCALL_ALERT,
    OWN_PROMETHEUS,
    PIPELINE_ALERTS,
    PROMETHEUS_NOTIFICATIONS_FAILING,
    PROMETHEUS_RELOAD_FAILED,
    RULE_FAILURES,
    RULE_GROUP_SLOW,
    SHARD_ALERT,
    TARGETS_VANISHED,
    TICKET_NOTIFICATIONS_FAILING,
    PipelineAlert,
    declared_severity,
)

__all__ = [
    "ALERTMANAGER_RELOAD_FAILED",
    "BY_NAME",
    "CLUSTER_DEGRADED",
    "CONFIG_INCONSISTENT",
    "HEARTBEAT",
    "META_SEVERITIES",
    "MONITORING_ROUTED",
    "NODE_INCIDENTS_ALERT",
    "NOTIFICATIONS_FAILING",
    "NOT_CONNECTED_TO_ALERTMANAGERS",
    "ONCALL_ALERT",
    "OWN_PROMETHEUS",
    "PIPELINE_ALERTS",
    "PROMETHEUS_NOTIFICATIONS_FAILING",
    "PROMETHEUS_RELOAD_FAILED",
    "RULE_FAILURES",
    "RULE_GROUP_SLOW",
    "SHARD_ALERT",
    "TARGETS_VANISHED",
    "TICKET_NOTIFICATIONS_FAILING",
    "PipelineAlert",
    "declared_severity",
]
