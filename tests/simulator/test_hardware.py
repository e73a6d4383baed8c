"""Node and GPU scenarios on the deterministic clock: endpoints that vanish, throttling, ECC,
XIDs and InfiniBand ports."""

from __future__ import annotations

from tests.simulator.helpers import (
    MIN,
    Probe,
    ib_value,
    make,
    values,
)
from trainsignals.generator.spec.job import JobSpec


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


def test_ib_port_down_and_flapping(spec: JobSpec) -> None:
    with make(spec, "ib_port_down") as sim:
        sim.advance_to(sim.fault_at - sim.tick)
        assert ib_value(sim, "node_infiniband_state_id") == 4
        sim.advance_to(sim.fault_at + MIN)
        assert ib_value(sim, "node_infiniband_state_id") == 1
        assert ib_value(sim, "node_infiniband_physical_state_id") == 2
        assert ib_value(sim, "node_infiniband_link_downed_total") == 1
        assert ib_value(sim, "node_infiniband_state_id", device="mlx5_1") == 4
        assert ib_value(sim, "node_infiniband_state_id", node=1) == 4
    with make(spec, "ib_port_flapping") as sim:
        sim.advance_to(sim.fault_at + 2 * MIN)  # the first flap is over
        assert ib_value(sim, "node_infiniband_state_id") == 4
        assert ib_value(sim, "node_infiniband_link_downed_total") == 1
        sim.advance_to(sim.fault_at + 10 * MIN + sim.tick)  # inside the second flap
        assert ib_value(sim, "node_infiniband_state_id") == 1
        assert ib_value(sim, "node_infiniband_link_downed_total") == 2
        assert ib_value(sim, "node_infiniband_symbol_error_total") == 80
