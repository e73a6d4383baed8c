"""Run by tests/frameworks/test_hf_callback.py under real torchrun (2 CPU ranks, gloo): a tiny
GPT-2 trained 3 optimizer steps by HF Trainer with TrainSignalsCallback and Trainer's own
(all-rank) token count on. Writes each rank's exported counters to <out>/rank<R>.json."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
import transformers

from trainsignals.exporters.training.hf import TrainSignalsCallback

VOCAB, SEQ, BATCH, STEPS = 64, 16, 4, 3


class RandomTokens(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 10**4

    def __getitem__(self, i: int) -> dict:
        ids = torch.randint(0, VOCAB, (SEQ,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids.clone()}


def main(out: Path) -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    config = transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=2, n_head=2
    )
    callback = TrainSignalsCallback(job="hf-ddp", serve=False)
    args = transformers.TrainingArguments(
        output_dir=str(out / "trainer"),
        per_device_train_batch_size=BATCH,
        max_steps=STEPS,
        include_num_input_tokens_seen=True,
        ddp_backend="gloo",
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = transformers.Trainer(
        model=transformers.GPT2LMHeadModel(config),
        args=args,
        train_dataset=RandomTokens(),
        callbacks=[callback],
    )
    trainer.train()
    assert callback.metrics is not None
    values: dict[str, float] = {
        line.split("{")[0]: float(line.rsplit(" ", 1)[1])
        for line in callback.metrics.exposition().decode().splitlines()
        if line.startswith(("trainsignals_steps_total{", "trainsignals_tokens_total{"))
    }
    values["num_input_tokens_seen"] = trainer.state.num_input_tokens_seen
    values["world_size"] = callback.metrics.world_size
    rank = os.environ["RANK"]
    (out / f"rank{rank}.json").write_text(json.dumps(values), encoding="utf-8")
    # Leave without any teardown once the result is written: train() has returned on every
    # rank, so no collective is pending. Left to the interpreter, a rank's gloo threads were
    # once destroyed while joinable (SIGABRT, "terminate called without an active exception");
    # a barrier before destroy_process_group() hung one clean-clone run, and
    # destroy_process_group() alone hung another, each for the test's whole 300 s.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
