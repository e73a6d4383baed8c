"""The optional `deploy:` section of a spec: where the job's targets are found.

Everything has a default, so a spec without `deploy:` still generates a plain Prometheus scrape
config (generator/deploy/scrape_config.py). Kubernetes objects (generator/deploy/kubernetes.py)
are generated only for specs with a `deploy.kubernetes` section.
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

from trainsignals import __version__

# Ports of the two exporters (exporters/training: 9850 + LOCAL_RANK; exporters/gpu: 9842).
TRAINING_BASE_PORT = 9850
GPU_EXPORTER_PORT = 9842
FILE_SD_DIR = "/etc/prometheus/file_sd/trainsignals"
# Label on the nodes a job runs on; its value is the job name (see generator/deploy/kubernetes.py).
NODE_LABEL = "trainsignals.io/job"
# The image Containerfile builds (`make image` tags it with every spec's gpu_exporter_image);
# by default tagged with the package version, so the DaemonSet runs the release it came from.
GPU_EXPORTER_IMAGE = f"ghcr.io/example/trainsignals:{__version__}"

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

    key: Annotated[str, Field(pattern=K8S_LABEL_KEY)] | None = Field(
        None, description="Taint key tolerated; none with operator Exists tolerates every taint."
    )
    operator: Literal["Exists", "Equal"] = Field("Equal", description="Match on key or key=value.")
    value: Annotated[str, Field(pattern=K8S_LABEL_VALUE)] | None = Field(
        None, description="Taint value, with operator Equal."
    )
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        None, description="Taint effect tolerated; none tolerates every effect."
    )
    toleration_seconds: int | None = Field(
        None, description="With effect NoExecute: how long the pod stays after the taint appears."
    )

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
    """Kubernetes resource requests and limits of a container."""

    requests: dict[ResourceName, Quantity] = Field(
        default_factory=dict, description="What the scheduler reserves, e.g. cpu: 50m."
    )
    limits: dict[ResourceName, Quantity] = Field(
        default_factory=dict, description="The most it may use, e.g. memory: 256Mi."
    )


class GpuExporter(_Strict):
    """The trainsignals-gpu-exporter DaemonSet (gpu_metrics: trainsignals) on a real cluster.

    The defaults follow NVIDIA's own dcgm-exporter chart (deployment/values.yaml:
    priorityClassName system-node-critical, drop ALL capabilities, no privilege escalation)
    and go further where NVML allows: the exporter reads NVML through the device files the
    NVIDIA runtime mounts, so it needs neither root nor the SYS_ADMIN that dcgm-exporter's
    profiling fields do.
    """

    # Where nvidia is not the default runtime, without it NVML finds no library and every
    # GPU reads as lost.
    runtime_class_name: ObjectName | None = Field(
        "nvidia",
        description="RuntimeClass that injects the driver and devices (the GPU operator "
        "creates `nvidia`); null: the cluster's default runtime.",
    )
    # Without the exporter, GPU faults go unseen.
    priority_class_name: ObjectName | None = Field(
        "system-node-critical", description="PriorityClass: evicted last under node pressure."
    )
    run_as_user: Annotated[int, Field(ge=0)] | None = Field(
        NOBODY,
        description="UID the exporter runs as (non-root); null runs it as root, for nodes "
        "whose /dev/nvidia* files other users cannot read.",
    )
    tolerations: tuple[Toleration, ...] = Field(
        (Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule"),),
        description="Taints of the job's nodes the exporter tolerates (replaces the default).",
    )
    node_selector: dict[str, str] = Field(
        default_factory=dict, description="Node labels required beyond `node_label: <job>`."
    )
    affinity: dict[str, Any] | None = Field(
        None,
        description="A core/v1 Affinity (nodeAffinity, podAffinity, podAntiAffinity), "
        "copied as written.",
    )
    resources: Resources = Field(
        Resources(requests={"cpu": "50m", "memory": "64Mi"}, limits={"memory": "256Mi"}),
        description="The exporter container's requests and limits.",
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

    namespace: Annotated[str, Field(pattern=DNS_LABEL)] = Field(
        "monitoring",
        description="Namespace of the generated objects and of the Secrets receivers reference.",
    )
    training_namespace: Annotated[str, Field(pattern=DNS_LABEL)] | None = Field(
        None, description="Namespace of the training pods (default: `namespace`)."
    )
    release: Annotated[str, Field(pattern=K8S_LABEL_VALUE)] = Field(
        "kube-prometheus-stack",
        description="kube-prometheus-stack release: its Prometheus and Alertmanager select "
        "objects labelled release=<name>.",
    )
    pod_labels: dict[str, str] = Field(
        default_factory=dict,
        description="Labels of the job's training pods (default: trainsignals.io/job=<name>).",
    )
    ranks_per_pod: Annotated[int, Field(ge=1, le=64)] | None = Field(
        None,
        description="Training processes per pod, each on training_base_port + LOCAL_RANK "
        "(default: shape.gpus_per_node, one torchrun pod per node).",
    )
    node_label: Annotated[str, Field(pattern=K8S_LABEL_KEY)] = Field(
        NODE_LABEL,
        description="Node label whose value is the job name on the job's nodes: the GPU "
        "exporter DaemonSet runs there, and (dcgm) only exporters there are the job's.",
    )
    gpu_exporter_image: str = Field(
        GPU_EXPORTER_IMAGE,
        description="Image of the GPU exporter DaemonSet. The default is a placeholder no "
        "registry serves (generate warns): build the image, push it and name it here.",
    )
    dcgm_exporter_labels: dict[str, str] = Field(
        default_factory=lambda: {"app.kubernetes.io/name": "dcgm-exporter"},
        description="gpu_metrics: dcgm: labels of the cluster's dcgm-exporter pods.",
    )
    dcgm_exporter_namespace: Annotated[str, Field(pattern=DNS_LABEL)] = Field(
        "gpu-operator", description="gpu_metrics: dcgm: namespace of the dcgm-exporter pods."
    )
    # Multi-node jobs read the InfiniBand series from node_exporter (generator/signals/fabric.py).
    node_exporter_labels: dict[str, str] = Field(
        default_factory=lambda: {"app.kubernetes.io/name": "prometheus-node-exporter"},
        description="Multi-node jobs: labels of the release's node_exporter pods, scraped "
        "again on the job's nodes for the InfiniBand series.",
    )
    # kube-prometheus-stack runs its node-exporter subchart in the release's namespace, not in
    # the namespace these objects go to.
    node_exporter_namespace: Annotated[str, Field(pattern=DNS_LABEL)] = Field(
        "monitoring",
        description="Namespace of the node_exporter pods: kube-prometheus-stack's release "
        "namespace (`helm install -n monitoring` in its instructions).",
    )
    node_exporter_port: Annotated[str, Field(pattern=DNS_LABEL)] = Field(
        "http-metrics", description="Name of node_exporter's container port."
    )
    # The meta rules select the release's Prometheus and Alertmanager by the job names its
    # ServiceMonitors give them (kube_prometheus_stack.py).
    fullname_override: Annotated[str, Field(pattern=DNS_LABEL)] | None = Field(
        None, description="The release's fullnameOverride value, if set."
    )
    name_override: Annotated[str, Field(pattern=DNS_LABEL)] | None = Field(
        None, description="The release's nameOverride value, if set."
    )
    alertmanager_replicas: Annotated[int, Field(ge=1)] = Field(
        1, description="The release's alertmanager.alertmanagerSpec.replicas."
    )
    prometheus_job: str | None = Field(
        None, description="`job` label of Prometheus' self-scrape, when the release sets another."
    )
    alertmanager_job: str | None = Field(
        None, description="`job` label of Alertmanager's scrape, when the release sets another."
    )
    gpu_exporter: GpuExporter = Field(
        GpuExporter(), description="The GPU exporter DaemonSet (gpu_metrics: trainsignals)."
    )

    @field_validator("pod_labels", "dcgm_exporter_labels", "node_exporter_labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        return _check_labels(value)


class Deploy(_Strict):
    """How Prometheus finds the job's targets."""

    training_base_port: Port = Field(
        TRAINING_BASE_PORT, description="Metrics port of rank 0; LOCAL_RANK r listens on base + r."
    )
    gpu_exporter_port: Port = Field(GPU_EXPORTER_PORT, description="The GPU exporter's port.")
    file_sd_dir: Annotated[str, Field(pattern=r"^/")] = Field(
        FILE_SD_DIR,
        description="Plain Prometheus / Slurm: folder of file_sd target files "
        "(`trainsignals slurm-targets` writes them).",
    )
    kubernetes: Kubernetes | None = Field(
        None, description="Set to generate prometheus-operator objects (deploy/kubernetes/)."
    )
    shards: Annotated[int, Field(ge=1, le=256)] = Field(
        1,
        description="More than 1: that many Prometheus shards scrape a hashmod partition of "
        "the nodes and remote-write per-node aggregates to one global store.",
    )
    global_write_url: Annotated[str, Field(pattern=r"^https?://")] = Field(
        "http://victoria-metrics:8428/api/v1/write",
        description="Sharded only: remote-write URL of the global store the ruler queries.",
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
