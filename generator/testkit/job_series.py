"""The synthetic series of the test job, minute by minute: its ranks, GPUs and targets.

The promtool tests (generator/rules/unit_tests.py) and the fault cases of the alert
definitions (generator/alerts/definitions/) feed these to the rules: a healthy job from
generator/testkit/faults.py's JobTimeline, bent by each fault.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import accumulate, chain, groupby, islice, repeat
from operator import eq
from typing import Any

from trainsignals.exporters.training.metrics import STEP_BUCKETS
from trainsignals.generator.signals.gpu import gpu_source
from trainsignals.generator.signals.promql import RuleContext, le_label
from trainsignals.generator.testkit.faults import (
    GPU_HEALTHY,
    JobTimeline,
)
from trainsignals.generator.testkit.goodput_tests import timeline_series
from trainsignals.generator.testkit.gpu_series import gpu_test_series, test_series
from trainsignals.generator.testkit.input_series import RawSeries
from trainsignals.metrics.training import PHASES

REPORTING_RANKS = 2  # ranks that carry job series in tests; rules aggregate over ranks
DISK_SIZE = 10e12


def _incarnations(t: JobTimeline, values: list, counter: bool) -> list:
    """Cut an outage out of a series; a counter restarts from zero after it."""
    if t.outage is None:
        return values
    first, last = t.outage
    assert first <= last, t.outage  # (faults.restart: every rank dies, then comes back)
    # Sliced, not rewritten minute by minute: only a counter's values after it change.
    before, after = values[:first], values[last + 1 :]
    gone = [None] * (len(values) - len(before) - len(after))
    if not counter:
        return before + gone + after
    base = after[0] if after else 0.0
    return before + gone + [None if v is None else v - base for v in after]


def _cumulative(per_minute: Sequence, scale: Callable[[Any], float]) -> list[float]:
    """Counter values whose increment in a minute is `scale` of that minute's value (a
    number, or a tuple of a minute's fields): the first minute's value is the starting point,
    not an increment.

    Increments are rounded to 1/64 so every sum is exact in binary floating point: promtool
    expands `a+bxn` as a + i*b, and that must equal our running sum to the last bit, or the
    counter would seem to step backwards where one run ends and the next begins.
    """
    return _summed(_stretches(per_minute), scale)


def _stretches(per_minute: Iterable) -> list[tuple[Any, int]]:
    """(value, minutes) of each stretch of equal values after the first minute: what
    _cumulative's increments follow from (series of one field share them)."""
    return [(value, len(list(stretch))) for value, stretch in groupby(islice(per_minute, 1, None))]


def _summed(stretches: list[tuple[Any, int]], scale: Callable[[Any], float]) -> list[float]:
    """_cumulative from the stretches (_stretches) of its per-minute values."""
    # A timeline runs in stretches of equal minutes (a few dozen in hours): each stretch's
    # increment is scaled and rounded once, and repeated in C (a rounding per minute was a
    # fifth of the tests' cost).
    increments = chain.from_iterable(
        repeat(round(scale(value) * 64) / 64, count) for value, count in stretches
    )
    return list(accumulate(increments, initial=0.0))


def step_buckets(t: JobTimeline) -> dict[str, tuple[float, float]]:
    """`le` label (as prometheus_client writes it) -> the share of healthy and of slow steps
    at or under it. Healthy steps take 0.75x the bound, slow ones 3x (JobTimeline)."""
    bound = t.step_time_bound
    les = (bound / 2, bound, 2 * bound, 4 * bound) if t.bound_bucket else STEP_BUCKETS
    shares = {le_label(le): (float(le >= 0.75 * bound), float(le >= 3 * bound)) for le in les}
    return shares | {"+Inf": (1.0, 1.0)}


def job_series(
    ctx: RuleContext, t: JobTimeline, names: frozenset[str] | None = None
) -> list[RawSeries]:
    """Series of the ranks that report; each carries 1/REPORTING_RANKS of the job's work.
    `names`: only series of these names (None: all); a group with none of them is not worked
    out once its names are known."""
    if t.completed is not None and t.outage is None:
        # The ranks exited cleanly: their series end there, and none looks ahead (a finished
        # job watched for days is worked out for its first minutes only).
        t = t.first(t.completed + 1)
    # Every rank reports the same values: computed once, each rank's series gets a copy.
    signals = _rank_signals(t, names)
    series: list[RawSeries] = []
    for labels in rank_labels(ctx):
        series += [
            RawSeries(name, {**labels, **extra}, [*values]) for name, extra, values in signals
        ]
    if t.completed is not None:  # the ranks exited cleanly: their series end
        series = [RawSeries(s.name, s.labels, [*s.values[: t.completed + 1]]) for s in series]
    return series


