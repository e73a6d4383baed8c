"""Recording rules: every quantity the alerts and the dashboards share, computed once.

Names follow `level:metric:operations`. Every recorded series carries `training_job=<name>`,
whatever the spec's selector is, so one Prometheus can hold many jobs' rules.
"""

from __future__ import annotations

from collections.abc import Iterable

from trainsignals.exporters.training.metrics import STEP_BUCKETS
from trainsignals.generator.signals.durable import (
    CHECKPOINT_COVERS,
    COMPLETED_AT,
    LAST_CHECKPOINT,
    LAST_PAUSE,
    LAST_STEP,
    NEWEST_START,
    STOPPED_AT,
    carried_recordings,
)
from trainsignals.generator.signals.fabric import fabric_recordings
from trainsignals.generator.signals.goodput import goodput_long_recordings, goodput_recordings
from trainsignals.generator.signals.gpu import gpu_source
from trainsignals.generator.signals.hang_suspects import hang_suspect_recordings
from trainsignals.generator.signals.peers import dashboard_peer_ratios, peer_recordings
from trainsignals.generator.signals.promql import RuleContext, le_label, matchers, not_regex, regex
from trainsignals.generator.signals.slo import slo_recordings
from trainsignals.generator.signals.straggler import (
    BASELINE_INTERVAL,
    baseline_recording,
    dashboard_straggler_series,
    straggler_enabled,
    straggler_recordings,
)
from trainsignals.generator.spec.durations import format_duration
from trainsignals.metrics.promql_reads import names, record_names, records_read

# The slow group's interval: under Prometheus' 5m lookback with room for a late evaluation
# (kube-prometheus evaluates its 30-day availability rules every 3m too).
# The label every alert declared `hardware_fault=True` carries (generator/alerts/rules.py adds
# it): a fault of a node's hardware, the infra ticket of a self-healing job. Rules select those
# alerts by it, so no list of their names is kept here (the signals sit below the alerts).
HARDWARE_FAULT_LABEL = ("fault_class", "hardware")
SLOW_INTERVAL = 180
# Step-time quantiles for the dashboards and postmortems (the alert counts steps over the bound).
STEP_TIME_QUANTILES = {"p50": 0.5, "p95": 0.95}
# How long the job's targets count as expected after rank 0 was last seen: a day.
COMPLETION_MEMORY_S = 86400
# How long a GPU's UUID is remembered after its series vanish: past the 10m windows GPU alerts read.
UUID_HELD_S = 900
# Every rank's step-time buckets rated and summed by `le` (job level, one series per bucket).
STEP_BUCKET_RATE = "job:trainsignals_step_duration_seconds_bucket:rate5m"


