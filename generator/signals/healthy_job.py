"""The healthy job's cadence, minute by minute: the phases the generated promtool tests feed
(generator/testkit/faults.py) and the healthy day the goodput objectives must allow
(feasibility.py). Both read it here, so a spec is refused exactly when its own tests would burn.
"""

from __future__ import annotations

from trainsignals.generator.spec.sections import Cadence

HEALTHY_DATA_WAIT = 0.02  # share of a stepping minute spent waiting for data (a fed loader)
STARTUP_MINUTES, WARMUP_END = 5, 30  # the healthy job's first start-up, then its warm-up

# The cadence in whole minutes (the tests' resolution): checkpoint interval, save time, eval
# interval (0: no evals), eval time.
Pattern = tuple[int, int, int, int]


def _minutes(seconds: int) -> int:
    return max(1, round(seconds / 60))


def healthy_pattern(cadence: Cadence) -> Pattern:
    """The spec's cadence as the healthy job's minutes."""
    evals = cadence.eval_interval
    return (
        _minutes(cadence.checkpoint_interval),
        _minutes(cadence.checkpoint_save_time),
        _minutes(evals) if evals else 0,
        _minutes(cadence.eval_time),
    )


DEFAULT_PATTERN = healthy_pattern(Cadence())


def healthy_phase(minute: int, pattern: Pattern = DEFAULT_PATTERN) -> str:
    """Startup 5m, warm-up to 30m, then the spec's cadence: a save every checkpoint interval,
    an eval every eval interval (the first halfway through it). A save wins a minute both
    claim (an eval that meets a save is cut short, never longer)."""
    every, save, eval_every, eval_time = pattern
    if minute < STARTUP_MINUTES:
        return "startup"
    if minute < WARMUP_END:
        return "warmup"
    if minute >= every and minute % every < save:
        return "checkpoint"
    if (
        eval_every
        and minute >= eval_every // 2
        and (minute - eval_every // 2) % eval_every < (eval_time)
    ):
        return "eval"
    return "train"
