"""Slurm: write a job's file_sd targets from its node list, remove them when it ends.

`trainsignals slurm-targets --spec jobs/<job>.yaml` reads SLURM_JOB_NODELIST (hostlist syntax,
e.g. `gpu[001-004,010],login1`) and SLURM_JOB_ID, and writes
`<deploy.file_sd_dir>/<job>/training-<id>.json` (ranks at training_base_port + local rank on
every node), `gpu-<id>.json` (the GPU exporter of every node) and `node-<id>.json` (node_exporter
of every node, port 9100 or --node-exporter-port), the files the generated scrape config
(deploy/prometheus/<job>.scrape.yaml) reads, one per kind it scrapes (scrape_config.KINDS).
Without `node-<id>.json` a multi-node job's fabric alerts were blind and the meta rule
ScrapeTargetsVanished{vanished="node"} paged after 10 minutes. `--remove` deletes them (epilog).
"""

from __future__ import annotations

import re
from pathlib import Path

import click

from trainsignals.generator.deploy.scrape_config import KINDS, targets_dir
from trainsignals.generator.loader import SpecError, load_specs
from trainsignals.generator.spec.job import JobSpec
from trainsignals.simulator.targets import write_atomically

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
MAX_HOSTS = 100_000  # a typo such as gpu[1-99999999] must not exhaust memory
NODE_EXPORTER_PORT = 9100  # node_exporter's default listen port


class HostlistError(ValueError):
    pass


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets."""
    parts, depth, current = [], 0, []
    for char in text:
        if char == "[":
            depth += 1
            if depth > 1:
                raise HostlistError(f"nested '[' in {text!r}")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"unbalanced ']' in {text!r}")
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth:
        raise HostlistError(f"unclosed '[' in {text!r}")
    parts.append("".join(current))
    return parts


def _expand_range(spec: str, whole: str) -> list[str]:
    values: list[str] = []
    for item in spec.split(","):
        match = _RANGE.match(item.strip())
        if not match:
            raise HostlistError(f"bad range {item!r} in {whole!r}; write e.g. 001-004,010")
        low, high = match.group(1), match.group(2) or match.group(1)
        if int(high) < int(low):
            raise HostlistError(f"range {item!r} in {whole!r} runs backwards")
        if int(high) - int(low) + len(values) >= MAX_HOSTS:
            raise HostlistError(f"{whole!r} names more than {MAX_HOSTS} hosts")
        width = len(low)  # zero padding as written: 001-010 -> 001 .. 010
        values.extend(str(n).zfill(width) for n in range(int(low), int(high) + 1))
    return values


def expand_hostlist(text: str) -> list[str]:
    """Host names of a Slurm hostlist expression, in order, duplicates removed.

    Handles prefixes, zero-padded ranges, lists inside brackets, several bracket groups
    (`rack[1-2]-gpu[01-02]`) and comma-separated items; raises HostlistError otherwise.
    """
    hosts: list[str] = []
    for item in _split_top(text.strip()):
        item = item.strip()
        if not item:
            continue
        expanded = [""]
        for piece in re.split(r"(\[[^\]]*\])", item):
            if piece.startswith("["):
                choices = _expand_range(piece[1:-1], text)
                expanded = [head + choice for head in expanded for choice in choices]
                if len(expanded) > MAX_HOSTS:
                    raise HostlistError(f"{text!r} names more than {MAX_HOSTS} hosts")
            else:
                if "]" in piece or "[" in piece:
                    raise HostlistError(f"unbalanced brackets in {text!r}")
                expanded = [head + piece for head in expanded]
        hosts.extend(expanded)
    if not hosts:
        raise HostlistError("empty node list")
    return list(dict.fromkeys(hosts))


def target_groups(
    spec: JobSpec,
    hosts: list[str],
    ranks_per_node: int,
    node_exporter_port: int = NODE_EXPORTER_PORT,
) -> dict[str, list[dict]]:
    """{kind: file_sd groups} for every kind the scrape config reads: one group per node
    carrying `node` and the selector labels."""
    deploy = spec.deploy
    ports = {
        "training": [deploy.training_base_port + r for r in range(ranks_per_node)],
        "gpu": [deploy.gpu_exporter_port],
        "node": [node_exporter_port],
    }
    return {
        kind: [
            {
                "targets": [f"{host}:{port}" for port in ports[kind]],
                "labels": {**spec.selector_labels, "node": host},
            }
            for host in hosts
        ]
        for kind in KINDS
    }


def target_paths(directory: Path, slurm_job_id: str) -> dict[str, Path]:
    return {kind: directory / f"{kind}-{slurm_job_id}.json" for kind in KINDS}


@click.command("slurm-targets")
@click.option(
    "--spec",
    "spec_path",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    required=True,
    help="The job's spec (jobs/<job>.yaml).",
)
@click.option(
    "--nodelist",
    envvar="SLURM_JOB_NODELIST",
    required=True,
    help="Hostlist of the allocation [env SLURM_JOB_NODELIST].",
)
@click.option("--slurm-job-id", envvar="SLURM_JOB_ID", required=True, help="[env SLURM_JOB_ID]")
@click.option(
    "--ranks-per-node",
    type=click.IntRange(min=1, max=64),
    default=None,
    help="Training processes per node (default: the spec's shape.gpus_per_node).",
)
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder of the job's file_sd files (default: <deploy.file_sd_dir>/<job>).",
)
@click.option(
    "--node-exporter-port",
    type=click.IntRange(min=1, max=65535),
    default=NODE_EXPORTER_PORT,
    show_default=True,
    help="node_exporter's port on every node (the InfiniBand alerts read it).",
)
@click.option("--remove", is_flag=True, help="Delete this Slurm job's files (epilog).")
def slurm_targets(
    spec_path: Path,
    nodelist: str,
    slurm_job_id: str,
    ranks_per_node: int | None,
    directory: Path | None,
    node_exporter_port: int,
    remove: bool,
) -> None:
    """Write (or --remove) a Slurm job's Prometheus file_sd targets."""
    try:
        (spec,) = load_specs([spec_path])
    except SpecError as exc:
        raise click.ClickException("\n".join(exc.problems)) from None
    if not re.fullmatch(r"[0-9A-Za-z_.+-]+", slurm_job_id):
        raise click.BadParameter(f"{slurm_job_id!r} is not a job id", param_hint="--slurm-job-id")
    folder = directory or Path(targets_dir(spec))
    paths = target_paths(folder, slurm_job_id)
    if remove:
        for path in paths.values():
            path.unlink(missing_ok=True)
            click.echo(f"removed {path}")
        return
    try:
        hosts = expand_hostlist(nodelist)
    except HostlistError as exc:
        raise click.BadParameter(str(exc), param_hint="--nodelist / SLURM_JOB_NODELIST") from None
    groups = target_groups(
        spec, hosts, ranks_per_node or spec.shape.gpus_per_node, node_exporter_port
    )
    for kind, path in paths.items():
        write_atomically(path, groups[kind])
        click.echo(f"wrote {path} ({len(hosts)} node(s))")
