"""Each rank's own work (trainsignals_own_work_seconds_total): step time less data wait and time
blocked in collectives, from the plain API and from the real HF Trainer and Lightning loops.

The models are tiny and built here (no downloads); a slow loader and a marked "collective" (a
sleep inside `collective_wait()`) make the parts the counter must leave out large enough to see.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.frameworks.harness import sample_values
from trainsignals.exporters.training import TrainingMetrics

OWN = "trainsignals_own_work_seconds_total"
WAIT = "trainsignals_data_wait_seconds_total"
STEP_SUM = "trainsignals_step_duration_seconds_sum"
LOADER_SLEEP, COLLECTIVE_SLEEP, WORK_SLEEP = 0.01, 0.02, 0.005


def _values(metrics: TrainingMetrics) -> dict[str, float]:
    return sample_values(metrics.exposition(), [OWN, WAIT, STEP_SUM, "trainsignals_steps_total"])


def test_plain_loop_counts_step_time_less_data_and_collective_waits() -> None:
    metrics = TrainingMetrics(node="n0")
    for _ in range(5):
        with metrics.step(tokens=1):
            with metrics.data_wait():
                time.sleep(LOADER_SLEEP)
            time.sleep(WORK_SLEEP)
            with metrics.collective_wait():
                time.sleep(COLLECTIVE_SLEEP)
    v = _values(metrics)
    # Own work is the sleeps outside the waits, plus a little loop overhead.
    assert 5 * WORK_SLEEP <= v[OWN] < 5 * WORK_SLEEP + 0.5 * 5 * COLLECTIVE_SLEEP
    assert v[OWN] < v[STEP_SUM] - v[WAIT] - 5 * COLLECTIVE_SLEEP + 1e-6


def test_waits_outside_the_step_block_are_not_taken_from_it() -> None:
    metrics = TrainingMetrics(node="n0")
    with metrics.data_wait():  # the loader before the block, as some loops are written
        time.sleep(LOADER_SLEEP)
    with metrics.step():
        time.sleep(WORK_SLEEP)
    assert _values(metrics)[OWN] >= WORK_SLEEP


def test_observe_step_forms_and_failed_steps() -> None:
    metrics = TrainingMetrics(node="n0")
    metrics.add_data_wait(0.25)
    metrics.add_collective_wait(0.5)
    metrics.observe_step(2.0)  # the waits since the previous step come off
    metrics.observe_step(1.0, own_work=0.75)  # known (the simulator's form)
    metrics.add_collective_wait(5.0)
    metrics.step_failed()  # what blocked in a failed step belongs to no step
    metrics.observe_step(1.0)
    metrics.add_collective_wait(3.0)
    metrics.observe_step(1.0)  # blocked longer than the step: nothing, never negative
    assert _values(metrics)[OWN] == 1.25 + 0.75 + 1.0


def test_hf_trainer_exports_own_work(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from trainsignals.exporters.training.hf import TrainSignalsCallback

    vocab, seq = 32, 8

    class SlowTokens(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 64

        def __getitem__(self, i: int) -> dict:
            time.sleep(LOADER_SLEEP)
            ids = torch.randint(0, vocab, (seq,), generator=torch.Generator().manual_seed(i))
            return {"input_ids": ids, "labels": ids.clone()}

    torch.manual_seed(0)
    torch.set_num_threads(1)
    config = transformers.GPT2Config(
        vocab_size=vocab, n_positions=seq, n_embd=16, n_layer=1, n_head=2
    )
    model = transformers.GPT2LMHeadModel(config)
    callback = TrainSignalsCallback(job="hf-own-work", serve=False)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=2, max_steps=6, report_to=[],
        use_cpu=True, disable_tqdm=True, dataloader_num_workers=0, save_strategy="no",
    )  # fmt: skip
    transformers.Trainer(
        model=model, args=args, train_dataset=SlowTokens(), callbacks=[callback]
    ).train()
    assert callback.metrics is not None
    v = _values(callback.metrics)
    assert v["trainsignals_steps_total"] == 6
    # No collective marks: own work is exactly the steps' time less their data wait.
    assert v[WAIT] >= 6 * 2 * LOADER_SLEEP * 0.9
    assert 0 < v[OWN] == pytest.approx(v[STEP_SUM] - v[WAIT], rel=1e-6)


def _lightning_fit(root: Path, callback: object, mark: bool) -> None:
    import lightning as L
    import torch

    class SlowData(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 32

        def __getitem__(self, i: int) -> tuple:
            time.sleep(LOADER_SLEEP)
            return torch.randn(4), torch.randn(1)

    class Tiny(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch: tuple, idx: int) -> torch.Tensor:
            x, y = batch
            if mark:  # the loop marks its blocking collective through the callback's metrics
                with callback.metrics.collective_wait():  # type: ignore[attr-defined]
                    time.sleep(COLLECTIVE_SLEEP)
            return torch.nn.functional.mse_loss(self.layer(x), y)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    torch.set_num_threads(1)
    trainer = L.Trainer(
        default_root_dir=str(root), accelerator="cpu", devices=1, max_steps=6,
        callbacks=[callback], logger=False, enable_progress_bar=False,
        enable_model_summary=False, enable_checkpointing=False,
    )  # fmt: skip
    trainer.fit(Tiny(), torch.utils.data.DataLoader(SlowData(), batch_size=2))


@pytest.mark.parametrize("mark", [False, True], ids=["step-less-wait", "collective-marked"])
def test_lightning_exports_own_work(tmp_path: Path, mark: bool) -> None:
    pytest.importorskip("lightning")
    from trainsignals.exporters.training.lightning import TrainSignalsCallback

    callback = TrainSignalsCallback(job="pl-own-work", serve=False)
    _lightning_fit(tmp_path, callback, mark)
    assert callback.metrics is not None
    v = _values(callback.metrics)
    assert v["trainsignals_steps_total"] == 6
    assert v[WAIT] >= 6 * 2 * LOADER_SLEEP * 0.9
    if mark:
        assert 0 < v[OWN] <= v[STEP_SUM] - v[WAIT] - 6 * COLLECTIVE_SLEEP + 1e-6
    else:
        assert 0 < v[OWN] == pytest.approx(v[STEP_SUM] - v[WAIT], rel=1e-6)
