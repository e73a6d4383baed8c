"""Meta-monitoring: one rule group, shared by all jobs, that watches the monitoring pipeline.

Without it a broken pipeline is silent and silence looks like health. Modelled on the
kube-prometheus / prometheus-operator mixins (Watchdog, PrometheusRuleFailures,
PrometheusNotConnectedToAlertmanagers, PrometheusErrorSendingAlertsToAnyAlertmanager,
AlertmanagerFailedToSendAlerts, AlertmanagerMembersInconsistent), reduced to what a training
fleet's on-call needs, plus one check of our own: a running job's GPU or training targets
vanishing from service discovery (its alerts can then never fire).

Who acts: the pipeline's owners (generator/spec/monitoring.py, `team`), never the job's team.
What pages: anything that silently disables paging (failing rules, no Alertmanager, failing
page notifications, a running job's targets gone). What tickets: degraded but still delivering
(a slow rule group, one Alertmanager of a cluster down, an integration that carries only
tickets failing), and a configuration change that did not take effect (a failed reload, or
Alertmanager replicas running different configurations): the old configuration still pages.
The Watchdog fires always and goes to an external dead man's switch that pages when it stops
(generator/routing/meta.py).

Generated files: `alerts/meta.rules.yaml`, `alerts/meta.test.yaml` (promtool: each alert fires
on its fault and stays silent on a healthy pipeline) and `runbooks/<Alert>.md`.
"""

from __future__ import annotations

from collections.abc import Callable

from trainsignals.generator.meta.names import (
    ALERTMANAGER_RELOAD_FAILED,
    CLUSTER_DEGRADED,
    CONFIG_INCONSISTENT,
    HEARTBEAT,
    NOT_CONNECTED_TO_ALERTMANAGERS,
    NOTIFICATIONS_FAILING,
    PROMETHEUS_NOTIFICATIONS_FAILING,
    PROMETHEUS_RELOAD_FAILED,
    RULE_FAILURES,
    RULE_GROUP_SLOW,
    TARGETS_VANISHED,
    TICKET_NOTIFICATIONS_FAILING,
)
from trainsignals.generator.meta.notify import (
    PAGES_FAILING,
    TICKETS_FAILING,
    heartbeat_expr,
    integrations,
    notifications_failing,
)
from trainsignals.generator.meta.rule import MetaRule, Scale
from trainsignals.generator.meta.targets import (
    fabric_specs,
    node_exporter_rules,
    vanish_groups,
    vanished_rules,
)
from trainsignals.generator.signals.promql import matchers
from trainsignals.generator.spec.job import JobSpec
from trainsignals.generator.spec.monitoring import MonitoringSettings

__all__ = ["MetaRule", "Scale", "fabric_specs", "integrations", "meta_rules", "vanish_groups"]

NAME = "meta"  # file stem: alerts/meta.rules.yaml
GROUP = "trainsignals-meta"
DEFAULT_SCALE = Scale()
HEARTBEAT_SEVERITY = "none"  # as in kube-prometheus: nobody acts on it, the switch does


# Who must act and how fast: page what silently disables paging, ticket what only degrades it.
DEFAULT_SEVERITIES: dict[str, str] = {
    RULE_FAILURES: "page",
    RULE_GROUP_SLOW: "ticket",
    NOT_CONNECTED_TO_ALERTMANAGERS: "page",
    PROMETHEUS_NOTIFICATIONS_FAILING: "page",
    NOTIFICATIONS_FAILING: "page",
    TICKET_NOTIFICATIONS_FAILING: "ticket",
    CLUSTER_DEGRADED: "ticket",
    PROMETHEUS_RELOAD_FAILED: "ticket",
    ALERTMANAGER_RELOAD_FAILED: "ticket",
    CONFIG_INCONSISTENT: "ticket",
    TARGETS_VANISHED: "page",
}


def severity_of(settings: MonitoringSettings, name: str) -> str:
    """The meta alert's severity: the settings' override, else its default."""
    return settings.alerts.get(name, DEFAULT_SEVERITIES[name])


def _prom(settings: MonitoringSettings) -> str:
    return matchers({"job": settings.prometheus_job})


def _am(settings: MonitoringSettings) -> str:
    return matchers({"job": settings.alertmanager_job})


