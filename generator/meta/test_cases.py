"""promtool cases of the meta alerts (generator/meta/unit_tests.py): the shared helpers, and the
cases for configuration reloads, notification delivery and vanished targets."""

from __future__ import annotations

from collections.abc import Callable

from trainsignals.generator.meta.notify import integrations
from trainsignals.generator.meta.targets import (
    fabric_specs,
    progress_pages,
    training_vanished_for,
    vanish_groups,
)
from trainsignals.generator.signals.fabric import NODE_EXPORTER_JOB
from trainsignals.generator.signals.promql import matchers
from trainsignals.generator.spec.job import JobSpec
from trainsignals.generator.spec.monitoring import MonitoringSettings
from trainsignals.generator.spec.pipeline_alerts import (
    ALERTMANAGER_RELOAD_FAILED,
    CONFIG_INCONSISTENT,
    HEARTBEAT,
    NOTIFICATIONS_FAILING,
    PROMETHEUS_RELOAD_FAILED,
    TARGETS_VANISHED,
    TICKET_NOTIFICATIONS_FAILING,
)

PROM_INSTANCE = "prometheus-0:9090"
Labels = Callable[..., dict[str, str]]


def series(name: str, labels: dict[str, str], values: str) -> dict:
    return {"series": f"{name}{matchers(labels)}", "values": values}


def alert(alertname: str, minute: int, expected: list[dict[str, str]]) -> dict:
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


def case(name: str, series: list[dict], checks: list[dict]) -> dict:
    return {"name": name, "interval": "1m", "input_series": series, "promql_expr_test": checks}


def config_tests(settings: MonitoringSettings, labels: Labels) -> dict[str, list[dict]]:
    """A failed reload is a ticket; replicas with different configs are one (HA only)."""
    prom = {"instance": PROM_INSTANCE, "job": settings.prometheus_job}
    am_job = settings.alertmanager_job
    tests: dict[str, list[dict]] = {
        PROMETHEUS_RELOAD_FAILED: [
            case(
                "a reload failing from minute 20 on raises a ticket; one failed reload fixed "
                "a minute later does not",
                [
                    series("prometheus_config_last_reload_successful", prom, "1x20 0x40"),
                    series(
                        "prometheus_config_last_reload_successful",
                        {**prom, "instance": "prometheus-1:9090"},
                        "1x10 0 1x49",
                    ),
                ],
                [
                    alert(PROMETHEUS_RELOAD_FAILED, 19, []),
                    alert(
                        PROMETHEUS_RELOAD_FAILED,
                        45,
                        [
                            labels(
                                PROMETHEUS_RELOAD_FAILED,
                                settings.prometheus_job,
                                instance=PROM_INSTANCE,
                            )
                        ],
                    ),
                ],
            )
        ],
        ALERTMANAGER_RELOAD_FAILED: [
            case(
                "an Alertmanager failing to reload from minute 20 raises a ticket",
                [
                    series(
                        "alertmanager_config_last_reload_successful",
                        {"instance": "alertmanager-0:9093", "job": am_job},
                        "1x20 0x40",
                    ),
                    series(
                        "alertmanager_config_last_reload_successful",
                        {"instance": "alertmanager-1:9093", "job": am_job},
                        "1x60",
                    ),
                ],
                [
                    alert(ALERTMANAGER_RELOAD_FAILED, 19, []),
                    alert(
                        ALERTMANAGER_RELOAD_FAILED,
                        45,
                        [
                            labels(
                                ALERTMANAGER_RELOAD_FAILED,
                                am_job,
                                instance="alertmanager-0:9093",
                            )
                        ],
                    ),
                ],
            )
        ],
    }
    n = settings.alertmanager_replicas
    if n > 1:
        tests[CONFIG_INCONSISTENT] = [
            case(
                "a config applied to one Alertmanager only (minute 20) raises a ticket; a "
                "rolling apply a few minutes apart does not",
                [
                    series(
                        "alertmanager_config_hash",
                        {"instance": f"alertmanager-{i}:9093", "job": am_job},
                        "111x20 222x40" if i == 0 else "111x60",
                    )
                    for i in range(n)
                ],
                [
                    alert(CONFIG_INCONSISTENT, 19, []),
                    alert(
                        CONFIG_INCONSISTENT,
                        50,
                        [labels(CONFIG_INCONSISTENT, am_job)],
                    ),
                ],
            ),
            case(
                "a rolling apply, replicas reloaded 5 minutes apart, is no ticket",
                [
                    series(
                        "alertmanager_config_hash",
                        {"instance": f"alertmanager-{i}:9093", "job": am_job},
                        f"111x{20 + 5 * i} 222x{40 - 5 * i}",
                    )
                    for i in range(n)
                ],
                [alert(CONFIG_INCONSISTENT, m, []) for m in (30, 45, 60)],
            ),
        ]
    return tests


