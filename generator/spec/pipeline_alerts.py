"""The monitoring pipeline's alerts, declared once: the meta group's (generator/meta/rules.py
builds them), the on-call load alert (generator/oncall/) and a silent shard
(generator/deploy/sharding/). Each declaration says what the job alerts' `@group.alert(...)`
says (generator/alerts/model.py): name, default severity, owner, what it explains, its
incident and its runbook; the severity defaults, the meta route's alert list, the shards' meta
rules and the runbook check are read from here. Here, below every generator layer, so the
monitoring settings (generator/spec/monitoring.py) validate their `alerts:` overrides against
the same names, and every layer above imports them from here."""

from __future__ import annotations

from dataclasses import dataclass

FAMILIES = ("meta", "oncall", "shard", "nodes")
MONITORING = "monitoring"  # owner: the monitoring settings' `team`
JOB_TEAM = "job"  # owner: the team whose alerts it counts
INFRA = "infra"  # owner: who repairs hardware (the jobs' `recovery.infra_team`)


@dataclass(frozen=True)
class PipelineAlert:
    """One alert of the pipeline. `severity`: the default (the monitoring settings' `alerts:`
    may override a meta alert's); "none" for the heartbeat, which nobody acts on.
    `explains`: names of alerts this one is the cause of (same meaning as a job alert's
    `explains=`: generator/routing/inhibit.py makes it an inhibit rule), `why` says how;
    `incident`: the incident its pages belong to; `runbook`: where its runbook
    comes from. `own_prometheus`: reads only the evaluating Prometheus' own metrics, so every
    shard of a sharded job evaluates it about itself."""

    name: str
    family: str
    severity: str
    owner: str = MONITORING
    explains: tuple[str, ...] = ()
    why: str = ""
    incident: str | None = None
    runbook: str = "generator/meta/files.py"
    own_prometheus: bool = False

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"{self.name}: family {self.family!r} is not one of {FAMILIES}")
        if self.severity not in ("page", "ticket", "none"):
            raise ValueError(f"{self.name}: severity {self.severity!r}")
        if self.name in self.explains:
            raise ValueError(f"{self.name}: an alert never explains itself")
        if self.explains and not self.why:
            raise ValueError(f"{self.name}: say `why` it explains {self.explains}")


ONCALL_ALERT = "OncallPageLoadHigh"
SHARD_ALERT = "ShardNotReporting"
NODE_INCIDENTS_ALERT = "NodeIncidentsRecurring"

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

# Who must act and how fast: page what silently disables paging, ticket what only degrades it.
PIPELINE_ALERTS: tuple[PipelineAlert, ...] = (
    PipelineAlert(HEARTBEAT, "meta", "none"),
    PipelineAlert(RULE_FAILURES, "meta", "page", own_prometheus=True),
    PipelineAlert(RULE_GROUP_SLOW, "meta", "ticket", own_prometheus=True),
    PipelineAlert(NOT_CONNECTED_TO_ALERTMANAGERS, "meta", "page", own_prometheus=True),
    PipelineAlert(PROMETHEUS_NOTIFICATIONS_FAILING, "meta", "page", own_prometheus=True),
    PipelineAlert(NOTIFICATIONS_FAILING, "meta", "page"),
    PipelineAlert(TICKET_NOTIFICATIONS_FAILING, "meta", "ticket"),
    PipelineAlert(CLUSTER_DEGRADED, "meta", "ticket"),
    PipelineAlert(PROMETHEUS_RELOAD_FAILED, "meta", "ticket", own_prometheus=True),
    PipelineAlert(
        ALERTMANAGER_RELOAD_FAILED,
        "meta",
        "ticket",
        explains=(CONFIG_INCONSISTENT,),
        why="A replica that failed to reload keeps routing with the old configuration: the "
        "replicas' configurations differ because of it, one incident.",
    ),
    PipelineAlert(CONFIG_INCONSISTENT, "meta", "ticket"),
    PipelineAlert(TARGETS_VANISHED, "meta", "page"),
    # The team paged too often gets the ticket (its `team` label is the counted team's), but
    # the monitoring route takes it by name (generator/routing/meta.py).
    PipelineAlert(ONCALL_ALERT, "oncall", "ticket", runbook="generator/oncall/runbook.py"),
    PipelineAlert(SHARD_ALERT, "shard", "ticket", runbook="README.md#sharding-131072-gpus"),
    # A node with recurring hardware incidents across jobs (a lemon): the infra team's ticket,
    # routed by its `team` label like their hardware tickets (generator/nodes/).
    PipelineAlert(
        NODE_INCIDENTS_ALERT, "nodes", "ticket", owner=INFRA, runbook="generator/nodes/files.py"
    ),
)
BY_NAME: dict[str, PipelineAlert] = {a.name: a for a in PIPELINE_ALERTS}

# Every meta alert, the heartbeat first (it has no severity to override).
META_ALERT_NAMES = tuple(a.name for a in PIPELINE_ALERTS if a.family == "meta")
# The meta alerts' default severities (the heartbeat aside).
META_SEVERITIES: dict[str, str] = {
    a.name: a.severity for a in PIPELINE_ALERTS if a.family == "meta" and a.name != HEARTBEAT
}
# What the monitoring team's route takes by name: every pipeline alert but the heartbeat (the
# dead man's switch has its own route), in declaration order.
MONITORING_ROUTED = tuple(
    a.name for a in PIPELINE_ALERTS if a.name != HEARTBEAT and a.owner != INFRA
)
# The meta alerts a shard evaluates about itself (generator/deploy/sharding/meta.py).
OWN_PROMETHEUS = tuple(a.name for a in PIPELINE_ALERTS if a.own_prometheus)


def declared_severity(name: str) -> str:
    """A pipeline alert's declared default severity."""
    return BY_NAME[name].severity
