"""ScrapeTargetsVanished: a running job's targets gone from service discovery (meta/rules.py).

`up` has no series at all for a target that left discovery, so no `up == 0` alert fires: the
rule compares the job's scrape jobs with each other. One rule per group of specs sharing their
selector label names and scrape job names (one alert name per `job` label, the lint's rule),
and for multi-node specs one more for their node_exporters, which the InfiniBand alerts read.
"""

from __future__ import annotations

from trainsignals.generator.alerts.catalog import BY_NAME
from trainsignals.generator.alerts.definitions.fabric import GROUP as FABRIC_ALERTS
from trainsignals.generator.alerts.model import PROGRESS_INCIDENT, incident_alerts
from trainsignals.generator.meta.rule import MetaRule
from trainsignals.generator.meta.rule import escape as _escape
from trainsignals.generator.signals.fabric import NODE_EXPORTER_JOB
from trainsignals.generator.signals.promql import matchers, regex
from trainsignals.generator.spec.job import JobSpec
from trainsignals.generator.spec.monitoring import MonitoringSettings
from trainsignals.generator.spec.pipeline_alerts import (
    TARGETS_VANISHED,
)


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


def vanished_rules(
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
            expr = f"count by ({by}) (up{present}) unless on ({by}) count by ({by}) (up{missing})"
            wait = for_seconds
            if gone == training:
                expr += f" unless on ({by}) ({completed_jobs(group, by, still)})"
                if paged := progress_paged_jobs(group, by, still):
                    expr += f" unless on ({by}) ({paged})"
                wait = training_vanished_for(group, for_seconds)
            rules.append(
                MetaRule(
                    alert=TARGETS_VANISHED,
                    expr=expr,
                    for_seconds=wait,
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


def completed_jobs(group: list[JobSpec], by: str, still: str) -> str:
    """The group's jobs that finished (phase `done`, job:trainsignals_completed:bool in their
    own rule files), by the selector labels: their ranks leave service discovery while a GPU
    exporter DaemonSet outlives them, and that is no vanished target."""
    return " or ".join(
        f"count by ({by}) (up{matchers({**spec.selector_labels, 'job': still})}) and on () "
        f"job:trainsignals_completed:bool{matchers({'training_job': spec.name})} == 1"
        for spec in group
    )


def training_vanished_for(group: list[JobSpec], for_seconds: int) -> int:
    """The `for` of the training direction: past the group's longest restart budget and 5
    minutes more, so a job whose ranks all went away (a crash, pods Pending) has paged as its
    own incident first (TrainingNoProgress, TrainingTargetsDown), which then mutes it."""
    return max(for_seconds, max(s.recovery.restart_budget for s in group) + 300)


def progress_pages(spec: JobSpec) -> list[str]:
    """The spec's alerts of the no-progress incident that page in its recovery mode."""
    mode = spec.recovery.mode
    return [
        n for n in incident_alerts(PROGRESS_INCIDENT) if BY_NAME[n].severity_for(mode) == "page"
    ]


def progress_paged_jobs(group: list[JobSpec], by: str, still: str) -> str:
    """The group's jobs whose own no-progress page fires (their rule files' ALERTS): ranks
    that left service discovery while the job is down are that incident, which already paged
    the job's team; a second page to the monitoring team is the same incident again."""
    return " or ".join(
        f"count by ({by}) (up{matchers({**spec.selector_labels, 'job': still})}) and on () "
        + "count(ALERTS"
        + matchers(
            {
                "alertname": regex("|".join(progress_pages(spec))),
                "alertstate": "firing",
                "severity": "page",
                "training_job": spec.name,
            }
        )
        + ")"
        for spec in group
        if progress_pages(spec)
    )


def fabric_alert_names() -> list[str]:
    """The InfiniBand alerts, from their definitions: a name typed here went stale once
    (IbPortDown, IbPortFlapping, IbPortErrors never existed)."""
    return [definition.name for definition in FABRIC_ALERTS.definitions]


def fabric_specs(specs: list[JobSpec]) -> list[JobSpec]:
    """Multi-node specs: their InfiniBand alerts read node_exporter (signals/fabric.py)."""
    return [spec for spec in specs if spec.shape.nodes > 1]


def node_exporter_rules(
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
                alert=TARGETS_VANISHED,
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
                    f"fabric alerts ({', '.join(fabric_alert_names())}) read "
                    "node_exporter and cannot fire."
                ),
                dashboard_url=f"{settings.prometheus_url}/service-discovery",
                extra_labels={"vanished": NODE_EXPORTER_JOB},
            )
        )
    return rules
