"""What the HF and Lightning callbacks share: which TrainingMetrics they drive, and making it.

A callback takes a job name (or a TrainingMetrics positionally), labels, `port`/`serve` and
more `TrainingMetrics.from_env` arguments; the metrics are made on first use, once the
framework says where checkpoints go.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from .metrics import TrainingMetrics


@dataclass
class MetricsSetup:
    labels: dict[str, str]
    from_env: dict[str, Any]  # more TrainingMetrics.from_env arguments (checkpoint_dir=...)
    port: int | None
    serve: bool

    def ready(
        self, metrics: TrainingMetrics | None, checkpoint_dir: str | os.PathLike[str] | None
    ) -> TrainingMetrics:
        """`metrics`, or new ones from the environment watching `checkpoint_dir` (unless
        `from_env` names another); serving /metrics when asked to and not yet serving."""
        if metrics is None:
            kwargs = {"checkpoint_dir": checkpoint_dir, **self.from_env}
            metrics = TrainingMetrics.from_env(labels=self.labels, **kwargs)
        if self.serve and metrics.http_port is None:
            metrics.start_http_server(self.port)
        return metrics


def callback_setup(
    job: str | TrainingMetrics | None,
    labels: dict[str, str] | None,
    metrics: TrainingMetrics | None,
    port: int | None,
    serve: bool,
    from_env: dict[str, Any],
) -> tuple[MetricsSetup, TrainingMetrics | None]:
    """The callback's setup and the metrics it was given, if any."""
    if isinstance(job, TrainingMetrics):  # TrainSignalsCallback(metrics) also works
        job, metrics = None, job
    # No job/labels: the scrape config attaches the spec's selector labels (honor_labels).
    chosen = dict(labels if labels is not None else {"training_job": job} if job else {})
    return MetricsSetup(chosen, from_env, port, serve), metrics
