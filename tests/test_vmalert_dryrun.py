"""Every generated rule file is accepted by vmalert (the scale-out engine's ruler) unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT, require_tool
from tests.stacks.vm import dry_run

RULE_FILES = sorted((ROOT / "alerts").glob("*.rules.yaml"))


def test_there_are_rule_files() -> None:
    assert len(RULE_FILES) >= 3


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_vmalert_dry_run_accepts(path: Path) -> None:
    require_tool("vmalert")
    result = dry_run(path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_vmalert_dry_run_rejects_a_bad_expression(tmp_path: Path) -> None:
    require_tool("vmalert")
    bad = tmp_path / "bad.rules.yaml"
    bad.write_text("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: rate(x[5m]\n")
    assert dry_run(bad).returncode != 0
