"""End to end: every scenario of the simulator against real Prometheus and Alertmanager.

Each scenario runs on a real Prometheus and Alertmanager of its own (tests/e2e/matrix.py: one
Simulation each, a spec copy named `e2e-<scenario>` with its own `training_job` selector, rules
and routes), AT_ONCE of them at a time, longest first. Each scenario runs on its own time
scale (its simulated duration in at most ~5.5 real minutes, within the simulator's cap and
floor: matrix.TARGET_REAL_SECONDS); its rules are generated with the same scale. The healthy
simulated day is the longest run and sets the matrix's wall time (~6 minutes; see
matrix.MAX_SCALE).

A scenario's alerts are those that fired (Prometheus `startsAt`) before its simulated duration
ended: after that the simulator's clock stops and a frozen job would look stalled.
"""

from __future__ import annotations

import re
import time

import pytest

from tests.conftest import MATRIX_GROUP, require_tool
from tests.e2e.culprits import check_culprit, chosen_scenarios
from tests.e2e.matrix import GPUS_PER_NODE, NODES, TIMING, Results, Run, run_matrix
from trainsignals.generator.dashboards.kit import panel_queries
from trainsignals.generator.signals.xid_catalog import action_of
from trainsignals.generator.spec.durations import parse_duration
from trainsignals.simulator.profile import JobProfile
from trainsignals.simulator.scenarios_peers import CULPRITS
from trainsignals.stacks.stack import SCRAPE_SECONDS, Stack

# Its own xdist worker (tests/conftest.py MATRIX_GROUP), beside the other real-stack tests.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group(MATRIX_GROUP)]

GRACE_SECONDS = 6  # after a run ends: evaluation, group_wait and delivery
# Scenarios (stacks) at a time: the short ones follow each other beside the long. The matrix
# is a packing, not the healthy day: the other 26 runs are ~2500 s of real time plus ~14 s a
# stack (start, its targets up, the 5 s lead, the 6 s grace, the simulators' stop), so on the
# 7 slots beside the healthy day's 8 take ~430 s (longest first), 9 ~386 s, 10 ~374 s. 10
# took the matrix from 437 s to 380 s, but beside the other stack group on a loaded machine
# the healthy day paged TrainingStalled and two scenarios flapped; 9 took it to ~400 s, but on
# a machine loaded by other work (load 13-16 on 2 cores) every stack lost its scrapes at once
# (NodeDown, TargetsDown) in 8 scenarios and the healthy day. 8 passed there.
AT_ONCE = 8
PANEL_CHECK_AT = 13 * 3600  # simulated healthy time of the dashboard check (training)
GROUP_WAIT = parse_duration(TIMING["page"]["group_wait"])
SCENARIO_NAMES = chosen_scenarios()  # TRAINSIGNALS_E2E_SCENARIOS=a,b runs a subset

# Dashboard queries that are empty on a healthy job by design.
EMPTY_ON_HEALTHY = (
    # Loss panel: the non-finite marker only has points while NaN losses are counted.
    'job:trainsignals_loss:avg{{training_job="{job}"}} and on (training_job) '
    'job:trainsignals_nonfinite_losses:increase5m{{training_job="{job}"}} > 0',
    # Firing-alerts panel.
    'ALERTS{{alertstate="firing",training_job="{job}"}}',
    # GPU errors panel: XIDs seen in the last 10 minutes.
    'gpu:trainsignals_gpu_xid_critical:seen10m{{gpu=~".*",node=~".*",training_job="{job}"}}',
    'gpu:trainsignals_gpu_xid_other:seen10m{{gpu=~".*",node=~".*",training_job="{job}"}}',
    # GPU errors panel: NVML errors per GPU exist only once an NVML call failed.
    'gpu:trainsignals_gpu_nvml_errors:rate15m{{gpu=~".*",node=~".*",training_job="{job}"}}',
    # MIG instance panels: the simulated GPUs are not in MIG mode.
    'mig:trainsignals_mig_memory_used:ratio{{gpu=~".*",node=~".*",training_job="{job}"}}',
    'mig:trainsignals_mig_busy:ratio{{gpu=~".*",node=~".*",training_job="{job}"}}',
    'mig:trainsignals_mig_tensor_active:ratio{{gpu=~".*",node=~".*",training_job="{job}"}}',
    # Network panel: node_exporter's series; the simulator serves no node_exporter.
    'node:trainsignals_network_receive_bytes:rate5m{{node=~".*",training_job="{job}"}}',
    'node:trainsignals_network_transmit_bytes:rate5m{{node=~".*",training_job="{job}"}}',
    # NCCL bus bandwidth per rank: the simulator runs no NCCL Inspector.
    'bottomk(10, rank:trainsignals_nccl_bus_bandwidth:peer_ratio{{training_job="{job}"}})',
    # Suspects panel: recorded only while the job has made no step (a hang).
    'rank:trainsignals_hang_suspect:bool{{training_job="{job}"}}',
    # Nodes by incident count: the fleet's node record (alerts/nodes.rules.yaml), its score
    # from a node's first hardware incident or ticket on; the healthy run has none and loads
    # no nodes rules.
    "topk(10, node:trainsignals_hardware_score:count30d)",
)


def dashboard_exprs(run: Run) -> list[str]:
    return [
        expr.replace("$node", ".*").replace("$gpu", ".*").replace("$__range", "1h")
        for _, expr in panel_queries(run.dashboard)
    ]


