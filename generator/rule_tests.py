"""promtool unit tests for a job's rules, generated from the same spec.

One healthy test (warm-up, hourly checkpoint pauses, an eval pause) asserts that no alert is
ever pending or firing over ten hours. One test per alert injects its fault into that healthy
job and asserts the alert is silent before the fault and firing, with exactly the expected
labels, after it. Alerts are checked through the `ALERTS` series rather than
`alert_rule_test`, because promtool compares annotations verbatim and ours carry live values.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import accumulate

from .alerts import AlertRule, severity, team
from .gpu_sources import RawSeries, gpu_source
from .promql import RuleContext, le_label, matchers
from .series_notation import encode

# A healthy job runs close to its step-time bound: 3% of its steps are slower than the bound
# (p95 under it), the rest between half the bound and the bound.
HEALTHY_SLOW_STEPS = 0.03
REPORTING_RANKS = 2  # ranks that carry job series in tests; rules aggregate over ranks
FAULT_ONSET = 40  # minutes: startup and warm-up are over, the job trains
HEALTHY_HORIZON = 600  # minutes the healthy test covers
DISK_SIZE = 10e12


@dataclass
class JobTimeline:
    """Per-minute state of a healthy job, which a fault then bends."""

    ctx: RuleContext
    minutes: int
    fault: Callable[[JobTimeline, int], None] | None = None
    # Per-minute values, filled by build().
    phase: list[str] = field(default_factory=list)
    tokens_per_second: list[float] = field(default_factory=list)
    steps_per_second: list[float] = field(default_factory=list)
    # Share of steps slower than the step-time bound (the rest land just under it).
    slow_step_share: list[float] = field(default_factory=list)
    data_wait_share: list[float] = field(default_factory=list)
    loss: list[float | None] = field(default_factory=list)
    nonfinite_per_minute: list[float] = field(default_factory=list)
    dropped_per_minute: list[float] = field(default_factory=list)
    checkpoint_ok: list[bool] = field(default_factory=list)
    disk_free_ratio: list[float] = field(default_factory=list)
    process_start: list[float] = field(default_factory=list)  # this incarnation's start time
    # (first, last) minute with every rank gone; None: the job runs throughout. Counters of the
    # incarnation after it start again from zero, as a restarted process's do.
    outage: tuple[int, int] | None = None

    @property
    def step_time_bound(self) -> float:
        return self.ctx.spec.objectives.step_time_max_seconds or 2.0

    @property
    def healthy_tokens(self) -> float:
        """Job tokens/s at 1.5x the MFU floor (0 for step-based specs)."""
        shape = self.ctx.spec.shape
        if shape.model_flops_per_token is None:
            return 0.0
        return (
            1.5
            * self.ctx.spec.objectives.mfu_min_ratio
            * shape.peak_flops
            / (shape.model_flops_per_token)
        )

    @property
    def healthy_steps(self) -> float:
        shape = self.ctx.spec.shape
        if shape.model_flops_per_step is None:
            return 1.0 / (0.8 * self.step_time_bound)
        return (
            1.5
            * self.ctx.spec.objectives.mfu_min_ratio
            * shape.peak_flops
            / (shape.model_flops_per_step)
        )

    def build(self) -> JobTimeline:
        for minute in range(self.minutes + 1):
            phase = healthy_phase(minute)
            stepping = phase in ("warmup", "train")
            speed = 0.6 if phase == "warmup" else 1.0
            self.phase.append(phase)
            self.tokens_per_second.append(self.healthy_tokens * speed if stepping else 0.0)
            self.steps_per_second.append(self.healthy_steps * speed if stepping else 0.0)
            self.slow_step_share.append(HEALTHY_SLOW_STEPS)
            self.data_wait_share.append(0.05 if stepping else 0.0)
            self.loss.append(2 + 8 / math.sqrt(minute + 10) if minute >= 5 else None)
            self.nonfinite_per_minute.append(0.0)
            self.dropped_per_minute.append(0.0)
            self.checkpoint_ok.append(True)
            self.disk_free_ratio.append(0.5)
            self.process_start.append(0.0)
        if self.fault:
            for minute in range(self.minutes + 1):
                self.fault(self, minute)
        return self


def healthy_phase(minute: int) -> str:
    """Startup 5m, warm-up to 30m, a 3m checkpoint every hour, one 10m eval at 2h30."""
    if minute < 5:
        return "startup"
    if minute < 30:
        return "warmup"
    if minute >= 60 and minute % 60 < 3:
        return "checkpoint"
    if 150 <= minute < 160:
        return "eval"
    return "train"


def restart(t: JobTimeline, first: int, last: int, startup: int = 2) -> None:
    """Every rank dies at `first`, is gone until `last`, then a new incarnation starts up."""
    t.outage = (first, last)
    for m in range(first, t.minutes + 1):
        t.process_start[m] = (last + 1) * 60.0
        if m <= last + startup:
            t.phase[m] = "startup"
            t.tokens_per_second[m] = t.steps_per_second[m] = t.data_wait_share[m] = 0.0


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
    return list(accumulate((round(v * 64) / 64 for v in per_minute[1:]), initial=0.0))


def step_buckets(bound: float) -> list[str]:
    """`le` labels as prometheus_client writes them, one of them exactly at the bound."""
    return [le_label(b) for b in (bound / 2, bound, 2 * bound, 4 * bound)] + ["+Inf"]


def job_series(ctx: RuleContext, t: JobTimeline) -> list[RawSeries]:
    """Series of the ranks that report; each carries 1/REPORTING_RANKS of the job's work."""
    series: list[RawSeries] = []
    share = 1 / REPORTING_RANKS
    steps_pm = [s * 60 for s in t.steps_per_second]
    last_step, last_ckpt = [], []
    step_ts = ckpt_ts = 0.0
    for minute in range(t.minutes + 1):
        if minute and t.process_start[minute] != t.process_start[minute - 1]:
            step_ts = ckpt_ts = t.process_start[minute]  # what a new process reports
        if t.steps_per_second[minute] > 0:
            step_ts = minute * 60.0
        previous = t.phase[minute - 1] if minute else "startup"
        if previous == "checkpoint" and t.phase[minute] != "checkpoint" and t.checkpoint_ok[minute]:
            ckpt_ts = minute * 60.0
        last_step.append(step_ts)
        last_ckpt.append(ckpt_ts)
    bounds = step_buckets(t.step_time_bound)
    for rank in range(REPORTING_RANKS):
        labels = {**ctx.spec.selector_labels, "node": "node-0", "rank": str(rank)}

        def add(name: str, values: list, extra: dict | None = None, *, _labels=labels) -> None:
            values = _incarnations(t, values, counter=name.endswith(("_total", "_sum", "_bucket")))
            series.append(RawSeries(name, {**_labels, **(extra or {})}, values))

        add("trainsignals_tokens_total", _cumulative([v * 60 * share for v in t.tokens_per_second]))
        add("trainsignals_steps_total", _cumulative(steps_pm))
        add("trainsignals_step_duration_seconds_count", _cumulative(steps_pm))
        # Seconds inside steps: steps run back to back while the job is stepping.
        add(
            "trainsignals_step_duration_seconds_sum",
            _cumulative([60.0 if s > 0 else 0.0 for s in steps_pm]),
        )
        for index, le in enumerate(bounds):
            add(
                "trainsignals_step_duration_seconds_bucket",
                _cumulative(
                    [
                        0.0 if index == 0 else s * (1 - t.slow_step_share[m]) if index == 1 else s
                        for m, s in enumerate(steps_pm)
                    ]
                ),
                {"le": le},
            )
        add(
            "trainsignals_data_wait_seconds_total", _cumulative([v * 60 for v in t.data_wait_share])
        )
        add("trainsignals_loss", t.loss)
        add("trainsignals_nonfinite_losses_total", _cumulative(t.nonfinite_per_minute))
        add("trainsignals_batches_dropped_total", _cumulative(t.dropped_per_minute))
        add("trainsignals_last_step_timestamp_seconds", last_step)
        add("trainsignals_last_checkpoint_timestamp_seconds", last_ckpt)
        add("trainsignals_process_start_time_seconds", t.process_start)
        for phase in ("startup", "warmup", "train", "eval", "checkpoint"):
            add("trainsignals_phase", [1 if p == phase else 0 for p in t.phase], {"phase": phase})
        disk = {"path": "/checkpoints"}
        add(
            "trainsignals_checkpoint_disk_free_bytes",
            [r * DISK_SIZE for r in t.disk_free_ratio],
            disk,
        )
        add("trainsignals_checkpoint_disk_size_bytes", [DISK_SIZE] * (t.minutes + 1), disk)
    return series


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


