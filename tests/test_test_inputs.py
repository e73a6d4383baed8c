"""The promtool tests' encoded job series (generator/testkit/test_inputs.py) are what the plain
path writes: every series of job_series(), encoded in full. (The whole test files are compared
with the committed ones by `trainsignals check`.)"""

from __future__ import annotations

import random
from array import array
from dataclasses import fields
from itertools import accumulate
from pathlib import Path

import pytest

from trainsignals.generator.alerts.rules import alert_rules
from trainsignals.generator.loader import load_specs
from trainsignals.generator.signals.healthy_job import (
    HEALTHY_DATA_WAIT,
    healthy_pattern,
    healthy_phase,
)
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.testkit.faults import FaultCase, JobTimeline, restart
from trainsignals.generator.testkit.job_series import (
    HEALTHY_OWN_SHARE,
    SIGNAL_GROUPS,
    gpu_series,
    incarnations,
    job_series,
    progress_series,
    step_buckets,
)
from trainsignals.generator.testkit.series_notation import encode, shared_encodings
from trainsignals.generator.testkit.test_inputs import TestInputs, sampled_job_series
from trainsignals.metrics.training import PHASES

ROOT = Path(__file__).resolve().parent.parent
JOBS = ["minimal", "llama-8b-finetune", "gpt-70b-pretrain"]


def _ctx(job: str) -> RuleContext:
    return RuleContext(load_specs([ROOT / f"jobs/{job}.yaml"])[0])


def _encoded(series: list) -> list[dict]:
    """Series as the plain path writes them: each encoded in full."""
    return [{"series": s.selector(), "values": encode(s.values)} for s in series]


def _plain(ctx: RuleContext, t: JobTimeline) -> list[dict]:
    return _encoded(job_series(ctx, t))


def _faults(ctx: RuleContext, kind: str) -> list[tuple[FaultCase, int]]:
    """The job's fault cases that set `kind` (job_fault, gpu_overrides), with their minutes."""
    cases = [c for a in alert_rules(ctx) for c in a.faults if getattr(c, kind)]
    assert cases
    return [(c, c.onset + c.fires_after + c.holds_for + 1) for c in cases]


@pytest.mark.parametrize("job", JOBS)
def test_every_fault_of_a_job_encodes_as_the_plain_path(job: str) -> None:
    ctx = _ctx(job)
    with shared_encodings():
        inputs = TestInputs(ctx, 300)
        for case, minutes in _faults(ctx, "job_fault"):
            t = JobTimeline(ctx, minutes, case.job_fault).build()
            assert inputs.job(t) == _plain(ctx, t), case.alert
            # Named series only (a fault test's, rules/reads.py): those of the plain path.
            names = frozenset({"trainsignals_loss", "trainsignals_steps_total", "up"})
            plain = [s for s in _plain(ctx, t) if s["series"].partition("{")[0] in names]
            assert inputs.job(t, names) == plain, case.alert


# Every field a fault may change (not only those the groups name).
FIELDS = [f.name for f in fields(JobTimeline) if f.name not in ("ctx", "minutes", "fault")]
FIELDS = [f for f in FIELDS if f not in ("outage", "completed")]  # set below


def test_the_groups_name_only_timeline_fields() -> None:
    assert {field for fields, _ in SIGNAL_GROUPS for field in fields} <= set(FIELDS)


def _bend(rnd: random.Random, t: JobTimeline) -> None:
    """Change one field (or two) at a few minutes, as some fault might."""
    for field in rnd.sample(FIELDS, rnd.choice([1, 1, 2])):
        if field == "bound_bucket":
            t.bound_bucket = not t.bound_bucket
            continue
        column = getattr(t, field)
        for m in rnd.choices(range(len(column)), k=rnd.randint(1, 3)):
            if field == "phase":
                column[m] = rnd.choice(PHASES)
            elif field == "checkpoint_ok":
                column[m] = not column[m]
            elif field == "loss":
                column[m] = rnd.choice([None, -0.0, 0.0, 1, 7.25, float("inf")])
            else:
                column[m] = rnd.choice([-0.0, 0.0, 0.5, 3.0, 60.0, column[m] * 1.5])