def rank_labels(ctx: RuleContext) -> list[dict[str, str]]:
    """The labels of each reporting rank's series (beyond a series' own)."""
    return [
        {**ctx.spec.selector_labels, "node": "node-0", "rank": str(rank)}
        for rank in range(REPORTING_RANKS)
    ]


Signal = tuple[str, dict, list]  # a series of one reporting rank: name, extra labels, values
Progress = Callable[[], tuple[list, list, list]]  # progress_series(t) of the group's timeline
Group = Callable[[JobTimeline, Progress], list[Signal]]


def progress_once(t: JobTimeline) -> Progress:
    """progress_series(t), worked out at most once: two groups read it. (A closure: made for
    every timeline a test computes, and functools.cache's wrapper costs more to make.)"""
    worked_out: list[tuple[list, list, list]] = []

    def progress() -> tuple[list, list, list]:
        if not worked_out:
            worked_out.append(progress_series(t))
        return worked_out[0]

    return progress


def _rank_signals(t: JobTimeline, names: frozenset[str] | None = None) -> list[Signal]:
    """(name, labels beyond the rank's, values) of every series one reporting rank has (of
    `names` only, when given)."""
    progress = progress_once(t)
    signals: list[Signal] = []
    for index, (_, group) in enumerate(SIGNAL_GROUPS):
        known = _GROUP_NAMES.get(index)
        if names is not None and known is not None and names.isdisjoint(known):
            continue
        computed = group(t, progress)
        _GROUP_NAMES[index] = frozenset(name for name, _, _ in computed)
        signals += [s for s in computed if names is None or s[0] in names]
    return [(name, extra, incarnations(t, name, values)) for name, extra, values in signals]


# The series names of each group of SIGNAL_GROUPS (the same in every timeline), as seen.
_GROUP_NAMES: dict[int, frozenset[str]] = {}


def incarnations(t: JobTimeline, name: str, values: list) -> list:
    """`values` of the series `name` with the timeline's outage cut out."""
    return _incarnations(t, values, counter=name.endswith(("_total", "_sum", "_bucket")))


def _tokens(t: JobTimeline, _progress: Progress) -> list[Signal]:
    share = 1 / REPORTING_RANKS
    tokens = _cumulative(t.tokens_per_second, lambda v: v * 60 * share)
    return [("trainsignals_tokens_total", {}, tokens)]


def _steps(t: JobTimeline, _progress: Progress) -> list[Signal]:
    steps = _summed(_stretches(t.steps_per_second), lambda s: s * 60)
    return [
        ("trainsignals_steps_total", {}, steps),
        ("trainsignals_step_duration_seconds_count", {}, [*steps]),
    ]


def _step_seconds(t: JobTimeline, _progress: Progress) -> list[Signal]:
    # Seconds inside steps: steps run back to back while the job is stepping. (A group of its
    # own: it reads only whether a minute steps, READS_ONLY_STEPPING.)
    seconds = _summed(_stretches(t.steps_per_second), lambda s: 60.0 if s * 60 > 0 else 0.0)
    return [("trainsignals_step_duration_seconds_sum", {}, seconds)]


def _buckets(t: JobTimeline, _progress: Progress) -> list[Signal]:
    # Every bucket's counter steps in the same stretches of (steps/s, slow share): found once.
    stretches = _stretches(zip(t.steps_per_second, t.slow_step_share, strict=False))
    signals: list[Signal] = []
    # Buckets with the same (healthy, slow) shares have the same counts: each pair once.
    counts: dict[tuple[float, float], list[float]] = {}
    for le, (healthy, slow) in step_buckets(t).items():
        if (healthy, slow) not in counts:
            counts[healthy, slow] = _summed(stretches, _bucket_steps(healthy, slow))
        signals.append(
            ("trainsignals_step_duration_seconds_bucket", {"le": le}, [*counts[healthy, slow]])
        )
    return signals


def _bucket_steps(healthy: float, slow: float) -> Callable[[tuple[float, float]], float]:
    """A minute's steps (steps/s, slow share) at or under a bucket with these shares."""
    return lambda minute: minute[0] * 60 * ((1 - minute[1]) * healthy + minute[1] * slow)


