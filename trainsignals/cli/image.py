"""`trainsignals image`: the image references the GPU exporter DaemonSets run.

The Containerfile builds that image; `make image` tags the build with what this prints, so the
name and tag live in one place, the specs' `deploy.kubernetes.gpu_exporter_image` (default
generator/spec/deploy.py's GPU_EXPORTER_IMAGE, tagged with the package version).
"""

from __future__ import annotations

from pathlib import Path

import click

from trainsignals.generator.deploy.daemonset import daemonset_images
from trainsignals.generator.loader import SpecError, load_specs, spec_files
from trainsignals.jobs import jobs_option


@click.command("image")
@jobs_option()
def image_command(jobs_dir: Path) -> None:
    """Print the GPU exporter image of every spec's DaemonSet, one per line."""
    if not jobs_dir.is_dir():
        raise click.ClickException(f"{jobs_dir}: no such folder of job specs")
    try:
        specs = load_specs(spec_files(jobs_dir))
    except SpecError as exc:
        for problem in exc.problems:
            click.echo(problem, err=True)
        raise SystemExit(1) from None
    for image in daemonset_images(specs):
        click.echo(image)
