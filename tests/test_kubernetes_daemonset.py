"""The GPU exporter DaemonSet on a real cluster (issue 17, item 10): runtime class, priority,
least privilege, tolerations, placement and resources from the spec's
`deploy.kubernetes.gpu_exporter`, every variant valid against Kubernetes' own schema."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from trainsignals.generator.deploy.daemonset import gpu_exporter_daemonset
from trainsignals.generator.deploy.kubernetes import metadata
from trainsignals.generator.loader import SpecError, parse_spec
from trainsignals.generator.spec.job import JobSpec

from .conftest import JOBS, ROOT
from .kube_schemas import problems

SPEC = JOBS / "llama-8b-finetune.yaml"


def spec_with(**gpu_exporter: object) -> JobSpec:
    data = yaml.safe_load(SPEC.read_text(encoding="utf-8"))
    data["deploy"]["kubernetes"]["gpu_exporter"] = gpu_exporter
    return parse_spec(Path("jobs/llama-8b-finetune.yaml"), yaml.safe_dump(data))


def daemonset(spec: JobSpec) -> dict:
    return gpu_exporter_daemonset(spec, metadata(spec, "trainsignals-x-gpu-exporter"))


def committed_daemonset() -> dict:
    text = (ROOT / "deploy" / "kubernetes" / "llama-8b-finetune.yaml").read_text()
    (found,) = [o for o in yaml.safe_load_all(text) if o["kind"] == "DaemonSet"]
    return found


def restricted_violations(pod: dict) -> list[str]:
    """What the Pod Security Standards' `restricted` profile refuses in this pod spec."""
    found = []
    pod_context = pod.get("securityContext", {})
    for container in pod["containers"]:
        context = {**pod_context, **container.get("securityContext", {})}
        name = container["name"]
        if context.get("allowPrivilegeEscalation") is not False:
            found.append(f"{name}: allowPrivilegeEscalation must be false")
        if context.get("runAsNonRoot") is not True or context.get("runAsUser") == 0:
            found.append(f"{name}: must run as non-root")
        if context.get("capabilities", {}).get("drop") != ["ALL"]:
            found.append(f"{name}: must drop ALL capabilities")
        if context.get("seccompProfile", {}).get("type") not in ("RuntimeDefault", "Localhost"):
            found.append(f"{name}: seccompProfile must be RuntimeDefault")
        if context.get("privileged"):
            found.append(f"{name}: privileged")
    if any("hostPath" in v for v in pod.get("volumes", [])):
        found.append("hostPath volume")
    return found


def test_committed_daemonset_is_least_privilege_on_the_nvidia_runtime() -> None:
    ds = committed_daemonset()
    assert problems(ds) == []
    pod = ds["spec"]["template"]["spec"]
    # NVML needs the NVIDIA runtime where it is not the default; evicted last.
    assert pod["runtimeClassName"] == "nvidia"
    assert pod["priorityClassName"] == "system-node-critical"
    assert pod["automountServiceAccountToken"] is False
    assert restricted_violations(pod) == []
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    # `node` from the downward API: the pod's host name is the pod's name.
    assert "--node=$(NODE_NAME)" in container["args"]
    assert {
        "name": "NODE_NAME",
        "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
    } in container["env"]
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert container["resources"] == {
        "requests": {"cpu": "50m", "memory": "64Mi"},
        "limits": {"memory": "256Mi"},
    }


def test_spec_settings_reach_the_daemonset_and_validate() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}
                        ]
                    }
                ]
            }
        }
    }
    spec = spec_with(
        runtime_class_name=None,
        priority_class_name="gpu-monitoring",
        run_as_user=1000,
        tolerations=[
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "dedicated", "value": "training", "effect": "NoSchedule"},
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "toleration_seconds": 300,
            },
        ],
        node_selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        affinity=affinity,
        resources={"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "1Gi"}},
    )
    ds = daemonset(spec)
    assert problems(ds) == []
    pod = ds["spec"]["template"]["spec"]
    assert "runtimeClassName" not in pod  # the cluster's default runtime is nvidia
    assert pod["priorityClassName"] == "gpu-monitoring"
    assert pod["nodeSelector"] == {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "trainsignals.io/job": "llama-8b-finetune",
    }
    assert pod["affinity"] == affinity
    assert pod["tolerations"][1] == {
        "key": "dedicated",
        "operator": "Equal",
        "value": "training",
        "effect": "NoSchedule",
    }
    assert pod["tolerations"][2]["tolerationSeconds"] == 300
    (container,) = pod["containers"]
    assert container["securityContext"]["runAsUser"] == 1000
    assert container["resources"]["limits"] == {"memory": "1Gi"}
    assert restricted_violations(pod) == []


def test_root_where_nvml_needs_it_is_explicit_and_still_drops_capabilities() -> None:
    ds = daemonset(spec_with(run_as_user=None))
    assert problems(ds) == []
    pod = ds["spec"]["template"]["spec"]
    context = pod["containers"][0]["securityContext"]
    assert (context["runAsUser"], context["runAsNonRoot"]) == (0, False)
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["allowPrivilegeEscalation"] is False
    assert restricted_violations(pod) == ["exporter: must run as non-root"]


@pytest.mark.parametrize(
    ("settings", "field", "words"),
    [
        (
            {"tolerations": [{"key": "a", "operator": "Exists", "value": "x"}]},
            "tolerations[0]",
            "Exists takes no `value`",
        ),
        ({"tolerations": [{"operator": "Equal", "value": "x"}]}, "tolerations[0]", "without `key`"),
        ({"tolerations": [{"key": "a", "toleration_seconds": 5}]}, "tolerations[0]", "NoExecute"),
        ({"tolerations": [{"key": "a", "efect": "NoSchedule"}]}, "tolerations[0].efect", ""),
        ({"affinity": {"nodeAfinity": {}}}, "affinity", "nodeAffinity"),
        ({"resources": {"limits": {"memory": "1 GB"}}}, "resources.limits.memory", ""),
        ({"node_selector": {"bad key!": "x"}}, "node_selector", "not a Kubernetes label"),
        ({"runtime_class_name": "NVIDIA"}, "runtime_class_name", ""),
    ],
)
def test_bad_gpu_exporter_settings_name_the_field(settings: dict, field: str, words: str) -> None:
    with pytest.raises(SpecError) as error:
        spec_with(**settings)
    (line,) = error.value.problems
    prefix = f"jobs/llama-8b-finetune.yaml: deploy.kubernetes.gpu_exporter.{field}"
    assert line.startswith(prefix), line
    assert words in line
