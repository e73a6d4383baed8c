"""NVIDIA dcgm-exporter as shipped: its default counters, old and new field names, label variants.

Every signal works from the default counters of current releases (`etc/default-counters.csv`);
optional counters, where exported, refine some of them. The README ("dcgm-exporter as shipped")
has the table of which counter feeds which recorded series.

Labels: the GPU's host comes as `Hostname` (releases up to 4.5.3-4.8.2) or `hostname` (after
NVIDIA/dcgm-exporter#655); either becomes `node` (a `node` target label stays when neither is
set). `gpu`, `UUID`/`uuid`, `device`, `modelName`, `pci_bus_id`, `DCGM_FI_DRIVER_VERSION` and the
Kubernetes `pod`/`namespace`/`container` are aggregated away (`by (node, gpu)`), so a driver
upgrade or a pod change does not split a GPU's series.

MIG: a GPU in MIG mode is reported per GPU instance, labelled `GPU_I_ID`/`GPU_I_PROFILE`
(absent on whole GPUs), with or without series of the whole GPU (NVIDIA/dcgm-exporter#561).
GPU-wide fields (temperature, power, clocks, XID, remapped rows) repeat the GPU's value on each
instance, so `max by (node, gpu)` counts them once; sums over GPU-wide counters take one series
per GPU. Per-instance fields (framebuffer, PROF_*) are read from whole-GPU series only, memory
adds up the instances where the whole GPU has none; `mig_recordings` keeps each instance.
"""

from __future__ import annotations

from trainsignals.generator.signals.gpu_sources import (
    MIG_BUSY,
    MIG_MEMORY,
    MIG_TENSOR,
    NVLINK_ERRORS,
    GpuSource,
    either_positive,
)
from trainsignals.generator.signals.promql import Op
from trainsignals.generator.signals.xid_catalog import with_xid_action

# NVML clocks-event (throttle) reason bits: 0x20 sw thermal, 0x40 hw thermal slowdown;
# 0x4 sw power cap, 0x80 hw power brake.
THERMAL_BITS = (5, 6)
POWER_BITS = (2, 7)
# Inferred throttling from default counters only (see the table above).
CLOCK_DEFICIT = 0.9  # SM clock below this share of the job's fastest GPU
BUSY_PERCENT = 50  # ... while GPU_UTIL is at least this
THERMAL_MARGIN_CELSIUS = 5  # ... and this close to gpu_temperature_max_celsius: thermal
# Optional per-GPU NVLink error counters (all links; commented out in the default counters).
NVLINK_ERROR_FIELDS = ("CRC_FLIT", "CRC_DATA", "REPLAY", "RECOVERY")
# Per GPU and code, the XIDs that arrived in the last 10 minutes (see DcgmExporter._new_xid).
NEW_XID = "gpu:trainsignals_gpu_xid:new10m"


