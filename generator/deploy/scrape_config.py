"""Plain Prometheus: one job's scrape config (file_sd), `deploy/prometheus/<job>.scrape.yaml`.

Targets come from file_sd files in `<deploy.file_sd_dir>/<job>/`: `training*.json` (one
address per rank), `gpu*.json` (one GPU exporter per node) and `node*.json` (node_exporter,
for the InfiniBand and network series), written by
`trainsignals slurm-targets` on Slurm or by anything else that knows where the job runs.
Each scrape job attaches what the rules select on: the Prometheus `job` label of the spec's
`scrape_jobs`, the spec's selector labels, and `node` (from the target group, else the host of
the address). `honor_labels: true` keeps the labels the exporters set themselves.

The end-to-end stack (trainsignals/stacks/stack.py) builds its Prometheus config from the same
function, pointed at the simulator's target folder.
"""

from __future__ import annotations

from trainsignals.generator.signals.fabric import NODE_EXPORTER_JOB
from trainsignals.generator.spec.job import JobSpec

KINDS = ("training", "gpu", "node")  # node: node_exporter (InfiniBand, network; fabric.py)


def targets_dir(spec: JobSpec) -> str:
    """Where the job's file_sd files live on the Prometheus host."""
    return f"{spec.deploy.file_sd_dir.rstrip('/')}/{spec.name}"


def scrape_job_name(spec: JobSpec, kind: str) -> str:
    # Unique per spec, so several jobs fit one prometheus.yml even when they share the `job`
    # label (scrape_jobs defaults): that label is set by relabeling instead.
    return f"trainsignals-{spec.name}-{kind}"


def _relabel(spec: JobSpec, kind: str) -> list[dict]:
    job_label = {"training": spec.scrape_jobs.training, "gpu": spec.scrape_jobs.gpu}.get(
        kind, NODE_EXPORTER_JOB
    )
    rules: list[dict] = [{"target_label": "job", "replacement": job_label}]
    rules += [
        {"target_label": label, "replacement": value}
        for label, value in spec.selector_labels.items()
    ]
    # A target group without `node` (hand-written file_sd): use the address's host.
    rules.append(
        {
            "source_labels": ["node", "__address__"],
            "regex": ";(.+):[0-9]+",
            "target_label": "node",
            "replacement": "$1",
        }
    )
    return rules


def scrape_configs(
    spec: JobSpec, directory: str | None = None, refresh_interval: str = "30s"
) -> list[dict]:
    """The job's scrape configs (training ranks, GPU exporters, node_exporters) reading
    file_sd files under `directory` (default: `targets_dir(spec)`)."""
    folder = (directory or targets_dir(spec)).rstrip("/")
    return [
        {
            "job_name": scrape_job_name(spec, kind),
            "honor_labels": True,
            "file_sd_configs": [
                {"files": [f"{folder}/{kind}*.json"], "refresh_interval": refresh_interval}
            ],
            "relabel_configs": _relabel(spec, kind),
        }
        for kind in KINDS
    ]


def scrape_config_document(spec: JobSpec) -> dict:
    """A config Prometheus (and `promtool check config`) loads as it is; merge its
    `scrape_configs` into your prometheus.yml (Prometheus 2.42 has no scrape_config_files)."""
    return {"scrape_configs": scrape_configs(spec)}
