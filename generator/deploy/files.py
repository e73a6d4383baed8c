"""The deployment artifact kinds: `deploy/prometheus/` (plain Prometheus and Slurm),
`deploy/kubernetes/` (prometheus-operator, for specs with a `deploy.kubernetes` section) and
`deploy/sharded/` (specs with `deploy.shards` > 1).

They wrap what other builders produce, typed: a job's rules document and dashboard from its
JobOutput, the on-call and node rules from those packages' functions, never their files' text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainsignals import __version__
from trainsignals.generator.artifacts.kind import ArtifactKind, JobOutput, Run
from trainsignals.generator.deploy.kubernetes import kubernetes_files
from trainsignals.generator.deploy.kubernetes_meta import monitoring_files
from trainsignals.generator.deploy.prometheus_config import PATH as PROMETHEUS_CONFIG
from trainsignals.generator.deploy.prometheus_config import file_header, prometheus_config
from trainsignals.generator.deploy.scrape_config import scrape_config_document, targets_dir
from trainsignals.generator.deploy.sharding import (
    sharded_files,
    sharded_kubernetes_files,
    sharded_nodes_files,
)
from trainsignals.generator.meta.rules import NAME as META_NAME
from trainsignals.generator.nodes.files import nodes_rules
from trainsignals.generator.nodes.policy import NAME as NODES_NAME
from trainsignals.generator.oncall.files import oncall_document
from trainsignals.generator.oncall.policy import NAME as ONCALL_NAME
from trainsignals.generator.output.files import GENERATED_MARK
from trainsignals.generator.output.yaml import dump


class ScrapeConfigKind(ArtifactKind):
    """deploy/prometheus/<job>.scrape.yaml: the job's scrape configs, to merge by hand."""

    name = "scrape-config"

    def job_files(self, job: JobOutput, run: Run) -> dict[str, str]:
        spec = job.spec
        comment = (
            f"# Merge scrape_configs into prometheus.yml and load alerts/{spec.name}.rules.yaml.\n"
            f"# Targets: file_sd files {targets_dir(spec)}/training*.json, gpu*.json, node*.json\n"
            "# (on Slurm: `trainsignals slurm-targets`, see README).\n"
        )
        document = scrape_config_document(spec)
        return {f"deploy/prometheus/{spec.name}.scrape.yaml": dump(document, job.header + comment)}


class ShardedKind(ArtifactKind):
    """deploy/sharded/<job>/: the sharded topology's rule split and shard configs."""

    name = "sharded"
    of_job = True  # the sharded stacks of the tests load them beside the job's rules

    def job_files(self, job: JobOutput, run: Run) -> dict[str, str]:
        if job.spec.deploy.shards == 1:
            return {}
        monitoring = run.options.monitoring
        return sharded_files(job.spec, job.source, job.rules, job.ctx, job.header, monitoring)


class KubernetesKind(ArtifactKind):
    """deploy/kubernetes/<job>.yaml (and <job>.sharded.yaml): the job's operator objects."""

    name = "kubernetes"

    def job_files(self, job: JobOutput, run: Run) -> dict[str, str]:
        spec = job.spec
        if spec.deploy.kubernetes is None:
            return {}
        dashboard = job.dashboard_json
        files = kubernetes_files(spec, job.header, job.rules, dashboard)
        return files | sharded_kubernetes_files(
            spec, job.header, job.rules, dashboard, run.settings
        )


class KubernetesMetaKind(ArtifactKind):
    """deploy/kubernetes/meta.yaml: the meta, on-call and node rules of the jobs on
    Kubernetes, per namespace and release (deploy/kubernetes_meta.py)."""

    name = "kubernetes-meta"

    def fleet_files(self, run: Run, parts: Sequence[Any]) -> dict[str, str]:
        header = (
            f"# {GENERATED_MARK} {__version__} from {run.sources} and the monitoring settings.\n"
            "# Do not edit: change the specs (deploy.kubernetes) or the monitoring settings "
            "(--monitoring FILE) and run `trainsignals generate`.\n"
        )
        specs = list(run.specs)
        shared = {
            ONCALL_NAME: oncall_document(specs, run.options),
            NODES_NAME: nodes_rules(specs, run.options, run.settings)[1],
        }
        return monitoring_files(run.job_specs, header, run.settings, shared)


class ShardedNodesKind(ArtifactKind):
    """deploy/sharded/nodes.rules.yaml: the lemon-node record for the global ruler."""

    name = "sharded-nodes"

    def fleet_files(self, run: Run, parts: Sequence[Any]) -> dict[str, str]:
        if all(spec.deploy.shards == 1 for spec in run.job_specs):
            return {}
        header, document = nodes_rules(list(run.specs), run.options, run.settings)
        return sharded_nodes_files(run.job_specs, header, document)


class PrometheusConfigKind(ArtifactKind):
    """deploy/prometheus/prometheus.yml for the jobs without deploy.kubernetes (those on
    Kubernetes are scraped through their PodMonitors)."""

    name = "prometheus-config"

    def fleet_files(self, run: Run, parts: Sequence[Any]) -> dict[str, str]:
        plain = [spec for spec in run.job_specs if spec.deploy.kubernetes is None]
        if not plain:
            return {}
        shared = [f"{name}.rules.yaml" for name in (META_NAME, ONCALL_NAME, NODES_NAME)]
        rule_files = [f"{spec.name}.rules.yaml" for spec in plain] + shared
        config = prometheus_config(plain, rule_files, run.settings)
        return {PROMETHEUS_CONFIG: dump(config, file_header(run.sources))}
