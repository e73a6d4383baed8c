"""Fault tests on the real pipeline: shared helpers and the per-fault results table.

Every test adds one row per fault (pages expected, delivered, duplicates, delay); at the end of
the session the table is written to $TRAINSIGNALS_CHAOS_TABLE (`make chaos` prints it) or to
the session's temporary folder, and printed with `-s`.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import require_tool
from tests.stacks.ha import GaugeTarget, HAStack
from trainsignals.generator.spec.job import JobSpec
from trainsignals.stacks.stack import FAST_TIMING

JOB = "chaos"
SPEC = JobSpec.model_validate(
    {
        "name": JOB,
        "team": JOB,
        "shape": {
            "nodes": 1,
            "gpus_per_node": 1,
            "gpu_model": "H100-SXM",
            "model_flops_per_token": 1e9,
        },
    }
)
# The test's own alerts: a gauge the test flips, routed like any page of team `chaos`.
PAGE_LABELS = {"severity": "page", "team": JOB}


@dataclass
class Row:
    fault: str
    expected: int
    delivered: int
    duplicates: int
    delay: str
    note: str = ""


_ROWS: list[Row] = []


@pytest.fixture(scope="session")
def fault_table() -> Iterator[list[Row]]:
    yield _ROWS
    if not _ROWS:
        return
    lines = [
        "| fault | pages expected | delivered | duplicates | delay | note |",
        "|---|---|---|---|---|---|",
        *(
            f"| {r.fault} | {r.expected} | {r.delivered} | {r.duplicates} | {r.delay} | {r.note} |"
            for r in _ROWS
        ),
    ]
    text = "\n".join(lines) + "\n"
    out = os.environ.get("TRAINSIGNALS_CHAOS_TABLE")
    path = Path(out) if out else Path(tempfile.gettempdir()) / f"chaos-{os.getpid()}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(text)
    print("\n" + text)


def wait_until(check: Callable[[], object], timeout: float, what: str, step: float = 0.2):
    """Poll `check` until it returns something truthy; fail the test naming `what`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(step)
    pytest.fail(f"timed out after {timeout:g} s waiting for {what}")


def rules_file(path: Path, rules: list[dict]) -> Path:
    path.write_text(json.dumps({"groups": [{"name": "chaos", "rules": rules}]}), "utf-8")
    return path


def page_rule(alert: str, fault: str, for_: str) -> dict:
    return {
        "alert": alert,
        "expr": f'chaos_fault{{fault="{fault}"}} == 1',
        "for": for_,
        "labels": PAGE_LABELS,
    }


class Pipeline:
    """An HAStack plus two scrape targets of the `chaos` job whose gauges the test flips."""

    def __init__(self, workdir: Path, stack: HAStack, targets: list[GaugeTarget]) -> None:
        self.workdir, self.stack, self.targets = workdir, stack, targets
        self.receiver = stack.receiver

    def set_fault(self, fault: str, value: float) -> None:
        self.targets[0].values[f'chaos_fault{{fault="{fault}"}}'] = value


@pytest.fixture
def pipeline_factory(tmp_path: Path) -> Iterator[Callable[..., Pipeline]]:
    require_tool("prometheus")
    require_tool("prometheus-alertmanager")
    started: list[tuple[HAStack, list[GaugeTarget]]] = []

    def make(
        rules: list[dict], *, alertmanagers: int, page_group_wait: str = "1s", **stack: object
    ) -> Pipeline:
        workdir = Path(tempfile.mkdtemp(dir=tmp_path))
        targets = [GaugeTarget(), GaugeTarget()]
        sd = workdir / "sd"
        sd.mkdir()
        for kind, target in zip(("training", "gpu"), targets, strict=True):
            target.values["chaos_up"] = 1
            entry = [{"targets": [target.address], "labels": {"training_job": JOB, "node": "n0"}}]
            (sd / f"{kind}.json").write_text(json.dumps(entry), "utf-8")
        timing = {k: dict(v) for k, v in FAST_TIMING.items()}
        timing["page"]["group_wait"] = page_group_wait
        ha = HAStack(
            workdir / "stack",
            [SPEC],
            [sd],
            [rules_file(workdir / "chaos.rules.yaml", rules)],
            timing,
            alertmanagers=alertmanagers,
            **stack,  # type: ignore[arg-type]
        )
        started.append((ha, targets))
        ha.__enter__()
        ha.wait_for_targets(2 + 1 + alertmanagers)
        return Pipeline(workdir, ha, targets)

    yield make
    for stack, targets in started:
        stack.stop()
        for target in targets:
            target.stop()
