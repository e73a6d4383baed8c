"""Shared fixtures: the repository root, the example specs, and real Prometheus tools."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainsignals import reaper

from .pager_shaped import PagerShaped

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


def pytest_configure(config: pytest.Config) -> None:
    """Clean teardown: SIGTERM unwinds like Ctrl-C (fixtures stop their processes), and an
    xdist worker gets SIGTERM when the controlling pytest dies, however it died."""
    worker = hasattr(config, "workerinput")  # an xdist worker
    reaper.raise_on_sigterm(forward=not worker)  # the controller passes it on to workers
    if worker:
        reaper.die_with_parent()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Again before each test: a CLI run in-process (simulate, the GPU exporter) installs its
    own SIGTERM handler and leaves it behind."""
    reaper.raise_on_sigterm(forward=not hasattr(item.config, "workerinput"))


def pytest_unconfigure(config: pytest.Config) -> None:
    """Session-level cleanup: whatever a test spawned through the reaper and left running."""
    reaper.stop_all()


@pytest.fixture
def shaped() -> Iterator[PagerShaped]:
    """A local receiver shaped like PagerDuty Events v2 and Slack (tests/pager_shaped.py)."""
    found = PagerShaped()
    yield found
    found.stop()
