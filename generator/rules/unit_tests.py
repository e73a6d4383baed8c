"""promtool unit tests for a job's rules, generated from the same spec.

One healthy test (warm-up, hourly checkpoint pauses, an eval pause) asserts that no alert is
ever pending or firing over ten hours. One test per alert injects its fault into that healthy
job and asserts the alert is silent before the fault and firing, with exactly the expected
labels, after it; it carries only the series of the names its alert reads (rules/reads.py),
on which that alert's value alone depends. Alerts are checked through the `ALERTS` series
rather than `alert_rule_test`, because promtool compares annotations verbatim and ours carry
live values.
"""

from __future__ import annotations

from trainsignals.generator.alerts.definitions import fabric as fabric_definitions
from trainsignals.generator.alerts.definitions.loss_checkpoint import CHECKPOINT_TOO_OLD
from trainsignals.generator.alerts.definitions.reachability import (
    NODE_DOWN,
    NODE_UNREACHABLE_RECENTLY,
)
from trainsignals.generator.alerts.rules import AlertRule, static_labels
from trainsignals.generator.rules.checkpoint_restart import checkpoint_restart_test
from trainsignals.generator.rules.long_horizon import slow_first_step_test
from trainsignals.generator.rules.reads import Reads, alert_reads, keeps
from trainsignals.generator.rules.straggler_tests import straggler_tests
from trainsignals.generator.signals.promql import RuleContext, matchers
from trainsignals.generator.signals.recording import group_names
from trainsignals.generator.signals.xid_catalog import action_of
from trainsignals.generator.testkit.fabric_series import FABRIC_PORT, ib_series
from trainsignals.generator.testkit.faults import (
    FAULT_ONSET,
    FaultCase,
    JobTimeline,
    restart,
)
from trainsignals.generator.testkit.goodput_tests import goodput_tests
from trainsignals.generator.testkit.gpu_series import test_uuid
from trainsignals.generator.testkit.input_series import RawSeries
from trainsignals.generator.testkit.job_series import (
    job_series,
    target_series,
)
from trainsignals.generator.testkit.series_notation import shared_encodings
from trainsignals.generator.testkit.test_inputs import TestInputs

HEALTHY_HORIZON = 600  # minutes the healthy test covers
# The fault vocabulary lives in generator/testkit/faults.py; these names are part of this
# module's API.
__all__ = [
    "FAULT_ONSET",
    "FaultCase",
    "JobTimeline",
    "job_series",
    "promtool_suite",
    "restart",
    "rule_tests",
]

# The fabric definitions (InfiniBand ports): a spec with any of them gets healthy port series.
FABRIC_ALERTS = frozenset(d.name for d in fabric_definitions.GROUP.definitions)


def _alerts_query(ctx: RuleContext, alert: str, state: str | None = None) -> str:
    labels = {"alertname": alert, "training_job": ctx.job}
    if state:
        labels["alertstate"] = state
    return "ALERTS" + matchers(labels)


def _expected_labels(ctx: RuleContext, case: FaultCase, node_labels: dict) -> str:
    labels = {"alertname": case.alert, "alertstate": "firing", **static_labels(ctx, case.alert)}
    for name in case.labels:
        if node_labels[name] != "":  # an XID without a catalog action has no action label
            labels[name] = node_labels[name]
    # A label may quote a selector (AlertInputMissing's `series`): escaped as PromQL strings are.
    labels |= {k: v.replace("\\", "\\\\").replace('"', '\\"') for k, v in case.extra_labels.items()}
    return "ALERTS" + matchers(labels)


def _minutes(case: FaultCase) -> int:
    return case.onset + case.fires_after + case.holds_for + 1


