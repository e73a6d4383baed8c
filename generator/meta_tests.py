"""promtool unit tests for the meta-monitoring group (alerts/meta.test.yaml).

Each alert gets a case where its fault fires it with exact labels and a healthy (or
deliberately tolerated) case where it stays silent: one Alertmanager of two failing is not a
page, a finished job losing all its targets is not a vanished target. Series carry the labels
Prometheus 2.42 and Alertmanager 0.25 really export (checked on the e2e stack).
"""

from __future__ import annotations

from collections.abc import Callable

from .meta import (
    GROUP,
    HEARTBEAT,
    HEARTBEAT_SEVERITY,
    fabric_specs,
    integrations,
    severity_of,
    vanish_groups,
)
from .monitoring import MonitoringSettings
from .promql import matchers
from .scrape_config import NODE_EXPORTER_JOB
from .spec import JobSpec

PROM_INSTANCE = "prometheus-0:9090"
RULE_GROUP = "/etc/prometheus/rules/job.rules.yaml;trainsignals-job-alerts"


def _series(name: str, labels: dict[str, str], values: str) -> dict:
    return {"series": f"{name}{matchers(labels)}", "values": values}


def _alert(alertname: str, minute: int, expected: list[dict[str, str]]) -> dict:
    """The firing alerts named `alertname` at `minute`: exactly these label sets.

    An ALERTS query, not `alert_rule_test`: promtool compares annotations verbatim there, and
    ours carry live values.
    """
    firing = {"alertname": alertname, "alertstate": "firing"}
    return {
        "expr": f"ALERTS{matchers(firing)}",
        "eval_time": f"{minute}m",
        "exp_samples": [
            {"labels": f"ALERTS{matchers({**firing, **labels})}", "value": 1} for labels in expected
        ],
    }


def _case(name: str, series: list[dict], checks: list[dict]) -> dict:
    return {"name": name, "interval": "1m", "input_series": series, "promql_expr_test": checks}