def panels_mid_day(stack: Stack, runs: dict[str, Run]) -> dict[str, list[dict]]:
    """Every dashboard query of the healthy job, at PANEL_CHECK_AT simulated (training)."""
    healthy = runs.get("healthy")
    if healthy is None:  # another scenario's stack
        return {}
    assert healthy.sim is not None
    time.sleep(max(0.0, healthy.sim.real_time_at(PANEL_CHECK_AT) - time.time()))
    return {expr: stack.query(expr) for expr in dashboard_exprs(healthy)}


@pytest.fixture(scope="module")
def results() -> Results:
    require_tool("prometheus")
    require_tool("prometheus-alertmanager")
    return run_matrix(
        Stack,
        SCENARIO_NAMES,
        targets_per_run=NODES * GPUS_PER_NODE + 2 * NODES,
        grace=GRACE_SECONDS,
        probe=panels_mid_day,
        at_once=AT_ONCE,
    )


@pytest.mark.parametrize("name", SCENARIO_NAMES)
def test_scenario_alerts(results: Results, name: str) -> None:
    run = results.runs[name]
    expected = run.scenario.alerts_for(run.spec)
    fired = results.fired(run)
    got = {n.alertname: n.severity for n in fired}
    when = sorted(
        (round((n.starts_at - run.onset_real) * run.scale / 60), n.alertname) for n in fired
    )
    assert got == expected, (
        f"{name}: alerts reaching the webhook (fired, sim min after onset: {when})"
    )
    for n in fired:
        assert n.labels["training_job"] == run.job
        assert n.labels["team"] == run.spec.team
        assert n.path == f"/{run.spec.team}/{n.severity}"
        if n.alertname.startswith("GpuXid"):  # NVIDIA's immediate action, where catalogued
            assert n.labels.get("action", "") == action_of(n.labels["xid"]), n.labels
        if name in CULPRITS and n.alertname == CULPRITS[name][0]:  # names node 0's GPU / port
            assert n.labels["node"].endswith("-node0"), n.labels
            assert CULPRITS[name][1].items() <= n.labels.items(), n.labels
    check_culprit(run, fired)
    for alertname, severity in expected.items():
        if severity == "page":
            posts = {n.notification for n in fired if n.alertname == alertname}
            assert len(posts) == 1, f"{name}: {alertname} paged {len(posts)} times"
    if name == "healthy":
        everything = [n for n in results.notifications if n.labels.get("training_job") == run.job]
        assert everything == [], "healthy day: no notification at all"


def test_dashboard_queries_return_data_on_healthy(results: Results) -> None:
    if "healthy" not in results.runs:
        pytest.skip("healthy not among TRAINSIGNALS_E2E_SCENARIOS")
    job = results.runs["healthy"].job
    allowed_empty = {pattern.format(job=job) for pattern in EMPTY_ON_HEALTHY}
    assert allowed_empty <= set(results.panels), "allow-list names queries the dashboard has"
    empty = sorted(expr for expr, result in results.panels.items() if not result)
    assert sorted(set(empty) - allowed_empty) == [], "panel queries without data"


def _time_to_page_table(results: Results) -> str:
    rows = ["scenario                alert                     page(s)  floor(s)  goal 1.2x  scale"]
    for name, run in results.runs.items():
        first: dict[str, float] = {}
        for n in results.fired(run):
            if n.severity == "page":
                first[n.alertname] = min(first.get(n.alertname, n.arrived_wall), n.arrived_wall)
        for alertname, arrived in sorted(first.items()):
            floor = run.for_seconds(alertname) + 2 * SCRAPE_SECONDS + GROUP_WAIT
            rows.append(
                f"{name:<23} {alertname:<25} {arrived - run.onset_real:7.1f}  {floor:8.1f}  "
                f"{1.2 * floor:9.1f}  {run.scale:5.0f}"
            )
    rows.append(f"e2e wall time {results.wall_seconds:.0f} s")
    return "\n".join(rows)


def test_time_to_page_report(results: Results, capsys: pytest.CaptureFixture[str]) -> None:
    """Printed, not asserted: fault onset (real) -> first webhook arrival per page alert."""
    table = _time_to_page_table(results)
    with capsys.disabled():
        print("\n" + table)
    assert re.search(r"e2e wall time", table)


def test_healthy_mfu_while_stepping_is_the_simulated_mfu(results: Results) -> None:
    """MfuBelowFloor's view (FLOPs per second spent in steps, over its window) reads the
    simulated job's true MFU on real Prometheus: eval and checkpoint pauses, the compressed
    rate windows and a loaded machine do not dilute it. A 5m rate of wall time did, and once
    ticketed MfuBelowFloor on the healthy day (CI, 2 cores busy)."""
    if "healthy" not in results.runs:
        pytest.skip("healthy not among TRAINSIGNALS_E2E_SCENARIOS")
    run = results.runs["healthy"]
    mfu = [
        result
        for expr, result in results.panels.items()
        if expr.startswith("(sum_over_time(job:trainsignals_mfu:ratio_rate5m")
    ]
    assert len(mfu) == 1, "the MFU panel shows MfuBelowFloor's while-stepping average"
    (sample,) = mfu[0]
    assert float(sample["value"][1]) == pytest.approx(JobProfile.from_spec(run.spec).mfu, rel=0.03)
