"""HF transformers: `Trainer(..., callbacks=[TrainSignalsCallback()])` exports TrainingMetrics.

    from trainsignals.exporters.training.hf import TrainSignalsCallback
    args = TrainingArguments(..., logging_steps=1, logging_nan_inf_filter=False,
                             include_num_input_tokens_seen=True)
    trainer = Trainer(model, args, ..., callbacks=[TrainSignalsCallback()])

Rank and restarts come from torchrun's environment (TrainingMetrics.from_env). Step time is
wall time from one optimizer step's end to the next (data loading included); eval and save
pauses are phases, not slow steps. Loss comes from the Trainer's logs, so log every step and
turn off `logging_nan_inf_filter` (it replaces NaN/inf losses, hiding them from NonFiniteLoss).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from transformers import TrainerCallback

from .metrics import TrainingMetrics

log = logging.getLogger(__name__)


class TrainSignalsCallback(TrainerCallback):
    def __init__(
        self,
        metrics: TrainingMetrics | None = None,
        *,
        tokens_per_step: float = 0,
        serve: bool = True,
        port: int | None = None,
        **from_env: Any,
    ) -> None:
        """`metrics`: an existing TrainingMetrics, else one from torchrun's env (`from_env`
        passes labels=, checkpoint_dir=, ...). `tokens_per_step` is used when the Trainer does
        not count input tokens. `serve` starts /metrics (port 9850 + LOCAL_RANK by default)."""
        self.metrics = metrics or TrainingMetrics.from_env(**from_env)
        self.tokens_per_step = tokens_per_step
        self._serve, self._port = serve, port
        self._last_end: float | None = None
        self._tokens_seen = 0

    # --- lifecycle -------------------------------------------------------------------------
    def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self._serve and self.metrics.http_port is None:
            self.metrics.start_http_server(port=self._port)
        if getattr(args, "logging_nan_inf_filter", False):
            log.warning(
                "TrainingArguments.logging_nan_inf_filter=True hides NaN/inf losses from "
                "trainsignals (NonFiniteLoss cannot fire): set it to False"
            )
        self._tokens_seen = int(getattr(state, "num_input_tokens_seen", 0) or 0)
        self.metrics.phase("train")

    def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self._last_end is None:
            self._last_end = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        now = time.perf_counter()
        seen = int(getattr(state, "num_input_tokens_seen", 0) or 0)
        tokens = seen - self._tokens_seen if seen else self.tokens_per_step
        self._tokens_seen = seen
        world = max(1, int(getattr(args, "world_size", 1) or 1))
        samples = args.per_device_train_batch_size * args.gradient_accumulation_steps
        # num_input_tokens_seen counts every rank's tokens; each rank reports its share.
        start = now if self._last_end is None else self._last_end
        self.metrics.observe_step(now - start, tokens / world if seen else tokens, samples)
        self._last_end = now
        # The default flow callback has decided what follows this step: mark the pause.
        if control.should_evaluate:
            self.metrics.phase("eval")
        elif control.should_save:
            self.metrics.phase("checkpoint")

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kw: Any):
        if logs and "loss" in logs:
            self.metrics.loss(float(logs["loss"]))

    def on_evaluate(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self.metrics.phase("checkpoint" if control.should_save else "train")
        self._last_end = time.perf_counter()  # the pause is not part of the next step

    def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self.metrics.checkpoint_saved()  # Trainer calls this after the checkpoint is written
        self.metrics.phase("train")
        self._last_end = time.perf_counter()

    def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self.metrics.phase("train")
