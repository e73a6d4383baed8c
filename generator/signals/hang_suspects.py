"""Hang attribution: which ranks differ from their peers when progress stops.

`rank:trainsignals_hang_suspect:bool` is 1 per rank (labels `node`, `rank`, `reason`) for each
way the rank differs from the rest of its job while the job makes no progress:

- behind: its last step is older than the newest rank's by more than BEHIND_MARGIN;
- phase: it has waited for data for longer than WAIT_MARGIN while its peers have not (they
  spin in the next collective, waiting for it);
- process_gone: its series went stale (its target is down or gone) while its peers' are
  still scraped;
- gpu_idle: its GPU is idle while the job's median GPU is busy (a hung collective spins).

A reason names at most SUSPECT_SHARE of the ranks (at least one): when many ranks differ, that
is the job's state, not a culprit, and the page says "no single suspect" instead of naming a
node at random. TrainingStalled and TrainingNoProgress carry `suspects_annotation(ctx)`.
"""

from __future__ import annotations

from trainsignals.generator.signals.promql import RuleContext

SUSPECT = "rank:trainsignals_hang_suspect:bool"
REASONS = ("behind", "phase", "process_gone", "gpu_idle")
# Exported by the training instrumentation: seconds the rank has been in its current data wait.
DATA_WAIT_OPEN = "trainsignals_data_wait_open_seconds"
BEHIND_MARGIN = 60  # nominal seconds a rank's last step may trail the newest rank's
WAIT_MARGIN = 60  # nominal seconds of one data wait that no healthy loader needs
GPU_IDLE_MAX = 0.1  # utilization of an idle GPU
GPU_BUSY_MIN = 0.5  # the job's median utilization while the others spin in a collective
SUSPECT_SHARE = 0.1  # a reason flagging more ranks than this describes the job, not a rank
NO_SUSPECT = "no single suspect: no rank differs from its peers"
MAX_NAMED = 8  # the annotation names at most this many suspects
GPU_UTIL = "gpu:trainsignals_gpu_utilization:ratio"


def _few(ctx: RuleContext, flagged: str, population: str) -> str:
    """`flagged` (per rank) kept only while it flags at most SUSPECT_SHARE of `population`."""
    return (
        f"({flagged}) and on () count({flagged}) <= on () "
        f"clamp_min(count({population}) * {SUSPECT_SHARE:g}, 1)"
    )


def _stopped(ctx: RuleContext) -> str:
    """The job made no step for half of stall_after: what the suspects explain."""
    half = ctx.seconds(ctx.spec.objectives.stall_after / 2)
    return f"on () job:trainsignals_last_step:age_seconds{ctx.recorded()} > {half:g}"


def _gated(ctx: RuleContext, expr: str) -> str:
    """`expr` only while the job is stopped (_stopped). Each rule also ends in that `and`, but
    PromQL evaluates both sides of an `and`: without this, every comparison, join, count and
    median below ran over every rank and GPU each minute of a healthy job, for nothing (the
    global ruler's costliest culprit rules at 131,072 GPUs). Gated where each reason reads
    its per-rank or per-GPU input, a healthy job's reasons meet empty vectors; a stopped job's
    pass whole, so the suspects are what they were. `expr`'s top level binds tighter than
    `and` (or is an `and`/`unless`), so the gate adds no parentheses: the sharded split pushes
    the same node-local part down to the shards as before (generator/deploy/sharding/split.py)."""
    return f"({expr} and {_stopped(ctx)})"


def _by_rank(expr: str) -> str:
    return f"max by (node, rank) ({expr})"


def _one(expr: str) -> str:
    return f"max by (node, rank) ({expr}) * 0 + 1"


def suspect_expressions(ctx: RuleContext) -> dict[str, str]:
    """{reason: expression} of the per-rank suspects (value 1, labels node and rank)."""
    raw, r = ctx.raw(), ctx.recorded()
    last_step = f"max by (node, rank) (trainsignals_last_step_timestamp_seconds{raw})"
    margin = ctx.seconds(BEHIND_MARGIN)
    # A rank behind the newest by the margin is behind the clock by as much: compared with
    # time() first, a node-local test the shards make, so a healthy job's stepping ranks never
    # reach the global ruler (every rank's last step, each minute, at 131,072 ranks).
    stale = f"{last_step} < time() - {margin:g}"
    behind = (
        f"{_gated(ctx, stale)} < on () group_left () "
        f"(max(trainsignals_last_step_timestamp_seconds{raw}) - {margin:g})"
    )
    waiting = f"max by (node, rank) ({DATA_WAIT_OPEN}{raw}) > {ctx.seconds(WAIT_MARGIN):g}"
    # A gone process: its series went stale (target down or gone) in the last 15 minutes.
    # Read from the rank's own series, as `up` carries no rank label.
    seen = f"max by (node, rank) (last_over_time(trainsignals_global_step{raw}[{ctx.range(900)}]))"
    gone = f"{seen} unless {_by_rank('trainsignals_global_step' + raw)}"
    ranks_now = f"max by (node, local_rank, rank) (trainsignals_global_step{raw}) * 0 + 1"
    idle_gpus = (
        f'label_replace({GPU_UTIL}{r} < {GPU_IDLE_MAX:g}, "local_rank", "$1", "gpu", "(.*)") '
        f"* on (node, local_rank) group_left (rank) ({ranks_now})"
    )
    util = _gated(ctx, f"{GPU_UTIL}{r}")
    idle = f"{_gated(ctx, idle_gpus)} and on () quantile(0.5, {util}) > {GPU_BUSY_MIN:g}"
    # The populations of raw series are counted on the shards (per-node partials); the GPUs'
    # utilization is a recorded series the global ruler counts itself: gated too.
    return {
        "behind": _few(ctx, behind, last_step),
        "phase": _few(ctx, _gated(ctx, waiting), f"max by (node, rank) ({DATA_WAIT_OPEN}{raw})"),
        "process_gone": _few(ctx, _gated(ctx, gone), seen),
        "gpu_idle": _few(ctx, idle, util),
    }


def hang_suspect_recordings(ctx: RuleContext) -> list[dict]:
    """One recording rule per reason, all recording SUSPECT (fast group: a page reads them)."""
    return [
        {
            "record": SUSPECT,
            "expr": f"{_one(expr)} and {_stopped(ctx)}",
            "labels": {**ctx.job_label, "reason": reason},
        }
        for reason, expr in suspect_expressions(ctx).items()
    ]


def suspects_query(ctx: RuleContext) -> str:
    return f"topk({MAX_NAMED}, {SUSPECT}{ctx.recorded()})"


def suspects_annotation(ctx: RuleContext) -> dict[str, str]:
    """The `suspects` annotation: a template over SUSPECT, rendered when the alert fires.

    Prometheus' template `query` runs at evaluation; a raw (backquoted) Go string keeps the
    selector's quotes as they are.
    """
    return {
        "suspects": (
            f"{{{{ with query `{suspects_query(ctx)}` }}}}"
            "{{ range . }}rank {{ .Labels.rank }} on {{ .Labels.node }} "
            "({{ .Labels.reason }}); {{ end }}"
            f"{{{{ else }}}}{NO_SUSPECT}{{{{ end }}}}"
        )
    }
