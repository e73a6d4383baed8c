"""The optional `deploy:` section of a spec: where the job's targets are found.

Everything has a default, so a spec without `deploy:` still generates a plain Prometheus scrape
config (generator/scrape_config.py). Kubernetes objects (generator/kubernetes.py) are generated
only for specs with a `deploy.kubernetes` section.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_serializer

# Ports of the two exporters (exporters/training: 9850 + LOCAL_RANK; exporters/gpu: 9842).
TRAINING_BASE_PORT = 9850
GPU_EXPORTER_PORT = 9842
FILE_SD_DIR = "/etc/prometheus/file_sd/trainsignals"
# Label on the nodes a job runs on; its value is the job name (see generator/kubernetes.py).
NODE_LABEL = "trainsignals.io/job"
GPU_EXPORTER_IMAGE = "ghcr.io/example/trainsignals:0.1.0"

Port = Annotated[int, Field(ge=1, le=65535)]
K8S_LABEL_KEY = (
    r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
K8S_LABEL_VALUE = r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$"
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Kubernetes(_Strict):
    """prometheus-operator objects (kube-prometheus-stack) for the job: deploy/kubernetes/."""

    # Namespace of the generated objects (and of the Secrets the receivers reference).
    namespace: Annotated[str, Field(pattern=DNS_LABEL)] = "monitoring"
    # Namespace of the training pods (default: `namespace`).
    training_namespace: Annotated[str, Field(pattern=DNS_LABEL)] | None = None
    # kube-prometheus-stack's Prometheus and Alertmanager select objects with release=<name>.
    release: Annotated[str, Field(pattern=K8S_LABEL_VALUE)] = "kube-prometheus-stack"
    # Labels of the job's training pods (default: trainsignals.io/job=<spec name>).
    pod_labels: dict[str, str] = Field(default_factory=dict)
    # Training processes per pod, each on training_base_port + LOCAL_RANK, declared as
    # container ports (default: shape.gpus_per_node, one torchrun pod per node).
    ranks_per_pod: Annotated[int, Field(ge=1, le=64)] | None = None
    # Node label whose value is the job name, on the nodes the job runs on: the GPU exporter
    # DaemonSet runs there, and (dcgm) only exporters on those nodes are the job's.
    node_label: Annotated[str, Field(pattern=K8S_LABEL_KEY)] = NODE_LABEL
    gpu_exporter_image: str = GPU_EXPORTER_IMAGE
    # gpu_metrics: dcgm: labels of the cluster's dcgm-exporter pods and their namespace.
    dcgm_exporter_labels: dict[str, str] = Field(
        default_factory=lambda: {"app.kubernetes.io/name": "dcgm-exporter"}
    )
    dcgm_exporter_namespace: Annotated[str, Field(pattern=DNS_LABEL)] = "gpu-operator"

    @field_validator("pod_labels", "dcgm_exporter_labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        for key, label_value in value.items():
            if not re.match(K8S_LABEL_KEY, key) or not re.match(K8S_LABEL_VALUE, label_value):
                raise ValueError(
                    f"{key}={label_value!r} is not a Kubernetes label; keys are [prefix/]name "
                    "and values at most 63 of [A-Za-z0-9-_.]"
                )
        return value


class Deploy(_Strict):
    """How Prometheus finds the job's targets."""

    training_base_port: Port = TRAINING_BASE_PORT  # rank with LOCAL_RANK r listens on base + r
    gpu_exporter_port: Port = GPU_EXPORTER_PORT
    # Plain Prometheus / Slurm: folder of file_sd target files (`trainsignals slurm-targets`).
    file_sd_dir: Annotated[str, Field(pattern=r"^/")] = FILE_SD_DIR
    kubernetes: Kubernetes | None = None
    # >1: sharded topology (generator/sharding.py): that many Prometheus shards scrape a
    # hashmod partition of the nodes and remote-write per-node aggregates to one global store.
    shards: Annotated[int, Field(ge=1, le=256)] = 1
    # Sharded only: remote-write URL of the global store the ruler (vmalert) queries.
    global_write_url: Annotated[str, Field(pattern=r"^https?://")] = (
        "http://victoria-metrics:8428/api/v1/write"
    )

    @model_serializer(mode="wrap")
    def _without_default_topology(self, handler: Any) -> Any:
        # The sharding fields leave the dump (and so the spec hash in every generated file's
        # header) while unset: single-server specs generate byte-identical files.
        data = handler(self)
        for key in ("shards", "global_write_url"):
            if isinstance(data, dict) and data.get(key) == type(self).model_fields[key].default:
                data.pop(key)
        return data
