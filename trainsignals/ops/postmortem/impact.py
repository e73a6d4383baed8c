"""A postmortem's impact figures: time without step progress, tokens below the floor, GPU-hours."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trainsignals.generator.spec.job import JobSpec


@dataclass
class Impact:
    duration: float
    gpus: int | None
    gpu_hours: float | None
    gpus_from: str  # where `gpus` comes from: what ran, or the spec's shape
    max_step_age: float | None
    floor: float | None
    tokens_lost: float | None
    seconds_below_floor: float
    seconds_without_data: float


def impact(
    spec: JobSpec | None,
    tokens: list[tuple[float, float]],
    step_age: list[tuple[float, float]],
    start: float,
    end: float,
    step: float,
    gpu_counts: Sequence[tuple[float, float]] = (),
) -> Impact:
    """`gpu_counts`: the job's GPUs reporting over time; the count when the window began (or
    the first inside it) is what ran. The spec's shape only where no GPU series exists: a job
    runs on fewer GPUs than the spec allows (a smaller test run, the demo's 2 x 2)."""
    duration = end - start
    before = [v for t, v in gpu_counts if t <= start]
    inside = [v for t, v in gpu_counts if start < t <= end]
    ran = before[-1] if before else (inside[0] if inside else None)
    if ran:
        gpus, gpus_from = round(ran), "GPUs reporting when the window began"
    else:
        gpus, gpus_from = (spec.shape.gpus if spec else None), "the spec's shape: no GPU series"
    floor = spec.tokens_per_second_floor if spec else None
    inside = [(t, v) for t, v in tokens if start <= t <= end]
    # Each sample stands for one step of time; gaps are reported, not guessed.
    below = [(t, v) for t, v in inside if floor is not None and v < floor]
    lost = sum((floor - v) * step for _, v in below) if floor is not None else None
    covered = len(inside) * step
    ages = [v for t, v in step_age if start <= t <= end]
    return Impact(
        duration=duration,
        gpus=gpus,
        gpu_hours=gpus * duration / 3600 if gpus else None,
        gpus_from=gpus_from,
        max_step_age=max(ages) if ages else None,
        floor=floor,
        tokens_lost=lost,
        seconds_below_floor=len(below) * step,
        seconds_without_data=max(0.0, duration - covered),
    )
