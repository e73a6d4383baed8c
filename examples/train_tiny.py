"""A tiny torch training loop instrumented with trainsignals (CPU is enough).

    pip install 'trainsignals[torch]'        # or: pip install torch==2.13.0 (CPU build)
    python examples/train_tiny.py --steps 500 --port 9850
    torchrun --nproc-per-node 2 examples/train_tiny.py   # one endpoint per rank: 9850, 9851

Only `train()` imports torch; everything else (arguments, metrics setup, the phase
schedule) is plain Python and covered by tests/test_training_example.py.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence

from trainsignals.exporters.training import TrainingMetrics


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=64, help="tokens per sample")
    p.add_argument("--warmup-steps", type=int, default=20)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--checkpoint-every", type=int, default=100)
    p.add_argument("--checkpoint-dir", default="/tmp/train_tiny_ckpt")
    p.add_argument("--job", default="train-tiny", help="training_job label (the spec's name)")
    p.add_argument("--port", type=int, default=None, help="default 9850 + LOCAL_RANK; 0 = free")
    p.add_argument("--no-serve", action="store_true", help="do not open /metrics")
    return p.parse_args(argv)


def build_metrics(
    args: argparse.Namespace, environ: dict[str, str] | None = None
) -> TrainingMetrics:
    """RANK/LOCAL_RANK/WORLD_SIZE from the launcher; labels = the spec's selector labels."""
    return TrainingMetrics.from_env(
        environ, labels={"training_job": args.job}, checkpoint_dir=args.checkpoint_dir
    )


def phase_for(step: int, args: argparse.Namespace) -> str:
    """The phase the loop is in for `step` (before the pauses it may take after it)."""
    return "warmup" if step < args.warmup_steps else "train"


def is_due(step: int, every: int) -> bool:
    return every > 0 and step > 0 and step % every == 0


def train(args: argparse.Namespace, metrics: TrainingMetrics) -> float:
    import os

    import torch  # the only torch import: the library itself never needs it

    torch.manual_seed(metrics.rank)
    vocab, dim = 256, 64
    model = torch.nn.Sequential(
        torch.nn.Embedding(vocab, dim), torch.nn.Linear(dim, dim), torch.nn.GELU(),
        torch.nn.Linear(dim, vocab),
    )  # fmt: skip
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    tokens_per_batch = args.batch_size * args.seq_len

    def next_batch() -> torch.Tensor:  # synthetic data: a learnable pattern (x -> x+1)
        start = torch.randint(0, vocab, (args.batch_size, 1))
        return (start + torch.arange(args.seq_len + 1)) % vocab

    loss_value = math.nan
    for step in range(args.steps):
        metrics.phase(phase_for(step, args))
        with metrics.step(tokens=tokens_per_batch, samples=args.batch_size):
            with metrics.data_wait():
                batch = next_batch()
            logits = model(batch[:, :-1])
            loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, vocab), batch[:, 1:].reshape(-1)
            )
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        loss_value = loss.item()
        metrics.loss(loss_value)  # NaN/inf are counted, not exported as the loss
        if is_due(step, args.eval_every):
            with metrics.phase("eval"), torch.no_grad():
                model(next_batch()[:, :-1])
        if is_due(step, args.checkpoint_every):
            with metrics.phase("checkpoint"):
                os.makedirs(args.checkpoint_dir, exist_ok=True)
                path = os.path.join(args.checkpoint_dir, f"rank{metrics.rank}.pt")
                torch.save(model.state_dict(), path)
            metrics.checkpoint_saved()
    return loss_value


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    metrics = build_metrics(args)
    if not args.no_serve:
        port = metrics.start_http_server(port=args.port)
        print(f"rank {metrics.rank}: metrics on http://0.0.0.0:{port}/metrics")
    final = train(args, metrics)
    print(f"rank {metrics.rank}: final loss {final:.4f}")
    metrics.stop_http_server()


if __name__ == "__main__":
    main()