class DcgmExporter(GpuSource):
    """NVIDIA dcgm-exporter (default counters): percent, MiB, MHz, labels Hostname/gpu."""

    name = "dcgm"
    node_label = "Hostname"
    reports_gpu_up = False
    reports_nvml_errors = False
    presence_signal = "utilization"

    def _raw(self, field: str, instances: bool | None = None) -> str:
        """A field's series: all of them (None), MIG instances only (True) or whole GPUs."""
        if instances is None:
            return f"DCGM_FI_{field}{self.ctx.raw()}"
        return f"DCGM_FI_{field}{self.ctx.raw(GPU_I_ID=Op('!=', '') if instances else '')}"

    @staticmethod
    def _node(expr: str) -> str:
        # Hostname (4.x releases) or hostname (after #655); empty values keep a `node` target label.
        inner = f'label_replace({expr}, "node", "$1", "Hostname", "(.+)")'
        return f'label_replace({inner}, "node", "$1", "hostname", "(.+)")'

    def _m(self, field: str, instances: bool | None = None) -> str:
        """A per-GPU field (DEV_... or PROF_...), `node` set from the host label."""
        return self._node(self._raw(field, instances))

    def _whole(self, field: str) -> str:
        """A per-instance field of whole GPUs only (MIG instances would mix in otherwise)."""
        return self.by_gpu(self._m(field, instances=False))

    def _once_per_gpu(self, fn: str, field: str, window: str) -> str:
        """fn() of a GPU-wide counter: summed over whole-GPU series (label variants), else
        one of the MIG instances' copies (each repeats the GPU's count)."""
        whole = self.by_gpu_sum(self._node(f"{fn}({self._raw(field, False)}[{window}])"))
        copies = self.by_gpu(self._node(f"{fn}({self._raw(field, True)}[{window}])"))
        return f"{whole} or {copies}"

    def _nvlink_errors(self) -> str:
        # Each optional counter may be absent: label each rate by its field so `or` keeps them
        # all, then add per GPU.
        w5 = self.ctx.range(300)
        rates = " or ".join(
            f"label_replace({self._once_per_gpu('rate', f'DEV_NVLINK_{f}_ERROR_COUNT_TOTAL', w5)}"
            f', "field", "{f}", "", "")'
            for f in NVLINK_ERROR_FIELDS
        )
        return f"sum by (node, gpu) ({rates})"

    def _gpu(self, field: str, scale: str = "") -> str:
        return self.by_gpu(f"{self._m(field)}{scale}")

    def _bits(self, field: str, bits: tuple[int, ...]) -> str:
        # PromQL has no bitwise AND: bit b of x is floor(x / 2^b) % 2.
        reasons = self._m(field)
        terms = " + ".join(f"(floor({reasons} / {2**b}) % 2)" for b in bits)
        return self.by_gpu(f"clamp_max({terms}, 1)")

    def _throttle(self, bits: tuple[int, ...], thermal: bool) -> str:
        """Reason bits when an optional reasons field is exported, else inferred from clocks."""
        clock = self._gpu("DEV_SM_CLOCK")
        fastest = f"scalar(max({self._raw('DEV_SM_CLOCK')}))"
        slow = f"({clock} < bool {CLOCK_DEFICIT} * {fastest})"
        busy = f"({self._gpu('DEV_GPU_UTIL')} >= bool {BUSY_PERCENT})"
        limit = self.ctx.spec.objectives.gpu_temperature_max_celsius - THERMAL_MARGIN_CELSIUS
        hot = f"({self._gpu('DEV_GPU_TEMP')} >= bool {limit:g})"
        cause = hot if thermal else f"(1 - {hot})"
        return (
            f"{self._bits('DEV_CLOCKS_EVENT_REASONS', bits)} or "
            f"{self._bits('DEV_CLOCK_THROTTLE_REASONS', bits)} or "
            f"{slow} * {busy} * {cause}"
        )

    def _new_xid(self, window: str) -> str:
        """One series per GPU and XID code that arrived within `window`, labelled `xid`.

        DCGM_FI_DEV_XID_ERRORS holds the last XID's code until the exporter restarts
        (NVIDIA/dcgm-exporter#500, #190): its value alone would fire for hours after one XID.
        New is a changed value, or a series born non-zero (4.x adds `err_code`, the code, as a
        label); the value is the code. A repeat of the same code is invisible in that gauge, so
        the optional DCGM_EXP_XID_ERRORS_COUNT (XIDs per `xid` within its own window,
        dcgm-exporter#239) counts too where it is exported. No subquery: one read per series.
        """
        gauge = self._raw("DEV_XID_ERRORS")
        changed = (
            f"({gauge} > 0) and "
            f"(changes({gauge}[{window}]) > 0 or {gauge} unless {gauge} offset {window})"
        )
        coded = f'label_replace({self._node(changed)}, "xid", "$1", "err_code", "(.+)")'
        counted = self._node(f"DCGM_EXP_XID_ERRORS_COUNT{self.ctx.raw()} > 0")
        return f"max by (node, gpu, xid) ({coded}) or max by (node, gpu, xid) ({counted})"

    def _xid_split(self, codes: tuple[int, ...] | list[int]) -> tuple[str, str]:
        """(critical, other): the new XIDs among `codes` and the rest, by `xid` label, or by
        value where an exporter before 4.x gave no label (critical ones get the label from
        the code). Both read only the small recorded series."""
        alternation = "|".join(map(str, codes))

        def sel(**extra: str | Op) -> str:
            return NEW_XID + self.ctx.recorded(**extra)

        unlabelled = sel(xid="")
        critical = " or ".join(
            [sel(xid=Op("=~", alternation))]
            + [f'label_replace({unlabelled} == {c}, "xid", "{c}", "", "")' for c in codes]
        )
        other = (
            f"{sel(xid=Op('!~', alternation + '|'))} or "
            + unlabelled
            + "".join(f" != {c}" for c in codes)
        )
        return critical, other

    def recordings(self) -> dict[str, str]:
        ctx, m, gpu = self.ctx, self._m, self._gpu
        w10 = ctx.range(600)
        # The new XIDs are recorded first (one read of the gauge); the split reads them.
        critical, other = self._xid_split(ctx.spec.objectives.xid_page_codes)
        uncorrectable = " or ".join(
            f"({self._once_per_gpu('increase', field, w10)})"
            for field in ("DEV_ECC_DBE_VOL_TOTAL", "DEV_UNCORRECTABLE_REMAPPED_ROWS")
        )
        whole = self._whole
        # Real activity: SM_ACTIVE (optional), else GR_ENGINE_ACTIVE (default), else utilization.
        busy = " or ".join(
            (whole("PROF_SM_ACTIVE"), whole("PROF_GR_ENGINE_ACTIVE"), gpu("DEV_GPU_UTIL", " / 100"))
        )
        # Framebuffer of a GPU in MIG mode without whole-GPU series: its instances' sum.
        used = self.by_gpu_sum(m("DEV_FB_USED", instances=True))
        free = self.by_gpu_sum(m("DEV_FB_FREE", instances=True))
        return {
            # dcgm-exporter drops a lost GPU's series; presence means up. NVML has no
            # utilization in MIG mode: there, the GPU's instances mark it present.
            "gpu:trainsignals_gpu_up:value": (
                f"{gpu('DEV_GPU_UTIL', ' * 0 + 1')} or "
                f"{self.by_gpu(m('DEV_FB_USED', True) + ' * 0 + 1')}"
            ),
            "gpu:trainsignals_gpu_utilization:ratio": gpu("DEV_GPU_UTIL", " / 100"),
            "gpu:trainsignals_gpu_busy:ratio": busy,
            "gpu:trainsignals_gpu_tensor_active:ratio": whole("PROF_PIPE_TENSOR_ACTIVE"),
            "gpu:trainsignals_gpu_dram_active:ratio": whole("PROF_DRAM_ACTIVE"),
            "gpu:trainsignals_gpu_memory_used:bytes": (
                f"{whole('DEV_FB_USED')} * 1048576 or {used} * 1048576"
            ),
            "gpu:trainsignals_gpu_memory_used:ratio": (
                self.by_gpu(
                    f"{m('DEV_FB_USED', False)} / "
                    f"({m('DEV_FB_USED', False)} + {m('DEV_FB_FREE', False)})"
                )
                + f" or {used} / ({used} + {free})"
            ),
            "gpu:trainsignals_gpu_power:watts": gpu("DEV_POWER_USAGE"),
            "gpu:trainsignals_gpu_temperature:celsius": gpu("DEV_GPU_TEMP"),
            "gpu:trainsignals_gpu_sm_clock:hertz": gpu("DEV_SM_CLOCK", " * 1000000"),
            "gpu:trainsignals_gpu_thermal_throttle:active": self._throttle(THERMAL_BITS, True),
            "gpu:trainsignals_gpu_power_throttle:active": self._throttle(POWER_BITS, False),
            "gpu:trainsignals_gpu_ecc_uncorrected:increase10m": uncorrectable,
            NEW_XID: self._new_xid(w10),
            "gpu:trainsignals_gpu_xid_critical:seen10m": with_xid_action(critical),
            "gpu:trainsignals_gpu_xid_other:seen10m": with_xid_action(other),
            "gpu:trainsignals_gpu_remapped_rows:pending": either_positive(
                gpu("DEV_ROW_REMAP_PENDING"), gpu("DEV_ROW_REMAP_FAILURE")
            ),
            NVLINK_ERRORS: self._nvlink_errors(),
        }

    def mig_recordings(self) -> dict[str, str]:
        m = self._m

        def mig(field: str) -> str:
            return self.by_mig(m(field, instances=True))

        used, free = m("DEV_FB_USED", True), m("DEV_FB_FREE", True)
        return {
            MIG_MEMORY: self.by_mig(f"{used} / ({used} + {free})"),
            # SM_ACTIVE (optional) where exported, else GR_ENGINE_ACTIVE (default counters).
            MIG_BUSY: f"{mig('PROF_SM_ACTIVE')} or {mig('PROF_GR_ENGINE_ACTIVE')}",
            MIG_TENSOR: mig("PROF_PIPE_TENSOR_ACTIVE"),
        }

    def identity(self, seen_within: str | None = None) -> str:
        def field(name: str, instances: bool | None = None) -> str:
            raw = self._raw(name, instances)
            return self._node(f"last_over_time({raw}[{seen_within}])" if seen_within else raw)

        present = f"{field('DEV_GPU_UTIL')} or {field('DEV_FB_USED', True)}"
        uuid = f'label_replace({present}, "uuid", "$1", "UUID", "(.+)")'
        return f"group by (node, gpu, uuid) ({uuid})"
