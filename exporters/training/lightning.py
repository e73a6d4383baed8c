"""Lightning: a `Callback` that drives TrainingMetrics. Needs `trainsignals[lightning]`.

    from trainsignals.exporters.training.lightning import TrainSignalsCallback

    trainer = lightning.Trainer(..., callbacks=[TrainSignalsCallback(job="llm-7b")])

Ranks, world size and restarts come from torchrun's (or Lightning's own launcher's) RANK,
LOCAL_RANK, WORLD_SIZE; /metrics on 9850 + LOCAL_RANK; checkpoint disk gauges watch
`trainer.default_root_dir` unless `checkpoint_dir=` says otherwise. Per optimizer step: wall
time (data wait included), samples (the batch's first dimension), tokens (`input_ids` of a dict
batch, else `tokens_per_sample` x samples), and the mean loss of its micro-batches (NaN/inf
counted as non-finite). Phases: warmup (the first `warmup_steps`), train, eval (validation),
checkpoint (around `trainer.save_checkpoint`, which every checkpoint goes through). Resumed
(`fit(ckpt_path=...)`): the restored global step and the checkpoint file's time carry over, so
progress and checkpoint age do not restart with the process. A clean end of `fit`
(`on_train_end`) marks the job done (TrainingMetrics.finish()).
"""

from __future__ import annotations

import functools
import os
from typing import Any

from .callback_setup import callback_setup
from .metrics import TrainingMetrics
from .stepclock import StepClock

# `lightning` (lightning.pytorch) and the standalone `pytorch_lightning` each check callbacks
# against their own Callback class: TrainSignalsCallback is for the first (the second when it
# is the only one installed), PLTrainSignalsCallback for the second, built on first use.
try:
    from lightning.pytorch.callbacks import Callback as _LightningCallback
except ImportError:
    try:
        from pytorch_lightning.callbacks import Callback as _LightningCallback
    except ImportError as exc:
        raise ImportError(
            "trainsignals.exporters.training.lightning needs Lightning: "
            "pip install 'trainsignals[lightning]' (installs torch==2.13.0 first)"
        ) from exc


def batch_size_and_tokens(batch: Any, tokens_per_sample: int | None) -> tuple[int, int]:
    """Samples and tokens of a batch: a tensor, a tuple/list led by one, or a dict."""
    ids = None
    if isinstance(batch, dict):
        ids = batch.get("input_ids")
        lead = ids if ids is not None else next(iter(batch.values()), None)
    elif isinstance(batch, (list, tuple)):
        lead = batch[0] if batch else None
    else:
        lead = batch
    samples = int(lead.shape[0]) if hasattr(lead, "shape") and len(lead.shape) else 0
    if ids is not None and hasattr(ids, "numel"):
        return samples, int(ids.numel())
    return samples, samples * (tokens_per_sample or 0)


class _Hooks:
    """The hooks; TrainSignalsCallback / PLTrainSignalsCallback add Lightning's base class."""

    def __init__(
        self,
        job: str | TrainingMetrics | None = None,
        *,
        labels: dict[str, str] | None = None,
        metrics: TrainingMetrics | None = None,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        warmup_steps: int = 0,
        tokens_per_sample: int | None = None,
        port: int | None = None,
        serve: bool = True,
        **from_env: Any,
    ) -> None:
        self._setup, given = callback_setup(job, labels, metrics, port, serve, from_env)
        self._checkpoint_dir = checkpoint_dir
        self._warmup_steps = warmup_steps
        self._tokens_per_sample = tokens_per_sample
        self.metrics: TrainingMetrics | None = given
        self._clock: StepClock | None = None
        self._step_seen = 0
        self._in_step = False

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        folder = self._checkpoint_dir or trainer.default_root_dir
        self.metrics = self._setup.ready(self.metrics, folder)
        self._clock = self._clock or StepClock(self.metrics)
        if not getattr(trainer.save_checkpoint, "_trainsignals", False):
            trainer.save_checkpoint = self._timed_save(trainer.save_checkpoint)

    def _timed_save(self, save: Any) -> Any:
        # Lightning has no hook after a checkpoint is written; every save (ModelCheckpoint's
        # too) goes through trainer.save_checkpoint, so the phase and the time wrap that call.
        @functools.wraps(save)
        def timed(*args: Any, **kwargs: Any) -> Any:
            assert self.metrics is not None and self._clock is not None
            with self.metrics.phase("checkpoint"):
                result = save(*args, **kwargs)
            self.metrics.checkpoint_saved()
            self._clock.resume()
            return result

        timed._trainsignals = True  # type: ignore[attr-defined]
        return timed

    # --- training -----------------------------------------------------------------------------
    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self._step_seen = trainer.global_step
        if trainer.global_step > 0 and self.metrics is not None:  # restored from ckpt_path
            path = getattr(trainer, "ckpt_path", None)
            saved = os.path.getmtime(path) if path and os.path.isfile(path) else None
            with self.metrics.checkpoint_restore(step=trainer.global_step, timestamp=saved):
                pass
        self._set_train_phase(trainer)
        assert self._clock is not None
        self._clock.resume()

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, idx: int) -> None:
        assert self._clock is not None
        if not self._in_step:
            self._clock.begin()
            self._in_step = True
        samples, tokens = batch_size_and_tokens(batch, self._tokens_per_sample)
        self._clock.add_batch(tokens=tokens, samples=samples)

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, idx: int
    ) -> None:
        assert self._clock is not None
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if loss is not None:
            self._clock.add_batch(loss=loss)
        if trainer.global_step > self._step_seen:  # the optimizer stepped on this batch
            self._step_seen = trainer.global_step
            self._clock.end()
            self._in_step = False
            self._set_train_phase(trainer)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if self.metrics is not None:  # a clean end of fit (an exception calls on_exception)
            self.metrics.finish()

    # --- validation -----------------------------------------------------------------------------
    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        if self.metrics is not None:
            self.metrics.phase("eval")

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if self.metrics is None or self._clock is None:
            return
        if trainer.sanity_checking:  # before the first step: still starting up
            self.metrics.phase("startup")
            return
        self._set_train_phase(trainer)
        self._clock.resume()

    def _set_train_phase(self, trainer: Any) -> None:
        assert self.metrics is not None
        warm = trainer.global_step < self._warmup_steps
        self.metrics.phase("warmup" if warm else "train")


class TrainSignalsCallback(_Hooks, _LightningCallback):  # type: ignore[misc,valid-type]
    """For `lightning.Trainer(callbacks=[...])`. `metrics=` uses your own TrainingMetrics."""


def __getattr__(name: str) -> Any:
    if name == "PLTrainSignalsCallback":  # imported only when asked for
        from pytorch_lightning.callbacks import Callback as PLCallback

        cls = type(name, (_Hooks, PLCallback), {"__doc__": "For pytorch_lightning.Trainer."})
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
