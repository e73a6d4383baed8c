"""The GPU exporter through the fake backend: every metric family, labels and values."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from trainsignals.exporters.gpu.fake_backend import FakeBackend, FakeGpu, FakeMigInstance
from trainsignals.exporters.gpu.server import Exporter, build_exporter, build_registry
from trainsignals.metrics.catalog import METRICS
from trainsignals.metrics.gpu_exporter import (
    POWER_THROTTLE_REASONS,
    THERMAL_THROTTLE_REASONS,
    THROTTLE_REASONS,
)
from trainsignals.metrics.model import Component

from .gpu_samples import scrape, value


def busy_gpu(index: int) -> FakeGpu:
    return FakeGpu(
        index=index,
        utilization_ratio=0.9,
        memory_utilization_ratio=0.4,
        memory_used_bytes=60 * 2**30,
        memory_reserved_bytes=2**29,
        power_watts=650.5,
        power_limit_watts=700.0,
        energy_joules=1234.5,
        temperature_celsius=71.0,
        sm_clock_hertz=1.6e9,
        memory_clock_hertz=2.6e9,
        throttle_reasons={"sw_power_cap", "hw_thermal_slowdown"},
        ecc_corrected_total=3,
        ecc_uncorrected_total=1,
        remapped_rows_pending=True,
        pcie_tx_bytes_per_second=1e9,
        pcie_rx_bytes_per_second=2e9,
        nvlink_up=[True, False],
        nvlink_errors={(1, "replay"): 7, (1, "crc_flit"): 2},
        fan_speed_ratios=[0.3, 0.35],
        processes=[(4242, "python3", 50 * 2**30)],
        sm_active_ratio=0.75,
        tensor_active_ratio=0.5,
    )


def mig_gpu(index: int) -> FakeGpu:
    """An H100 in MIG mode with a 3g.40gb and a 1g.10gb GPU instance."""
    return FakeGpu(
        index,
        mig=[
            FakeMigInstance(1, "3g.40gb", 40 * 2**30, 30 * 2**30, 0.6, 0.4),
            FakeMigInstance(9, "1g.10gb", 10 * 2**30, 2**30, 0.1, 0.0),
        ],
    )


@pytest.fixture
def exporter() -> Iterator[Exporter]:
    backend = FakeBackend([busy_gpu(0), FakeGpu(1), mig_gpu(2)])
    ex = build_exporter(backend, "node-a", {"training_job": "llama"})
    yield ex
    ex.close()


def test_every_gpu_metric_of_the_catalog_is_served_with_its_labels(exporter: Exporter) -> None:
    exporter.collector.backend.inject_xid(0, 79)  # type: ignore[attr-defined]
    deadline = time.monotonic() + 10  # the XID thread delivers the event
    while value(samples := scrape(exporter), "trainsignals_gpu_xid_errors_total", gpu="0") is None:
        assert time.monotonic() < deadline, "XID 79 never counted"
        time.sleep(0.05)
    samples = scrape(exporter)  # GPM reports from the second sample on
    for metric in (m for m in METRICS if m.component is Component.GPU_EXPORTER):
        if metric.name == "trainsignals_gpu_exporter_nvml_errors_total":
            continue  # only present after an error; covered by the fault tests
        series = [ls for (n, ls) in samples if n == metric.name]
        assert series, f"{metric.name} missing"
        names = {k for k, _ in series[0]}
        assert names == {*metric.labels, "training_job"}, metric.name


def test_values_are_in_base_units(exporter: Exporter) -> None:
    s = scrape(exporter)
    g0 = {
        "gpu": "0",
        "node": "node-a",
        "uuid": "GPU-fake-0000",
        "model": "NVIDIA H100 80GB HBM3",
        "training_job": "llama",
    }
    assert value(s, "trainsignals_gpu_up", **g0) == 1
    assert value(s, "trainsignals_gpu_utilization_ratio", **g0) == 0.9
    assert value(s, "trainsignals_gpu_memory_utilization_ratio", **g0) == 0.4
    assert value(s, "trainsignals_gpu_memory_used_bytes", **g0) == 60 * 2**30
    assert value(s, "trainsignals_gpu_memory_total_bytes", **g0) == 80 * 2**30
    assert value(s, "trainsignals_gpu_memory_reserved_bytes", **g0) == 2**29
    assert value(s, "trainsignals_gpu_power_watts", **g0) == 650.5
    assert value(s, "trainsignals_gpu_power_limit_watts", **g0) == 700.0
    assert value(s, "trainsignals_gpu_energy_joules_total", **g0) == 1234.5
    assert value(s, "trainsignals_gpu_temperature_celsius", **g0) == 71.0
    assert value(s, "trainsignals_gpu_sm_clock_hertz", **g0) == 1.6e9
    assert value(s, "trainsignals_gpu_sm_clock_max_hertz", **g0) == 1.98e9
    assert value(s, "trainsignals_gpu_memory_clock_hertz", **g0) == 2.6e9
    assert value(s, "trainsignals_gpu_memory_clock_max_hertz", **g0) == 2.619e9
    assert value(s, "trainsignals_gpu_ecc_errors_total", error_type="corrected", **g0) == 3
    assert value(s, "trainsignals_gpu_ecc_errors_total", error_type="uncorrected", **g0) == 1
    assert value(s, "trainsignals_gpu_remapped_rows_pending", **g0) == 1
    assert value(s, "trainsignals_gpu_remapped_rows_failed", **g0) == 0
    assert value(s, "trainsignals_gpu_pcie_transmit_bytes_per_second", **g0) == 1e9
    assert value(s, "trainsignals_gpu_pcie_receive_bytes_per_second", **g0) == 2e9
    assert value(s, "trainsignals_gpu_info", pci_bus_id="00000000:18:00.0", **g0) == 1


def test_throttle_reasons_alerts_read_always_others_while_active(exporter: Exporter) -> None:
    backend = exporter.collector.backend
    backend.gpus[1].throttle_reasons = {"gpu_idle"}  # type: ignore[attr-defined]
    s = scrape(exporter)

    def reasons(gpu: str) -> dict[str, float | None]:
        return {
            r: value(s, "trainsignals_gpu_throttle_active", gpu=gpu, reason=r)
            for r in THROTTLE_REASONS
        }

    alerted = {*THERMAL_THROTTLE_REASONS, *POWER_THROTTLE_REASONS}
    assert reasons("0") == {
        r: 1.0 if r in {"sw_power_cap", "hw_thermal_slowdown"} else 0.0 if r in alerted else None
        for r in THROTTLE_REASONS
    }
    assert reasons("1") == {
        r: 1.0 if r == "gpu_idle" else 0.0 if r in alerted else None for r in THROTTLE_REASONS
    }


def test_nvlink_fans_and_processes_where_present(exporter: Exporter) -> None:
    s = scrape(exporter)
    # Per link only for a link that is down or counted errors: link 1, not link 0.
    assert value(s, "trainsignals_gpu_nvlink_up", gpu="0", link="0") is None
    assert value(s, "trainsignals_gpu_nvlink_up", gpu="0", link="1") == 0
    assert value(s, "trainsignals_gpu_nvlink_links_down", gpu="0") == 1
    assert value(s, "trainsignals_gpu_nvlink_errors_all_links_total", gpu="0") == 9
    assert (
        value(s, "trainsignals_gpu_nvlink_errors_total", gpu="0", link="1", error_type="replay")
        == 7
    )
    assert value(s, "trainsignals_gpu_fan_speed_ratio", gpu="0", fan="1") == 0.35
    assert (
        value(
            s,
            "trainsignals_gpu_process_memory_used_bytes",
            gpu="0",
            pid="4242",
            process_name="python3",
        )
        == 50 * 2**30
    )
    # GPU 1 is an SXM board without NVLink wiring, fans or processes: absent, still up.
    for name in ("nvlink_links_down", "fan_speed_ratio", "process_memory_used_bytes"):
        assert not [k for k in s if k[0] == f"trainsignals_gpu_{name}" and ("gpu", "1") in k[1]]
    assert value(s, "trainsignals_gpu_up", gpu="1") == 1


def test_counters_are_exposed_as_counters(exporter: Exporter) -> None:
    text = generate_latest(exporter.registry).decode()
    types = {f.name: f.type for f in text_string_to_metric_families(text)}
    assert types["trainsignals_gpu_energy_joules"] == "counter"
    assert types["trainsignals_gpu_nvlink_errors_all_links"] == "counter"
    assert types["trainsignals_gpu_ecc_errors"] == "counter"
    assert types["trainsignals_gpu_utilization_ratio"] == "gauge"


def test_one_query_per_gpu_per_scrape_and_init_once() -> None:
    backend = FakeBackend([busy_gpu(i) for i in range(4)])
    ex = build_exporter(backend, "n", {})
    try:
        for _ in range(3):
            scrape(ex)
    finally:
        ex.close()
    per_gpu = {k: n for k, n in backend.calls.items() if k[1] >= 0}
    assert {m for m, _ in per_gpu} >= {"utilization", "memory", "nvlink", "processes"}
    for (method, index), n in per_gpu.items():
        # identity (uuid, model) is static: read once and cached with the handle
        assert n == (1 if method == "identity" else 3), (method, index, n)
    assert backend.calls["init", -1] == 1


def test_build_registry_serves_the_selected_gpus_only() -> None:
    backend = FakeBackend([FakeGpu(i) for i in range(4)])
    registry = build_registry(backend, "n", {"training_job": "x"}, gpu_indices=[1, 3])
    text = generate_latest(registry).decode()
    ups = {
        s.labels["gpu"]: s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "trainsignals_gpu_up"
    }
    assert ups == {"1": 1.0, "3": 1.0}
    assert not [k for k in backend.calls if k[1] in (0, 2)]


def test_collection_options_skip_processes_nvlink_and_pcie() -> None:
    from trainsignals.exporters.gpu.collector import CollectOptions

    backend = FakeBackend([busy_gpu(0)])
    ex = build_exporter(
        backend, "n", {}, options=CollectOptions(processes=False, nvlink=False, pcie=False)
    )
    try:
        s = scrape(ex)
    finally:
        ex.close()
    assert not {n for n, _ in s} & {
        "trainsignals_gpu_process_memory_used_bytes",
        "trainsignals_gpu_nvlink_up",
        "trainsignals_gpu_pcie_transmit_bytes_per_second",
    }
    assert not {m for m, _ in backend.calls} & {"processes", "nvlink", "pcie_throughput"}
