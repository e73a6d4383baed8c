"""Fleet replay (trainsignals/fleet): the fault model, the evaluator's semantics, and a reduced
replay (2.5 days: room for its six incidents; same machinery as `make fleet`) against the
generated rules on real Prometheus."""

from __future__ import annotations

from collections import Counter

import pytest
import yaml

from tests.conftest import require_tool
from trainsignals.fleet.evaluate import AlertEpisode, _uses, apply_for, recording_tiers
from trainsignals.fleet.history import MIX, PLANNED_STOPS, build_history, scaled_counts
from trainsignals.fleet.report import score
from trainsignals.fleet.routing import Alertmanager
from trainsignals.fleet.run import EPOCH, run_replay
from trainsignals.fleet.spec import fleet_spec, generated_files
from trainsignals.fleet.timeline import simulate

# The shortest run the six incidents and the interruptions between them fit in.
REDUCED_DAYS = 2.5
# One worker for the module: the reduced replay (a module fixture, ~90 s of CPU) runs once, not
# once per worker its tests land on.
pytestmark = pytest.mark.xdist_group("fleet-replay")


def test_full_history_has_llama3_interruption_mix() -> None:
    history = build_history()
    unexpected = Counter(i.cause for i in history.interruptions if not i.incident)
    assert unexpected.pop("planned") == PLANNED_STOPS == 47
    assert unexpected == {c.name: c.count for c in MIX}
    assert sum(unexpected.values()) == 419
    hardware = history.hardware_faults
    assert len(hardware) == 419 - 54 - 7  # software bugs and NCCL timeouts blame no hardware
    # Identities come from the whole fleet, and a drained node never faults again.
    assert len({f.node for f in hardware}) > 300
    assert all(f.uuid.startswith("GPU-") for f in hardware if f.gpu is not None)
    # Automatic restarts take minutes, inside a 15-minute budget.
    assert max(i.restart_cost_s for i in history.interruptions if not i.incident) <= 15 * 60
    assert build_history().interruptions == history.interruptions  # seeded
    # The job completes half a day before the end; no fault comes after (nothing runs).
    assert history.completed_s == history.wall_s - 12 * 3600
    assert max(i.up_s for i in history.interruptions) < history.completed_s


def test_scaled_counts_keep_the_rate() -> None:
    assert sum(scaled_counts(54).values()) == 466
    assert sum(scaled_counts(27).values()) == 233


def test_ground_truth_goodput_adds_up() -> None:
    history = build_history(REDUCED_DAYS)
    _, truth = simulate(history, 2)
    assert truth.productive_s + sum(truth.seconds.values()) == pytest.approx(truth.wall_s)
    assert 0.5 < truth.ettr < 1


def test_for_and_keep_firing_for_follow_prometheus() -> None:
    # Present at 0..240 s: pending at 0, firing once 120 s have passed, resolved at 300.
    assert apply_for([0, 60, 120, 180, 240], hold=120, keep=0) == [(120, 300)]
    # A gap resets the pending state.
    assert apply_for([0, 60, 180, 240, 300], hold=120, keep=0) == [(300, 360)]
    # keep_firing_for bridges a short gap after firing.
    assert apply_for([0, 60, 180], hold=0, keep=120) == [(0, 300)]
    assert apply_for([], hold=0, keep=0) == []


def test_recording_tiers_put_dependencies_first() -> None:
    spec, _ = fleet_spec(2)
    rules_text, _ = generated_files(spec)
    document = yaml.safe_load(rules_text)
    recording = [r for g in document["groups"] for r in g["rules"] if "record" in r]
    tiers = recording_tiers(recording)
    assert len(tiers) >= 2
    assert sum(len(t) for t in tiers) == len(recording)
    for index, tier in enumerate(tiers):
        later = {r["record"] for t in tiers[index:] for r in t}
        for rule in tier:
            assert not [n for n in later if n != rule["record"] and _uses(rule["expr"], n)]


def test_generated_inhibition_mutes_per_gpu_alerts_of_a_down_node() -> None:
    spec, _ = fleet_spec(2)
    _, am_text = generated_files(spec)
    manager = Alertmanager(am_text)
    base = {"training_job": spec.name, "team": spec.team}
    node_down = base | {"alertname": "NodeDown", "node": "n1", "severity": "page"}
    gpu_lost = base | {"alertname": "GpuLost", "node": "n1", "gpu": "3", "severity": "page"}
    other = base | {"alertname": "GpuLost", "node": "n2", "gpu": "3", "severity": "page"}
    firing = [node_down, gpu_lost, other]
    assert manager.inhibited(gpu_lost, firing)
    assert not manager.inhibited(other, firing)
    assert not manager.inhibited(node_down, firing)


