"""Service level objectives: error-ratio recordings and multi-window, multi-burn-rate alerts.

The SRE workbook's table: page when the 1h and 5m windows both burn at 14.4x (2% of a 30-day
budget in an hour) or the 6h and 30m windows at 6x (5% in six hours); ticket when 1d and 2h
burn at 3x or 3d and 6h at 1x. The short window makes an alert stop soon after the burn stops.

For goodput, "stops" means the job is back in its steps: the short-only windows (5m, 30m, 2h)
count steps redone after a restart as burning no more. Redoing lost work is the cost of an
incident already paid for in the long windows, not a burn a human can stop; counting it kept
the fast burn firing for an hour after a hang that TrainingNoProgress had paged and a human
had fixed (found by the fleet replay). The long windows and the remaining budget count it.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainsignals.generator.signals.goodput import badput_name, goodput_name
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.spec.durations import format_duration
from trainsignals.generator.spec.job import Slo

SLO_GOODPUT = "job:trainsignals_goodput:ratio_5m_after_first_step"
# Goodput plus steps redone after a restart: is the job training now (see the docstring)?
SLO_STEPPING = "job:trainsignals_goodput_or_redo:ratio_5m_after_first_step"
WINDOWS = {"5m": 300, "30m": 1800, "1h": 3600, "2h": 7200, "6h": 21600, "1d": 86400, "3d": 259200}
SHORT_ONLY = ("5m", "30m", "2h")  # windows that only ever say whether a burn goes on now
# Error ratios above this cannot be told from a total outage; a low objective (large budget)
# would otherwise put a 14.4x threshold above 1, where it could never fire.
MAX_THRESHOLD = 0.9


@dataclass(frozen=True)
class BurnWindows:
    long: str
    short: str
    factor: float


FAST = (BurnWindows("1h", "5m", 14.4), BurnWindows("6h", "30m", 6.0))
SLOW = (BurnWindows("1d", "2h", 3.0), BurnWindows("3d", "6h", 1.0))


def errors_name(window: str) -> str:
    return f"job:trainsignals_slo_errors:ratio_rate{window}"


def threshold(slo: Slo, factor: float) -> float:
    return min(factor * slo.budget, MAX_THRESHOLD)


def _errors_expr(ctx: RuleContext, slo: Slo, name: str) -> str:
    window = ctx.range(WINDOWS[name])
    if slo.sli == "goodput":
        # Goodput (generator/signals/goodput.py) over 5m windows, averaged over the long window: a
        # job younger than 3 days is judged on the time it has existed.
        ratio = SLO_STEPPING if name in SHORT_ONLY else SLO_GOODPUT
        return f"1 - avg_over_time({ratio}{ctx.recorded()}[{window}])"
    indicator = f"job:trainsignals_throughput_below_floor:bool{ctx.recorded()}"
    return f"avg_over_time({indicator}[{window}])"


def slo_recordings(ctx: RuleContext) -> list[dict]:
    spec, r = ctx.spec, ctx.recorded()
    rules: list[dict] = []
    if any(slo.sli == "goodput" for slo in spec.slos):
        # The 5m goodput once the job has completed a step: its very first start-up would
        # otherwise fill the nearly empty long windows of a young job and page. Restarts
        # (the global step's high-water mark is above 0 then) count in full. Until it has
        # finished: the minutes after a clean exit (no process, targets leaving) are no
        # badput of a job that is done.
        rank0 = ctx.raw(rank="0")
        rules.append(
            {
                "record": SLO_GOODPUT,
                "expr": f"{goodput_name('5m')}{r} and on () "
                f"max(max_over_time(trainsignals_global_step{rank0}[{ctx.range(86400)}])) > 0 "
                f"unless on () job:trainsignals_completed:bool{r} == 1",
                "labels": ctx.job_label,
            }
        )
        lost = ctx.recorded(category="lost_progress")
        rules.append(
            {
                "record": SLO_STEPPING,
                "expr": f"{SLO_GOODPUT}{r} + on (training_job) {badput_name('5m')}{lost}",
                "labels": ctx.job_label,
            }
        )
    if any(slo.sli == "throughput" for slo in spec.slos):
        series, floor = (
            ("job:trainsignals_tokens:rate5m", spec.tokens_per_second_floor)
            if spec.tokens_per_second_floor is not None
            else ("job:trainsignals_steps:rate5m", spec.steps_per_second_floor)
        )
        # Only training time counts: pauses are goodput's business.
        rules.append(
            {
                "record": "job:trainsignals_throughput_below_floor:bool",
                "expr": f"({series}{r} < bool {floor:.6g}) and on (training_job) "
                f"job:trainsignals_phase_train:min{r} == 1",
                "labels": ctx.job_label,
            }
        )
    for slo in spec.slos:
        labels = {**ctx.job_label, "slo": slo.sli}
        for name in WINDOWS:
            rules.append(
                {
                    "record": errors_name(name),
                    "expr": _errors_expr(ctx, slo, name),
                    "labels": labels,
                }
            )
        period = ctx.range(slo.window)
        rules.append(
            {
                "record": "job:trainsignals_slo_error_budget:remaining_ratio",
                "expr": f"1 - avg_over_time({errors_name('1h')}{ctx.recorded(slo=slo.sli)}"
                f"[{period}]) / {slo.budget:g}",
                "labels": labels,
            }
        )
    return rules


def burn_expr(ctx: RuleContext, pairs: tuple[BurnWindows, ...]) -> str:
    """One expression over every SLO of the spec; each result carries its `slo` label."""
    terms = []
    for slo in ctx.spec.slos:
        sel = ctx.recorded(slo=slo.sli)
        for pair in pairs:
            limit = f"{threshold(slo, pair.factor):g}"
            terms.append(
                f"({errors_name(pair.long)}{sel} > {limit} and "
                f"{errors_name(pair.short)}{sel} > {limit})"
            )
    return " or ".join(terms)


def describe(ctx: RuleContext, pairs: tuple[BurnWindows, ...]) -> str:
    parts = []
    for slo in ctx.spec.slos:
        windows = ", ".join(f"{p.long}&{p.short} > {threshold(slo, p.factor):.3g}" for p in pairs)
        parts.append(f"{slo.sli} {slo.objective:.4g} over {format_duration(slo.window)}: {windows}")
    return "; ".join(parts)
