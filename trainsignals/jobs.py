"""The job specs as the `trainsignals` subcommands read them (cli/main.py and the tools it loads).

`jobs_option` is the shared `--jobs DIR` option; `load_jobs` loads every spec of that folder for
commands that work on all of them, `find_job` one job by name. Spec errors leave as click
errors naming the file, so every command reports them the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

from trainsignals.generator.loader import SpecError, load_specs, spec_files
from trainsignals.generator.spec.job import JobSpec

F = TypeVar("F", bound=Callable[..., object])


def jobs_option(help: str = "Folder of job specs (*.yaml).") -> Callable[[F], F]:
    """`--jobs DIR` (parameter `jobs_dir`, default `jobs`): the folder of job specs."""
    return click.option(
        "--jobs",
        "jobs_dir",
        type=click.Path(file_okay=False, path_type=Path),
        default="jobs",
        show_default=True,
        help=help,
    )


def load_jobs(jobs_dir: Path) -> list[tuple[JobSpec, str]]:
    """Every spec of `jobs_dir` with its file as the user typed it; exits with the spec errors,
    one per line, when any spec is invalid."""
    paths = spec_files(jobs_dir)
    if not paths:
        raise click.ClickException(f"{jobs_dir}: no *.yaml specs found; add one (see jobs/)")
    try:
        specs = load_specs(paths)
    except SpecError as exc:
        for problem in exc.problems:
            click.echo(problem, err=True)
        raise SystemExit(1) from None
    by_name = {p.stem: p for p in paths}
    return [(s, _source(by_name.get(s.name), paths, s.name)) for s in specs]


def _source(path: Path | None, paths: list[Path], name: str) -> str:
    """The spec's file as the user typed it (`--jobs ../myjobs` gives `../myjobs/x.yaml`):
    error messages name a file they can open; generated headers use `source_name`."""
    if path is None:  # file name differs from the job name
        path = next(p for p in paths if name in p.read_text(encoding="utf-8"))
    return path.as_posix()


def find_job(jobs_dir: Path, job: str) -> JobSpec | None:
    """Job `job`'s spec from `jobs_dir`, or None (no such job, or no such folder)."""
    paths = spec_files(jobs_dir) if jobs_dir.is_dir() else []
    try:
        specs = load_specs(paths) if paths else []
    except SpecError as exc:
        raise click.ClickException("\n".join(exc.problems)) from None
    return next((s for s in specs if s.name == job), None)
