"""What the framework callbacks share: step timing between hooks and per-step loss.

HF Trainer and Lightning call hooks around each optimizer step but never hand the loss of that
step to a callback in a way that survives their NaN handling (Trainer's default
`logging_nan_inf_filter` drops non-finite losses from what it logs). So the callbacks collect
each micro-batch loss as a detached tensor and turn them into one number per optimizer step:
one device sync per step, not per micro-batch.
"""

from __future__ import annotations

import math
import time
from typing import Any

from .metrics import TrainingMetrics


class StepClock:
    """Turns hook times into TrainingMetrics calls.

    A step's duration runs from the end of the previous step (or of the last eval/checkpoint
    pause) to its own end, so the data loading before it is included; the part before the
    framework's step-begin hook is also counted as data wait.
    """

    def __init__(self, metrics: TrainingMetrics) -> None:
        self.metrics = metrics
        self._ref: float | None = None  # end of the previous step or pause
        self._begun: float | None = None
        self._losses: list[Any] = []
        self._tokens = 0.0
        self._samples = 0.0

    def resume(self) -> None:
        """Training (re)starts now: after train begin, an eval or a checkpoint."""
        self._ref = time.perf_counter()

    def begin(self) -> None:
        now = time.perf_counter()
        if self._ref is None:
            self._ref = now
        self.metrics.add_data_wait(now - self._ref)
        self._begun = now

    def add_batch(self, loss: Any = None, tokens: float = 0, samples: float = 0) -> None:
        """One micro-batch: its loss (tensor or number), its tokens and samples."""
        if loss is not None:
            self._losses.append(loss.detach() if hasattr(loss, "detach") else float(loss))
        self._tokens += tokens
        self._samples += samples

    def end(self, tokens: float | None = None) -> None:
        """The optimizer step is done. `tokens` overrides the counted ones when known."""
        now = time.perf_counter()
        start = self._ref if self._ref is not None else (self._begun or now)
        self.metrics.observe_step(
            now - start, tokens=self._tokens if tokens is None else tokens, samples=self._samples
        )
        if self._losses:
            self.metrics.loss(mean_loss(self._losses))
        self._losses.clear()
        self._tokens = self._samples = 0.0
        self._ref, self._begun = now, None


def mean_loss(losses: list[Any]) -> float:
    """Mean of the micro-batch losses; NaN when any is NaN or infinite (one .item() sync)."""
    total = losses[0] if len(losses) == 1 else sum(losses[1:], losses[0])
    value = float(total.float().mean().item()) if hasattr(total, "item") else float(total)
    return value / len(losses) if math.isfinite(value) else math.nan
