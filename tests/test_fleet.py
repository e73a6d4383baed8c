"""Fleet replay (trainsignals/fleet): the fault model, the evaluator's semantics, and a reduced
replay (2.8 days: room for its seven incidents; same machinery as `make fleet`) against the
generated rules on real Prometheus."""

from __future__ import annotations

from collections import Counter

import pytest
import yaml

from tests.conftest import require_tool
from trainsignals.fleet.culprit import FAILSLOW_TICKET_S, judge
from trainsignals.fleet.emit import Emitter
from trainsignals.fleet.evaluate import AlertEpisode, _uses, apply_for, recording_tiers
from trainsignals.fleet.ground_truth import build_history
from trainsignals.fleet.history import MIX, PLANNED_STOPS, scaled_counts
from trainsignals.fleet.report import render
from trainsignals.fleet.routing import Alertmanager, Notification
from trainsignals.fleet.run import EPOCH, Replay, run_replay
from trainsignals.fleet.score import expected_pages, score
from trainsignals.fleet.spec import fed_meta_groups, fleet_spec, generated_files
from trainsignals.fleet.timeline import Truth, simulate
from trainsignals.generator.alerts.definitions.gpu_faults import GPU_LOST, GPU_XID_CRITICAL
from trainsignals.generator.alerts.definitions.restarts import TRAINING_RESTARTED
from trainsignals.generator.alerts.definitions.slo_burn import SLO_ERROR_BUDGET_BURN_FAST
from trainsignals.generator.alerts.definitions.training import (
    TRAINING_STALLED,
    TRAINING_TARGETS_DOWN,
)

# The shortest run the seven incidents and the interruptions between them fit in.
REDUCED_DAYS = 2.8
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
    # The job completes three days before the end (its GPU exporter is scraped on: past any
    # one-day memory of "completed"); no fault comes after (nothing runs).
    assert history.completed_s == history.wall_s - 3 * 86400
    assert max(i.up_s for i in history.interruptions) < history.completed_s


def test_scaled_counts_keep_the_rate() -> None:
    assert sum(scaled_counts(54).values()) == 466
    assert sum(scaled_counts(27).values()) == 233


def test_ground_truth_goodput_adds_up() -> None:
    history = build_history(REDUCED_DAYS)
    _, truth = simulate(history, 2)
    assert truth.productive_s + sum(truth.seconds.values()) == pytest.approx(truth.wall_s)
    assert 0.5 < truth.ettr < 1


def _emitted(minutes, m: int) -> list[str]:
    spec, _ = fleet_spec(2)
    wanted = {"up", "trainsignals_steps_total", "trainsignals_gpu_up"}
    jobs = (spec.scrape_jobs.training, spec.scrape_jobs.gpu)
    return list(Emitter(minutes, spec.selector_labels, jobs, wanted, EPOCH).minute_lines(m))


