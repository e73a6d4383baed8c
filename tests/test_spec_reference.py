"""The spec's reference: the JSON Schema editors use and docs/spec.md, both from the models."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml
from pydantic import BaseModel

from trainsignals.generator.docs.spec_reference import (
    DOC_PATH,
    MODELINE,
    SCHEMA_PATH,
    _models,
    reference_files,
)
from trainsignals.generator.loader import SpecError, parse_spec
from trainsignals.generator.spec.job import JobSpec


class Yaml12Loader(yaml.SafeLoader):
    """YAML 1.2 scalars, as yaml-language-server reads them: `4.2e10` is a number and `off`
    is a string (PyYAML's YAML 1.1 reads a string and false)."""


Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if not tag.endswith((":bool", ":float"))]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|false)$"), list("tf")
)
Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$"),
    list("-+0123456789."),
)


@pytest.fixture(scope="module")
def schema(repo_root: Path) -> dict:
    return json.loads((repo_root / SCHEMA_PATH).read_text())


@pytest.fixture(scope="module")
def validator(schema: dict) -> jsonschema.Draft202012Validator:
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def example_specs(repo_root: Path) -> list[Path]:
    return sorted((repo_root / "jobs").glob("*.yaml"))


def test_example_specs_name_the_schema_and_it_accepts_them(
    repo_root: Path, validator: jsonschema.Draft202012Validator
) -> None:
    for path in example_specs(repo_root):
        text = path.read_text()
        first = text.splitlines()[0]
        assert first == MODELINE, path
        assert (path.parent / first.split("$schema=")[1]).resolve() == repo_root / SCHEMA_PATH
        errors = [e.message for e in validator.iter_errors(yaml.load(text, Yaml12Loader))]
        assert not errors, f"{path}: {errors}"


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        ("objectives: {stall_after: 10}\n", "a bare number duration"),
        ("objectives: {stall_after: 10 minutes}\n", "a duration in words"),
        ("objectives: {stal_after: 10m}\n", "an unknown key"),
        ("deploy: {kubernetes: {gpu_exporter: {tolerations: [{keyy: a}]}}}\n", "a deep typo"),
        ("alerts: {LossPlateu: page}\n", "an unknown alert"),
        ("alerts: {LossPlateau: sometimes}\n", "an unknown severity"),
        ("slos: [{sli: goodput, objective: 1.5}]\n", "an objective above 1"),
    ],
)
def test_schema_refuses_what_the_loader_refuses(
    repo_root: Path, validator: jsonschema.Draft202012Validator, extra: str, why: str
) -> None:
    text = (repo_root / "jobs/minimal.yaml").read_text() + extra
    with pytest.raises(SpecError):
        parse_spec(Path("jobs/minimal.yaml"), text)
    assert list(validator.iter_errors(yaml.load(text, Yaml12Loader))), why


def test_schema_writes_defaults_as_a_spec_would(schema: dict) -> None:
    objectives = schema["$defs"]["Objectives"]["properties"]
    assert objectives["stall_after"]["default"] == "10m"
    assert objectives["stall_after"]["type"] == "string"
    assert schema["properties"]["selector"]["default"] == {}
    assert "title" not in objectives["stall_after"]


def test_every_field_is_described_and_in_the_reference(repo_root: Path) -> None:
    doc = (repo_root / DOC_PATH).read_text()
    models: dict[str, type[BaseModel]] = _models(JobSpec, {})
    assert {"JobSpec", "Objectives", "Deploy", "Kubernetes", "SecretRef"} <= set(models)
    for name, model in models.items():
        section = doc.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
        for field, info in model.model_fields.items():
            assert info.description, f"{name}.{field} has no Field(description=...)"
            assert f"| `{field}` |" in section, f"{name}.{field} missing from {DOC_PATH}"


def row(doc: str, field: str) -> list[str]:
    line = next(line for line in doc.splitlines() if line.startswith(f"| `{field}` |"))
    return [cell.strip() for cell in line.strip("|").split(" | ")]


def test_reference_rows_give_type_default_and_unit(repo_root: Path) -> None:
    doc = (repo_root / DOC_PATH).read_text()
    assert row(doc, "stall_after")[1:4] == [
        "duration",
        '`"10m"`',
        "duration: `90s`, `10m`, `6h`, `1d`",
    ]
    assert row(doc, "step_time_max_seconds")[3] == "seconds"
    assert row(doc, "gpu_temperature_max_celsius")[2:4] == ["`87.0`", "°C"]
    assert row(doc, "name")[2] == "**required**"
    assert row(doc, "gpus_per_node")[1] == "integer (&gt;= 1, &lt;= 16)"  # HTML-escaped


def test_reference_is_generated_from_the_models(repo_root: Path) -> None:
    files = reference_files()
    assert files[SCHEMA_PATH] == (repo_root / SCHEMA_PATH).read_text()
    assert files[DOC_PATH] == (repo_root / DOC_PATH).read_text()
    assert json.loads(files[SCHEMA_PATH])["$defs"]["Shape"]["required"] == ["gpu_model"]
