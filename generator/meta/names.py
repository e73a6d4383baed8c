"""The names of the pipeline's alerts, the one place they are typed: the meta group's
(generator/meta/rules.py builds them), and the alerts outside it routed to the monitoring team
with it: the on-call load alert (generator/oncall/) and a silent shard
(generator/deploy/sharding.py). generator/spec/monitoring.py (below this layer) keeps a copy
that tests/test_alert_names.py checks."""

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
