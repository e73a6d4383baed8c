"""Training-loop instrumentation: `TrainingMetrics`, a few calls per loop, one endpoint per rank.

    metrics = TrainingMetrics.from_env(labels={"training_job": "llm-7b"}, checkpoint_dir="ckpt")
    metrics.start_http_server()            # port 9850 + LOCAL_RANK
    metrics.phase("train")
    for batch_no in range(n):
        with metrics.step(tokens=tokens_per_batch, samples=batch_size):
            with metrics.data_wait():
                batch = next(loader)
            loss = train_step(batch)
        metrics.loss(loss)

See exporters/training/README.md.
"""

from .disk import CheckpointDiskCollector, DiskUsage
from .metrics import DEFAULT_BASE_PORT, STEP_BUCKETS, TrainingMetrics
from .torchrun import LaunchEnv, LaunchEnvError, read_env

__all__ = [
    "DEFAULT_BASE_PORT",
    "STEP_BUCKETS",
    "CheckpointDiskCollector",
    "DiskUsage",
    "LaunchEnv",
    "LaunchEnvError",
    "TrainingMetrics",
    "read_env",
]
