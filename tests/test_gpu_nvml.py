"""The real NVML backend on a real GPU (skipped where nvmlInit fails, e.g. no driver)."""

from __future__ import annotations

import pynvml
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from trainsignals.exporters.gpu.nvml_backend import NvmlBackend
from trainsignals.exporters.gpu.server import build_exporter


def _nvml_error() -> str | None:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        return f"nvmlInit failed: {e}"
    pynvml.nvmlShutdown()
    return None


pytestmark = [
    pytest.mark.nvml,
    pytest.mark.skipif(_nvml_error() is not None, reason=str(_nvml_error())),
]


def test_real_gpus_are_up_with_plausible_values() -> None:
    ex = build_exporter(NvmlBackend(), "n", {})
    try:
        assert ex.collector.init_error is None
        text = generate_latest(ex.registry).decode()
        text2 = generate_latest(ex.registry).decode()
    finally:
        ex.close()
    samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
    ups = [s for s in samples if s.name == "trainsignals_gpu_up"]
    assert ups and all(s.value == 1 for s in ups)
    by_name = {s.name: s for s in samples}
    assert 0 <= by_name["trainsignals_gpu_utilization_ratio"].value <= 1
    assert by_name["trainsignals_gpu_memory_total_bytes"].value > 2**30
    assert 1 < by_name["trainsignals_gpu_power_limit_watts"].value < 5000
    assert 1e8 < by_name["trainsignals_gpu_sm_clock_max_hertz"].value < 1e10
    assert by_name["trainsignals_gpu_energy_joules_total"].value > 0
    assert by_name["trainsignals_gpu_exporter_build_info"].labels["driver_version"]
    assert "trainsignals_gpu_up" in text2