def fault_test(ctx: RuleContext, case: FaultCase, inputs: TestInputs, reads: Reads = None) -> dict:
    """The healthy job bent by `case`'s fault, with the series of the names in `reads` alone
    (rules/reads.py: the alert under test reads no others; None: all of them)."""
    minutes = _minutes(case)
    series: list[dict] = []
    if case.targets_down:
        series += inputs.raw(target_series(ctx, minutes, case.targets_down))
    if case.gpu_overrides:
        series += inputs.gpus(minutes, case.gpu_overrides)
    if case.job_fault or not (case.targets_down or case.gpu_overrides):
        series += inputs.job(JobTimeline(ctx, minutes, case.job_fault).build(), reads)
    if case.raw_series:
        series += inputs.raw(case.raw_series(ctx, minutes))
    if reads is not None:
        series = [s for s in series if keeps(reads, s["series"])]
    xid = next(
        (k.removeprefix("xid:") for k in case.gpu_overrides or {} if k.startswith("xid:")), ""
    )
    node_labels = {
        "node": "node-0",
        "gpu": "0",
        "uuid": test_uuid("node-0", 0),
        "path": "/checkpoints",
        "xid": xid,
        "action": action_of(xid),
    } | FABRIC_PORT
    if not case.fires:
        return _quiet_test(ctx, case, series, minutes)
    return {
        "name": f"{case.alert} fires {case.what} and not before",
        "interval": "1m",
        "input_series": series,
        "promql_expr_test": [
            {
                "expr": _alerts_query(ctx, case.alert),
                "eval_time": f"{case.onset - 1}m",
                "exp_samples": [],
            },
            {
                "expr": _alerts_query(ctx, case.alert, "firing"),
                "eval_time": f"{case.onset + case.fires_after}m",
                "exp_samples": [
                    {"labels": _expected_labels(ctx, case, {**node_labels, "slo": slo}), "value": 1}
                    for slo in ([s.sli for s in ctx.spec.slos] if "slo" in case.labels else [""])
                ],
            },
            *_holds_test(ctx, case),
        ],
    }


def _quiet_test(ctx: RuleContext, case: FaultCase, series: list[dict], minutes: int) -> dict:
    """A quiet case: the alert is never pending nor firing over the whole test."""
    return {
        "name": f"{case.alert} stays quiet {case.what}",
        "interval": "1m",
        "input_series": series,
        "promql_expr_test": [
            {
                "expr": f"count_over_time({_alerts_query(ctx, case.alert)}[{minutes}m])",
                "eval_time": f"{minutes}m",
                "exp_samples": [],
            }
        ],
    }


def _holds_test(ctx: RuleContext, case: FaultCase) -> list[dict]:
    """1 when the alert fired at every evaluation of the `holds_for` minutes after it first
    had to: a resolve in between would be a second page for the same incident."""
    if not case.holds_for:
        return []
    firing = _alerts_query(ctx, case.alert, "firing")
    return [
        {
            "expr": f"min(min_over_time(({firing} or on () vector(0))[{case.holds_for}m:1m]))",
            "eval_time": f"{case.onset + case.fires_after + case.holds_for}m",
            "exp_samples": [{"labels": "{}", "value": 1}],
        }
    ]


def healthy_test(ctx: RuleContext, inputs: TestInputs, fabric: bool = False) -> dict:
    """`fabric`: the spec has InfiniBand alerts, so the healthy node runs node_exporter's
    InfiniBand collector (without its series AlertInputMissing would fire, rightly)."""
    minutes = HEALTHY_HORIZON
    firing = matchers({"training_job": ctx.job, "alertstate": "firing"})
    series = (
        inputs.raw(target_series(ctx, minutes))
        + inputs.gpus(minutes)
        + inputs.job(JobTimeline(ctx, minutes).build())
        + inputs.raw(ib_series(ctx, minutes, set(), []) if fabric else [])
    )
    return {
        "name": "healthy job with warm-up, eval and checkpoint pauses never fires",
        "interval": "1m",
        "input_series": series,
        "promql_expr_test": [
            {
                "expr": f"count_over_time(ALERTS{firing}[{minutes}m])",
                "eval_time": f"{minutes}m",
                "exp_samples": [],
            },
        ],
    }


RESTART_AT = 200  # minute the restart test's job dies, right after an eval pause (the healthy
# job's own 10m eval at 150 is over: an hour of redone work and a long eval together would
# rightly burn the goodput budget fast)
PAUSE_BEFORE = 5  # minutes of that eval pause


