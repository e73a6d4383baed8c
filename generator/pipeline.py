"""From validated specs to the full set of generated files, held in memory.

Nothing here touches the disk: `generate` returns {relative path: content}, so writing can be
all-or-nothing (see writer.py) and `check` can compare without writing.

Each job's typed results are built once (`job_output`), then every artifact kind of `KINDS`
turns them into files (generator/artifacts/kind.py): first each job's files, in worker
processes when there are many specs (output/workers.py), then the files all jobs share.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from trainsignals import __version__
from trainsignals.generator.alerts.rules import AlertRule, alert_rules, render_alert
from trainsignals.generator.artifacts.job_files import DashboardKind, RulesKind, RuleTestsKind
from trainsignals.generator.artifacts.kind import ArtifactKind, JobOutput, Run
from trainsignals.generator.artifacts.registry import Registry, add_files
from trainsignals.generator.dashboards.job import build_dashboard
from trainsignals.generator.deploy.files import (
    KubernetesKind,
    KubernetesMetaKind,
    PrometheusConfigKind,
    ScrapeConfigKind,
    ShardedKind,
    ShardedNodesKind,
)
from trainsignals.generator.docs.metrics import MetricsDocKind
from trainsignals.generator.docs.recovery import RecoveryDocKind
from trainsignals.generator.docs.spec_reference import SpecReferenceKind
from trainsignals.generator.meta.files import MetaKind
from trainsignals.generator.nodes.files import NodesKind
from trainsignals.generator.oncall.files import OncallKind
from trainsignals.generator.output.files import (
    GENERATED_MARK,
    Options,
    dashboard_text,
    header,
    spec_hash,
)
from trainsignals.generator.output.workers import map_in_workers, worker_count
from trainsignals.generator.routing.alertmanager import AlertmanagerKind
from trainsignals.generator.rules.long_horizon import long_suite
from trainsignals.generator.rules.unit_tests import rule_tests
from trainsignals.generator.runbooks.render import RunbooksKind
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.signals.recording import recording_groups
from trainsignals.generator.spec.job import JobSpec
from trainsignals.generator.spec.monitoring import DEFAULT_SETTINGS

__all__ = [
    "GENERATED_MARK",
    "KINDS",
    "JobOutput",
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

# Every kind `trainsignals generate` writes. Register another here or at run time
# (KINDS.register(kind)): the pipeline walks whatever is registered.
KINDS = Registry(
    [
        RulesKind(),
        RuleTestsKind(),
        DashboardKind(),
        ShardedKind(),
        ScrapeConfigKind(),
        KubernetesKind(),
        RunbooksKind(),
        AlertmanagerKind(),
        MetaKind(),
        OncallKind(),
        NodesKind(),
        KubernetesMetaKind(),
        ShardedNodesKind(),
        PrometheusConfigKind(),
        MetricsDocKind(),
        RecoveryDocKind(),
        SpecReferenceKind(),
    ]
)


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


def job_output(spec: JobSpec, source: str, options: Options = Options()) -> JobOutput:
    """One job's typed results: alerts, rules document, promtool tests, dashboard."""
    ctx = RuleContext(spec, options.time_scale, options.min_range_seconds, options.min_for_seconds)
    alerts = alert_rules(ctx)
    digest = spec_hash(spec)
    document = rules_document(ctx, alerts)
    tests = long_tests = dashboard = None
    if options.with_tests and options.time_scale == 1:
        rules_file = f"{spec.name}.rules.yaml"
        tests = rule_tests(ctx, alerts, rules_file, document)
        long_tests = long_suite(ctx, rules_file, document)
    if options.with_dashboards:
        dashboard = build_dashboard(ctx, alerts, digest, __version__, options.monitoring)
    top = header(spec, source, digest)
    return JobOutput(spec, source, digest, top, ctx, alerts, document, tests, long_tests, dashboard)


def generate_job(spec: JobSpec, source: str, options: Options = Options()) -> dict[str, str]:
    """Files of one job: rules, their promtool tests, the dashboard (and the sharded split)."""
    kinds = [kind for kind in KINDS if kind.of_job]
    files, _ = _job_step((spec, source, _run([(spec, source)], options), kinds))
    return files


def generate(specs: list[tuple[JobSpec, str]], options: Options = Options()) -> dict[str, str]:
    """The jobs' own files (generate_job) for these (spec, source path) pairs."""
    return _generate(specs, options, [kind for kind in KINDS if kind.of_job])


def generate_all(
    specs: list[tuple[JobSpec, str]],
    options: Options = Options(),
    kinds: Iterable[ArtifactKind] = KINDS,
) -> dict[str, str]:
    """Every file of every kind (default: the registered ones): the jobs' files, then what
    all jobs share."""
    return _generate(specs, options, list(kinds))


def _run(specs: list[tuple[JobSpec, str]], options: Options) -> Run:
    return Run(specs, options, options.monitoring or DEFAULT_SETTINGS)


def _generate(
    specs: list[tuple[JobSpec, str]], options: Options, kinds: list[ArtifactKind]
) -> dict[str, str]:
    run = _run(specs, options)
    files: dict[str, str] = {}
    parts: list[list[Any]] = [[] for _ in kinds]  # per kind: each job's part
    tasks = [(spec, source, run, kinds) for spec, source in specs]
    workers = worker_count(len(tasks), options.workers)
    for (spec, _), (job_files, job_parts) in zip(
        specs, map_in_workers(_job_step, tasks, workers), strict=True
    ):
        clash = [path for path in job_files if path in files]
        if clash:
            raise ValueError(f"job {spec.name!r} writes {clash[0]}, which another job wrote")
        files |= job_files
        for kind_parts, part in zip(parts, job_parts, strict=True):
            kind_parts.append(part)
    for kind, kind_parts in zip(kinds, parts, strict=True):
        add_files(files, kind.fleet_files(run, kind_parts), kind)
    return dict(sorted(files.items()))


def _job_step(
    task: tuple[JobSpec, str, Run, Sequence[ArtifactKind]],
) -> tuple[dict[str, str], list[Any]]:
    """One job's files of every kind, and each kind's part of the job (plain data: from a
    worker, this comes back pickled)."""
    spec, source, run, kinds = task
    job = job_output(spec, source, run.options)
    files: dict[str, str] = {}
    parts = []
    for kind in kinds:
        add_files(files, kind.job_files(job, run), kind)
        parts.append(kind.job_part(job, run))
    return files, parts
