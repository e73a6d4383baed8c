"""Click options shared by the `trainsignals` subcommands (cli.py and the modules it loads)."""

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


def _load(jobs_dir: Path) -> list:
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


def _find_spec(jobs_dir: Path, job: str) -> JobSpec | None:
    paths = spec_files(jobs_dir) if jobs_dir.is_dir() else []
    try:
        specs = load_specs(paths) if paths else []
    except SpecError as exc:
        raise click.ClickException("\n".join(exc.problems)) from None
    return next((s for s in specs if s.name == job), None)
