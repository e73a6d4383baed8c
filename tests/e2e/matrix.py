"""Run a set of simulator scenarios at once on one real stack and collect what it notified.

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
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import yaml
from trainsignals.generator.durations import parse_duration
from trainsignals.generator.loader import load_specs
from trainsignals.generator.spec import JobSpec
from trainsignals.simulator.job import Simulation, effective_spec
from trainsignals.simulator.scenarios import SCENARIOS, Scenario

from tests.conftest import JOBS
from trainsignals.stack import FAST_TIMING, Notification, Stack, job_files

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
    files = job_files(spec, scale)
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


def run_matrix(
    stack_cls: type[Stack],
    names: Sequence[str | Scenario],
    *,
    targets_per_run: int,
    grace: float,
    probe: Probe | None = None,
    prefix: str = "trainsignals-e2e-",
    base: JobSpec | None = None,
) -> Results:
    """Run the scenarios `names` concurrently on one `stack_cls` and collect its notifications.

    Every simulator serves its endpoints first; the rules are loaded once the stack has scraped
    `targets_per_run` targets per scenario, and the clocks start START_LEAD_SECONDS after the
    endpoints. `probe(stack, runs)`, if given, runs while the scenarios do (it may wait);
    what it returns becomes `Results.panels`. Returns `grace` seconds after the last run ends.
    """
    base = base or load_specs([JOBS / "minimal.yaml"])[0]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        workdir = Path(tmp)
        runs: dict[str, Run] = {}
        rule_files: list[Path] = []
        for name in names:
            scenario = SCENARIOS[name] if isinstance(name, str) else name
            run, rules_path = prepare(base, scenario, workdir)
            runs[scenario.name] = run
            rule_files.append(rules_path)
        targets = {name: workdir / "sd" / run.job for name, run in runs.items()}
        specs = [run.spec for run in runs.values()]
        stack = stack_cls(
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
                stack.wait_for_targets(len(runs) * targets_per_run)
                stack.load_rules()
                panels = probe(stack, runs) if probe is not None else {}
                last_end = max(run.end_real for run in runs.values())
                time.sleep(max(0.0, last_end + grace - time.time()))
                assert stack.receiver is not None
                notifications = stack.receiver.snapshot()
            finally:  # in parallel: each endpoint's shutdown waits for its server's poll
                sims = [run.sim for run in runs.values() if run.sim is not None]
                with ThreadPoolExecutor(max_workers=len(sims) or 1) as pool:
                    list(pool.map(Simulation.stop, sims))
    return Results(runs, notifications, panels, time.monotonic() - started, grace)
