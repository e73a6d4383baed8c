"""What the culprit scenarios' notifications must name, on the real stack
(tests/e2e/test_scenarios.py): the straggler ticket names the slow host's node and ranks, the
first page of a hang names the stuck rank, or says that no single rank differs.

`TRAINSIGNALS_E2E_SCENARIOS=slow_host,hang_data_wait,hang,healthy` runs only those scenarios
of the matrix (default: every one); each takes tens of seconds to minutes of real time.
"""

from __future__ import annotations

import os
import re

from tests.e2e.matrix import Run
from trainsignals.generator.alerts.definitions.straggler import TRAINING_STRAGGLER
from trainsignals.generator.signals.hang_suspects import NO_SUSPECT
from trainsignals.simulator.scenarios import SCENARIOS
from trainsignals.stacks.stack import Notification

ENV = "TRAINSIGNALS_E2E_SCENARIOS"
# The suspects annotation's entries (generator/signals/hang_suspects.py).
SUSPECT = re.compile(r"rank (\d+) on (\S+) \((\w+)\)")


def chosen_scenarios() -> list[str]:
    """The scenarios to run: those named in TRAINSIGNALS_E2E_SCENARIOS, else all."""
    wanted = [n.strip() for n in os.environ.get(ENV, "").split(",") if n.strip()]
    unknown = sorted(set(wanted) - set(SCENARIOS))
    if unknown:
        raise ValueError(f"{ENV}: unknown scenarios {unknown}")
    return wanted or list(SCENARIOS)


def first_page(fired: list[Notification]) -> Notification:
    pages = sorted((n for n in fired if n.severity == "page"), key=lambda n: n.arrived_wall)
    assert pages, "no page"
    return pages[0]


def suspects(page: Notification) -> set[tuple[str, str, str]]:
    """(rank, node, reason) of each suspect the page's annotation names."""
    return set(SUSPECT.findall(page.annotations.get("suspects", "")))


def check_culprit(run: Run, fired: list[Notification]) -> None:
    """The scenario's notifications name its culprit (no-op for other scenarios)."""
    assert run.sim is not None
    name = run.scenario.name
    if name == "slow_host":
        slow = run.sim.nodes[-1]  # scenarios_culprit.SLOW_NODE
        tickets = [n for n in fired if n.alertname == TRAINING_STRAGGLER]
        assert tickets, "no straggler ticket"
        for n in tickets:
            assert n.severity == "ticket", n.labels
            assert n.labels["node"] == slow.name, n.labels
            assert n.labels["rank"] in {str(r.rank) for r in slow.ranks}, n.labels
            assert n.labels["gpu"] == str(int(n.labels["rank"]) % len(slow.ranks)), n.labels
    elif name == "hang_data_wait":
        stuck = run.sim.ranks[-1]  # scenarios_culprit.STUCK_RANK
        node = run.sim.nodes[stuck.node].name
        page = first_page(fired)
        named = suspects(page)
        assert {(rank, at) for rank, at, _ in named} == {(str(stuck.rank), node)}, page.annotations
        assert (str(stuck.rank), node, "phase") in named, page.annotations
    elif name == "hang":
        page = first_page(fired)
        assert page.annotations.get("suspects", "").strip() == NO_SUSPECT, page.annotations
