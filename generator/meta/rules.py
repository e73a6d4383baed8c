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
from dataclasses import dataclass

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
from trainsignals.generator.spec.pipeline_alerts import (
    ALERTMANAGER_RELOAD_FAILED,
    CLUSTER_DEGRADED,
    CONFIG_INCONSISTENT,
    HEARTBEAT,
    META_SEVERITIES,
    NOT_CONNECTED_TO_ALERTMANAGERS,
    PROMETHEUS_NOTIFICATIONS_FAILING,
    PROMETHEUS_RELOAD_FAILED,
    RULE_FAILURES,
    RULE_GROUP_SLOW,
    TARGETS_VANISHED,
)

__all__ = ["MetaRule", "Scale", "fabric_specs", "integrations", "meta_rules", "vanish_groups"]

NAME = "meta"  # file stem: alerts/meta.rules.yaml
GROUP = "trainsignals-meta"
DEFAULT_SCALE = Scale()
HEARTBEAT_SEVERITY = "none"  # as in kube-prometheus: nobody acts on it, the switch does


# Who must act and how fast: the declarations' defaults (generator/spec/pipeline_alerts.py).
DEFAULT_SEVERITIES: dict[str, str] = dict(META_SEVERITIES)


def severity_of(settings: MonitoringSettings, name: str) -> str:
    """The meta alert's severity: the settings' override, else its default."""
    return settings.alerts.get(name, DEFAULT_SEVERITIES[name])


def _prom(settings: MonitoringSettings) -> str:
    return matchers({"job": settings.prometheus_job})


def _am(settings: MonitoringSettings) -> str:
    return matchers({"job": settings.alertmanager_job})


@dataclass(frozen=True)
class _Pipeline:
    """What the meta rules of one generation read: the settings, the specs, their windows."""

    settings: MonitoringSettings
    specs: list[JobSpec]
    prom: str  # the Prometheus self-scrape's selector
    am: str  # the Alertmanagers' selector
    w5: str  # 5m, scaled
    ui: str  # Prometheus' web address, for dashboard links
    n: int  # Alertmanager replicas
    page_kinds: list[str]  # integrations that carry pages
    ticket_kinds: list[str]  # integrations that carry only tickets


Builder = Callable[[_Pipeline, str], list[MetaRule]]


def _rule_failures(p: _Pipeline, sev: str) -> list[MetaRule]:
    settings, prom, w5, ui = p.settings, p.prom, p.w5, p.ui
    return [
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
    ]


def _rule_group_slow(p: _Pipeline, sev: str) -> list[MetaRule]:
    settings, prom, w5, ui = p.settings, p.prom, p.w5, p.ui
    return [
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
    ]


def _not_connected_to_alertmanagers(p: _Pipeline, sev: str) -> list[MetaRule]:
    settings, prom, w5, ui = p.settings, p.prom, p.w5, p.ui
    return [
        MetaRule(
            NOT_CONNECTED_TO_ALERTMANAGERS,
            f"max_over_time(prometheus_notifications_alertmanagers_discovered{prom}[{w5}]) < 1",
            600,
            sev,
            settings.prometheus_job,
            "Prometheus {{ $labels.instance }} has no Alertmanager",
            "Prometheus {{ $labels.instance }} has discovered no Alertmanager for "
            f"{w5}: every alert it fires goes nowhere. Only the dead man's switch "
            f"notices (the {HEARTBEAT} stops too).",
            f"{ui}/status",
        )
    ]


def _prometheus_notifications_failing(p: _Pipeline, sev: str) -> list[MetaRule]:
    settings, prom, w5, ui = p.settings, p.prom, p.w5, p.ui
    return [
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
    ]


def _pages_failing(p: _Pipeline, sev: str) -> list[MetaRule]:
    settings, w5, page_kinds = p.settings, p.w5, p.page_kinds
    return notifications_failing(
        settings,
        PAGES_FAILING,
        page_kinds,
        sev,
        w5,
        "Pages routed through it are not arriving.",
    )


def _tickets_failing(p: _Pipeline, sev: str) -> list[MetaRule]:
    settings, w5, ticket_kinds = p.settings, p.w5, p.ticket_kinds
    return notifications_failing(
        settings,
        TICKETS_FAILING,
        ticket_kinds,
        sev,
        w5,
        "Only tickets use it: no page is lost, tickets are late.",
    )


def _cluster_degraded(p: _Pipeline, sev: str) -> list[MetaRule]:
    settings, am, n = p.settings, p.am, p.n
    return [
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
    ]


def _prometheus_reload_failed(p: _Pipeline, sev: str) -> list[MetaRule]:
    settings, prom, w5, ui = p.settings, p.prom, p.w5, p.ui
    return [
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
    ]


def _alertmanager_reload_failed(p: _Pipeline, sev: str) -> list[MetaRule]:
    settings, am, w5 = p.settings, p.am, p.w5
    return [
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
    ]


def _config_inconsistent(p: _Pipeline, sev: str) -> list[MetaRule]:
    settings, am, n = p.settings, p.am, p.n
    return (
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
    )


def _targets_vanished(p: _Pipeline, sev: str) -> list[MetaRule]:
    settings, specs = p.settings, p.specs
    return vanished_rules(settings, specs, sev, 600) + node_exporter_rules(
        settings, specs, sev, 600
    )


# One builder per declared meta alert (generator/spec/pipeline_alerts.py), the heartbeat aside.
BUILDERS: dict[str, Builder] = {
    RULE_FAILURES: _rule_failures,
    RULE_GROUP_SLOW: _rule_group_slow,
    NOT_CONNECTED_TO_ALERTMANAGERS: _not_connected_to_alertmanagers,
    PROMETHEUS_NOTIFICATIONS_FAILING: _prometheus_notifications_failing,
    PAGES_FAILING: _pages_failing,
    TICKETS_FAILING: _tickets_failing,
    CLUSTER_DEGRADED: _cluster_degraded,
    PROMETHEUS_RELOAD_FAILED: _prometheus_reload_failed,
    ALERTMANAGER_RELOAD_FAILED: _alertmanager_reload_failed,
    CONFIG_INCONSISTENT: _config_inconsistent,
    TARGETS_VANISHED: _targets_vanished,
}
if list(BUILDERS) != list(DEFAULT_SEVERITIES):
    raise ValueError("generator/meta/rules.py: one builder per declared meta alert, in order")


def meta_rules(
    settings: MonitoringSettings,
    specs: list[JobSpec],
    scale: Scale = DEFAULT_SCALE,
    routed: list[JobSpec] | None = None,
) -> list[MetaRule]:
    """Every enabled meta alert rule, Watchdog first, then the declared alerts in their order.
    `routed`: the specs whose receivers the Alertmanager holds (default `specs`), which decide
    the page and ticket integrations."""
    page_kinds, ticket_kinds = integrations(settings, specs if routed is None else routed)
    pipeline = _Pipeline(
        settings,
        specs,
        _prom(settings),
        _am(settings),
        scale.range(300),
        settings.prometheus_url,
        settings.alertmanager_replicas,
        page_kinds,
        ticket_kinds,
    )
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
    for name, build in BUILDERS.items():
        severity = severity_of(settings, name)
        if severity != "off":
            rules.extend(build(pipeline, severity))
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
