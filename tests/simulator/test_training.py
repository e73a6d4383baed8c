"""Training-side scenarios on the deterministic clock: what each rank's endpoint serves before
and after the fault."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.simulator.helpers import (
    HOUR,
    MIN,
    Probe,
    counter_before_and_after,
    make,
    values,
)
from trainsignals.generator.spec.job import JobSpec


def test_healthy_day_stays_inside_every_objective(spec: JobSpec) -> None:
    obj, floor = spec.objectives, None
    with make(spec, "healthy") as sim:
        floor = sim.spec.tokens_per_second_floor
        assert floor
        p, ts = Probe(sim), sim.time_scale
        prev: dict[str, float] | None = None
        losses: dict[int, float] = {}
        phases = set()
        for minute in range(1, 24 * 60 + 1):
            t = minute * MIN
            sim.advance_to(t)
            phases.add(sim.phase)
            if minute % 10:
                continue
            now = sim.real_time_at(t)
            phase = p.phase()
            assert phase == sim.phase
            cur = {
                "tokens": sum(p.training("trainsignals_tokens_total", r) for r in range(4)),
                "wait": p.training("trainsignals_data_wait_seconds_total"),
                "real": now,
            }
            if prev and t > 20 * MIN:
                real = cur["real"] - prev["real"]
                # Over 10 simulated minutes: pauses included, still well above the floor.
                assert (cur["tokens"] - prev["tokens"]) / real > 1.5 * floor, t
                assert (cur["wait"] - prev["wait"]) / real < obj.data_wait_max_ratio / 2, t
            prev = cur
            step_age = (now - p.training("trainsignals_last_step_timestamp_seconds")) * ts
            assert step_age < (obj.stall_after if phase == "train" else obj.max_pause), t
            # No checkpoint before the first save: the job's age is its checkpoint age.
            saved = values(
                sim.scrape(sim.targets()[0]), "trainsignals_last_checkpoint_timestamp_seconds"
            )
            ckpt_age = (now - (saved[0] if saved else sim.start_time)) * ts
            assert ckpt_age < obj.checkpoint_max_age / 2, t
            free = p.training("trainsignals_checkpoint_disk_free_bytes")
            size = p.training("trainsignals_checkpoint_disk_size_bytes")
            assert free / size == pytest.approx(0.55, abs=0.01)
            if t % HOUR:
                continue
            losses[t // HOUR] = p.training("trainsignals_loss")
            for node in (0, 1):
                for gpu in (0, 1):
                    assert p.gpu("trainsignals_gpu_temperature_celsius", node, gpu) < 75
                    used = p.gpu("trainsignals_gpu_memory_used_bytes", node, gpu)
                    total = p.gpu("trainsignals_gpu_memory_total_bytes", node, gpu)
                    assert used / total < 0.8
                    assert p.gpu("trainsignals_gpu_up", node, gpu) == 1
                    reasons = values(
                        sim.scrape(sim.targets()[4 + node]),
                        "trainsignals_gpu_throttle_active",
                        gpu=str(gpu),
                    )
                    assert sum(reasons) == 0
        assert p.training("trainsignals_nonfinite_losses_total") == 0
        assert p.training("trainsignals_batches_dropped_total") == 0
        assert p.training("trainsignals_failed_steps_total") == 0
        assert {"train", "eval", "checkpoint"} <= phases
        # Plateau check (6h apart) holds all day: >1% better.
        for hour in range(7, 25):
            assert losses[hour] < losses[hour - 6] * (1 - obj.loss_plateau_min_improvement_ratio)
        # MFU of the whole day (pauses and warm-up included) stays above the floor.
        tokens = sum(p.training("trainsignals_tokens_total", r) for r in range(4))
        flops = tokens * spec.shape.model_flops_per_token
        mfu = flops / (sim.spec.shape.peak_flops * 24 * HOUR / ts)
        assert obj.mfu_min_ratio * 1.2 < mfu < 0.5


def test_startup_warmup_then_train(spec: JobSpec) -> None:
    with make(spec, "healthy") as sim:
        p = Probe(sim)
        sim.advance_to(1 * MIN)
        assert p.phase() == "startup"
        assert p.training("trainsignals_steps_total") == 0
        # No step yet: no last-step time (never the process start, issue 16).
        assert not values(sim.scrape(sim.targets()[0]), "trainsignals_last_step_timestamp_seconds")
        assert p.training("trainsignals_process_start_time_seconds") == 1.0e9
        sim.advance_to(6 * MIN)
        assert p.phase() == "warmup"
        assert p.training("trainsignals_steps_total") > 0
        sim.advance_to(14 * MIN)
        assert p.phase() == "train"
        assert p.gpu("trainsignals_gpu_utilization_ratio") > 0.85


def test_nan_loss_counts_only_after_onset(spec: JobSpec) -> None:
    early, before, after = counter_before_and_after(
        spec, "nan_loss", lambda p: p.training("trainsignals_nonfinite_losses_total", 3)
    )
    assert early == before == 0
    assert after >= 15  # 10 simulated minutes = 10 real seconds at x60: ~20 steps
    with make(spec, "nan_loss") as sim:
        sim.advance_to(sim.fault_at + 10 * MIN)
        assert math.isfinite(Probe(sim).training("trainsignals_loss"))


def test_loss_divergence_and_plateau(spec: JobSpec) -> None:
    with make(spec, "loss_divergence") as sim:
        p = Probe(sim)
        sim.advance_to(sim.fault_at - sim.tick)
        base = p.training("trainsignals_loss")
        sim.advance_to(sim.fault_at + 20 * MIN)
        assert p.training("trainsignals_loss") > 5 * base
    with make(spec, "loss_plateau") as sim:
        p = Probe(sim)
        sim.advance_to(sim.fault_at + 10 * MIN)
        at_onset = p.training("trainsignals_loss")
        sim.advance_to(sim.fault_at + 6 * HOUR)
        assert p.training("trainsignals_loss") == pytest.approx(at_onset, rel=0.05)


def test_starvation_raises_data_wait_and_lowers_utilization(spec: JobSpec) -> None:
    with make(spec, "data_loader_starvation") as sim:
        p = Probe(sim)
        sim.advance_to(sim.fault_at + 2 * MIN)
        w0 = p.training("trainsignals_data_wait_seconds_total")
        k0 = p.training("trainsignals_tokens_total")
        r0 = sim.real_time_at(sim.sim_time)
        sim.advance_to(sim.fault_at + 12 * MIN)
        real = sim.real_time_at(sim.sim_time) - r0
        assert (p.training("trainsignals_data_wait_seconds_total") - w0) / real > 0.6
        tokens_per_s = (p.training("trainsignals_tokens_total") - k0) / real * 4
        assert tokens_per_s < 0.8 * sim.spec.tokens_per_second_floor
        assert p.gpu("trainsignals_gpu_utilization_ratio") < 0.3


def test_hang_freezes_steps_in_train_with_busy_gpus(spec: JobSpec) -> None:
    with make(spec, "hang") as sim:
        p = Probe(sim)
        sim.advance_to(sim.fault_at - sim.tick)
        p.gpu("trainsignals_gpu_up")  # a first GPM sample to compare with
        assert p.gpu("trainsignals_gpu_sm_active_ratio") > 0.3  # training or eval
        assert p.gpu("trainsignals_gpu_tensor_active_ratio") > 0.1
        sim.advance_to(sim.fault_at + 1 * MIN)
        steps = p.training("trainsignals_steps_total")
        last = p.training("trainsignals_last_step_timestamp_seconds")
        sim.advance_to(sim.fault_at + 20 * MIN)
        assert p.training("trainsignals_steps_total") == steps
        age = (sim.real_time_at(sim.sim_time) - last) * sim.time_scale
        assert age > sim.spec.objectives.stall_after
        assert p.phase() == "train"
        assert p.gpu("trainsignals_gpu_utilization_ratio") > 0.95
        # GPM tells the hang apart: the spinning collective keeps few SMs and no tensor pipe busy.
        assert p.gpu("trainsignals_gpu_sm_active_ratio") < 0.2
        assert p.gpu("trainsignals_gpu_tensor_active_ratio") == 0


def test_restart_loop_restores_the_checkpoint_time_and_never_steps(spec: JobSpec) -> None:
    """Issue 16: each incarnation of a restart loop reports the restored checkpoint's time
    (never its own start) as its checkpoint, no last step, and never completes a step."""
    with make(spec, "restart_loop") as sim:
        p = Probe(sim)
        sim.advance_to(sim.fault_at - sim.tick)
        saved = p.training("trainsignals_last_checkpoint_timestamp_seconds")
        for incarnation in (1, 2):
            sim.advance_to(sim.fault_at + (incarnation - 1) * 15 * MIN + 10 * MIN)
            assert p.training("trainsignals_steps_total") == 0
            text = sim.scrape(sim.targets()[0])
            assert not values(text, "trainsignals_last_step_timestamp_seconds")
            assert p.training("trainsignals_last_checkpoint_timestamp_seconds") == saved
            assert p.phase() == "startup"
            started = p.training("trainsignals_process_start_time_seconds")
            assert started > saved


def test_completed_job_says_done_then_its_ranks_leave(spec: JobSpec, tmp_path: Path) -> None:
    with make(spec, "completed", targets_dir=tmp_path, base_port=0) as sim:
        sim.serve()
        sim.advance_to(sim.fault_at - sim.tick)
        assert Probe(sim).phase() == "train"
        assert len(json.loads((tmp_path / "training.json").read_text())) == 2  # one per node
        sim.advance_to(sim.fault_at + MIN)
        assert [r.metrics.current_phase for r in sim.ranks] == ["done"] * 4
        assert not any(sim.is_up(t) for t in sim.targets() if t.kind == "training")
        for kind in ("training", "gpu", "node"):  # the scheduler released the nodes
            assert json.loads((tmp_path / f"{kind}.json").read_text()) == []


def test_mfu_leak_slows_steps_over_hours(spec: JobSpec) -> None:
    with make(spec, "mfu_leak", time_scale=200) as sim:
        p = Probe(sim)

        def rate() -> float:
            c0, r0 = p.training("trainsignals_tokens_total"), sim.real_time_at(sim.sim_time)
            sim.advance(20 * MIN)
            return (p.training("trainsignals_tokens_total") - c0) / (
                sim.real_time_at(sim.sim_time) - r0
            )

        sim.advance_to(sim.fault_at)
        start = rate()
        sim.advance_to(sim.fault_at + 5 * HOUR)
        later = rate()
        assert later < 0.8 * start


def test_dropped_batches_about_three_percent(spec: JobSpec) -> None:
    with make(spec, "dropped_batches") as sim:
        p = Probe(sim)
        sim.advance_to(sim.fault_at - sim.tick)
        assert p.training("trainsignals_batches_dropped_total") == 0
        s0 = p.training("trainsignals_steps_total")
        sim.advance_to(sim.fault_at + HOUR)
        dropped = p.training("trainsignals_batches_dropped_total")
        steps = p.training("trainsignals_steps_total") - s0
        assert 0.02 < dropped / steps < 0.04


def test_disk_filling_and_stale_checkpoint(spec: JobSpec) -> None:
    with make(spec, "disk_filling", time_scale=200) as sim:
        p = Probe(sim)

        def free_ratio() -> float:
            free = p.training("trainsignals_checkpoint_disk_free_bytes")
            return free / p.training("trainsignals_checkpoint_disk_size_bytes")

        sim.advance_to(sim.fault_at)
        assert free_ratio() == pytest.approx(0.55, abs=0.01)
        sim.advance_to(sim.fault_at + HOUR)
        assert free_ratio() == pytest.approx(0.35, abs=0.01)
        sim.advance_to(sim.fault_at + 2.5 * HOUR)
        assert free_ratio() < 0.10
    with make(spec, "stale_checkpoint", time_scale=200) as sim:
        p = Probe(sim)
        sim.advance_to(sim.fault_at)
        last = p.training("trainsignals_last_checkpoint_timestamp_seconds")
        assert last > sim.start_time  # a checkpoint succeeded before the fault
        sim.advance_to(sim.fault_at + 2 * HOUR)
        assert p.training("trainsignals_last_checkpoint_timestamp_seconds") == last
