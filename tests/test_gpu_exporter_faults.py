"""The exporter never dies: lost GPUs, unsupported functions, timeouts, no driver, XIDs,
concurrent scrapes and a simulator mutating the fake while it is scraped."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from trainsignals.exporters.gpu.collector import CollectOptions
from trainsignals.exporters.gpu.fake_backend import FakeBackend, FakeGpu
from trainsignals.exporters.gpu.server import Exporter, build_exporter

from .gpu_samples import Samples, scrape, value

ERRORS = "trainsignals_gpu_exporter_nvml_errors_total"


def eventually(check: Callable[[], bool], within_s: float = 10.0) -> bool:
    """Wait for the XID thread (asynchronous by design); bounded."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return check()


def make(gpus: list[FakeGpu], **kwargs: object) -> tuple[FakeBackend, Exporter]:
    backend = FakeBackend(gpus, **kwargs)  # type: ignore[arg-type]
    return backend, build_exporter(
        backend, "n", {}, options=CollectOptions(init_retry_s=0.0, xid_poll_s=0.05)
    )


def test_lost_gpu_goes_down_and_the_others_keep_reporting() -> None:
    backend, ex = make([FakeGpu(0), FakeGpu(1), FakeGpu(2)])
    try:
        scrape(ex)
        backend.gpus[1].lost = True
        before = backend.calls.copy()
        s = scrape(ex)
        s2 = scrape(ex)
    finally:
        ex.close()
    assert value(s, "trainsignals_gpu_up", gpu="1") == 0
    assert value(s, "trainsignals_gpu_up", gpu="0") == 1
    assert value(s, "trainsignals_gpu_up", gpu="2") == 1
    assert value(s, "trainsignals_gpu_temperature_celsius", gpu="2") == 35.0
    assert value(s, "trainsignals_gpu_temperature_celsius", gpu="1") is None
    # the lost GPU keeps its identity labels, so `up` stays the same series
    assert value(s, "trainsignals_gpu_up", gpu="1", uuid="GPU-fake-0001") == 0
    assert (
        value(s, ERRORS, gpu="1", error="gpu_is_lost", function="nvmlDeviceGetUtilizationRates")
        == 1
    )
    assert value(s2, ERRORS, gpu="1", error="gpu_is_lost") == 2
    # one failed query per scrape, not one per metric
    assert sum(n - before[k] for k, n in backend.calls.items() if k[1] == 1) == 2


def test_lost_gpu_comes_back() -> None:
    backend, ex = make([FakeGpu(0)])
    try:
        backend.gpus[0].lost = True
        assert value(scrape(ex), "trainsignals_gpu_up", gpu="0") == 0
        backend.gpus[0].lost = False
        assert value(scrape(ex), "trainsignals_gpu_up", gpu="0") == 1
    finally:
        ex.close()


def test_not_supported_is_remembered_not_counted_and_not_down() -> None:
    backend, ex = make([FakeGpu(0, failing={"remapped_rows": "not_supported"})])
    try:
        s = [scrape(ex) for _ in range(3)][-1]
    finally:
        ex.close()
    assert value(s, "trainsignals_gpu_up", gpu="0") == 1
    assert value(s, "trainsignals_gpu_remapped_rows_pending", gpu="0") is None
    assert value(s, "trainsignals_gpu_fan_speed_ratio", gpu="0") is None  # SXM: no fans
    assert not [k for k in s if k[0] == ERRORS]
    assert backend.calls["remapped_rows", 0] == 1
    assert backend.calls["fan_speeds", 0] == 1
    assert backend.calls["nvlink", 0] == 1


def test_timeout_drops_the_metric_counts_an_error_and_is_retried() -> None:
    backend, ex = make([FakeGpu(0, failing={"ecc_errors": "timeout"}), FakeGpu(1)])
    try:
        scrape(ex)
        s = scrape(ex)
        backend.gpus[0].failing.clear()
        s3 = scrape(ex)
    finally:
        ex.close()
    assert value(s, "trainsignals_gpu_ecc_errors_total", gpu="0", error_type="corrected") is None
    assert value(s, ERRORS, gpu="0", function="nvmlDeviceGetTotalEccErrors", error="timeout") == 2
    assert value(s, "trainsignals_gpu_up", gpu="0") == 1  # not a core query
    assert value(s, "trainsignals_gpu_ecc_errors_total", gpu="1", error_type="corrected") == 0
    assert value(s3, "trainsignals_gpu_ecc_errors_total", gpu="0", error_type="corrected") == 0
    assert backend.calls["ecc_errors", 0] == 3


def test_core_query_failure_turns_up_to_zero() -> None:
    _backend, ex = make([FakeGpu(0, failing={"memory": "no_permission"})])
    try:
        s = scrape(ex)
    finally:
        ex.close()
    assert value(s, "trainsignals_gpu_up", gpu="0") == 0
    assert value(s, "trainsignals_gpu_memory_used_bytes", gpu="0") is None
    assert value(s, "trainsignals_gpu_temperature_celsius", gpu="0") == 35.0
    assert value(s, ERRORS, gpu="0", error="no_permission") == 1