def _last_step_and_checkpoint(t: JobTimeline, progress: Progress) -> list[Signal]:
    last_step, last_ckpt, _ = progress()
    return [
        ("trainsignals_last_step_timestamp_seconds", {}, last_step),
        ("trainsignals_last_checkpoint_timestamp_seconds", {}, last_ckpt),
    ]


def _phases(t: JobTimeline, _progress: Progress) -> list[Signal]:
    # 1 in the minutes of each phase, else 0 (ints of the comparisons, made in C).
    return [
        ("trainsignals_phase", {"phase": phase}, list(map(int, map(eq, t.phase, repeat(phase)))))
        for phase in PHASES
    ]


def _disk(t: JobTimeline, _progress: Progress) -> list[Signal]:
    disk = {"path": "/checkpoints"}
    return [
        (
            "trainsignals_checkpoint_disk_free_bytes",
            disk,
            [r * DISK_SIZE for r in t.disk_free_ratio],
        ),
        ("trainsignals_checkpoint_disk_size_bytes", disk, [DISK_SIZE] * (t.minutes + 1)),
    ]


def _time_accounts(t: JobTimeline, _progress: Progress) -> list[Signal]:
    series = timeline_series({}, t.phase, t.steps_per_second, t.data_wait_share)
    return [(s.name, s.labels, s.values) for s in series]


# A healthy rank's own work: this share of its stepping time less its data wait (the rest is
# collectives). Every rank does the same: no straggler (generator/signals/straggler.py).
HEALTHY_OWN_SHARE = 0.8


def _own_work(t: JobTimeline, _progress: Progress) -> list[Signal]:
    minutes = list(zip(t.steps_per_second, t.data_wait_share, strict=True))
    own = _cumulative(minutes, lambda m: 60 * HEALTHY_OWN_SHARE * (1 - m[1]) if m[0] > 0 else 0.0)
    return [("trainsignals_own_work_seconds_total", {}, own)]


def _global_step(t: JobTimeline, progress: Progress) -> list[Signal]:
    return [("trainsignals_global_step", {}, progress()[2])]


def _as_is(name: str, field: str) -> Group:
    """A series that is one field of the timeline as it is."""
    return lambda t, _progress: [(name, {}, getattr(t, field))]


def _running_sum(name: str, field: str, factor: float = 1.0) -> Group:
    """A counter: the running sum of one per-minute field (times `factor`)."""
    return lambda t, _progress: [(name, {}, _cumulative(getattr(t, field), lambda v: v * factor))]


# A rank's series, in order, in groups: the JobTimeline fields a group is computed from, and
# how. A group reads no other field: the test inputs (test_inputs.py) take a group's healthy
# encoding where a fault left those fields as they are in the healthy job.
PROGRESS = ("process_start", "steps_per_second", "phase", "checkpoint_ok")
SIGNAL_GROUPS: tuple[tuple[tuple[str, ...], Group], ...] = (
    (("tokens_per_second",), _tokens),
    (("steps_per_second",), _steps),
    (("steps_per_second",), _step_seconds),
    (("steps_per_second", "slow_step_share", "bound_bucket"), _buckets),
    (
        ("data_wait_share",),
        _running_sum("trainsignals_data_wait_seconds_total", "data_wait_share", 60),
    ),
    (("steps_per_second", "data_wait_share"), _own_work),
    (("loss",), _as_is("trainsignals_loss", "loss")),
    (
        ("nonfinite_per_minute",),
        _running_sum("trainsignals_nonfinite_losses_total", "nonfinite_per_minute"),
    ),
    (
        ("dropped_per_minute",),
        _running_sum("trainsignals_batches_dropped_total", "dropped_per_minute"),
    ),
    (PROGRESS, _last_step_and_checkpoint),
    (("process_start",), _as_is("trainsignals_process_start_time_seconds", "process_start")),
    (("phase",), _phases),
    (("disk_free_ratio",), _disk),
    (("phase", "steps_per_second", "data_wait_share"), _time_accounts),
    (PROGRESS, _global_step),
)


