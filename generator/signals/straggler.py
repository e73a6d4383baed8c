"""Stragglers: each rank's own work against the job's median and against its own past.

In synchronous training every rank has the same step time: the slowest rank's own work
(trainsignals_own_work_seconds_total: step time less data wait and time blocked in collectives)
sets it, and the others wait for it in the collectives. So a rank whose own work grows costs
the whole job, and the rank with the most own work is the culprit, named by node, rank and GPU.

Why own work per second of *step time*, not per second of wall time. The instrumentation adds a
step's own work and its duration (trainsignals_step_duration_seconds_sum) in the same call, so
every scrape sees both counters at the same step boundary, and their increases over a window
cover exactly the same steps: the quotient is the mean share of those steps that was the rank's
own work, whatever the phase of the rank's scrape against its steps. Own work per second of
wall time counts the steps that ended in the window: one step more or less, which depends on
where each rank's scrapes fall, is 1/N of a window of N steps. With 30 s steps a 5m window
holds 10 of them, and that alone moved a healthy rank's score by up to 10%, twice the ticket's
threshold. (On the simulator's compressed day, 73 tickets with a 5m `for` and no rank slow.)
Pauses need no correction either: a pause adds to neither counter.

The recorded series, per rank (`node`, `rank`, `local_rank`) unless said:
- OWN_SHARE: own-work seconds per second of step time (5m): the rank's own work as a share of
  the job's stepping time;
- MEDIAN (per job): the median rank's OWN_SHARE;
- RATIO: OWN_SHARE / MEDIAN, the score against the peers (1 = a typical rank). Only the
  panels read it: recording.py records it in the slow group (dashboard_straggler_series);
- BASELINE (per `rank`): the lower quartile of RATIO over 6h, the rank's own normal, read
  from BASELINE_INPUT (RATIO computed every BASELINE_INTERVAL, in a group of its own:
  recording.py). A rank that always does a little more (the last pipeline stage, uneven
  sequence lengths) has a baseline above 1, and only what it adds to it counts;
- COST: OWN_SHARE - MEDIAN x max(1, BASELINE): the share of the job's stepping time spent
  waiting for this rank beyond what it usually costs, i.e. the throughput the job would regain
  if the rank were back to its normal. The ticket reads it;
- COST_JOB (per job): the slowest OWN_SHARE - MEDIAN: what the job loses to its slowest rank,
  usual excess included.
"""

from __future__ import annotations

from trainsignals.generator.signals.promql import RuleContext

OWN_WORK = "trainsignals_own_work_seconds_total"
STEP_SECONDS = "trainsignals_step_duration_seconds_sum"
STARTED = "trainsignals_process_start_time_seconds"
RANK = "node, rank, local_rank"

OWN_SHARE = "rank:trainsignals_own_work_per_step_second:ratio_rate5m"
MEDIAN = "job:trainsignals_own_work_per_step_second:median_ratio_rate5m"
RATIO = "rank:trainsignals_own_work:ratio_median"
BASELINE = "rank:trainsignals_own_work:ratio_median_q25_6h"
BASELINE_INPUT = "rank:trainsignals_own_work:ratio_median_sampled"
COST = "rank:trainsignals_straggler_cost:ratio"
COST_JOB = "job:trainsignals_straggler_cost:max_ratio"
STEPPING = "job:trainsignals_stepping:ratio_rate5m"  # recording.py

# The alert's tuning (the healthy simulated day and the promtool tests set them): the cost is
# averaged over SMOOTHING, must hold for FOR_SECONDS, and the rank's incarnation must be older
# than MIN_INCARNATION_AGE (a restart's ranks start at different moments: no ticket).
SMOOTHING = 300
FOR_SECONDS = 300
# A restart's ranks start at different moments and warm up (compile, first batches): no ticket
# before an incarnation is this old. SMOOTHING + FOR_SECONDS must stay below 15 minutes for the
# ticket to come within 15 minutes of a fail-slow's onset.
MIN_INCARNATION_AGE = 900
BASELINE_WINDOW = 6 * 3600
BASELINE_QUANTILE = 0.25
# The baseline's own group's interval (recording.py): RATIO sampled this often, and the 6h
# quantile read from those samples, 90 per rank instead of 360, a quarter as often: 1/16 of
# reading RATIO every minute (at 131,072 ranks it was the global ruler's costliest rule).
# Under Prometheus' 5m lookback, so COST in the fast group always finds a baseline.
BASELINE_INTERVAL = 240
# The cost is read only while the job steps at least this share of its time: at the edges of a
# long pause a window holds a few steps, and their mean is one step's noise.
MIN_STEPPING = 0.2