def job_recordings(ctx: RuleContext) -> dict[str, str]:
    spec, raw = ctx.spec, ctx.raw()
    w5 = ctx.range(300)
    physical = ctx.raw(device=not_regex("lo"))
    flops = (
        f"job:trainsignals_tokens:rate5m{ctx.recorded()} * {spec.shape.model_flops_per_token:g}"
        if spec.shape.model_flops_per_token is not None
        else f"job:trainsignals_steps:rate5m{ctx.recorded()} * {spec.shape.model_flops_per_step:g}"
    )
    rules = {
        "job:trainsignals_tokens:rate5m": f"sum(rate(trainsignals_tokens_total{raw}[{w5}]))",
        "job:trainsignals_samples:rate5m": f"sum(rate(trainsignals_samples_total{raw}[{w5}]))",
        # Every rank counts every global step, so the job's step rate is the ranks' average.
        "job:trainsignals_steps:rate5m": f"avg(rate(trainsignals_steps_total{raw}[{w5}]))",
        "job:trainsignals_failed_steps:rate5m": (
            f"sum(rate(trainsignals_failed_steps_total{raw}[{w5}]))"
        ),
        "job:trainsignals_model_flops:rate5m": flops,
        # MFU: achieved model FLOP/s over the peak dense FLOP/s of all the job's GPUs.
        "job:trainsignals_mfu:ratio_rate5m": (
            f"job:trainsignals_model_flops:rate5m{ctx.recorded()} / {spec.shape.peak_flops:g}"
        ),
    }
    bound = spec.objectives.step_time_max_seconds
    if bound is not None:
        rules["job:trainsignals_step_duration_seconds:above_bound_ratio_rate5m"] = (
            f"1 - sum({steps_within_bound(ctx, bound)}) / "
            f"sum(rate(trainsignals_step_duration_seconds_count{raw}[{w5}]))"
        )
    rules |= {
        # Seconds of data wait per second of wall time = the share of time starved.
        "job:trainsignals_data_wait:ratio_rate5m": (
            f"avg(rate(trainsignals_data_wait_seconds_total{raw}[{w5}]))"
        ),
        # Share of wall time the ranks spend in steps (data wait included): the speed alerts
        # divide by it, so pauses, hangs and restarts do not read as a slow job.
        "job:trainsignals_stepping:ratio_rate5m": (
            f"avg(sum by (rank) (rate(trainsignals_time_seconds_total"
            f"{ctx.raw(activity=regex('train|data_wait'))}[{w5}])))"
        ),
        "job:trainsignals_nonfinite_losses:increase5m": (
            f"sum(increase(trainsignals_nonfinite_losses_total{raw}[{w5}]))"
        ),
        # dropped / (dropped + steps), written to read each rank's counters once: no drop
        # gives 1 / (1 + inf) = 0, nothing at all NaN, as the plain quotient does.
        "job:trainsignals_batches_dropped:ratio_rate5m": (
            f"1 / (1 + sum(rate(trainsignals_steps_total{raw}[{w5}])) / "
            f"sum(rate(trainsignals_batches_dropped_total{raw}[{w5}])))"
        ),
        "job:trainsignals_loss:avg": f"avg(trainsignals_loss{raw})",
        # Smoothed over 10m: one noisy minute is neither a divergence nor a new best.
        "job:trainsignals_loss:avg10m": (
            f"avg_over_time(job:trainsignals_loss:avg{ctx.recorded()}[{ctx.range(600)}])"
        ),
        # A clean exit (phase "done", TrainingMetrics.finish()): a completed job is no
        # incident (no progress, targets down) until a new run of it starts (durable.py).
        "job:trainsignals_phase_done:max": f"max(trainsignals_phase{ctx.raw(phase='done')})",
        # 1 when every rank that reports announced a planned stop (phase "stopping"), 0 when
        # one did not: a rank still training says the stop is not the whole job's.
        "job:trainsignals_phase_stopping:all": (
            f"min(trainsignals_phase{ctx.raw(phase='stopping')})"
        ),
        # 1 only while every rank reports phase "train": pauses silence the training alerts.
        "job:trainsignals_phase_train:min": f"min(trainsignals_phase{ctx.raw(phase='train')})",
        # An announced pause (eval, checkpoint) on any rank: no-progress waits longer.
        "job:trainsignals_phase_paused:max": (
            f"max(trainsignals_phase{ctx.raw(phase=regex('eval|checkpoint'))})"
        ),
        # 0 when every rank left service discovery, for a day less an hour after rank 0 was
        # last seen (then the job is forgotten, a little before its completion is).
        "job:trainsignals_ranks_up:sum": (
            f"sum(up{ctx.training_targets()}) or on () 0 * "
            f"max_over_time(job:trainsignals_incarnation_start:max{ctx.recorded()}"
            f"[{ctx.range(COMPLETION_MEMORY_S - 3600)}])"
        ),
        "node:trainsignals_targets_up:max": (
            f"max by (node) (up{ctx.training_targets()} or up{ctx.gpu_targets()})"
        ),
        # 1 when every scrape of every target of a node that answered in the five minutes
        # before failed over the last minute (two scrapes or more): a node outage, where one
        # failed scrape is not, nor a node whose targets have not come up yet. Its samples
        # outlive the targets by a minute, so an outage ended by draining the node (its
        # targets vanish) is still seen (NodeUnreachableRecently).
        "node:trainsignals_targets_up:dropped1m": (
            f"max by (node) ({_up_over(ctx, 60)}) == bool 0 "
            f"and on (node) max by (node) ({_up_over(ctx, 300, offset=60)}) == 1"
        ),
        "node:trainsignals_checkpoint_disk_free:ratio": (
            f"min by (node, path) (trainsignals_checkpoint_disk_free_bytes{raw} / "
            f"trainsignals_checkpoint_disk_size_bytes{raw})"
        ),
        "node:trainsignals_checkpoint_disk_free:bytes": (
            f"min by (node, path) (trainsignals_checkpoint_disk_free_bytes{raw})"
        ),
        "node:trainsignals_network_receive_bytes:rate5m": (
            f"sum by (node) (rate(node_network_receive_bytes_total{physical}[{w5}]))"
        ),
        "node:trainsignals_network_transmit_bytes:rate5m": (
            f"sum by (node) (rate(node_network_transmit_bytes_total{physical}[{w5}]))"
        ),
    }
    return (
        rules
        | restart_recordings(ctx)
        | carried_recordings(ctx)
        | durable_readings(ctx)
        | fabric_recordings(ctx)
        | straggler_recordings(ctx)
    )


