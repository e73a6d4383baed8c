"""Scenario timelines on the deterministic clock: what the endpoints serve at chosen times."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from trainsignals.generator.alerts.catalog import BY_NAME
from trainsignals.generator.loader import load_specs
from trainsignals.generator.spec.job import JobSpec
from trainsignals.simulator import SCENARIOS, Simulation

ROOT = Path(__file__).resolve().parent.parent
MIN, HOUR = 60, 3600


@pytest.fixture(scope="module")
def spec() -> JobSpec:
    return load_specs([ROOT / "jobs" / "minimal.yaml"])[0]


def values(text: str | None, name: str, **match: str) -> list[float]:
    assert text is not None, "endpoint is down"
    return [
        s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in match.items())
    ]


class Probe:
    """Reads one simulation's endpoints: per-rank training series, per-node GPU series."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim

    def training(self, name: str, rank: int = 0, **match: str) -> float:
        target = self.sim.targets()[rank]
        (value,) = values(self.sim.scrape(target), name, **match)
        return value

    def gpu(self, name: str, node: int = 0, gpu: int = 0, **match: str) -> float:
        target = [t for t in self.sim.targets() if t.kind == "gpu"][node]
        (value,) = values(self.sim.scrape(target), name, gpu=str(gpu), **match)
        return value

    def phase(self, rank: int = 0) -> str:
        text = self.sim.scrape(self.sim.targets()[rank])
        assert text is not None
        return next(
            s.labels["phase"]
            for fam in text_string_to_metric_families(text)
            for s in fam.samples
            if s.name == "trainsignals_phase" and s.value == 1
        )


def make(spec: JobSpec, scenario: str, **kw: object) -> Simulation:
    args: dict = dict(time_scale=60, seed=7, nodes=2, gpus_per_node=2, start_time=1.0e9)
    args.update(kw)
    return Simulation(spec, scenario, **args)


def test_table_names_known_alerts_with_default_severities(spec: JobSpec) -> None:
    required = {
        "healthy", "data_loader_starvation", "nan_loss", "loss_divergence", "loss_plateau",
        "hang", "crash", "gpu_lost", "thermal_throttling", "mfu_leak", "dropped_batches",
        "disk_filling", "stale_checkpoint", "ecc_uncorrectable", "xid_error", "node_down",
    }  # fmt: skip
    assert required <= set(SCENARIOS)
    for s in SCENARIOS.values():
        assert s.timeline and s.duration > s.fault_at
        mode = s.spec_for(spec).recovery.mode
        # Only healthy jobs, restarts that heal themselves and completed jobs raise nothing.
        assert (
            s.expected_alerts
            or s.name == "healthy"
            or (mode == "auto_restart" and s.fault.restart_after)
            or s.fault.complete
        )
        for alert, severity in {**s.expected_alerts, **s.later_alerts}.items():
            assert BY_NAME[alert].severity_for(mode) == severity, (s.name, alert)
        assert not set(s.expected_alerts) & set(s.later_alerts)
    assert SCENARIOS["healthy"].alerts_for(spec) == {}


def test_alerts_for_applies_spec_overrides_and_step_bound(spec: JobSpec) -> None:
    starving = SCENARIOS["data_loader_starvation"]
    bounded = spec.model_copy(
        update={"objectives": spec.objectives.model_copy(update={"step_time_max_seconds": 1.0})}
    )
    assert "StepTimeAboveBound" not in starving.alerts_for(spec)
    assert starving.alerts_for(bounded)["StepTimeAboveBound"] == "ticket"
    assert "StepTimeAboveBound" not in SCENARIOS["nan_loss"].alerts_for(bounded)
    quiet = spec.model_copy(update={"alerts": {"DataLoaderStarved": "off"}})
    assert starving.alerts_for(quiet) == {"ThroughputBelowFloor": "page"}


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


