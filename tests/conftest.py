"""Shared fixtures: the repository root, the example specs, and real Prometheus tools."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from trainsignals.stacks import reaper

from .pager_shaped import PagerShaped
from .wheel_build import installed  # noqa: F401  (the wheel tests share one session build)

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


# Tests that run a real stack on compressed time: a scrape answered late there is a target
# down and a false page. Three xdist groups, each on a worker of its own, run them one after
# another within the group: the Prometheus scenario matrix (8 light stacks at a time, mostly
# waiting on compressed time; its healthy simulated day alone is 360 s of real time), the
# other tests/e2e topologies (sharded, Slurm, dcgm-exporter, MIG, readiness, goodput and the
# VictoriaMetrics matrix) and `real-stack`, every other stack test. Together ~0.5-1 of a
# core. (One group once held them all: the Prometheus and VictoriaMetrics matrices started
# together and lost every scrape for ~25 s, when the Prometheus matrix was 23 jobs on one
# Prometheus at 1-1.5 cores; now each scenario has a light stack of its own, and the timed
# groups run at nice -10.) Everything else is CPU-bound work at nice 10 that must leave them
# the CPU they ask for.
MATRIX_GROUP = "scenario-matrix"
TOPOLOGY_GROUP = "e2e-topologies"
STACK_GROUP = "real-stack"
TIMED_GROUPS = frozenset({STACK_GROUP, TOPOLOGY_GROUP, MATRIX_GROUP})
ONE_CORE = {"GOMAXPROCS": "1", "OMP_NUM_THREADS": "1"}  # Go tools; torch and numpy


def run_tool(name: str, *args: str, **kwargs: object) -> subprocess.CompletedProcess:
    """A CPU-bound check tool (promtool's rule tests run for minutes on a 512-rank job) at
    low priority: the other xdist worker's real stack keeps the CPU it needs."""
    return subprocess.run(  # type: ignore[call-overload]
        [require_tool(name), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **ONE_CORE},
        preexec_fn=lambda: os.nice(10),
        **kwargs,
    )


CPU_BOUND_NICE = 10
TIMED_NICE = -10


def _timed(item: pytest.Item) -> bool:
    """In a timed group, or marked `timed`: a test that measures time (a teardown bound,
    a chaos test's page delay) runs at normal priority wherever xdist puts it."""
    if item.get_closest_marker("timed") is not None:
        return True
    marker = item.get_closest_marker("xdist_group")
    group = (marker.args[0] if marker.args else marker.kwargs.get("name")) if marker else None
    return group in TIMED_GROUPS


def _yield_cpu_to_timed_tests(item: pytest.Item) -> None:
    """This worker's priority before a test: CPU-bound tests (and what they start) run at
    nice 10, the timed groups at -10 where allowed (root, as CI's machine is), else 0. So the
    real stack's scrapes are never the ones starved: not by this suite's promtool, nor by
    whatever else shares the machine at nice 0 (a clean-clone suite beside another session's
    CPU-bound work, load 11 on 2 cores, had every matrix stack lose its scrapes for seconds
    again and again, healthy day included). Raising nice is always allowed; lowering it needs
    root: a worker without it runs a later timed group at 10, no worse than both equal."""
    if _timed(item):
        for nice in (TIMED_NICE, 0):
            with contextlib.suppress(PermissionError):
                os.setpriority(os.PRIO_PROCESS, 0, nice)
                break
    elif os.getpriority(os.PRIO_PROCESS, 0) < CPU_BOUND_NICE:
        os.setpriority(os.PRIO_PROCESS, 0, CPU_BOUND_NICE)


@pytest.fixture(autouse=True)
def _cpu_bound_tests_take_one_core(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside the timed groups, the tools a test starts (promtool, Prometheus, torchrun's
    ranks) use one core each: on 2 cores an unbounded promtool starved the real-stack
    simulators' scrapes on the other worker, and every scenario paged TargetsDown."""
    if not _timed(request.node):
        for key, value in ONE_CORE.items():
            monkeypatch.setenv(key, value)


def _cpu_cost(item: pytest.Item) -> float:
    marker = item.get_closest_marker("cpu_cost")
    return float(marker.args[0]) if marker else 0.0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `cpu_cost` first, costliest first; the rest in their order. Under
    `--dist loadgroup` the xdist groups start first, then single tests in this order: the
    longest promtool runs start while the real stacks run, and short tests fill the end."""
    items.sort(key=lambda item: -_cpu_cost(item))  # stable: unmarked tests keep their order


def pytest_configure(config: pytest.Config) -> None:
    """Clean teardown: SIGTERM unwinds like Ctrl-C (fixtures stop their processes), and an
    xdist worker gets SIGTERM when the controlling pytest dies, however it died."""
    worker = hasattr(config, "workerinput")  # an xdist worker
    # Go's collector at a quarter of its default frequency for every Go tool the suite starts
    # (promtool, Prometheus, Alertmanager, VictoriaMetrics): promtool on minimal's tests took
    # 12% less CPU (115 -> 101 s) for 77 -> 141 MB; the stacks here hold tens of MB. A user's
    # own GOGC wins.
    os.environ.setdefault("GOGC", "400")
    reaper.raise_on_sigterm(forward=not worker)  # the controller passes it on to workers
    if worker:
        reaper.die_with_parent()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Again before each test: a CLI run in-process (simulate, the GPU exporter) installs its
    own SIGTERM handler and leaves it behind."""
    reaper.raise_on_sigterm(forward=not hasattr(item.config, "workerinput"))
    if hasattr(item.config, "workerinput"):  # under xdist, beside the other worker
        _yield_cpu_to_timed_tests(item)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Session-level cleanup: whatever a test spawned through the reaper and left running."""
    reaper.stop_all()


@pytest.fixture
def shaped() -> Iterator[PagerShaped]:
    """A local receiver shaped like PagerDuty Events v2 and Slack (tests/pager_shaped.py)."""
    found = PagerShaped()
    yield found
    found.stop()


def load_script(path: Path) -> ModuleType:
    """A script outside the package (bench/, examples/) imported as a module, to test it."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
