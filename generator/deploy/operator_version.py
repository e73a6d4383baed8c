"""The oldest prometheus-operator that accepts the generated objects, from the fields they use.

An older operator's CRDs do not know a newer field: the API server prunes it or refuses the
object, and the scrape or route it carried is silently lost. Each file under deploy/kubernetes/
names the release it needs in its header (README "Kubernetes" says the same).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

# (kind, field path) -> the first prometheus-operator release whose CRD has the field (from
# its CHANGELOG and the git history of example/prometheus-operator-crd/, PR in the comment).
# Every other field the generated objects use is older than the oldest of these.
FIELD_SINCE: dict[tuple[str, str], str] = {
    ("PodMonitor", "spec.podMetricsEndpoints[].portNumber"): "0.79.0",  # #7150
    ("PodMonitor", "spec.attachMetadata.node"): "0.57.0",  # #4792
    (
        "AlertmanagerConfig",
        "spec.receivers[].pagerdutyConfigs[].pagerDutyLinkConfigs",
    ): "0.53.0",  # #4425
    ("AlertmanagerConfig", "spec.inhibitRules[].sourceMatch[].matchType"): "0.53.0",  # #4329
    (
        "AlertmanagerConfig",
        "spec.receivers[].webhookConfigs[].httpConfig.authorization",
    ): "0.51.0",  # #4110
}
OLDEST = "0.51.0"


def field_paths(obj: object, prefix: str = "") -> Iterator[str]:
    """Every field path in `obj`, lists written `[]` (`spec.groups[].rules[].expr`)."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            yield path
            yield from field_paths(value, path)
    elif isinstance(obj, list):
        for item in obj:
            yield from field_paths(item, f"{prefix}[]")


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def minimum_operator(objects: Iterable[dict]) -> tuple[str, str]:
    """(version, why): the newest release any used field needs, and that field."""
    needed = sorted(
        (_key(since), f"{obj.get('kind')} {path}", since)
        for obj in objects
        for path in set(field_paths(obj))
        if (since := FIELD_SINCE.get((obj.get("kind", ""), path))) is not None
    )
    return (needed[-1][2], needed[-1][1]) if needed else (OLDEST, "")


def operator_comment(objects: Iterable[dict]) -> str:
    version, why = minimum_operator(objects)
    return f"# Needs prometheus-operator >= {version}" + (f" ({why})" if why else "") + ".\n"
