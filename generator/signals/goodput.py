"""Goodput: effective training time ratio (ETTR) and its badput breakdown, as recording rules.

Definitions (Google's ml-goodput-measurement, adapted to GPU jobs; README "Goodput"). Over a
window W, per job, in rank-seconds averaged over the job's ranks:

- wall: W when the job's training targets existed W ago, else the age of its oldest
  process (capped at W): a job's first window starts when it does. With no rank target at
  all (pods Pending for hours) W again while the job has started and not completed (the
  carried state says so): a dead job's hours are wall time, all recovery, not missing data.
- activity seconds: increase of each rank's `trainsignals_time_seconds_total{activity}`
  (startup, train, data_wait, checkpoint_save, checkpoint_restore, eval, other), summed over
  ranks, divided by the ranks seen in W.
- progress: how far the high-water mark of the global step (rank 0's, over the last day)
  moved in W; steps: steps completed in W. Redone steps are steps but not progress.
- goodput = train x min(progress / steps, 1) / wall: time in steps that moved the job forward.
- badput: lost_progress = the rest of train (steps redone after a restart); startup,
  checkpoint_save, checkpoint_restore, eval, data_wait, other = their activity / wall;
  recovery = wall not covered by any process (from the crash to the restarted processes),
  i.e. 1 minus all of the above, never below 0. Goodput plus every badput category is 1.

Everything reads raw series of the same evaluation (no recorded history, but for whether the
job has completed), so the rules also work on backfilled data; the 1d ratios average the 1h
ones (sliding windows, so each sample of the day weighs the same except in the first and last
hour).
"""

from __future__ import annotations

from trainsignals.generator.signals.promql import RuleContext

TIME = "trainsignals_time_seconds_total"
GLOBAL_STEP = "trainsignals_global_step"
STEPS = "trainsignals_steps_total"
CATEGORIES = (
    "startup",
    "checkpoint_save",
    "checkpoint_restore",
    "eval",
    "data_wait",
    "lost_progress",
    "recovery",
    "other",
)
# Activities other than train whose share is their badput category as is.
PLAIN = ("startup", "checkpoint_save", "checkpoint_restore", "eval", "data_wait", "other")
HIGH_WATER_LOOKBACK = 86400  # the global step's high-water mark is the max over this long
WINDOWS = {"5m": 300, "1h": 3600}


def goodput_name(window: str) -> str:
    return f"job:trainsignals_goodput:ratio_{window}"


def badput_name(window: str) -> str:
    return f"job:trainsignals_badput:ratio_{window}"


def window_seconds(ctx: RuleContext, nominal: int) -> float:
    """The real length of a scaled window (ctx.range never goes below min_range_seconds)."""
    return max(ctx.seconds(nominal), ctx.min_range_seconds)


def window_exprs(
    ctx: RuleContext,
    window: str,
    wall_seconds: float,
    ranks: str | None = None,
    steps: str | None = None,
) -> dict[str, str]:
    """Self-contained expressions of one window's ingredients (for the CLI and postmortem).

    `window` is a PromQL range (`1h`, `5400s`), `wall_seconds` its length; evaluate them at
    the window's end. Each returns one sample without labels. The recording rules pass
    `ranks` and `steps` as series recorded earlier in the same evaluation (same values, read
    from every rank once instead of three and two times).
    """
    raw, rank0 = ctx.raw(), ctx.raw(rank="0")
    high_water = f"max(max_over_time({GLOBAL_STEP}{rank0}[{ctx.range(HIGH_WATER_LOOKBACK)}]"
    ranks = ranks or ranks_expr(ctx, window)
    per_rank_steps = f"sum(increase({STEPS}{raw}[{window}])) / on () {ranks}"
    return {
        # Rank-seconds per activity, averaged over the ranks seen in the window.
        "activity": f"sum by (activity) (increase({TIME}{raw}[{window}])) / on () group_left () "
        f"{ranks}",
        "steps": per_rank_steps,
        # Without a global step (older instrumentation) every step counts as progress.
        "progress": f"clamp_min({high_water})) - ({high_water} offset {window})) "
        f"or on () vector(0)), 0) or on () {steps or per_rank_steps}",
        "wall": f"vector({wall_seconds:g}) and on () count(up{ctx.training_targets()} "
        f"offset {window}) or on () clamp_max(max(sum by (node, rank) ({TIME}{raw})), "
        f"{wall_seconds:g}) or on () (vector({wall_seconds:g}) and on () "
        f"job:trainsignals_completed:bool{ctx.recorded()} == 0)",
    }


