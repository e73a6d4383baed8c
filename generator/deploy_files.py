"""Generated deployment files of every job: `deploy/prometheus/` (plain Prometheus and Slurm)
and, for specs with a `deploy.kubernetes` section, `deploy/kubernetes/` (prometheus-operator)."""

from __future__ import annotations

from .pipeline import header
from .scrape_config import scrape_config_document, targets_dir
from .spec import JobSpec
from .yaml_out import dump


def _scrape_comment(spec: JobSpec) -> str:
    return (
        f"# Merge scrape_configs into prometheus.yml and load alerts/{spec.name}.rules.yaml.\n"
        f"# Targets: file_sd files {targets_dir(spec)}/training*.json, gpu*.json, node*.json\n"
        "# (on Slurm: `trainsignals slurm-targets`, see README).\n"
    )


def deploy_files(specs: list[tuple[JobSpec, str]], generated: dict[str, str]) -> dict[str, str]:
    """`generated` holds the jobs' rules and dashboards, which the Kubernetes objects wrap."""
    from .kubernetes import kubernetes_files

    files: dict[str, str] = {}
    for spec, source in specs:
        top = header(spec, source)
        files[f"deploy/prometheus/{spec.name}.scrape.yaml"] = dump(
            scrape_config_document(spec), top + _scrape_comment(spec)
        )
        if spec.deploy.kubernetes is not None:
            files |= kubernetes_files(spec, top, generated)
    return files