def _tests(
    settings: MonitoringSettings, specs: list[JobSpec], routed: list[JobSpec]
) -> dict[str, list[dict]]:
    """{alert name: its test cases}."""
    team = settings.team
    prom = {"instance": PROM_INSTANCE, "job": settings.prometheus_job}
    am_job = settings.alertmanager_job

    def labels(alert: str, job: str, **extra: str) -> dict[str, str]:
        sev = severity_of(settings, alert)
        return {"job": job, "severity": sev, "team": team, **extra}

    def am_url(i: int) -> str:
        return f"http://alertmanager-{i}:9093/api/v2/alerts"

    tests: dict[str, list[dict]] = {
        HEARTBEAT: [
            _case(
                "Watchdog always fires, with no input at all",
                [_series("up", prom, "1x5")],
                [
                    _alert(
                        HEARTBEAT,
                        1,
                        [
                            {
                                "job": settings.prometheus_job,
                                "severity": HEARTBEAT_SEVERITY,
                                "team": team,
                            }
                        ],
                    )
                ],
            )
        ],
        "PrometheusRuleFailures": [
            _case(
                "a rule group failing every evaluation from minute 20 fires; a healthy one not",
                [
                    _series(
                        "prometheus_rule_evaluation_failures_total",
                        {**prom, "rule_group": RULE_GROUP},
                        "0x20 1+1x40",
                    ),
                    _series(
                        "prometheus_rule_evaluation_failures_total",
                        {**prom, "rule_group": "/etc/prometheus/rules/ok.rules.yaml;ok"},
                        "0x60",
                    ),
                ],
                [
                    _alert("PrometheusRuleFailures", 19, []),
                    _alert(
                        "PrometheusRuleFailures",
                        45,
                        [
                            labels(
                                "PrometheusRuleFailures",
                                settings.prometheus_job,
                                instance=PROM_INSTANCE,
                                rule_group=RULE_GROUP,
                            )
                        ],
                    ),
                ],
            )
        ],
        "PrometheusRuleGroupSlow": [
            _case(
                "a group taking 90 s per 60 s interval fires; a 0.5 s group does not, nor does "
                "a 3m-interval group taking 90 s (each group against its own interval)",
                [
                    _series(
                        "prometheus_rule_group_last_duration_seconds",
                        {**prom, "rule_group": "three-minute"},
                        "90x60",
                    ),
                    _series(
                        "prometheus_rule_group_interval_seconds",
                        {**prom, "rule_group": "three-minute"},
                        "180x60",
                    ),
                    _series(
                        "prometheus_rule_group_last_duration_seconds",
                        {**prom, "rule_group": "fast"},
                        "0.5x60",
                    ),
                    _series(
                        "prometheus_rule_group_interval_seconds",
                        {**prom, "rule_group": "fast"},
                        "60x60",
                    ),
                    _series(
                        "prometheus_rule_group_last_duration_seconds",
                        {**prom, "rule_group": "slow"},
                        "1x10 90x50",
                    ),
                    _series(
                        "prometheus_rule_group_interval_seconds",
                        {**prom, "rule_group": "slow"},
                        "60x60",
                    ),
                    _series(
                        "prometheus_rule_group_iterations_missed_total",
                        {**prom, "rule_group": "fast"},
                        "0x60",
                    ),
                ],
                [
                    _alert("PrometheusRuleGroupSlow", 10, []),
                    _alert(
                        "PrometheusRuleGroupSlow",
                        40,
                        [
                            labels(
                                "PrometheusRuleGroupSlow",
                                settings.prometheus_job,
                                instance=PROM_INSTANCE,
                                rule_group="slow",
                            )
                        ],
                    ),
                ],
            )
        ],
        "PrometheusNotConnectedToAlertmanagers": [
            _case(
                "no Alertmanager discovered from minute 11 fires after the window and `for`",
                [_series("prometheus_notifications_alertmanagers_discovered", prom, "2x10 0x40")],
                [
                    _alert("PrometheusNotConnectedToAlertmanagers", 10, []),
                    _alert(
                        "PrometheusNotConnectedToAlertmanagers",
                        40,
                        [
                            labels(
                                "PrometheusNotConnectedToAlertmanagers",
                                settings.prometheus_job,
                                instance=PROM_INSTANCE,
                            )
                        ],
                    ),
                ],
            )
        ],
        "PrometheusNotificationsFailing": [
            _case(
                "one Alertmanager of two refusing alerts is no page (the other delivers)",
                [
                    _series(
                        "prometheus_notifications_errors_total",
                        {**prom, "alertmanager": am_url(0)},
                        "0+10x60",
                    ),
                    _series(
                        "prometheus_notifications_sent_total",
                        {**prom, "alertmanager": am_url(0)},
                        "0+10x60",
                    ),
                    _series(
                        "prometheus_notifications_errors_total",
                        {**prom, "alertmanager": am_url(1)},
                        "0x60",
                    ),
                    _series(
                        "prometheus_notifications_sent_total",
                        {**prom, "alertmanager": am_url(1)},
                        "0+10x60",
                    ),
                    _series("prometheus_notifications_dropped_total", prom, "0x60"),
                ],
                [_alert("PrometheusNotificationsFailing", 50, [])],
            ),
            _case(
                "both Alertmanagers refusing alerts from minute 20 pages",
                [
                    _series(
                        "prometheus_notifications_errors_total",
                        {**prom, "alertmanager": am_url(i)},
                        "0x20 10+10x40",
                    )
                    for i in (0, 1)
                ]
                + [
                    _series(
                        "prometheus_notifications_sent_total",
                        {**prom, "alertmanager": am_url(i)},
                        "0+10x60",
                    )
                    for i in (0, 1)
                ]
                + [_series("prometheus_notifications_dropped_total", prom, "0x60")],
                [
                    _alert("PrometheusNotificationsFailing", 19, []),
                    _alert(
                        "PrometheusNotificationsFailing",
                        45,
                        [
                            labels(
                                "PrometheusNotificationsFailing",
                                settings.prometheus_job,
                                instance=PROM_INSTANCE,
                            )
                        ],
                    ),
                ],
            ),
            _case(
                "alerts dropped from a full queue page",
                [_series("prometheus_notifications_dropped_total", prom, "0x20 5+5x40")],
                [
                    _alert(
                        "PrometheusNotificationsFailing",
                        45,
                        [
                            labels(
                                "PrometheusNotificationsFailing",
                                settings.prometheus_job,
                                instance=PROM_INSTANCE,
                            )
                        ],
                    )
                ],
            ),
        ],
        "PrometheusConfigReloadFailed": [
            _case(
                "a reload failing from minute 20 on raises a ticket; one failed reload fixed "
                "a minute later does not",
                [
                    _series("prometheus_config_last_reload_successful", prom, "1x20 0x40"),
                    _series(
                        "prometheus_config_last_reload_successful",
                        {**prom, "instance": "prometheus-1:9090"},
                        "1x10 0 1x49",
                    ),
                ],
                [
                    _alert("PrometheusConfigReloadFailed", 19, []),
                    _alert(
                        "PrometheusConfigReloadFailed",
                        45,
                        [
                            labels(
                                "PrometheusConfigReloadFailed",
                                settings.prometheus_job,
                                instance=PROM_INSTANCE,
                            )
                        ],
                    ),
                ],
            )
        ],
        "AlertmanagerConfigReloadFailed": [
            _case(
                "an Alertmanager failing to reload from minute 20 raises a ticket",
                [
                    _series(
                        "alertmanager_config_last_reload_successful",
                        {"instance": "alertmanager-0:9093", "job": am_job},
                        "1x20 0x40",
                    ),
                    _series(
                        "alertmanager_config_last_reload_successful",
                        {"instance": "alertmanager-1:9093", "job": am_job},
                        "1x60",
                    ),
                ],
                [
                    _alert("AlertmanagerConfigReloadFailed", 19, []),
                    _alert(
                        "AlertmanagerConfigReloadFailed",
                        45,
                        [
                            labels(
                                "AlertmanagerConfigReloadFailed",
                                am_job,
                                instance="alertmanager-0:9093",
                            )
                        ],
                    ),
                ],
            )
        ],
    }
    tests |= _notification_tests(settings, routed, labels)
    n = settings.alertmanager_replicas
    if n > 1:
        up = [
            _series(
                "up",
                {"instance": f"alertmanager-{i}:9093", "job": am_job},
                "1x20 0x40" if i == n - 1 else "1x60",
            )
            for i in range(n)
        ]
        members = [
            _series(
                "alertmanager_cluster_members",
                {"instance": f"alertmanager-{i}:9093", "job": am_job},
                f"{n}x20" if i == n - 1 else f"{n}x25 {n - 1}x35",
            )
            for i in range(n)
        ]
        tests["AlertmanagerConfigInconsistent"] = [
            _case(
                "a config applied to one Alertmanager only (minute 20) raises a ticket; a "
                "rolling apply a few minutes apart does not",
                [
                    _series(
                        "alertmanager_config_hash",
                        {"instance": f"alertmanager-{i}:9093", "job": am_job},
                        "111x20 222x40" if i == 0 else "111x60",
                    )
                    for i in range(n)
                ],
                [
                    _alert("AlertmanagerConfigInconsistent", 19, []),
                    _alert(
                        "AlertmanagerConfigInconsistent",
                        50,
                        [labels("AlertmanagerConfigInconsistent", am_job)],
                    ),
                ],
            ),
            _case(
                "a rolling apply, replicas reloaded 5 minutes apart, is no ticket",
                [
                    _series(
                        "alertmanager_config_hash",
                        {"instance": f"alertmanager-{i}:9093", "job": am_job},
                        f"111x{20 + 5 * i} 222x{40 - 5 * i}",
                    )
                    for i in range(n)
                ],
                [_alert("AlertmanagerConfigInconsistent", m, []) for m in (30, 45, 60)],
            ),
        ]
        tests["AlertmanagerClusterDegraded"] = [
            _case(
                f"one of {n} Alertmanagers down from minute 21 raises a ticket",
                up + members,
                [
                    _alert("AlertmanagerClusterDegraded", 20, []),
                    _alert(
                        "AlertmanagerClusterDegraded",
                        50,
                        [labels("AlertmanagerClusterDegraded", am_job)],
                    ),
                ],
            )
        ]
    vanished: list[dict] = []
    for names, training, gpu, group in vanish_groups(specs):
        selector = group[0].selector_labels
        node_exporter = {**selector, "instance": "node-0:9100", "job": NODE_EXPORTER_JOB}
        for gone, still in ((gpu, training), (training, gpu)):
            running = [
                _series("up", {**selector, "instance": "node-0:9400", "job": gone}, "1x20 stale"),
                _series("up", {**selector, "instance": "node-0:9401", "job": still}, "1x60"),
            ]
            if group[0] in fabric_specs(group):  # its node_exporters stay
                running.append(_series("up", node_exporter, "1x60"))
            vanished.append(
                _case(
                    f"{group[0].name}: its `{gone}` targets leave service discovery at minute "
                    f"21 while `{still}` targets run",
                    running,
                    [
                        _alert("ScrapeTargetsVanished", 20, []),
                        _alert(
                            "ScrapeTargetsVanished",
                            45,
                            [
                                labels(
                                    "ScrapeTargetsVanished",
                                    gone,
                                    vanished=gone,
                                    **{k: selector[k] for k in names},
                                )
                            ],
                        ),
                    ],
                )
            )
        finished = [
            _series("up", {**selector, "instance": "node-0:9400", "job": job}, "1x20 stale")
            for job in sorted({training, gpu})
        ]
        vanished.append(
            _case(
                f"{group[0].name}: a finished job (every target gone) is not a vanished target",
                finished,
                [_alert("ScrapeTargetsVanished", 45, [])],
            )
        )
    for names, training, gpu, group in vanish_groups(fabric_specs(specs)):
        selector = group[0].selector_labels
        vanished.append(
            _case(
                f"{group[0].name}: its node_exporter targets leave service discovery at minute "
                f"21 while `{gpu}` targets run (the InfiniBand alerts go blind)",
                [
                    _series(
                        "up",
                        {**selector, "instance": "node-0:9100", "job": NODE_EXPORTER_JOB},
                        "1x20 stale",
                    ),
                    _series("up", {**selector, "instance": "node-0:9400", "job": gpu}, "1x60"),
                    _series("up", {**selector, "instance": "node-0:9401", "job": training}, "1x60"),
                ],
                [
                    _alert("ScrapeTargetsVanished", 20, []),
                    _alert(
                        "ScrapeTargetsVanished",
                        45,
                        [
                            labels(
                                "ScrapeTargetsVanished",
                                NODE_EXPORTER_JOB,
                                vanished=NODE_EXPORTER_JOB,
                                **{k: selector[k] for k in names},
                            )
                        ],
                    ),
                ],
            )
        )
    tests["ScrapeTargetsVanished"] = vanished
    return tests