def restart_test(ctx: RuleContext, inputs: TestInputs) -> dict:
    """auto_restart: a job that stops right after an eval pause and is back at its first step
    within the restart budget, counted from the pause's end, reaches no pager. Counted from
    the last step (before the pause), the same restart is over budget: a no-progress clock
    that ignored the pause would page (the 54-day fleet replay's extra page, issue 16)."""
    minutes = HEALTHY_HORIZON
    budget = ctx.spec.recovery.restart_budget // 60
    down = (RESTART_AT, RESTART_AT + max(3, budget - PAUSE_BEFORE))
    timeline = JobTimeline(ctx, minutes).build()
    for m in range(RESTART_AT - PAUSE_BEFORE, RESTART_AT):
        timeline.phase[m] = "eval"
        timeline.tokens_per_second[m] = timeline.steps_per_second[m] = 0.0
        timeline.data_wait_share[m] = 0.0
    restart(timeline, *down)
    pages = matchers({"training_job": ctx.job, "alertstate": "firing", "severity": "page"})
    series = (
        inputs.raw(
            target_series(
                ctx, minutes, lambda kind, node, m: kind == "training" and down[0] <= m <= down[1]
            )
        )
        + inputs.gpus(minutes)
        + inputs.job(timeline)
    )
    restarts = f"job:trainsignals_restarts:changes1h{ctx.recorded()}"
    return {
        "name": "a restart right after an eval pause, inside the restart budget, raises no page "
        "and counts as one restart",
        "interval": "1m",
        "input_series": series,
        "promql_expr_test": [
            {
                "expr": f"count_over_time(ALERTS{pages}[{minutes}m])",
                "eval_time": f"{minutes}m",
                "exp_samples": [],
            },
            {
                "expr": restarts,
                "eval_time": f"{down[1] + 10}m",
                "exp_samples": [{"labels": restarts, "value": 1}],
            },
        ],
    }


RESTART_EVERY = 80  # minutes: Llama 3's rate at 16k GPUs is one interruption per ~2.8 hours


def frequent_restarts_test(ctx: RuleContext, inputs: TestInputs) -> dict:
    """auto_restart without a max_restarts cap: a restart every 80 minutes, each recovered
    within minutes and followed by progress (4-5 restarts in any 6 hours), pages nothing. A
    count of restarts is not a crash loop (issue 16: the old 3-in-6h rule paged 11 times in
    3 days at Llama 3's rate)."""
    minutes = HEALTHY_HORIZON
    timeline = JobTimeline(ctx, minutes).build()
    crashes = range(FAULT_ONSET, minutes - 10, RESTART_EVERY)
    for at in crashes:
        for m in range(at, minutes + 1):
            timeline.process_start[m] = (at + 2) * 60.0
            if m <= at + 4:  # 2 minutes gone (every rank dies together), 3 starting up
                timeline.phase[m] = "startup"
                timeline.tokens_per_second[m] = timeline.steps_per_second[m] = 0.0
                timeline.data_wait_share[m] = 0.0
    pages = matchers({"training_job": ctx.job, "alertstate": "firing", "severity": "page"})
    restarts = f"job:trainsignals_restarts:changes1d{ctx.recorded()}"
    return {
        "name": f"a restart every {RESTART_EVERY}m with progress between pages nothing",
        "interval": "1m",
        "input_series": inputs.raw(target_series(ctx, minutes))
        + inputs.gpus(minutes)
        + inputs.job(timeline),
        "promql_expr_test": [
            {
                "expr": f"count_over_time(ALERTS{pages}[{minutes}m])",
                "eval_time": f"{minutes}m",
                "exp_samples": [],
            },
            {
                "expr": restarts,
                "eval_time": f"{minutes}m",
                "exp_samples": [{"labels": restarts, "value": len(crashes)}],
            },
        ],
    }


DONE_AT, AFTER_DONE = 100, 720  # minute the job finishes cleanly; minutes watched after


def completion_test(ctx: RuleContext, inputs: TestInputs, fabric: bool = False) -> dict:
    """A job that finished (phase "done", then its ranks leave service discovery) raises no
    alert for 12 hours, in either recovery mode: completion is not an incident. The GPU
    exporters stay (a DaemonSet outlives the job); `fabric`: as in healthy_test."""
    minutes = DONE_AT + AFTER_DONE
    timeline = JobTimeline(ctx, minutes).build()
    timeline.completed = DONE_AT
    timeline.phase[DONE_AT] = "done"
    timeline.tokens_per_second[DONE_AT] = timeline.steps_per_second[DONE_AT] = 0.0
    training_up = [
        RawSeries(s.name, s.labels, s.values[: DONE_AT + 1])
        if s.labels["job"] == ctx.spec.scrape_jobs.training
        else s
        for s in target_series(ctx, minutes)
    ]
    firing = matchers({"training_job": ctx.job, "alertstate": "firing"})
    done = f"job:trainsignals_completed:bool{ctx.recorded()}"
    return {
        "name": "healthy, completed: phase done, then its targets leave; nothing fires",
        "interval": "1m",
        "input_series": inputs.raw(training_up)
        + inputs.gpus(minutes)
        + inputs.job(timeline)
        + inputs.raw(ib_series(ctx, minutes, set(), []) if fabric else []),
        "promql_expr_test": [
            {
                "expr": f"count_over_time(ALERTS{firing}[{minutes}m])",
                "eval_time": f"{minutes}m",
                "exp_samples": [],
            },
            {
                "expr": done,
                "eval_time": f"{minutes}m",
                "exp_samples": [{"labels": done, "value": 1}],
            },
        ],
    }