def durable_readings(ctx: RuleContext) -> dict[str, str]:
    """What the alerts read of the carried state (durable.py): ages, last progress, completed."""
    r = ctx.recorded()
    step, pause = f"{LAST_STEP}{r}", f"{LAST_PAUSE}{r}"
    return {
        # The slowest rank decides: a hung collective stops every rank, a straggler only one.
        # Before any rank of this incarnation stepped: the job's last step, carried across
        # restarts and outages (never this process's start).
        "job:trainsignals_last_step:age_seconds": (
            f"time() - (min(trainsignals_last_step_timestamp_seconds{ctx.raw()}) or on () {step})"
        ),
        # The newest sign of a healthy job: a step, or an announced pause (eval, checkpoint).
        # Budgets run from here: a clean stop right after an eval is as old as its stop.
        "job:trainsignals_last_progress:timestamp": f"({step} > {pause}) or {pause} or {step}",
        # 1 from a clean exit until a new run starts; 0 while a run goes on.
        "job:trainsignals_completed:bool": (
            f"({COMPLETED_AT}{r} > bool {NEWEST_START}{r}) or 0 * {NEWEST_START}{r}"
        ),
        # 1 from a planned stop every rank announced until the next incarnation starts.
        "job:trainsignals_stopped:bool": (
            f"({STOPPED_AT}{r} > bool {NEWEST_START}{r}) or 0 * {NEWEST_START}{r}"
        ),
        # Wall time since the newest checkpoint saved or restored (the dashboards); with none
        # at all, since the job's first process.
        "job:trainsignals_last_checkpoint:age_seconds": (
            f"time() - ({LAST_CHECKPOINT}{r} or {CHECKPOINT_COVERS}{r})"
        ),
        # Training time a crash now would lose: since the newest checkpoint, less the time the
        # job stood still (an outage or a hang pages as its own incident). CheckpointTooOld.
        "job:trainsignals_checkpoint_unsaved:seconds": f"time() - {CHECKPOINT_COVERS}{r}",
    }


def steps_within_bound(ctx: RuleContext, bound: float) -> str:
    """Each rank's rate of steps no slower than the bound.

    Exact, unlike an interpolated quantile, where the process has a bucket at the bound
    (TRAINSIGNALS_STEP_TIME_BOUND_SECONDS). A process started without it has only the
    instrumentation's default buckets: then its steps up to the next bucket above the bound
    count as within it, so the share over the bound is never overstated (interpolating
    inside a 2 s..5 s bucket makes a healthy 1.9 s job look slow, tests/test_misfires.py)
    and a job with more than 5% of its steps past that bucket still raises the alert.
    """
    w5 = ctx.range(300)
    per_rank = "sum by (node, rank) (rate(trainsignals_step_duration_seconds_bucket{}[{}]))"
    exact = per_rank.format(ctx.raw(le=le_label(bound)), w5)
    if bound in STEP_BUCKETS:
        return exact
    # Past the largest bucket nothing bounds it from above: the largest stands in.
    above = next((b for b in STEP_BUCKETS if b > bound), STEP_BUCKETS[-1])
    return f"{exact} or {per_rank.format(ctx.raw(le=le_label(above)), w5)}"


def _up_over(ctx: RuleContext, seconds: int, offset: int = 0) -> str:
    """`up` of every target of the job (ranks and GPU exporters), each at its best over a
    window (and ending `offset` ago)."""
    window = f"[{ctx.range(seconds)}]" + (f" offset {ctx.range(offset)}" if offset else "")
    return (
        f"max_over_time(up{ctx.training_targets()}{window}) "
        f"or max_over_time(up{ctx.gpu_targets()}{window})"
    )


