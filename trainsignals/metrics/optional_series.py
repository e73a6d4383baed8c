"""Series a job's rules read where they exist, with a fallback where they do not.

`trainsignals readiness` notes them instead of failing: their absence is a hardware or
configuration choice, not a broken label (generator/signals/gpu_sources.py and
dcgm_source.py).
"""

from __future__ import annotations

_GPM = "only on GPUs with NVML GPM (Hopper and newer), from the second scrape; busy falls back"
_DCGM = "optional dcgm-exporter counter (not in its default counters)"
_MIG = "only on GPUs in MIG mode; the MIG instance panels stay empty"
_NVLINK = f"{_DCGM}; the NVLink errors panel stays empty without any of the four"

# dcgm-exporter labels a MIG GPU instance's series GPU_I_ID (absent on whole GPUs): a selector
# with GPU_I_ID!="" (generator/signals/dcgm_source.py) reads only instances, empty without MIG.
MIG_INSTANCE_MATCHER = ("GPU_I_ID", "!=", "")
MIG_INSTANCES = "MIG GPU instances only; empty on GPUs not in MIG mode (MIG panels stay empty)"

OPTIONAL_SERIES: dict[str, str] = {
    # Durable progress (issue 16): a process reports neither before it has one to report.
    "trainsignals_last_step_timestamp_seconds": (
        "appears with a process's first completed step; until then the rules measure from the "
        "process start"
    ),
    "trainsignals_last_checkpoint_timestamp_seconds": (
        "appears with the first checkpoint saved or restored; until then the rules measure "
        "from the job's first process start"
    ),
    "trainsignals_gpu_sm_active_ratio": f"{_GPM} to utilization",
    "trainsignals_gpu_tensor_active_ratio": f"{_GPM}; the tensor series stays empty",
    "DCGM_FI_PROF_SM_ACTIVE": f"{_DCGM}; GR_ENGINE_ACTIVE stands for it",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": f"{_DCGM}; throttling is inferred from SM clocks",
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": f"{_DCGM} (DCGM 3 name); throttling is inferred",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": f"{_DCGM}; rows remapped for uncorrectable errors stand in",
    "DCGM_FI_DEV_ROW_REMAP_PENDING": f"{_DCGM}; ROW_REMAP_FAILURE stands for it",
    "DCGM_EXP_XID_ERRORS_COUNT": f"{_DCGM}; a changed DCGM_FI_DEV_XID_ERRORS stands for it",
    "trainsignals_gpu_nvlink_errors_all_links_total": (
        "only on GPUs with NVLink; the NVLink errors panel stays empty"
    ),
    "trainsignals_gpu_mig_memory_used_bytes": _MIG,
    "trainsignals_gpu_mig_memory_total_bytes": _MIG,
    "trainsignals_gpu_mig_sm_active_ratio": f"{_MIG} (GPM: Hopper and newer)",
    "trainsignals_gpu_mig_tensor_active_ratio": f"{_MIG} (GPM: Hopper and newer)",
    **{
        f"DCGM_FI_DEV_NVLINK_{kind}_ERROR_COUNT_TOTAL": _NVLINK
        for kind in ("CRC_FLIT", "CRC_DATA", "REPLAY", "RECOVERY")
    },
}
