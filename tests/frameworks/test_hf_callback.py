"""HF transformers: a tiny GPT-2 built in the test trains on CPU with TrainSignalsCallback,
scraped by real Prometheus evaluating the job's generated rules: silent while healthy,
NonFiniteLoss once the loss turns NaN. No download (HF_HUB_OFFLINE=1)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")  # installed by `make setup`; skipped only without extras
transformers = pytest.importorskip("transformers")

from trainsignals.exporters.training import TrainingMetrics  # noqa: E402
from trainsignals.exporters.training.hf import TrainSignalsCallback  # noqa: E402

from tests.conftest import require_tool  # noqa: E402
from tests.frameworks.watch import NODE, cpu_spec, watch  # noqa: E402
from trainsignals.stack import free_port  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("frameworks")]
SEQ, BATCH = 8, 2


class Stopper(transformers.TrainerCallback):
    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop

    def on_step_end(self, args, state, control, **kw):  # type: ignore[no-untyped-def]
        time.sleep(0.05)  # a steady step rate, like a real job's
        control.should_training_stop = self.stop.is_set()


def test_hf_trainer_silent_when_healthy_nonfinite_loss_on_nan(tmp_path: Path) -> None:
    require_tool("prometheus")
    spec = cpu_spec("hf-tiny")
    port = free_port()
    metrics = TrainingMetrics(node=NODE, labels=spec.selector_labels, checkpoint_dir=tmp_path)
    callback = TrainSignalsCallback(metrics, port=port)

    def run(stop: threading.Event, nan: threading.Event) -> None:
        torch.manual_seed(0)
        config = transformers.GPT2Config(
            vocab_size=64, n_positions=SEQ, n_embd=16, n_layer=1, n_head=2
        )
        model = transformers.GPT2LMHeadModel(config)

        def poison(module, inputs, output):  # type: ignore[no-untyped-def]
            if nan.is_set():
                output["loss"] = output["loss"] * float("nan")
            return output

        model.register_forward_hook(poison)
        ids = torch.randint(0, 64, (64, SEQ))
        data = [{"input_ids": row, "labels": row} for row in ids]
        args = transformers.TrainingArguments(
            output_dir=str(tmp_path / "out"),
            per_device_train_batch_size=BATCH,
            max_steps=100_000,
            logging_steps=1,
            logging_nan_inf_filter=False,
            include_num_input_tokens_seen=True,
            save_strategy="steps",
            save_steps=40,
            save_only_model=True,
            report_to="none",
            use_cpu=True,
            disable_tqdm=True,
            dataloader_num_workers=0,
        )
        trainer = transformers.Trainer(
            model=model, args=args, train_dataset=data, callbacks=[callback, Stopper(stop)]
        )
        trainer.train()

    out = watch(tmp_path, spec, port, run)
    assert out["errors"] == []
    assert out["healthy_firing"] == set(), "healthy run: no alert pending or firing"
    steps = out["steps"]
    assert steps and float(steps[0]["value"][1]) > 20, "Prometheus scraped the steps"
    assert "NonFiniteLoss" in out["nan_firing"]
    text = metrics.exposition().decode()
    assert "trainsignals_tokens_total" in text and 'phase="checkpoint"' in text
    assert metrics.current_phase == "train"
    # The Trainer saved checkpoints: the last-checkpoint time moved past the start.
    assert any(
        line.startswith("trainsignals_last_checkpoint_timestamp_seconds")
        and float(line.rsplit(" ", 1)[1]) > time.time() - 120
        for line in text.splitlines()
    )