# The groups that read the step-time bound beyond their fields (it places the buckets): the
# others' series are the same for every bound (test_inputs.py keys its memo on it for these).
READS_STEP_TIME_BOUND = frozenset({_buckets})
# The groups that read steps_per_second only as whether a minute steps (> 0, <= 0, or NaN:
# neither), not how fast: test_inputs.py keys their memo on that, so jobs that differ in their
# speed alone (their MFU or tokens/s objective) share these groups' encodings.
READS_ONLY_STEPPING = frozenset(
    {_step_seconds, _own_work, _last_step_and_checkpoint, _time_accounts}
)


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
    minute, previous_start, previous_phase = 0, None, "startup"
    columns = zip(t.process_start, t.steps_per_second, t.phase, t.checkpoint_ok, strict=False)
    # The minutes come in stretches of one state (a few dozen in hours): each stretch worked
    # out at once. Inside one no process starts and no save completes after its first minute.
    for (start, rate, phase, ok), stretch in groupby(islice(columns, t.minutes + 1)):
        count = len(list(stretch))
        if minute and start != previous_start:
            step_ts, step = None, ckpt_step  # what a new process restores and reports
        if rate > 0:  # a step completes every minute: its time, the step count going up
            increment = round(rate * 60 * 64) / 64
            steps = list(accumulate(repeat(increment, count), initial=step))[1:]
            times: list[float | None] = list(
                map(float, range(60 * minute, 60 * (minute + count), 60))
            )
            step, step_ts = steps[-1], times[-1]
        else:
            steps, times = [step] * count, [step_ts] * count
        if previous_phase == "checkpoint" and phase != "checkpoint" and ok:
            ckpt_ts, ckpt_step = minute * 60.0, steps[0]
        last_step += times
        last_ckpt += repeat(ckpt_ts, count)
        global_step += steps
        minute, previous_start, previous_phase = minute + count, start, phase
    return last_step, last_ckpt, global_step


def target_series(
    ctx: RuleContext,
    minutes: int,
    down: Callable[[str, str, int], bool] | None = None,
) -> list[RawSeries]:
    """`up` of every training rank and every node's GPU exporter; `down(kind, node, minute)`
    (None: never) says which targets are down when."""
    spec = ctx.spec
    selector = spec.selector_labels  # (a property that builds its dict)
    series = []
    for n in range(spec.shape.nodes):
        node = f"node-{n}"
        for kind, job, count in (
            ("gpu", spec.scrape_jobs.gpu, 1),
            ("training", spec.scrape_jobs.training, spec.shape.gpus_per_node),
        ):
            # The same for every target of the node and kind: asked once.
            if down is None:
                up = [1] * (minutes + 1)
            else:
                up = [0 if down(kind, node, m) else 1 for m in range(minutes + 1)]
            for i in range(count):
                labels = {**selector, "job": job, "node": node}
                if kind == "training":
                    labels["rank"] = str(n * spec.shape.gpus_per_node + i)
                series.append(RawSeries("up", labels, [*up]))  # a copy each: callers bend them
    return series


def gpu_series(
    ctx: RuleContext,
    minutes: int,
    overrides: dict[str, Callable[[int], float | None]] | None = None,
) -> list[RawSeries]:
    """Every GPU of node-0 present; GPU 0 with every signal, `overrides` bending some."""
    series: list[RawSeries] = []
    for gpu in range(ctx.spec.shape.gpus_per_node):
        series += one_gpu_series(ctx, minutes, gpu, overrides if gpu == 0 else None)
    return series + xid_series(ctx, minutes, overrides)


def one_gpu_series(
    ctx: RuleContext,
    minutes: int,
    gpu: int,
    overrides: dict[str, Callable[[int], float | None]] | None = None,
) -> list[RawSeries]:
    """GPU `gpu` of node-0 as gpu_series has it: GPU 0 with every signal, the others with
    the one that says they are present."""
    source = gpu_source(ctx)
    overrides = overrides or {}
    if gpu == 0:
        wanted = [s for s in GPU_HEALTHY if s != "nvml_errors" or source.reports_nvml_errors]
        wanted = [s for s in wanted if s != "up" or source.reports_gpu_up]
    else:
        wanted = [source.presence_signal]
    values = {}
    for signal in wanted:
        bend = overrides.get(signal)
        if bend:
            values[signal] = [bend(m) for m in range(minutes + 1)]
        else:
            values[signal] = [GPU_HEALTHY[signal]] * (minutes + 1)
    return gpu_test_series(source, "node-0", gpu, values)


def xid_series(
    ctx: RuleContext,
    minutes: int,
    overrides: dict[str, Callable[[int], float | None]] | None = None,
) -> list[RawSeries]:
    """GPU 0's XID counters for the `xid:<code>` overrides."""
    source = gpu_source(ctx)
    series: list[RawSeries] = []
    for signal, bend in (overrides or {}).items():
        if signal.startswith("xid:"):
            series += test_series(
                source, signal, "node-0", 0, [bend(m) for m in range(minutes + 1)]
            )
    return series