BLIP_AT, OUTAGE = 10, (20, 29)  # node-0: one failed scrape; then ten minutes down


def node_outage_test(ctx: RuleContext, inputs: TestInputs) -> dict:
    """One outage, one ticket: a node outage NodeDown fires for raises no
    NodeUnreachableRecently (during it or in the hour after), and neither does a single failed
    scrape of every target of the node, nor targets that come up late at the job's start."""
    minutes = OUTAGE[1] + 75  # the hour NodeUnreachableRecently looks back, and more

    def down(kind: str, node: str, m: int) -> bool:
        return node == "node-0" and (m < 2 or m == BLIP_AT or OUTAGE[0] <= m <= OUTAGE[1])

    recent = _alerts_query(ctx, NODE_UNREACHABLE_RECENTLY)
    node_down = _alerts_query(ctx, NODE_DOWN, "firing")
    return {
        "name": f"{NODE_UNREACHABLE_RECENTLY} stays silent on a node outage {NODE_DOWN} fires "
        "for, one failed scrape, or targets that come up late",
        "interval": "1m",
        # node-0's targets only: the alerts are per node (a 64-node spec stays fast).
        "input_series": inputs.raw(
            [s for s in target_series(ctx, minutes, down) if s.labels["node"] == "node-0"]
        ),
        "promql_expr_test": [
            {
                "expr": f"count by (node) ({node_down})",
                "eval_time": f"{OUTAGE[1]}m",
                "exp_samples": [{"labels": '{node="node-0"}', "value": 1}],
            },
            {
                "expr": f"count_over_time({recent}[{minutes}m])",
                "eval_time": f"{minutes}m",
                "exp_samples": [],
            },
        ],
    }


def rule_tests(ctx: RuleContext, alerts: list[AlertRule], rule_file: str, rules: dict) -> dict:
    """The promtool tests of a job's rules file, `rule_file`, written from `rules`."""
    with shared_encodings():  # the healthy series recur in every test: encode each once
        return _rule_tests(ctx, alerts, rule_file, alert_reads(rules))


def _rule_tests(
    ctx: RuleContext, alerts: list[AlertRule], rule_file: str, reads: dict[str, Reads]
) -> dict:
    cases = [(case, reads.get(alert.name)) for alert in alerts for case in alert.faults]
    # One healthy job long enough for every test: each test's healthy series are its prefix.
    inputs = TestInputs(ctx, max([HEALTHY_HORIZON, *(_minutes(case) for case, _ in cases)]))
    fabric = any(a.name in FABRIC_ALERTS for a in alerts)
    tests = [healthy_test(ctx, inputs, fabric=fabric)]
    if any(a.name == NODE_UNREACHABLE_RECENTLY for a in alerts):
        tests.append(node_outage_test(ctx, inputs))
    if ctx.spec.recovery.automatic:
        tests.append(restart_test(ctx, inputs))
        if ctx.spec.recovery.max_restarts is None:
            tests.append(frequent_restarts_test(ctx, inputs))
    tests.append(completion_test(ctx, inputs, fabric=fabric))
    if any(a.name == CHECKPOINT_TOO_OLD for a in alerts):
        tests.append(checkpoint_restart_test(ctx, inputs))
    tests.append(slow_first_step_test(ctx, inputs))
    tests += [*(fault_test(ctx, c, inputs, r) for c, r in cases), *goodput_tests(ctx)]
    tests += straggler_tests(ctx, inputs, [a.name for a in alerts])
    return promtool_suite(ctx, rule_file, tests)


def promtool_suite(ctx: RuleContext, rule_file: str, tests: list[dict]) -> dict:
    """A promtool test file for one job's rules."""
    return {
        "rule_files": [rule_file],
        "evaluation_interval": "1m",
        # Without this, promtool may evaluate the alert group before the recording group at
        # the same timestamp, and an alert sees values one interval old: flaky tests.
        # promtool evaluates every group at every step, whatever its interval: the slow group's
        # rules are tested at 1m too.
        "group_eval_order": [*group_names(ctx), f"trainsignals-{ctx.job}-alerts"],
        "tests": tests,
    }
