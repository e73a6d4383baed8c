"""GPM activity and MIG instances through pynvml (the real backend's Hopper-era queries).

GPM ("GPU performance monitoring", Hopper and newer) reports what NVML utilization cannot:
the share of SMs that had work and the share of time tensor pipes were busy. A GPM metric is
computed from two samples (`nvmlGpmSampleGet`, `nvmlGpmMetricsGet`), so each scrape takes one
sample and reports the activity since the previous scrape's; the first scrape reports none.
MIG GPU instances get their own samples (`nvmlGpmMigSampleGet`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import pynvml

from trainsignals.exporters.gpu.backend import (
    NOT_SUPPORTED,
    UNSUPPORTED_CODES,
    Activity,
    BackendError,
    MigInstance,
)

# NVML wants samples at least 100 ms apart; a closer scrape (a second Prometheus replica
# right after the first) gets the activity computed for the previous one.
MIN_SAMPLE_INTERVAL_S = 0.1

METRIC_IDS = (pynvml.NVML_GPM_METRIC_SM_UTIL, pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL)

Nvml = Callable[..., Any]  # nvml_backend._nvml: call, turning NVMLError into BackendError


class GpmSampler:
    """Two sample buffers of one GPU (or one MIG GPU instance), reused scrape after scrape."""

    def __init__(self, nvml: Nvml, take: Callable[[Any], object]) -> None:
        self._nvml = nvml
        self._take = take  # fills a sample buffer: nvmlGpmSampleGet or nvmlGpmMigSampleGet
        self._prev: Any = None
        self._spare: Any = None
        self._prev_at = 0.0
        self._primed = False
        self._last: Activity | None = None
        self._request: Any = None

    def activity(self) -> Activity | None:
        now = time.monotonic()
        if self._prev is None:
            self._prev = self._nvml("nvmlGpmSampleAlloc", pynvml.nvmlGpmSampleAlloc)
        if self._spare is None:
            self._spare = self._nvml("nvmlGpmSampleAlloc", pynvml.nvmlGpmSampleAlloc)
        if not self._primed:  # a failed first sample must not become a baseline
            self._take(self._prev)
            self._primed, self._prev_at = True, now
            return None
        if now - self._prev_at < MIN_SAMPLE_INTERVAL_S:
            return self._last
        self._take(self._spare)
        try:
            self._last = self._compute()
        finally:  # the new sample is the baseline of the next scrape either way
            self._prev, self._spare, self._prev_at = self._spare, self._prev, now
        return self._last

    def _compute(self) -> Activity:
        if self._request is None:
            self._request = pynvml.c_nvmlGpmMetricsGet_t()
            self._request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
            self._request.numMetrics = len(METRIC_IDS)
            for i, metric in enumerate(METRIC_IDS):
                self._request.metrics[i].metricId = metric
        req = self._request
        req.sample1, req.sample2 = self._prev, self._spare
        self._nvml("nvmlGpmMetricsGet", pynvml.nvmlGpmMetricsGet, req)
        values: list[float | None] = []
        for i in range(len(METRIC_IDS)):
            m = req.metrics[i]
            # Per metric: NVML answers not supported for one metric and a value for another.
            ok = m.nvmlReturn == pynvml.NVML_SUCCESS
            values.append(min(max(m.value / 100.0, 0.0), 1.0) if ok else None)
        return Activity(*values)

    def free(self) -> None:
        for sample in (self._prev, self._spare):
            if sample is not None:
                with contextlib.suppress(pynvml.NVMLError):
                    pynvml.nvmlGpmSampleFree(sample)
        self._prev = self._spare = None
        self._primed = False


class GpmAndMig:
    """GPM samplers per GPU and per MIG GPU instance, and the MIG instance listing."""

    def __init__(self, nvml: Nvml) -> None:
        self._nvml = nvml
        self._samplers: dict[tuple[int, int], GpmSampler] = {}  # (GPU, GPU instance or -1)
        self._gpm_supported: dict[int, bool] = {}
        self._profiles: dict[tuple[int, int], str] = {}
        self._no_mig_gpm: set[int] = set()  # GPUs whose GPU instances answer no GPM

    def _supported(self, index: int, handle: Any) -> bool:
        if index not in self._gpm_supported:
            support = self._nvml(
                "nvmlGpmQueryDeviceSupport", pynvml.nvmlGpmQueryDeviceSupport, handle
            )
            self._gpm_supported[index] = bool(support.isSupportedDevice)
        return self._gpm_supported[index]

    def gpu_activity(self, index: int, handle: Any) -> Activity | None:
        if not self._supported(index, handle):
            raise BackendError("nvmlGpmQueryDeviceSupport", NOT_SUPPORTED, "no GPM before Hopper")
        sampler = self._samplers.get((index, -1))
        if sampler is None:
            sampler = self._samplers[index, -1] = GpmSampler(
                self._nvml,
                lambda s: self._nvml("nvmlGpmSampleGet", pynvml.nvmlGpmSampleGet, handle, s),
            )
        return sampler.activity()

    def mig_instances(self, index: int, handle: Any) -> list[MigInstance]:
        current, _pending = self._nvml("nvmlDeviceGetMigMode", pynvml.nvmlDeviceGetMigMode, handle)
        if current != pynvml.NVML_DEVICE_MIG_ENABLE:
            self._forget(index)
            return []
        count = self._nvml(
            "nvmlDeviceGetMaxMigDeviceCount", pynvml.nvmlDeviceGetMaxMigDeviceCount, handle
        )
        found: dict[int, MigInstance] = {}
        for slot in range(count):
            try:
                mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
            except pynvml.NVMLError as e:
                if e.value == pynvml.NVML_ERROR_NOT_FOUND:  # an empty slot
                    continue
                self._nvml("nvmlDeviceGetMigDeviceHandleByIndex", _raise, e)
            gi = int(
                self._nvml("nvmlDeviceGetGpuInstanceId", pynvml.nvmlDeviceGetGpuInstanceId, mig)
            )
            if gi in found:  # compute instances of one GPU instance share its memory
                continue
            mem = self._nvml("nvmlDeviceGetMemoryInfo", pynvml.nvmlDeviceGetMemoryInfo, mig)
            found[gi] = MigInstance(
                gpu_instance_id=gi,
                profile=self._profile(index, gi, mig, handle),
                memory_total_bytes=int(mem.total),
                memory_used_bytes=int(mem.used),
                activity=self._instance_activity(index, gi, handle),
            )
        gone = [k for k in self._samplers if k[0] == index and k[1] >= 0 and k[1] not in found]
        for key in gone:  # instances that were destroyed; their ids may come back re-profiled
            self._samplers.pop(key).free()
        for key in [k for k in self._profiles if k[0] == index and k[1] not in found]:
            del self._profiles[key]
        return [found[gi] for gi in sorted(found)]

    def _profile(self, index: int, gi: int, mig: Any, handle: Any) -> str:
        """Profile "1g.10gb": from the MIG device name ("NVIDIA H100 80GB HBM3 MIG 1g.10gb"),
        else from the GPU instance's profile info ("MIG 1g.10gb"), else "unknown"."""
        key = (index, gi)
        if key not in self._profiles:
            name = _text(self._nvml("nvmlDeviceGetName", pynvml.nvmlDeviceGetName, mig))
            if "MIG " not in name:
                name = self._profile_info_name(handle, gi)
            self._profiles[key] = name.rsplit("MIG ", 1)[-1].strip() or "unknown"
        return self._profiles[key]

    @staticmethod
    def _profile_info_name(handle: Any, gi: int) -> str:
        try:
            info = pynvml.nvmlGpuInstanceGetInfo(pynvml.nvmlDeviceGetGpuInstanceById(handle, gi))
            for profile in range(pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT):
                with contextlib.suppress(pynvml.NVMLError):
                    p = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, profile)
                    if p.id == info.profileId:
                        return _text(p.name)
        except pynvml.NVMLError:  # a label is no reason to drop the instance's memory
            pass
        return ""

    def _instance_activity(self, index: int, gi: int, handle: Any) -> Activity | None:
        if index in self._no_mig_gpm:
            return None
        try:
            if not self._supported(index, handle):
                return None
            return self._instance_sampler(index, gi, handle).activity()
        except BackendError as e:
            if e.code not in UNSUPPORTED_CODES:
                raise
            # Memory is still worth reporting: remember "no GPM here" instead of failing.
            self._no_mig_gpm.add(index)
            return None

    def _instance_sampler(self, index: int, gi: int, handle: Any) -> GpmSampler:
        sampler = self._samplers.get((index, gi))
        if sampler is None:
            sampler = self._samplers[index, gi] = GpmSampler(
                self._nvml,
                lambda s: self._nvml(
                    "nvmlGpmMigSampleGet", pynvml.nvmlGpmMigSampleGet, handle, gi, s
                ),
            )
        return sampler

    def _forget(self, index: int) -> None:
        for key in [k for k in self._samplers if k[0] == index and k[1] >= 0]:
            self._samplers.pop(key).free()
        self._profiles = {k: v for k, v in self._profiles.items() if k[0] != index}

    def free(self) -> None:
        for sampler in self._samplers.values():
            sampler.free()
        self._samplers.clear()


def _raise(error: Exception) -> None:
    raise error


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
