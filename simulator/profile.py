"""Healthy nominal values of a simulated job, derived from its spec.

Everything sits comfortably inside the spec's objectives: MFU at 1.5x its floor, 5% data
wait, steps well under step_time_max_seconds, pauses well under max_pause, checkpoints at a
quarter of checkpoint_max_age.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trainsignals.generator.spec.job import JobSpec

# NVML's name, memory, power limit and NVLink count per gpu_models key.
GPU_BOARDS: dict[str, tuple[str, int, float, int]] = {
    "A100": ("NVIDIA A100-SXM4-80GB", 80 * 2**30, 400.0, 12),
    "H100-SXM": ("NVIDIA H100 80GB HBM3", 80 * 2**30, 700.0, 18),
    "H100-PCIe": ("NVIDIA H100 PCIe", 80 * 2**30, 350.0, 0),
    "H200": ("NVIDIA H200", 141 * 2**30, 700.0, 18),
    "B200": ("NVIDIA B200", 180 * 2**30, 1000.0, 18),
    "L40S": ("NVIDIA L40S", 48 * 2**30, 350.0, 0),
}
SEQ_LEN = 2048  # tokens per sample, to derive samples from tokens


@dataclass(frozen=True)
class JobProfile:
    world_size: int
    mfu: float  # healthy MFU while training
    step_seconds: float  # healthy step wall time, data wait included
    tokens_per_step: int  # per rank
    samples_per_step: int  # per rank
    data_wait_ratio: float
    startup_seconds: int
    warmup_seconds: int
    warmup_start_speed: float
    checkpoint_interval: int
    checkpoint_pause: int
    eval_interval: int
    eval_pause: int
    disk_size_bytes: int
    disk_free_ratio: float
    gpu_name: str
    gpu_memory_bytes: int
    gpu_power_limit_watts: float
    nvlinks: int

    @classmethod
    def from_spec(cls, spec: JobSpec) -> JobProfile:
        shape, obj = spec.shape, spec.objectives
        world = shape.gpus
        mfu = min(0.9, 1.5 * obj.mfu_min_ratio)
        achieved_flops = mfu * shape.peak_flops
        if shape.model_flops_per_token is not None:
            step = 0.5
            if obj.step_time_max_seconds:
                step = min(step, 0.25 * obj.step_time_max_seconds)
            tokens_per_s = achieved_flops / shape.model_flops_per_token
            tokens = max(1, round(tokens_per_s / world * step))
        else:
            # FLOPs per optimizer step given: the step rate follows from the MFU target.
            step = shape.model_flops_per_step / achieved_flops
            tokens = 8 * SEQ_LEN
        name, memory, power, nvlinks = GPU_BOARDS.get(
            shape.gpu_model, ("NVIDIA GPU", 80 * 2**30, 700.0, 0)
        )
        # Saves at least twice per cadence interval and four times per max age: compressed-time
        # scenarios need a few saves per simulated hour, and the healthy job never nears the limit.
        every = min(spec.cadence.checkpoint_interval // 2, obj.checkpoint_max_age // 4)
        ckpt_interval = max(every, 600)
        return cls(
            world_size=world,
            mfu=mfu,
            step_seconds=step,
            tokens_per_step=tokens,
            samples_per_step=max(1, round(tokens / SEQ_LEN)),
            data_wait_ratio=0.05,
            startup_seconds=120,
            warmup_seconds=600,
            warmup_start_speed=0.4,
            checkpoint_interval=ckpt_interval,
            checkpoint_pause=min(60, obj.max_pause // 4),
            eval_interval=3600,
            eval_pause=min(180, obj.max_pause // 4),
            disk_size_bytes=16 * 2**40,
            disk_free_ratio=0.55,
            gpu_name=name,
            gpu_memory_bytes=memory,
            gpu_power_limit_watts=power,
            nvlinks=nvlinks,
        )

    def phase_at(self, t: float) -> str:
        """The healthy phase at simulated second t (the timeline's schedule)."""
        if t < self.startup_seconds:
            return "startup"
        if t < self.startup_seconds + self.warmup_seconds:
            return "warmup"
        since = t - self.startup_seconds - self.warmup_seconds
        if since >= self.checkpoint_interval and (
            since % self.checkpoint_interval < self.checkpoint_pause
        ):
            return "checkpoint"
        # Evals sit between checkpoints (offset half an interval), so the two rarely meet.
        eval_start = (self.checkpoint_interval // 2) % self.eval_interval
        if eval_start <= since % self.eval_interval < eval_start + self.eval_pause:
            return "eval"
        return "train"

    def speed_at(self, t: float) -> float:
        """Healthy compute speed: warm-up ramps linearly to 1."""
        warm = t - self.startup_seconds
        if warm >= self.warmup_seconds:
            return 1.0
        share = max(0.0, warm) / self.warmup_seconds
        return self.warmup_start_speed + (1.0 - self.warmup_start_speed) * share

    def faulty_loss(self, t: float, mode: str, fault_at: float, noise: float) -> float:
        """The loss at simulated second t, times `noise`, under the loss fault `mode` from
        `fault_at`: normal (none), nan, plateau (the onset's value), diverge (exponential)."""
        if mode == "nan":
            return math.nan
        if mode == "plateau":
            return self.loss_at(fault_at - self.startup_seconds) * noise
        value = self.loss_at(t - self.startup_seconds) * noise
        if mode == "diverge":
            value *= min(math.exp((t - fault_at) / 600.0), 1e6)
        return value

    @staticmethod
    def loss_at(t: float) -> float:
        """Healthy loss: power-law decay; still >1% better per 6h after a simulated day."""
        return 2.0 + 8.0 * (1.0 + max(0.0, t) / 1000.0) ** -0.5
