"""Validate Kubernetes objects offline: prometheus-operator kinds against the vendored CRD
schemas (schemas/prometheus-operator/), Kubernetes' own kinds with kubernetes-validate.

Both are strict about unknown fields, as `kubectl apply --validate=strict` is: a misspelt
field would otherwise be pruned silently by the API server and the setting lost.
"""

from __future__ import annotations

import copy
import re
from functools import cache
from pathlib import Path

import jsonschema
import kubernetes_validate
import yaml

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas" / "prometheus-operator"
KUBERNETES_VERSION = "1.31"  # a release kube-prometheus-stack supports


class _Loader(yaml.SafeLoader):
    pass


# The CRD lists the matchType enum value `=` unquoted: YAML 1.1's `!!value` tag.
_Loader.add_constructor(
    "tag:yaml.org,2002:value", lambda loader, node: loader.construct_scalar(node)
)


def _strict(schema: dict) -> dict:
    """Forbid unknown properties wherever the schema lists properties and allows no others."""
    if isinstance(schema, dict):
        if (
            "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            schema["additionalProperties"] = False
        for value in schema.values():
            if isinstance(value, dict | list):
                _strict(value)
    elif isinstance(schema, list):
        for item in schema:
            _strict(item)
    return schema


@cache
def crd_validators() -> dict[tuple[str, str], jsonschema.Draft7Validator]:
    """{(apiVersion, kind): validator} for every served version of every vendored CRD."""
    validators = {}
    for path in sorted(SCHEMAS.glob("*.yaml")):
        crd = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            schema = _strict(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
            # apiVersion/kind/metadata are the API server's; checked in validate() below.
            schema["properties"].update(
                {"apiVersion": {"type": "string"}, "kind": {"type": "string"}}
            )
            validators[(f"{group}/{version['name']}", kind)] = jsonschema.Draft7Validator(schema)
    return validators


def problems(obj: dict) -> list[str]:
    """Every schema violation of one object, empty when it is valid."""
    key = (obj.get("apiVersion", ""), obj.get("kind", ""))
    name = f"{key[1]} {obj.get('metadata', {}).get('name')}"
    if key in crd_validators():
        found = [
            f"{name}: {'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in crd_validators()[key].iter_errors(obj)
        ]
        # Metadata of a custom resource is an ordinary ObjectMeta: check it through a
        # ConfigMap carrying the same metadata.
        meta = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": obj.get("metadata", {})}
        found += [f"{name}: metadata: {p}" for p in _kubernetes_problems(meta)]
    else:
        found = [f"{name}: {p}" for p in _kubernetes_problems(obj)]
    return found + [f"{name}: {p}" for p in metadata_problems(obj.get("metadata", {}))]


# What the API server checks beyond the OpenAPI schema (apimachinery's validation).
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_LABEL_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def metadata_problems(meta: dict) -> list[str]:
    found = []
    if not _DNS_SUBDOMAIN.match(meta.get("name", "")):
        found.append(f"metadata.name {meta.get('name')!r} is not a DNS subdomain")
    if "namespace" in meta and not _DNS_LABEL.match(meta["namespace"]):
        found.append(f"metadata.namespace {meta['namespace']!r} is not a DNS label")
    for key, value in (meta.get("labels") or {}).items():
        if not _LABEL_NAME.match(key) or not _LABEL_VALUE.match(str(value)):
            found.append(f"label {key}={value!r} is not a valid Kubernetes label")
    return found


def _kubernetes_problems(obj: dict) -> list[str]:
    try:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return [f"{'/'.join(map(str, exc.path))}: {exc.message}"]
    except kubernetes_validate.SchemaNotFoundError as exc:
        return [f"no schema for {obj.get('apiVersion')} {obj.get('kind')}: {exc}"]
    return []
