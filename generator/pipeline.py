"""From validated specs to the full set of generated files, held in memory.

Nothing here touches the disk: `generate` returns {relative path: content}, so writing can be
all-or-nothing (see writer.py) and `check` can compare without writing.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainsignals.generator.alerts.rules import AlertRule, alert_rules, render_alert
from trainsignals.generator.output.files import (
    GENERATED_MARK,
    Options,
    dashboard_text,
    header,
    spec_hash,
)
from trainsignals.generator.output.workers import map_in_workers, worker_count
from trainsignals.generator.output.yaml import dump
from trainsignals.generator.rules.long_horizon import long_suite
from trainsignals.generator.rules.unit_tests import rule_tests
from trainsignals.generator.runbooks.render import JobRunbooks, job_runbooks, render_job_runbooks
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.signals.recording import recording_groups
from trainsignals.generator.spec.job import JobSpec
from trainsignals.generator.spec.monitoring import MonitoringSettings

from trainsignals import __version__

__all__ = [
    "GENERATED_MARK",
    "Options",
    "dashboard_text",
    "generate",
    "generate_all",
    "generate_job",
    "header",
    "job_output",
    "rules_document",
    "spec_hash",
]


def rules_document(ctx: RuleContext, alerts: list[AlertRule]) -> dict:
    rendered = [render_alert(ctx, a) for a in alerts]
    fast, *later = recording_groups(ctx, [rule["expr"] for rule in rendered])
    # The slower groups last: groups[0] and groups[1] stay the fast recording and the alerts.
    return {
        "groups": [
            fast,
            {
                "name": f"trainsignals-{ctx.job}-alerts",
                "rules": rendered,
            },
            *later,
        ]
    }


@dataclass
class JobOutput:
    """One job's generated files, and what later steps build on: the document its rules file
    was written from (the Kubernetes objects wrap it) and its alerts (the runbooks)."""

    files: dict[str, str]
    rules: dict
    ctx: RuleContext
    alerts: list[AlertRule]


def generate_job(spec: JobSpec, source: str, options: Options = Options()) -> dict[str, str]:
    """Files of one job: rules, their promtool tests, and the dashboard."""
    return job_output(spec, source, options).files


def job_output(spec: JobSpec, source: str, options: Options = Options()) -> JobOutput:
    ctx = RuleContext(spec, options.time_scale, options.min_range_seconds)
    alerts = alert_rules(ctx)
    digest = spec_hash(spec)
    top = header(spec, source, digest)
    document = rules_document(ctx, alerts)
    files = {f"alerts/{spec.name}.rules.yaml": dump(document, top)}
    if spec.deploy.shards > 1:  # the sharded topology's rule split and shard configs
        from trainsignals.generator.deploy.sharding import sharded_files

        files |= sharded_files(spec, source, document, ctx, top, options.monitoring)
    if options.with_tests and options.time_scale == 1:
        files[f"alerts/{spec.name}.test.yaml"] = dump(
            rule_tests(ctx, alerts, f"{spec.name}.rules.yaml", document), top
        )
        files[f"alerts/{spec.name}.long.test.yaml"] = dump(
            long_suite(ctx, f"{spec.name}.rules.yaml", document), top
        )
    if options.with_dashboards:
        from trainsignals.generator.dashboards.job import build_dashboard

        dashboard = build_dashboard(ctx, alerts, digest, __version__, options.monitoring)
        files[f"dashboards/{spec.name}.json"] = dashboard_text(dashboard)
    return JobOutput(files, document, ctx, alerts)


def generate(specs: list[tuple[JobSpec, str]], options: Options = Options()) -> dict[str, str]:
    """Every generated file for these (spec, source path) pairs."""
    files: dict[str, str] = {}
    tasks = [(spec, source, options) for spec, source in specs]
    for job_files in map_in_workers(_job_files, tasks, worker_count(len(tasks), options.workers)):
        files |= job_files
    return dict(sorted(files.items()))


def _job_files(task: tuple[JobSpec, str, Options]) -> dict[str, str]:
    return generate_job(*task)


def _job_and_deploy_files(
    task: tuple[JobSpec, str, Options, MonitoringSettings],
) -> tuple[dict[str, str], JobRunbooks]:
    """A job's files and deploy files, and its part of the runbooks. The deploy files wrap its
    rules: built here, from the document the rules file was written from, while it is at hand
    (reading the file back cost ~10 ms a job)."""
    from trainsignals.generator.deploy.files import job_deploy_files

    spec, source, options, settings = task
    job = job_output(spec, source, options)
    files = job.files | job_deploy_files(spec, source, job.files, settings, job.rules)
    return files, job_runbooks(job.ctx, job.alerts, source)


def generate_all(specs: list[tuple[JobSpec, str]], options: Options = Options()) -> dict[str, str]:
    """Per-job files plus what all jobs share: routing, runbooks and the metric table."""
    from trainsignals.generator.deploy.files import shared_deploy_files
    from trainsignals.generator.deploy.prometheus_config import PATH as PROMETHEUS_CONFIG
    from trainsignals.generator.deploy.prometheus_config import file_header as prometheus_header
    from trainsignals.generator.deploy.prometheus_config import prometheus_config
    from trainsignals.generator.docs.metrics import metrics_markdown
    from trainsignals.generator.meta.files import meta_files
    from trainsignals.generator.meta.rules import NAME as META_NAME
    from trainsignals.generator.nodes.files import nodes_files
    from trainsignals.generator.nodes.policy import NAME as NODES_NAME
    from trainsignals.generator.oncall.files import oncall_files
    from trainsignals.generator.oncall.policy import NAME as ONCALL_NAME
    from trainsignals.generator.routing.alertmanager import alertmanager_config
    from trainsignals.generator.spec.monitoring import DEFAULT_SETTINGS

    settings = options.monitoring or DEFAULT_SETTINGS
    files: dict[str, str] = {}
    runbook_jobs = []
    tasks = [(spec, source, options, settings) for spec, source in specs]
    workers = worker_count(len(tasks), options.workers)
    for job_files, runbooks in map_in_workers(_job_and_deploy_files, tasks, workers):
        files |= job_files
        runbook_jobs.append(runbooks)
    job_specs = [spec for spec, _ in specs]
    sources = ", ".join(source for _, source in specs)
    am_header = (
        f"# {GENERATED_MARK} {__version__} from {sources}.\n"
        "# Do not edit: change the specs and run `trainsignals generate`.\n"
    )
    files["alerts/alertmanager.yaml"] = alertmanager_config(
        job_specs, am_header, monitoring=settings
    )
    files |= meta_files(specs, options, settings)  # meta-monitoring (generator/meta/files.py)
    files |= render_job_runbooks(runbook_jobs)
    files["docs/metrics.md"] = metrics_markdown()
    from trainsignals.generator.docs.recovery import recovery_files

    files |= recovery_files()  # docs/recovery.md: what each mode pages (README copies it)
    from trainsignals.generator.docs.spec_reference import reference_files

    files |= reference_files()  # the spec's JSON Schema and docs/spec.md
    files |= oncall_files(specs, options)  # on-call load of all teams (generator/oncall/)
    files |= nodes_files(specs, options, settings)  # lemon nodes across jobs (generator/nodes/)
    # The meta and on-call PrometheusRules of the jobs on Kubernetes (generator/deploy/files.py).
    files |= shared_deploy_files(specs, files, settings)
    # Jobs on Kubernetes are scraped through their PodMonitors (deploy/kubernetes/).
    plain = [spec for spec in job_specs if spec.deploy.kubernetes is None]
    if plain:
        shared = [f"{name}.rules.yaml" for name in (META_NAME, ONCALL_NAME, NODES_NAME)]
        rule_files = [f"{spec.name}.rules.yaml" for spec in plain] + shared
        files[PROMETHEUS_CONFIG] = dump(
            prometheus_config(plain, rule_files, settings), prometheus_header(sources)
        )
    return dict(sorted(files.items()))
