"""State that lasts: recording rules that carry their own previous value forward.

A `[1h]` range forgets while an incident lasts; these rules do not. Each one is

    x(t) = max(new(t), x(t - interval) + drift(t) * (t - timestamp of x(t - interval)))

with `fallback` when neither `new` nor a previous value exists. Prometheus (and vmalert)
evaluate a group's rules in order and write each result before the next evaluation, so a rule
reading its own name reads its previous value (within the 5m lookback). After a Prometheus
restart longer than that, the previous value is seeded from the newest one of the last day.

The fleet replay (trainsignals/fleet/evaluate.py) cannot read a rule's own output in a range
query: it evaluates `new`, `drift` and `fallback` (plain recorded series, CARRIED) as range
queries and carries the state in Python, step by step, as carry() does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trainsignals.generator.signals.promql import RuleContext

# How far back a restarted Prometheus looks for a carried value it lost (the lookback is 5m).
SEED_LOOKBACK_S = 86400
# No step nor announced pause for this long: the job stands still (an outage, a hang), and the
# work at risk since the newest checkpoint does not grow.
STILL_AFTER_S = 120


@dataclass(frozen=True)
class Carried:
    """One carried state: its inputs are recorded series of the same job (names)."""

    record: str
    new: str  # the newest value this evaluation, absent when there is none
    fallback: str | None = None  # the first value when there was never any
    drift: str | None = None  # 0 or 1 per second: the state moves forward with time


LAST_STEP = "job:trainsignals_last_step:timestamp_max"
LAST_PAUSE = "job:trainsignals_last_pause:timestamp"
LAST_CHECKPOINT = "job:trainsignals_last_checkpoint:timestamp_max"
NEWEST_START = "job:trainsignals_incarnation_start:newest"
COMPLETED_AT = "job:trainsignals_completed:timestamp"
STOPPED_AT = "job:trainsignals_stopped:timestamp"  # the newest planned stop every rank announced
# The start of the newest incarnation that followed an unannounced exit (a crash, a lost node):
# recovery mode manual pages it (TrainingRestarted); a planned stop's restart is not one.
UNPLANNED_START = "job:trainsignals_unplanned_restart:timestamp"
CHECKPOINT_COVERS = "job:trainsignals_checkpoint_covers:timestamp"

# Every carried rule of a job, in evaluation order (each reads only rules above it).
CARRIED: tuple[Carried, ...] = (
    Carried(NEWEST_START, "job:trainsignals_incarnation_start:max"),
    Carried(COMPLETED_AT, "job:trainsignals_phase_done:timestamp_now"),
    Carried(STOPPED_AT, "job:trainsignals_phase_stopping:timestamp_now"),
    Carried(
        LAST_STEP,
        "job:trainsignals_last_step:timestamp_now",
        fallback="job:trainsignals_incarnation_start:max",
    ),
    Carried(UNPLANNED_START, "job:trainsignals_unplanned_restart:timestamp_now"),
    Carried(LAST_PAUSE, "job:trainsignals_phase_paused:timestamp_now"),
    Carried(LAST_CHECKPOINT, "job:trainsignals_last_checkpoint:timestamp_now"),
    # The newest checkpoint, moved forward by the time the job stood still since: now minus it
    # is the training time a crash would lose. An outage is its own incident, not unsaved work.
    Carried(
        CHECKPOINT_COVERS,
        LAST_CHECKPOINT,
        fallback="job:trainsignals_incarnation_start:max",
        drift="job:trainsignals_standing_still:bool",
    ),
)
CARRIED_BY_RECORD = {c.record: c for c in CARRIED}


def carried_expr(ctx: RuleContext, state: Carried) -> str:
    """The PromQL of one carried state (see the module's docstring)."""
    r = ctx.recorded()
    me = f"{state.record}{r}"
    seed = f"last_over_time({me}[{ctx.range(SEED_LOOKBACK_S)}])"
    if state.drift:
        previous = f"(({me} + (time() - timestamp({me})) * {state.drift}{r}) or {seed})"
    else:
        previous = f"({me} or {seed})"
    new = f"{state.new}{r}"
    expr = f"({new} > {previous}) or {previous} or {new}"
    if state.fallback:
        expr = f"{expr} or {state.fallback}{r}"
    return expr


def carried_inputs(ctx: RuleContext) -> dict[str, str]:
    """The per-evaluation inputs of the carried rules (what is new this evaluation)."""
    r, raw = ctx.recorded(), ctx.raw()
    return {
        "job:trainsignals_phase_done:timestamp_now": (
            f"timestamp(job:trainsignals_phase_done:max{r} == 1)"
        ),
        # A run started after the job had completed (the name reused): its start is its first
        # progress, not the previous run's last step days ago.
        "job:trainsignals_last_step:timestamp_now": (
            f"max(trainsignals_last_step_timestamp_seconds{raw}) or on () "
            f"(job:trainsignals_incarnation_start:max{r} > {COMPLETED_AT}{r})"
        ),
        "job:trainsignals_phase_stopping:timestamp_now": (
            f"timestamp(job:trainsignals_phase_stopping:all{r} == 1)"
        ),
        # An incarnation that has not stepped yet, started after the job's last step: a
        # restart. Unplanned unless every rank announced a stop after that last step. (The
        # first incarnation's last step falls back to its own start: no restart.)
        "job:trainsignals_unplanned_restart:timestamp_now": (
            f"job:trainsignals_incarnation_start:max{r} > {LAST_STEP}{r} "
            f"unless on () {STOPPED_AT}{r} >= {LAST_STEP}{r}"
        ),
        "job:trainsignals_phase_paused:timestamp_now": (
            f"timestamp(job:trainsignals_phase_paused:max{r} == 1)"
        ),
        "job:trainsignals_last_checkpoint:timestamp_now": (
            f"max(trainsignals_last_checkpoint_timestamp_seconds{raw})"
        ),
    }


def carried_recordings(ctx: RuleContext) -> dict[str, str]:
    """Inputs, then carried states, then what reads them, in evaluation order."""
    inputs = carried_inputs(ctx)
    rules: dict[str, str] = {}
    for state in CARRIED:
        if state.new in inputs:
            rules[state.new] = inputs[state.new]
        if state.drift == "job:trainsignals_standing_still:bool":
            rules[state.drift] = standing_still_expr(ctx)
        rules[state.record] = carried_expr(ctx, state)
    return rules


def standing_still_expr(ctx: RuleContext) -> str:
    """1 when neither a step nor an announced pause (eval, checkpoint) came for STILL_AFTER_S:
    an outage or a hang; else 0.

    The exporters' own newest step must be that old too (absent: no live rank, old). On
    Prometheus it adds nothing (the carried last step is never older than it); on vmalert the
    carried value is read back from VictoriaMetrics one remote-write round trip late, seconds
    that a compressed STILL_AFTER_S (2 s at time scale 60) is shorter than: the job looked
    still while stepping and the unsaved time never grew (`make e2e-vm`, stale_checkpoint).
    For the same reason the limit is never below the shortest range a compressed rule uses.
    """
    r, raw = ctx.recorded(), ctx.raw()
    limit = f"{max(ctx.seconds(STILL_AFTER_S), ctx.min_range_seconds):g}"
    last = f"(({LAST_STEP}{r} > {LAST_PAUSE}{r}) or {LAST_PAUSE}{r} or {LAST_STEP}{r})"
    newest = f"max(trainsignals_last_step_timestamp_seconds{raw})"
    return (
        f"(time() - {last} > bool {limit}) "
        f"* on () group_left () ((time() - {newest} > bool {limit}) or on () vector(1))"
    )


Carry = tuple[float, float] | None  # the state's last value and when: None before any


def carry(
    times: Sequence[float],
    new: Sequence[float | None],
    fallback: Sequence[float | None] | None = None,
    drift: Sequence[float | None] | None = None,
    state: Carry = None,
) -> tuple[list[float | None], Carry]:
    """The carried state at each evaluation time, from its inputs there (None: absent), as
    carried_expr evaluates it on Prometheus evaluating at every one of `times`; `state`: as
    it was before the first (returned as it is after the last, for the next stretch)."""
    out: list[float | None] = []
    for i, at in enumerate(times):
        before = None
        if state is not None:
            before = state[0]
            moves = drift[i] if drift is not None else None
            if moves is not None:  # without the drift input: the seed, the value as it was
                before += (at - state[1]) * moves
        value = new[i]
        if value is not None and (before is None or value > before):
            now: float | None = value
        elif before is not None:
            now = before
        else:
            now = fallback[i] if fallback is not None else None
        out.append(now)
        if now is not None:
            state = (now, at)
    return out, state
