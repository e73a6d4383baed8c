"""The spec's reference, generated from its models: a JSON Schema and docs/spec.md.

Editors read the schema (yaml-language-server: completion, hover, validation); people read
docs/spec.md, rendered from that same schema so the two cannot disagree. Field descriptions
come from each model's `Field(description=...)` (generator/spec/: job.py, sections.py, ...).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Any, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from trainsignals import __version__
from trainsignals.generator.artifacts.kind import ArtifactKind, Run
from trainsignals.generator.output.files import GENERATED_MARK
from trainsignals.generator.spec.deploy import K8S_LABEL_KEY, K8S_LABEL_VALUE
from trainsignals.generator.spec.durations import DURATION_PATTERN, format_duration
from trainsignals.generator.spec.job import JobSpec
from trainsignals.generator.spec.monitoring import MonitoringSettings
from trainsignals.generator.spec.types import JOB_NAME, LABEL_NAME
from trainsignals.metrics.gpu_models import PEAK_DENSE_FLOPS

SCHEMA_PATH = "docs/spec.schema.json"
DOC_PATH = "docs/spec.md"
DRAFT = "https://json-schema.org/draft/2020-12/schema"
# What a spec in jobs/ writes as its first line to name the schema (path relative to it).
MODELINE = f"# yaml-language-server: $schema=../{SCHEMA_PATH}"

# Units follow the field names (`_seconds`, `_ratio`, ...); the few irregular names are listed.
_SUFFIX_UNITS = {
    "_seconds": "seconds",
    "_ratio": "ratio, 0 to 1",
    "_celsius": "°C",
}
_NAME_UNITS = {
    "model_flops_per_token": "FLOP per token",
    "model_flops_per_step": "FLOP per step",
    "tokens_per_second_min": "tokens/s",
    "objective": "ratio, 0 to 1",
    "mfu_min_ratio": "ratio of peak FLOP/s",
    "loss_spike_factor": "factor",
}


def _models(annotation: Any, found: dict[str, type[BaseModel]]) -> dict[str, type[BaseModel]]:
    """Every model reachable from `annotation`, by class name (the schema's $defs keys)."""
    origin = get_origin(annotation)
    if origin is not None:
        args = get_args(annotation)[:1] if origin is Annotated else get_args(annotation)
        for arg in args:
            _models(arg, found)
    elif (
        isinstance(annotation, type)
        and issubclass(annotation, BaseModel)
        and annotation.__name__ not in found
    ):
        found[annotation.__name__] = annotation
        for info in annotation.model_fields.values():
            _models(info.annotation, found)
    return found


# What the models' field validators check in code, said again in the schema so that an editor
# flags what `trainsignals validate` refuses: {($defs name or "", field): schema of a value}.
SAFE_LABEL_VALUE = r"""^[^"'{}\\\n`]*$"""  # none of what UNSAFE_LABEL_VALUE finds
_K8S_LABELS = {
    "propertyNames": {"pattern": K8S_LABEL_KEY},
    "additionalProperties": {"type": "string", "pattern": K8S_LABEL_VALUE},
}
CHECKED_IN_CODE: dict[tuple[str, str], dict] = {
    ("", "name"): {"pattern": JOB_NAME.pattern},
    ("", "team"): {"pattern": SAFE_LABEL_VALUE},
    ("", "rotation"): {"pattern": SAFE_LABEL_VALUE},
    ("", "selector"): {
        "propertyNames": {"pattern": LABEL_NAME.pattern},
        "additionalProperties": {"type": "string", "pattern": SAFE_LABEL_VALUE},
    },
    ("Shape", "gpu_model"): {"enum": sorted(PEAK_DENSE_FLOPS)},
    ("Recovery", "infra_team"): {"pattern": SAFE_LABEL_VALUE},
    ("GpuExporter", "node_selector"): _K8S_LABELS,
    ("GpuExporter", "affinity"): {
        "propertyNames": {"enum": ["nodeAffinity", "podAffinity", "podAntiAffinity"]}
    },
    ("Kubernetes", "pod_labels"): _K8S_LABELS,
    ("Kubernetes", "dcgm_exporter_labels"): _K8S_LABELS,
    ("Kubernetes", "node_exporter_labels"): _K8S_LABELS,
}


def _add_checks(definition: dict, name: str) -> None:
    for (owner, field), extra in CHECKED_IN_CODE.items():
        if owner != name:
            continue
        prop = definition["properties"][field]
        # A nullable field is anyOf [value, null]: the value's branch gets the check.
        branches = [b for b in prop.get("anyOf", [prop]) if b.get("type") != "null"]
        for branch in branches:
            branch.update(extra)


def _fill_defaults(definition: dict, model: type[BaseModel]) -> None:
    # pydantic leaves default_factory defaults out of the schema and writes a Duration's
    # default in seconds; both are written here as a spec would write them ("10m").
    for name, prop in definition.get("properties", {}).items():
        info = model.model_fields[name]
        prop.pop("title", None)  # "Stall After": noise on every hover
        if info.default_factory is not None:
            prop["default"] = to_jsonable_python(info.get_default(call_default_factory=True))
        elif prop.get("pattern") == DURATION_PATTERN and isinstance(prop.get("default"), int):
            prop["default"] = format_duration(prop["default"])


def spec_schema() -> dict:
    """The JSON Schema of a job spec, with defaults, descriptions and known alert names."""
    from trainsignals.generator.alerts.catalog import (
        BY_NAME,  # it imports the spec; only generation needs it here
    )

    schema = JobSpec.model_json_schema()
    models = _models(JobSpec, {})
    _fill_defaults(schema, JobSpec)
    _add_checks(schema, "")
    for name, definition in schema.get("$defs", {}).items():
        _fill_defaults(definition, models[name])
        _add_checks(definition, name)
    schema["properties"]["alerts"]["propertyNames"] = {
        "title": "alert name",
        "enum": sorted(BY_NAME),
    }
    head = {
        "$schema": DRAFT,
        "$comment": f"{GENERATED_MARK} {__version__} from its spec models. Do not edit: "
        "run `trainsignals generate`.",
        "title": "trainsignals job spec",
    }
    return head | {k: v for k, v in schema.items() if k != "title"}


def schema_text(schema: dict) -> str:
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _anchor(name: str) -> str:
    return name.lower()


def _ref_name(prop: dict) -> str | None:
    refs = [p["$ref"] for p in [prop, *prop.get("anyOf", [])] if "$ref" in p]
    return refs[0].rsplit("/", 1)[-1] if refs else None


def _bounds(prop: dict) -> str:
    signs = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}
    return ", ".join(f"{sign} {prop[key]}" for key, sign in signs.items() if key in prop)


