"""`trainsignals`: generate, validate, check and explain monitoring from job specs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from trainsignals import __version__
from trainsignals.generator.alerts.catalog import BY_NAME
from trainsignals.generator.alerts.rules import alert_rules, severity
from trainsignals.generator.loader import SpecError
from trainsignals.generator.pipeline import Options, generate_all
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.spec.durations import format_duration
from trainsignals.generator.writer import drift, write_tree
from trainsignals.jobs import jobs_option, load_jobs

out_option = click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    show_default=True,
    help="Root the generated alerts/, dashboards/, runbooks/ go under.",
)


monitoring_option = click.option(
    "--monitoring",
    "monitoring_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Monitoring settings YAML: the team that owns the pipeline, its receivers, the "
    "heartbeat URL (README 'Meta-monitoring'). Default: built-in example settings.",
)


workers_option = click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    help="Processes that generate the jobs' files. Default: one per core, one per 8 specs at "
    "most (a few specs run in this process).",
)


def _monitoring(path: Path | None):  # -> MonitoringSettings | None
    if path is None:
        return None
    from trainsignals.generator.spec.monitoring import load_monitoring

    try:
        return load_monitoring(path)
    except SpecError as exc:
        for problem in exc.problems:
            click.echo(problem, err=True)
        raise SystemExit(1) from None


def _routed(specs: list, settings) -> None:  # settings: MonitoringSettings | None
    """Refuse alerts that would reach no one (generator/routing/check.py); warn about
    placeholders (example hosts, the built-in example monitoring settings) and a monitoring
    team whose only integration is one it watches, and goodput objectives that expected
    failures put out of reach."""
    from trainsignals.generator.routing.check import delivery_warnings, routing_problems
    from trainsignals.generator.signals.feasibility import goodput_warnings
    from trainsignals.generator.spec.monitoring import DEFAULT_SETTINGS
    from trainsignals.generator.spec.placeholders import placeholder_warnings

    problems = routing_problems(specs, settings or DEFAULT_SETTINGS)
    for problem in problems:
        click.echo(problem, err=True)
    if problems:
        raise SystemExit(1)
    warnings = placeholder_warnings(specs, settings)
    warnings += delivery_warnings(specs, settings or DEFAULT_SETTINGS)
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    for spec, source in specs:  # goodput objectives failures alone put out of reach
        for warning in goodput_warnings(spec):
            click.echo(f"warning: {source}: {warning}", err=True)


def _headed(specs: list) -> list:
    """(spec, header name) pairs for generation: headers are the same however --jobs was typed."""
    return [(spec, source_name(Path(source))) for spec, source in specs]


def source_name(path: Path) -> str:
    """`<jobs folder>/<file>` as generated headers name a spec: the same however the folder
    was typed (`../myjobs`, `/tmp/x/myjobs`), so `check` agrees with `generate`."""
    # abspath, not resolve: `..` is folded but a symlinked folder keeps the name it was given.
    absolute = Path(os.path.abspath(path))
    return f"{absolute.parent.name}/{absolute.name}"


@click.group()
@click.version_option(__version__, prog_name="trainsignals")
def main() -> None:
    """Monitoring-as-code for ML training jobs: one spec per job, reviewed artifacts."""


@main.command()
@jobs_option()
@out_option
@monitoring_option
@click.option(
    "--time-scale",
    type=float,
    default=1.0,
    show_default=True,
    help="Divide every window and `for` by this (end-to-end tests only).",
)
@click.option(
    "--min-range",
    type=int,
    default=60,
    show_default=True,
    help="Smallest range window in seconds (4 x scrape interval).",
)
@workers_option
def generate(
    jobs_dir: Path,
    out_dir: Path,
    monitoring_file: Path | None,
    time_scale: float,
    min_range: int,
    workers: int | None,
) -> None:
    """Write dashboards, rules, rule tests, routing and runbooks for every spec."""
    specs = load_jobs(jobs_dir)
    options = Options(
        time_scale=time_scale,
        min_range_seconds=min_range,
        monitoring=_monitoring(monitoring_file),
        workers=workers,
    )
    _routed(specs, options.monitoring)
    files = generate_all(_headed(specs), options)
    changed = write_tree(out_dir, files)
    for path in changed:
        click.echo(f"wrote {path}")
    click.echo(f"{len(specs)} job(s), {len(files)} file(s), {len(changed)} changed")


@main.command()
@jobs_option()
@monitoring_option
def validate(jobs_dir: Path, monitoring_file: Path | None) -> None:
    """Check the specs only; one line per problem, naming file, field and the fix."""
    specs = load_jobs(jobs_dir)
    _routed(specs, _monitoring(monitoring_file))
    click.echo(f"{len(specs)} spec(s) valid: {', '.join(s.name for s, _ in specs)}")


@main.command()
@jobs_option()
@out_option
@monitoring_option
@workers_option
def check(jobs_dir: Path, out_dir: Path, monitoring_file: Path | None, workers: int | None) -> None:
    """Fail when committed generated files differ from what the specs generate."""
    specs, settings = load_jobs(jobs_dir), _monitoring(monitoring_file)
    _routed(specs, settings)
    files = generate_all(_headed(specs), Options(monitoring=settings, workers=workers))
    result = drift(out_dir, files)
    if result:
        for line in result.lines():
            click.echo(line, err=True)
        click.echo(
            "generated files drifted from the specs: run `trainsignals generate` and commit",
            err=True,
        )
        sys.exit(1)
    click.echo(f"{len(files)} generated file(s) match the specs")


@main.command()
@click.argument("job")
@jobs_option()
def explain(job: str, jobs_dir: Path) -> None:
    """A reviewer's table of JOB's alerts: severity, threshold, window, for, runbook."""
    specs = {s.name: s for s, _ in load_jobs(jobs_dir)}
    if job not in specs:
        raise click.ClickException(f"no job {job!r}; known: {', '.join(sorted(specs))}")
    ctx = RuleContext(specs[job])
    rows = [("alert", "severity", "threshold", "window", "for", "runbook")]
    alerts = alert_rules(ctx)
    for alert in alerts:
        rows.append(
            (
                alert.name,
                severity(ctx, alert.name),
                alert.threshold,
                alert.window,
                format_duration(alert.for_seconds) if alert.for_seconds else "-",
                f"{ctx.spec.links.runbook_base_url}/{alert.name}.md",
            )
        )
    disabled = sorted(set(BY_NAME) - {a.name for a in alerts})
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for i, row in enumerate(rows):
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        if i == 0:
            click.echo("  ".join("-" * w for w in widths))
    if disabled:
        click.echo(
            f"\nnot generated: {', '.join(disabled)} "
            "(severity off, or the objective it needs is unset)"
        )


def _register_optional_commands() -> None:
    from trainsignals.cli.image import image_command
    from trainsignals.cli.slurm import slurm_targets
    from trainsignals.ops.goodput import goodput_command
    from trainsignals.ops.lint import lint_command
    from trainsignals.ops.postmortem import postmortem_command
    from trainsignals.ops.readiness import readiness_command
    from trainsignals.ops.review import diff_command
    from trainsignals.simulator.cli import simulate

    main.add_command(simulate)
    main.add_command(diff_command)
    main.add_command(lint_command)
    main.add_command(postmortem_command)
    main.add_command(readiness_command)
    main.add_command(slurm_targets)
    main.add_command(goodput_command)
    main.add_command(image_command)


_register_optional_commands()