def _notification_tests(
    settings: MonitoringSettings, specs: list[JobSpec], labels: Callable[..., dict[str, str]]
) -> dict[str, list[dict]]:
    """A failing page integration pages; one that carries tickets only raises a ticket."""
    am_job = settings.alertmanager_job
    page_kinds, ticket_kinds = integrations(settings, specs)

    def failed(metric: str, integration: str, values: str) -> dict:
        instance = "alertmanager-0:9093"
        return _series(
            metric, {"instance": instance, "integration": integration, "job": am_job}, values
        )

    requests, notifications = (
        "alertmanager_notification_requests_failed_total",
        "alertmanager_notifications_failed_total",
    )
    page = page_kinds[0]
    tests = {
        "AlertmanagerNotificationsFailing": [
            _case(
                f"{page} requests failing from minute 20 page; a {page} request that one "
                "retry fixed at minute 20 does not",
                [
                    failed(requests, page, "0x20 1+1x40"),
                    _series(
                        requests,
                        {"instance": "alertmanager-1:9093", "integration": page, "job": am_job},
                        "0x20 1x40",
                    ),
                    failed(notifications, page, "0x60"),
                ],
                [
                    _alert("AlertmanagerNotificationsFailing", 19, []),
                    _alert(
                        "AlertmanagerNotificationsFailing",
                        40,
                        [labels("AlertmanagerNotificationsFailing", am_job, integration=page)],
                    ),
                ],
            )
        ]
    }
    if ticket_kinds:
        ticket = ticket_kinds[0]
        tests["AlertmanagerTicketNotificationsFailing"] = [
            _case(
                f"{ticket} (tickets only) failing from minute 20 raises a ticket, no page; "
                f"{page} failing too pages",
                [
                    failed(requests, ticket, "0x20 1+1x40"),
                    failed(notifications, ticket, "0x20 1+1x40"),
                    failed(requests, page, "0x40 1+1x20"),
                ],
                [
                    _alert("AlertmanagerTicketNotificationsFailing", 19, []),
                    _alert("AlertmanagerNotificationsFailing", 35, []),
                    _alert(
                        "AlertmanagerTicketNotificationsFailing",
                        35,
                        [
                            labels(
                                "AlertmanagerTicketNotificationsFailing",
                                am_job,
                                integration=ticket,
                            )
                        ],
                    ),
                    _alert(
                        "AlertmanagerNotificationsFailing",
                        55,
                        [labels("AlertmanagerNotificationsFailing", am_job, integration=page)],
                    ),
                ],
            )
        ]
    return tests


def meta_rule_tests(
    settings: MonitoringSettings,
    specs: list[JobSpec],
    rules_file: str,
    routed: list[JobSpec] | None = None,
) -> dict:
    """The promtool test document for the enabled meta alerts (scale 1 only); `routed` as for
    meta.rules_document."""
    cases = [
        case
        for name, alert_cases in _tests(
            settings, specs, specs if routed is None else routed
        ).items()
        if name == HEARTBEAT or severity_of(settings, name) != "off"
        for case in alert_cases
    ]
    return {
        "rule_files": [rules_file],
        "evaluation_interval": "1m",
        "group_eval_order": [GROUP],
        "tests": cases,
    }
