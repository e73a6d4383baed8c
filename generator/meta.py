"""Meta-monitoring: one rule group, shared by all jobs, that watches the monitoring pipeline.

Without it a broken pipeline is silent and silence looks like health. Modelled on the
kube-prometheus / prometheus-operator mixins (Watchdog, PrometheusRuleFailures,
PrometheusNotConnectedToAlertmanagers, PrometheusErrorSendingAlertsToAnyAlertmanager,
AlertmanagerFailedToSendAlerts, AlertmanagerMembersInconsistent), reduced to what a training
fleet's on-call needs, plus one check of our own: a running job's GPU or training targets
vanishing from service discovery (its alerts can then never fire).

Who acts: the pipeline's owners (generator/monitoring.py, `team`), never the job's team.
What pages: anything that silently disables paging (failing rules, no Alertmanager, failing
page notifications, a running job's targets gone). What tickets: degraded but still delivering
(a slow rule group, one Alertmanager of a cluster down, an integration that carries only
tickets failing), and a configuration change that did not take effect (a failed reload, or
Alertmanager replicas running different configurations): the old configuration still pages.
The Watchdog fires always and goes to an external dead man's switch that pages when it stops
(generator/meta_routing.py).

Generated files: `alerts/meta.rules.yaml`, `alerts/meta.test.yaml` (promtool: each alert fires
on its fault and stays silent on a healthy pipeline) and `runbooks/<Alert>.md`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from .durations import format_duration
from .monitoring import MonitoringSettings
from .promql import matchers, regex
from .receivers import Routing
from .scrape_config import NODE_EXPORTER_JOB
from .spec import JobSpec

NAME = "meta"  # file stem: alerts/meta.rules.yaml
GROUP = "trainsignals-meta"
HEARTBEAT = "Watchdog"
HEARTBEAT_SEVERITY = "none"  # as in kube-prometheus: nobody acts on it, the switch does


@dataclass(frozen=True)
class Scale:
    """Windows and `for`s divided by `time_scale` (end-to-end tests only), as RuleContext."""

    time_scale: float = 1.0
    min_range_seconds: int = 60

    def range(self, seconds: float) -> str:
        return format_duration(max(seconds / self.time_scale, self.min_range_seconds))

    def duration(self, seconds: float) -> str:
        return format_duration(max(seconds / self.time_scale, 1))


@dataclass(frozen=True)
class MetaRule:
    """One alerting rule of the group (ScrapeTargetsVanished has one per scrape-job group)."""

    alert: str
    expr: str
    for_seconds: int
    severity: str
    job: str  # the `job` label: the component that is broken
    summary: str
    description: str
    dashboard_url: str
    extra_labels: dict[str, str] = field(default_factory=dict)


def _escape(value: str) -> str:
    return re.escape(value).replace("\\-", "-")


# Who must act and how fast: page what silently disables paging, ticket what only degrades it.
DEFAULT_SEVERITIES: dict[str, str] = {
    "PrometheusRuleFailures": "page",
    "PrometheusRuleGroupSlow": "ticket",
    "PrometheusNotConnectedToAlertmanagers": "page",
    "PrometheusNotificationsFailing": "page",
    "AlertmanagerNotificationsFailing": "page",
    "AlertmanagerTicketNotificationsFailing": "ticket",
    "AlertmanagerClusterDegraded": "ticket",
    "PrometheusConfigReloadFailed": "ticket",
    "AlertmanagerConfigReloadFailed": "ticket",
    "AlertmanagerConfigInconsistent": "ticket",
    "ScrapeTargetsVanished": "page",
}
PLACEHOLDER_INTEGRATION = "webhook"  # a severity without a receiver posts to a local webhook


def severity_of(settings: MonitoringSettings, name: str) -> str:
    """The meta alert's severity: the settings' override, else its default."""
    return settings.alerts.get(name, DEFAULT_SEVERITIES[name])


def _prom(settings: MonitoringSettings) -> str:
    return matchers({"job": settings.prometheus_job})


def _am(settings: MonitoringSettings) -> str:
    return matchers({"job": settings.alertmanager_job})


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
            receiver = getattr(routing, severity)
            kinds.add(receiver.kind if receiver else PLACEHOLDER_INTEGRATION)
    return sorted(used["page"]), sorted(used["ticket"] - used["page"])


def vanish_groups(specs: list[JobSpec]) -> list[tuple[tuple[str, ...], str, str, list[str]]]:
    """Specs grouped by (selector label names, training scrape job, GPU scrape job).

    One rule per group and direction keeps one alert name per `job` label (the lint's rule).
    Each item: (label names, training job, gpu job, [selector values of the first label]).
    """
    groups: dict[tuple[tuple[str, ...], str, str], list[JobSpec]] = {}
    for spec in sorted(specs, key=lambda s: s.name):
        key = (tuple(spec.selector_labels), spec.scrape_jobs.training, spec.scrape_jobs.gpu)
        groups.setdefault(key, []).append(spec)
    return [(k[0], k[1], k[2], g) for k, g in sorted(groups.items())]  # type: ignore[misc]


def _vanished_rules(
    settings: MonitoringSettings, specs: list[JobSpec], severity: str, for_seconds: int
) -> list[MetaRule]:
    rules = []
    for labels, training, gpu, group in vanish_groups(specs):
        by = ", ".join(labels)
        # Each selector label matches any of the group's jobs (a regex of their values).
        selector = {
            name: regex("|".join(sorted({_escape(s.selector_labels[name]) for s in group})))
            for name in labels
        }
        job_labels = " ".join(f"{{{{ $labels.{name} }}}}" for name in labels)
        for gone, still in ((gpu, training), (training, gpu)):
            present = matchers({**selector, "job": still})
            missing = matchers({**selector, "job": gone})
            rules.append(
                MetaRule(
                    alert="ScrapeTargetsVanished",
                    expr=(
                        f"count by ({by}) (up{present}) unless on ({by}) "
                        f"count by ({by}) (up{missing})"
                    ),
                    for_seconds=for_seconds,
                    severity=severity,
                    job=gone,
                    summary=f"{job_labels}: no `{gone}` targets while `{still}` targets run",
                    description=(
                        f"Service discovery lists none of {job_labels}'s `{gone}` scrape "
                        f"targets while its `{still}` targets are still scraped: the job runs, "
                        f"but every alert reading `{gone}` series is blind and cannot fire."
                    ),
                    dashboard_url=f"{settings.prometheus_url}/service-discovery",
                    extra_labels={"vanished": gone},
                )
            )
    return rules


def fabric_specs(specs: list[JobSpec]) -> list[JobSpec]:
    """Multi-node specs: their InfiniBand alerts read node_exporter (generator/fabric.py)."""
    return [spec for spec in specs if spec.shape.nodes > 1]


def _node_exporter_rules(
    settings: MonitoringSettings, specs: list[JobSpec], severity: str, for_seconds: int
) -> list[MetaRule]:
    """node_exporter targets gone while the job's GPU exporters run: the fabric is unwatched."""
    rules = []
    for labels, _, gpu, group in vanish_groups(fabric_specs(specs)):
        by = ", ".join(labels)
        selector = {
            name: regex("|".join(sorted({_escape(s.selector_labels[name]) for s in group})))
            for name in labels
        }
        job_labels = " ".join(f"{{{{ $labels.{name} }}}}" for name in labels)
        present = matchers({**selector, "job": gpu})
        missing = matchers({**selector, "job": NODE_EXPORTER_JOB})
        rules.append(
            MetaRule(
                alert="ScrapeTargetsVanished",
                expr=(
                    f"count by ({by}) (up{present}) unless on ({by}) count by ({by}) (up{missing})"
                ),
                for_seconds=for_seconds,
                severity=severity,
                job=NODE_EXPORTER_JOB,
                summary=(
                    f"{job_labels}: no `{NODE_EXPORTER_JOB}` (node_exporter) targets while "
                    f"`{gpu}` targets run"
                ),
                description=(
                    f"Service discovery lists none of {job_labels}'s node_exporter targets "
                    f"(`{NODE_EXPORTER_JOB}`) while its `{gpu}` targets are still scraped: the "
                    "InfiniBand alerts (IbPortDown, IbPortFlapping, IbPortErrors) read "
                    "node_exporter and cannot fire."
                ),
                dashboard_url=f"{settings.prometheus_url}/service-discovery",
                extra_labels={"vanished": NODE_EXPORTER_JOB},
            )
        )
    return rules


def _notifications_failing(
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


def meta_rules(
    settings: MonitoringSettings,
    specs: list[JobSpec],
    scale: Scale = Scale(),
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
            "PrometheusRuleFailures",
            lambda sev: [
                MetaRule(
                    "PrometheusRuleFailures",
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
            "PrometheusRuleGroupSlow",
            lambda sev: [
                MetaRule(
                    "PrometheusRuleGroupSlow",
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
            "PrometheusNotConnectedToAlertmanagers",
            lambda sev: [
                MetaRule(
                    "PrometheusNotConnectedToAlertmanagers",
                    f"max_over_time(prometheus_notifications_alertmanagers_discovered{prom}"
                    f"[{w5}]) < 1",
                    600,
                    sev,
                    settings.prometheus_job,
                    "Prometheus {{ $labels.instance }} has no Alertmanager",
                    "Prometheus {{ $labels.instance }} has discovered no Alertmanager for "
                    f"{w5}: every alert it fires goes nowhere. Only the dead man's switch "
                    "notices (the Watchdog stops too).",
                    f"{ui}/status",
                )
            ],
        ),
        (
            "PrometheusNotificationsFailing",
            lambda sev: [
                MetaRule(
                    "PrometheusNotificationsFailing",
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
            "AlertmanagerNotificationsFailing",
            lambda sev: _notifications_failing(
                settings,
                "AlertmanagerNotificationsFailing",
                page_kinds,
                sev,
                w5,
                "Pages routed through it are not arriving.",
            ),
        ),
        (
            "AlertmanagerTicketNotificationsFailing",
            lambda sev: _notifications_failing(
                settings,
                "AlertmanagerTicketNotificationsFailing",
                ticket_kinds,
                sev,
                w5,
                "Only tickets use it: no page is lost, tickets are late.",
            ),
        ),
        (
            "AlertmanagerClusterDegraded",
            lambda sev: [
                MetaRule(
                    "AlertmanagerClusterDegraded",
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
            "PrometheusConfigReloadFailed",
            lambda sev: [
                MetaRule(
                    "PrometheusConfigReloadFailed",
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
            "AlertmanagerConfigReloadFailed",
            lambda sev: [
                MetaRule(
                    "AlertmanagerConfigReloadFailed",
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
            "AlertmanagerConfigInconsistent",
            lambda sev: (
                [
                    MetaRule(
                        "AlertmanagerConfigInconsistent",
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
            "ScrapeTargetsVanished",
            lambda sev: (
                _vanished_rules(settings, specs, sev, 600)
                + _node_exporter_rules(settings, specs, sev, 600)
            ),
        ),
    ]
    rules = [
        MetaRule(
            HEARTBEAT,
            "vector(1)",
            0,
            HEARTBEAT_SEVERITY,
            settings.prometheus_job,
            "Heartbeat: the alerting pipeline is working",
            "Always firing. It is routed to the dead man's switch, which pages when it stops "
            "arriving (Prometheus, Alertmanager or the host is down).",
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
    scale: Scale = Scale(),
    routed: list[JobSpec] | None = None,
) -> dict:
    rules = [render_rule(settings, r, scale) for r in meta_rules(settings, specs, scale, routed)]
    return {"groups": [{"name": GROUP, "rules": rules}]}
