"""StepClock and the Lightning batch helper: the framework-independent parts, on real tensors.

torch is imported inside the tests (`make setup` installs it): collection stays fast."""

from __future__ import annotations

import math

import pytest

from trainsignals.exporters.training import TrainingMetrics
from trainsignals.exporters.training.stepclock import StepClock, mean_loss


def sample(metrics: TrainingMetrics, name: str) -> float:
    for line in metrics.exposition().decode().splitlines():
        if line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not exposed")


def test_mean_loss_of_micro_batches() -> None:
    import torch

    assert mean_loss([torch.tensor(1.0), torch.tensor(3.0)]) == pytest.approx(2.0)
    assert mean_loss([2.5]) == 2.5
    assert math.isnan(mean_loss([torch.tensor(1.0), torch.tensor(float("inf"))]))
    assert math.isnan(mean_loss([torch.tensor(float("nan"))]))


def test_one_step_of_two_micro_batches() -> None:
    import torch

    metrics = TrainingMetrics(labels={"training_job": "t"})
    clock = StepClock(metrics)
    clock.resume()
    clock.begin()
    clock.add_batch(loss=torch.tensor(1.0, requires_grad=True) * 1, tokens=64, samples=4)
    clock.add_batch(loss=torch.tensor(3.0), tokens=64, samples=4)
    clock.end()
    assert sample(metrics, "trainsignals_steps_total") == 1
    assert sample(metrics, "trainsignals_tokens_total") == 128
    assert sample(metrics, "trainsignals_samples_total") == 8
    assert sample(metrics, "trainsignals_loss") == pytest.approx(2.0)
    clock.begin()
    clock.add_batch(loss=torch.tensor(float("nan")))
    clock.end(tokens=10)  # the framework's own token count wins
    assert sample(metrics, "trainsignals_nonfinite_losses_total") == 1
    assert sample(metrics, "trainsignals_loss") == pytest.approx(2.0)  # last finite kept
    assert sample(metrics, "trainsignals_tokens_total") == 138


def test_lightning_batch_shapes_and_unknown_argument() -> None:
    import torch

    from trainsignals.exporters.training.lightning import (
        TrainSignalsCallback,
        batch_size_and_tokens,
    )

    ids = torch.zeros(4, 16, dtype=torch.long)
    assert batch_size_and_tokens({"input_ids": ids}, None) == (4, 64)
    assert batch_size_and_tokens((torch.zeros(8, 3), torch.zeros(8)), 10) == (8, 80)
    assert batch_size_and_tokens(torch.zeros(2, 5), None) == (2, 0)
    with pytest.raises(TypeError):  # a typo is not silently ignored: from_env rejects it
        TrainSignalsCallback(
            job="x", serve=False, checkpoint_dir="/tmp", chekpoint_dir="/tmp"
        ).setup(None, None, "fit")


def test_callbacks_take_metrics_positionally_and_labels_optionally() -> None:
    from trainsignals.exporters.training.hf import TrainSignalsCallback as HF
    from trainsignals.exporters.training.lightning import TrainSignalsCallback as Lightning

    metrics = TrainingMetrics(labels={"training_job": "x"})
    for cls in (HF, Lightning):
        assert cls(metrics, serve=False).metrics is metrics
        assert cls("llm-7b", serve=False)._setup.labels == {"training_job": "llm-7b"}
        # No job: the scrape config attaches the selector labels.
        assert cls(serve=False)._setup.labels == {}
