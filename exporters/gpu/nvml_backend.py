"""The real backend: pynvml (nvidia-ml-py), with NVML's units turned into base units.

nvmlInit runs once; device handles are cached. Every pynvml.NVMLError becomes a
BackendError carrying the NVML function name and a short code.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pynvml

from trainsignals.exporters.gpu.backend import (
    GPU_IS_LOST,
    NO_PERMISSION,
    NOT_SUPPORTED,
    TIMEOUT,
    UNKNOWN,
    Activity,
    BackendError,
    Clocks,
    GpuBackend,
    GpuProcess,
    Identity,
    Memory,
    MigInstance,
    NvLink,
    XidEvent,
)
from trainsignals.exporters.gpu.nvml_gpm import GpmAndMig

T = TypeVar("T")

_CODES: dict[int, str] = {
    pynvml.NVML_ERROR_GPU_IS_LOST: GPU_IS_LOST,
    pynvml.NVML_ERROR_NOT_SUPPORTED: NOT_SUPPORTED,
    pynvml.NVML_ERROR_TIMEOUT: TIMEOUT,
    pynvml.NVML_ERROR_NO_PERMISSION: NO_PERMISSION,
    pynvml.NVML_ERROR_FUNCTION_NOT_FOUND: "function_not_found",
    pynvml.NVML_ERROR_LIBRARY_NOT_FOUND: "library_not_found",
    pynvml.NVML_ERROR_DRIVER_NOT_LOADED: "driver_not_loaded",
    pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH: "driver_library_mismatch",
    pynvml.NVML_ERROR_UNINITIALIZED: "uninitialized",
    pynvml.NVML_ERROR_INVALID_ARGUMENT: "invalid_argument",
    pynvml.NVML_ERROR_NOT_FOUND: "not_found",
    pynvml.NVML_ERROR_GPU_NOT_FOUND: "gpu_not_found",
    pynvml.NVML_ERROR_RESET_REQUIRED: "reset_required",
    pynvml.NVML_ERROR_INSUFFICIENT_POWER: "insufficient_power",
    pynvml.NVML_ERROR_IRQ_ISSUE: "irq_issue",
    pynvml.NVML_ERROR_CORRUPTED_INFOROM: "corrupted_inforom",
    pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH: "argument_version_mismatch",
}

# Bits of nvmlDeviceGetCurrentClocksEventReasons, named as in metric_catalog.THROTTLE_REASONS.
_REASON_BITS: dict[str, int] = {
    "gpu_idle": pynvml.nvmlClocksEventReasonGpuIdle,
    "applications_clocks_setting": pynvml.nvmlClocksEventReasonApplicationsClocksSetting,
    "sw_power_cap": pynvml.nvmlClocksEventReasonSwPowerCap,
    "hw_slowdown": pynvml.nvmlClocksEventReasonHwSlowdown,
    "sync_boost": pynvml.nvmlClocksEventReasonSyncBoost,
    "sw_thermal_slowdown": pynvml.nvmlClocksEventReasonSwThermalSlowdown,
    "hw_thermal_slowdown": pynvml.nvmlClocksEventReasonHwThermalSlowdown,
    "hw_power_brake_slowdown": pynvml.nvmlClocksEventReasonHwPowerBrakeSlowdown,
    "display_clock_setting": pynvml.nvmlClocksEventReasonDisplayClockSetting,
}

_NVLINK_COUNTERS: dict[str, int] = {
    "replay": pynvml.NVML_NVLINK_ERROR_DL_REPLAY,
    "recovery": pynvml.NVML_NVLINK_ERROR_DL_RECOVERY,
    "crc_flit": pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT,
    "crc_data": pynvml.NVML_NVLINK_ERROR_DL_CRC_DATA,
}

# Answers that mean "this link / counter does not exist here", not a fault.
_ABSENT = (
    pynvml.NVML_ERROR_NOT_SUPPORTED,
    pynvml.NVML_ERROR_INVALID_ARGUMENT,
    pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,
)


def _nvml(function: str, fn: Callable[..., T], *args: Any) -> T:
    try:
        return fn(*args)
    except pynvml.NVMLError as e:
        raise BackendError(function, _CODES.get(e.value, UNKNOWN), str(e)) from None


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def process_name(pid: int) -> str:
    """The command name from /proc; "unknown" when the pid is in another PID namespace."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() or "unknown"
    except OSError:
        return "unknown"