def test_random_faults_encode_as_the_plain_path() -> None:
    # A group that read a field it does not name would keep its healthy encoding here.
    rnd = random.Random(18)
    ctx = _ctx("llama-8b-finetune")
    with shared_encodings():
        inputs = TestInputs(ctx, 150)
        for _ in range(400):
            t = JobTimeline(ctx, rnd.choice([0, 1, 2, 45, 61, 150, 160])).build()
            _bend(rnd, t)
            if rnd.random() < 0.1 and t.minutes > 10:
                restart(t, 5, rnd.randint(5, t.minutes - 1))
            if rnd.random() < 0.1:
                t.completed = rnd.randint(0, t.minutes)
            assert inputs.job(t) == _plain(ctx, t)


def test_encodings_kept_across_specs_are_each_specs_own() -> None:
    """The group memo outlives a spec: a job whose timelines match another's (a renamed copy;
    a copy whose only difference is the step-time bound, which moves the histogram's buckets
    and not the timeline; a copy of another speed, which shares the groups that read only
    whether a minute steps) must still get its own series."""
    llama = _ctx("llama-8b-finetune").spec
    # Steps per second from the MFU floor, not from the bound: one timeline for both bounds.
    base = llama.model_copy(
        update={"shape": llama.shape.model_copy(update={"model_flops_per_step": 2e17})}
    )
    bound = base.objectives.step_time_max_seconds or 2.0
    other = base.objectives.model_copy(update={"step_time_max_seconds": bound * 1.5})
    # Another speed (MFU floor): the groups that read only whether a minute steps are shared.
    faster = base.objectives.model_copy(
        update={"mfu_min_ratio": base.objectives.mfu_min_ratio * 1.1}
    )
    copies = [
        base,
        base.model_copy(update={"name": "renamed"}),
        base.model_copy(update={"name": "other-bound", "objectives": other}),
        base.model_copy(update={"name": "other-speed", "objectives": faster}),
    ]
    timelines = [JobTimeline(RuleContext(s), 60).build() for s in copies]
    assert timelines[0].steps_per_second == timelines[2].steps_per_second  # what it is about
    assert timelines[0].steps_per_second != timelines[3].steps_per_second
    for spec in copies:
        ctx = RuleContext(spec)
        with shared_encodings():
            inputs = TestInputs(ctx, 120)
            for case, _ in _faults(ctx, "job_fault")[:12]:
                t = JobTimeline(ctx, 90, case.job_fault).build()
                assert inputs.job(t) == _plain(ctx, t), (spec.name, case.alert)
            healthy = JobTimeline(ctx, 100).build()
            assert inputs.job(healthy) == _plain(ctx, healthy), spec.name


@pytest.mark.parametrize("job", JOBS)
def test_gpu_inputs_are_the_plain_gpu_series(job: str) -> None:
    """TestInputs.gpus keeps the GPUs no override bends per length: every GPU fault of the
    job, and the healthy GPUs at the lengths the faults use, as raw(gpu_series(...))."""
    ctx = _ctx(job)
    with shared_encodings():
        inputs = TestInputs(ctx, 300)
        for case, minutes in _faults(ctx, "gpu_overrides"):
            for overrides in (case.gpu_overrides, None):
                plain = _encoded(gpu_series(ctx, minutes, overrides))
                assert inputs.gpus(minutes, overrides) == plain, case.alert


# The counters as job_series first wrote them, minute by minute: each increment scaled and
# rounded to 1/64 on its own, then summed. (job_series now rounds once per stretch of equal
# minutes.)
def _per_minute_counter(increments: list[float]) -> list[float]:
    return list(accumulate([round(v * 64) / 64 for v in increments[1:]], initial=0.0))


