"""The GPU backend interface: what the collector asks of NVML, in base units.

Two implementations: `nvml_backend.NvmlBackend` (real hardware, pynvml) and
`fake_backend.FakeBackend` (hardware these machines lack; drives tests, the simulator and
`--fake`). Every method that queries one GPU takes its NVML index and either returns a value
in base units or raises `BackendError`. The collector calls each method at most once per GPU
per scrape, so a method is also the unit of "not supported" memory and of error counting.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

# Error codes carried by BackendError (label values of ..._nvml_errors_total{error}).
GPU_IS_LOST = "gpu_is_lost"
NOT_SUPPORTED = "not_supported"
TIMEOUT = "timeout"
NO_PERMISSION = "no_permission"
UNKNOWN = "unknown"

# Codes that describe the model or driver, not the GPU's health: remembered per GPU and
# function, never retried, not counted as errors and never turn `up` to 0.
UNSUPPORTED_CODES = frozenset({NOT_SUPPORTED, "function_not_found"})

# Backend method -> the NVML function it wraps (the `function` label of the error counter).
NVML_FUNCTIONS: dict[str, str] = {
    "init": "nvmlInit",
    "device_count": "nvmlDeviceGetCount",
    "identity": "nvmlDeviceGetUUID",
    "utilization": "nvmlDeviceGetUtilizationRates",
    "memory": "nvmlDeviceGetMemoryInfo",
    "power": "nvmlDeviceGetPowerUsage",
    "power_limit": "nvmlDeviceGetEnforcedPowerLimit",
    "energy": "nvmlDeviceGetTotalEnergyConsumption",
    "temperature": "nvmlDeviceGetTemperature",
    "clocks": "nvmlDeviceGetClockInfo",
    "max_clocks": "nvmlDeviceGetMaxClockInfo",
    "throttle_reasons": "nvmlDeviceGetCurrentClocksEventReasons",
    "ecc_errors": "nvmlDeviceGetTotalEccErrors",
    "remapped_rows": "nvmlDeviceGetRemappedRows",
    "pcie_throughput": "nvmlDeviceGetPcieThroughput",
    "nvlink": "nvmlDeviceGetNvLinkState",
    "fan_speeds": "nvmlDeviceGetFanSpeed_v2",
    "processes": "nvmlDeviceGetComputeRunningProcesses",
    "gpm": "nvmlGpmMetricsGet",
    "mig_instances": "nvmlDeviceGetMigMode",
    "wait_xid": "nvmlEventSetWait_v2",
}


class BackendError(Exception):
    """An NVML call failed: which function, and a short snake-case error code."""

    def __init__(self, function: str, code: str, detail: str = "") -> None:
        super().__init__(f"{function}: {code}" + (f" ({detail})" if detail else ""))
        self.function = function
        self.code = code
        self.detail = detail


@dataclass(frozen=True)
class Identity:
    uuid: str
    model: str
    pci_bus_id: str


@dataclass(frozen=True)
class Memory:
    total_bytes: int
    used_bytes: int
    reserved_bytes: int


@dataclass(frozen=True)
class Clocks:
    sm_hertz: float
    memory_hertz: float


@dataclass(frozen=True)
class NvLink:
    link: int
    up: bool
    errors: dict[str, int]  # error_type (replay, recovery, crc_flit, crc_data) -> count


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    name: str
    used_bytes: int


@dataclass(frozen=True)
class Activity:
    """GPM profiling ratios 0..1 over the time since the previous sample (Hopper and newer);
    None where NVML does not report that metric for this GPU."""

    sm_active: float | None  # NVML_GPM_METRIC_SM_UTIL: share of SMs with a warp assigned
    tensor_active: float | None  # NVML_GPM_METRIC_ANY_TENSOR_UTIL: tensor pipes busy


@dataclass(frozen=True)
class MigInstance:
    """One MIG GPU instance, named as dcgm-exporter names it (GPU_I_ID, GPU_I_PROFILE)."""

    gpu_instance_id: int
    profile: str  # e.g. "1g.10gb", nvidia-smi's profile name without "MIG "
    memory_total_bytes: int
    memory_used_bytes: int
    activity: Activity | None  # None until two GPM samples exist, or without GPM


@dataclass(frozen=True)
class XidEvent:
    index: int  # NVML index of the GPU that raised it
    xid: int


class GpuBackend(ABC):
    """NVML, reduced to what the exporter reads. Raise BackendError, nothing else."""

    @abstractmethod
    def init(self) -> None:
        """Initialise the library once; a second call is a no-op."""

    @abstractmethod
    def shutdown(self) -> None: ...

    @abstractmethod
    def driver_version(self) -> str: ...

    @abstractmethod
    def nvml_version(self) -> str: ...

    @abstractmethod
    def device_count(self) -> int: ...

    @abstractmethod
    def identity(self, index: int) -> Identity: ...

    @abstractmethod
    def utilization(self, index: int) -> tuple[float, float]:
        """(gpu, memory) utilization as ratios 0..1."""

    @abstractmethod
    def memory(self, index: int) -> Memory: ...

    @abstractmethod
    def power(self, index: int) -> float:
        """Power draw in watts."""

    @abstractmethod
    def power_limit(self, index: int) -> float:
        """Enforced power limit in watts."""

    @abstractmethod
    def energy(self, index: int) -> float:
        """Joules since the driver loaded (monotonic)."""

    @abstractmethod
    def temperature(self, index: int) -> float:
        """Core temperature in degrees Celsius."""

    @abstractmethod
    def clocks(self, index: int) -> Clocks: ...

    @abstractmethod
    def max_clocks(self, index: int) -> Clocks: ...

    @abstractmethod
    def throttle_reasons(self, index: int) -> frozenset[str]:
        """Active clocks-event reasons, names from metric_catalog.THROTTLE_REASONS."""

    @abstractmethod
    def ecc_errors(self, index: int) -> tuple[int, int]:
        """Volatile (corrected, uncorrected) ECC error counts."""

    @abstractmethod
    def remapped_rows(self, index: int) -> tuple[bool, bool]:
        """(pending, failed)."""

    @abstractmethod
    def pcie_throughput(self, index: int) -> tuple[float, float]:
        """(transmit, receive) in bytes per second."""

    @abstractmethod
    def nvlink(self, index: int) -> list[NvLink]:
        """Present links only; empty when the GPU has no NVLink."""

    @abstractmethod
    def fan_speeds(self, index: int) -> list[float]:
        """Ratios 0..1 per fan; raise not_supported when the board has none."""

    @abstractmethod
    def processes(self, index: int) -> list[GpuProcess]: ...

    # Not abstract: a backend without them reports "not supported", which the collector
    # remembers, so older backends keep working.
    def gpm(self, index: int) -> Activity | None:
        """GPM activity since the previous call for this GPU; None on the first call (GPM
        needs two samples). Raise not_supported where the GPU has no GPM (before Hopper)."""
        raise BackendError(NVML_FUNCTIONS["gpm"], NOT_SUPPORTED)

    def mig_instances(self, index: int) -> list[MigInstance]:
        """MIG GPU instances; [] with MIG mode off; not_supported where the GPU has no MIG."""
        raise BackendError(NVML_FUNCTIONS["mig_instances"], NOT_SUPPORTED)

    @abstractmethod
    def wait_xid(self, timeout_s: float) -> list[XidEvent]:
        """Block up to timeout_s for XID critical-error events; [] on timeout."""