def meta_rules(
    settings: MonitoringSettings,
    specs: list[JobSpec],
    scale: Scale = DEFAULT_SCALE,
    routed: list[JobSpec] | None = None,
) -> list[MetaRule]:
    """Every enabled meta alert rule, Watchdog first. `routed`: the specs whose receivers the
    Alertmanager holds (default `specs`), which decide the page and ticket integrations."""
    prom, am = _prom(settings), _am(settings)
    w5 = scale.range(300)
    ui = settings.prometheus_url
    n = settings.alertmanager_replicas
    page_kinds, ticket_kinds = integrations(settings, specs if routed is None else routed)
    candidates: list[tuple[str, Callable[[str], list[MetaRule]]]] = [
        (
            RULE_FAILURES,
            lambda sev: [
                MetaRule(
                    RULE_FAILURES,
                    f"increase(prometheus_rule_evaluation_failures_total{prom}[{w5}]) > 0",
                    600,
                    sev,
                    settings.prometheus_job,
                    "Rules of {{ $labels.rule_group }} fail to evaluate",
                    "Prometheus {{ $labels.instance }} failed {{ $value | humanize }} "
                    f"evaluations of rule group {{{{ $labels.rule_group }}}} in {w5}: those "
                    "alerts cannot fire. The error is on the Rules page.",
                    f"{ui}/rules",
                )
            ],
        ),
        (
            RULE_GROUP_SLOW,
            lambda sev: [
                MetaRule(
                    RULE_GROUP_SLOW,
                    f"prometheus_rule_group_last_duration_seconds{prom} "
                    f"> prometheus_rule_group_interval_seconds{prom} or "
                    f"increase(prometheus_rule_group_iterations_missed_total{prom}[{w5}]) > 0",
                    900,
                    sev,
                    settings.prometheus_job,
                    "Rule group {{ $labels.rule_group }} evaluates slower than its interval",
                    "Rule group {{ $labels.rule_group }} on {{ $labels.instance }} takes "
                    "longer than its interval or skips evaluations: its alerts fire late.",
                    f"{ui}/rules",
                )
            ],
        ),
        (
            NOT_CONNECTED_TO_ALERTMANAGERS,
            lambda sev: [
                MetaRule(
                    NOT_CONNECTED_TO_ALERTMANAGERS,
                    f"max_over_time(prometheus_notifications_alertmanagers_discovered{prom}"
                    f"[{w5}]) < 1",
                    600,
                    sev,
                    settings.prometheus_job,
                    "Prometheus {{ $labels.instance }} has no Alertmanager",
                    "Prometheus {{ $labels.instance }} has discovered no Alertmanager for "
                    f"{w5}: every alert it fires goes nowhere. Only the dead man's switch "
                    f"notices (the {HEARTBEAT} stops too).",
                    f"{ui}/status",
                )
            ],
        ),
        (
            PROMETHEUS_NOTIFICATIONS_FAILING,
            lambda sev: [
                MetaRule(
                    PROMETHEUS_NOTIFICATIONS_FAILING,
                    f"(min without (alertmanager) (rate(prometheus_notifications_errors_total"
                    f"{prom}[{w5}]) / rate(prometheus_notifications_sent_total{prom}[{w5}])) "
                    f"> 0.03) or rate(prometheus_notifications_dropped_total{prom}[{w5}]) > 0",
                    600,
                    sev,
                    settings.prometheus_job,
                    "Prometheus {{ $labels.instance }} cannot send alerts to any Alertmanager",
                    "Prometheus {{ $labels.instance }} fails to deliver alerts to every "
                    "Alertmanager it knows, or drops alerts from its queue: pages are not "
                    "leaving Prometheus.",
                    f"{ui}/status",
                )
            ],
        ),
        (
            PAGES_FAILING,
            lambda sev: notifications_failing(
                settings,
                PAGES_FAILING,
                page_kinds,
                sev,
                w5,
                "Pages routed through it are not arriving.",
            ),
        ),
        (
            TICKETS_FAILING,
            lambda sev: notifications_failing(
                settings,
                TICKETS_FAILING,
                ticket_kinds,
                sev,
                w5,
                "Only tickets use it: no page is lost, tickets are late.",
            ),
        ),
        (
            CLUSTER_DEGRADED,
            lambda sev: [
                MetaRule(
                    CLUSTER_DEGRADED,
                    f"(sum(up{am}) or vector(0)) < {n}"
                    + (f" or min(alertmanager_cluster_members{am}) < {n}" if n > 1 else ""),
                    900,
                    sev,
                    settings.alertmanager_job,
                    f"Fewer than {n} Alertmanagers are up and clustered",
                    f"Only {{{{ $value }}}} of {n} Alertmanagers are up (or a member sees "
                    "fewer peers): notifications still go out while one is left, but the "
                    "cluster no longer survives another failure.",
                    f"{settings.alertmanager_url}/#/status",
                )
            ],
        ),
        (
            PROMETHEUS_RELOAD_FAILED,
            lambda sev: [
                MetaRule(
                    PROMETHEUS_RELOAD_FAILED,
                    f"max_over_time(prometheus_config_last_reload_successful{prom}[{w5}]) == 0",
                    600,
                    sev,
                    settings.prometheus_job,
                    "Prometheus {{ $labels.instance }} failed to reload its configuration",
                    "Prometheus {{ $labels.instance }} has failed every configuration reload "
                    f"for {w5}: it still runs the previous configuration, so the last applied "
                    "change (new jobs' rules, scrape configs) has not taken effect.",
                    f"{ui}/status",
                )
            ],
        ),
        (
            ALERTMANAGER_RELOAD_FAILED,
            lambda sev: [
                MetaRule(
                    ALERTMANAGER_RELOAD_FAILED,
                    f"max_over_time(alertmanager_config_last_reload_successful{am}[{w5}]) == 0",
                    600,
                    sev,
                    settings.alertmanager_job,
                    "Alertmanager {{ $labels.instance }} failed to reload its configuration",
                    "Alertmanager {{ $labels.instance }} has failed every configuration reload "
                    f"for {w5}: it still routes with the previous configuration, so the last "
                    "routing change (new teams, receivers, inhibitions) has not taken effect.",
                    f"{settings.alertmanager_url}/#/status",
                )
            ],
        ),
        (
            CONFIG_INCONSISTENT,
            lambda sev: (
                [
                    MetaRule(
                        CONFIG_INCONSISTENT,
                        f'count(count_values("config_hash", alertmanager_config_hash{am})) > 1',
                        1200,  # a rolling apply reloads the replicas a few minutes apart
                        sev,
                        settings.alertmanager_job,
                        "Alertmanager replicas run different configurations",
                        "The Alertmanagers of the cluster run {{ $value }} different "
                        "configurations: an alert is routed differently depending on which "
                        "replica sends it. A change was applied to some replicas only.",
                        f"{settings.alertmanager_url}/#/status",
                    )
                ]
                if n > 1
                else []
            ),
        ),
        (
            TARGETS_VANISHED,
            lambda sev: (
                vanished_rules(settings, specs, sev, 600)
                + node_exporter_rules(settings, specs, sev, 600)
            ),
        ),
    ]
    rules = [
        MetaRule(
            HEARTBEAT,
            heartbeat_expr(page_kinds, severity_of(settings, PAGES_FAILING) != "off"),
            0,
            HEARTBEAT_SEVERITY,
            settings.prometheus_job,
            "Heartbeat: the alerting pipeline is working",
            "Always firing. It is routed to the dead man's switch, which pages when it stops "
            "arriving (Prometheus, Alertmanager or the host is down, or notifications of an "
            f"integration that carries pages keep failing: {PAGES_FAILING}).",
            f"{settings.alertmanager_url}/#/alerts",
        )
    ]
    for name, build in candidates:
        severity = severity_of(settings, name)
        if severity != "off":
            rules.extend(build(severity))
    return rules


def render_rule(settings: MonitoringSettings, rule: MetaRule, scale: Scale) -> dict:
    body: dict = {"alert": rule.alert, "expr": rule.expr}
    if rule.for_seconds:
        body["for"] = scale.duration(rule.for_seconds)
    body["labels"] = {
        "job": rule.job,
        "severity": rule.severity,
        "team": settings.team,
        **rule.extra_labels,
    }
    body["annotations"] = {
        "dashboard_url": rule.dashboard_url,
        "description": rule.description,
        "runbook_url": f"{settings.runbook_base_url.rstrip('/')}/{rule.alert}.md",
        "summary": rule.summary,
    }
    return body


def rules_document(
    settings: MonitoringSettings,
    specs: list[JobSpec],
    scale: Scale = DEFAULT_SCALE,
    routed: list[JobSpec] | None = None,
) -> dict:
    rules = [render_rule(settings, r, scale) for r in meta_rules(settings, specs, scale, routed)]
    return {"groups": [{"name": GROUP, "rules": rules}]}
