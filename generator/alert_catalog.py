"""The alerts trainsignals knows, their default severity per recovery mode and who owns each.

Defaults follow one rule: page only when a human must act now (progress or data is being
lost, or soon will be); everything that can wait for working hours is a ticket. A job whose
`recovery.mode` is `auto_restart` heals itself from most causes (a lost GPU, a dead node, a
crashed rank: the scheduler restarts it from its checkpoint on other hardware), so there the
causes are tickets for whoever repairs hardware (`owner="infra"`), and what pages is the
symptom that the self-healing loop failed (no progress, a crash loop, goodput burning).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

MODES = ("manual", "auto_restart")


@dataclass(frozen=True)
class AlertInfo:
    name: str
    default_severity: str  # "page", "ticket" or "off" with recovery.mode manual
    signal: str  # golden signal / area, for `explain` and the dashboards
    meaning: str
    # Severity with recovery.mode auto_restart; None: the same as manual.
    auto_severity: str | None = None
    # Who acts on it: the job's team, or the infra team that repairs hardware (auto_restart).
    owner: str = "job"

    def severity_for(self, mode: str) -> str:
        if mode == "auto_restart" and self.auto_severity is not None:
            return self.auto_severity
        return self.default_severity


ALERTS: tuple[AlertInfo, ...] = (
    AlertInfo(
        "TrainingNoProgress",
        "off",
        "errors",
        "No training step completed for longer than recovery.restart_budget: the job is down, "
        "hung, or an automatic restart did not bring it back. The self-healing loop failed.",
        auto_severity="page",
    ),
    AlertInfo(
        "TrainingCrashLooping",
        "ticket",
        "errors",
        "The job restarted more than recovery.max_restarts times within "
        "recovery.restart_window: automatic restarts keep failing (a bad node, a bad "
        "checkpoint, a software bug).",
        auto_severity="page",
    ),
    AlertInfo(
        "TrainingRestartsOnBadNode",
        "ticket",
        "errors",
        "The same node was named by hardware faults (GPU lost, critical XID, uncorrectable "
        "memory errors, node down) in two separate incidents within recovery.restart_window "
        "while the job restarted: automation keeps putting the job back on a bad node.",
        auto_severity="page",
    ),
    AlertInfo(
        "TrainingTargetsDown",
        "page",
        "errors",
        "Fewer training ranks are scraped than the spec's shape: a rank crashed or its "
        "target is missing.",
        auto_severity="ticket",
    ),
    AlertInfo(
        "TrainingStalled",
        "page",
        "latency",
        "No step has completed for longer than the job allows (hung collective, "
        "deadlock, or a pause that never ended), while the processes are up.",
        auto_severity="ticket",
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
        auto_severity="ticket",
        owner="infra",
    ),
    AlertInfo(
        "GpuLost",
        "page",
        "infrastructure",
        "A GPU stopped answering NVML (fell off the bus) or is missing from its node.",
        auto_severity="ticket",
        owner="infra",
    ),
    AlertInfo(
        "GpuUncorrectableEccErrors",
        "page",
        "infrastructure",
        "A GPU reported uncorrectable (double-bit) ECC errors: results may be corrupt.",
        auto_severity="ticket",
        owner="infra",
    ),
    AlertInfo(
        "GpuXidCritical",
        "page",
        "infrastructure",
        "A GPU reported an XID error that needs the node drained (see xid_page_codes).",
        auto_severity="ticket",
        owner="infra",
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
        owner="infra",
    ),
    AlertInfo(
        "GpuPowerThrottling",
        "ticket",
        "infrastructure",
        "A GPU's clocks are held down by power capping or power brake for a sustained "
        "share of time.",
        owner="infra",
    ),
    AlertInfo(
        "GpuTemperatureHigh",
        "ticket",
        "infrastructure",
        "A GPU runs hotter than gpu_temperature_max_celsius.",
        owner="infra",
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
        owner="infra",
    ),
    AlertInfo(
        "GpuRemappedRowsPending",
        "ticket",
        "infrastructure",
        "A GPU has a pending or failed row remapping: reset it at the next restart.",
        owner="infra",
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
        owner="infra",
    ),
    AlertInfo(
        "GpuExporterNvmlErrors",
        "ticket",
        "infrastructure",
        "The GPU exporter keeps getting NVML errors for a GPU.",
        owner="infra",
    ),
)

BY_NAME: dict[str, AlertInfo] = {a.name: a for a in ALERTS}

# Hardware faults that name a node: the infra tickets of a self-healing job. The same node in
# two of their incidents within the restart window is TrainingRestartsOnBadNode.
NODE_HARDWARE_FAULTS = ("GpuLost", "GpuXidCritical", "GpuUncorrectableEccErrors", "NodeDown")


def suggest_alert_name(name: str) -> str | None:
    """None when `name` is a known alert, else the problem and the closest known names."""
    if name in BY_NAME:
        return None
    close = difflib.get_close_matches(name, BY_NAME, n=2)
    hint = f"did you mean {' or '.join(close)}?" if close else "see `trainsignals explain`"
    return f"unknown alert {name!r}; {hint}"
