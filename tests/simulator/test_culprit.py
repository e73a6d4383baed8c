"""The culprit scenarios on the deterministic clock: a slow host shows only in its ranks' own
work, and a rank stuck in its data loader shows an open wait and an idle GPU."""

from __future__ import annotations

import pytest

from tests.simulator.helpers import MIN, Probe, make
from trainsignals.generator.spec.job import JobSpec
from trainsignals.simulator.scenarios_culprit import HOST_SLOW

OWN = "trainsignals_own_work_seconds_total"
STEPS = "trainsignals_steps_total"
TOOK = "trainsignals_step_duration_seconds_sum"
WAIT_OPEN = "trainsignals_data_wait_open_seconds"


def _per_rank(p: Probe, name: str) -> list[float]:
    return [p.training(name, rank) for rank in range(4)]


def test_slow_host_adds_own_work_on_its_ranks_only(spec: JobSpec) -> None:
    with make(spec, "slow_host") as sim:
        p = Probe(sim)
        sim.advance_to(sim.fault_at - 20 * MIN)
        own0, steps0, took0 = _per_rank(p, OWN), p.training(STEPS), p.training(TOOK)
        sim.advance_to(sim.fault_at)
        own1, steps1, took1 = _per_rank(p, OWN), p.training(STEPS), p.training(TOOK)
        sim.advance_to(sim.fault_at + 20 * MIN)
        own2, steps2, took2 = _per_rank(p, OWN), p.training(STEPS), p.training(TOOK)
        steps = _per_rank(p, STEPS)
    assert len(set(steps)) == 1, "synchronous: every rank completes the same steps"
    before = [(b - a) / (steps1 - steps0) for a, b in zip(own0, own1, strict=True)]
    after = [(b - a) / (steps2 - steps1) for a, b in zip(own1, own2, strict=True)]
    # Before onset every rank does the same own work per step.
    assert max(before) == pytest.approx(min(before), rel=0.02)
    # After: node 1's ranks (2, 3) do HOST_SLOW x node 0's, and set the step time.
    assert after[2] / after[0] == pytest.approx(HOST_SLOW, rel=0.02)
    assert after[3] / after[1] == pytest.approx(HOST_SLOW, rel=0.02)
    assert after[2] == pytest.approx(before[2] * HOST_SLOW, rel=0.03)
    assert after[0] == pytest.approx(before[0], rel=0.03)
    # Every rank's step takes what the slow host's own work (and the data wait) takes.
    step_before = (took1 - took0) / (steps1 - steps0)
    assert (took2 - took1) / (steps2 - steps1) / step_before == pytest.approx(1.24, rel=0.03)


def test_slow_host_keeps_its_gpus_clocked_like_their_peers(spec: JobSpec) -> None:
    with make(spec, "slow_host") as sim:
        p = Probe(sim)
        sim.advance_to(sim.fault_at + 20 * MIN)
        clocks = {
            p.gpu("trainsignals_gpu_sm_clock_hertz", node, gpu) for node in (0, 1) for gpu in (0, 1)
        }
    assert len(clocks) == 1


def test_hang_data_wait_opens_one_wait_and_idles_its_gpu(spec: JobSpec) -> None:
    with make(spec, "hang_data_wait") as sim:
        p = Probe(sim)
        sim.advance_to(sim.fault_at - sim.tick)
        assert _per_rank(p, WAIT_OPEN) == [0.0] * 4
        sim.advance_to(sim.fault_at + MIN)
        steps = _per_rank(p, STEPS)
        sim.advance_to(sim.fault_at + 20 * MIN)
        assert _per_rank(p, STEPS) == steps, "no rank completes a step"
        waits = _per_rank(p, WAIT_OPEN)
        assert waits[:3] == [0.0] * 3 and waits[3] > 0, waits
        assert [p.phase(rank) for rank in range(4)] == ["train"] * 4
        # The stuck rank's GPU (node 1, GPU 1) idles; the others spin in the collective.
        assert p.gpu("trainsignals_gpu_utilization_ratio", 1, 1) < 0.05
        assert p.gpu("trainsignals_gpu_utilization_ratio", 1, 0) > 0.95
        assert p.gpu("trainsignals_gpu_utilization_ratio", 0, 0) > 0.95
