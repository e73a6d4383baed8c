"""What a simulated node's fake GPUs report, given what their ranks are doing."""

from __future__ import annotations

import random
from dataclasses import dataclass

from trainsignals.exporters.gpu.fake_backend import FakeGpu

from .profile import JobProfile

HOT_CELSIUS = 91.0
THERMAL_REASONS = {"sw_thermal_slowdown", "hw_thermal_slowdown"}
GPM_BEFORE_HOPPER = ("A100", "L40S")  # boards without NVML GPM: no SM / tensor activity


@dataclass(frozen=True)
class GpuLoad:
    """One GPU's situation during a tick."""

    alive: bool  # its rank's process exists
    phase: str
    stalled: bool  # spinning in a hung collective
    data_wait_ratio: float
    hot: bool
    clock_factor: float = 1.0  # a fail-slow GPU: SM clock held down without a reason bit
    waiting: bool = False  # its rank is stuck in the data loader: no kernel to run


def make_gpus(profile: JobProfile, node: int, count: int) -> list[FakeGpu]:
    return [
        FakeGpu(
            index=i,
            uuid=f"GPU-sim-{node:03d}-{i:02d}",
            model=profile.gpu_name,
            memory_total_bytes=profile.gpu_memory_bytes,
            memory_reserved_bytes=512 * 2**20,
            power_limit_watts=profile.gpu_power_limit_watts,
            power_watts=0.1 * profile.gpu_power_limit_watts,
            nvlink_up=[True] * profile.nvlinks,
            gpm_supported=not any(board in profile.gpu_name for board in GPM_BEFORE_HOPPER),
        )
        for i in range(count)
    ]


def utilization(load: GpuLoad) -> float:
    if not load.alive or load.phase == "startup":
        return 0.0
    if load.waiting:
        return 0.0
    if load.stalled:
        return 1.0  # NCCL kernels spin while waiting for a peer
    if load.phase in ("train", "warmup"):
        return 0.97 * (1.0 - load.data_wait_ratio)
    return 0.55 if load.phase == "eval" else 0.12


def activity(load: GpuLoad, util: float) -> tuple[float, float]:
    """(SM active, tensor active) as GPM reports them: a hung collective keeps a kernel
    running (utilization 1.0) on a few SMs with idle tensor pipes."""
    if load.stalled and load.alive:
        return 0.08, 0.0
    if load.phase in ("train", "warmup"):
        return 0.88 * util, 0.62 * util
    return 0.6 * util, 0.25 * util


def update_gpu(gpu: FakeGpu, load: GpuLoad, pid: int, dt_real: float, rng: random.Random) -> None:
    """Set the gauges of one tick and advance energy by dt_real (per real second)."""
    util = min(1.0, max(0.0, utilization(load) + rng.gauss(0.0, 0.01)))
    limit = gpu.power_limit_watts
    power = limit * (0.12 + 0.75 * util)
    busy_memory = load.alive and load.phase != "startup"
    used = int(gpu.memory_total_bytes * (0.75 + rng.uniform(-0.005, 0.005))) if busy_memory else 0
    gpu.utilization_ratio = util
    gpu.memory_utilization_ratio = 0.4 * util
    gpu.sm_active_ratio, gpu.tensor_active_ratio = activity(load, util)
    gpu.memory_used_bytes = used if load.alive else 512 * 2**20
    gpu.power_watts = power
    gpu.energy_joules += power * dt_real
    gpu.pcie_tx_bytes_per_second = 1.5e9 * util
    gpu.pcie_rx_bytes_per_second = 2.5e9 * util
    gpu.processes = [(pid, "python", int(used * 0.97))] if busy_memory else []
    if load.hot:
        gpu.temperature_celsius = HOT_CELSIUS + rng.uniform(-0.5, 0.5)
        gpu.throttle_reasons = set(THERMAL_REASONS)
        gpu.sm_clock_hertz = 0.6 * gpu.sm_clock_max_hertz
    else:
        gpu.temperature_celsius = 33.0 + 34.0 * util + rng.uniform(-0.5, 0.5)
        gpu.throttle_reasons = set()
        gpu.sm_clock_hertz = gpu.sm_clock_max_hertz * load.clock_factor
