"""Lightning: a tiny model built in the test trains on CPU with TrainSignalsCallback, scraped
by real Prometheus evaluating the job's generated rules: silent while healthy, NonFiniteLoss
once the loss turns NaN."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")  # installed by `make setup`; skipped only without extras
pl = pytest.importorskip("lightning.pytorch")

from trainsignals.exporters.training import TrainingMetrics  # noqa: E402
from trainsignals.exporters.training.lightning import TrainSignalsCallback  # noqa: E402

from tests.conftest import require_tool  # noqa: E402
from tests.frameworks.watch import NODE, cpu_spec, watch  # noqa: E402
from trainsignals.stack import free_port  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("frameworks")]


class Tiny(pl.LightningModule):
    def __init__(self, nan: threading.Event) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(8, 1)
        self.nan = nan

    def training_step(self, batch, idx):  # type: ignore[no-untyped-def]
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        return loss * float("nan") if self.nan.is_set() else loss

    def validation_step(self, batch, idx):  # type: ignore[no-untyped-def]
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):  # type: ignore[no-untyped-def]
        return torch.optim.SGD(self.parameters(), lr=0.01)


class Stopper(pl.Callback):
    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop

    def on_train_batch_end(self, trainer, *args):  # type: ignore[no-untyped-def]
        time.sleep(0.05)  # a steady step rate, like a real job's
        if self.stop.is_set():
            trainer.should_stop = True


def test_lightning_silent_when_healthy_nonfinite_loss_on_nan(tmp_path: Path) -> None:
    require_tool("prometheus")
    spec = cpu_spec("lightning-tiny")
    port = free_port()
    metrics = TrainingMetrics(node=NODE, labels=spec.selector_labels, checkpoint_dir=tmp_path)
    callback = TrainSignalsCallback(metrics, tokens_per_batch=64, port=port)

    def run(stop: threading.Event, nan: threading.Event) -> None:
        torch.manual_seed(0)
        x = torch.randn(256, 8)
        data = torch.utils.data.TensorDataset(x, x.sum(dim=1, keepdim=True))
        loader = torch.utils.data.DataLoader(data, batch_size=8)
        trainer = pl.Trainer(
            accelerator="cpu",
            max_epochs=10_000,
            logger=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            default_root_dir=str(tmp_path / "out"),
            val_check_interval=16,
            num_sanity_val_steps=0,
            callbacks=[
                callback,
                Stopper(stop),
                pl.callbacks.ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=40),
            ],
        )
        trainer.fit(Tiny(nan), loader, loader)

    out = watch(tmp_path, spec, port, run)
    assert out["errors"] == []
    assert out["healthy_firing"] == set(), "healthy run: no alert pending or firing"
    steps = out["steps"]
    assert steps and float(steps[0]["value"][1]) > 20, "Prometheus scraped the steps"
    assert "NonFiniteLoss" in out["nan_firing"]
    text = metrics.exposition().decode()
    assert metrics.current_phase == "train"
    assert any(
        line.startswith("trainsignals_last_checkpoint_timestamp_seconds")
        and float(line.rsplit(" ", 1)[1]) > time.time() - 120
        for line in text.splitlines()
    ), "ModelCheckpoint saves count as checkpoints"
