"""Goodput time accounting of the training instrumentation: every second in one activity."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from trainsignals.exporters.training import TrainingMetrics
from trainsignals.exporters.training.timeaccount import ACTIVITIES


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def scraped(metrics: TrainingMetrics) -> tuple[dict[str, float], float]:
    times, step = {}, None
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for sample in family.samples:
            if sample.name == "trainsignals_time_seconds_total":
                times[sample.labels["activity"]] = sample.value
            elif sample.name == "trainsignals_global_step":
                step = sample.value
    return times, step


def run_steps(metrics: TrainingMetrics, clock: Clock, n: int, seconds: float, wait: float) -> None:
    for _ in range(n):
        clock.now += seconds
        metrics.add_data_wait(wait)
        metrics.observe_step(seconds)


def test_every_second_lands_in_one_activity() -> None:
    clock = Clock()
    m = TrainingMetrics(node="n0", clock=clock, start_time=clock.now - 5)  # 5 s before creation
    clock.now += 10  # imports, NCCL setup
    with m.checkpoint_restore(step=100):
        clock.now += 7
    m.phase("train")
    clock.now += 3  # compilation of the first step: still start-up
    run_steps(m, clock, 10, seconds=2.0, wait=0.5)
    clock.now += 4  # between steps, or a step that hangs
    with m.checkpoint_save():
        clock.now += 6
    with m.phase("eval"):
        clock.now += 8
    times, step = scraped(m)
    assert set(times) == set(ACTIVITIES)
    # The first step's 2 s count as start-up (its end ends start-up), the other 9 as steps.
    assert times == pytest.approx(
        {
            "startup": 5 + 10 + 3 + 2,
            "checkpoint_restore": 7,
            "train": 9 * 1.5,
            "data_wait": 9 * 0.5,
            "other": 4,
            "checkpoint_save": 6,
            "eval": 8,
        }
    )
    assert sum(times.values()) == pytest.approx(clock.now - (1000.0 - 5))
    assert step == 110  # restored at 100, then 10 steps
    assert m.current_phase == "train"


def test_hang_is_other_and_global_step_goes_back_after_restart() -> None:
    clock = Clock()
    m = TrainingMetrics(node="n0", clock=clock)
    m.phase("train")
    run_steps(m, clock, 5, seconds=1.0, wait=0.0)
    clock.now += 30  # the next step never completes
    times, step = scraped(m)
    # Shown as other once longer than the grace (twice the last step + 1 s).
    assert times["other"] == pytest.approx(30 - 3)
    assert step == 5
    restarted = TrainingMetrics(node="n0", clock=clock)
    restarted.set_global_step(2)  # the last checkpoint
    times, step = scraped(restarted)
    assert step == 2 and times["startup"] == 0


def test_failed_checkpoint_save_keeps_the_old_timestamp() -> None:
    clock = Clock()
    m = TrainingMetrics(node="n0", clock=clock, start_time=clock.now)
    with pytest.raises(OSError), m.checkpoint_save():
        raise OSError("disk full")
    # No checkpoint was ever written: none is reported (not the process start).
    assert "trainsignals_last_checkpoint_timestamp_seconds{" not in m.exposition().decode()
    m.checkpoint_saved(timestamp=1000.0)
    with pytest.raises(OSError), m.checkpoint_save():
        raise OSError("disk full")
    text = m.exposition().decode()
    assert "trainsignals_last_checkpoint_timestamp_seconds" in text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    (sample,) = families["trainsignals_last_checkpoint_timestamp_seconds"].samples
    assert sample.value == 1000.0
    assert m.current_phase == "startup"


def test_counters_never_decrease_while_steps_run_slow_and_fast() -> None:
    """Prometheus reads a decrease as a counter reset: the split must only ever grow."""
    clock = Clock()
    m = TrainingMetrics(node="n0", clock=clock)
    m.phase("train")
    previous = dict.fromkeys(ACTIVITIES, 0.0)
    durations = [1.0, 1.0, 9.0, 0.5, 1.0, 30.0, 1.0]  # a long step shows as other first
    for seconds in durations:
        for part in range(4):  # scrapes inside the step, after its data wait arrived
            clock.now += seconds / 4
            if part == 1:
                m.add_data_wait(0.1 * seconds)
            times, _ = scraped(m)
            for activity, value in times.items():
                assert value >= previous[activity] - 1e-9, (activity, seconds, part)
            previous = times
        m.observe_step(seconds)
    times, _ = scraped(m)
    assert sum(times.values()) == pytest.approx(clock.now - 1000.0)
