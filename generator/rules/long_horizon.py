"""Long-horizon promtool tests: a page right for the whole incident, hours and days long.

State kept in a range window forgets while an incident lasts (a dead job's page resolved after
an hour, a finished job became an incident after a day). These tests run a job's own rules over
hours and days, at a coarse step (STEP minutes between samples and evaluations: the carried
state reads its previous value within the 5m lookback), with only the series the alerts under
test read, and check the page at several points of the incident, without a break, and that it
resolves within minutes of the recovery. One file per job (`alerts/<job>.long.test.yaml`); the
short ones at full resolution (`short_tests`) go in the job's own test file.
"""

from __future__ import annotations

from collections.abc import Callable

from trainsignals.generator.alerts.definitions.loss_checkpoint import CHECKPOINT_TOO_OLD
from trainsignals.generator.alerts.definitions.recovery import TRAINING_NO_PROGRESS
from trainsignals.generator.alerts.definitions.restarts import HEALED_AFTER_S, TRAINING_RESTARTED
from trainsignals.generator.alerts.definitions.training import (
    TRAINING_STALLED,
    TRAINING_TARGETS_DOWN,
)
from trainsignals.generator.alerts.rules import severity
from trainsignals.generator.rules.reads import Reads, alert_reads, keeps
from trainsignals.generator.rules.reads import record_reads as document_tokens
from trainsignals.generator.signals.promql import RuleContext, matchers, regex
from trainsignals.generator.signals.recording import group_names
from trainsignals.generator.testkit.faults import FAULT_ONSET, JobTimeline, restart, stall
from trainsignals.generator.testkit.input_series import RawSeries
from trainsignals.generator.testkit.job_series import rank_labels, target_series
from trainsignals.generator.testkit.series_notation import encode_shared, shared_encodings
from trainsignals.generator.testkit.test_inputs import TestInputs, sampled_job_series
from trainsignals.metrics.promql_reads import records_read

STEP = 3  # minutes between samples and between evaluations
DEAD_FOR = 8 * 60  # a dead job: pods Pending for 8 hours
LOOP_FOR = 4 * 60  # a restart loop that never steps again, every LOOP_EVERY minutes
LOOP_EVERY = 15
FINISHED_FOR = 3 * 24 * 60  # a finished job watched for 3 days, its GPU exporters left
DONE_AT = 99
SAVED_AT = 63  # the healthy job's first checkpoint is written at 1h03
SAVES_FAIL = 70  # saves fail from here
HANG = 25  # minutes of an unrelated hang while saves fail
RESOLVED_WITHIN = 9  # minutes after the recovery the page must be gone


