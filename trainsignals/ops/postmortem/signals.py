"""The golden signals a postmortem plots, and the spec's bound drawn on each."""

from __future__ import annotations

from dataclasses import dataclass

from trainsignals.generator.spec.job import JobSpec


@dataclass(frozen=True)
class Signal:
    key: str  # file name of the plot
    title: str
    record: str  # recording rule (generator/signals/recording.py)
    unit: str


SIGNALS: tuple[Signal, ...] = (
    Signal("tokens", "Throughput (tokens/s)", "job:trainsignals_tokens:rate5m", "tokens/s"),
    Signal(
        "step_time_p95",
        "Step time p95 (s)",
        "job:trainsignals_step_duration_seconds:p95_5m",
        "s",
    ),
    Signal("mfu", "MFU", "job:trainsignals_mfu:ratio_rate5m", "ratio"),
    Signal("loss", "Loss", "job:trainsignals_loss:avg", ""),
    Signal("data_wait", "Data-wait share", "job:trainsignals_data_wait:ratio_rate5m", "ratio"),
)
LAST_STEP_AGE = "job:trainsignals_last_step:age_seconds"
GPU_COUNT = "node:trainsignals_gpus:count"  # GPU series per node (a lost GPU still has one)


@dataclass
class SignalView:
    signal: Signal
    query: str
    plot: str  # path relative to the Markdown file
    before: float | None
    during: float | None
    after: float | None
    low: float | None
    high: float | None
    newest: float | None = None  # newest sample: nothing is plotted or averaged past it


def threshold(spec: JobSpec | None, key: str) -> tuple[float | None, str]:
    """The spec's bound the alerts use for this signal, and its legend label."""
    if spec is None:
        return None, ""
    if key == "tokens":
        return spec.tokens_per_second_floor, "throughput floor"
    if key == "step_time_p95":
        return spec.objectives.step_time_max_seconds, "step-time bound"
    if key == "mfu":
        return spec.objectives.mfu_min_ratio, "MFU floor"
    if key == "data_wait":
        return spec.objectives.data_wait_max_ratio, "data-wait ceiling"
    return None, ""