def _per_minute_counters(t: JobTimeline) -> dict[tuple[str, tuple], list[float]]:
    """(series name, extra labels) -> one rank's counter values, the per-minute way."""
    steps_pm = [s * 60 for s in t.steps_per_second]
    counters = {
        ("trainsignals_tokens_total", ()): [v * 60 * 0.5 for v in t.tokens_per_second],
        ("trainsignals_steps_total", ()): steps_pm,
        ("trainsignals_step_duration_seconds_count", ()): steps_pm,
        ("trainsignals_step_duration_seconds_sum", ()): [60.0 if s > 0 else 0.0 for s in steps_pm],
        ("trainsignals_data_wait_seconds_total", ()): [v * 60 for v in t.data_wait_share],
        ("trainsignals_own_work_seconds_total", ()): [
            60 * HEALTHY_OWN_SHARE * (1 - w) if s > 0 else 0.0
            for s, w in zip(t.steps_per_second, t.data_wait_share, strict=True)
        ],
        ("trainsignals_nonfinite_losses_total", ()): [v * 1.0 for v in t.nonfinite_per_minute],
        ("trainsignals_batches_dropped_total", ()): [v * 1.0 for v in t.dropped_per_minute],
    }
    for le, (healthy, slow) in step_buckets(t).items():
        counters["trainsignals_step_duration_seconds_bucket", (("le", le),)] = [
            s * ((1 - share) * healthy + share * slow)
            for s, share in zip(steps_pm, t.slow_step_share, strict=False)
        ]
    return {key: _per_minute_counter(column) for key, column in counters.items()}


# The timeline fields the counters sum.
COUNTED = [
    "tokens_per_second",
    "steps_per_second",
    "data_wait_share",
    "slow_step_share",
    "nonfinite_per_minute",
    "dropped_per_minute",
]


def test_counters_are_the_per_minute_sums_on_random_timelines() -> None:
    """Seeded property test: on healthy and randomly bent timelines (rates that vary minute
    by minute, -0.0, ints, repeats), every counter job_series writes is, to the last bit,
    the per-minute rounding and sum it replaced."""
    rnd = random.Random(29)
    ctx = _ctx("llama-8b-finetune")
    rates = [-0.0, 0.0, 1, 0.5, 3.0, 60.0, 1 / 3, 1e-9, 12345.678, 2.5e6]
    for _ in range(150):
        t = JobTimeline(ctx, rnd.choice([0, 1, 2, 45, 150])).build()
        for _ in range(rnd.randint(0, 40)):
            name = rnd.choice(COUNTED)
            column = getattr(t, name)
            m = rnd.randrange(len(column))
            column[m] = rnd.choice([*rates, column[m] * rnd.random(), rnd.uniform(0, 1e5)])
        expected = _per_minute_counters(t)
        for s in job_series(ctx, t):
            key = (s.name, tuple((k, v) for k, v in s.labels.items() if k == "le"))
            if key in expected and s.labels["rank"] == "0":
                got, want = array("d", s.values).tobytes(), array("d", expected[key]).tobytes()
                assert got == want, key


def test_healthy_columns_are_prefixes_whatever_the_order_of_lengths() -> None:
    """The healthy rates are worked out once per rate, at the longest length asked for yet:
    a timeline of any length, asked for in any order, has the per-minute values."""
    rnd = random.Random(7)
    for job in JOBS:
        ctx = _ctx(job)
        pattern = healthy_pattern(ctx.spec.cadence)
        for minutes in rnd.sample(range(0, 900, 37), 12):
            t = JobTimeline(ctx, minutes).build()
            phases = [healthy_phase(m, pattern) for m in range(minutes + 1)]
            assert t.phase == phases
            speed = {"warmup": 0.6, "train": 1.0}
            for column, rate in (
                (t.tokens_per_second, t.healthy_tokens),
                (t.steps_per_second, t.healthy_steps),
            ):
                assert column == [rate * speed[p] if p in speed else 0.0 for p in phases]
            wait = [HEALTHY_DATA_WAIT if p in speed else 0.0 for p in phases]
            assert t.data_wait_share == wait


