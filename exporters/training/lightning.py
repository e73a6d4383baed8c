"""Lightning: `Trainer(callbacks=[TrainSignalsCallback()])` exports TrainingMetrics.

    from trainsignals.exporters.training.lightning import TrainSignalsCallback
    trainer = L.Trainer(..., callbacks=[TrainSignalsCallback(tokens_per_batch=seq * batch)])

The training step's loss (the `loss` Lightning returns) is exported on every batch, NaN/inf
counted as non-finite. Validation and checkpoint saves are phases; a checkpoint counts as
saved at the next hook after Lightning wrote it (Lightning has no hook after the write).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl

from .metrics import TrainingMetrics


class TrainSignalsCallback(pl.Callback):
    def __init__(
        self,
        metrics: TrainingMetrics | None = None,
        *,
        tokens_per_batch: float | Callable[[Any], float] = 0,
        serve: bool = True,
        port: int | None = None,
        **from_env: Any,
    ) -> None:
        """`tokens_per_batch`: a number, or a function of the batch. Other arguments as in
        the HF callback: an existing TrainingMetrics or one from torchrun's environment."""
        self.metrics = metrics or TrainingMetrics.from_env(**from_env)
        self.tokens_per_batch = tokens_per_batch
        self._serve, self._port = serve, port
        self._start = 0.0
        self._last_end: float | None = None
        self._saving = False

    def _tokens(self, batch: Any) -> float:
        n = self.tokens_per_batch
        return float(n(batch) if callable(n) else n)

    def _saved(self) -> None:
        if self._saving:
            self._saving = False
            self.metrics.checkpoint_saved()
            self.metrics.phase("train")
            self._last_end = time.perf_counter()

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._serve and self.metrics.http_port is None:
            self.metrics.start_http_server(port=self._port)

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.metrics.phase("train")

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, idx: int) -> None:
        self._saved()
        if self._last_end is None:
            self._last_end = time.perf_counter()

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, idx: int
    ) -> None:
        now = time.perf_counter()
        start = now if self._last_end is None else self._last_end
        size = len(batch[0]) if isinstance(batch, list | tuple) else 0
        self.metrics.observe_step(now - start, self._tokens(batch), size)
        self._last_end = now
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if loss is not None:
            self.metrics.loss(float(loss))

    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        self._saved()
        if not trainer.sanity_checking:
            self.metrics.phase("eval")

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        self.metrics.phase("train")
        self._last_end = time.perf_counter()

    def on_save_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: dict) -> None:
        self.metrics.phase("checkpoint")  # the dict is built; the write follows
        self._saving = True

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self._saved()

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self._saved()
        self.metrics.phase("train")
