"""End to end: every scenario of the simulator against real Prometheus and Alertmanager.

All scenarios run at once, one Simulation each (a spec copy named `e2e-<scenario>`, so each has
its own `training_job` selector, rules and routes) against one Prometheus and one Alertmanager.
Each scenario runs on its own time scale (its simulated duration in ~3 real minutes, within the
simulator's cap); its rules are generated with the same scale. The healthy simulated day is the
longest run and sets the suite's wall time (~6 minutes; see MAX_SCALE).

A scenario's alerts are those that fired (Prometheus `startsAt`) before its simulated duration
ended: after that the simulator's clock stops and a frozen job would look stalled.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from trainsignals.generator.dashboard import panel_queries
from trainsignals.generator.durations import parse_duration
from trainsignals.generator.loader import load_specs
from trainsignals.generator.spec import JobSpec
from trainsignals.generator.xid_catalog import action_of
from trainsignals.simulator.job import Simulation, effective_spec
from trainsignals.simulator.profile import JobProfile
from trainsignals.simulator.scenarios import SCENARIOS, Scenario

from tests.conftest import JOBS, require_tool
from trainsignals.stack import FAST_TIMING, SCRAPE_SECONDS, Notification, Stack, job_files

# One xdist worker runs the real-stack tests (mostly waiting on compressed time) while the
# other runs everything else; `make test` uses `-n 2 --dist loadgroup`.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("real-stack")]

NODES, GPUS_PER_NODE = 2, 2
# Each scenario's duration is compressed into about this much real time. The healthy day
# (capped at MAX_SCALE) takes 360 s anyway, so longer scenarios may use nearly as long: a
# lower scale keeps their windows and `for`s less distorted by the 4 s minimum range.
TARGET_REAL_SECONDS = 330
# The simulator caps the scale at stall_after / (3 x step) = 400; a healthy job is only seen
# as progressing if stall_after / scale also covers a step plus one scrape and one evaluation
# (600 s / (0.5 + 1 + 1) s = 240): at 360 the healthy day paged TrainingStalled.
MIN_SCALE, MAX_SCALE = 60, 240
START_LEAD_SECONDS = 5  # endpoints served and scraped, rules loaded, before the clocks start
GRACE_SECONDS = 6  # after a run ends: evaluation, group_wait and delivery
PANEL_CHECK_AT = 13 * 3600  # simulated healthy time of the dashboard check (training)
# FAST_TIMING with group_wait 3 s instead of 1 s: a node going down fails its targets' scrapes
# up to a scrape interval apart, so TrainingTargetsDown can fire one evaluation before NodeDown;
# with group_wait 1 s it paged before NodeDown could inhibit it (production waits 30 s).
TIMING = {key: {**value, "group_wait": "3s"} for key, value in FAST_TIMING.items()}
GROUP_WAIT = parse_duration(TIMING["page"]["group_wait"])
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
    # Network panel: node_exporter's series; the simulator serves no node_exporter.
    'node:trainsignals_network_receive_bytes:rate5m{{node=~".*",training_job="{job}"}}',
    'node:trainsignals_network_transmit_bytes:rate5m{{node=~".*",training_job="{job}"}}',
)


@dataclass
class Run:
    scenario: Scenario
    spec: JobSpec  # effective spec (simulated shape), named e2e-<scenario>
    scale: float
    rules: dict  # parsed rules file
    dashboard: dict
    sim: Simulation | None = None

    @property
    def duration(self) -> int:
        return self.scenario.duration

    @property
    def job(self) -> str:
        return self.spec.name

    @property
    def end_real(self) -> float:
        assert self.sim is not None
        return self.sim.real_time_at(self.duration)

    @property
    def onset_real(self) -> float:
        assert self.sim is not None
        return self.sim.real_time_at(self.sim.fault_at)

    def for_seconds(self, alertname: str) -> float:
        for group in self.rules["groups"]:
            for rule in group["rules"]:
                if rule.get("alert") == alertname:
                    return parse_duration(rule.get("for", "0s"))
        raise KeyError(alertname)


@dataclass
class Results:
    runs: dict[str, Run]
    notifications: list[Notification]
    panels: dict[str, list[dict]]  # expr -> result, from the healthy job mid-day
    wall_seconds: float

    def fired(self, run: Run) -> list[Notification]:
        """Firing alerts of this run that started before its end and arrived in the grace."""
        return [
            n
            for n in self.notifications
            if n.labels.get("training_job") == run.job
            and n.status == "firing"
            and n.starts_at <= run.end_real
            and n.arrived_wall <= run.end_real + GRACE_SECONDS
        ]


def scale_for(scenario: Scenario) -> float:
    duration = scenario.duration
    return min(MAX_SCALE, max(MIN_SCALE, duration / TARGET_REAL_SECONDS))


def e2e_name(scenario: Scenario) -> str:
    return "e2e-" + scenario.name.replace("_", "-")


def prepare(base: JobSpec, scenario: Scenario, workdir: Path) -> tuple[Run, Path]:
    spec = effective_spec(
        base.model_copy(update={"name": e2e_name(scenario)}), NODES, GPUS_PER_NODE
    )
    scale = scale_for(scenario)
    files = job_files(spec, scale)
    rules_path = workdir / "rules" / f"{spec.name}.rules.yaml"
    rules_path.parent.mkdir(parents=True, exist_ok=True)
    rules_text = files[f"alerts/{spec.name}.rules.yaml"]
    rules_path.write_text(rules_text, encoding="utf-8")
    run = Run(
        scenario,
        spec,
        scale,
        yaml.safe_load(rules_text),
        json.loads(files[f"dashboards/{spec.name}.json"]),
    )
    return run, rules_path


def dashboard_exprs(run: Run) -> list[str]:
    return [
        expr.replace("$node", ".*").replace("$gpu", ".*").replace("$__range", "1h")
        for _, expr in panel_queries(run.dashboard)
    ]


@pytest.fixture(scope="module")
def results() -> Iterator[Results]:
    require_tool("prometheus")
    require_tool("prometheus-alertmanager")
    base = load_specs([JOBS / "minimal.yaml"])[0]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="trainsignals-e2e-") as tmp:
        workdir = Path(tmp)
        runs: dict[str, Run] = {}
        rule_files: list[Path] = []
        for scenario in SCENARIOS.values():
            run, rules_path = prepare(base, scenario, workdir)
            runs[scenario.name] = run
            rule_files.append(rules_path)
        targets = {name: workdir / "sd" / run.job for name, run in runs.items()}
        specs = [run.spec for run in runs.values()]
        stack = Stack(
            workdir / "stack", specs, list(targets.values()), rule_files, TIMING, defer_rules=True
        )
        with stack:
            try:
                # Serve every endpoint first; the clocks start once rules see all targets up.
                start_time = time.time() + START_LEAD_SECONDS
                for name, run in runs.items():
                    run.sim = Simulation(
                        run.spec,
                        run.scenario,
                        time_scale=run.scale,
                        nodes=NODES,
                        gpus_per_node=GPUS_PER_NODE,
                        targets_dir=targets[name],
                        start_time=start_time,
                    )
                    run.sim.start(run.duration)
                stack.wait_for_targets(len(runs) * (NODES * GPUS_PER_NODE + 2 * NODES))
                stack.load_rules()
                healthy = runs["healthy"]
                assert healthy.sim is not None
                time.sleep(max(0.0, healthy.sim.real_time_at(PANEL_CHECK_AT) - time.time()))
                panels = {expr: stack.query(expr) for expr in dashboard_exprs(healthy)}
                last_end = max(run.end_real for run in runs.values())
                time.sleep(max(0.0, last_end + GRACE_SECONDS - time.time()))
                assert stack.receiver is not None
                notifications = stack.receiver.snapshot()
            finally:  # in parallel: each endpoint's shutdown waits for its server's poll
                sims = [run.sim for run in runs.values() if run.sim is not None]
                with ThreadPoolExecutor(max_workers=len(sims) or 1) as pool:
                    list(pool.map(Simulation.stop, sims))
        yield Results(runs, notifications, panels, time.monotonic() - started)


@pytest.mark.parametrize("name", list(SCENARIOS))
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
    for alertname, severity in expected.items():
        if severity == "page":
            posts = {n.notification for n in fired if n.alertname == alertname}
            assert len(posts) == 1, f"{name}: {alertname} paged {len(posts)} times"
    if name == "healthy":
        everything = [n for n in results.notifications if n.labels.get("training_job") == run.job]
        assert everything == [], "healthy day: no notification at all"


def test_dashboard_queries_return_data_on_healthy(results: Results) -> None:
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
    run = results.runs["healthy"]
    mfu = [
        result
        for expr, result in results.panels.items()
        if expr.startswith("(sum_over_time(job:trainsignals_mfu:ratio_rate5m")
    ]
    assert len(mfu) == 1, "the MFU panel shows MfuBelowFloor's while-stepping average"
    (sample,) = mfu[0]
    assert float(sample["value"][1]) == pytest.approx(JobProfile.from_spec(run.spec).mfu, rel=0.03)
