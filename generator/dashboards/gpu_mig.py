"""Panels of MIG GPU instances and NVLink errors, in the GPUs row.

MIG: one series per GPU instance (`GPU_I_ID`, `GPU_I_PROFILE`), from either GPU source
(`GpuSource.mig_recordings`). Empty on GPUs without MIG mode. The whole-GPU panels never count
an instance (generator/signals/dcgm_source.py says how dcgm-exporter's mixed series are kept apart).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainsignals.generator.signals.gpu_sources import (
    MIG_BUSY,
    MIG_MEMORY,
    MIG_TENSOR,
    NVLINK_ERRORS,
)

if TYPE_CHECKING:  # dashboard_kit imports the alerts, which import this module
    import grafanalib.core as g

    from trainsignals.generator.dashboards.kit import PanelBuilder

MIG_LEGEND = "{{node}}/{{gpu}} {{GPU_I_PROFILE}}#{{GPU_I_ID}}"


def mig_panels(builder: PanelBuilder, r: str) -> list[g.Panel]:
    """Memory used and activity per MIG GPU instance."""
    return [
        builder.series(
            "gpu_mig_memory",
            "MIG instances: memory used",
            "Per MIG GPU instance: memory used as a share of the instance's memory. Empty on "
            "GPUs not in MIG mode.",
            builder.targets((f"{MIG_MEMORY}{r}", MIG_LEGEND)),
            "percentunit",
            valueMin=0,
            valueMax=1,
        ),
        builder.series(
            "gpu_mig_activity",
            "MIG instances: activity",
            "Per MIG GPU instance: share of its SMs with work (NVML GPM; DCGM SM_ACTIVE or "
            "GR_ENGINE_ACTIVE) and of cycles its tensor pipes were busy. NVML has no "
            "utilization in MIG mode. Empty on GPUs not in MIG mode.",
            builder.targets(
                (f"{MIG_BUSY}{r}", f"{MIG_LEGEND} busy"),
                (f"{MIG_TENSOR}{r}", f"{MIG_LEGEND} tensor"),
            ),
            "percentunit",
            valueMin=0,
            valueMax=1,
        ),
    ]


def nvlink_panel(builder: PanelBuilder, r: str, legend: str) -> list[g.Panel]:
    """NVLink errors per second per GPU, all links and error types together."""
    return [
        builder.series(
            "gpu_nvlink",
            "NVLink errors",
            "Per GPU: NVLink CRC, replay and recovery errors per second over all its links. "
            "A rising rate slows collectives inside the node; XID 74 follows a link that "
            "fails. dcgm-exporter: only with its optional NVLINK_*_ERROR_COUNT_TOTAL counters.",
            builder.targets((f"{NVLINK_ERRORS}{r}", f"{legend} errors/s")),
            "short",
        )
    ]