def step_time_quantiles(ctx: RuleContext) -> dict[str, str]:
    """Step-time quantiles for the dashboards and postmortems (no alert reads them), in two
    levels: every rank's buckets rated once into one series per bucket, the quantiles read
    those. Ranks x buckets is the largest set any rule reads (13 per rank)."""
    rules = {
        STEP_BUCKET_RATE: "sum by (le) (rate(trainsignals_step_duration_seconds_bucket"
        f"{ctx.raw()}[{ctx.range(300)}]))"
    }
    for name, q in STEP_TIME_QUANTILES.items():
        rules[f"job:trainsignals_step_duration_seconds:{name}_5m"] = (
            f"histogram_quantile({q}, {STEP_BUCKET_RATE}{ctx.recorded()})"
        )
    return rules


def restart_recordings(ctx: RuleContext) -> dict[str, str]:
    """Restarts as data: one per new incarnation of rank 0 (torchrun restarts every rank).

    Rank 0's process start time changes once per restart, whatever node it lands on; a
    restart's counter resets are handled by rate()/increase() and never look like a spike.
    """
    r = ctx.recorded()
    windows = {"1h": 3600, "1d": 86400}
    windows[format_duration(ctx.spec.recovery.restart_window)] = ctx.spec.recovery.restart_window
    rules = {
        "job:trainsignals_incarnation_start:max": (
            f"max(trainsignals_process_start_time_seconds{ctx.raw(rank='0')})"
        ),
        # The trainer's global step now (any rank): back at the checkpoint's after a restart.
        # Its high-water mark over time is durable progress; redone steps do not raise it.
        "job:trainsignals_global_step:max": f"max(trainsignals_global_step{ctx.raw()})",
    }
    for name, seconds in sorted(windows.items(), key=lambda item: item[1]):
        rules[f"job:trainsignals_restarts:changes{name}"] = (
            f"changes(job:trainsignals_incarnation_start:max{r}[{ctx.range(seconds)}])"
        )
    # 1 while a hardware fault alert names the node, 0 otherwise (every node the job's targets
    # are on), so changes() over a window counts its incidents: two per incident that ended.
    faults = matchers(
        {
            HARDWARE_FAULT_LABEL[0]: HARDWARE_FAULT_LABEL[1],
            "alertstate": "firing",
            "training_job": ctx.job,
        }
    )
    rules["node:trainsignals_hardware_fault:bool"] = (
        f"(count by (node) (ALERTS{faults}) > bool 0) "
        f"or on (node) 0 * node:trainsignals_targets_up:max{r}"
    )
    return rules


def recording_rules(ctx: RuleContext) -> list[dict]:
    """Every recording rule of the job, every group (recording_groups) in evaluation order."""
    return [rule for group in recording_groups(ctx) for rule in group["rules"]]


def group_names(ctx: RuleContext) -> tuple[str, ...]:
    """(fast, slow[, baseline]) recording group names: the baseline group only where the job
    has one (a job of several ranks: straggler.straggler_enabled)."""
    names = (f"trainsignals-{ctx.job}-recording", f"trainsignals-{ctx.job}-recording-slow")
    return (*names, baseline_group_name(ctx)) if straggler_enabled(ctx) else names


def baseline_group_name(ctx: RuleContext) -> str:
    return f"trainsignals-{ctx.job}-baseline"


