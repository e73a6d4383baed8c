"""The alerts trainsignals knows, their default severity and what each one means.

Defaults follow one rule: page only when a human must act now (progress or data is being
lost, or soon will be); everything that can wait for working hours is a ticket.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass


@dataclass(frozen=True)
class AlertInfo:
    name: str
    default_severity: str  # "page" or "ticket"
    signal: str  # golden signal / area, for `explain` and the dashboards
    meaning: str


ALERTS: tuple[AlertInfo, ...] = (
    AlertInfo(
        "TrainingTargetsDown",
        "page",
        "errors",
        "Fewer training ranks are scraped than the spec's shape: a rank crashed or its "
        "target is missing.",
    ),
    AlertInfo(
        "TrainingStalled",
        "page",
        "latency",
        "No step has completed for longer than the job allows (hung collective, "
        "deadlock, or a pause that never ended), while the processes are up.",
    ),
    AlertInfo(
        "NonFiniteLoss",
        "page",
        "errors",
        "The loss was NaN or infinite more often than the spec tolerates.",
    ),
    AlertInfo(
        "LossDiverging",
        "page",
        "loss",
        "The loss jumped above spike_factor x its recent average and stayed there.",
    ),
    AlertInfo(
        "ThroughputBelowFloor",
        "page",
        "traffic",
        "Tokens per second are below the floor while the job is training.",
    ),
    AlertInfo(
        "NodeDown",
        "page",
        "infrastructure",
        "Every target of a node (GPU exporter and training ranks) is down.",
    ),
    AlertInfo(
        "GpuLost",
        "page",
        "infrastructure",
        "A GPU stopped answering NVML (fell off the bus) or is missing from its node.",
    ),
    AlertInfo(
        "GpuUncorrectableEccErrors",
        "page",
        "infrastructure",
        "A GPU reported uncorrectable (double-bit) ECC errors: results may be corrupt.",
    ),
    AlertInfo(
        "GpuXidCritical",
        "page",
        "infrastructure",
        "A GPU reported an XID error that needs the node drained (see xid_page_codes).",
    ),
    AlertInfo(
        "CheckpointTooOld",
        "page",
        "errors",
        "The last successful checkpoint is older than checkpoint_max_age: a crash now "
        "loses that much work.",
    ),
    AlertInfo(
        "CheckpointDiskAlmostFull",
        "page",
        "saturation",
        "The checkpoint file system has less free space than disk_free_min_ratio.",
    ),
    AlertInfo(
        "SloErrorBudgetBurnFast",
        "page",
        "slo",
        "An SLO burns its error budget fast (SRE workbook: 2% of a 30-day budget in 1h "
        "or 5% in 6h, each confirmed by a short window).",
    ),
    AlertInfo(
        "StepTimeAboveBound",
        "ticket",
        "latency",
        "p95 step time is above step_time_max_seconds while training.",
    ),
    AlertInfo(
        "DataLoaderStarved",
        "ticket",
        "saturation",
        "Ranks spend more than data_wait_max_ratio of wall time waiting for data: "
        "GPUs busy-but-starved.",
    ),
    AlertInfo(
        "MfuBelowFloor",
        "ticket",
        "saturation",
        "Model FLOPs utilization averaged over mfu_window is below mfu_min_ratio (the slow leak).",
    ),
    AlertInfo(
        "DroppedBatchesAboveTolerance",
        "ticket",
        "errors",
        "The share of dropped batches over dropped_batches_window is above tolerance.",
    ),
    AlertInfo(
        "LossPlateau",
        "ticket",
        "loss",
        "The loss improved less than loss_plateau_min_improvement_ratio over loss_plateau_window.",
    ),
    AlertInfo(
        "GpuThermalThrottling",
        "ticket",
        "infrastructure",
        "A GPU's clocks are held down by thermal slowdown for a sustained share of time.",
    ),
    AlertInfo(
        "GpuPowerThrottling",
        "ticket",
        "infrastructure",
        "A GPU's clocks are held down by power capping or power brake for a sustained "
        "share of time.",
    ),
    AlertInfo(
        "GpuTemperatureHigh",
        "ticket",
        "infrastructure",
        "A GPU runs hotter than gpu_temperature_max_celsius.",
    ),
    AlertInfo(
        "GpuMemoryNearFull",
        "ticket",
        "saturation",
        "A GPU's memory use is above gpu_memory_max_ratio: the next larger batch or "
        "fragmentation will OOM.",
    ),
    AlertInfo(
        "GpuXidError",
        "ticket",
        "infrastructure",
        "A GPU reported an XID error that is not in xid_page_codes (mostly application faults).",
    ),
    AlertInfo(
        "GpuRemappedRowsPending",
        "ticket",
        "infrastructure",
        "A GPU has a pending or failed row remapping: reset it at the next restart.",
    ),
    AlertInfo(
        "CheckpointDiskFillingUp",
        "ticket",
        "saturation",
        "At the current rate the checkpoint file system fills within disk_full_horizon.",
    ),
    AlertInfo(
        "SloErrorBudgetBurnSlow",
        "ticket",
        "slo",
        "An SLO burns its error budget slowly but steadily (10% of the budget in 1d or "
        "3d): it will be exhausted before the period ends.",
    ),
    AlertInfo(
        "GpuExporterDown",
        "ticket",
        "infrastructure",
        "A node's GPU exporter is not scraped while its training ranks are: GPU "
        "signals of that node are blind.",
    ),
    AlertInfo(
        "GpuExporterNvmlErrors",
        "ticket",
        "infrastructure",
        "The GPU exporter keeps getting NVML errors for a GPU.",
    ),
)

BY_NAME: dict[str, AlertInfo] = {a.name: a for a in ALERTS}


def suggest_alert_name(name: str) -> str | None:
    """None when `name` is a known alert, else the problem and the closest known names."""
    if name in BY_NAME:
        return None
    close = difflib.get_close_matches(name, BY_NAME, n=2)
    hint = f"did you mean {' or '.join(close)}?" if close else "see `trainsignals explain`"
    return f"unknown alert {name!r}; {hint}"