def counter_before_and_after(
    spec: JobSpec, scenario: str, read, after: float = 10 * MIN
) -> tuple[float, float, float]:
    with make(spec, scenario) as sim:
        p = Probe(sim)
        sim.advance_to(sim.fault_at - 5 * MIN)
        early = read(p)
        sim.advance_to(sim.fault_at - sim.tick)
        before = read(p)
        sim.advance_to(sim.fault_at + after)
        return early, before, read(p)


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


def test_crash_node_down_and_gpu_lost_take_endpoints_away(spec: JobSpec) -> None:
    with make(spec, "crash") as sim:
        sim.advance_to(sim.fault_at - sim.tick)
        assert all(sim.is_up(t) for t in sim.targets())
        sim.advance_to(sim.fault_at + MIN)
        # 4 ranks, 2 GPU exporters, 2 node_exporters: only rank 3's endpoint is gone.
        up = [sim.is_up(t) for t in sim.targets()]
        assert up == [True, True, True, False, True, True, True, True]
        assert sim.scrape(sim.targets()[3]) is None
        assert Probe(sim).gpu("trainsignals_gpu_utilization_ratio", node=1, gpu=1) < 0.05
    with make(spec, "node_down") as sim:
        sim.advance_to(sim.fault_at + MIN)
        down = [t.node for t in sim.targets() if not sim.is_up(t)]
        assert down == ["minimal-node1"] * 4  # 2 ranks, its GPU exporter, its node_exporter
    with make(spec, "gpu_lost") as sim:
        p = Probe(sim)
        sim.advance_to(sim.fault_at - sim.tick)
        assert p.gpu("trainsignals_gpu_up") == 1
        sim.advance_to(sim.fault_at + MIN)
        assert p.gpu("trainsignals_gpu_up") == 0
        assert p.gpu("trainsignals_gpu_up", gpu=1) == 1
        assert not sim.is_up(sim.targets()[0])


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


def test_thermal_throttling_on_one_gpu(spec: JobSpec) -> None:
    with make(spec, "thermal_throttling") as sim:
        p = Probe(sim)
        sim.advance_to(sim.fault_at - sim.tick)
        assert p.gpu("trainsignals_gpu_throttle_active", reason="hw_thermal_slowdown") == 0
        sim.advance_to(sim.fault_at + 5 * MIN)
        assert p.gpu("trainsignals_gpu_temperature_celsius") > 88
        assert p.gpu("trainsignals_gpu_throttle_active", reason="hw_thermal_slowdown") == 1
        assert p.gpu("trainsignals_gpu_throttle_active", reason="sw_power_cap") == 0
        assert p.gpu("trainsignals_gpu_temperature_celsius", gpu=1) < 80


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


def test_ecc_counts_once_and_marks_remap(spec: JobSpec) -> None:
    with make(spec, "ecc_uncorrectable") as sim:
        p = Probe(sim)
        read = "trainsignals_gpu_ecc_errors_total"
        sim.advance_to(sim.fault_at - sim.tick)
        assert p.gpu(read, gpu=1, error_type="uncorrected") == 0
        sim.advance_to(sim.fault_at + 5 * MIN)
        assert p.gpu(read, gpu=1, error_type="uncorrected") == 2
        assert p.gpu("trainsignals_gpu_remapped_rows_pending", gpu=1) == 1
        assert p.gpu(read, gpu=0, error_type="uncorrected") == 0


def test_xids_reach_the_exporter(spec: JobSpec) -> None:
    import time

    with make(spec, "xid_error") as sim:
        p = Probe(sim)
        name = "trainsignals_gpu_xid_errors_total"
        sim.advance_to(sim.fault_at - sim.tick)
        # Codes are not seeded at 0 by default: none before the fault.
        assert values(sim.scrape(sim.targets()[4]), name, gpu="0", xid="74") == []
        sim.advance_to(sim.fault_at + 3 * MIN)
        # The exporter's XID thread polls its queue every 0.5 s: wait for it, bounded.
        deadline = time.monotonic() + 10

        def xid13() -> list[float]:
            gpu = sim.targets()[4]
            return values(sim.scrape(gpu), name, gpu="1", xid="13")

        while time.monotonic() < deadline and xid13() != [2]:
            time.sleep(0.05)
        assert p.gpu(name, gpu=0, xid="74") == 1
        assert xid13() == [2]


