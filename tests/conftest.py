"""Shared fixtures: the repository root, the example specs, and real Prometheus tools."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
JOBS = ROOT / "jobs"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


def require_tool(name: str) -> str:
    """Path of a real binary the test needs; `make setup` installs it, so absence is an error."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(
            f"{name} not found: run `make setup` (Debian packages prometheus, "
            "prometheus-alertmanager)"
        )
    return path
