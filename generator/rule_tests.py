"""promtool unit tests for a job's rules, generated from the same spec.

One healthy test (warm-up, hourly checkpoint pauses, an eval pause) asserts that no alert is
ever pending or firing over ten hours. One test per alert injects its fault into that healthy
job and asserts the alert is silent before the fault and firing, with exactly the expected
labels, after it. Alerts are checked through the `ALERTS` series rather than
`alert_rule_test`, because promtool compares annotations verbatim and ours carry live values.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import accumulate, repeat
from operator import mul, truediv

from trainsignals.exporters.training.metrics import STEP_BUCKETS

from trainsignals.metric_catalog import PHASES

from .alerts import AlertRule, severity, team
from .fabric_tests import FABRIC_PORT, ib_series
from .faults import FAULT_ONSET, GPU_HEALTHY, FaultCase, JobTimeline, restart
from .goodput_tests import goodput_tests, timeline_series
from .gpu_sources import RawSeries, gpu_source, test_uuid
from .promql import RuleContext, le_label, matchers
from .recording import group_names
from .series_notation import encode_shared, shared_encodings
from .xid_catalog import action_of

REPORTING_RANKS = 2  # ranks that carry job series in tests; rules aggregate over ranks
HEALTHY_HORIZON = 600  # minutes the healthy test covers
DISK_SIZE = 10e12
# The fault vocabulary lives in generator/faults.py; these names are part of this module's API.
__all__ = [
    "FAULT_ONSET",
    "FaultCase",
    "JobTimeline",
    "job_series",
    "promtool_suite",
    "restart",
    "rule_tests",
]


def _incarnations(t: JobTimeline, values: list, counter: bool) -> list:
    """Cut an outage out of a series; a counter restarts from zero after it."""
    if t.outage is None:
        return values
    first, last = t.outage
    base = values[last + 1] if counter and last + 1 < len(values) else 0.0
    return [
        None if first <= m <= last else (v - base if counter and m > last and v is not None else v)
        for m, v in enumerate(values)
    ]


def _cumulative(per_minute: list[float]) -> list[float]:
    """Counter values: the first minute's value is the starting point, not an increment.

    Increments are rounded to 1/64 so every sum is exact in binary floating point: promtool
    expands `a+bxn` as a + i*b, and that must equal our running sum to the last bit, or the
    counter would seem to step backwards where one run ends and the next begins.
    """
    # The same arithmetic through map(), without a Python frame per sample.
    sixty_fours = repeat(64)
    increments = map(truediv, map(round, map(mul, per_minute[1:], sixty_fours)), sixty_fours)
    return list(accumulate(increments, initial=0.0))


def step_buckets(t: JobTimeline) -> dict[str, tuple[float, float]]:
    """`le` label (as prometheus_client writes it) -> the share of healthy and of slow steps
    at or under it. Healthy steps take 0.75x the bound, slow ones 3x (JobTimeline)."""
    bound = t.step_time_bound
    les = (bound / 2, bound, 2 * bound, 4 * bound) if t.bound_bucket else STEP_BUCKETS
    shares = {le_label(le): (float(le >= 0.75 * bound), float(le >= 3 * bound)) for le in les}
    return shares | {"+Inf": (1.0, 1.0)}


def job_series(ctx: RuleContext, t: JobTimeline) -> list[RawSeries]:
    """Series of the ranks that report; each carries 1/REPORTING_RANKS of the job's work."""
    # Every rank reports the same values: computed once, each rank's series gets a copy.
    signals = _rank_signals(t)
    series: list[RawSeries] = []
    for rank in range(REPORTING_RANKS):
        labels = {**ctx.spec.selector_labels, "node": "node-0", "rank": str(rank)}
        series += [
            RawSeries(name, {**labels, **extra}, [*values]) for name, extra, values in signals
        ]
    if t.completed is not None:  # the ranks exited cleanly: their series end
        series = [RawSeries(s.name, s.labels, [*s.values[: t.completed + 1]]) for s in series]
    return series


