"""Series trainsignals' GPU exporter exports (one target per node)."""

from __future__ import annotations

from trainsignals.metrics.model import GPU, Component, Kind, Metric

# Clock-event ("throttle") reasons, NVML's names in snake case. The exporter always reports
# the thermal and power reasons (alerts take their share of time), the others while active.
THROTTLE_REASONS = (
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "sync_boost",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "display_clock_setting",
)
THERMAL_THROTTLE_REASONS = ("sw_thermal_slowdown", "hw_thermal_slowdown")
POWER_THROTTLE_REASONS = ("sw_power_cap", "hw_power_brake_slowdown")

G = Component.GPU_EXPORTER

GPU_EXPORTER_METRICS: tuple[Metric, ...] = (
    Metric("trainsignals_gpu_info", Kind.GAUGE, G, (*GPU, "pci_bus_id"), "Always 1 per GPU."),
    Metric(
        "trainsignals_gpu_up",
        Kind.GAUGE,
        G,
        GPU,
        "1 when every NVML query of this GPU answered in the last scrape, 0 when it is lost.",
    ),
    Metric(
        "trainsignals_gpu_utilization_ratio",
        Kind.GAUGE,
        G,
        GPU,
        "Share of time a kernel was running (NVML utilization.gpu / 100).",
    ),
    Metric(
        "trainsignals_gpu_memory_utilization_ratio",
        Kind.GAUGE,
        G,
        GPU,
        "Share of time device memory was read or written.",
    ),
    Metric(
        "trainsignals_gpu_sm_active_ratio",
        Kind.GAUGE,
        G,
        GPU,
        "Share of SMs that had work, since the previous scrape (NVML GPM SM_UTIL, Hopper on).",
    ),
    Metric(
        "trainsignals_gpu_tensor_active_ratio",
        Kind.GAUGE,
        G,
        GPU,
        "Share of time tensor pipes were busy, since the previous scrape (GPM ANY_TENSOR_UTIL).",
    ),
    Metric("trainsignals_gpu_memory_used_bytes", Kind.GAUGE, G, GPU, "Device memory used."),
    Metric("trainsignals_gpu_memory_total_bytes", Kind.GAUGE, G, GPU, "Device memory in all."),
    Metric(
        "trainsignals_gpu_memory_reserved_bytes",
        Kind.GAUGE,
        G,
        GPU,
        "Device memory reserved by the driver.",
    ),
    Metric("trainsignals_gpu_power_watts", Kind.GAUGE, G, GPU, "Power draw."),
    Metric("trainsignals_gpu_power_limit_watts", Kind.GAUGE, G, GPU, "Enforced power limit."),
    Metric(
        "trainsignals_gpu_energy_joules_total",
        Kind.COUNTER,
        G,
        GPU,
        "Energy consumed since the driver loaded.",
    ),
    Metric("trainsignals_gpu_temperature_celsius", Kind.GAUGE, G, GPU, "GPU core temperature."),
    Metric("trainsignals_gpu_sm_clock_hertz", Kind.GAUGE, G, GPU, "SM clock."),
    Metric("trainsignals_gpu_sm_clock_max_hertz", Kind.GAUGE, G, GPU, "Maximum SM clock."),
    Metric("trainsignals_gpu_memory_clock_hertz", Kind.GAUGE, G, GPU, "Memory clock."),
    Metric("trainsignals_gpu_memory_clock_max_hertz", Kind.GAUGE, G, GPU, "Maximum memory clock."),
    Metric(
        "trainsignals_gpu_throttle_active",
        Kind.GAUGE,
        G,
        (*GPU, "reason"),
        "1 while the clocks-event (throttle) reason is active; thermal and power reasons always, "
        "others only while active.",
    ),
    Metric(
        "trainsignals_gpu_ecc_errors_total",
        Kind.COUNTER,
        G,
        (*GPU, "error_type"),
        "Volatile ECC errors, error_type corrected or uncorrected.",
    ),
    Metric(
        "trainsignals_gpu_remapped_rows_pending",
        Kind.GAUGE,
        G,
        GPU,
        "1 when a row remapping is pending (the GPU needs a reset).",
    ),
    Metric(
        "trainsignals_gpu_remapped_rows_failed",
        Kind.GAUGE,
        G,
        GPU,
        "1 when a row remapping failed (the GPU needs service).",
    ),
    Metric(
        "trainsignals_gpu_xid_errors_total",
        Kind.COUNTER,
        G,
        (*GPU, "xid"),
        "XID errors seen through NVML events, by XID code.",
    ),
    Metric(
        "trainsignals_gpu_pcie_transmit_bytes_per_second",
        Kind.GAUGE,
        G,
        GPU,
        "PCIe transmit throughput (NVML sample over 20 ms).",
    ),
    Metric(
        "trainsignals_gpu_pcie_receive_bytes_per_second",
        Kind.GAUGE,
        G,
        GPU,
        "PCIe receive throughput (NVML sample over 20 ms).",
    ),
    Metric(
        "trainsignals_gpu_nvlink_links_down",
        Kind.GAUGE,
        G,
        GPU,
        "NVLink links of this GPU that are down (0 when all are up).",
    ),
    Metric(
        "trainsignals_gpu_nvlink_errors_all_links_total",
        Kind.COUNTER,
        G,
        GPU,
        "NVLink error counts of all links and types together (replay, recovery, CRC).",
    ),
    Metric(
        "trainsignals_gpu_nvlink_up",
        Kind.GAUGE,
        G,
        (*GPU, "link"),
        "1 when the link is up; only for links that were down or had errors (or all links).",
    ),
    Metric(
        "trainsignals_gpu_nvlink_errors_total",
        Kind.COUNTER,
        G,
        (*GPU, "link", "error_type"),
        "NVLink error counters (replay, recovery, crc_flit, crc_data) of the links nvlink_up has.",
    ),
    Metric(
        "trainsignals_gpu_fan_speed_ratio",
        Kind.GAUGE,
        G,
        (*GPU, "fan"),
        "Fan speed as a share of its maximum, where the board has fans.",
    ),
    Metric(
        "trainsignals_gpu_process_memory_used_bytes",
        Kind.GAUGE,
        G,
        (*GPU, "pid", "process_name"),
        "Device memory used by one process.",
    ),
    # MIG GPU instances, labelled as dcgm-exporter labels them (GPU_I_ID, GPU_I_PROFILE).
    *(
        Metric(name, Kind.GAUGE, G, (*GPU, "GPU_I_ID", "GPU_I_PROFILE"), help_)
        for name, help_ in (
            ("trainsignals_gpu_mig_memory_used_bytes", "Memory used in the MIG GPU instance."),
            ("trainsignals_gpu_mig_memory_total_bytes", "Memory of the MIG GPU instance."),
            (
                "trainsignals_gpu_mig_sm_active_ratio",
                "Share of the instance's SMs that had work (GPM, Hopper on).",
            ),
            (
                "trainsignals_gpu_mig_tensor_active_ratio",
                "Share of time the instance's tensor pipes were busy (GPM, Hopper on).",
            ),
        )
    ),
    Metric(
        "trainsignals_gpu_exporter_nvml_errors_total",
        Kind.COUNTER,
        G,
        ("node", "gpu", "function", "error"),
        "NVML calls that failed, by GPU and function.",
    ),
    Metric(
        "trainsignals_gpu_exporter_scrape_duration_seconds",
        Kind.GAUGE,
        G,
        ("node",),
        "Time the last collection took.",
    ),
    Metric(
        "trainsignals_gpu_exporter_build_info",
        Kind.GAUGE,
        G,
        ("node", "version", "driver_version", "nvml_version"),
        "Always 1.",
    ),
)