def test_an_outage_is_cut_out_as_minute_by_minute() -> None:
    """Seeded: incarnations() (sliced) is the minute-by-minute rewrite it replaced: None in
    the outage, a counter's later values less its first value after it."""
    rnd = random.Random(5)
    t = JobTimeline(_ctx("minimal"), 0)
    for _ in range(2_000):
        values = [rnd.choice([None, -0.0, 0.0, 1, 2.5, 64.0]) for _ in range(rnd.randint(0, 12))]
        first = rnd.randint(0, 14)
        t.outage = (first, rnd.randint(first, 15))
        for name, counter in (("trainsignals_steps_total", True), ("trainsignals_loss", False)):
            first, last = t.outage
            base = values[last + 1] if counter and last + 1 < len(values) else 0.0
            if counter and base is None:  # no counter has a gap there: both would raise
                continue
            want = [
                None
                if first <= m <= last
                else (v - base if counter and m > last and v is not None else v)
                for m, v in enumerate(values)
            ]
            got = incarnations(t, name, values)
            assert repr(got) == repr(want), (values, t.outage, name)


def test_sampled_series_are_the_plain_path_every_few_minutes() -> None:
    """sampled_job_series (the long-horizon tests' job series, memoised per group) is one
    rank's job_series sampled every few minutes and encoded, on random faults, outages and
    completions, with and without a name filter, across specs that share the memo."""
    rnd = random.Random(31)
    names = frozenset({"trainsignals_loss", "trainsignals_steps_total", "trainsignals_phase"})
    for job in JOBS:
        ctx = _ctx(job)
        for _ in range(60):
            t = JobTimeline(ctx, rnd.choice([0, 1, 7, 45, 150, 400])).build()
            _bend(rnd, t)
            if rnd.random() < 0.2 and t.minutes > 10:
                restart(t, 5, rnd.randint(5, t.minutes - 1))
            if rnd.random() < 0.2:
                t.completed = rnd.randint(0, t.minutes)
            every, wanted = rnd.choice([1, 3, 5]), rnd.choice([None, names])
            own = {*ctx.spec.selector_labels, "node", "rank"}  # the labels every rank has
            plain = [
                (s.name, {k: v for k, v in s.labels.items() if k not in own}, encode(values))
                for s in job_series(ctx, t, wanted)
                if s.labels["rank"] == "0"
                for values in [s.values[::every]]
            ]
            with shared_encodings():
                assert sampled_job_series(t, wanted, every) == plain, (job, every)


def _progress_minute_by_minute(t: JobTimeline) -> tuple[list, list, list]:
    """progress_series as it was first written: one pass per minute."""
    last_step: list = []
    last_ckpt: list = []
    global_step: list = []
    step_ts = ckpt_ts = None
    step = ckpt_step = 0.0
    for minute in range(t.minutes + 1):
        if minute and t.process_start[minute] != t.process_start[minute - 1]:
            step_ts, step = None, ckpt_step
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


def test_progress_by_stretches_is_the_minute_by_minute_pass() -> None:
    """Seeded: progress_series (worked out per stretch of equal minutes) is, to the bit, the
    per-minute pass it replaced, on healthy, bent, restarted and randomly restarting jobs."""
    rnd = random.Random(41)
    for job in JOBS:
        ctx = _ctx(job)
        for _ in range(150):
            t = JobTimeline(ctx, rnd.choice([0, 1, 2, 61, 150, 400])).build()
            _bend(rnd, t)
            for m in rnd.sample(range(t.minutes + 1), min(t.minutes + 1, rnd.randint(0, 4))):
                if rnd.random() < 0.5:
                    t.process_start[m:] = [m * 60.0] * (t.minutes + 1 - m)  # a new process
                else:
                    t.phase[m] = rnd.choice(["checkpoint", "train", "startup"])
                    t.steps_per_second[m] = rnd.choice([0.0, -0.0, 0.25, 1 / 3, 7])
            if rnd.random() < 0.2 and t.minutes > 10:
                restart(t, 5, rnd.randint(5, t.minutes - 1))
            got, want = progress_series(t), _progress_minute_by_minute(t)
            assert [repr(c) for c in got] == [repr(c) for c in want], job