def ranks_expr(ctx: RuleContext, window: str) -> str:
    """Ranks seen in the window (each rank reports every activity; `startup` stands for all)."""
    startup = ctx.raw(activity="startup")
    return f"count(count by (rank) (last_over_time({TIME}{startup}[{window}])))"


def window_recordings(ctx: RuleContext, label: str, nominal: int) -> list[dict]:
    """Recording rules for one window: ingredients, then goodput and every badput category."""
    r = ctx.recorded()
    ranks = f"job:trainsignals_ranks:count{label}"
    activity = f"job:trainsignals_time_seconds:avg_increase{label}"
    steps = f"job:trainsignals_steps:avg_increase{label}"
    exprs = window_exprs(
        ctx, ctx.range(nominal), window_seconds(ctx, nominal), f"{ranks}{r}", f"{steps}{r}"
    )
    progress = f"job:trainsignals_global_step:progress{label}"
    wall = f"job:trainsignals_wall_seconds:{label}"
    productive = f"job:trainsignals_progress_steps:ratio_{label}"
    # A window without any process alive: no activity at all, every second is recovery.
    none = f" or {wall}{r} * 0"
    train = f"sum without (activity) ({activity}{ctx.recorded(activity='train')})"
    rules = [
        (ranks, ranks_expr(ctx, ctx.range(nominal)), {}),
        (activity, exprs["activity"], {}),
        (steps, exprs["steps"], {}),
        (progress, exprs["progress"], {}),
        (wall, exprs["wall"], {}),
        # Share of the window's steps that were new progress (0 when no step completed).
        (
            productive,
            f"clamp(({progress}{r} / ({steps}{r} > 0)), 0, 1) or {steps}{r} * 0",
            {},
        ),
        (goodput_name(label), f"{train} * {productive}{r} / {wall}{r}{none}", {}),
        (
            badput_name(label),
            f"{train} * (1 - {productive}{r}) / {wall}{r}{none}",
            {"category": "lost_progress"},
        ),
    ]
    for category in PLAIN:
        rules.append(
            (
                badput_name(label),
                f"sum without (activity) ({activity}{ctx.recorded(activity=category)}) "
                f"/ {wall}{r}{none}",
                {"category": category},
            )
        )
    rules.append(
        (
            badput_name(label),
            f"clamp_min(1 - sum without (activity) ({activity}{r}) / {wall}{r}, 0) "
            f"or {wall}{r} / {wall}{r}",
            {"category": "recovery"},
        )
    )
    return [
        {"record": name, "expr": expr, "labels": {**ctx.job_label, **extra}}
        for name, expr, extra in rules
    ]


def goodput_recordings(ctx: RuleContext) -> list[dict]:
    """The 5m window, when a goodput SLO needs it: its burn pages, so the fast group has it."""
    if not any(s.sli == "goodput" for s in ctx.spec.slos):
        return []
    return window_recordings(ctx, "5m", WINDOWS["5m"])


def goodput_long_recordings(ctx: RuleContext) -> list[dict]:
    """1h, then 1d from the 1h ratios: dashboards, the CLI's neighbours and the fleet replay
    read them, no alert does, so they go in the slow group (generator/signals/recording.py)."""
    rules = window_recordings(ctx, "1h", WINDOWS["1h"])
    day = ctx.range(86400)
    for name in (goodput_name, badput_name):
        rules.append(
            {
                "record": name("1d"),
                "expr": f"avg_over_time({name('1h')}{ctx.recorded()}[{day}])",
                "labels": ctx.job_label,
            }
        )
    return rules
