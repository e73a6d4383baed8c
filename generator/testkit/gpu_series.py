"""The input series a GPU metric source exports, for the generated promtool tests.

The recording rules of each source (generator/signals/gpu_sources.py, dcgm_source.py) read its
own names, units and labels; these functions write a GPU's test samples in exactly those, so
one fault case (per-signal values in the own exporter's units) tests either source.
"""

from __future__ import annotations

from trainsignals.generator.signals.dcgm_source import DcgmExporter
from trainsignals.generator.signals.gpu_sources import GpuSource
from trainsignals.generator.testkit.input_series import RawSeries
from trainsignals.generator.testkit.series_notation import STALE
from trainsignals.metrics.gpu_exporter import POWER_THROTTLE_REASONS, THERMAL_THROTTLE_REASONS


def test_uuid(node: str, gpu: int) -> str:
    """The UUID a GPU carries in the generated tests."""
    return f"GPU-{node}-{gpu}"


def test_series(
    source: GpuSource, signal: str, node: str, gpu: int, values: list
) -> list[RawSeries]:
    """The series of one GPU signal (`values`: per interval, in the own exporter's units)."""
    if isinstance(source, DcgmExporter):
        return _dcgm_series(source, signal, node, gpu, values)
    return _own_series(signal, _own_labels(source, node, gpu), values)


def gpu_test_series(
    source: GpuSource, node: str, gpu: int, signals: dict[str, list]
) -> list[RawSeries]:
    """Input series of one GPU for several signals at once."""
    if isinstance(source, DcgmExporter):
        return _dcgm_gpu_series(source, node, gpu, signals)
    return _each(source, node, gpu, signals)


def _each(source: GpuSource, node: str, gpu: int, signals: dict[str, list]) -> list[RawSeries]:
    series: list[RawSeries] = []
    if isinstance(source, DcgmExporter):
        for name, values in signals.items():
            series += _dcgm_series(source, name, node, gpu, values)
        return series
    # The GPU's labels made once for all its signals' series (they never change them).
    labels = _own_labels(source, node, gpu)
    for name, values in signals.items():
        series += _own_series(name, labels, values)
    return series


def _own_labels(source: GpuSource, node: str, gpu: int) -> dict[str, str]:
    labels = {**source.ctx.spec.selector_labels, "node": node, "gpu": str(gpu)}
    labels["uuid"] = test_uuid(node, gpu)
    return labels


def _own_series(signal: str, labels: dict[str, str], values: list) -> list[RawSeries]:
    """The own exporter's series of one signal of the GPU with these labels (_own_labels)."""
    if signal == "memory_used_ratio":
        total = 80 * 2**30
        first = values[0] if values else None
        if type(first) is float and first and values.count(first) == len(values):
            # One non-zero ratio throughout (most tests; no gap, no sign of zero to keep):
            # the same samples, without a comparison per minute.
            used, totals = [first * total] * len(values), [total] * len(values)
        else:
            used = [v if v is None or v == STALE else v * total for v in values]
            totals = [v if v is None or v == STALE else total for v in values]
        return [
            RawSeries("trainsignals_gpu_memory_used_bytes", labels, used),
            RawSeries("trainsignals_gpu_memory_total_bytes", labels, totals),
        ]
    if signal in ("thermal_throttle", "power_throttle"):
        reason = (
            THERMAL_THROTTLE_REASONS if signal == "thermal_throttle" else POWER_THROTTLE_REASONS
        )[0]
        return [RawSeries("trainsignals_gpu_throttle_active", {**labels, "reason": reason}, values)]
    if signal.startswith("xid:"):
        return [
            RawSeries(
                "trainsignals_gpu_xid_errors_total",
                {**labels, "xid": signal.removeprefix("xid:")},
                values,
            )
        ]
    if signal == "ecc_uncorrected":
        labels = {**labels, "error_type": "uncorrected"}
    if signal == "nvml_errors":
        labels = {**labels, "function": "nvmlDeviceGetPowerUsage", "error": "timeout"}
    return [RawSeries(_OWN_NAMES[signal], labels, values)]


# The own exporter's series of the signals that are one series each, as they are.
_OWN_NAMES = {
    "up": "trainsignals_gpu_up",
    "utilization": "trainsignals_gpu_utilization_ratio",
    "temperature": "trainsignals_gpu_temperature_celsius",
    "sm_clock": "trainsignals_gpu_sm_clock_hertz",
    "remapped_rows_pending": "trainsignals_gpu_remapped_rows_pending",
    "remapped_rows_failed": "trainsignals_gpu_remapped_rows_failed",
    "ecc_uncorrected": "trainsignals_gpu_ecc_errors_total",
    "nvml_errors": "trainsignals_gpu_exporter_nvml_errors_total",
}


def _dcgm_labels(source: GpuSource, node: str, gpu: int) -> dict[str, str]:
    labels = {**source.ctx.spec.selector_labels, "Hostname": node, "gpu": str(gpu)}
    return labels | {"UUID": test_uuid(node, gpu)}


def _dcgm_gpu_series(
    source: GpuSource, node: str, gpu: int, signals: dict[str, list]
) -> list[RawSeries]:
    # Thermal and power throttling share one bitmask series: add their bits.
    signals = dict(signals)
    thermal = signals.pop("thermal_throttle", None)
    power = signals.pop("power_throttle", None)
    series = _each(source, node, gpu, signals)
    if thermal is not None or power is not None:
        length = len(thermal if thermal is not None else power)
        thermal = thermal or [0] * length
        power = power or [0] * length
        mask = [0x20 * (t or 0) + 0x4 * (p or 0) for t, p in zip(thermal, power, strict=True)]
        series.append(
            RawSeries("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", _dcgm_labels(source, node, gpu), mask)
        )
    return series


def _dcgm_series(
    source: GpuSource, signal: str, node: str, gpu: int, values: list
) -> list[RawSeries]:
    labels = _dcgm_labels(source, node, gpu)

    def scaled(factor: float, offset: float = 0.0) -> list:
        return [v if v is None or v == STALE else offset + v * factor for v in values]

    if signal == "memory_used_ratio":
        total = 81559
        return [
            RawSeries("DCGM_FI_DEV_FB_USED", labels, scaled(total)),
            RawSeries(
                "DCGM_FI_DEV_FB_FREE",
                labels,
                scaled(-total, offset=total),
            ),
        ]
    if signal.startswith("xid:"):
        code = signal.removeprefix("xid:")
        # The gauge shows the code once an event arrived (values are event counts here).
        return [
            RawSeries(
                "DCGM_FI_DEV_XID_ERRORS",
                {**labels, "err_code": code},
                [None if v is None else (int(code) if v else 0) for v in values],
            )
        ]
    name, factor = {
        "utilization": ("DCGM_FI_DEV_GPU_UTIL", 100.0),
        "temperature": ("DCGM_FI_DEV_GPU_TEMP", 1.0),
        "sm_clock": ("DCGM_FI_DEV_SM_CLOCK", 1e-6),  # MHz
        "remapped_rows_pending": ("DCGM_FI_DEV_ROW_REMAP_PENDING", 1.0),
        "remapped_rows_failed": ("DCGM_FI_DEV_ROW_REMAP_FAILURE", 1.0),
        "ecc_uncorrected": ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", 1.0),
    }[signal]
    return [RawSeries(name, labels, scaled(factor))]
