"""dcgm-exporter's names for the GPU signals, for specs with `gpu_metrics: dcgm`."""

from __future__ import annotations

from trainsignals.metrics.model import Component, Kind, Metric

# dcgm-exporter's names for the same signals, for specs with `gpu_metrics: dcgm`.
# Names and units from NVIDIA/dcgm-exporter's etc/default-counters.csv (4.5.3-4.8.2); "optional"
# marks fields that are commented out there (docs/dcgm-exporter.md says what each adds). Labels
# from its rendermetrics template: gpu, UUID, pci_bus_id, device, modelName, Hostname (hostname
# after #655), plus pod/namespace/container on Kubernetes, and GPU_I_ID/GPU_I_PROFILE on the series
# of a MIG GPU instance (absent on whole GPUs).
DCGM_LABELS = ("Hostname", "gpu", "UUID", "device", "modelName", "pci_bus_id")
_DCGM_EXTRA_LABELS = {
    "DCGM_FI_DEV_XID_ERRORS": ("err_code",),
    "DCGM_EXP_XID_ERRORS_COUNT": ("xid", "window_size_in_ms"),
}
DCGM_METRICS: tuple[Metric, ...] = tuple(
    Metric(
        name,
        Kind.COUNTER if kind == "counter" else Kind.GAUGE,
        Component.DCGM_EXPORTER,
        (*DCGM_LABELS, *_DCGM_EXTRA_LABELS.get(name, ())),
        help_,
    )
    for name, kind, help_ in (
        ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization in percent."),
        ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization in percent."),
        ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used, MiB."),
        ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free, MiB."),
        ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw, W."),
        ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Energy since boot, mJ."),
        ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature, C."),
        ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock, MHz."),
        ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock, MHz."),
        ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge", "Optional: clock-event reasons bitmask."),
        (
            "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
            "gauge",
            "Optional: the same bitmask, DCGM 3 name.",
        ),
        ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error seen (err_code)."),
        (
            "DCGM_EXP_XID_ERRORS_COUNT",
            "gauge",
            "Optional: XID errors per code within the exporter's window (xid-count-window-size).",
        ),
        (
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
            "counter",
            "Optional: volatile double-bit (uncorrectable) ECC errors.",
        ),
        (
            "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
            "counter",
            "Optional: volatile single-bit (corrected) ECC errors.",
        ),
        (
            "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
            "counter",
            "Rows remapped for uncorrectable errors.",
        ),
        (
            "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
            "counter",
            "Rows remapped for correctable errors.",
        ),
        ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed."),
        ("DCGM_FI_DEV_ROW_REMAP_PENDING", "gauge", "Optional: row remapping pending a reset."),
        ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "PCIe replays."),
        ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "NVLink bandwidth counter total."),
        (
            "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
            "counter",
            "Optional: NVLink flow-control CRC errors.",
        ),
        (
            "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
            "counter",
            "Optional: NVLink data CRC errors.",
        ),
        (
            "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
            "counter",
            "Optional: NVLink retries.",
        ),
        (
            "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
            "counter",
            "Optional: NVLink recovery errors.",
        ),
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Share of time the graphics engine is active."),
        ("DCGM_FI_PROF_SM_ACTIVE", "gauge", "Optional: share of cycles an SM has a warp."),
        ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Share of cycles the tensor pipe is active."),
        ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Share of cycles device memory is active."),
    )
)
