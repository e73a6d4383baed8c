"""Lightning Trainer + TrainSignalsCallback, a tiny torch.nn model on CPU, under real Prometheus.

Healthy training keeps the job's generated rules silent; NaN losses page NonFiniteLoss through
Alertmanager. ModelCheckpoint's saves go through the callback's timed save. torch and
lightning are imported inside the test (`make setup` installs them).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.frameworks.harness import (
    Control,
    assert_silent_then_pages,
    sample_values,
    tiny_run_spec,
)

# Not in the "real-stack" xdist group: these train (CPU-bound, one torch thread) rather than
# wait on compressed time, so they run beside the long e2e worker instead of after it.
pytestmark = pytest.mark.e2e

VOCAB, SEQ, BATCH = 64, 16, 8


def fit(out: Path, control: Control, callback: Any) -> None:
    """A tiny LM on random tokens; validation takes ~1.5 s, checkpoints every 200 steps."""
    import lightning as L
    import torch

    class RandomTokens(torch.utils.data.Dataset):
        def __init__(self, n: int) -> None:
            self.n = n

        def __len__(self) -> int:
            return self.n

        def __getitem__(self, i: int) -> dict:
            ids = torch.randint(0, VOCAB, (SEQ,), generator=torch.Generator().manual_seed(i))
            return {"input_ids": ids}

    class TinyLM(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(
                torch.nn.Embedding(VOCAB, 32), torch.nn.Linear(32, 32), torch.nn.ReLU(),
                torch.nn.Linear(32, VOCAB),
            )  # fmt: skip

        def _loss(self, batch: dict) -> torch.Tensor:
            ids = batch["input_ids"]
            logits = self.net(ids[:, :-1]).reshape(-1, VOCAB)
            return torch.nn.functional.cross_entropy(logits, ids[:, 1:].reshape(-1))

        def training_step(self, batch: dict, idx: int) -> torch.Tensor:
            if control.stop.is_set():
                self.trainer.should_stop = True
            loss = self._loss(batch)
            return loss * float("nan") if control.poison.is_set() else loss

        def validation_step(self, batch: dict, idx: int) -> None:
            time.sleep(0.1)  # an eval long enough (1.5 s) for a 1 s scrape to see
            self.log("val_loss", self._loss(batch))

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.05)

    torch.manual_seed(0)
    torch.set_num_threads(1)
    trainer = L.Trainer(
        default_root_dir=str(out),
        accelerator="cpu",
        devices=1,
        max_steps=10**6,
        val_check_interval=400,
        num_sanity_val_steps=0,
        callbacks=[callback, L.pytorch.callbacks.ModelCheckpoint(every_n_train_steps=200)],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    loader = torch.utils.data.DataLoader(RandomTokens(10**6), batch_size=BATCH)
    val = torch.utils.data.DataLoader(RandomTokens(BATCH * 15), batch_size=BATCH)
    trainer.fit(TinyLM(), loader, val)


def test_lightning_scraped_silent_when_healthy_pages_on_nan(tmp_path: Path) -> None:
    from trainsignals.exporters.training.lightning import TrainSignalsCallback

    spec = tiny_run_spec("lightning-tiny")
    callback = TrainSignalsCallback(job=spec.name, port=0, warmup_steps=20)

    def port() -> int | None:
        return callback.metrics.http_port if callback.metrics else None

    train = lambda control: fit(tmp_path / "out", control, callback)  # noqa: E731
    assert_silent_then_pages(
        tmp_path, spec, train, port, framework="Lightning", tokens_per_step=BATCH * SEQ
    )
    assert list((tmp_path / "out").rglob("*.ckpt")), "ModelCheckpoint wrote no .ckpt"


def test_standalone_pytorch_lightning_package(tmp_path: Path) -> None:
    """`pytorch_lightning.Trainer` accepts PLTrainSignalsCallback and drives it the same way."""
    import pytorch_lightning as pl
    import torch

    from trainsignals.exporters.training.lightning import PLTrainSignalsCallback

    class Tiny(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch: tuple, idx: int) -> torch.Tensor:
            x, y = batch
            return torch.nn.functional.mse_loss(self.layer(x), y)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    callback = PLTrainSignalsCallback(job="pl-tiny", serve=False)
    trainer = pl.Trainer(
        default_root_dir=str(tmp_path), accelerator="cpu", devices=1, max_steps=6,
        accumulate_grad_batches=2, callbacks=[callback], logger=False, enable_progress_bar=False,
        enable_model_summary=False, enable_checkpointing=False,
    )  # fmt: skip
    trainer.fit(Tiny(), torch.utils.data.DataLoader(data, batch_size=4))
    assert callback.metrics is not None
    exposition = callback.metrics.exposition()
    values = sample_values(exposition, ["trainsignals_steps_total", "trainsignals_samples_total"])
    # 6 optimizer steps of 2 micro-batches of 4 samples each
    assert values == {"trainsignals_steps_total": 6, "trainsignals_samples_total": 48}
    assert b"trainsignals_loss{" in exposition


def test_lightning_resume_carries_step_and_checkpoint_time_and_marks_done(tmp_path: Path) -> None:
    """Issue 16: fit(ckpt_path=...) continues the global step and the checkpoint's time (its
    file's mtime), not the new process's start; a clean end of fit reports phase done."""
    import lightning as L
    import torch

    from trainsignals.exporters.training.lightning import TrainSignalsCallback

    class Tiny(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch: tuple, idx: int) -> torch.Tensor:
            x, y = batch
            return torch.nn.functional.mse_loss(self.layer(x), y)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 1))

    def trainer(steps: int, callback: TrainSignalsCallback) -> L.Trainer:
        return L.Trainer(
            default_root_dir=str(tmp_path), accelerator="cpu", devices=1, max_steps=steps,
            callbacks=[callback], logger=False, enable_progress_bar=False,
            enable_model_summary=False, enable_checkpointing=False,
        )  # fmt: skip

    first = trainer(4, TrainSignalsCallback(job="pl-resume", serve=False))
    first.fit(Tiny(), torch.utils.data.DataLoader(data, batch_size=4))
    ckpt = tmp_path / "step4.ckpt"
    first.save_checkpoint(ckpt)
    saved = ckpt.stat().st_mtime
    time.sleep(0.05)
    callback = TrainSignalsCallback(job="pl-resume", serve=False)
    second = trainer(6, callback)
    second.fit(Tiny(), torch.utils.data.DataLoader(data, batch_size=4), ckpt_path=str(ckpt))
    assert callback.metrics is not None
    values = sample_values(
        callback.metrics.exposition(),
        [
            "trainsignals_global_step",
            "trainsignals_steps_total",
            "trainsignals_last_checkpoint_timestamp_seconds",
        ],
    )
    assert values["trainsignals_global_step"] == 6  # 4 restored + 2 new steps
    assert values["trainsignals_steps_total"] == 2
    assert values["trainsignals_last_checkpoint_timestamp_seconds"] == pytest.approx(saved)
    assert callback.metrics.current_phase == "done"
