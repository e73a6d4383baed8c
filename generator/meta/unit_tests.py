"""promtool unit tests for the meta-monitoring group (alerts/meta.test.yaml).

Each alert gets a case where its fault fires it with exact labels and a healthy (or
deliberately tolerated) case where it stays silent: one Alertmanager of two failing is not a
page, a finished job losing all its targets is not a vanished target. Series carry the labels
Prometheus 2.42 and Alertmanager 0.25 really export (checked on the e2e stack).
"""

from __future__ import annotations

from trainsignals.generator.meta.rules import GROUP, HEARTBEAT, HEARTBEAT_SEVERITY, severity_of
from trainsignals.generator.meta.test_cases import (
    PROM_INSTANCE,
    config_tests,
    notification_tests,
    vanished_tests,
)
from trainsignals.generator.meta.test_cases import alert as _alert
from trainsignals.generator.meta.test_cases import case as _case
from trainsignals.generator.meta.test_cases import series as _series
from trainsignals.generator.spec.job import JobSpec
from trainsignals.generator.spec.monitoring import MonitoringSettings
from trainsignals.generator.spec.pipeline_alerts import (
    CLUSTER_DEGRADED,
    NOT_CONNECTED_TO_ALERTMANAGERS,
    PROMETHEUS_NOTIFICATIONS_FAILING,
    RULE_FAILURES,
    RULE_GROUP_SLOW,
    TARGETS_VANISHED,
)

RULE_GROUP = "/etc/prometheus/rules/job.rules.yaml;trainsignals-job-alerts"


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
                f"{HEARTBEAT} always fires, with no input at all",
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
        RULE_FAILURES: [
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
                    _alert(RULE_FAILURES, 19, []),
                    _alert(
                        RULE_FAILURES,
                        45,
                        [
                            labels(
                                RULE_FAILURES,
                                settings.prometheus_job,
                                instance=PROM_INSTANCE,
                                rule_group=RULE_GROUP,
                            )
                        ],
                    ),
                ],
            )
        ],
        RULE_GROUP_SLOW: [
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
                    _alert(RULE_GROUP_SLOW, 10, []),
                    _alert(
                        RULE_GROUP_SLOW,
                        40,
                        [
                            labels(
                                RULE_GROUP_SLOW,
                                settings.prometheus_job,
                                instance=PROM_INSTANCE,
                                rule_group="slow",
                            )
                        ],
                    ),
                ],
            )
        ],
        NOT_CONNECTED_TO_ALERTMANAGERS: [
            _case(
                "no Alertmanager discovered from minute 11 fires after the window and `for`",
                [_series("prometheus_notifications_alertmanagers_discovered", prom, "2x10 0x40")],
                [
                    _alert(NOT_CONNECTED_TO_ALERTMANAGERS, 10, []),
                    _alert(
                        NOT_CONNECTED_TO_ALERTMANAGERS,
                        40,
                        [
                            labels(
                                NOT_CONNECTED_TO_ALERTMANAGERS,
                                settings.prometheus_job,
                                instance=PROM_INSTANCE,
                            )
                        ],
                    ),
                ],
            )
        ],
        PROMETHEUS_NOTIFICATIONS_FAILING: [
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
                [_alert(PROMETHEUS_NOTIFICATIONS_FAILING, 50, [])],
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
                    _alert(PROMETHEUS_NOTIFICATIONS_FAILING, 19, []),
                    _alert(
                        PROMETHEUS_NOTIFICATIONS_FAILING,
                        45,
                        [
                            labels(
                                PROMETHEUS_NOTIFICATIONS_FAILING,
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
                        PROMETHEUS_NOTIFICATIONS_FAILING,
                        45,
                        [
                            labels(
                                PROMETHEUS_NOTIFICATIONS_FAILING,
                                settings.prometheus_job,
                                instance=PROM_INSTANCE,
                            )
                        ],
                    )
                ],
            ),
        ],
    }
    tests |= notification_tests(settings, routed, labels)
    tests |= config_tests(settings, labels)
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
        tests[CLUSTER_DEGRADED] = [
            _case(
                f"one of {n} Alertmanagers down from minute 21 raises a ticket",
                up + members,
                [
                    _alert(CLUSTER_DEGRADED, 20, []),
                    _alert(
                        CLUSTER_DEGRADED,
                        50,
                        [labels(CLUSTER_DEGRADED, am_job)],
                    ),
                ],
            )
        ]
    tests[TARGETS_VANISHED] = vanished_tests(settings, specs, labels)
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
