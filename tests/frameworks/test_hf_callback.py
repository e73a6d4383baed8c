"""HF transformers Trainer + TrainSignalsCallback, a 2-layer GPT-2 on CPU, under real Prometheus.

No downloads: the model is built from a config with a 64-token vocabulary and trained on
random tokens. Healthy training keeps the job's generated rules silent; NaN losses (injected by
a forward hook) page NonFiniteLoss through Alertmanager. torch and transformers are imported
inside the test (`make setup` installs them): collecting the suite stays fast.
"""

from __future__ import annotations

import os
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

VOCAB, SEQ, BATCH = 64, 16, 4


def hf_trainer(out: Path, control: Control, callback: Any, **overrides: Any) -> Any:
    """A Trainer for a tiny GPT-2 on random tokens; eval takes ~1.5 s, saves every 200 steps."""
    import torch
    import transformers

    class RandomTokens(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 10**6

        def __getitem__(self, i: int) -> dict:
            ids = torch.randint(0, VOCAB, (SEQ,), generator=torch.Generator().manual_seed(i))
            return {"input_ids": ids, "labels": ids.clone()}

    class StopWhenTold(transformers.TrainerCallback):
        def on_step_end(self, args, state, flow, **kwargs):  # type: ignore[no-untyped-def]
            if control.stop.is_set():  # never clear it: max_steps sets it too
                flow.should_training_stop = True

    torch.manual_seed(0)
    torch.set_num_threads(1)
    config = transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=2, n_head=2
    )
    model = transformers.GPT2LMHeadModel(config)

    def poison(module, args, output):  # type: ignore[no-untyped-def]
        if control.poison.is_set() and module.training:
            output.loss = output.loss * float("nan")
        if not module.training:
            time.sleep(0.1)  # an eval long enough (1.5 s) for a 1 s scrape to see
        return output

    model.register_forward_hook(poison)
    settings: dict[str, Any] = {
        "per_device_train_batch_size": BATCH,
        "per_device_eval_batch_size": BATCH,
        "max_steps": 10**6,
        "warmup_steps": 20,
        "eval_strategy": "steps",
        "eval_steps": 400,
        "save_steps": 200,
        "save_total_limit": 1,
        "logging_steps": 50,
        "report_to": [],
        "use_cpu": True,
        "disable_tqdm": True,
        "dataloader_num_workers": 0,
    }
    args = transformers.TrainingArguments(output_dir=str(out), **{**settings, **overrides})
    return transformers.Trainer(
        model=model,
        args=args,
        train_dataset=RandomTokens(),
        eval_dataset=torch.utils.data.Subset(RandomTokens(), range(60)),
        callbacks=[callback, StopWhenTold()],
    )


def test_hf_trainer_scraped_silent_when_healthy_pages_on_nan(tmp_path: Path) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from trainsignals.exporters.training.hf import TrainSignalsCallback

    spec = tiny_run_spec("hf-tiny")
    callback = TrainSignalsCallback(job=spec.name, port=0)

    def train(control: Control) -> None:
        hf_trainer(tmp_path / "out", control, callback).train()

    def port() -> int | None:
        return callback.metrics.http_port if callback.metrics else None

    assert_silent_then_pages(
        tmp_path, spec, train, port, framework="HF", tokens_per_step=BATCH * SEQ
    )


def test_hf_accumulation_token_count_and_standalone_evaluate(tmp_path: Path) -> None:
    """No Prometheus: 5 optimizer steps of 2 micro-batches, Trainer's own token count, and an
    evaluate() after training that restores the phase it interrupted."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from trainsignals.exporters.training.hf import TrainSignalsCallback

    callback = TrainSignalsCallback(job="hf-accum", serve=False)
    trainer = hf_trainer(
        tmp_path / "out",
        Control(),
        callback,
        max_steps=5,
        gradient_accumulation_steps=2,
        include_num_input_tokens_seen=True,
        eval_strategy="no",
        save_strategy="no",
    )
    trainer.train()
    metrics = callback.metrics
    assert metrics is not None
    values = sample_values(
        metrics.exposition(),
        ["trainsignals_steps_total", "trainsignals_tokens_total", "trainsignals_samples_total"],
    )
    assert values == {
        "trainsignals_steps_total": 5,
        "trainsignals_tokens_total": 5 * 2 * BATCH * SEQ,
        "trainsignals_samples_total": 5 * 2 * BATCH,
    }
    assert metrics.current_phase == "done"  # a clean end of training (issue 16)
    trainer.evaluate()
    assert metrics.current_phase == "done"


DDP_WORKER = Path(__file__).with_name("hf_ddp_worker.py")


def test_hf_counts_each_ranks_own_tokens_under_torchrun(tmp_path: Path) -> None:
    """2 CPU ranks (gloo) under real torchrun, Trainer's all-rank token count on: each rank
    exports its own tokens, so the job's sum is the tokens trained, not world_size times it
    (issue 16: `num_input_tokens_seen` is gathered over every rank)."""
    import subprocess
    import sys

    argv = [
        sys.executable, "-m", "torch.distributed.run", "--standalone",
        "--nproc-per-node", "2", str(DDP_WORKER), str(tmp_path),
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    import json

    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    steps, per_rank = 3, 3 * BATCH * SEQ
    for seen in ranks:
        assert seen["world_size"] == 2
        assert seen["trainsignals_steps_total"] == steps
        assert seen["trainsignals_tokens_total"] == per_rank
        # What transformers reports: the job's tokens, on every rank.
        assert seen["num_input_tokens_seen"] == 2 * per_rank
    assert sum(s["trainsignals_tokens_total"] for s in ranks) == 2 * per_rank