def notification_tests(
    settings: MonitoringSettings, specs: list[JobSpec], labels: Callable[..., dict[str, str]]
) -> dict[str, list[dict]]:
    """A failing page integration pages and stops the heartbeat; one that carries tickets only
    raises a ticket."""
    am_job = settings.alertmanager_job
    page_kinds, ticket_kinds = integrations(settings, specs)

    def failed(metric: str, integration: str, values: str) -> dict:
        instance = "alertmanager-0:9093"
        return series(
            metric, {"instance": instance, "integration": integration, "job": am_job}, values
        )

    requests, notifications = (
        "alertmanager_notification_requests_failed_total",
        "alertmanager_notifications_failed_total",
    )
    page = page_kinds[0]
    tests = {
        NOTIFICATIONS_FAILING: [
            case(
                f"{page} requests failing from minute 20 page; a {page} request that one "
                "retry fixed at minute 20 does not",
                [
                    failed(requests, page, "0x20 1+1x40"),
                    series(
                        requests,
                        {"instance": "alertmanager-1:9093", "integration": page, "job": am_job},
                        "0x20 1x40",
                    ),
                    failed(notifications, page, "0x60"),
                ],
                [
                    alert(NOTIFICATIONS_FAILING, 19, []),
                    alert(
                        NOTIFICATIONS_FAILING,
                        40,
                        [labels(NOTIFICATIONS_FAILING, am_job, integration=page)],
                    ),
                    # Pages are lost: the heartbeat stops, so the dead man's switch pages.
                    alert(HEARTBEAT, 40, []),
                ],
            )
        ]
    }
    if ticket_kinds:
        ticket = ticket_kinds[0]
        tests[TICKET_NOTIFICATIONS_FAILING] = [
            case(
                f"{ticket} (tickets only) failing from minute 20 raises a ticket, no page; "
                f"{page} failing too pages",
                [
                    failed(requests, ticket, "0x20 1+1x40"),
                    failed(notifications, ticket, "0x20 1+1x40"),
                    failed(requests, page, "0x40 1+1x20"),
                ],
                [
                    alert(TICKET_NOTIFICATIONS_FAILING, 19, []),
                    alert(NOTIFICATIONS_FAILING, 35, []),
                    alert(
                        TICKET_NOTIFICATIONS_FAILING,
                        35,
                        [
                            labels(
                                TICKET_NOTIFICATIONS_FAILING,
                                am_job,
                                integration=ticket,
                            )
                        ],
                    ),
                    alert(
                        NOTIFICATIONS_FAILING,
                        55,
                        [labels(NOTIFICATIONS_FAILING, am_job, integration=page)],
                    ),
                ],
            )
        ]
    return tests


