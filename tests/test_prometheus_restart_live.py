"""A firing page survives Prometheus restarts, on the real stack: Prometheus 2.42 with the
job's generated rules, Alertmanager 0.25 with the generated routing, a webhook receiver, all on
127.0.0.1, the simulator's `hang` scenario at time scale 60 (manual mode: TrainingStalled pages).

Once the page is delivered, Prometheus is stopped (SIGTERM) for 3 s, started again on the same
data, then stopped for 6 s and started again. Counted at the webhook: the page reached it in one
notification (one group), and no "resolved" came in between; Prometheus has it firing again
after each restart (the carried last step, generator/signals/durable.py, read back from its
data).

Prometheus runs with the flags the generated prometheus.yml's header asks for: the resend
delay is production's (1m: a firing alert lives 4m in Alertmanager without a resend, longer
than any restart here) and the for-grace-period production's 1m divided by the time scale,
like the rules' `for`s it is compared with.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.conftest import JOBS, STACK_GROUP, require_tool
from tests.stacks.ha import HAStack
from trainsignals.generator.alerts.definitions.training import TRAINING_STALLED
from trainsignals.generator.loader import load_specs
from trainsignals.simulator.job import Simulation
from trainsignals.simulator.scenarios import SCENARIOS
from trainsignals.stacks.stack import FAST_TIMING, Notification, job_files

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group(STACK_GROUP)]

SCALE = 60
FAULT_AT = 5 * 60  # simulated seconds of healthy steps before the hang
OUTAGES_S = (3.0, 6.0)  # real seconds Prometheus is down, one restart each
AFTER_RESTART_S = 8.0  # watched after each restart (several group_intervals)
PAGE_TIMEOUT_S = 45.0


def _wait(check, timeout: float, what: str, stack: HAStack, step: float = 0.25):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(step)
    alerts = [(a["metric"]["alertname"], a["metric"]["alertstate"]) for a in stack.query("ALERTS")]
    got = [(n.alertname, n.status) for n in stack.receiver.snapshot()] if stack.receiver else []
    raise AssertionError(f"no {what} within {timeout:g} s; ALERTS {alerts}; received {got}")


def _of(notes: list[Notification], status: str) -> list[Notification]:
    return [n for n in notes if n.alertname == TRAINING_STALLED and n.status == status]


def test_a_firing_page_survives_prometheus_restarts(tmp_path: Path) -> None:
    require_tool("prometheus")
    require_tool("prometheus-alertmanager")
    spec = load_specs([JOBS / "minimal.yaml"])[0]
    scenario = SCENARIOS["hang"]
    assert scenario.alerts_for(spec) == {TRAINING_STALLED: "page"}
    rules = tmp_path / "rules.yaml"
    files = job_files(spec, SCALE)
    rules.write_text(next(v for k, v in files.items() if k.endswith(".rules.yaml")))
    sd = tmp_path / "sd"
    sim = Simulation(
        spec,
        scenario,
        time_scale=SCALE,
        nodes=1,
        gpus_per_node=2,
        fault_at=FAULT_AT,
        targets_dir=sd,
        start_time=time.time() + 5,
    )
    stack = HAStack(
        tmp_path / "stack",
        [sim.spec],
        [sd],
        [],  # the rules once every target is scraped: no "targets down" at startup
        FAST_TIMING,
        alertmanagers=1,
        time_scale=SCALE,
        resend_delay="1m",
        for_grace_period=f"{max(1, round(60 / SCALE))}s",
        with_meta=False,
    )
    try:
        sim.start()
        with stack:
            stack.wait_for_targets(len(sim.targets()))
            stack.rule_files = [rules]
            stack.load_rules()
            receiver = stack.receiver
            assert receiver is not None
            _wait(lambda: _of(receiver.snapshot(), "firing"), PAGE_TIMEOUT_S, "page", stack)
            firing_in_prometheus = f'ALERTS{{alertname="{TRAINING_STALLED}",alertstate="firing"}}'
            for outage in OUTAGES_S:
                stack.kill("prometheus", 15)  # SIGTERM: a clean shutdown, as a rollout does
                time.sleep(outage)
                stack.restart("prometheus")
                _wait(
                    lambda: stack.query(firing_in_prometheus),
                    AFTER_RESTART_S * 2,
                    f"{TRAINING_STALLED} firing again after a {outage:g} s outage",
                    stack,
                )
                time.sleep(AFTER_RESTART_S)
            notes = receiver.snapshot()
    finally:
        sim.stop()
    posts = {n.notification for n in _of(notes, "firing")}
    resolved = _of(notes, "resolved")
    assert len(posts) == 1, f"{TRAINING_STALLED} reached the pager in {len(posts)} notifications"
    assert not resolved, f"resolved during the restarts: {resolved}"
