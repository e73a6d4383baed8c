"""A GPU backend without hardware: the stand-in for the GPUs these machines lack.

Tests, the simulator and `trainsignals-gpu-exporter --fake N` drive it. A `FakeGpu` is
mutable: change its fields between (or during) scrapes. Set `lost=True` to make every query
of that GPU raise gpu_is_lost, or `failing={"fan_speeds": "not_supported"}` to make one
backend method raise a given error code (keys are GpuBackend method names, see
backend.NVML_FUNCTIONS). GPM activity (`sm_active_ratio`, `tensor_active_ratio`) is reported
from the second query on, as NVML needs two samples; `gpm_supported=False` models a GPU before
Hopper. A non-empty `mig` list turns MIG mode on: those GPU instances are reported and, as NVML
does in MIG mode, the GPU's own utilization answers not supported. `calls` counts every
query as (method, index) so tests can prove one query per GPU per scrape. Set `event_error`
to make the XID event wait fail. Hold `lock` to make several field changes atomic with
respect to a scrape (optional: single assignments are safe without it).
"""

from __future__ import annotations

import collections
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from trainsignals.exporters.gpu.backend import (
    GPU_IS_LOST,
    NOT_SUPPORTED,
    NVML_FUNCTIONS,
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

T = TypeVar("T")


@dataclass
class FakeMigInstance:
    gpu_instance_id: int
    profile: str = "1g.10gb"
    memory_total_bytes: int = 10 * 2**30
    memory_used_bytes: int = 0
    sm_active_ratio: float = 0.0
    tensor_active_ratio: float = 0.0


@dataclass
class FakeGpu:
    index: int
    uuid: str = ""
    model: str = "NVIDIA H100 80GB HBM3"
    pci_bus_id: str = ""
    utilization_ratio: float = 0.0
    memory_utilization_ratio: float = 0.0
    memory_total_bytes: int = 80 * 2**30
    memory_used_bytes: int = 0
    memory_reserved_bytes: int = 0
    power_watts: float = 0.0
    power_limit_watts: float = 700.0
    energy_joules: float = 0.0
    temperature_celsius: float = 35.0
    sm_clock_hertz: float = 1.98e9
    sm_clock_max_hertz: float = 1.98e9
    memory_clock_hertz: float = 2.619e9
    memory_clock_max_hertz: float = 2.619e9
    throttle_reasons: set[str] = field(default_factory=set)
    ecc_corrected_total: int = 0
    ecc_uncorrected_total: int = 0
    remapped_rows_pending: bool = False
    remapped_rows_failed: bool = False
    pcie_tx_bytes_per_second: float = 0.0
    pcie_rx_bytes_per_second: float = 0.0
    nvlink_up: list[bool] = field(default_factory=list)
    nvlink_errors: dict[tuple[int, str], int] = field(default_factory=dict)
    fan_speed_ratios: list[float] = field(default_factory=list)
    processes: list[tuple[int, str, int]] = field(default_factory=list)
    gpm_supported: bool = True  # GPM exists from Hopper on
    sm_active_ratio: float = 0.0
    tensor_active_ratio: float = 0.0
    mig_supported: bool = True  # MIG exists on A100, A30, H100, H200, B200
    mig: list[FakeMigInstance] = field(default_factory=list)  # non-empty: MIG mode on
    lost: bool = False
    failing: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.uuid:
            self.uuid = f"GPU-fake-{self.index:04d}"
        if not self.pci_bus_id:
            self.pci_bus_id = f"00000000:{0x18 + self.index:02X}:00.0"


def _copy(make: Callable[[], T]) -> T:
    """Copy a container another thread may be mutating; retry the rare resize race."""
    for _ in range(100):
        try:
            return make()
        except RuntimeError:  # "changed size during iteration"
            continue
    return make()


class FakeBackend(GpuBackend):
    def __init__(
        self,
        gpus: list[FakeGpu],
        driver_version: str = "560.35.03",
        nvml_version: str = "12.560.35.03",
        init_error: str | None = None,
    ) -> None:
        self.gpus = gpus
        self.calls: collections.Counter[tuple[str, int]] = collections.Counter()
        self.lock = threading.RLock()
        self.init_error = init_error
        self.event_error: str | None = None  # set to make wait_xid raise this code
        self.initialized = False
        self._driver_version = driver_version
        self._nvml_version = nvml_version
        self._xids: queue.Queue[XidEvent] = queue.Queue()
        self._gpm_sampled: set[tuple[int, int]] = set()  # (GPU, GPU instance or -1)

    # --- fault injection -------------------------------------------------------------
    def inject_xid(self, index: int, xid: int) -> None:
        """Deliver an XID through the same path (wait_xid) as a real NVML event."""
        self._xids.put(XidEvent(index, xid))

    # --- library -----------------------------------------------------------------------
    def init(self) -> None:
        self.calls["init", -1] += 1
        if self.init_error:
            raise BackendError(NVML_FUNCTIONS["init"], self.init_error)
        self.initialized = True

    def shutdown(self) -> None:
        self.initialized = False

    def driver_version(self) -> str:
        return self._driver_version

    def nvml_version(self) -> str:
        return self._nvml_version

    def device_count(self) -> int:
        return len(self.gpus)

    def _gpu(self, method: str, index: int) -> FakeGpu:
        """Count the call and raise the fault configured for it, if any."""
        self.calls[method, index] += 1
        gpu = self.gpus[index]
        if gpu.lost:
            raise BackendError(NVML_FUNCTIONS[method], GPU_IS_LOST)
        code = gpu.failing.get(method)
        if code:
            raise BackendError(NVML_FUNCTIONS[method], code)
        return gpu

    # --- per-GPU queries -----------------------------------------------------------
    def identity(self, index: int) -> Identity:
        with self.lock:
            g = self._gpu("identity", index)
            return Identity(g.uuid, g.model, g.pci_bus_id)

    def utilization(self, index: int) -> tuple[float, float]:
        with self.lock:
            g = self._gpu("utilization", index)
            if g.mig:
                raise BackendError(NVML_FUNCTIONS["utilization"], NOT_SUPPORTED, "MIG mode")
            return g.utilization_ratio, g.memory_utilization_ratio

    def memory(self, index: int) -> Memory:
        with self.lock:
            g = self._gpu("memory", index)
            return Memory(g.memory_total_bytes, g.memory_used_bytes, g.memory_reserved_bytes)

    def power(self, index: int) -> float:
        with self.lock:
            return self._gpu("power", index).power_watts

    def power_limit(self, index: int) -> float:
        with self.lock:
            return self._gpu("power_limit", index).power_limit_watts

    def energy(self, index: int) -> float:
        with self.lock:
            return self._gpu("energy", index).energy_joules

    def temperature(self, index: int) -> float:
        with self.lock:
            return self._gpu("temperature", index).temperature_celsius

    def clocks(self, index: int) -> Clocks:
        with self.lock:
            g = self._gpu("clocks", index)
            return Clocks(g.sm_clock_hertz, g.memory_clock_hertz)

    def max_clocks(self, index: int) -> Clocks:
        with self.lock:
            g = self._gpu("max_clocks", index)
            return Clocks(g.sm_clock_max_hertz, g.memory_clock_max_hertz)

    def throttle_reasons(self, index: int) -> frozenset[str]:
        with self.lock:
            g = self._gpu("throttle_reasons", index)
            return _copy(lambda: frozenset(g.throttle_reasons))

    def ecc_errors(self, index: int) -> tuple[int, int]:
        with self.lock:
            g = self._gpu("ecc_errors", index)
            return g.ecc_corrected_total, g.ecc_uncorrected_total

    def remapped_rows(self, index: int) -> tuple[bool, bool]:
        with self.lock:
            g = self._gpu("remapped_rows", index)
            return g.remapped_rows_pending, g.remapped_rows_failed

    def pcie_throughput(self, index: int) -> tuple[float, float]:
        with self.lock:
            g = self._gpu("pcie_throughput", index)
            return g.pcie_tx_bytes_per_second, g.pcie_rx_bytes_per_second

    def nvlink(self, index: int) -> list[NvLink]:
        with self.lock:
            g = self._gpu("nvlink", index)
            ups = _copy(lambda: list(g.nvlink_up))
            errors = _copy(lambda: dict(g.nvlink_errors))
        if not ups:  # like NVML on a board without NVLink
            raise BackendError(NVML_FUNCTIONS["nvlink"], NOT_SUPPORTED)
        # One sorted pass, not one per link: 18 links x every counter showed in the benchmark.
        per_link: dict[int, dict[str, int]] = {}
        for (link, error_type), n in sorted(errors.items()):
            per_link.setdefault(link, {})[error_type] = n
        return [NvLink(link, up, per_link.get(link, {})) for link, up in enumerate(ups)]

    def fan_speeds(self, index: int) -> list[float]:
        with self.lock:
            g = self._gpu("fan_speeds", index)
            fans = _copy(lambda: list(g.fan_speed_ratios))
        if not fans:  # SXM boards have no fans: NVML answers not supported
            raise BackendError(NVML_FUNCTIONS["fan_speeds"], NOT_SUPPORTED)
        return fans

    def processes(self, index: int) -> list[GpuProcess]:
        with self.lock:
            g = self._gpu("processes", index)
            procs = _copy(lambda: list(g.processes))
        return [GpuProcess(pid, name, used) for pid, name, used in procs]

    def gpm(self, index: int) -> Activity | None:
        with self.lock:
            g = self._gpu("gpm", index)
            if not g.gpm_supported:
                raise BackendError("nvmlGpmQueryDeviceSupport", NOT_SUPPORTED)
            return self._activity((index, -1), g.sm_active_ratio, g.tensor_active_ratio)

    def _activity(self, key: tuple[int, int], sm: float, tensor: float) -> Activity | None:
        if key not in self._gpm_sampled:  # the first sample has nothing to compare with
            self._gpm_sampled.add(key)
            return None
        return Activity(sm, tensor)

    def mig_instances(self, index: int) -> list[MigInstance]:
        with self.lock:
            g = self._gpu("mig_instances", index)
            if not g.mig_supported:
                raise BackendError(NVML_FUNCTIONS["mig_instances"], NOT_SUPPORTED)
            instances = _copy(lambda: list(g.mig))
            return [
                MigInstance(
                    m.gpu_instance_id,
                    m.profile,
                    m.memory_total_bytes,
                    m.memory_used_bytes,
                    self._activity(
                        (index, m.gpu_instance_id), m.sm_active_ratio, m.tensor_active_ratio
                    )
                    if g.gpm_supported
                    else None,
                )
                for m in sorted(instances, key=lambda m: m.gpu_instance_id)
            ]

    # --- events ------------------------------------------------------------------------
    def wait_xid(self, timeout_s: float) -> list[XidEvent]:
        if self.event_error:
            raise BackendError(NVML_FUNCTIONS["wait_xid"], self.event_error)
        try:
            first = self._xids.get(timeout=timeout_s)
        except queue.Empty:
            return []
        events = [first]
        while True:  # drain what is already queued, like one pass over an event set
            try:
                events.append(self._xids.get_nowait())
            except queue.Empty:
                return events


def plausible_gpus(count: int) -> list[FakeGpu]:
    """GPUs of a busy 8-way H100 node, for demos (`--fake N`)."""
    return [
        FakeGpu(
            index=i,
            utilization_ratio=0.93,
            memory_utilization_ratio=0.41,
            memory_used_bytes=71 * 2**30,
            memory_reserved_bytes=512 * 2**20,
            power_watts=612.0 + i,
            energy_joules=3.6e6 + i * 1e4,
            temperature_celsius=61.0 + i % 4,
            sm_clock_hertz=1.755e9,
            pcie_tx_bytes_per_second=1.2e9,
            pcie_rx_bytes_per_second=2.4e9,
            nvlink_up=[True] * 18,
            processes=[(4000 + i, "python", 70 * 2**30)],
            sm_active_ratio=0.78,
            tensor_active_ratio=0.52,
        )
        for i in range(count)
    ]