def scrape_all(sim: Simulation) -> list[list[str]]:
    """Every endpoint's lines, less the exporter's own scrape timing (wall-clock by nature)."""
    return [
        [line for line in (sim.scrape(t) or "").splitlines() if "scrape_duration" not in line]
        for t in sim.targets()
    ]


def test_same_seed_same_series_regardless_of_stepping(spec: JobSpec) -> None:
    with make(spec, "dropped_batches") as a, make(spec, "dropped_batches") as b:
        a.advance_to(2 * HOUR)
        for t in range(0, 2 * HOUR + 1, 7 * MIN):  # different call pattern, same ticks
            b.advance_to(t)
        b.advance_to(2 * HOUR)
        assert scrape_all(a) == scrape_all(b)
    with make(spec, "healthy", seed=8) as c, make(spec, "healthy") as d:
        c.advance_to(HOUR)
        d.advance_to(HOUR)
        assert scrape_all(c) != scrape_all(d)


def test_time_scale_that_would_fake_a_stall_is_refused(spec: JobSpec) -> None:
    with pytest.raises(ValueError, match="too large"):
        make(spec, "healthy", time_scale=1000)
    with pytest.raises(ValueError, match="unknown scenario"):
        make(spec, "meteor")


def test_readme_table_lists_the_expected_alerts_of_every_scenario() -> None:
    """simulator/README.md repeats the scenario table for readers; it must not drift."""
    readme = (Path(__file__).resolve().parents[1] / "simulator/README.md").read_text()
    rows = {}
    for line in readme.splitlines():
        match = re.match(r"\| `(\w+)` \| [^|]* \| [^|]* \| ([^|]*) \|", line)
        if match:
            rows[match.group(1)] = match.group(2).strip()
    assert set(rows) == set(SCENARIOS)
    for name, scenario in SCENARIOS.items():
        listed = dict(re.findall(r"(\w+) \((page|ticket)\)", rows[name]))
        assert listed == scenario.expected_alerts, name


def _ib(sim: Simulation, name: str, node: int = 0, device: str = "mlx5_0") -> float:
    """A node_exporter InfiniBand series of one node, as its endpoint serves it now."""
    target = [t for t in sim.targets() if t.kind == "node"][node]
    (value,) = values(sim.scrape(target), name, device=device, port="1")
    return value


def test_ib_port_down_and_flapping(spec: JobSpec) -> None:
    with make(spec, "ib_port_down") as sim:
        sim.advance_to(sim.fault_at - sim.tick)
        assert _ib(sim, "node_infiniband_state_id") == 4
        sim.advance_to(sim.fault_at + MIN)
        assert _ib(sim, "node_infiniband_state_id") == 1
        assert _ib(sim, "node_infiniband_physical_state_id") == 2
        assert _ib(sim, "node_infiniband_link_downed_total") == 1
        assert _ib(sim, "node_infiniband_state_id", device="mlx5_1") == 4
        assert _ib(sim, "node_infiniband_state_id", node=1) == 4
    with make(spec, "ib_port_flapping") as sim:
        sim.advance_to(sim.fault_at + 2 * MIN)  # the first flap is over
        assert _ib(sim, "node_infiniband_state_id") == 4
        assert _ib(sim, "node_infiniband_link_downed_total") == 1
        sim.advance_to(sim.fault_at + 10 * MIN + sim.tick)  # inside the second flap
        assert _ib(sim, "node_infiniband_state_id") == 1
        assert _ib(sim, "node_infiniband_link_downed_total") == 2
        assert _ib(sim, "node_infiniband_symbol_error_total") == 80