def test_unexpected_exception_in_the_backend_does_not_fail_the_scrape() -> None:
    gpu = FakeGpu(0)
    _backend, ex = make([gpu])
    try:
        gpu.nvlink_up = None  # type: ignore[assignment]  # a simulator bug: list() of None
        s = scrape(ex)
    finally:
        ex.close()
    assert value(s, "trainsignals_gpu_up", gpu="0") == 1
    assert value(s, ERRORS, gpu="0", function="nvmlDeviceGetNvLinkState", error="unknown") == 1


def test_init_failure_serves_health_and_recovers_on_retry() -> None:
    backend, ex = make([FakeGpu(0)], init_error="driver_not_loaded")
    try:
        assert ex.collector.init_error is not None
        s = scrape(ex)
        assert value(s, "trainsignals_gpu_up", gpu="") == 0
        assert value(s, ERRORS, gpu="", function="nvmlInit", error="driver_not_loaded") >= 1
        assert value(s, "trainsignals_gpu_exporter_build_info", driver_version="") == 1
        backend.init_error = None  # the driver got loaded
        s = scrape(ex)
    finally:
        ex.close()
    assert value(s, "trainsignals_gpu_up", gpu="0") == 1
    assert (
        value(
            s,
            "trainsignals_gpu_exporter_build_info",
            driver_version="560.35.03",
            nvml_version="12.560.35.03",
        )
        == 1
    )


def test_xid_events_are_counted_per_gpu_and_code() -> None:
    backend, ex = make([FakeGpu(0), FakeGpu(1)])
    try:
        s = scrape(ex)
        # Not seeded by default: a code appears when first seen (the rules count a new series).
        assert value(s, "trainsignals_gpu_xid_errors_total", gpu="1", xid="79") is None
        backend.inject_xid(1, 79)
        backend.inject_xid(1, 79)
        backend.inject_xid(0, 31337)
        backend.inject_xid(7, 79)  # a GPU this exporter does not serve: ignored
        assert eventually(
            lambda: (
                value(scrape(ex), "trainsignals_gpu_xid_errors_total", gpu="0", xid="31337") == 1
            )
        )
        s = scrape(ex)
    finally:
        ex.close()
    assert value(s, "trainsignals_gpu_xid_errors_total", gpu="1", xid="79") == 2
    assert value(s, "trainsignals_gpu_xid_errors_total", gpu="0", xid="79") is None
    assert not [k for k in s if ("gpu", "7") in k[1]]


def test_xid_thread_survives_event_errors() -> None:
    backend, ex = make([FakeGpu(0)])
    try:
        backend.event_error = "unknown"
        assert eventually(
            lambda: (value(scrape(ex), ERRORS, function="nvmlEventSetWait_v2") or 0) >= 1
        )
        backend.event_error = None
        backend.inject_xid(0, 48)
        assert eventually(
            lambda: value(scrape(ex), "trainsignals_gpu_xid_errors_total", gpu="0", xid="48") == 1
        )
    finally:
        ex.close()


def test_concurrent_scrapes_are_serialised_and_complete() -> None:
    backend, ex = make([FakeGpu(i) for i in range(4)])
    results: list[Samples] = []
    failures: list[BaseException] = []

    def worker() -> None:
        try:
            for _ in range(10):
                results.append(scrape(ex))
        except BaseException as e:
            failures.append(e)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        ex.close()
    assert not failures
    assert len(results) == 80
    assert all(value(r, "trainsignals_gpu_up", gpu="3") == 1 for r in results)
    assert all(backend.calls["utilization", i] == 80 for i in range(4))


def test_scrapes_survive_a_simulator_mutating_the_fake() -> None:
    gpu = FakeGpu(0, nvlink_up=[True] * 4, fan_speed_ratios=[0.5])
    _backend, ex = make([gpu])
    stop = threading.Event()

    def simulator() -> None:
        n = 0
        while not stop.is_set():  # in-place mutations, the risky kind
            n += 1
            gpu.throttle_reasons.add("hw_slowdown")
            gpu.throttle_reasons.discard("hw_slowdown")
            gpu.nvlink_errors[n % 4, "replay"] = n
            gpu.nvlink_errors.pop(((n + 2) % 4, "replay"), None)
            gpu.processes.append((n, "p", n))
            if len(gpu.processes) > 50:
                gpu.processes.clear()
            gpu.energy_joules += 1.0

    thread = threading.Thread(target=simulator)
    thread.start()
    try:
        samples = [scrape(ex) for _ in range(200)]
    finally:
        stop.set()
        thread.join(10)
        ex.close()
    assert all(value(s, "trainsignals_gpu_up", gpu="0") == 1 for s in samples)
    assert not [k for s in samples for k in s if k[0] == ERRORS]
    energies = [value(s, "trainsignals_gpu_energy_joules_total", gpu="0") for s in samples]
    assert energies == sorted(energies)
