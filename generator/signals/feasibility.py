"""Can the spec's own healthy job meet its objectives? Goodput SLOs and checkpoint_max_age.

A spec is refused (generator/loader.py) when the job it describes, running as its `cadence`
says, would burn its goodput budget without a single failure or page CheckpointTooOld after
one ordinary restart: its own generated tests would fail, and so would its pager on a healthy
day. An objective only the expected failures at the job's GPU count put out of reach is a
warning (`trainsignals validate` / `generate` print it): the failure rate is a fleet average.

Expected goodput (effective training time ratio, ETTR), the standard model (Kokolis et al.
2024, "Revisiting Reliability in Large-Scale ML Research Clusters", arXiv:2410.21680): each
failure costs the restart time plus on average half a checkpoint interval of lost work, and
every interval pays one save. The rules (generator/signals/goodput.py) also count evals and
data wait as badput, so:

    ETTR = (1 - data_wait) x (1 - save/interval - eval_time/eval_interval)
           - (restart + interval/2) / MTTF

MTTF: 7.9 h for a 1,024-GPU job (Kokolis et al., their clusters' fit), the failure rate
scaling linearly with the GPU count (MTTF = 7.9 h x 1024 / GPUs). Llama 3's 54 days on 16,384
GPUs (419 unexpected interruptions of 466) give 3.1 h there, 49 h at 1,024 GPUs: Kokolis's
rate is the more pessimistic, and the one used. The restart time is recovery.restart_budget
(the longest an ordinary restart may take).

The expected figure is not enough: the burn-rate alerts judge windows, and a young job's
long windows are its whole life. The healthy job (generator/signals/healthy_job.py, the same
minutes the generated tests feed promtool) is replayed through the SLO's windows too
(`healthy_floor`): the highest objective its slow and fast burns stay silent for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate

from trainsignals.generator.signals.healthy_job import (
    HEALTHY_DATA_WAIT,
    Pattern,
    healthy_pattern,
    healthy_phase,
)
from trainsignals.generator.signals.slo import FAST, MAX_THRESHOLD, SLOW, WINDOWS
from trainsignals.generator.spec.durations import format_duration
from trainsignals.generator.spec.job import JobSpec

MTTF_HOURS_AT_1024 = 7.9  # Kokolis et al. 2024: a 1,024-GPU job fails every 7.9 h
REFERENCE_GPUS = 1024
MARGIN = 0.005  # objectives this close to the healthy job's floor are refused too
_FOR_MINUTES = {"fast": 2, "slow": 60}  # the burn alerts' `for` (alerts/definitions/slo_burn.py)


def mttf_hours(gpus: int) -> float:
    """Mean time to failure of a job on `gpus` GPUs (failure rate linear in the GPU count)."""
    return MTTF_HOURS_AT_1024 * REFERENCE_GPUS / gpus


@dataclass(frozen=True)
class Ettr:
    """The expected goodput of a spec's job and its parts (shares of wall time)."""

    saves: float
    evals: float
    data_wait: float
    failures: float
    mttf_hours: float

    @property
    def value(self) -> float:
        return (1 - self.data_wait) * (1 - self.saves - self.evals) - self.failures


def expected_ettr(spec: JobSpec, interval: float | None = None) -> Ettr:
    """The model above; `interval` (seconds) replaces the spec's checkpoint interval."""
    c = spec.cadence
    interval = interval or c.checkpoint_interval
    mttf = mttf_hours(spec.shape.gpus)
    restart = spec.recovery.restart_budget
    return Ettr(
        saves=c.checkpoint_save_time / interval,
        evals=c.eval_time / c.eval_interval if c.eval_interval else 0.0,
        data_wait=HEALTHY_DATA_WAIT,
        failures=(restart + interval / 2) / (mttf * 3600),
        mttf_hours=mttf,
    )


def interval_range(spec: JobSpec, objective: float) -> tuple[float, float] | None:
    """The checkpoint intervals (seconds) whose expected ETTR meets `objective`; None: none
    does. From a/τ + bτ <= K (a: save cost, b: half an interval lost per failure)."""
    e = expected_ettr(spec)
    mttf = e.mttf_hours * 3600
    k = (1 - e.data_wait) * (1 - e.evals) - objective - spec.recovery.restart_budget / mttf
    a = (1 - e.data_wait) * spec.cadence.checkpoint_save_time
    b = 1 / (2 * mttf)
    disc = k * k - 4 * a * b
    if k <= 0 or disc < 0:
        return None
    return (k - math.sqrt(disc)) / (2 * b), (k + math.sqrt(disc)) / (2 * b)


