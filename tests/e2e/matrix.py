"""Run a set of simulator scenarios on real stacks and collect what they notified.

Each scenario gets a spec copy named `e2e-<scenario>` (its own `training_job` selector, rules
and routes) and runs on its own time scale (its simulated duration in ~TARGET_REAL_SECONDS of
real time, within the simulator's cap); its rules are generated with the same scale. The
engine is the `stack_cls` given: `Stack` (Prometheus) or `VmStack` (vmagent + vmalert), both
with one Alertmanager and the webhook receiver. Used by tests/e2e/test_scenarios.py and
tests/e2e/test_vm_scenarios.py.
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.conftest import JOBS
from trainsignals.generator.loader import load_specs
from trainsignals.generator.spec.durations import parse_duration
from trainsignals.generator.spec.job import JobSpec
from trainsignals.simulator.job import Simulation, effective_spec
from trainsignals.simulator.scenarios import SCENARIOS, Scenario
from trainsignals.stacks.stack import (
    FAST_TIMING,
    MIN_RANGE_SECONDS,
    Notification,
    Stack,
    job_files,
)

NODES, GPUS_PER_NODE = 2, 2
# Each scenario's duration is compressed into about this much real time. The healthy day
# (capped at MAX_SCALE) takes 360 s anyway and sets the matrix's length; the four longest
# faults run at scales 78-240 in ~150 s each (packing model 374 s; at 330 s, 428). A lower
# scale keeps windows less distorted, and the `for` floor below keeps the higher ones from
# paging on a stall of scrapes: 150 s without it failed a clean-clone suite (six first-wave
# stacks paged TrainingTargetsDown at one moment, healthy day and a scale-60 scenario among
# them), and so did 330 s.
TARGET_REAL_SECONDS = 150
# The simulator caps the scale at stall_after / (3 x step) = 400; a healthy job is only seen
# as progressing if stall_after / scale also covers a step plus one scrape and one evaluation
# (600 s / (0.5 + 1 + 1) s = 240): at 360 the healthy day paged TrainingStalled.
MIN_SCALE, MAX_SCALE = 60, 240
# Alerts' `for` at least this many real seconds (4 scrapes and evaluations), the shortest
# window's length (MIN_RANGE_SECONDS). At the scales above a 1-2 m `for` is 1-2 s:
# on a loaded machine the stacks' scrapes stall that long at once (every first-wave stack
# paged TrainingTargetsDown and NodeDown together, healthy day included), while a node's
# 1 m drop window, 4 s here, did not empty. With the floor both need 4 s of lost scrapes.
MIN_FOR_SECONDS = MIN_RANGE_SECONDS
START_LEAD_SECONDS = 5  # endpoints served and scraped, rules loaded, before the clocks start
# FAST_TIMING with group_wait 3 s instead of 1 s: a node going down fails its targets' scrapes
# up to a scrape interval apart, so TrainingTargetsDown can fire one evaluation before NodeDown;
# with group_wait 1 s it paged before NodeDown could inhibit it (production waits 30 s).
TIMING = {key: {**value, "group_wait": "3s"} for key, value in FAST_TIMING.items()}


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
    panels: dict[str, list[dict]]  # what the `probe` returned (expr -> result), or empty
    wall_seconds: float
    grace: float  # seconds after a run's end in which its notifications still count

    def fired(self, run: Run) -> list[Notification]:
        """Firing alerts of this run that started before its end and arrived in the grace.

        After its end the simulator's clock stops, and a frozen job would look stalled.
        """
        return [
            n
            for n in self.notifications
            if n.labels.get("training_job") == run.job
            and n.status == "firing"
            and n.starts_at <= run.end_real
            and n.arrived_wall <= run.end_real + self.grace
        ]


def scale_for(scenario: Scenario) -> float:
    duration = scenario.duration
    return min(MAX_SCALE, max(MIN_SCALE, duration / TARGET_REAL_SECONDS))


def e2e_name(scenario: Scenario) -> str:
    return "e2e-" + scenario.name.replace("_", "-")


def prepare(base: JobSpec, scenario: Scenario, workdir: Path) -> tuple[Run, Path]:
    spec = effective_spec(
        scenario.spec_for(base).model_copy(update={"name": e2e_name(scenario)}),
        NODES,
        GPUS_PER_NODE,
    )
    scale = scale_for(scenario)
    files = job_files(spec, scale, MIN_FOR_SECONDS)
    rules_path = workdir / "rules" / f"{spec.name}.rules.yaml"
    rules_path.parent.mkdir(parents=True, exist_ok=True)
    rules_text = files[f"alerts/{spec.name}.rules.yaml"]
    rules_path.write_text(rules_text, encoding="utf-8")
    for path, text in files.items():  # deploy.shards: the edge and global rules, alongside
        if path.startswith("deploy/sharded/") and path.endswith(".rules.yaml"):
            (rules_path.parent / path.rsplit("/", 1)[1]).write_text(text, encoding="utf-8")
    run = Run(
        scenario,
        spec,
        scale,
        yaml.safe_load(rules_text),
        json.loads(files[f"dashboards/{spec.name}.json"]),
    )
    return run, rules_path


Probe = Callable[[Stack, dict[str, Run]], dict[str, list[dict]]]


def real_seconds(run: Run) -> float:
    return run.duration / run.scale


def run_matrix(
    stack_cls: type[Stack],
    names: Sequence[str | Scenario],
    *,
    targets_per_run: int,
    grace: float,
    probe: Probe | None = None,
    prefix: str = "trainsignals-e2e-",
    base: JobSpec | None = None,
    at_once: int | None = None,
) -> Results:
    """Run the scenarios `names` on real stacks of `stack_cls` and collect what they notified.

    `at_once=None`: every scenario together on one stack (the VictoriaMetrics and sharded
    tests: one topology under the mixed load). `at_once=N`: each scenario on a stack of its
    own, at most N at a time, longest first (the scenario matrix: 23 jobs' rules on one
    Prometheus at a 1 s interval kept it at 1-1.5 cores, the simulators answered scrapes late
    on 2 cores, and TargetsDown paged in most scenarios; most runs last 40-120 s of real time
    beside the healthy day's 360 s, so N slots keep the wall time the healthy day's).
    On each stack the simulators serve their endpoints first; the rules are loaded once the
    stack has scraped `targets_per_run` targets per scenario, and the clocks start
    START_LEAD_SECONDS after the endpoints. `probe(stack, runs)`, if given, runs on each stack
    once its rules are loaded (with that stack's runs); what the probes return becomes
    `Results.panels`. A stack stops `grace` seconds after its last run ends.
    """
    base = base or load_specs([JOBS / "minimal.yaml"])[0]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        workdir = Path(tmp)
        runs: dict[str, Run] = {}
        rule_files: dict[str, Path] = {}
        for name in names:
            scenario = SCENARIOS[name] if isinstance(name, str) else name
            runs[scenario.name], rule_files[scenario.name] = prepare(base, scenario, workdir)
        if at_once is None:
            groups = [list(runs.values())]
        else:
            groups = [[run] for run in sorted(runs.values(), key=real_seconds, reverse=True)]
        pending = deque(groups)
        notifications: list[Notification] = []
        panels: dict[str, list[dict]] = {}
        lock = threading.Lock()
        failed = threading.Event()

        def run_group(group: list[Run]) -> None:
            """One stack: serve, wait for the targets, load the rules, run to the end."""
            name = group[0].scenario.name if len(group) == 1 else "all"
            stack = stack_cls(
                workdir / f"stack-{name}",
                [run.spec for run in group],
                [workdir / "sd" / run.job for run in group],
                [rule_files[run.scenario.name] for run in group],
                TIMING,
                defer_rules=True,
            )
            with stack:
                try:
                    start_time = time.time() + START_LEAD_SECONDS
                    for run in group:
                        run.sim = Simulation(
                            run.spec,
                            run.scenario,
                            time_scale=run.scale,
                            nodes=NODES,
                            gpus_per_node=GPUS_PER_NODE,
                            targets_dir=workdir / "sd" / run.job,
                            start_time=start_time,
                        )
                        run.sim.start(run.duration)
                    stack.wait_for_targets(len(group) * targets_per_run)
                    stack.load_rules()
                    found = probe(stack, {r.scenario.name: r for r in group}) if probe else {}
                    last_end = max(run.end_real for run in group)
                    time.sleep(max(0.0, last_end + grace - time.time()))
                    assert stack.receiver is not None
                    with lock:
                        notifications.extend(stack.receiver.snapshot())
                        panels.update(found)
                finally:  # in parallel: each endpoint's shutdown waits for its server's poll
                    sims = [run.sim for run in group if run.sim is not None]
                    with ThreadPoolExecutor(max_workers=len(sims) or 1) as pool:
                        list(pool.map(Simulation.stop, sims))

        def slot() -> None:
            while not failed.is_set():
                with lock:
                    if not pending:
                        return
                    group = pending.popleft()
                try:
                    run_group(group)
                except BaseException:
                    failed.set()  # the other slots start nothing new
                    raise

        slots = 1 if at_once is None else at_once
        with ThreadPoolExecutor(max_workers=slots, thread_name_prefix="matrix") as pool:
            for future in [pool.submit(slot) for _ in range(slots)]:
                future.result()
    return Results(runs, notifications, panels, time.monotonic() - started, grace)