def _rank_signals(t: JobTimeline) -> list[tuple[str, dict, list]]:
    """(name, labels beyond the rank's, values) of every series one reporting rank has."""
    signals: list[tuple[str, dict, list]] = []
    share = 1 / REPORTING_RANKS
    steps_pm = [s * 60 for s in t.steps_per_second]
    last_step, last_ckpt, global_step = progress_series(t)
    buckets = step_buckets(t)

    def add(name: str, values: list, extra: dict | None = None) -> None:
        values = _incarnations(t, values, counter=name.endswith(("_total", "_sum", "_bucket")))
        signals.append((name, extra or {}, values))

    add("trainsignals_tokens_total", _cumulative([v * 60 * share for v in t.tokens_per_second]))
    add("trainsignals_steps_total", _cumulative(steps_pm))
    add("trainsignals_step_duration_seconds_count", _cumulative(steps_pm))
    # Seconds inside steps: steps run back to back while the job is stepping.
    add(
        "trainsignals_step_duration_seconds_sum",
        _cumulative([60.0 if s > 0 else 0.0 for s in steps_pm]),
    )
    # Buckets with the same (healthy, slow) shares have the same counts: each pair once.
    counts: dict[tuple[float, float], list[float]] = {}
    for le, (healthy, slow) in buckets.items():
        if (healthy, slow) not in counts:
            counts[healthy, slow] = _cumulative(
                [
                    s * ((1 - share) * healthy + share * slow)
                    for s, share in zip(steps_pm, t.slow_step_share, strict=False)
                ]
            )
        add("trainsignals_step_duration_seconds_bucket", [*counts[healthy, slow]], {"le": le})
    add("trainsignals_data_wait_seconds_total", _cumulative([v * 60 for v in t.data_wait_share]))
    add("trainsignals_loss", t.loss)
    add("trainsignals_nonfinite_losses_total", _cumulative(t.nonfinite_per_minute))
    add("trainsignals_batches_dropped_total", _cumulative(t.dropped_per_minute))
    add("trainsignals_last_step_timestamp_seconds", last_step)
    add("trainsignals_last_checkpoint_timestamp_seconds", last_ckpt)
    add("trainsignals_process_start_time_seconds", t.process_start)
    for phase in PHASES:
        add("trainsignals_phase", [1 if p == phase else 0 for p in t.phase], {"phase": phase})
    disk = {"path": "/checkpoints"}
    add(
        "trainsignals_checkpoint_disk_free_bytes",
        [r * DISK_SIZE for r in t.disk_free_ratio],
        disk,
    )
    add("trainsignals_checkpoint_disk_size_bytes", [DISK_SIZE] * (t.minutes + 1), disk)
    for extra in timeline_series({}, t.phase, t.steps_per_second, t.data_wait_share):
        if extra.name == "trainsignals_global_step":
            extra = RawSeries(extra.name, extra.labels, global_step)
        add(extra.name, extra.values, extra.labels)
    return signals


def progress_series(t: JobTimeline) -> tuple[list, list, list]:
    """Last-step and last-checkpoint times and the global step, as the instrumentation
    reports them: a new incarnation restores the last good checkpoint (its step and its
    time) and reports no last-step time before its first step (None: absent)."""
    last_step: list[float | None] = []
    last_ckpt: list[float | None] = []
    global_step: list[float] = []
    step_ts: float | None = None
    ckpt_ts: float | None = None
    step = ckpt_step = 0.0
    for minute in range(t.minutes + 1):
        if minute and t.process_start[minute] != t.process_start[minute - 1]:
            step_ts, step = None, ckpt_step  # what a new process restores and reports
        if t.steps_per_second[minute] > 0:
            step_ts = minute * 60.0
            step += round(t.steps_per_second[minute] * 60 * 64) / 64
        previous = t.phase[minute - 1] if minute else "startup"
        if previous == "checkpoint" and t.phase[minute] != "checkpoint" and t.checkpoint_ok[minute]:
            ckpt_ts, ckpt_step = minute * 60.0, step
        last_step.append(step_ts)
        last_ckpt.append(ckpt_ts)
        global_step.append(step)
    return last_step, last_ckpt, global_step


