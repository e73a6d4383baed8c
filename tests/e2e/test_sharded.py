"""End to end on the sharded topology: 2 Prometheus shards + VictoriaMetrics + vmalert + AM.

Same spec (with `deploy: {shards: 2}`), same expected notifications as the single-Prometheus
e2e (tests/e2e/test_scenarios.py asserts the scenario table there): a GPU lost in the suite;
`make e2e-sharded` adds a healthy hour, a hang and a throughput drop (data loader starvation).
Then, once those runs have ended, one shard is SIGKILLed under a healthy job whose two nodes
sit on different shards: the only notification is ShardNotReporting naming that shard (a
ticket); no job-level alert fires on the missing half (TrainingTargetsDown, TrainingStalled,
ThroughputBelowFloor...).

Each alert's delay from fault onset is printed next to the remote-write delay measured on the
global store (age of the shards' heartbeats), and asserted within what the single-server rules
allow (`for` plus the alert's own window) plus evaluation and remote-write delays.
"""

from __future__ import annotations

import dataclasses
import os
import time

import pytest

from tests.conftest import JOBS, TOPOLOGY_GROUP, require_tool
from tests.e2e.matrix import GPUS_PER_NODE, NODES, Results, Run, run_matrix
from tests.stacks.sharded import ShardedStack
from tests.stacks.vm import BINARIES
from trainsignals.generator.deploy.sharding import HEARTBEAT
from trainsignals.generator.loader import load_specs
from trainsignals.generator.spec.monitoring import DEFAULT_SETTINGS
from trainsignals.generator.spec.pipeline_alerts import SHARD_ALERT
from trainsignals.simulator.scenarios import SCENARIOS

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group(TOPOLOGY_GROUP)]

SHARDS = 2
MINUTE = 60
HEALTHY = dataclasses.replace(SCENARIOS["healthy"], duration=60 * MINUTE)
# The suite runs a GPU lost and the dead shard (about 80 s); `make e2e-sharded`
# (TRAINSIGNALS_SHARDED=all) adds a healthy hour, a hang and a throughput drop (about 130 s).
FULL = os.environ.get("TRAINSIGNALS_SHARDED") == "all"
RUNS = [HEALTHY, *(SCENARIOS[n] for n in ("gpu_lost", "hang", "data_loader_starvation"))]
RUNS = RUNS if FULL else [SCENARIOS["gpu_lost"]]
# After every other run has ended (at scale 60, plus grace): kill shard 1. The job's nodes
# e2e-shard-down-node0/1 hash to shards 0 and 1 (hashmod 2 of their md5).
KILL_AT = max(s.duration for s in RUNS) + 11 * MINUTE
SHARD_DOWN = dataclasses.replace(
    SCENARIOS["healthy"], name="shard_down", duration=KILL_AT + 14 * MINUTE, fault_at=KILL_AT
)
KILLED = 1
GRACE_SECONDS = 8
# A page may come this much later than the single-server rules allow: an evaluation on each
# side of the remote write (1 s each), the write itself (1 s deadline) and Alertmanager's
# group_wait (3 s), with a second of slack for the shared CPUs.
EXTRA_SECONDS = 7.0


def _probe(stack: ShardedStack, runs: dict[str, Run]) -> dict[str, list[dict]]:
    """Measure the heartbeats' age on the global store, then kill the shard at its onset."""
    ages: list[float] = []
    victim = runs["shard_down"]
    while time.time() < victim.onset_real:
        for item in stack.query(f"time() - {HEARTBEAT}"):
            ages.append(float(item["value"][1]))
        time.sleep(0.5)
    stack.kill_shard(KILLED)
    return {"heartbeat_age": [{"max": max(ages), "mean": sum(ages) / len(ages), "n": len(ages)}]}


@pytest.fixture(scope="module")
def results() -> Results:
    require_tool("prometheus-alertmanager")
    for name in BINARIES:
        require_tool(name)
    base = load_specs([JOBS / "minimal.yaml"])[0]
    base = base.model_copy(update={"deploy": base.deploy.model_copy(update={"shards": SHARDS})})
    return run_matrix(
        ShardedStack,
        [*RUNS, SHARD_DOWN],
        targets_per_run=NODES * GPUS_PER_NODE + NODES,
        grace=GRACE_SECONDS,
        probe=_probe,  # type: ignore[arg-type]
        prefix="trainsignals-shard-e2e-",
        base=base,
    )


def _fired(results: Results, name: str) -> dict[str, str]:
    return {n.alertname: n.severity for n in results.fired(results.runs[name])}


@pytest.mark.parametrize("name", [s.name for s in RUNS])
def test_sharded_stack_notifies_as_one_prometheus(results: Results, name: str) -> None:
    run = results.runs[name]
    expected = run.scenario.alerts_for(run.spec)  # the single-Prometheus e2e's expectation
    fired = results.fired(run)
    age = results.panels["heartbeat_age"][0]
    when = sorted((round(n.starts_at - run.onset_real, 1), n.alertname) for n in fired)
    print(f"{name}: (s after onset, alert) {when}; heartbeat age on the store {age}")
    assert {n.alertname: n.severity for n in fired} == expected, when
    for n in fired:
        assert n.path == f"/{run.spec.team}/{n.severity}"
        # The single server's labels: the rule's own plus its series' (node, gpu, uuid for
        # GPU alerts), none that the topology adds.
        rule = next(
            r for g in run.rules["groups"] for r in g["rules"] if r.get("alert") == n.alertname
        )
        assert rule["labels"].items() <= n.labels.items()
        assert not {"shard", "alertgroup", "__name__"} & set(n.labels), n.labels
        if n.alertname.startswith("Gpu"):
            assert {"node", "gpu", "uuid"} <= set(n.labels), n.labels
        # The single server's bound: its `for` after the onset, plus the alert's windows
        # (compressed: at most a few seconds at this scale), plus the sharded path's delays.
        bound = run.for_seconds(n.alertname) + 30 * MINUTE / run.scale + EXTRA_SECONDS
        assert n.arrived_wall - run.onset_real <= bound, (n.alertname, when)
    for alertname, severity in expected.items():
        if severity == "page":
            posts = {n.notification for n in fired if n.alertname == alertname}
            assert len(posts) == 1, f"{name}: {alertname} paged {len(posts)} times"


def test_dead_shard_is_one_ticket_naming_it(results: Results) -> None:
    run = results.runs["shard_down"]
    fired = results.fired(run)
    assert _fired(results, "shard_down") == {SHARD_ALERT: "ticket"}, [
        (n.alertname, n.labels) for n in fired
    ]
    (ticket,) = {n.labels["shard"] for n in fired}
    assert ticket == str(KILLED)
    # The monitoring team's (the stack's meta routes), not the job team's: theirs to fix.
    assert all(n.path == f"/{DEFAULT_SETTINGS.team}/ticket" for n in fired), fired
    assert all(n.starts_at >= run.onset_real for n in fired)