def _type(prop: dict) -> str:
    if "$ref" in prop:
        name = prop["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{_anchor(name)})"
    if "anyOf" in prop:
        kinds = [_type(p) for p in prop["anyOf"] if p.get("type") != "null"]
        nullable = any(p.get("type") == "null" for p in prop["anyOf"])
        return " or ".join(kinds) + (" or null" if nullable else "")
    if "enum" in prop:
        return "one of " + ", ".join(f"`{v}`" for v in prop["enum"])
    kind = prop.get("type", "any")
    if kind == "array":
        text = f"list of {_type(prop.get('items', {}))}"
    elif kind == "object":
        values = prop.get("additionalProperties", True)
        names = prop.get("propertyNames", {})
        keys = names.get("title") or (_type(names) if names else "string")
        text = f"map of {keys} to {_type(values)}" if isinstance(values, dict) else "mapping"
    elif kind == "string" and prop.get("pattern") == DURATION_PATTERN:
        text = "duration"
    else:
        text = kind
    bounds = _bounds(prop)
    return f"{text} ({bounds})" if bounds else text


def _unit(name: str, prop: dict) -> str:
    if prop.get("pattern") == DURATION_PATTERN:
        return "duration: `90s`, `10m`, `6h`, `1d`"
    if name in _NAME_UNITS:
        return _NAME_UNITS[name]
    if name.endswith("_port") and prop.get("type") == "integer":
        return "TCP port"
    return next((u for suffix, u in _SUFFIX_UNITS.items() if name.endswith(suffix)), "")


def _default(name: str, prop: dict, required: list[str], defs: dict) -> str:
    if name in required:
        return "**required**"
    value = prop.get("default")
    ref = _ref_name(prop)
    if ref and isinstance(value, dict):
        # The section's own defaults, unless this field's default sets some differently.
        own = {k: p.get("default") for k, p in defs[ref].get("properties", {}).items()}
        if all(own.get(k) == v for k, v in value.items()):
            return f"see [{ref}](#{_anchor(ref)})"
    if value is None:
        return "none"
    return f"`{json.dumps(value, ensure_ascii=False)}`"


def _cell(text: str) -> str:
    # Outside code spans, `<name>` would be read as an HTML tag and vanish.
    parts = " ".join(text.split()).replace("|", "\\|").split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def _sections(schema: dict) -> list[tuple[str, dict, list[str]]]:
    """(model name, its schema, every field path it appears at), from the top down."""
    defs = schema.get("$defs", {})
    paths: dict[str, list[str]] = {"JobSpec": ["the top level"]}

    def visit(model: dict, prefix: str) -> None:
        for field, prop in model.get("properties", {}).items():
            ref = _ref_name(prop.get("items", prop))
            if ref is not None:
                path = f"{prefix}{field}" + ("[]" if "items" in prop else "")
                paths.setdefault(ref, []).append(f"`{path}`")
                visit(defs[ref], f"{path}.")

    visit(schema, "")
    # paths is in order of first appearance: a section comes after the one that uses it.
    return [(name, schema if name == "JobSpec" else defs[name], paths[name]) for name in paths]


def spec_markdown(schema: dict) -> str:
    """docs/spec.md: every field of every section with type, default, unit and meaning."""
    lines = [
        f"<!-- {GENERATED_MARK} {__version__} from its spec models. "
        "Do not edit: run `trainsignals generate`. -->",
        "# Job spec reference",
        "",
        "One YAML file per training job in `jobs/`, validated strictly: an unknown key is an",
        "error (with the closest valid key), so a typo cannot silently disable an alert.",
        "Durations take a unit: `90s`, `10m`, `6h`, `1d`, `1w`, or combined (`1h30m`); a bare",
        "number is refused, except in fields whose name says `_seconds`.",
        "",
        f"Editors: [`{SCHEMA_PATH}`](spec.schema.json) is this reference as a JSON Schema.",
        "With yaml-language-server (VS Code's YAML extension, Neovim, Helix...) the first line",
        "of a spec in `jobs/` names it, for completion, hover and validation while typing:",
        "",
        "```yaml",
        MODELINE,
        "```",
        "",
        "(the path is relative to the spec; elsewhere, point it at this repository's file).",
    ]
    defs = schema.get("$defs", {})
    for name, model, paths in _sections(schema):
        lines += ["", f"## {name}", "", f"At {', '.join(paths)}.", ""]
        if model.get("description"):
            lines += [" ".join(model["description"].split()), ""]
        lines += ["| field | type | default | unit | description |", "|---|---|---|---|---|"]
        required = model.get("required", [])
        for field, prop in model.get("properties", {}).items():
            ref = _ref_name(prop.get("items", prop))
            # pydantic drops a field's description when it repeats its model's docstring.
            meaning = prop.get("description") or (
                defs[ref].get("description", "").split("\n\n")[0] if ref else ""
            )
            cells = (
                f"`{field}`",
                _type(prop),
                _default(field, prop, required, defs),
                _unit(field, prop),
                meaning,
            )
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def monitoring_markdown() -> str:
    """The monitoring settings' fields that shape generated rules (their `description`)."""
    schema = MonitoringSettings.model_json_schema()
    lines = [
        "",
        "## Monitoring settings",
        "",
        "Not in a job spec: the global settings file (`trainsignals generate --monitoring FILE`),",
        "validated as strictly. Fields that shape generated rules:",
        "",
        "| field | type | default | unit | description |",
        "|---|---|---|---|---|",
    ]
    for field, prop in schema.get("properties", {}).items():
        if prop.get("description"):
            cells = (
                f"`{field}`",
                _type(prop),
                _default(field, prop, [], {}),
                _unit(field, prop),
                prop["description"],
            )
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def reference_files() -> dict[str, str]:
    """{path: content} of the schema and the Markdown reference."""
    schema = spec_schema()
    return {
        SCHEMA_PATH: schema_text(schema),
        DOC_PATH: spec_markdown(schema) + monitoring_markdown(),
    }


class SpecReferenceKind(ArtifactKind):
    """The spec's JSON Schema and docs/spec.md."""

    name = "docs-spec"

    def fleet_files(self, run: Run, parts: Sequence[Any]) -> dict[str, str]:
        return reference_files()