def target_series(
    ctx: RuleContext,
    minutes: int,
    down: Callable[[str, str, int], bool] = lambda kind, node, m: False,
) -> list[RawSeries]:
    """`up` of every training rank and every node's GPU exporter."""
    spec = ctx.spec
    series = []
    for n in range(spec.shape.nodes):
        node = f"node-{n}"
        for kind, job, count in (
            ("gpu", spec.scrape_jobs.gpu, 1),
            ("training", spec.scrape_jobs.training, spec.shape.gpus_per_node),
        ):
            for i in range(count):
                labels = {**spec.selector_labels, "job": job, "node": node}
                if kind == "training":
                    labels["rank"] = str(n * spec.shape.gpus_per_node + i)
                values = [0 if down(kind, node, m) else 1 for m in range(minutes + 1)]
                series.append(RawSeries("up", labels, values))
    return series


def gpu_series(
    ctx: RuleContext,
    minutes: int,
    overrides: dict[str, Callable[[int], float | None]] | None = None,
) -> list[RawSeries]:
    """Every GPU of node-0 present; GPU 0 with every signal, `overrides` bending some."""
    source = gpu_source(ctx)
    overrides = overrides or {}
    series: list[RawSeries] = []
    signals = [s for s in GPU_HEALTHY if s != "nvml_errors" or source.reports_nvml_errors]
    signals = [s for s in signals if s != "up" or source.reports_gpu_up]
    for gpu in range(ctx.spec.shape.gpus_per_node):
        wanted = signals if gpu == 0 else [source.presence_signal]
        values = {}
        for signal in wanted:
            bend = overrides.get(signal) if gpu == 0 else None
            values[signal] = [bend(m) if bend else GPU_HEALTHY[signal] for m in range(minutes + 1)]
        series += source.gpu_test_series("node-0", gpu, values)
    for signal, bend in overrides.items():
        if signal.startswith("xid:"):
            series += source.test_series(signal, "node-0", 0, [bend(m) for m in range(minutes + 1)])
    return series


def _input(series: list[RawSeries]) -> list[dict]:
    return [{"series": s.selector(), "values": encode_shared(s.values)} for s in series]


def _alerts_query(ctx: RuleContext, alert: str, state: str | None = None) -> str:
    labels = {"alertname": alert, "training_job": ctx.job}
    if state:
        labels["alertstate"] = state
    return "ALERTS" + matchers(labels)


def _expected_labels(ctx: RuleContext, case: FaultCase, node_labels: dict) -> str:
    spec = ctx.spec
    labels = {
        "alertname": case.alert,
        "alertstate": "firing",
        "job": spec.name,
        "severity": severity(ctx, case.alert),
        "team": team(ctx, case.alert),
        "training_job": spec.name,
    }
    for name in case.labels:
        if node_labels[name] != "":  # an XID without a catalog action has no action label
            labels[name] = node_labels[name]
    # A label may quote a selector (AlertInputMissing's `series`): escaped as PromQL strings are.
    labels |= {k: v.replace("\\", "\\\\").replace('"', '\\"') for k, v in case.extra_labels.items()}
    return "ALERTS" + matchers(labels)