def _up(n: int) -> int:
    """`n` rounded up to an evaluation time."""
    return -(-n // STEP) * STEP


def progress_page(ctx: RuleContext) -> str:
    """What pages a job that stopped progressing, by mode: the self-healing loop's page, or
    the stall (the default mode has the same durable notion of progress)."""
    return TRAINING_NO_PROGRESS if ctx.spec.recovery.automatic else TRAINING_STALLED


def _reads(document: dict, alerts: list[str], records: tuple[str, ...] = ()) -> Reads:
    reads, tokens = alert_reads(document), document_tokens(document)
    found: set[str] = set()
    for alert in alerts:
        if reads.get(alert) is None:
            return None
        found |= reads[alert]
    for name in records_read(set(records), tokens):
        found |= tokens[name] | {name}
    return frozenset(found)


def _inputs(
    ctx: RuleContext,
    t: JobTimeline,
    reads: Reads,
    down: Callable[[str, str, int], bool] | None = None,
    training_until: int | None = None,
    minutes: int | None = None,
) -> list[dict]:
    """The job's, its targets' series, those `reads` keeps, one sample every STEP minutes;
    the targets' over `minutes` (None: the timeline's)."""
    targets = target_series(ctx, t.minutes if minutes is None else minutes, down)
    if training_until is not None:  # the ranks left service discovery; GPU exporters stay
        targets = [
            RawSeries(s.name, s.labels, s.values[: training_until + 1])
            if s.labels["job"] == ctx.spec.scrape_jobs.training
            else s
            for s in targets
        ]
    encoded = sampled_job_series(t, reads, STEP)  # one rank's: every rank's are alike
    inputs = [
        {"series": name + matchers({**labels, **extra}), "values": text}
        for labels in rank_labels(ctx)
        for name, extra, text in encoded
    ]
    for s in targets:
        selector = s.name + matchers(s.labels)
        if keeps(reads, selector):
            inputs.append({"series": selector, "values": encode_shared(s.values[::STEP])})
    return inputs


def _alert(ctx: RuleContext, alert: str, state: str | None = None) -> str:
    labels = {"alertname": alert, "training_job": ctx.job}
    return "ALERTS" + matchers(labels | ({"alertstate": state} if state else {}))


def incident_checks(ctx: RuleContext, alert: str, fires: int, ends: int, back: int) -> list[dict]:
    """`alert` silent before the incident, firing at `fires`, at points through it and at
    every evaluation from `fires` to `ends`, and gone by `back` (minutes)."""
    firing = _alert(ctx, alert, "firing")
    fires, ends, back = _up(fires), _up(ends), _up(back)
    points = sorted({fires, _up((fires + ends) // 2), ends})
    return [
        {"expr": _alert(ctx, alert), "eval_time": f"{_up(FAULT_ONSET) - STEP}m", "exp_samples": []},
        *(
            {
                "expr": f"count({firing})",
                "eval_time": f"{at}m",
                "exp_samples": [{"labels": "{}", "value": 1}],
            }
            for at in points
        ),
        {
            "expr": f"min(min_over_time(({firing} or on () vector(0))[{ends - fires}m:{STEP}m]))",
            "eval_time": f"{ends}m",
            "exp_samples": [{"labels": "{}", "value": 1}],
        },
        {"expr": _alert(ctx, alert), "eval_time": f"{back}m", "exp_samples": []},
    ]


def dead_job_test(ctx: RuleContext, document: dict, dead_for: int = DEAD_FOR) -> dict:
    """The job steps until FAULT_ONSET, then its pods stay Pending (targets down, no series)
    for `dead_for` minutes: the page fires within its budget and holds until a new
    incarnation steps again (issue 26: it resolved after an hour while `up` was still 0)."""
    alert, o = progress_page(ctx), ctx.spec.objectives
    last = FAULT_ONSET + dead_for
    minutes = last + 3 * RESOLVED_WITHIN
    t = JobTimeline(ctx, minutes).build()
    restart(t, FAULT_ONSET, last)
    budget = ctx.spec.recovery.restart_budget if ctx.spec.recovery.automatic else o.max_pause
    stall = alert == TRAINING_STALLED
    # The stall holds through the last evaluation of the outage (not the first after it).
    checks = incident_checks(
        ctx,
        alert,
        FAULT_ONSET + budget // 60 + 2 * STEP,
        last - STEP + 1 if stall else last,
        last + RESOLVED_WITHIN,
    )
    if stall:
        # Back from an outage TrainingTargetsDown paged, still starting up: its age counts the
        # outage, that page's incident; the stall must not page anew (issue 26: the fleet
        # replay's dead job paged TrainingStalled when it came back).
        checks.append(
            {"expr": _alert(ctx, alert), "eval_time": f"{_up(last + 1)}m", "exp_samples": []}
        )
    return {
        "name": f"a job dead for {dead_for // 60}h pages {alert} for the whole outage, "
        "then resolves",
        "interval": f"{STEP}m",
        "input_series": _inputs(
            ctx,
            t,
            _reads(document, [alert]),
            lambda kind, node, m: kind == "training" and FAULT_ONSET <= m <= last,
        ),
        "promql_expr_test": checks,
    }


def restart_loop_test(ctx: RuleContext, document: dict) -> dict:
    """A new incarnation every LOOP_EVERY minutes for LOOP_FOR, none reaching a step (the last
    step at FAULT_ONSET): a page for the whole loop, in either mode (issue 26: in the default
    mode only a ticket, the age fell back to each process's start). In the default mode the
    page is the first unannounced restart's, held until a step HEALED_AFTER_S after the last
    incarnation's start; the loop never stalls (no incarnation is up for max_pause)."""
    if not ctx.spec.recovery.automatic:
        return _restart_loop(ctx, document, TRAINING_RESTARTED, 2 * STEP, HEALED_AFTER_S // 60)
    budget = ctx.spec.recovery.restart_budget
    return _restart_loop(ctx, document, progress_page(ctx), budget // 60 + 2 * STEP, 0)


def _restart_loop(ctx: RuleContext, document: dict, alert: str, fires: int, heal: int) -> dict:
    last = FAULT_ONSET + LOOP_FOR
    minutes = last + 3 * RESOLVED_WITHIN
    t = JobTimeline(ctx, minutes).build()
    for m in range(FAULT_ONSET, minutes + 1):
        loop = min(m, last) - FAULT_ONSET
        t.process_start[m] = 60.0 * (FAULT_ONSET + LOOP_EVERY * (loop // LOOP_EVERY))
        if m <= last + 2:
            t.phase[m] = "startup"
            t.tokens_per_second[m] = t.steps_per_second[m] = t.data_wait_share[m] = 0.0
    return {
        "name": f"a restart loop for {LOOP_FOR // 60}h that never steps pages {alert} "
        "throughout, then resolves",
        "interval": f"{STEP}m",
        "input_series": _inputs(ctx, t, _reads(document, [alert])),
        "promql_expr_test": incident_checks(
            ctx, alert, FAULT_ONSET + fires, last, last + heal + RESOLVED_WITHIN
        ),
    }


def broken_checkpoints_test(ctx: RuleContext, document: dict) -> dict:
    """Every save fails from SAVES_FAIL on and the job restarts before the age limit each
    time (each incarnation restores the same checkpoint) for three times the limit: one
    CheckpointTooOld page for all of it, resolved by the first good save after."""
    limit = ctx.spec.objectives.checkpoint_max_age // 60
    every = max(limit - 10, 5)
    last = SAVES_FAIL + 3 * limit
    saved = next(m for m in range(last, last + 61) if m % 60 == 3)  # the next hourly save
    minutes = saved + 3 * RESOLVED_WITHIN

    def fault(t: JobTimeline, m: int) -> None:
        if SAVES_FAIL <= m < last:
            t.checkpoint_ok[m] = False
            since = m - SAVES_FAIL
            if since >= every:
                t.process_start[m] = 60.0 * (SAVES_FAIL + every * (since // every))
                if since % every < 3:
                    t.phase[m] = "startup"
                    t.tokens_per_second[m] = t.steps_per_second[m] = t.data_wait_share[m] = 0.0
        elif m >= last:
            t.process_start[m] = t.process_start[last - 1]

    t = JobTimeline(ctx, minutes, fault).build()
    alert = CHECKPOINT_TOO_OLD
    return {
        "name": f"checkpointing broken across restarts for {3 * limit // 60}h pages {alert} "
        "throughout, resolved by the next good save",
        "interval": f"{STEP}m",
        "input_series": _inputs(ctx, t, _reads(document, [alert])),
        "promql_expr_test": incident_checks(
            ctx, alert, SAVED_AT + limit + limit // 4 + 10, last, saved + RESOLVED_WITHIN
        ),
    }


def hang_after_saves_stop_test(ctx: RuleContext, document: dict) -> dict:
    """Saves fail from SAVES_FAIL; a HANG-minute hang (its own page) ends before the checkpoint
    is due. CheckpointTooOld pages when the unsaved training time passes the limit, not hours
    later (issue 26: an unrelated page muted it for checkpoint_max_age after it ended)."""
    limit = ctx.spec.objectives.checkpoint_max_age // 60
    hang_at = SAVED_AT + limit // 2 + 15
    minutes = SAVED_AT + limit + HANG + 10 + 30

    def fault(t: JobTimeline, m: int) -> None:
        if m >= SAVES_FAIL:
            t.checkpoint_ok[m] = False
        if hang_at <= m < hang_at + HANG:
            stall(t, m)

    t = JobTimeline(ctx, minutes, fault).build()
    alert = CHECKPOINT_TOO_OLD
    due = _up(SAVED_AT + limit + HANG + 10 + 9)  # the hang's minutes are no unsaved work
    firing = _alert(ctx, alert, "firing")
    return {
        "name": f"{alert} pages on time after an unrelated {HANG}m hang while saves fail",
        "interval": f"{STEP}m",
        "input_series": _inputs(ctx, t, _reads(document, [alert])),
        "promql_expr_test": [
            {"expr": _alert(ctx, alert), "eval_time": f"{_up(hang_at)}m", "exp_samples": []},
            {
                "expr": f"count({firing})",
                "eval_time": f"{due}m",
                "exp_samples": [{"labels": "{}", "value": 1}],
            },
        ],
    }


def finished_job_test(ctx: RuleContext, document: dict) -> dict:
    """A job that finished (phase "done", its ranks leave service discovery, its GPU exporters
    stay) is completed for 3 days, and none of its progress pages fires (issue 26: completion
    was forgotten after a day, and ScrapeTargetsVanished paged)."""
    minutes = DONE_AT + FINISHED_FOR
    # The ranks' series end when the job is done: its timeline is worked out that far.
    t = JobTimeline(ctx, DONE_AT).build()
    t.completed = DONE_AT
    t.phase[DONE_AT] = "done"
    t.tokens_per_second[DONE_AT] = t.steps_per_second[DONE_AT] = 0.0
    progress = (TRAINING_NO_PROGRESS, TRAINING_STALLED, TRAINING_TARGETS_DOWN, CHECKPOINT_TOO_OLD)
    alerts = [a for a in progress if severity(ctx, a) == "page"]
    done = f"job:trainsignals_completed:bool{ctx.recorded()}"
    reads = _reads(document, alerts, (done.partition("{")[0],))
    pages = "ALERTS" + matchers(
        {"alertname": regex("|".join(alerts)), "alertstate": "firing", "training_job": ctx.job}
    )
    return {
        "name": "a finished job whose GPU exporters stay is completed for 3 days, nothing pages",
        "interval": f"{STEP}m",
        "input_series": _inputs(ctx, t, reads, training_until=DONE_AT, minutes=minutes),
        "promql_expr_test": [
            *(
                {"expr": done, "eval_time": f"{at}m", "exp_samples": [{"labels": done, "value": 1}]}
                for at in (_up(DONE_AT + 1), _up(DONE_AT + 25 * 60), minutes - minutes % STEP)
            ),
            {
                "expr": f"count_over_time({pages}[{minutes}m])",
                "eval_time": f"{minutes - minutes % STEP}m",
                "exp_samples": [],
            },
        ],
    }


def eval_after_healed_restart_test(ctx: RuleContext, document: dict) -> dict:
    """Recovery mode manual: a crash and restart pages TrainingRestarted; the job steps again,
    the page resolves once it is healed, and a long eval an hour later (no step for longer than
    the healing time) does not bring it back: healed stays healed (issue 26)."""
    heal = HEALED_AFTER_S // 60
    eval_at = FAULT_ONSET + 60
    eval_for = max(heal + 15, ctx.spec.objectives.max_pause // 60)
    minutes = eval_at + eval_for + 30
    t = JobTimeline(ctx, minutes).build()
    restart(t, FAULT_ONSET, FAULT_ONSET + 1)
    for m in range(eval_at, eval_at + eval_for):
        t.phase[m] = "eval"
        t.tokens_per_second[m] = t.steps_per_second[m] = t.data_wait_share[m] = 0.0
    alert = TRAINING_RESTARTED
    back = FAULT_ONSET + 1 + 2 + heal + RESOLVED_WITHIN  # up, started, healed, resolved
    checks = incident_checks(ctx, alert, FAULT_ONSET + 2 * STEP, FAULT_ONSET + heal, back)
    checks.append(
        {
            "expr": f"count_over_time({_alert(ctx, alert)}[{minutes - _up(back)}m])",
            "eval_time": f"{minutes - minutes % STEP}m",
            "exp_samples": [],
        }
    )
    return {
        "name": f"a restart pages {alert} until healed; a {eval_for}m eval an hour later "
        "does not page it again",
        "interval": f"{STEP}m",
        "input_series": _inputs(
            ctx,
            t,
            _reads(document, [alert]),
            lambda kind, node, m: kind == "training" and FAULT_ONSET <= m <= FAULT_ONSET + 1,
        ),
        "promql_expr_test": checks,
    }


def long_tests(ctx: RuleContext, document: dict) -> list[dict]:
    """The long-horizon tests of a job, in its recovery mode."""
    tests = [
        dead_job_test(ctx, document),
        restart_loop_test(ctx, document),
        broken_checkpoints_test(ctx, document),
        hang_after_saves_stop_test(ctx, document),
        finished_job_test(ctx, document),
    ]
    if not ctx.spec.recovery.automatic:
        tests.append(eval_after_healed_restart_test(ctx, document))
    return tests


def long_suite(ctx: RuleContext, rule_file: str, document: dict) -> dict:
    """The promtool file of a job's long-horizon tests."""
    with shared_encodings():  # every rank's series are alike, and so are the targets'
        tests = long_tests(ctx, document)
    return {
        "rule_files": [rule_file],
        "evaluation_interval": f"{STEP}m",
        "group_eval_order": [*group_names(ctx), f"trainsignals-{ctx.job}-alerts"],
        "tests": tests,
    }


EVAL_AT, EVAL_FOR, FIRST_STEP = 200, 10, 3  # a 10m eval at 3h20, a slow first step after it


def slow_first_step_test(ctx: RuleContext, inputs: TestInputs | None = None) -> dict:
    """A 10-minute eval, then a first step that takes FIRST_STEP minutes (a recompile, the data
    loader restarting): no TrainingStalled, whose limit runs from the end of the pause (issue
    26: it counted the eval). At full resolution, in the job's own test file (`inputs`: its
    TestInputs, whose healthy series it shares)."""
    minutes = EVAL_AT + EVAL_FOR + FIRST_STEP + 10
    t = JobTimeline(ctx, minutes).build()
    for m in range(EVAL_AT, EVAL_AT + EVAL_FOR + FIRST_STEP):
        t.phase[m] = "eval" if m < EVAL_AT + EVAL_FOR else "train"
        t.tokens_per_second[m] = t.steps_per_second[m] = t.data_wait_share[m] = 0.0
    stalled = _alert(ctx, TRAINING_STALLED)
    return {
        "name": f"a {EVAL_FOR}m eval then a {FIRST_STEP}m first step raises no {TRAINING_STALLED}",
        "interval": "1m",
        "input_series": (inputs or TestInputs(ctx, minutes)).job(
            t, frozenset(("trainsignals_last_step_timestamp_seconds", "trainsignals_phase"))
        ),
        "promql_expr_test": [
            {
                "expr": f"count_over_time({stalled}[{minutes}m])",
                "eval_time": f"{minutes}m",
                "exp_samples": [],
            }
        ],
    }
