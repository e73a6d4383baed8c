"""A rank's own work over a test timeline (generator/testkit/own_work.py) is the plain formula,
and its memo shares samples only between timelines alike in everything they follow from."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainsignals.generator.loader import load_specs
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.signals.straggler import OWN_WORK, STARTED, STEP_SECONDS
from trainsignals.generator.testkit.faults import FAULT_ONSET, JobTimeline, restart
from trainsignals.generator.testkit.job_series import HEALTHY_OWN_SHARE, incarnations
from trainsignals.generator.testkit.own_work import OwnWork

ROOT = Path(__file__).resolve().parent.parent
MINUTES = 150


def _ctx(**objectives: float) -> RuleContext:
    spec = load_specs([ROOT / "jobs/llama-8b-finetune.yaml"])[0]
    if objectives:
        spec = spec.model_copy(update={"objectives": spec.objectives.model_copy(update=objectives)})
    return RuleContext(spec)


def _plain(t: JobTimeline, factor: list[float]) -> dict[str, list]:
    """The own work, step seconds and start time, minute by minute."""
    work, stepped = [0.0], [0.0]
    for m in range(1, t.minutes + 1):
        own = 60 * HEALTHY_OWN_SHARE * (1 - t.data_wait_share[m]) * factor[m]
        stepping = t.steps_per_second[m] > 0
        work.append(work[-1] + (round(own * 64) / 64 if stepping else 0.0))
        stepped.append(stepped[-1] + (60.0 if stepping else 0.0))
    series = {OWN_WORK: work, STEP_SECONDS: stepped, STARTED: [*t.process_start]}
    return {name: incarnations(t, name, values) for name, values in series.items()}


def _samples(t: JobTimeline, factor: list[float]) -> dict[str, list]:
    return dict(OwnWork(t).samples(factor))


def _slow(factor: float = 1.2) -> list[float]:
    return [1.0] * FAULT_ONSET + [factor] * (MINUTES + 1 - FAULT_ONSET)


def _paused(t: JobTimeline) -> JobTimeline:
    for m in range(FAULT_ONSET + 5, FAULT_ONSET + 9):
        t.steps_per_second[m] = 0.0
    return t


def _waiting(t: JobTimeline) -> JobTimeline:
    t.data_wait_share[FAULT_ONSET + 5] = 0.3
    return t


def _restarted(t: JobTimeline) -> JobTimeline:
    restart(t, FAULT_ONSET + 20, FAULT_ONSET + 23)
    return t


def _started_late(t: JobTimeline) -> JobTimeline:
    t.process_start[FAULT_ONSET + 5 :] = [600.0] * (MINUTES - FAULT_ONSET - 4)
    return t


def _healthy(t: JobTimeline) -> JobTimeline:
    return t


BENDS = [_healthy, _paused, _waiting, _restarted, _started_late]


@pytest.mark.parametrize("bend", BENDS)
@pytest.mark.parametrize("factor", [[1.0] * (MINUTES + 1), _slow()])
def test_own_work_is_the_plain_formula(bend, factor) -> None:
    t = bend(JobTimeline(_ctx(), MINUTES).build())
    assert _samples(t, factor) == _plain(t, factor)


def test_jobs_differing_in_speed_alone_share_the_samples() -> None:
    """Other throughput objectives, another name: the same minutes step, the same own work."""
    base = JobTimeline(_ctx(), MINUTES).build()
    faster = _ctx(step_time_max_seconds=2.6, mfu_min_ratio=0.45, tokens_per_second_min=31000)
    other = JobTimeline(faster, MINUTES).build()
    assert other.steps_per_second != base.steps_per_second  # (the speed does differ)
    assert OwnWork(other).samples(_slow()) is OwnWork(base).samples(_slow())
    renamed = faster.spec.model_copy(update={"name": "other-job"})
    t = JobTimeline(RuleContext(renamed), MINUTES).build()
    assert OwnWork(t).samples(_slow()) is OwnWork(base).samples(_slow())


@pytest.mark.parametrize("bend", BENDS[1:])
def test_timelines_differing_in_what_it_reads_do_not(bend) -> None:
    """A minute that does not step, another data wait, a restart, a later start time: each
    gets its own samples (and the plain formula's), not the healthy job's."""
    healthy = _samples(JobTimeline(_ctx(), MINUTES).build(), _slow())
    t = bend(JobTimeline(_ctx(), MINUTES).build())
    assert _samples(t, _slow()) != healthy
    assert _samples(t, _slow()) == _plain(t, _slow())


def test_other_factors_and_lengths_do_not_share() -> None:
    t = JobTimeline(_ctx(), MINUTES).build()
    assert _samples(t, _slow(1.3)) != _samples(t, _slow(1.2))
    assert _samples(t, _slow(1.3)) == _plain(t, _slow(1.3))
    shorter = JobTimeline(_ctx(), MINUTES - 1).build()
    assert len(_samples(shorter, _slow())[OWN_WORK]) == MINUTES


def test_series_are_copies_with_the_ranks_labels() -> None:
    """Callers may bend a rank's series: the memo's samples stay as they were."""
    t = JobTimeline(_ctx(), MINUTES).build()
    series = OwnWork(t).series({"rank": "8"}, _slow())
    series[0].values[-1] = None
    assert _samples(t, _slow()) == _plain(t, _slow())
    assert all(s.labels["rank"] == "8" and s.labels["training_job"] for s in series)
