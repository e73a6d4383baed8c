"""The trainsignals-gpu-exporter DaemonSet (gpu_metrics: trainsignals) of deploy/kubernetes/.

Everything a real GPU cluster needs comes from the spec's `deploy.kubernetes.gpu_exporter`
(generator/spec/deploy.py), with defaults after NVIDIA's own DaemonSets where they apply: the
dcgm-exporter chart (deployment/templates/daemonset.yaml, values.yaml) and the GPU operator's
(assets/state-dcgm-exporter/0800_daemonset.yaml: system-node-critical, NODE_NAME from
spec.nodeName, no service account token; controllers/object_controls.go setRuntimeClassName
gives its operands the `nvidia` RuntimeClass). Both run dcgm-exporter as root (privileged, or
SYS_ADMIN for the profiling fields); NVML alone needs neither:
- `runtimeClassName` (nvidia): the NVIDIA runtime injects libnvidia-ml and the device files;
  where it is not the node's default runtime, NVML does not start and every GPU reads as lost;
- `priorityClassName` (system-node-critical, as dcgm-exporter's chart);
- least privilege: non-root, read-only root file system (a tmpfs /tmp), no capabilities,
  no privilege escalation, the runtime's default seccomp profile, no service account token
  (the exporter never calls the API server);
- `NODE_NAME` from the downward API (spec.nodeName) as the exporter's `node` label: the
  pod's host name is the pod's name, not the node's;
- tolerations, node selector (the job's node label plus the spec's), affinity, resources.
"""

from __future__ import annotations

from trainsignals.generator.spec.deploy import GPU_EXPORTER_IMAGE, GpuExporter, Kubernetes
from trainsignals.generator.spec.job import JobSpec

EXPORTER_NAME = "trainsignals-gpu-exporter"


def exporter_labels(spec: JobSpec) -> dict[str, str]:
    return {"app.kubernetes.io/instance": spec.name, "app.kubernetes.io/name": EXPORTER_NAME}


def _security_context(settings: GpuExporter) -> dict:
    context: dict = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "privileged": False,
        "readOnlyRootFilesystem": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    if settings.run_as_user is None:
        return context | {"runAsNonRoot": False, "runAsUser": 0}
    return context | {
        "runAsGroup": settings.run_as_user,
        "runAsNonRoot": settings.run_as_user != 0,
        "runAsUser": settings.run_as_user,
    }


def _resources(settings: GpuExporter) -> dict:
    found = {
        "requests": dict(sorted(settings.resources.requests.items())),
        "limits": dict(sorted(settings.resources.limits.items())),
    }
    return {k: v for k, v in found.items() if v}


def _pod_spec(spec: JobSpec, k8s: Kubernetes, port: int) -> dict:
    settings = k8s.gpu_exporter
    container = {
        "name": "exporter",
        "image": k8s.gpu_exporter_image,
        "command": ["trainsignals-gpu-exporter"],
        "args": [f"--port={port}", "--node=$(NODE_NAME)"],
        "env": [
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            # NVIDIA's container runtime exposes every GPU for NVML without allocating one.
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
        ],
        "ports": [{"name": "metrics", "containerPort": port, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/metrics", "port": "metrics"}},
        "resources": _resources(settings),
        "securityContext": _security_context(settings),
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    pod: dict = {
        "automountServiceAccountToken": False,
        "containers": [container],
        "nodeSelector": dict(sorted({**settings.node_selector, k8s.node_label: spec.name}.items())),
        "tolerations": [t.manifest() for t in settings.tolerations],
        "volumes": [{"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}}],
    }
    if settings.runtime_class_name:
        pod["runtimeClassName"] = settings.runtime_class_name
    if settings.priority_class_name:
        pod["priorityClassName"] = settings.priority_class_name
    if settings.affinity:
        pod["affinity"] = settings.affinity
    if settings.run_as_user:
        pod["securityContext"] = {
            "runAsNonRoot": True,
            "seccompProfile": {"type": "RuntimeDefault"},
        }
    return dict(sorted(pod.items()))


def gpu_exporter_daemonset(spec: JobSpec, metadata: dict) -> dict:
    """trainsignals-gpu-exporter on every node labelled `<node_label>=<job>`."""
    k8s = spec.deploy.kubernetes
    assert k8s is not None
    labels = exporter_labels(spec)
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": metadata,
        "spec": {
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": labels},
                "spec": _pod_spec(spec, k8s, spec.deploy.gpu_exporter_port),
            },
        },
    }


def daemonset_images(specs: list[JobSpec]) -> list[str]:
    """The images the specs' GPU exporter DaemonSets run (`trainsignals image`): what the
    Containerfile's build is tagged as. The default image when no spec deploys one."""
    images = {
        spec.deploy.kubernetes.gpu_exporter_image
        for spec in specs
        if spec.deploy.kubernetes is not None and spec.gpu_metrics == "trainsignals"
    }
    return sorted(images) or [GPU_EXPORTER_IMAGE]
