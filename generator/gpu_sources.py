"""Where GPU signals come from: trainsignals' own exporter or NVIDIA's dcgm-exporter.

Only the GPU recording rules differ between sources. They normalise names, units and labels
(`node`, `gpu`, `training_job`) so alerts and dashboards read the same recorded series either way.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainsignals.metric_catalog import POWER_THROTTLE_REASONS, THERMAL_THROTTLE_REASONS

from .promql import Op, RuleContext, matchers, not_regex, regex


@dataclass(frozen=True)
class RawSeries:
    """One input series for a promtool test: name, labels and per-interval values."""

    name: str
    labels: dict[str, str]
    values: list[float | None]

    def selector(self) -> str:
        return self.name + matchers(self.labels)


class GpuSource:
    """Recording expressions and test series of one GPU metric source."""

    name = ""
    node_label = "node"
    reports_gpu_up = True  # does the source say "this GPU is lost", or does it just vanish?
    reports_nvml_errors = True
    # The test signal whose series mark a GPU as present (dcgm has no "up" of its own).
    presence_signal = "up"

    def __init__(self, ctx: RuleContext) -> None:
        self.ctx = ctx

    def by_gpu(self, expr: str) -> str:
        return f"max by (node, gpu) ({expr})"

    def by_gpu_sum(self, expr: str) -> str:
        return f"sum by (node, gpu) ({expr})"

    def recordings(self) -> dict[str, str]:
        raise NotImplementedError

    def test_series(self, signal: str, node: str, gpu: int, values: list) -> list[RawSeries]:
        raise NotImplementedError

    def gpu_test_series(self, node: str, gpu: int, signals: dict[str, list]) -> list[RawSeries]:
        """Input series of one GPU for several signals at once."""
        return [
            s for name, values in signals.items() for s in self.test_series(name, node, gpu, values)
        ]


class OwnExporter(GpuSource):
    name = "trainsignals"

    def _m(self, metric: str, **extra: str | Op) -> str:
        return f"trainsignals_gpu_{metric}{self.ctx.raw(**extra)}"

    @staticmethod
    def _xid_seen(counter: str, window: str) -> str:
        # An XID counter series is born with its first event, which increase() cannot see;
        # a series that did not exist one window ago counts as an event too.
        return (
            f"sum by (node, gpu, xid) (increase({counter}[{window}])) > 0 or "
            f"max by (node, gpu, xid) ({counter} unless {counter} offset {window})"
        )

    def recordings(self) -> dict[str, str]:
        ctx, m = self.ctx, self._m
        thermal = "|".join(THERMAL_THROTTLE_REASONS)
        power = "|".join(POWER_THROTTLE_REASONS)
        critical = "|".join(str(c) for c in ctx.spec.objectives.xid_page_codes)
        w10 = ctx.range(600)
        return {
            "gpu:trainsignals_gpu_up:value": self.by_gpu(m("up")),
            "gpu:trainsignals_gpu_utilization:ratio": self.by_gpu(m("utilization_ratio")),
            "gpu:trainsignals_gpu_memory_used:bytes": self.by_gpu(m("memory_used_bytes")),
            "gpu:trainsignals_gpu_memory_used:ratio": self.by_gpu(
                f"{m('memory_used_bytes')} / {m('memory_total_bytes')}"
            ),
            "gpu:trainsignals_gpu_power:watts": self.by_gpu(m("power_watts")),
            "gpu:trainsignals_gpu_temperature:celsius": self.by_gpu(m("temperature_celsius")),
            "gpu:trainsignals_gpu_sm_clock:hertz": self.by_gpu(m("sm_clock_hertz")),
            "gpu:trainsignals_gpu_thermal_throttle:active": self.by_gpu(
                m("throttle_active", reason=regex(thermal))
            ),
            "gpu:trainsignals_gpu_power_throttle:active": self.by_gpu(
                m("throttle_active", reason=regex(power))
            ),
            "gpu:trainsignals_gpu_ecc_uncorrected:increase10m": (
                f"sum by (node, gpu) (increase({m('ecc_errors_total', error_type='uncorrected')}"
                f"[{w10}]))"
            ),
            "gpu:trainsignals_gpu_xid_critical:seen10m": self._xid_seen(
                m("xid_errors_total", xid=regex(critical)), w10
            ),
            "gpu:trainsignals_gpu_xid_other:seen10m": self._xid_seen(
                m("xid_errors_total", xid=not_regex(critical)), w10
            ),
            "gpu:trainsignals_gpu_remapped_rows:pending": self.by_gpu(
                f"{m('remapped_rows_pending')} or {m('remapped_rows_failed')}"
            ),
            "gpu:trainsignals_gpu_nvml_errors:rate15m": (
                f"sum by (node, gpu) (rate(trainsignals_gpu_exporter_nvml_errors_total"
                f"{ctx.raw()}[{ctx.range(900)}]))"
            ),
        }

    def test_series(self, signal: str, node: str, gpu: int, values: list) -> list[RawSeries]:
        labels = {**self.ctx.spec.selector_labels, "node": node, "gpu": str(gpu)}
        simple = {
            "up": "trainsignals_gpu_up",
            "utilization": "trainsignals_gpu_utilization_ratio",
            "memory_used_ratio": None,
            "temperature": "trainsignals_gpu_temperature_celsius",
            "remapped_rows_pending": "trainsignals_gpu_remapped_rows_pending",
            "ecc_uncorrected": "trainsignals_gpu_ecc_errors_total",
            "nvml_errors": "trainsignals_gpu_exporter_nvml_errors_total",
        }
        if signal == "memory_used_ratio":
            total = 80 * 2**30
            return [
                RawSeries(
                    "trainsignals_gpu_memory_used_bytes",
                    labels,
                    [None if v is None else v * total for v in values],
                ),
                RawSeries("trainsignals_gpu_memory_total_bytes", labels, [total] * len(values)),
            ]
        if signal in ("thermal_throttle", "power_throttle"):
            reason = (
                THERMAL_THROTTLE_REASONS if signal == "thermal_throttle" else POWER_THROTTLE_REASONS
            )[0]
            return [
                RawSeries("trainsignals_gpu_throttle_active", {**labels, "reason": reason}, values)
            ]
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
        return [RawSeries(simple[signal], labels, values)]


class DcgmExporter(GpuSource):
    """NVIDIA dcgm-exporter (default counters): percent, MiB, MHz, labels Hostname/gpu."""

    name = "dcgm"
    node_label = "Hostname"
    reports_gpu_up = False
    reports_nvml_errors = False
    presence_signal = "utilization"

    def _raw(self, field: str) -> str:
        return f"DCGM_FI_DEV_{field}{self.ctx.raw()}"

    @staticmethod
    def _node(expr: str) -> str:
        return f'label_replace({expr}, "node", "$1", "Hostname", "(.*)")'

    def _m(self, field: str) -> str:
        return self._node(self._raw(field))

    def _bits(self, bits: tuple[int, ...]) -> str:
        # PromQL has no bitwise AND: bit b of x is floor(x / 2^b) % 2.
        reasons = self._m("CLOCK_THROTTLE_REASONS")
        terms = " + ".join(f"(floor({reasons} / {2**b}) % 2)" for b in bits)
        return f"clamp_max({terms}, 1)"

    def recordings(self) -> dict[str, str]:
        ctx, m = self.ctx, self._m
        w10 = ctx.range(600)
        step = ctx.range(60)
        xid = m("XID_ERRORS")
        critical = " or ".join(f"{xid} == {c}" for c in ctx.spec.objectives.xid_page_codes)
        return {
            # dcgm-exporter drops a lost GPU's series; presence means up.
            "gpu:trainsignals_gpu_up:value": self.by_gpu(f"{m('GPU_UTIL')} * 0 + 1"),
            "gpu:trainsignals_gpu_utilization:ratio": self.by_gpu(f"{m('GPU_UTIL')} / 100"),
            "gpu:trainsignals_gpu_memory_used:bytes": self.by_gpu(f"{m('FB_USED')} * 1048576"),
            "gpu:trainsignals_gpu_memory_used:ratio": self.by_gpu(
                f"{m('FB_USED')} / ({m('FB_USED')} + {m('FB_FREE')})"
            ),
            "gpu:trainsignals_gpu_power:watts": self.by_gpu(m("POWER_USAGE")),
            "gpu:trainsignals_gpu_temperature:celsius": self.by_gpu(m("GPU_TEMP")),
            "gpu:trainsignals_gpu_sm_clock:hertz": self.by_gpu(f"{m('SM_CLOCK')} * 1000000"),
            # Throttle bitmask: 0x20 sw thermal, 0x40 hw thermal; 0x4 sw power cap,
            # 0x80 hw power brake (NVML clocks-event reasons).
            "gpu:trainsignals_gpu_thermal_throttle:active": self.by_gpu(self._bits((5, 6))),
            "gpu:trainsignals_gpu_power_throttle:active": self.by_gpu(self._bits((2, 7))),
            "gpu:trainsignals_gpu_ecc_uncorrected:increase10m": self.by_gpu_sum(
                self._node(f"increase({self._raw('ECC_DBE_VOL_TOTAL')}[{w10}])")
            ),
            # DCGM_FI_DEV_XID_ERRORS holds the last XID code; the recorded value is that code.
            "gpu:trainsignals_gpu_xid_critical:seen10m": (
                f"max by (node, gpu) (max_over_time(({critical})[{w10}:{step}]))"
            ),
            "gpu:trainsignals_gpu_xid_other:seen10m": (
                f"max by (node, gpu) (max_over_time(({xid} > 0 unless ({critical}))[{w10}:{step}]))"
            ),
            "gpu:trainsignals_gpu_remapped_rows:pending": self.by_gpu(m("ROW_REMAP_FAILURE")),
        }

    def gpu_test_series(self, node: str, gpu: int, signals: dict[str, list]) -> list[RawSeries]:
        # Thermal and power throttling share one bitmask series: add their bits.
        signals = dict(signals)
        thermal = signals.pop("thermal_throttle", None)
        power = signals.pop("power_throttle", None)
        series = super().gpu_test_series(node, gpu, signals)
        if thermal is not None or power is not None:
            length = len(thermal if thermal is not None else power)
            thermal = thermal or [0] * length
            power = power or [0] * length
            mask = [0x20 * (t or 0) + 0x4 * (p or 0) for t, p in zip(thermal, power, strict=True)]
            labels = {**self.ctx.spec.selector_labels, "Hostname": node, "gpu": str(gpu)}
            series.append(RawSeries("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", labels, mask))
        return series

    def test_series(self, signal: str, node: str, gpu: int, values: list) -> list[RawSeries]:
        labels = {**self.ctx.spec.selector_labels, "Hostname": node, "gpu": str(gpu)}

        def scaled(factor: float) -> list:
            return [None if v is None else v * factor for v in values]

        if signal == "memory_used_ratio":
            total = 81559
            return [
                RawSeries("DCGM_FI_DEV_FB_USED", labels, scaled(total)),
                RawSeries(
                    "DCGM_FI_DEV_FB_FREE",
                    labels,
                    [None if v is None else total - v * total for v in values],
                ),
            ]
        if signal.startswith("xid:"):
            code = int(signal.removeprefix("xid:"))
            # The gauge shows the code once an event arrived (values are event counts here).
            return [
                RawSeries(
                    "DCGM_FI_DEV_XID_ERRORS",
                    labels,
                    [None if v is None else (code if v else 0) for v in values],
                )
            ]
        name, factor = {
            "utilization": ("DCGM_FI_DEV_GPU_UTIL", 100.0),
            "temperature": ("DCGM_FI_DEV_GPU_TEMP", 1.0),
            "remapped_rows_pending": ("DCGM_FI_DEV_ROW_REMAP_FAILURE", 1.0),
            "ecc_uncorrected": ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 1.0),
        }[signal]
        return [RawSeries(name, labels, scaled(factor))]


def gpu_source(ctx: RuleContext) -> GpuSource:
    return {"trainsignals": OwnExporter, "dcgm": DcgmExporter}[ctx.spec.gpu_metrics](ctx)
