"""`promtool test rules` on a test file, one rule subset per need (testkit/rule_subsets.py).

The suite's promtool runs were ~40% of its CPU, most of it rules a test group never reads
being evaluated at every step. Each group still runs in real promtool against the generated
rules it reads, in their groups and order; `make check` runs the whole files as written.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from trainsignals.generator.output.yaml import dump
from trainsignals.generator.testkit.rule_subsets import split_suite

from .conftest import run_tool


def _load(path: Path) -> dict:
    return yaml.load(path.read_text(), Loader=yaml.CSafeLoader)


def write_subsets(test_file: Path) -> list[str]:
    """Beside `test_file`, one test file (and its rule files) per rule subset its groups
    need; their names, relative to its folder."""
    folder, suite = test_file.parent, _load(test_file)
    rule_files = suite.get("rule_files") or []
    documents = {name: _load(folder / name) for name in rule_files}
    written = []
    for index, subset in enumerate(split_suite(suite, documents)):
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
    test_file: str | Path, cwd: Path, timeout: int = 900
) -> subprocess.CompletedProcess:
    """`promtool test rules test_file` (relative to `cwd`), run as its subsets in one promtool."""
    files = write_subsets(cwd / test_file)
    return run_tool("promtool", "test", "rules", *files, cwd=cwd, timeout=timeout)
