"""What `validate` refuses for a type, an enum or a pattern, the JSON Schema refuses too.

Editors validate specs with docs/spec.schema.json (yaml-language-server); a value the schema
accepts but `validate` refuses is not flagged where it is typed (issue 27: `gpu_model:
A100-SXM`, `name: MoE_30B`). Each case here is refused by both: by the loader, naming the field,
and by check-jsonschema (a separate implementation, as an editor or CI would run it) on the
committed schema.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from trainsignals.generator.loader import SpecError, parse_spec

from .conftest import ROOT

SCHEMA = ROOT / "docs" / "spec.schema.json"
CHECK_JSONSCHEMA = shutil.which("check-jsonschema", path=str(Path(sys.executable).parent))

# A valid Kubernetes job (so every nested section the cases reach exists).
BASE: dict[str, Any] = {
    "name": "moe-30b",
    "team": "research",
    "rotation": "research-oncall",
    "selector": {"training_job": "moe-30b"},
    "shape": {
        "nodes": 16,
        "gpus_per_node": 8,
        "gpu_model": "H100-SXM",
        "model_flops_per_token": 1.8e11,
    },
    "routing": {
        "page": {"kind": "pagerduty", "secret": {"name": "research-pd", "key": "routing-key"}},
        "ticket": {"kind": "slack", "secret": {"name": "research-slack", "key": "url"}},
    },
    "recovery": {
        "infra_team": "gpu-infra",
        "infra_routing": {
            "page": {"kind": "pagerduty", "secret": {"name": "infra-pd", "key": "routing-key"}},
            "ticket": {"kind": "slack", "secret": {"name": "infra-slack", "key": "url"}},
        },
    },
    "slos": [{"sli": "goodput", "objective": 0.85}],
    "objectives": {"stall_after": "10m"},
    "deploy": {
        "kubernetes": {
            "pod_labels": {"app.kubernetes.io/name": "moe-30b"},
            "gpu_exporter": {"node_selector": {"nvidia.com/gpu.present": "true"}},
        }
    },
}

# (field path, bad value, what the loader's message names)
REFUSED: list[tuple[str, Any, str]] = [
    ("name", "MoE_30B", "name"),
    ("team", 'research"x', "team"),
    ("rotation", "on{call}", "rotation"),
    ("selector", {"bad-label": "x"}, "selector"),
    ("selector", {"training_job": "a\\b"}, "selector"),
    ("shape.gpu_model", "A100-SXM", "shape.gpu_model"),
    ("shape.gpu_model", "NVIDIA H100 80GB HBM3", "shape.gpu_model"),
    ("shape.nodes", "sixteen", "shape.nodes"),
    ("shape.dtype", "int8", "shape.dtype"),
    ("recovery.infra_team", "gpu'infra", "recovery.infra_team"),
    ("recovery.mode", "restart", "recovery.mode"),
    ("routing.page.kind", "pager", "routing.page"),
    ("routing.page.secret.name", "Research_PD", "routing.page.secret.name"),
    ("slos.0.objective", 85, "slos[0].objective"),
    ("slos.0.sli", "uptime", "slos[0].sli"),
    ("objectives.stall_after", 10, "objectives.stall_after"),
    ("objectives.stall_after", "ten minutes", "objectives.stall_after"),
    ("alerts", {"NoSuchAlert": "page"}, "alerts"),
    ("alerts", {"GpuLost": "urgent"}, "alerts.GpuLost"),
    ("deploy.kubernetes.namespace", "Monitoring", "deploy.kubernetes.namespace"),
    ("deploy.kubernetes.pod_labels", {"bad key!": "x"}, "deploy.kubernetes.pod_labels"),
    ("deploy.kubernetes.pod_labels", {"app": "bad value!"}, "deploy.kubernetes.pod_labels"),
    (
        "deploy.kubernetes.gpu_exporter.node_selector",
        {"nvidia.com/gpu.present": "yes please"},
        "deploy.kubernetes.gpu_exporter.node_selector",
    ),
    (
        "deploy.kubernetes.gpu_exporter.affinity",
        {"nodeaffinity": {}},
        "deploy.kubernetes.gpu_exporter.affinity",
    ),
    ("deploy.kubernetes.node_exporter_labels", {"-x": "y"}, "node_exporter_labels"),
    ("unknown_key", 1, "unknown_key"),
]


def _with(path: str, value: Any) -> dict[str, Any]:
    spec = copy.deepcopy(BASE)
    *parents, last = path.split(".")
    node: Any = spec
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    node[int(last) if last.isdigit() else last] = value
    return spec


def _schema_refuses(tmp_path: Path, specs: dict[str, dict]) -> dict[str, bool]:
    """{file name: refused} from one check-jsonschema run over every file."""
    assert CHECK_JSONSCHEMA, "check-jsonschema is in the dev extras: pip install -e '.[dev]'"
    for name, spec in specs.items():
        (tmp_path / name).write_text(yaml.safe_dump(spec), encoding="utf-8")
    done = subprocess.run(
        [CHECK_JSONSCHEMA, "--schemafile", str(SCHEMA), *specs],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr  # 1: invalid; else broken
    # One `<file>::<json path>: <message>` line per error.
    refused = {line.strip().split("::", 1)[0] for line in done.stdout.splitlines() if "::" in line}
    assert refused <= set(specs), done.stdout
    return {name: name in refused for name in specs}


def test_the_base_spec_is_valid_for_both(tmp_path: Path) -> None:
    parse_spec(tmp_path / "base.yaml", yaml.safe_dump(BASE))
    assert _schema_refuses(tmp_path, {"base.yaml": BASE}) == {"base.yaml": False}


def test_schema_refuses_what_validate_refuses(tmp_path: Path) -> None:
    specs = {f"case{i}.yaml": _with(path, value) for i, (path, value, _) in enumerate(REFUSED)}
    for (path, value, named), (name, spec) in zip(REFUSED, specs.items(), strict=True):
        with pytest.raises(SpecError) as caught:
            parse_spec(tmp_path / name, yaml.safe_dump(spec))
        assert any(named in line for line in caught.value.problems), (path, value, caught.value)
    refused = _schema_refuses(tmp_path, specs)
    accepted = [
        f"{path}: {value!r}"
        for (path, value, _), name in zip(REFUSED, specs, strict=True)
        if not refused[name]
    ]
    assert not accepted, f"validate refuses, the schema accepts: {accepted}"