def max_age_needed(spec: JobSpec) -> int:
    """Seconds the newest checkpoint reaches in one ordinary restart: a crash just before a
    save (the restored checkpoint is an interval old), the restart (up to restart_budget),
    an interval of steps redone and new, then the save itself."""
    c = spec.cadence
    return 2 * c.checkpoint_interval + spec.recovery.restart_budget + c.checkpoint_save_time


def max_age_problems(spec: JobSpec) -> list[str]:
    """objectives.checkpoint_max_age that one ordinary restart exceeds: refused with the fix."""
    need, have = max_age_needed(spec), spec.objectives.checkpoint_max_age
    if have >= need:
        return []
    c, d = spec.cadence, format_duration
    return [
        f"objectives.checkpoint_max_age: {d(have)} is exceeded after one ordinary restart: a "
        f"crash just before a save restores a checkpoint cadence.checkpoint_interval "
        f"{d(c.checkpoint_interval)} old, the restart takes up to recovery.restart_budget "
        f"{d(spec.recovery.restart_budget)}, the next save comes {d(c.checkpoint_interval)} "
        f"of steps later and takes cadence.checkpoint_save_time {d(c.checkpoint_save_time)}: "
        f"{d(need)} in all, and the checkpoint-age alert would page a healthy job; use "
        f"checkpoint_max_age: {d(need)} or more (or save more often)"
    ]


def goodput_problems(spec: JobSpec) -> list[str]:
    """Goodput objectives the spec's own healthy job misses without a single failure (its
    saves, evals and data wait, through the burn windows): refused, since its generated tests
    and its pager would fire on a healthy day."""
    problems = []
    for index, slo in enumerate(spec.slos):
        if slo.sli != "goodput":
            continue
        e = expected_ettr(spec)
        floor = healthy_floor(healthy_pattern(spec.cadence))
        best = _down(min(e.value + e.failures, floor - MARGIN))
        if slo.objective <= best:
            continue
        problems.append(
            f"slos[{index}].objective: goodput {slo.objective:g} cannot be met by this job's "
            f"own healthy pattern (cadence), even without failures: it stays under the burn "
            f"alerts up to {_down(floor - MARGIN):g}, and {_explain(spec, e)}; "
            f"{_fix(spec, slo.objective, best)}"
        )
    return problems


def goodput_warnings(spec: JobSpec) -> list[str]:
    """Goodput objectives above the expected ETTR once failures at the job's GPU count are
    counted: a warning (the failure rate is a fleet average, not this job's), with the fix."""
    warnings = []
    for index, slo in enumerate(spec.slos):
        if slo.sli != "goodput":
            continue
        e = expected_ettr(spec)
        best = _down(e.value)
        if slo.objective <= best or goodput_problems(spec):
            continue
        warnings.append(
            f"slos[{index}].objective: goodput {slo.objective:g} is above what failures at "
            f"{spec.shape.gpus:,} GPUs leave: {_explain(spec, e)}; the budget would burn on "
            f"ordinary failures alone; {_fix(spec, slo.objective, best)}"
        )
    return warnings


def _explain(spec: JobSpec, e: Ettr) -> str:
    c, d = spec.cadence, format_duration
    mttf = f"{e.mttf_hours:,.0f}" if e.mttf_hours >= 10 else f"{e.mttf_hours:.1f}"
    evals = f" - evals {d(c.eval_time)}/{d(c.eval_interval)}" if c.eval_interval else ""
    return (
        f"expected goodput (ETTR) {e.value:.3f} = (1 - data wait {e.data_wait:.0%}) x (1 - "
        f"saves {d(c.checkpoint_save_time)}/{d(c.checkpoint_interval)}{evals}) - failures "
        f"(restart {d(spec.recovery.restart_budget)} + half an interval "
        f"{d(c.checkpoint_interval // 2)}) / MTTF {mttf} h at "
        f"{spec.shape.gpus:,} GPUs = {e.failures:.2%} (Kokolis et al. 2024: MTTF 7.9 h at "
        f"1,024 GPUs, linear in the GPU count)"
    )


def _down(value: float) -> float:
    """`value` rounded down to 0.001: an objective that is sure to be met."""
    return math.floor(value * 1000) / 1000