def straggler_enabled(ctx: RuleContext) -> bool:
    """Only jobs of several ranks have peers to compare with."""
    return ctx.spec.shape.gpus > 1


def straggler_recordings(ctx: RuleContext) -> dict[str, str]:
    """The fast group's rules (each alert evaluation reads them)."""
    if not straggler_enabled(ctx):
        return {}
    r, raw, w5 = ctx.recorded(), ctx.raw(), ctx.range(300)
    stepping = f"on (training_job) ({STEPPING}{r} >= {MIN_STEPPING:g})"
    # What the rank usually does, per second of step time: its baseline times the median,
    # never less than the median (a rank usually faster than the median costs the job nothing
    # until it is slower than the median).
    usual = f"(clamp_min({BASELINE}{r}, 1) * on (training_job) group_left () {MEDIAN}{r})"
    return baseline_recording(ctx) | {
        OWN_SHARE: (
            f"sum by ({RANK}) (rate({OWN_WORK}{raw}[{w5}])) "
            f"/ sum by ({RANK}) (rate({STEP_SECONDS}{raw}[{w5}]) > 0)"
        ),
        MEDIAN: f"quantile(0.5, {OWN_SHARE}{r})",
        RATIO: ratio_expr(ctx),
        COST: f"({OWN_SHARE}{r} - on (training_job, rank) group_left () {usual}) and {stepping}",
        # The slowest rank against the median, its usual excess included: what the job loses.
        COST_JOB: f"(max by (training_job) ({OWN_SHARE}{r}) - {MEDIAN}{r}) and {stepping}",
    }


def ratio_expr(ctx: RuleContext) -> str:
    """RATIO's expression: the baseline group computes it itself, so the fast group need not
    record it for every rank each minute (at 131,072 ranks, a pass over every rank)."""
    r = ctx.recorded()
    return f"{OWN_SHARE}{r} / on (training_job) group_left () ({MEDIAN}{r} > 0)"


def dashboard_straggler_series() -> frozenset[str]:
    """Per-rank series no alert reads: the slow group records them (recording.py)."""
    return frozenset({RATIO})


def baseline_recording(ctx: RuleContext) -> dict[str, str]:
    """The 6h baseline, evaluated every BASELINE_INTERVAL in a group of its own
    (recording.baseline_group): a 6h lower quartile moves slowly, and a 4-minute-old one is as good.
    COST, in the fast group, reads its latest value (at most one interval old)."""
    r = ctx.recorded()
    return {
        # One sample per rank each interval: the quantile's input.
        BASELINE_INPUT: ratio_expr(ctx),
        # Per rank, whichever node it ran on: a rank moved to a new node by a restart keeps
        # its past (min: the node it was fastest on).
        BASELINE: f"min by (training_job, rank) (quantile_over_time({BASELINE_QUANTILE:g}, "
        f"{BASELINE_INPUT}{r}[{ctx.range(BASELINE_WINDOW)}]))",
    }


def straggler_expr(ctx: RuleContext, cost_min: float, longest_pause: int) -> str:
    """Ranks whose cost to the job beyond their usual (averaged over SMOOTHING) is at least
    `cost_min`, in an incarnation older than MIN_INCARNATION_AGE; the `gpu` label is the
    local rank (one GPU per rank, as torchrun starts them).

    While the job does not step (an eval, a save: no cost is measured) the last cost holds
    for up to `longest_pause` seconds and two minutes more, so a pause neither resolves the
    ticket nor restarts its `for`. Only then: a hold after the rank itself slowed down would
    outlast the slowness (a rank slow for its first minutes after a restart would ticket).
    """
    r = ctx.recorded()
    smoothed = f"avg_over_time({COST}{r}[{ctx.range(SMOOTHING)}]) >= {cost_min:g}"
    held = (
        f"(last_over_time({COST}{r}[{ctx.range(longest_pause + 120)}]) >= {cost_min:g}) "
        f"unless on (training_job) ({STEPPING}{r} >= {MIN_STEPPING:g})"
    )
    started = f"{STARTED}{ctx.raw()}"
    expr = (
        f"({smoothed} or {held}) "
        f"and on (node, rank) (time() - {started} > {ctx.seconds(MIN_INCARNATION_AGE):g})"
    )
    return f'label_replace({expr}, "gpu", "$1", "local_rank", "(.*)")'
