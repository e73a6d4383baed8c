"""Where GPU signals come from: trainsignals' own exporter or NVIDIA's dcgm-exporter.

Only the GPU recording rules differ between sources (dcgm-exporter's are in `dcgm_source.py`).
They normalise names, units and labels (`node`, `gpu`, `training_job`) so alerts and dashboards
read the same recorded series either way.
"""

from __future__ import annotations

from trainsignals.generator.signals.promql import Op, RuleContext, not_regex, regex
from trainsignals.generator.signals.xid_catalog import with_xid_action
from trainsignals.metrics.gpu_exporter import POWER_THROTTLE_REASONS, THERMAL_THROTTLE_REASONS

# MIG GPU instances, labelled as dcgm-exporter labels them; the own exporter does the same.
MIG_BY = "node, gpu, GPU_I_ID, GPU_I_PROFILE"
MIG_MEMORY = "mig:trainsignals_mig_memory_used:ratio"
MIG_BUSY = "mig:trainsignals_mig_busy:ratio"
MIG_TENSOR = "mig:trainsignals_mig_tensor_active:ratio"
NVLINK_ERRORS = "gpu:trainsignals_gpu_nvlink_errors:rate5m"


def either_positive(a: str, b: str) -> str:
    """Per GPU: `a` where it is positive, else `b` where that is, else `a` (or `b`) as is.

    `a or b` would not do: two series of the same GPU carry the same labels once aggregated
    by (node, gpu), so `or` keeps `a` (pending rows: 0) and drops `b` (a failed remap: 1).
    The fleet replay found the six silent-data-corruption GPUs missing for that reason.
    """
    return f"({a} > 0) or ({b} > 0) or {a} or {b}"


class GpuSource:
    """Recording expressions of one GPU metric source (its promtool test series:
    generator/testkit/gpu_series.py)."""

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

    def by_mig(self, expr: str) -> str:
        return f"max by ({MIG_BY}) ({expr})"

    def recordings(self) -> dict[str, str]:
        raise NotImplementedError

    def mig_recordings(self) -> dict[str, str]:
        """Per MIG GPU instance: memory used ratio, SM activity, tensor activity."""
        raise NotImplementedError

    def identity(self, seen_within: str | None = None) -> str:
        """1 per GPU with its `uuid`: joined into per-GPU alerts to name the board. With
        `seen_within` (a range), every GPU reported in that window (last_over_time)."""
        raise NotImplementedError


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

    def identity(self, seen_within: str | None = None) -> str:
        up = f"last_over_time({self._m('up')}[{seen_within}])" if seen_within else self._m("up")
        return f"group by (node, gpu, uuid) ({up})"

    def recordings(self) -> dict[str, str]:
        ctx, m = self.ctx, self._m
        thermal = "|".join(THERMAL_THROTTLE_REASONS)
        power = "|".join(POWER_THROTTLE_REASONS)
        critical = "|".join(str(c) for c in ctx.spec.objectives.xid_page_codes)
        w10 = ctx.range(600)
        return {
            "gpu:trainsignals_gpu_up:value": self.by_gpu(m("up")),
            "gpu:trainsignals_gpu_utilization:ratio": self.by_gpu(m("utilization_ratio")),
            # GPM (Hopper and newer) says how busy the SMs really were; NVML utilization only
            # says a kernel was running. Fall back to it where GPM is not supported.
            "gpu:trainsignals_gpu_busy:ratio": (
                f"{self.by_gpu(m('sm_active_ratio'))} or {self.by_gpu(m('utilization_ratio'))}"
            ),
            "gpu:trainsignals_gpu_tensor_active:ratio": self.by_gpu(m("tensor_active_ratio")),
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
            "gpu:trainsignals_gpu_xid_critical:seen10m": with_xid_action(
                self._xid_seen(m("xid_errors_total", xid=regex(critical)), w10)
            ),
            "gpu:trainsignals_gpu_xid_other:seen10m": with_xid_action(
                self._xid_seen(m("xid_errors_total", xid=not_regex(critical)), w10)
            ),
            "gpu:trainsignals_gpu_remapped_rows:pending": either_positive(
                self.by_gpu(m("remapped_rows_pending")), self.by_gpu(m("remapped_rows_failed"))
            ),
            "gpu:trainsignals_gpu_nvml_errors:rate15m": (
                f"sum by (node, gpu) (rate(trainsignals_gpu_exporter_nvml_errors_total"
                f"{ctx.raw()}[{ctx.range(900)}]))"
            ),
            # Always exported (per-link series only for faulty links): all links, all types.
            NVLINK_ERRORS: (
                f"sum by (node, gpu) (rate({m('nvlink_errors_all_links_total')}[{ctx.range(300)}]))"
            ),
        }

    def mig_recordings(self) -> dict[str, str]:
        # Separate metric names: the whole-GPU series never include an instance.
        m = self._m
        return {
            MIG_MEMORY: self.by_mig(
                f"{m('mig_memory_used_bytes')} / {m('mig_memory_total_bytes')}"
            ),
            MIG_BUSY: self.by_mig(m("mig_sm_active_ratio")),
            MIG_TENSOR: self.by_mig(m("mig_tensor_active_ratio")),
        }