def vanished_tests(
    settings: MonitoringSettings, specs: list[JobSpec], labels: Labels
) -> list[dict]:
    """Each group's targets vanishing one kind at a time; a finished job is no case."""
    vanished: list[dict] = []
    for names, training, gpu, group in vanish_groups(specs):
        selector = group[0].selector_labels
        node_exporter = {**selector, "instance": "node-0:9100", "job": NODE_EXPORTER_JOB}
        for gone, still in ((gpu, training), (training, gpu)):
            # The training direction waits past the restart budget (its own page first).
            fired = 45 if gone == gpu else 21 + training_vanished_for(group, 600) // 60 + 4
            running = [
                series("up", {**selector, "instance": "node-0:9400", "job": gone}, "1x20 stale"),
                series("up", {**selector, "instance": "node-0:9401", "job": still}, "1x80"),
            ]
            if group[0] in fabric_specs(group):  # its node_exporters stay
                running.append(series("up", node_exporter, "1x80"))
            vanished.append(
                case(
                    f"{group[0].name}: its `{gone}` targets leave service discovery at minute "
                    f"21 while `{still}` targets run",
                    running,
                    [
                        alert(TARGETS_VANISHED, 20, []),
                        alert(
                            TARGETS_VANISHED,
                            fired,
                            [
                                labels(
                                    TARGETS_VANISHED,
                                    gone,
                                    vanished=gone,
                                    **{k: selector[k] for k in names},
                                )
                            ],
                        ),
                    ],
                )
            )
        vanished.append(
            case(
                f"{group[0].name}: a completed job's `{training}` targets leave while its "
                f"`{gpu}` targets (a DaemonSet) stay: nothing vanished",
                [
                    series(
                        "up", {**selector, "instance": "node-0:9400", "job": training}, "1x20 stale"
                    ),
                    series("up", {**selector, "instance": "node-0:9401", "job": gpu}, "1x60"),
                    series(
                        "job:trainsignals_completed:bool",
                        {"training_job": group[0].name},
                        "0x19 1x40",
                    ),
                    # node_exporter is a DaemonSet too.
                    *(
                        [series("up", node_exporter, "1x60")]
                        if group[0] in fabric_specs(group)
                        else []
                    ),
                ],
                [alert(TARGETS_VANISHED, 45, [])],
            )
        )
        vanished += _progress_paged(group, training, gpu)
        finished = [
            series("up", {**selector, "instance": "node-0:9400", "job": job}, "1x20 stale")
            for job in sorted({training, gpu})
        ]
        vanished.append(
            case(
                f"{group[0].name}: a finished job (every target gone) is not a vanished target",
                finished,
                [alert(TARGETS_VANISHED, 45, [])],
            )
        )
    for names, training, gpu, group in vanish_groups(fabric_specs(specs)):
        selector = group[0].selector_labels
        vanished.append(
            case(
                f"{group[0].name}: its node_exporter targets leave service discovery at minute "
                f"21 while `{gpu}` targets run (the InfiniBand alerts go blind)",
                [
                    series(
                        "up",
                        {**selector, "instance": "node-0:9100", "job": NODE_EXPORTER_JOB},
                        "1x20 stale",
                    ),
                    series("up", {**selector, "instance": "node-0:9400", "job": gpu}, "1x60"),
                    series("up", {**selector, "instance": "node-0:9401", "job": training}, "1x60"),
                ],
                [
                    alert(TARGETS_VANISHED, 20, []),
                    alert(
                        TARGETS_VANISHED,
                        45,
                        [
                            labels(
                                TARGETS_VANISHED,
                                NODE_EXPORTER_JOB,
                                vanished=NODE_EXPORTER_JOB,
                                **{k: selector[k] for k in names},
                            )
                        ],
                    ),
                ],
            )
        )
    return vanished


def _progress_paged(group: list[JobSpec], training: str, gpu: str) -> list[dict]:
    """A job down for an hour (its ranks gone at minute 21, pods Pending) pages its own team
    for no progress from minute 37: that page is the incident, no vanished target beside it."""
    spec = group[0]
    pages = progress_pages(spec)
    if not pages:
        return []
    selector = spec.selector_labels
    page = {
        "alertname": pages[0],
        "alertstate": "firing",
        "severity": "page",
        "training_job": spec.name,
    }
    stays = [series("up", {**selector, "instance": "node-0:9401", "job": gpu}, "1x80")]
    if spec in fabric_specs(group):
        node_exporter = {**selector, "instance": "node-0:9100", "job": NODE_EXPORTER_JOB}
        stays.append(series("up", node_exporter, "1x80"))
    return [
        case(
            f"{spec.name}: its `{training}` targets leave at minute 21 while the job is down "
            f"and {pages[0]} pages from minute 37: one incident, no vanished target",
            [
                series(
                    "up", {**selector, "instance": "node-0:9400", "job": training}, "1x20 stale"
                ),
                *stays,
                series("ALERTS", page, "_x36 1x44"),
            ],
            [alert(TARGETS_VANISHED, m, []) for m in (30, 45, 60, 80)],
        )
    ]
