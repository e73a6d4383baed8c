"""Generated deployment files of every job: `deploy/prometheus/` (plain Prometheus and Slurm)
and, for specs with a `deploy.kubernetes` section, `deploy/kubernetes/` (prometheus-operator)."""

from __future__ import annotations

from trainsignals.generator.deploy.scrape_config import scrape_config_document, targets_dir
from trainsignals.generator.output.files import GENERATED_MARK, header
from trainsignals.generator.output.yaml import dump
from trainsignals.generator.spec.job import JobSpec
from trainsignals.generator.spec.monitoring import DEFAULT_SETTINGS, MonitoringSettings

from trainsignals import __version__


def _scrape_comment(spec: JobSpec) -> str:
    return (
        f"# Merge scrape_configs into prometheus.yml and load alerts/{spec.name}.rules.yaml.\n"
        f"# Targets: file_sd files {targets_dir(spec)}/training*.json, gpu*.json, node*.json\n"
        "# (on Slurm: `trainsignals slurm-targets`, see README).\n"
    )


def job_deploy_files(
    spec: JobSpec,
    source: str,
    generated: dict[str, str],
    settings: MonitoringSettings = DEFAULT_SETTINGS,
    rules: dict | None = None,
) -> dict[str, str]:
    """One job's: its scrape config, and on Kubernetes its objects (and the sharded ones).
    `generated` holds the job's rules and dashboard, which the Kubernetes objects wrap; `rules`
    the document its rules file was written from (None: read back from the file)."""
    from trainsignals.generator.deploy.kubernetes import kubernetes_files
    from trainsignals.generator.deploy.sharding.kubernetes import sharded_kubernetes_files

    top = header(spec, source)
    files = {
        f"deploy/prometheus/{spec.name}.scrape.yaml": dump(
            scrape_config_document(spec), top + _scrape_comment(spec)
        )
    }
    if spec.deploy.kubernetes is not None:
        files |= kubernetes_files(spec, top, generated, rules)
        files |= sharded_kubernetes_files(spec, generated, settings, rules)
    return files


def shared_deploy_files(
    specs: list[tuple[JobSpec, str]],
    generated: dict[str, str],
    settings: MonitoringSettings = DEFAULT_SETTINGS,
) -> dict[str, str]:
    """What the jobs on Kubernetes share: the meta-monitoring and on-call PrometheusRules per
    namespace/release. `generated` holds the on-call rules; `settings` the monitoring
    settings the meta rules on Kubernetes start from."""
    from trainsignals.generator.deploy.kubernetes_meta import monitoring_files
    from trainsignals.generator.deploy.sharding.nodes import sharded_nodes_files

    sources = ", ".join(source for _, source in specs)
    meta_header = (
        f"# {GENERATED_MARK} {__version__} from {sources} and the monitoring settings.\n"
        "# Do not edit: change the specs (deploy.kubernetes) or the monitoring settings "
        "(--monitoring FILE) and run `trainsignals generate`.\n"
    )
    job_specs = [spec for spec, _ in specs]
    files = monitoring_files(job_specs, generated, meta_header, settings)
    return files | sharded_nodes_files(job_specs, generated)  # the global ruler's node record
