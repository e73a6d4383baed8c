"""No product module outside an alert's definition types its name: a name typed in a second
place is a relation nobody declared (issue 26). Every string literal (docstrings aside) of the
product's Python modules is scanned for the name of any alert of any family: the job alerts
(generator/alerts/definitions/), the meta-monitoring alerts, the on-call and shard alerts
(generator/spec/pipeline_alerts.py). A module that needs an alert imports its name from the
definition.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from trainsignals.generator.alerts.catalog import ALERTS
from trainsignals.generator.meta.rules import DEFAULT_SEVERITIES, HEARTBEAT
from trainsignals.generator.spec.monitoring import META_ALERT_NAMES
from trainsignals.generator.spec.pipeline_alerts import FAMILIES, PIPELINE_ALERTS

from .conftest import ROOT

PRODUCT = ("generator", "trainsignals", "exporters", "simulator")
# Where an alert's name is its definition: the job alerts' modules, the pipeline alerts' names
# (generator/spec/pipeline_alerts.py) and the pipeline alerts' runbook texts (runbook templates).
DEFINITIONS = (
    "generator/alerts/definitions/",
    "generator/spec/pipeline_alerts.py",
    "generator/meta/files.py",
)
# Modules that still type names, and why. Shrinking only: the test fails when an entry no longer
# types any name (delete it), and no module may join.
ALLOWED: dict[str, str] = {}


def all_alert_names() -> set[str]:
    """Every alert of every family, from the declarations: the job alerts' definitions and the
    pipeline's (meta, on-call, shard: generator/spec/pipeline_alerts.py)."""
    return {a.name for a in ALERTS} | {a.name for a in PIPELINE_ALERTS}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
        if isinstance(node, kinds) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def typed_names(path: Path, pattern: re.Pattern[str]) -> set[str]:
    """Alert names in the string literals of `path`, docstrings aside (they explain)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstrings(tree)
    return {
        name
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        if id(node) not in docs
        for name in pattern.findall(node.value)
    }


def offenders() -> dict[str, set[str]]:
    names = sorted(all_alert_names(), key=len, reverse=True)
    pattern = re.compile(r"\b(" + "|".join(names) + r")\b")
    found = {}
    for folder in PRODUCT:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith(DEFINITIONS):
                continue
            typed = typed_names(path, pattern)
            if typed:
                found[rel] = typed
    return found


def test_no_product_module_types_an_alert_name() -> None:
    found = offenders()
    new = {path: sorted(typed) for path, typed in found.items() if path not in ALLOWED}
    assert not new, (
        "these modules type alert names; import the name from the alert's definition "
        f"(generator/alerts/definitions/, generator/spec/pipeline_alerts.py) instead: {new}"
    )
    stale = sorted(set(ALLOWED) - set(found))
    assert not stale, f"no longer type alert names: remove them from ALLOWED: {stale}"


def test_the_scan_finds_a_typed_name(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""NodeDown in a docstring is fine."""\nX = f"{1} NodeDown"\n')
    assert typed_names(module, re.compile(r"\b(NodeDown)\b")) == {"NodeDown"}


def test_meta_names_agree() -> None:
    assert set(META_ALERT_NAMES) == {HEARTBEAT, *DEFAULT_SEVERITIES}


def test_every_family_is_declared_once() -> None:
    """One declaration per alert across the families: a name defined twice would be two
    alerts routed, inhibited and documented apart."""
    names = [a.name for a in ALERTS] + [a.name for a in PIPELINE_ALERTS]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    assert {a.family for a in PIPELINE_ALERTS} == set(FAMILIES)


def test_an_undeclared_family_member_is_still_found(tmp_path: Path) -> None:
    """The scan covers the pipeline families: a module typing the on-call or shard alert's
    name is caught like one typing a job alert's."""
    names = sorted(all_alert_names(), key=len, reverse=True)
    pattern = re.compile(r"\b(" + "|".join(names) + r")\b")
    module = tmp_path / "m.py"
    for alert in PIPELINE_ALERTS:
        module.write_text(f'SEVERITY = {{"{alert.name}": "{alert.severity}"}}\n')
        assert typed_names(module, pattern) == {alert.name}


def test_declared_runbooks_exist() -> None:
    """A pipeline alert's declared runbook is a generated runbooks/<Alert>.md (from the module
    it names) or a README section."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for alert in PIPELINE_ALERTS:
        source, _, anchor = alert.runbook.partition("#")
        assert (ROOT / source).is_file(), (alert.name, alert.runbook)
        if source == "README.md":
            headings = {
                "-".join(
                    "".join(
                        c for c in line.lstrip("#").strip().lower() if c.isalnum() or c == " "
                    ).split()
                )
                for line in readme.splitlines()
                if line.startswith("#")
            }
            assert anchor in headings, (alert.name, anchor)
        else:
            assert (ROOT / "runbooks" / f"{alert.name}.md").is_file(), alert.name
