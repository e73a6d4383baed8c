"""The optional `deploy:` section of a spec: where the job's targets are found.

Everything has a default, so a spec without `deploy:` still generates a plain Prometheus scrape
config (generator/scrape_config.py). Kubernetes objects (generator/kubernetes.py) are generated
only for specs with a `deploy.kubernetes` section.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_serializer,
    model_validator,
)

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
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"
# A Kubernetes resource quantity (apimachinery's resource.Quantity, without exponents).
QUANTITY = r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$"
NOBODY = 65534


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Toleration(_Strict):
    """A Kubernetes toleration (core/v1 Toleration), in snake_case."""

    key: Annotated[str, Field(pattern=K8S_LABEL_KEY)] | None = None
    operator: Literal["Exists", "Equal"] = "Equal"
    value: Annotated[str, Field(pattern=K8S_LABEL_VALUE)] | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Toleration:
        # What the API server's ValidateTolerations refuses.
        if self.key is None and self.operator != "Exists":
            raise ValueError("a toleration without `key` must have operator: Exists")
        if self.operator == "Exists" and self.value:
            raise ValueError("operator: Exists takes no `value`; remove it or use Equal")
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            raise ValueError("toleration_seconds is only allowed with effect: NoExecute")
        return self

    def manifest(self) -> dict[str, Any]:
        fields = {
            "key": self.key,
            "operator": self.operator,
            "value": self.value,
            "effect": self.effect,
            "tolerationSeconds": self.toleration_seconds,
        }
        return {k: v for k, v in fields.items() if v is not None}


def _quantity(value: str) -> str:
    if not re.match(QUANTITY, value):
        raise ValueError(f"{value!r} is not a Kubernetes quantity; write e.g. 250m, 256Mi or 1Gi")
    return value


def _object_name(value: str) -> str:
    if not re.match(DNS_SUBDOMAIN, value):
        raise ValueError(
            f"{value!r} is not a Kubernetes object name; use lowercase letters, digits, "
            "'-' and '.', e.g. nvidia"
        )
    return value


Quantity = Annotated[str, AfterValidator(_quantity)]
ObjectName = Annotated[str, AfterValidator(_object_name)]
ResourceName = Literal["cpu", "memory", "ephemeral-storage"]


class Resources(_Strict):
    requests: dict[ResourceName, Quantity] = Field(default_factory=dict)
    limits: dict[ResourceName, Quantity] = Field(default_factory=dict)


class GpuExporter(_Strict):
    """The trainsignals-gpu-exporter DaemonSet (gpu_metrics: trainsignals) on a real cluster.

    The defaults follow NVIDIA's own dcgm-exporter chart (deployment/values.yaml:
    priorityClassName system-node-critical, drop ALL capabilities, no privilege escalation)
    and go further where NVML allows: the exporter reads NVML through the device files the
    NVIDIA runtime mounts, so it needs neither root nor the SYS_ADMIN that dcgm-exporter's
    profiling fields do.
    """

    # RuntimeClass whose handler injects the driver and devices (the GPU operator creates
    # `nvidia`). Where nvidia is not the default runtime, without it NVML finds no library
    # and every GPU reads as lost. None: the cluster's default runtime.
    runtime_class_name: ObjectName | None = "nvidia"
    # Evicted last under node pressure: without the exporter, GPU faults go unseen.
    priority_class_name: ObjectName | None = "system-node-critical"
    # UID the exporter runs as (non-root); None runs it as root, for nodes whose
    # /dev/nvidia* device files are not readable by other users.
    run_as_user: Annotated[int, Field(ge=0)] | None = NOBODY
    # Taints of the job's nodes the exporter must tolerate (replaces the default list).
    tolerations: tuple[Toleration, ...] = (
        Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule"),
    )
    # Node labels required beyond `node_label: <job>`.
    node_selector: dict[str, str] = Field(default_factory=dict)
    # A core/v1 Affinity (nodeAffinity, podAffinity, podAntiAffinity), copied as written.
    affinity: dict[str, Any] | None = None
    resources: Resources = Resources(
        requests={"cpu": "50m", "memory": "64Mi"}, limits={"memory": "256Mi"}
    )

    @field_validator("node_selector")
    @classmethod
    def _selector(cls, value: dict[str, str]) -> dict[str, str]:
        return _check_labels(value)

    @field_validator("affinity")
    @classmethod
    def _affinity(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        unknown = set(value or {}) - {"nodeAffinity", "podAffinity", "podAntiAffinity"}
        if unknown:
            raise ValueError(
                f"unknown affinity field(s) {sorted(unknown)}; write a core/v1 Affinity "
                "(nodeAffinity, podAffinity, podAntiAffinity) in Kubernetes' camelCase"
            )
        return value


def _check_labels(value: dict[str, str]) -> dict[str, str]:
    for key, label_value in value.items():
        if not re.match(K8S_LABEL_KEY, key) or not re.match(K8S_LABEL_VALUE, label_value):
            raise ValueError(
                f"{key}={label_value!r} is not a Kubernetes label; keys are [prefix/]name "
                "and values at most 63 of [A-Za-z0-9-_.]"
            )
    return value


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
    # Multi-node jobs: the release's node_exporter pods, scraped again on the job's nodes for
    # the InfiniBand series only (generator/fabric.py); namespace default: `namespace`.
    node_exporter_labels: dict[str, str] = Field(
        default_factory=lambda: {"app.kubernetes.io/name": "prometheus-node-exporter"}
    )
    node_exporter_namespace: Annotated[str, Field(pattern=DNS_LABEL)] | None = None
    node_exporter_port: Annotated[str, Field(pattern=DNS_LABEL)] = "http-metrics"
    # kube-prometheus-stack values of the release: the meta rules select its Prometheus and
    # Alertmanager by the job names its ServiceMonitors give them (kube_prometheus_stack.py).
    fullname_override: Annotated[str, Field(pattern=DNS_LABEL)] | None = None
    name_override: Annotated[str, Field(pattern=DNS_LABEL)] | None = None
    alertmanager_replicas: Annotated[int, Field(ge=1)] = 1  # alertmanagerSpec.replicas
    # Explicit `job` labels, when the release scrapes Prometheus or Alertmanager otherwise.
    prometheus_job: str | None = None
    alertmanager_job: str | None = None
    gpu_exporter: GpuExporter = GpuExporter()

    @field_validator("pod_labels", "dcgm_exporter_labels", "node_exporter_labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        return _check_labels(value)


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