def fault_test(ctx: RuleContext, case: FaultCase) -> dict:
    minutes = case.onset + case.fires_after + case.holds_for + 1
    series: list[RawSeries] = []
    if case.targets_down:
        series += target_series(ctx, minutes, case.targets_down)
    if case.gpu_overrides:
        series += gpu_series(ctx, minutes, case.gpu_overrides)
    if case.job_fault or not (case.targets_down or case.gpu_overrides):
        series += job_series(ctx, JobTimeline(ctx, minutes, case.job_fault).build())
    if case.raw_series:
        series += case.raw_series(ctx, minutes)
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
    return {
        "name": f"{case.alert} fires {case.what} and not before",
        "interval": "1m",
        "input_series": _input(series),
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


def healthy_test(ctx: RuleContext, fabric: bool = False) -> dict:
    """`fabric`: the spec has InfiniBand alerts, so the healthy node runs node_exporter's
    InfiniBand collector (without its series AlertInputMissing would fire, rightly)."""
    minutes = HEALTHY_HORIZON
    firing = matchers({"training_job": ctx.job, "alertstate": "firing"})
    series = (
        target_series(ctx, minutes)
        + gpu_series(ctx, minutes)
        + job_series(ctx, JobTimeline(ctx, minutes).build())
        + (ib_series(ctx, minutes, set(), []) if fabric else [])
    )
    return {
        "name": "healthy job with warm-up, eval and checkpoint pauses never fires",
        "interval": "1m",
        "input_series": _input(series),
        "promql_expr_test": [
            {
                "expr": f"count_over_time(ALERTS{firing}[{minutes}m])",
                "eval_time": f"{minutes}m",
                "exp_samples": [],
            },
        ],
    }


RESTART_AT = 100  # minute the restart test's job dies; it is back 4 minutes later


def restart_test(ctx: RuleContext) -> dict:
    """auto_restart: a crash recovered well inside the restart budget reaches no pager."""
    minutes = HEALTHY_HORIZON
    down = (RESTART_AT, RESTART_AT + 3)
    timeline = JobTimeline(ctx, minutes).build()
    restart(timeline, *down)
    pages = matchers({"training_job": ctx.job, "alertstate": "firing", "severity": "page"})
    series = (
        target_series(
            ctx, minutes, lambda kind, node, m: kind == "training" and down[0] <= m <= down[1]
        )
        + gpu_series(ctx, minutes)
        + job_series(ctx, timeline)
    )
    restarts = f"job:trainsignals_restarts:changes1h{ctx.recorded()}"
    return {
        "name": "a restart inside the restart budget raises no page and counts as one restart",
        "interval": "1m",
        "input_series": _input(series),
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


def frequent_restarts_test(ctx: RuleContext) -> dict:
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
        "input_series": _input(
            target_series(ctx, minutes) + gpu_series(ctx, minutes) + job_series(ctx, timeline)
        ),
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


def completion_test(ctx: RuleContext, fabric: bool = False) -> dict:
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
        "input_series": _input(
            training_up
            + gpu_series(ctx, minutes)
            + job_series(ctx, timeline)
            + (ib_series(ctx, minutes, set(), []) if fabric else [])
        ),
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


def node_outage_test(ctx: RuleContext) -> dict:
    """One outage, one ticket: a node outage NodeDown fires for raises no
    NodeUnreachableRecently (during it or in the hour after), and neither does a single failed
    scrape of every target of the node, nor targets that come up late at the job's start."""
    minutes = OUTAGE[1] + 75  # the hour NodeUnreachableRecently looks back, and more

    def down(kind: str, node: str, m: int) -> bool:
        return node == "node-0" and (m < 2 or m == BLIP_AT or OUTAGE[0] <= m <= OUTAGE[1])

    recent = _alerts_query(ctx, "NodeUnreachableRecently")
    node_down = _alerts_query(ctx, "NodeDown", "firing")
    return {
        "name": "NodeUnreachableRecently stays silent on a node outage NodeDown fires for, one "
        "failed scrape, or targets that come up late",
        "interval": "1m",
        # node-0's targets only: the alerts are per node (a 64-node spec stays fast).
        "input_series": _input(
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


def rule_tests(ctx: RuleContext, alerts: list[AlertRule], rule_file: str) -> dict:
    with shared_encodings():  # the healthy series recur in every test: encode each once
        return _rule_tests(ctx, alerts, rule_file)


def _rule_tests(ctx: RuleContext, alerts: list[AlertRule], rule_file: str) -> dict:
    cases = [case for alert in alerts for case in alert.faults]
    fabric = any(a.name.startswith("Infiniband") for a in alerts)
    tests = [healthy_test(ctx, fabric=fabric)]
    if any(a.name == "NodeUnreachableRecently" for a in alerts):
        tests.append(node_outage_test(ctx))
    if ctx.spec.recovery.automatic:
        tests.append(restart_test(ctx))
        if ctx.spec.recovery.max_restarts is None:
            tests.append(frequent_restarts_test(ctx))
    tests.append(completion_test(ctx, fabric=fabric))
    tests += [*(fault_test(ctx, c) for c in cases), *goodput_tests(ctx)]
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
