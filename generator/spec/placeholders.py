"""Placeholders said out loud: example hosts, the built-in example monitoring settings and the
placeholder GPU exporter image.

They generate (the bundled examples use them) but would notify no one in a real deployment,
so `trainsignals validate` and `generate` print one warning per placeholder, naming the field
and the fix, instead of leaving it to a YAML comment.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from trainsignals.generator.spec.deploy import GPU_EXPORTER_IMAGE
from trainsignals.generator.spec.job import JobSpec
from trainsignals.generator.spec.monitoring import DEFAULT_SETTINGS, MonitoringSettings
from trainsignals.generator.spec.receivers import Routing

# RFC 2606 / 6761 names that never reach anyone, and this host.
_PLACEHOLDER_SUFFIXES = (
    "example.com",
    "example.org",
    "example.net",
    ".example",
    ".invalid",
    ".test",
)
_LOCAL = ("localhost", "127.0.0.1", "::1")


def placeholder_host(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return host in _LOCAL or any(
        host == suffix.lstrip(".")
        or host.endswith(suffix if suffix.startswith(".") else f".{suffix}")
        for suffix in _PLACEHOLDER_SUFFIXES
    )


def _routing_warnings(routing: Routing, where: str) -> list[str]:
    found = []
    for level in ("page", "ticket"):
        receiver = getattr(routing, level)
        if (
            receiver is not None
            and receiver.kind == "webhook"
            and placeholder_host(receiver.target or "")
        ):
            found.append(
                f"{where}.{level}: {receiver.target} is a placeholder host: no one gets these "
                f"{level}s; name the real service"
            )
    return found


def _image_warning(spec: JobSpec, source: str) -> list[str]:
    k8s = spec.deploy.kubernetes
    # The DaemonSet is generated for trainsignals' own GPU exporter only (not dcgm).
    if (
        k8s is None
        or spec.gpu_metrics != "trainsignals"
        or k8s.gpu_exporter_image != GPU_EXPORTER_IMAGE
    ):
        return []
    return [
        f"{source}: deploy.kubernetes.gpu_exporter_image: the default {GPU_EXPORTER_IMAGE} is "
        "a placeholder that no registry serves, so the GPU exporter DaemonSet will not start; "
        "build the image (`trainsignals image` names the tags; Containerfile in the source), "
        "push it and set gpu_exporter_image to it"
    ]


def placeholder_warnings(
    specs: Iterable[tuple[JobSpec, str]], settings: MonitoringSettings | None
) -> list[str]:
    """One line per placeholder: field, what it is, the fix. `settings` None: the built-in
    example settings are in use."""
    found: list[str] = []
    for spec, source in specs:
        found += _routing_warnings(spec.routing, f"{source}: routing")
        found += _routing_warnings(spec.recovery.infra_routing, f"{source}: recovery.infra_routing")
        found += _image_warning(spec, source)
    if settings is None:
        settings = DEFAULT_SETTINGS
        found.append(
            "monitoring settings: the built-in example settings are in use (Secrets "
            "monitoring-pagerduty / monitoring-slack, heartbeat "
            f"{settings.heartbeat.url}); write your own and pass --monitoring FILE"
        )
    elif placeholder_host(settings.heartbeat.url):
        found.append(
            f"monitoring settings: heartbeat.url: {settings.heartbeat.url} is a placeholder: "
            "no dead man's switch watches this pipeline; set your switch's ping URL"
        )
    found += _routing_warnings(settings.routing, "monitoring settings: routing")
    return found
