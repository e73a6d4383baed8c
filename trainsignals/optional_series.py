"""Series a job's rules read where they exist, with a fallback where they do not.

`trainsignals readiness` notes them instead of failing: their absence is a hardware or
configuration choice, not a broken label (generator/gpu_sources.py, generator/dcgm_source.py).
"""

from __future__ import annotations

_GPM = "only on GPUs with NVML GPM (Hopper and newer), from the second scrape; busy falls back"
_DCGM = "optional dcgm-exporter counter (not in its default counters)"

OPTIONAL_SERIES: dict[str, str] = {
    "trainsignals_gpu_sm_active_ratio": f"{_GPM} to utilization",
    "trainsignals_gpu_tensor_active_ratio": f"{_GPM}; the tensor series stays empty",
    "DCGM_FI_PROF_SM_ACTIVE": f"{_DCGM}; GR_ENGINE_ACTIVE stands for it",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": f"{_DCGM}; throttling is inferred from SM clocks",
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": f"{_DCGM} (DCGM 3 name); throttling is inferred",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": f"{_DCGM}; rows remapped for uncorrectable errors stand in",
    "DCGM_FI_DEV_ROW_REMAP_PENDING": f"{_DCGM}; ROW_REMAP_FAILURE stands for it",
}