def test_restarted_processes_report_their_start_before_their_first_step() -> None:
    """A restarted incarnation is up (its process start time, phase startup, no step yet)
    from the moment its processes are back, not from its first step: the rules see the
    restart while it starts up (manual mode pages it; issue 26: a restart that stepped in
    the same minute it appeared looked like no restart at all)."""
    history = build_history(REDUCED_DAYS)
    minutes, _ = simulate(history, 2)
    stop = next(i for i in history.interruptions if i.cause == "software_bug")
    assert stop.first_step_s - stop.up_s >= 60
    back = minutes[stop.up_s // 60]
    assert back.alive and back.phase == "startup"
    assert back.process_start == stop.up_s and back.last_step is None


def test_dead_job_pods_pending_for_hours_while_node_exporters_run() -> None:
    """Issue 26 item 1's shape: a crash, then no rank target at all for hours (pods Pending:
    not `up 0`, gone), the GPU exporters scraped on; one incident until the pods run again."""
    history = build_history(REDUCED_DAYS)
    dead = next(i for i in history.incidents if i.kind == "dead_job")
    assert dead.end_s - dead.start_s >= 6 * 3600
    minutes, _ = simulate(history, 2)
    middle = (dead.start_s + dead.end_s) // 2 // 60
    assert minutes[middle].gone and not minutes[middle].alive
    lines = _emitted(minutes, middle)
    assert lines and not [line for line in lines if "trainsignals_steps_total" in line]
    assert not [line for line in lines if 'job="trainsignals-training"' in line]
    assert [line for line in lines if line.startswith("up{") and "trainsignals-gpu" in line]
    after = dead.end_s // 60 + 10  # scheduled again and stepping
    assert minutes[after].alive and not minutes[after].gone
    assert [line for line in _emitted(minutes, after) if "trainsignals_steps_total" in line]


def test_finished_job_leaves_its_gpu_exporter_scraped_for_days() -> None:
    """Issue 26 item 2's shape: finish(), the ranks leave discovery, the GPU exporter
    DaemonSet target stays (nobody removes it for one job) to the end of the run."""
    history = build_history(54)
    minutes, _ = simulate(history, 2)
    done = history.completed_s // 60
    assert minutes[done].phase == "done" and minutes[done].alive
    for m in (done + 1, done + 2 * 24 * 60, len(minutes) - 1):
        lines = _emitted(minutes, m)
        assert minutes[m].gone
        assert not [line for line in lines if "trainsignals_steps_total" in line]
        gpu_up = [line for line in lines if line.startswith("up{") and "trainsignals-gpu" in line]
        assert len(gpu_up) == 2 and all(" 1 " in line for line in gpu_up)


def test_replay_feeds_the_meta_alert_on_vanished_targets() -> None:
    """The finished job's and the dead job's pages can come from meta-monitoring (targets
    vanished while the GPU exporter runs): the replay evaluates those rules too, and only
    the meta rules it can feed (not Prometheus' or Alertmanager's own health)."""
    spec, _ = fleet_spec(2)
    _, _, meta_text = generated_files(spec)
    fed = [r for g in fed_meta_groups(meta_text, spec.name) for r in g["rules"]]
    assert fed and all(spec.name in r["expr"] and "up{" in r["expr"] for r in fed)
    assert not [r for r in fed if "prometheus_" in r["expr"] or "alertmanager" in r["expr"]]


def test_manual_mode_expects_one_page_per_interruption() -> None:
    """manual: every unexpected interruption is an incident (planned stops and the restarts
    inside an incident are not); auto_restart: only the incidents automation does not fix."""
    history = build_history(REDUCED_DAYS)
    auto = expected_pages(history, "auto_restart")
    manual = expected_pages(history, "manual")
    assert len(auto) == len(history.incidents) == 7
    unexpected = [i for i in history.interruptions if not i.incident and i.scope != "planned"]
    assert unexpected
    assert len(manual) == len(auto) + len(unexpected)
    with pytest.raises(ValueError, match="--mode 'both'"):
        fleet_spec(2, "both")


def _page(name: str, at_s: int, resolved_s: int | None) -> Notification:
    labels = {"alertname": name, "severity": "page"}
    resolved = None if resolved_s is None else EPOCH + resolved_s
    return Notification("team-page", "page", name, EPOCH + at_s, [(EPOCH + at_s, labels)], resolved)


def test_score_counts_a_page_that_resolved_while_its_incident_lasted() -> None:
    """A dead job's page that resolves after ~1h50m and pages again: one resolved_early, one
    extra page; a page held until the job healed is clean."""
    history = build_history(REDUCED_DAYS)
    incidents = {i.kind: i for i in history.incidents}
    dead, hang = incidents["dead_job"], incidents["hang"]
    held = [
        _page("Held", i.start_s + 900, i.healed_s + 120)
        for i in history.incidents
        if i.kind != "dead_job"
    ]
    early = _page("NoProgress", dead.start_s + 900, dead.start_s + 110 * 60)
    again = _page("NoProgress", dead.start_s + 150 * 60, dead.end_s + 300)
    replay = Replay(history, Truth(history.wall_s), "auto_restart", 2)
    replay.notifications = [*held, early, again]
    result = score(replay)
    assert result.pages_per_incident["dead_job"] == 2
    assert [(e.name, p.at) for e, p in result.resolved_early] == [("dead_job", early.at)]
    assert result.unclaimed == [again] and result.extra_pages == 1
    assert "resolved_early=1" in result.last_line()
    replay.notifications = [*held, _page("NoProgress", dead.start_s + 900, dead.end_s + 300)]
    result = score(replay)
    assert not result.resolved_early and result.extra_pages == 0
    assert result.pages == result.nonrecovering
    # A page still open when the replay ends is held, not resolved early.
    replay.notifications = [*held, _page("NoProgress", dead.start_s + 900, None)]
    assert not score(replay).resolved_early
    assert hang.healed_s == hang.end_s


def test_report_states_what_must_page_in_each_mode() -> None:
    history = build_history(REDUCED_DAYS)
    dead = next(i for i in history.incidents if i.kind == "dead_job")
    early = _page("NoProgress", dead.start_s + 900, dead.start_s + 110 * 60)
    auto = Replay(history, Truth(history.wall_s), "auto_restart", 2, notifications=[early])
    text = render(auto, score(auto))
    assert "| dead_job | 1 | 15 min | no: resolved 110 min in, healed 360 min in |" in text
    assert text.splitlines()[-1].startswith(
        "fleet: mode=auto_restart pages=1 nonrecovering=7 (incidents automation does not fix"
    )
    manual = Replay(history, Truth(history.wall_s), "manual", 2, notifications=[early])
    result = score(manual)
    last = render(manual, result).splitlines()[-1]
    interruptions = result.nonrecovering - 7
    assert f"nonrecovering={result.nonrecovering} (every unexpected interruption " in last
    assert f"interruption {interruptions} + incidents 7, one page each)" in last
    assert "hw_faults_named=0/" in last and "resolved_early=1" in last


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
    rules_text, _, _ = generated_files(spec)
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
    _, am_text, _ = generated_files(spec)
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
    _, am_text, _ = generated_files(spec)
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
    assert sent[0].resolved == start + 60  # the group closes with its last alert


def test_walk_mutes_at_flush_time_on_the_groups_own_clock() -> None:
    """A consequence inhibited by the incident's page opens its group anyway; when the page
    resolves a minute before the consequence does, the group's next flush (group_interval
    later) finds it resolved: no second page, as in Alertmanager."""
    spec, _ = fleet_spec(2)
    _, am_text, _ = generated_files(spec)
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
    assert result.nonrecovering == 7
    # The incidents the range-window rules already carry: one page each, held until healed.
    held = {"restart_loop", "crash_loop", "hang", "checkpoint_broken_restarts"}
    held |= {"checkpoint_stall", "throughput_leak"}
    assert {k: n for k, n in result.pages_per_incident.items() if k in held} == dict.fromkeys(
        held, 1
    )
    assert not [e.name for e, _ in result.resolved_early if e.name in held]
    # Issue 16: a restart loop that never steps pages within restart_budget + `for` (+ the
    # minute of the last step and group_wait) of its last step; broken checkpointing across
    # restarts pages although every restart "refreshes" the process.
    assert result.time_to_page["restart_loop"] <= (15 + 1 + 2) * 60
    assert result.time_to_page["checkpoint_broken_restarts"] is not None


# Issue 26 items 1 and 2: state kept in range windows forgot while an incident lasted (the dead
# job's page resolved after ~2 h and paged again; goodput recorded nothing while no rank was
# scraped, ETTR 4.7 points high). Now carried by the rules (signals/durable.py), the goodput
# wall time covers hours with no rank target, a stale-checkpoint page covers the goodput its
# incident burns, and vanished ranks of a job that already paged are that incident.


def test_reduced_replay_pages_a_dead_job_once_for_its_whole_time(replay) -> None:
    result = score(replay)
    assert result.pages_per_incident["dead_job"] == 1
    assert not result.resolved_early, [(e.name, p.alertname) for e, p in result.resolved_early]


def test_reduced_replay_pages_nothing_but_its_incidents(replay) -> None:
    result = score(replay)
    assert result.pages == result.nonrecovering
    assert result.extra_pages == 0, [(n.alertname, n.at - EPOCH) for n in result.unclaimed]


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


def test_reduced_replay_first_notification_names_the_culprit(replay) -> None:
    """Issue 28: each incident with a faulty node is first notified naming it (the hang's page
    through its suspects), and no notification names a healthy node."""
    result = judge(replay)
    # The crash loop's bad node passes its health checks and shows nothing: none can name it.
    assert [n.what for n in result.named if not n.node_named] == ["crash_loop"]
    assert [n.node_named for n in result.named if n.what == "hang"] == [True]
    assert result.wrong == []
    lines = render(replay, score(replay)).splitlines()
    assert lines[-2].startswith("culprit: culprit_named=20/21 ")


def test_reduced_replay_tickets_failslows_naming_their_nodes(replay) -> None:
    """A throttled GPU is ticketed naming its node within 15 minutes; a slow host's rank
    later (TrainingStraggler: a 5-minute average, then 15 minutes' `for`); neither pages."""
    seen = {f.failslow.kind: f.ticketed_s for f in judge(replay).failslows}
    assert seen["gpu"] is not None and seen["gpu"] <= FAILSLOW_TICKET_S
    assert seen["host"] is not None and seen["host"] <= 25 * 60
    assert score(replay).extra_pages == 0


def test_generated_inhibition_makes_a_gsp_timeout_one_gpu_fault() -> None:
    """manual: a GSP timeout drops the GPU (GpuLost) and logs XID 119 (GpuXidCritical): one
    fault, one page; XID 119 on another GPU still pages."""
    spec, _ = fleet_spec(2, "manual")
    _, am_text, _ = generated_files(spec)
    manager = Alertmanager(am_text)
    base = {"training_job": spec.name, "team": spec.team, "severity": "page", "node": "n1"}
    lost = base | {"alertname": GPU_LOST, "gpu": "3"}
    gsp = base | {"alertname": GPU_XID_CRITICAL, "gpu": "3", "xid": "119"}
    other = gsp | {"gpu": "4"}
    assert manager.inhibited(gsp, [lost, gsp, other])
    assert not manager.inhibited(other, [lost, gsp, other])


def test_generated_inhibition_makes_the_burn_of_a_paged_interruption_one_page() -> None:
    """manual: a crash that paged (TrainingRestarted), ranks down (TrainingTargetsDown) or a
    hang (TrainingStalled) spends goodput: the fast burn while that page is open is the same
    incident (issue 26: the replay paged SloErrorBudgetBurnFast in a restart loop, a dead job
    and a hang). A ticket mutes no page; the burn of a healthy job still pages."""
    spec, _ = fleet_spec(2, "manual")
    _, am_text, _ = generated_files(spec)
    manager = Alertmanager(am_text)
    base = {"training_job": spec.name, "team": spec.team}
    burn = base | {"alertname": SLO_ERROR_BUDGET_BURN_FAST, "slo": "goodput", "severity": "page"}
    for cause in (TRAINING_RESTARTED, TRAINING_TARGETS_DOWN, TRAINING_STALLED):
        page = base | {"alertname": cause, "severity": "page"}
        assert manager.inhibited(burn, [page, burn]), cause
        assert not manager.inhibited(burn, [page | {"severity": "ticket"}, burn]), cause
    assert not manager.inhibited(burn, [burn])