GPU_HEALTHY = {
    "up": 1,
    "utilization": 0.95,
    "memory_used_ratio": 0.75,
    "temperature": 65.0,
    "thermal_throttle": 0,
    "power_throttle": 0,
    "ecc_uncorrected": 0,
    "remapped_rows_pending": 0,
    "nvml_errors": 0,
}


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


@dataclass(frozen=True)
class FaultCase:
    """How to break the healthy job so one alert must fire, and when to look."""

    alert: str
    fires_after: int  # minutes after onset at which the alert must be firing
    labels: tuple[str, ...] = ()  # labels the alert carries beyond the job's own
    job_fault: Callable[[JobTimeline, int], None] | None = None
    targets_down: Callable[[str, str, int], bool] | None = None
    gpu_overrides: dict[str, Callable[[int], float | None]] | None = None
    onset: int = FAULT_ONSET
    extra_labels: dict[str, str] = field(default_factory=dict)
    what: str = "on its fault"  # names the test when an alert has several faults


def _after(onset: int, value: float, before: float | None = None):
    return lambda m: value if m >= onset else before


def fault_cases(ctx: RuleContext) -> list[FaultCase]:
    o, onset = ctx.spec.objectives, FAULT_ONSET
    source = gpu_source(ctx)

    def from_onset(apply: Callable[[JobTimeline, int], None], onset: int = onset):
        def fault(t: JobTimeline, m: int) -> None:
            if m >= onset:
                apply(t, m)

        return fault

    def stall(t: JobTimeline, m: int) -> None:
        t.phase[m] = "train"
        t.tokens_per_second[m] = t.steps_per_second[m] = t.data_wait_share[m] = 0.0

    def slow(t: JobTimeline, m: int) -> None:
        t.tokens_per_second[m] *= 0.2
        t.steps_per_second[m] *= 0.2

    def mfu_leak(t: JobTimeline, m: int) -> None:
        t.tokens_per_second[m] /= 3  # 1.5x the floor -> 0.5x the floor
        t.steps_per_second[m] /= 3

    def spike(t: JobTimeline, m: int) -> None:
        if t.loss[m] is not None:
            t.loss[m] *= 4 * o.loss_spike_factor

    def climb(t: JobTimeline, m: int) -> None:
        if t.loss[m] is not None:
            t.loss[m] = t.loss[onset] * (1 + 0.5 * (m - onset) / 60)

    def plateau(t: JobTimeline, m: int) -> None:
        t.loss[m] = t.loss[60]

    def drop(t: JobTimeline, m: int) -> None:
        t.dropped_per_minute[m] = t.steps_per_second[m] * 60 * 5 * o.dropped_batches_max_ratio

    def fill_in_3h(t: JobTimeline, m: int) -> None:
        t.disk_free_ratio[m] = max(0.0, 0.5 - 0.5 * (m - onset) / 180)

    def fill_disk(t: JobTimeline, m: int) -> None:
        t.disk_free_ratio[m] = max(0.01, 0.5 - 0.5 * (m - onset) / 330)

    gpu_node = ("node", "gpu")
    xid_labels = (*gpu_node, "xid") if source.name == "trainsignals" else gpu_node
    lost_labels = gpu_node if source.reports_gpu_up else ("node",)
    critical, other = (
        o.xid_page_codes[0],
        next(c for c in (13, 31, 43, 45) if c not in o.xid_page_codes),
    )
    memory_fault = (1 + o.gpu_memory_max_ratio) / 2
    rec = ctx.spec.recovery

    def crash_loop(t: JobTimeline, m: int) -> None:
        # A new incarnation every 10 minutes: each one fails a little after it starts.
        t.process_start[m] = 60.0 * (onset + 10 * ((m - onset) // 10))

    def gone_for_good(t: JobTimeline, m: int) -> None:
        if m == onset:
            restart(t, onset, t.minutes)

    cases = [
        FaultCase(
            "TrainingNoProgress",
            rec.restart_budget // 60 + 3,
            job_fault=gone_for_good,
        ),
        FaultCase(
            "TrainingCrashLooping",
            10 * (rec.max_restarts + 1) + 2,
            job_fault=from_onset(crash_loop),
        ),
        # GPU 0 of node-0 lost twice, the job restarted after each: the node was not drained.
        FaultCase(
            "TrainingRestartsOnBadNode",
            45,
            labels=("node",),
            targets_down=lambda kind, node, m: False,  # every node present: 0 between faults
            job_fault=from_onset(
                lambda t, m: t.process_start.__setitem__(
                    m, 60.0 * (onset + 5 if m < onset + 35 else onset + 35)
                )
            ),
            gpu_overrides={
                source.presence_signal: lambda m: (
                    (0 if source.reports_gpu_up else None)
                    if onset <= m < onset + 10 or onset + 30 <= m < onset + 40
                    else GPU_HEALTHY[source.presence_signal]
                )
            },
        ),
        FaultCase(
            "TrainingTargetsDown",
            (rec.restart_budget // 60 + 3) if rec.automatic else 5,
            targets_down=lambda kind, node, m: (
                kind == "training" and node == "node-0" and m >= onset
            ),
        ),
        FaultCase("TrainingStalled", o.stall_after // 60 + 5, job_fault=from_onset(stall)),
        FaultCase(
            "NonFiniteLoss",
            4,
            job_fault=from_onset(
                lambda t, m: t.nonfinite_per_minute.__setitem__(m, o.nonfinite_losses_max + 1)
            ),
        ),
        FaultCase("LossDiverging", 9, job_fault=from_onset(spike)),
        # A steady climb of 50% of the onset loss per hour: it passes spike_factor x its best
        # after (factor - 1) / 0.5 hours; a trailing-hour baseline would climb along with it.
        FaultCase(
            "LossDiverging",
            math.ceil(60 * (o.loss_spike_factor - 1) / 0.5) + 15,
            job_fault=from_onset(climb),
            what="on a steady climb",
        ),
        FaultCase("ThroughputBelowFloor", 50, job_fault=from_onset(slow)),
        FaultCase(
            "StepTimeAboveBound",
            50,
            # 10% of steps over the bound: p95 above it, the rest of the job unchanged.
            job_fault=from_onset(lambda t, m: t.slow_step_share.__setitem__(m, 0.10)),
        ),
        FaultCase(
            "DataLoaderStarved",
            50,
            job_fault=from_onset(
                lambda t, m: t.data_wait_share.__setitem__(
                    m, min(0.95, 2 * o.data_wait_max_ratio) if t.phase[m] == "train" else 0.0
                )
            ),
        ),
        FaultCase("MfuBelowFloor", 90, job_fault=from_onset(mfu_leak)),
        FaultCase(
            "DroppedBatchesAboveTolerance",
            int(0.25 * o.dropped_batches_window / 60) + 45,
            job_fault=from_onset(drop),
        ),
        FaultCase(
            "LossPlateau",
            o.loss_plateau_window // 60 + 60 + 70,
            onset=60,
            job_fault=from_onset(plateau, onset=60),
        ),
        FaultCase(
            "CheckpointTooOld",
            o.checkpoint_max_age // 60 + 20,
            job_fault=from_onset(lambda t, m: t.checkpoint_ok.__setitem__(m, False)),
        ),
        FaultCase(
            "CheckpointDiskAlmostFull",
            8,
            labels=("node", "path"),
            job_fault=from_onset(
                lambda t, m: t.disk_free_ratio.__setitem__(m, o.disk_free_min_ratio / 2)
            ),
        ),
        FaultCase(
            "CheckpointDiskFillingUp", 200, labels=("node", "path"), job_fault=from_onset(fill_disk)
        ),
        # Half the disk gone in 3 hours: the ticket must come while there is time to act.
        FaultCase(
            "CheckpointDiskFillingUp",
            40,
            labels=("node", "path"),
            job_fault=from_onset(fill_in_3h),
            what="on a disk that fills in 3 hours",
        ),
        FaultCase(
            "NodeDown",
            5,
            labels=("node",),
            targets_down=lambda kind, node, m: node == "node-0" and m >= onset,
        ),
        FaultCase(
            "GpuExporterDown",
            12,
            labels=("node",),
            targets_down=lambda kind, node, m: kind == "gpu" and node == "node-0" and m >= onset,
        ),
        FaultCase(
            "GpuLost",
            8,
            labels=lost_labels,
            gpu_overrides={
                source.presence_signal: _after(
                    onset, 0 if source.reports_gpu_up else None, GPU_HEALTHY[source.presence_signal]
                )
            },
        ),
        FaultCase(
            "GpuUncorrectableEccErrors",
            4,
            labels=gpu_node,
            gpu_overrides={"ecc_uncorrected": _after(onset, 2, 0)},
        ),
        FaultCase(
            "GpuXidCritical",
            4,
            labels=xid_labels,
            gpu_overrides={f"xid:{critical}": _after(onset, 1)},
        ),
        FaultCase(
            "GpuXidError", 4, labels=xid_labels, gpu_overrides={f"xid:{other}": _after(onset, 1)}
        ),
        FaultCase(
            "GpuRemappedRowsPending",
            12,
            labels=gpu_node,
            gpu_overrides={"remapped_rows_pending": _after(onset, 1, 0)},
        ),
        FaultCase(
            "GpuThermalThrottling",
            22,
            labels=gpu_node,
            gpu_overrides={"thermal_throttle": _after(onset, 1, 0)},
        ),
        FaultCase(
            "GpuPowerThrottling",
            22,
            labels=gpu_node,
            gpu_overrides={"power_throttle": _after(onset, 1, 0)},
        ),
        FaultCase(
            "GpuTemperatureHigh",
            12,
            labels=gpu_node,
            gpu_overrides={"temperature": _after(onset, o.gpu_temperature_max_celsius + 5, 65.0)},
        ),
        FaultCase(
            "GpuMemoryNearFull",
            32,
            labels=gpu_node,
            gpu_overrides={"memory_used_ratio": _after(onset, memory_fault, 0.75)},
        ),
        FaultCase(
            "GpuExporterNvmlErrors",
            17,
            labels=gpu_node,
            gpu_overrides={"nvml_errors": lambda m: float(max(0, m - onset))},
        ),
        # A hang spends every SLO's budget: no time in steps, no throughput while "training".
        FaultCase("SloErrorBudgetBurnFast", 70, labels=("slo",), job_fault=from_onset(stall)),
        FaultCase("SloErrorBudgetBurnSlow", 100, labels=("slo",), job_fault=from_onset(stall)),
    ]
    return cases


def _input(series: list[RawSeries]) -> list[dict]:
    return [{"series": s.selector(), "values": encode(s.values)} for s in series]


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
        labels[name] = node_labels[name]
    if case.alert == "GpuExporterDown":  # reads raw `up`, so the selector labels come along
        labels |= {k: v for k, v in spec.selector_labels.items() if k != "job"}
    return "ALERTS" + matchers(labels)


def fault_test(ctx: RuleContext, case: FaultCase) -> dict:
    minutes = case.onset + case.fires_after + 1
    series: list[RawSeries] = []
    if case.targets_down:
        series += target_series(ctx, minutes, case.targets_down)
    if case.gpu_overrides:
        series += gpu_series(ctx, minutes, case.gpu_overrides)
    if case.job_fault or not (case.targets_down or case.gpu_overrides):
        series += job_series(ctx, JobTimeline(ctx, minutes, case.job_fault).build())
    xid = next(
        (k.removeprefix("xid:") for k in case.gpu_overrides or {} if k.startswith("xid:")), ""
    )
    node_labels = {"node": "node-0", "gpu": "0", "path": "/checkpoints", "xid": xid}
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
        ],
    }


def healthy_test(ctx: RuleContext) -> dict:
    minutes = HEALTHY_HORIZON
    firing = matchers({"training_job": ctx.job, "alertstate": "firing"})
    series = (
        target_series(ctx, minutes)
        + gpu_series(ctx, minutes)
        + job_series(ctx, JobTimeline(ctx, minutes).build())
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


def rule_tests(ctx: RuleContext, alerts: list[AlertRule], rule_file: str) -> dict:
    enabled = {a.name for a in alerts}
    cases = [c for c in fault_cases(ctx) if c.alert in enabled]
    missing = enabled - {c.alert for c in cases}
    if missing:
        raise ValueError(f"no promtool fault case for {sorted(missing)}")
    tests = [healthy_test(ctx)]
    if ctx.spec.recovery.automatic:
        tests.append(restart_test(ctx))
    return promtool_suite(ctx, rule_file, [*tests, *(fault_test(ctx, c) for c in cases)])


def promtool_suite(ctx: RuleContext, rule_file: str, tests: list[dict]) -> dict:
    """A promtool test file for one job's rules."""
    return {
        "rule_files": [rule_file],
        "evaluation_interval": "1m",
        # Without this, promtool may evaluate the alert group before the recording group at
        # the same timestamp, and an alert sees values one interval old: flaky tests.
        "group_eval_order": [f"trainsignals-{ctx.job}-recording", f"trainsignals-{ctx.job}-alerts"],
        "tests": tests,
    }
