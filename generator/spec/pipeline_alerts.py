"""The names of the monitoring pipeline's alerts, the one place they are typed: the meta
group's (generator/meta/rules.py builds them), and the alerts outside it routed to the
monitoring team with it: the on-call load alert (generator/oncall/) and a silent shard
(generator/deploy/sharding.py). Here, below every generator layer, so the monitoring settings
(generator/spec/monitoring.py) validate their `alerts:` overrides against the same names;
generator/meta/names.py is how the layers above import them."""

from __future__ import annotations

ONCALL_ALERT = "OncallPageLoadHigh"
SHARD_ALERT = "ShardNotReporting"

# The meta group, in the order of its rules.
HEARTBEAT = "Watchdog"
RULE_FAILURES = "PrometheusRuleFailures"
RULE_GROUP_SLOW = "PrometheusRuleGroupSlow"
NOT_CONNECTED_TO_ALERTMANAGERS = "PrometheusNotConnectedToAlertmanagers"
PROMETHEUS_NOTIFICATIONS_FAILING = "PrometheusNotificationsFailing"
NOTIFICATIONS_FAILING = "AlertmanagerNotificationsFailing"
TICKET_NOTIFICATIONS_FAILING = "AlertmanagerTicketNotificationsFailing"
CLUSTER_DEGRADED = "AlertmanagerClusterDegraded"
PROMETHEUS_RELOAD_FAILED = "PrometheusConfigReloadFailed"
ALERTMANAGER_RELOAD_FAILED = "AlertmanagerConfigReloadFailed"
CONFIG_INCONSISTENT = "AlertmanagerConfigInconsistent"
TARGETS_VANISHED = "ScrapeTargetsVanished"

# Every meta alert, the heartbeat first (it has no severity to override).
META_ALERT_NAMES = (
    HEARTBEAT,
    RULE_FAILURES,
    RULE_GROUP_SLOW,
    NOT_CONNECTED_TO_ALERTMANAGERS,
    PROMETHEUS_NOTIFICATIONS_FAILING,
    NOTIFICATIONS_FAILING,
    TICKET_NOTIFICATIONS_FAILING,
    CLUSTER_DEGRADED,
    PROMETHEUS_RELOAD_FAILED,
    ALERTMANAGER_RELOAD_FAILED,
    CONFIG_INCONSISTENT,
    TARGETS_VANISHED,
)
