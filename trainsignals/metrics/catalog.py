"""The metric table: every raw series trainsignals reads, and which component exports it.

This is the contract between the generator (rules and dashboards read these names), the GPU
exporter, the training-loop instrumentation and the simulator (they write them). `docs/metrics.md`
is generated from this table; a test fails when a rule or panel reads a metric that is neither in
this table nor recorded by a rule of the same file.

Label conventions (see docs/metrics.md):
- Every series of a training job carries the spec's `selector` labels (default
  `training_job="<name>"`), set as target labels in the scrape config or by the exporter's
  `--label` flag, and a `node` label (the host name).
- Training-process series also carry `rank` (global rank) and `local_rank`.
- Per-GPU series carry `gpu` (index on the node), `uuid` and `model`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Component(StrEnum):
    TRAINING = "training instrumentation (trainsignals.exporters.training)"
    GPU_EXPORTER = "GPU exporter (trainsignals-gpu-exporter)"
    DCGM_EXPORTER = "dcgm-exporter (NVIDIA, when the spec sets gpu_metrics: dcgm)"
    NODE_EXPORTER = "node_exporter (Prometheus project)"
    PROMETHEUS = "Prometheus itself"
    ALERTMANAGER = "Alertmanager (/metrics)"


class Kind(StrEnum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"
    INFO = "info"


@dataclass(frozen=True)
class Metric:
    name: str
    kind: Kind
    component: Component
    labels: tuple[str, ...]
    help: str

    @property
    def series_names(self) -> tuple[str, ...]:
        """Names that appear in PromQL for this metric (histograms expand to three)."""
        if self.kind is Kind.HISTOGRAM:
            return (f"{self.name}_bucket", f"{self.name}_sum", f"{self.name}_count")
        return (self.name,)


JOB = ("node", "rank", "local_rank")
GPU = ("node", "gpu", "uuid", "model")

# Phases the instrumentation reports; alert rules treat everything but "train" as a
# legitimate pause that is bounded by the spec's `max_pause`. "done" is written on a clean
# exit (TrainingMetrics.finish()): the job completed, its targets leaving is no incident.
PHASES = ("startup", "warmup", "train", "eval", "checkpoint", "done")

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

T, G = Component.TRAINING, Component.GPU_EXPORTER

METRICS: tuple[Metric, ...] = (
    # --- training process (one target per rank) ---
    Metric(
        "trainsignals_training_info",
        Kind.GAUGE,
        T,
        (*JOB, "world_size", "version"),
        "Always 1; identifies the rank. Present while the process serves metrics.",
    ),
    Metric(
        "trainsignals_step_duration_seconds",
        Kind.HISTOGRAM,
        T,
        JOB,
        "Wall time of one optimizer step, data wait included.",
    ),
    Metric("trainsignals_steps_total", Kind.COUNTER, T, JOB, "Optimizer steps completed."),
    Metric(
        "trainsignals_time_seconds_total",
        Kind.COUNTER,
        T,
        (*JOB, "activity"),
        "Seconds of this process's life per activity (goodput accounting).",
    ),
    Metric(
        "trainsignals_global_step",
        Kind.GAUGE,
        T,
        JOB,
        "The trainer's global step; back at the checkpoint's step after a restart.",
    ),
    Metric(
        "trainsignals_failed_steps_total",
        Kind.COUNTER,
        T,
        JOB,
        "Steps that raised and were skipped or retried.",
    ),
    Metric("trainsignals_tokens_total", Kind.COUNTER, T, JOB, "Tokens processed by this rank."),
    Metric("trainsignals_samples_total", Kind.COUNTER, T, JOB, "Samples processed by this rank."),
    Metric("trainsignals_loss", Kind.GAUGE, T, JOB, "Last finite training loss."),
    Metric(
        "trainsignals_nonfinite_losses_total",
        Kind.COUNTER,
        T,
        JOB,
        "Losses that were NaN or infinite.",
    ),
    Metric(
        "trainsignals_data_wait_seconds_total",
        Kind.COUNTER,
        T,
        JOB,
        "Seconds spent waiting for the data loader.",
    ),
    Metric(
        "trainsignals_batches_dropped_total",
        Kind.COUNTER,
        T,
        JOB,
        "Batches dropped (corrupt, skipped, timed out).",
    ),
    Metric(
        "trainsignals_last_step_timestamp_seconds",
        Kind.GAUGE,
        T,
        JOB,
        "Unix time of the last completed step (process start until the first step).",
    ),
    Metric(
        "trainsignals_last_checkpoint_timestamp_seconds",
        Kind.GAUGE,
        T,
        JOB,
        "Unix time of the last successful checkpoint (process start until the first one).",
    ),
    Metric(
        "trainsignals_process_start_time_seconds",
        Kind.GAUGE,
        T,
        JOB,
        "Unix time this process (incarnation) started: it changes once per restart.",
    ),
    Metric(
        "trainsignals_incarnation",
        Kind.GAUGE,
        T,
        JOB,
        "This incarnation's number: restarts before it as the launcher counts them "
        "(torchrun's TORCHELASTIC_RESTART_COUNT; 0 without one).",
    ),
    Metric(
        "trainsignals_phase",
        Kind.GAUGE,
        T,
        (*JOB, "phase"),
        "1 for the current phase (startup, warmup, train, eval, checkpoint), 0 for the others.",
    ),
    Metric(
        "trainsignals_checkpoint_disk_free_bytes",
        Kind.GAUGE,
        T,
        (*JOB, "path"),
        "Free bytes on the file system holding the checkpoint directory.",
    ),
    Metric(
        "trainsignals_checkpoint_disk_size_bytes",
        Kind.GAUGE,
        T,
        (*JOB, "path"),
        "Size in bytes of the file system holding the checkpoint directory.",
    ),
    # --- GPU exporter (one target per node) ---
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
    # --- node_exporter, for the network panels only ---
    Metric(
        "node_network_receive_bytes_total",
        Kind.COUNTER,
        Component.NODE_EXPORTER,
        ("node", "device"),
        "Bytes received per network device.",
    ),
    Metric(
        "node_network_transmit_bytes_total",
        Kind.COUNTER,
        Component.NODE_EXPORTER,
        ("node", "device"),
        "Bytes transmitted per network device.",
    ),
    # --- node_exporter's infiniband collector (collector/infiniband_linux.go), fabric ---
    Metric(
        "node_infiniband_state_id",
        Kind.GAUGE,
        Component.NODE_EXPORTER,
        ("node", "device", "port"),
        "Port state (1 down, 2 init, 3 armed, 4 active, 5 act defer).",
    ),
    Metric(
        "node_infiniband_physical_state_id",
        Kind.GAUGE,
        Component.NODE_EXPORTER,
        ("node", "device", "port"),
        "Physical port state (5 link up, 2 polling, 3 disabled).",
    ),
    Metric(
        "node_infiniband_link_downed_total",
        Kind.COUNTER,
        Component.NODE_EXPORTER,
        ("node", "device", "port"),
        "Times the link failed to recover from an error and went down.",
    ),
    Metric(
        "node_infiniband_link_error_recovery_total",
        Kind.COUNTER,
        Component.NODE_EXPORTER,
        ("node", "device", "port"),
        "Times the link recovered from an error state.",
    ),
    Metric(
        "node_infiniband_symbol_error_total",
        Kind.COUNTER,
        Component.NODE_EXPORTER,
        ("node", "device", "port"),
        "Minor link errors on the physical lanes.",
    ),
    Metric(
        "node_infiniband_port_errors_received_total",
        Kind.COUNTER,
        Component.NODE_EXPORTER,
        ("node", "device", "port"),
        "Received packets that contained an error.",
    ),
    # --- Prometheus ---
    Metric(
        "up",
        Kind.GAUGE,
        Component.PROMETHEUS,
        ("job", "instance", "node"),
        "1 when the last scrape of a target succeeded.",
    ),
    Metric(
        "ALERTS",
        Kind.GAUGE,
        Component.PROMETHEUS,
        ("alertname", "alertstate", "severity"),
        "Pending and firing alerts.",
    ),
    # --- Prometheus and Alertmanager about themselves (meta-monitoring, generator/meta.py) ---
    *(
        Metric(name, kind, Component.PROMETHEUS, labels, help_)
        for name, kind, labels, help_ in (
            (
                "prometheus_rule_evaluation_failures_total",
                Kind.COUNTER,
                ("rule_group",),
                "Rule evaluations that failed.",
            ),
            (
                "prometheus_rule_group_last_duration_seconds",
                Kind.GAUGE,
                ("rule_group",),
                "Duration of the last evaluation of the rule group.",
            ),
            (
                "prometheus_rule_group_interval_seconds",
                Kind.GAUGE,
                ("rule_group",),
                "The rule group's evaluation interval.",
            ),
            (
                "prometheus_rule_group_iterations_missed_total",
                Kind.COUNTER,
                ("rule_group",),
                "Evaluations skipped because the previous one was still running.",
            ),
            (
                "prometheus_notifications_alertmanagers_discovered",
                Kind.GAUGE,
                (),
                "Alertmanagers Prometheus currently sends alerts to.",
            ),
            (
                "prometheus_notifications_errors_total",
                Kind.COUNTER,
                ("alertmanager",),
                "Errors sending alerts to an Alertmanager.",
            ),
            (
                "prometheus_notifications_sent_total",
                Kind.COUNTER,
                ("alertmanager",),
                "Alerts sent to an Alertmanager.",
            ),
            (
                "prometheus_notifications_dropped_total",
                Kind.COUNTER,
                (),
                "Alerts dropped (errors, or a full notification queue).",
            ),
            (
                "prometheus_config_last_reload_successful",
                Kind.GAUGE,
                (),
                "1 when the last configuration reload succeeded.",
            ),
        )
    ),
    Metric(
        "alertmanager_config_last_reload_successful",
        Kind.GAUGE,
        Component.ALERTMANAGER,
        (),
        "1 when the last configuration reload succeeded.",
    ),
    Metric(
        "alertmanager_config_hash",
        Kind.GAUGE,
        Component.ALERTMANAGER,
        (),
        "Hash of the loaded configuration (replicas of one cluster should agree).",
    ),
    Metric(
        "alertmanager_notification_requests_failed_total",
        Kind.COUNTER,
        Component.ALERTMANAGER,
        ("integration",),
        "Notification requests that failed (each retry counts).",
    ),
    Metric(
        "alertmanager_notifications_failed_total",
        Kind.COUNTER,
        Component.ALERTMANAGER,
        ("integration",),
        "Notifications that failed after all retries.",
    ),
    Metric(
        "alertmanager_cluster_members",
        Kind.GAUGE,
        Component.ALERTMANAGER,
        (),
        "Members of the gossip cluster this Alertmanager sees.",
    ),
)

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

BY_NAME: dict[str, Metric] = {m.name: m for m in (*METRICS, *DCGM_METRICS)}


def known_series_names() -> frozenset[str]:
    """Every series name a rule or panel may read without recording it itself."""
    return frozenset(s for m in (*METRICS, *DCGM_METRICS) for s in m.series_names)