@pytest.fixture(scope="module")
def replay():
    require_tool("promtool")
    require_tool("prometheus")
    return run_replay(days=REDUCED_DAYS, seed=405, slots=2)


def test_walk_notifies_an_alert_that_fired_for_one_evaluation() -> None:
    """Prometheus sends the alert at the evaluation it fires and its resolve only at the next,
    60 s later; with group_wait 30s Alertmanager notifies in between."""
    spec, _ = fleet_spec(2)
    _, am_text = generated_files(spec)
    labels = {
        "alertname": "NodeDown",
        "training_job": spec.name,
        "job": spec.name,
        "team": spec.infra_team,
        "severity": "ticket",
        "node": "gpu-n0001",
    }
    start = EPOCH + 600
    sent = Alertmanager(am_text).replay(
        [AlertEpisode("NodeDown", labels, [(start, start + 60)])], EPOCH, EPOCH + 3600
    )
    assert [(n.severity, n.alertname, n.at) for n in sent] == [("ticket", "NodeDown", start + 30)]
    assert [a for _, a in sent[0].alerts] == [labels]


def test_walk_mutes_at_flush_time_on_the_groups_own_clock() -> None:
    """A consequence inhibited by the incident's page opens its group anyway; when the page
    resolves a minute before the consequence does, the group's next flush (group_interval
    later) finds it resolved: no second page, as in Alertmanager."""
    spec, _ = fleet_spec(2)
    _, am_text = generated_files(spec)
    base = {"training_job": spec.name, "job": spec.name, "team": spec.team, "severity": "page"}
    stall = base | {"alertname": "TrainingNoProgress"}
    burn = base | {"alertname": "SloErrorBudgetBurnFast", "slo": "goodput"}
    start = EPOCH + 600
    sent = Alertmanager(am_text).replay(
        [
            AlertEpisode("TrainingNoProgress", stall, [(start, start + 80 * 60)]),
            AlertEpisode("SloErrorBudgetBurnFast", burn, [(start + 43 * 60, start + 81 * 60)]),
        ],
        EPOCH,
        EPOCH + 4 * 3600,
    )
    assert [n.alertname for n in sent] == ["TrainingNoProgress"]


def test_reduced_replay_restarts_in_budget_page_no_cause(replay) -> None:
    """auto_restart: no cause alert pages; every non-recovering incident pages."""
    assert replay.mode == "auto_restart"
    pages = [n for n in replay.notifications if n.severity == "page"]
    causes = {"GpuLost", "GpuXidCritical", "GpuUncorrectableEccErrors", "NodeDown"}
    assert not [n.alertname for n in pages if n.alertname in causes]
    result = score(replay)
    assert result.time_to_page["hang"] is not None
    assert result.time_to_page["crash_loop"] is not None
    assert result.time_to_page["checkpoint_stall"] is not None


def test_reduced_replay_evaluates_every_rule_input(replay) -> None:
    assert replay.series_missing == []
    assert replay.samples > 1_000_000
    assert replay.tiers >= 2
    assert replay.episodes, "no alert ever fired over two days of faults"
    first = min(start for e in replay.episodes for start, _ in e.firing)
    assert first >= EPOCH


def test_reduced_replay_pages_once_per_nonrecovering_incident(replay) -> None:
    result = score(replay)
    assert replay.mode == "auto_restart"
    assert result.pages == result.nonrecovering == 6
    assert result.extra_pages == 0
    assert all(n == 1 for n in result.pages_per_incident.values())
    # Issue 16: a restart loop that never steps pages within restart_budget + `for` (+ the
    # minute of the last step and group_wait) of its last step; broken checkpointing across
    # restarts pages although every restart "refreshes" the process.
    assert result.time_to_page["restart_loop"] <= (15 + 1 + 2) * 60
    assert result.time_to_page["checkpoint_broken_restarts"] is not None


def test_reduced_replay_tickets_every_hardware_fault(replay) -> None:
    result = score(replay)
    assert result.hardware > 0
    assert result.ticketed == result.hardware, [(f.cause, f.node, f.gpu) for f in result.unticketed]


def test_reduced_replay_tickets_a_node_outage_once(replay) -> None:
    """NodeDown and NodeUnreachableRecently never both ticket one outage."""
    outages = [f for f in replay.history.hardware_faults if f.scope == "node"]
    assert outages
    for fault in outages:
        lo, hi = EPOCH + fault.fault_s, EPOCH + fault.up_s + 2 * 3600
        named = [
            labels["alertname"]
            for n in replay.notifications
            if n.severity == "ticket"
            for at, labels in n.alerts
            if lo <= at <= hi and labels.get("node") == fault.node
        ]
        assert len(named) == 1, (fault.cause, fault.node, named)


def test_reduced_replay_measures_ettr_within_one_point(replay) -> None:
    assert score(replay).ettr_error_pts <= 1.0
