"""`promtool test rules` on a test file, one rule subset per need (testkit/rule_subsets.py).

The suite's promtool runs were ~40% of its CPU, most of it rules a test group never reads
being evaluated at every step. Each group still runs in real promtool against the generated
rules it reads, in their groups and order; `make check` runs the whole files as written.
"""

from __future__ import annotations

import subprocess
from collections.abc import Collection
from pathlib import Path

import yaml

from trainsignals.generator.output.yaml import dump
from trainsignals.generator.testkit.rule_subsets import split_suite

from .conftest import run_tool


def changed_rules(before: dict, after: dict) -> set[str]:
    """The record and alert names whose rules differ between two rule documents."""

    def rules(document: dict) -> dict[str, list[dict]]:
        found: dict[str, list[dict]] = {}
        for group in document.get("groups") or []:
            for rule in group["rules"]:
                found.setdefault(rule.get("record", rule.get("alert")), []).append(rule)
        return found

    old, new = rules(before), rules(after)
    return {name for name in old.keys() | new.keys() if old.get(name) != new.get(name)}


def load_yaml(text: str) -> dict:
    """libyaml's parser: the 512-rank job's test file takes 2 s in pure Python, 0.2 s here."""
    return yaml.load(text, Loader=yaml.CSafeLoader)


def write_subsets(test_file: Path, reading: Collection[str] | None = None) -> list[str]:
    """Beside `test_file`, one test file (and its rule files) per rule subset its groups
    need; their names, relative to its folder. `reading`: only the subsets that run one of
    these rules (a test that breaks a rule: no other group's outcome can change)."""
    folder, suite = test_file.parent, load_yaml(test_file.read_text())
    rule_files = suite.get("rule_files") or []
    documents = {name: load_yaml((folder / name).read_text()) for name in rule_files}
    subsets = split_suite(suite, documents)
    if reading is not None:
        subsets = [subset for subset in subsets if subset.reads_any(reading)]
        if not subsets:  # promtool given no file would fail, and a mutation test pass
            raise AssertionError(f"no test group of {test_file.name} reads {sorted(reading)}")
    written = []
    for index, subset in enumerate(subsets):
        prefix = f"{test_file.name.removesuffix('.yaml')}.subset-{index}"
        names = {name: f"{prefix}.{Path(name).name}" for name in rule_files}
        for name, document in subset.rule_documents.items():
            (folder / names[name]).write_text(dump(document))
        (folder / f"{prefix}.yaml").write_text(
            dump({**suite, "rule_files": [names[n] for n in rule_files], "tests": subset.tests})
        )
        written.append(f"{prefix}.yaml")
    return written


def promtool_test(
    test_file: str | Path, cwd: Path, timeout: int = 900, reading: Collection[str] | None = None
) -> subprocess.CompletedProcess:
    """`promtool test rules test_file` (relative to `cwd`), run as its subsets in one promtool
    (`reading`: write_subsets')."""
    files = write_subsets(cwd / test_file, reading)
    return run_tool("promtool", "test", "rules", *files, cwd=cwd, timeout=timeout)