def recording_groups(ctx: RuleContext, readers: Iterable[str] = ()) -> list[dict]:
    """The fast group, at the global evaluation interval: what the alerts (`readers`: their
    expressions) read, directly or through another rule. The slow group, every
    SLOW_INTERVAL: what only dashboards and postmortems read and costs the most at 16k GPUs
    (the step-time quantiles over every rank's buckets; goodput and badput over 1h and 1d, an
    increase() over an hour of every rank's activity counters), and the job-level rules no
    alert needs (dashboard rates, the 5m badput breakdown), and the per-GPU peer ratios and
    per-rank straggler ratio no alert reads (peers.dashboard_peer_ratios,
    straggler.dashboard_straggler_series: each reads every GPU or rank). Other per-node and per-GPU
    rules stay fast: their panels drill into one node or GPU at full resolution. Last, where
    the job has peers, the straggler's 6h baseline in a group of its own, every
    BASELINE_INTERVAL: the one group besides the fast group that a fast rule reads (COST
    reads the baseline, which a few minutes change by nothing that matters: it is a 6h
    quantile). Read every minute, it was the costliest rule at 131,072 ranks (360 samples of
    each rank)."""
    fast, slow, baseline = _job_rules(ctx)
    needed = _needed(fast, readers)
    slow_unless_read = dashboard_peer_ratios() | dashboard_straggler_series()
    dashboard_only = [
        r
        for r in fast
        if (r["record"].startswith("job:") or r["record"] in slow_unless_read)
        and r["record"] not in needed
    ]
    fast_name, slow_name = group_names(ctx)[:2]
    groups = [
        {"name": fast_name, "rules": [{**r} for r in fast if r not in dashboard_only]},
        {
            "name": slow_name,
            "interval": ctx.duration(SLOW_INTERVAL),
            "rules": [{**r} for r in (*dashboard_only, *slow)],
        },
    ]
    if baseline:
        groups.append(
            {
                "name": baseline_group_name(ctx),
                "interval": ctx.duration(BASELINE_INTERVAL),
                "rules": [{**r} for r in baseline],
            }
        )
    return groups


def recorded_exprs(ctx: RuleContext) -> dict[str, tuple[str, ...]]:
    """{record: every expression recording it} over the job's recording rules, whichever group
    each lands in (a name can be recorded by several rules: one per SLO, one per time account)."""
    records: dict[str, tuple[str, ...]] = {}
    for rule in (rule for rules in _job_rules(ctx) for rule in rules):
        records[rule["record"]] = (*records.get(rule["record"], ()), rule["expr"])
    return records


Rules = tuple[dict, ...]
# The last job's rules: generating a job asks for them twice (AlertInputMissing reads what
# they read, then the rules file writes them), and building them is ~1 ms. Callers get copies.
_last_built: tuple[RuleContext, Rules, Rules, Rules] | None = None


def _job_rules(ctx: RuleContext) -> tuple[Rules, Rules, Rules]:
    """(fast candidates, slow, baseline) recording rules of the job, before the split by
    readers."""
    global _last_built
    last = _last_built  # one read: another thread may replace it meanwhile
    if last is not None and last[0] is ctx:
        return last[1], last[2], last[3]
    source = gpu_source(ctx)
    gpu = source.recordings() | source.mig_recordings()
    # A GPU's UUID outlives its series by UUID_HELD_S: a drained node's or a dropped GPU's
    # alerts still read 10-minute windows, and losing the UUID would change their labels (one
    # alert resolves, a UUID-less one fires a `for` later: a second page). A reported GPU
    # keeps its current UUID; of a vanished one's (a swap just before), topk keeps one.
    held = source.identity(ctx.range(UUID_HELD_S))
    gpu["gpu:trainsignals_gpu_uuid:info"] = (
        f"{source.identity()} or on (node, gpu) topk by (node, gpu) (1, {held})"
    )
    gpu["node:trainsignals_gpus:count"] = (
        f"count by (node) (gpu:trainsignals_gpu_up:value{ctx.recorded()})"
    )
    fast = (
        [
            {"record": name, "expr": expr, "labels": ctx.job_label}
            for name, expr in (
                *job_recordings(ctx).items(),
                *gpu.items(),
                *peer_recordings(ctx).items(),
            )
        ]
        + goodput_recordings(ctx)
        + slo_recordings(ctx)
        + hang_suspect_recordings(ctx)
    )
    slow = [
        {"record": name, "expr": expr, "labels": ctx.job_label}
        for name, expr in step_time_quantiles(ctx).items()
    ] + goodput_long_recordings(ctx)
    # The straggler's baseline leaves the fast group for its own (recording_groups).
    sampled = baseline_recording(ctx) if straggler_enabled(ctx) else {}
    baseline = [
        {"record": name, "expr": expr, "labels": ctx.job_label} for name, expr in sampled.items()
    ]
    fast = [r for r in fast if r["record"] not in sampled]
    _last_built = (ctx, tuple(fast), tuple(slow), tuple(baseline))
    return _last_built[1], _last_built[2], _last_built[3]


def _needed(rules: list[dict], readers: Iterable[str]) -> set[str]:
    """Names of `rules` the readers read, directly or through other rules of `rules`."""
    return records_read(set().union(*map(names, readers)), record_names(rules))
