"""HF transformers: a `TrainerCallback` that drives TrainingMetrics. Needs `trainsignals[hf]`.

    from trainsignals.exporters.training.hf import TrainSignalsCallback

    trainer = Trainer(..., callbacks=[TrainSignalsCallback(job="llm-7b")])

Ranks, world size and restarts come from torchrun's environment; /metrics is served on
9850 + LOCAL_RANK; checkpoint disk gauges watch `args.output_dir`. Per optimizer step: its wall
time (data wait included), tokens (this rank's own `input_ids`, counted in a forward pre-hook:
Trainer's `num_input_tokens_seen` is gathered over every rank, so it would count the job's
tokens once per rank), samples, and the mean
loss of its micro-batches (NaN/inf counted as non-finite, whatever `logging_nan_inf_filter`
says). Phases: warmup (args' warmup steps), train, eval, checkpoint; `on_save` marks a
durable checkpoint. Resumed from a checkpoint (`trainer.train(resume_from_checkpoint=...)`):
the global step and the checkpoint's time (its folder `checkpoint-<step>` in `output_dir`)
carry over, so progress and checkpoint age do not restart with the process. A clean end of
training (`on_train_end`) marks the job done (TrainingMetrics.finish()).
"""

from __future__ import annotations

import os
from typing import Any

from .callback_setup import callback_setup
from .metrics import TrainingMetrics
from .stepclock import StepClock

try:
    from transformers import TrainerCallback
except ImportError as exc:  # the base package does not need transformers
    raise ImportError(
        "trainsignals.exporters.training.hf needs HF transformers: "
        "pip install 'trainsignals[hf]' (installs torch==2.13.0 first)"
    ) from exc


class TrainSignalsCallback(TrainerCallback):
    """Add to `Trainer(callbacks=[...])`. Pass `metrics=` to use your own TrainingMetrics."""

    def __init__(
        self,
        job: str | TrainingMetrics | None = None,
        *,
        labels: dict[str, str] | None = None,
        metrics: TrainingMetrics | None = None,
        port: int | None = None,
        serve: bool = True,
        **from_env: Any,
    ) -> None:
        self._setup, given = callback_setup(job, labels, metrics, port, serve, from_env)
        self.metrics: TrainingMetrics | None = given
        self._clock: StepClock | None = None
        self._warmup_steps = 0
        self._hooks: list[Any] = []
        self._training = False
        self._before_eval: str | None = None

    # --- set-up --------------------------------------------------------------------------
    def _ensure_metrics(self, args: Any) -> StepClock:
        # At Trainer init: early, and args.output_dir is known.
        self.metrics = self._setup.ready(self.metrics, args.output_dir)
        if self._clock is None:
            self._clock = StepClock(self.metrics)
        return self._clock

    def on_init_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._ensure_metrics(args)

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        clock = self._ensure_metrics(args)
        model = kwargs.get("model")
        if model is not None and not self._hooks:
            # The loss and the batch of each training forward; eval forwards are skipped.
            self._hooks = [
                model.register_forward_pre_hook(self._pre_forward, with_kwargs=True),
                model.register_forward_hook(self._post_forward),
            ]
        self._warmup_steps = args.get_warmup_steps(state.max_steps) if state.max_steps else 0
        if state.global_step > 0:  # resumed: Trainer loaded the checkpoint's state already
            folder = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
            saved = os.path.getmtime(folder) if os.path.isdir(folder) else None
            with self.metrics.checkpoint_restore(step=state.global_step, timestamp=saved):
                pass
        self._training = True
        self._phase_for(state)
        clock.resume()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        for hook in self._hooks:
            hook.remove()
        self._hooks = []
        self._training = False
        if self.metrics is not None:  # only a clean end gets here (an exception skips it)
            self.metrics.finish()

    # --- each step ------------------------------------------------------------------------
    def _pre_forward(self, module: Any, args: tuple, kwargs: dict) -> None:
        if not (self._training and module.training) or self._clock is None:
            return
        ids = kwargs.get("input_ids", args[0] if args else None)
        if hasattr(ids, "shape") and len(ids.shape) >= 1:
            self._clock.add_batch(tokens=ids.numel(), samples=ids.shape[0])

    def _post_forward(self, module: Any, args: tuple, output: Any) -> None:
        if not (self._training and module.training) or self._clock is None:
            return
        loss = output.get("loss") if isinstance(output, dict) else getattr(output, "loss", None)
        if loss is not None:
            self._clock.add_batch(loss=loss)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._clock is not None:
            self._clock.begin()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._clock is None or self.metrics is None:
            return
        self._clock.end()  # this rank's tokens, counted by the pre-forward hook
        # The default flow callback ran first: it has decided what follows this step.
        if control.should_evaluate:
            self.metrics.phase("eval")
        elif control.should_save:
            self.metrics.phase("checkpoint")
        else:
            self._phase_for(state)

    # --- pauses -----------------------------------------------------------------------------
    def on_prediction_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.metrics is not None and self.metrics.current_phase != "eval":
            # An evaluation on_step_end did not announce (trainer.evaluate() or predict()).
            self._before_eval = self.metrics.current_phase
            self.metrics.phase("eval")

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.metrics is None or self._clock is None:
            return
        if not self._training:
            self.metrics.phase(self._before_eval or "startup")
        elif control.should_save:
            self.metrics.phase("checkpoint")
        else:
            self._phase_for(state)
            self._clock.resume()
        self._before_eval = None

    on_predict = on_evaluate

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.metrics is None or self._clock is None:
            return
        self.metrics.checkpoint_saved()  # Trainer calls on_save after the files are written
        self._phase_for(state)
        self._clock.resume()

    def _phase_for(self, state: Any) -> None:
        assert self.metrics is not None
        if not self._training:
            return
        warm = state.global_step < self._warmup_steps
        self.metrics.phase("warmup" if warm else "train")
