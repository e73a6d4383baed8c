"""Click options shared by the `trainsignals` subcommands (cli.py and the modules it loads)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

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