def _fix(spec: JobSpec, objective: float, best: float) -> str:
    fix = f"lower the objective to {best:g} or less"
    none = fix + " (no checkpoint interval meets it with these saves, evals and restarts)"
    span = interval_range(spec, objective)
    if span is None:
        return none
    low, high = max(1, math.ceil(span[0] / 60)), math.floor(span[1] / 60)
    # Fewer saves also lift the healthy job's windows: the shortest interval they allow.
    _, save, eval_every, eval_time = healthy_pattern(spec.cadence)

    def meets(minutes: int) -> bool:
        return healthy_floor((minutes, save, eval_every, eval_time)) - MARGIN >= objective

    if low > high or not meets(high):
        return none
    while not meets(low):
        middle = (low + high) // 2
        low, high = (middle + 1, high) if not meets(middle) else (low, middle)
        if low == high:
            break
    high = math.floor(span[1] / 60)
    return (
        f"{fix}, or set cadence.checkpoint_interval between {low} and {high} min "
        f"(goodput {objective:g} at {spec.shape.gpus:,} GPUs needs a checkpoint every <= "
        f"{high} min), or shorten the saves, evals or restarts"
    )


def feasibility_problems(spec: JobSpec) -> list[str]:
    """Every objective the spec's own healthy job cannot meet (one line each: field, the
    numbers, the fix)."""
    return max_age_problems(spec) + goodput_problems(spec)


# --- the healthy job through the SLO's windows -------------------------------------------


def _horizon(pattern: Pattern) -> int:
    """Minutes replayed: the longest window that decides a page or ticket on a young job
    (6h) past two evals and the young-job hours, at most 3 days."""
    _, _, eval_every, _ = pattern
    return min(WINDOWS["3d"] // 60, max(600, 360 + 2 * eval_every + 60))


@lru_cache(maxsize=64)
def _stepping_5m(pattern: Pattern) -> tuple[float | None, ...]:
    """The 5m goodput the SLO reads at each minute of the healthy job (None: before its first
    step, when the SLO has no sample). Minute m's sample covers minutes m-4..m."""
    horizon = _horizon(pattern)
    good = [0.0] + [
        (1 - HEALTHY_DATA_WAIT) if healthy_phase(m, pattern) in ("warmup", "train") else 0.0
        for m in range(1, horizon + 1)
    ]
    sums = list(accumulate(good, initial=0.0))
    samples: list[float | None] = [None]
    stepped = False
    for m in range(1, horizon + 1):
        stepped = stepped or good[m] > 0
        wall = min(m, 5)  # a job's first window starts when it does
        samples.append((sums[m + 1] - sums[m + 1 - wall]) / wall if stepped else None)
    return tuple(samples)


def _window_errors(samples: tuple[float | None, ...], minutes: int) -> list[float | None]:
    """1 - the average sample over the last `minutes` (avg_over_time), per minute."""
    values = [0.0 if s is None else s for s in samples]
    counts = list(accumulate((s is not None for s in samples), initial=0))
    sums = list(accumulate(values, initial=0.0))
    out: list[float | None] = []
    for m in range(len(samples)):
        first = max(0, m - minutes + 1)
        n = counts[m + 1] - counts[first]
        out.append(1 - (sums[m + 1] - sums[first]) / n if n else None)
    return out


def _burns(pattern: Pattern, objective: float) -> bool:
    """Whether the healthy job fires a burn alert at this objective."""
    samples = _stepping_5m(pattern)
    budget = 1 - objective
    for kind, pairs in (("fast", FAST), ("slow", SLOW)):
        run = 0
        for m in range(len(samples)):
            burning = False
            for pair in pairs:
                limit = min(pair.factor * budget, MAX_THRESHOLD)
                long_error = _errors(pattern, pair.long)[m]
                short_error = _errors(pattern, pair.short)[m]
                if long_error is not None and short_error is not None:
                    burning = burning or (long_error > limit and short_error > limit)
            run = run + 1 if burning else 0
            if run > _FOR_MINUTES[kind]:
                return True
    return False


@lru_cache(maxsize=256)
def _errors(pattern: Pattern, window: str) -> list[float | None]:
    return _window_errors(_stepping_5m(pattern), WINDOWS[window] // 60)


@lru_cache(maxsize=64)
def healthy_floor(pattern: Pattern) -> float:
    """The highest goodput objective (to 0.001) whose burn alerts the healthy job of this
    cadence never fires."""
    low, high = 0.5, 0.999  # objectives are above 0.5 (spec.sections.Slo)
    if _burns(pattern, low):
        return low
    while high - low > 0.0005:
        middle = (low + high) / 2
        low, high = (low, middle) if _burns(pattern, middle) else (middle, high)
    return low