class NvmlBackend(GpuBackend):
    def __init__(self) -> None:
        self._initialized = False
        self._handles: list[Any] = []
        self._links: dict[int, list[int]] = {}  # GPU -> links that exist, found once
        self._memory_v2 = True
        self._event_set: Any = None
        self._event_error: BackendError | None = None
        self._gpm = GpmAndMig(_nvml)

    # --- library -----------------------------------------------------------------------
    def init(self) -> None:
        if self._initialized:
            return
        _nvml("nvmlInit", pynvml.nvmlInit)
        count = _nvml("nvmlDeviceGetCount", pynvml.nvmlDeviceGetCount)
        self._handles = [None] * count
        self._initialized = True
        for i in range(count):
            with contextlib.suppress(BackendError):  # reported per GPU at scrape time
                self._handle(i)
        self._register_events()

    def shutdown(self) -> None:
        if self._initialized:
            self._gpm.free()
            if self._event_set is not None:
                with contextlib.suppress(pynvml.NVMLError):
                    pynvml.nvmlEventSetFree(self._event_set)
            pynvml.nvmlShutdown()
            self._initialized = False

    def driver_version(self) -> str:
        return _text(_nvml("nvmlSystemGetDriverVersion", pynvml.nvmlSystemGetDriverVersion))

    def nvml_version(self) -> str:
        return _text(_nvml("nvmlSystemGetNVMLVersion", pynvml.nvmlSystemGetNVMLVersion))

    def device_count(self) -> int:
        return len(self._handles)

    def _handle(self, index: int) -> Any:
        """Cached handle; retried when the GPU could not be opened at start."""
        if self._handles[index] is None:
            self._handles[index] = _nvml(
                "nvmlDeviceGetHandleByIndex", pynvml.nvmlDeviceGetHandleByIndex, index
            )
        return self._handles[index]

    # --- per-GPU queries -----------------------------------------------------------
    def identity(self, index: int) -> Identity:
        h = self._handle(index)
        return Identity(
            uuid=_text(_nvml("nvmlDeviceGetUUID", pynvml.nvmlDeviceGetUUID, h)),
            model=_text(_nvml("nvmlDeviceGetName", pynvml.nvmlDeviceGetName, h)),
            pci_bus_id=_text(_nvml("nvmlDeviceGetPciInfo", pynvml.nvmlDeviceGetPciInfo, h).busId),
        )

    def utilization(self, index: int) -> tuple[float, float]:
        u = _nvml(
            "nvmlDeviceGetUtilizationRates",
            pynvml.nvmlDeviceGetUtilizationRates,
            self._handle(index),
        )
        return u.gpu / 100.0, u.memory / 100.0

    def memory(self, index: int) -> Memory:
        h = self._handle(index)
        if self._memory_v2:  # v2 adds `reserved`; drivers before R510 lack it
            try:
                m = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
                return Memory(int(m.total), int(m.used), int(m.reserved))
            except pynvml.NVMLError as e:
                if e.value not in (*_ABSENT, pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH):
                    raise BackendError(
                        "nvmlDeviceGetMemoryInfo_v2", _CODES.get(e.value, UNKNOWN), str(e)
                    ) from None
                self._memory_v2 = False
        m = _nvml("nvmlDeviceGetMemoryInfo", pynvml.nvmlDeviceGetMemoryInfo, h)
        return Memory(int(m.total), int(m.used), 0)

    def power(self, index: int) -> float:
        mw = _nvml("nvmlDeviceGetPowerUsage", pynvml.nvmlDeviceGetPowerUsage, self._handle(index))
        return mw / 1000.0

    def power_limit(self, index: int) -> float:
        mw = _nvml(
            "nvmlDeviceGetEnforcedPowerLimit",
            pynvml.nvmlDeviceGetEnforcedPowerLimit,
            self._handle(index),
        )
        return mw / 1000.0

    def energy(self, index: int) -> float:
        mj = _nvml(
            "nvmlDeviceGetTotalEnergyConsumption",
            pynvml.nvmlDeviceGetTotalEnergyConsumption,
            self._handle(index),
        )
        return mj / 1000.0

    def temperature(self, index: int) -> float:
        return float(
            _nvml(
                "nvmlDeviceGetTemperature",
                pynvml.nvmlDeviceGetTemperature,
                self._handle(index),
                pynvml.NVML_TEMPERATURE_GPU,
            )
        )

    def clocks(self, index: int) -> Clocks:
        h, f = self._handle(index), pynvml.nvmlDeviceGetClockInfo
        return Clocks(
            _nvml("nvmlDeviceGetClockInfo", f, h, pynvml.NVML_CLOCK_SM) * 1e6,
            _nvml("nvmlDeviceGetClockInfo", f, h, pynvml.NVML_CLOCK_MEM) * 1e6,
        )

    def max_clocks(self, index: int) -> Clocks:
        h, f = self._handle(index), pynvml.nvmlDeviceGetMaxClockInfo
        return Clocks(
            _nvml("nvmlDeviceGetMaxClockInfo", f, h, pynvml.NVML_CLOCK_SM) * 1e6,
            _nvml("nvmlDeviceGetMaxClockInfo", f, h, pynvml.NVML_CLOCK_MEM) * 1e6,
        )

    def throttle_reasons(self, index: int) -> frozenset[str]:
        mask = _nvml(
            "nvmlDeviceGetCurrentClocksEventReasons",
            pynvml.nvmlDeviceGetCurrentClocksEventReasons,
            self._handle(index),
        )
        return frozenset(name for name, bit in _REASON_BITS.items() if mask & bit)

    def ecc_errors(self, index: int) -> tuple[int, int]:
        h, f = self._handle(index), pynvml.nvmlDeviceGetTotalEccErrors
        corrected = _nvml(
            "nvmlDeviceGetTotalEccErrors",
            f,
            h,
            pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED,
            pynvml.NVML_VOLATILE_ECC,
        )
        uncorrected = _nvml(
            "nvmlDeviceGetTotalEccErrors",
            f,
            h,
            pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
            pynvml.NVML_VOLATILE_ECC,
        )
        return int(corrected), int(uncorrected)

    def remapped_rows(self, index: int) -> tuple[bool, bool]:
        _corr, _unc, pending, failed = _nvml(
            "nvmlDeviceGetRemappedRows", pynvml.nvmlDeviceGetRemappedRows, self._handle(index)
        )
        return bool(pending), bool(failed)

    def pcie_throughput(self, index: int) -> tuple[float, float]:
        # Each call samples for 20 ms inside the driver; NVML reports KB/s.
        h, f = self._handle(index), pynvml.nvmlDeviceGetPcieThroughput
        tx = _nvml("nvmlDeviceGetPcieThroughput", f, h, pynvml.NVML_PCIE_UTIL_TX_BYTES)
        rx = _nvml("nvmlDeviceGetPcieThroughput", f, h, pynvml.NVML_PCIE_UTIL_RX_BYTES)
        return tx * 1024.0, rx * 1024.0

    def nvlink(self, index: int) -> list[NvLink]:
        h = self._handle(index)
        links = self._links.get(index)
        if links is None:
            links = self._links[index] = self._present_links(h)
        if not links:
            raise BackendError("nvmlDeviceGetNvLinkState", NOT_SUPPORTED, "no NVLink")
        result = []
        for link in links:
            up = _nvml("nvmlDeviceGetNvLinkState", pynvml.nvmlDeviceGetNvLinkState, h, link)
            errors = {}
            for name, counter in _NVLINK_COUNTERS.items():
                try:
                    errors[name] = int(pynvml.nvmlDeviceGetNvLinkErrorCounter(h, link, counter))
                except pynvml.NVMLError as e:
                    if e.value not in _ABSENT:  # some counters are gone on newer GPUs
                        raise BackendError(
                            "nvmlDeviceGetNvLinkErrorCounter", _CODES.get(e.value, UNKNOWN), str(e)
                        ) from None
            result.append(NvLink(link, bool(up), errors))
        return result

    @staticmethod
    def _present_links(handle: Any) -> list[int]:
        present = []
        for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
            try:
                pynvml.nvmlDeviceGetNvLinkState(handle, link)
            except pynvml.NVMLError as e:
                if e.value in _ABSENT:
                    continue
                raise BackendError(
                    "nvmlDeviceGetNvLinkState", _CODES.get(e.value, UNKNOWN), str(e)
                ) from None
            present.append(link)
        return present

    def fan_speeds(self, index: int) -> list[float]:
        h = self._handle(index)
        count = _nvml("nvmlDeviceGetNumFans", pynvml.nvmlDeviceGetNumFans, h)
        if not count:
            raise BackendError("nvmlDeviceGetFanSpeed_v2", NOT_SUPPORTED, "no fans")
        return [
            _nvml("nvmlDeviceGetFanSpeed_v2", pynvml.nvmlDeviceGetFanSpeed_v2, h, fan) / 100.0
            for fan in range(count)
        ]

    def processes(self, index: int) -> list[GpuProcess]:
        procs = _nvml(
            "nvmlDeviceGetComputeRunningProcesses",
            pynvml.nvmlDeviceGetComputeRunningProcesses,
            self._handle(index),
        )
        # usedGpuMemory is None where the driver cannot attribute memory (e.g. some vGPUs).
        return [GpuProcess(p.pid, process_name(p.pid), int(p.usedGpuMemory or 0)) for p in procs]

    def gpm(self, index: int) -> Activity | None:
        return self._gpm.gpu_activity(index, self._handle(index))

    def mig_instances(self, index: int) -> list[MigInstance]:
        return self._gpm.mig_instances(index, self._handle(index))

    # --- events ------------------------------------------------------------------------
    def _register_events(self) -> None:
        try:
            self._event_set = _nvml("nvmlEventSetCreate", pynvml.nvmlEventSetCreate)
        except BackendError as e:
            self._event_error = e
            return
        registered = 0
        for h in self._handles:
            if h is None:
                continue
            try:
                _nvml(
                    "nvmlDeviceRegisterEvents",
                    pynvml.nvmlDeviceRegisterEvents,
                    h,
                    pynvml.nvmlEventTypeXidCriticalError,
                    self._event_set,
                )
                registered += 1
            except BackendError as e:
                self._event_error = e
        if not registered:
            self._event_error = self._event_error or BackendError(
                "nvmlDeviceRegisterEvents", NOT_SUPPORTED, "no GPU accepts XID events"
            )
            self._event_set = None

    def wait_xid(self, timeout_s: float) -> list[XidEvent]:
        if self._event_set is None:
            raise self._event_error or BackendError("nvmlEventSetCreate", NOT_SUPPORTED)
        try:
            data = pynvml.nvmlEventSetWait_v2(self._event_set, int(timeout_s * 1000))
        except pynvml.NVMLError as e:
            if e.value == pynvml.NVML_ERROR_TIMEOUT:
                return []
            raise BackendError(
                "nvmlEventSetWait_v2", _CODES.get(e.value, UNKNOWN), str(e)
            ) from None
        if not data.eventType & pynvml.nvmlEventTypeXidCriticalError:
            return []
        try:
            index = int(pynvml.nvmlDeviceGetIndex(data.device))
        except pynvml.NVMLError:
            index = -1  # collector ignores GPUs it does not export
        return [XidEvent(index, int(data.eventData))]
