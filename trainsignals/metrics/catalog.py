"""The metric table: every raw series trainsignals reads, and which component exports it.

This is the contract between the generator (rules and dashboards read these names), the GPU
exporter, the training-loop instrumentation and the simulator (they write them). `docs/metrics.md`
is generated from this table; a test fails when a rule or panel reads a metric that is neither in
this table nor recorded by a rule of the same file.

Label conventions (see docs/metrics.md):
- Every series of a training job carries the spec's `selector` labels (default
  `training_job="<name>"`), set as target labels in the scrape config or by the exporter's
  `--label` flag, and a `node` label (the host name).
- Training-process series also carry `rank` (global rank) and `local_rank`.
- Per-GPU series carry `gpu` (index on the node), `uuid` and `model`.
"""

from __future__ import annotations

from trainsignals.metrics.dcgm import DCGM_METRICS
from trainsignals.metrics.external import EXTERNAL_METRICS
from trainsignals.metrics.gpu_exporter import GPU_EXPORTER_METRICS
from trainsignals.metrics.model import Metric
from trainsignals.metrics.training import TRAINING_METRICS

# In docs/metrics.md order: what trainsignals exports, then what it reads from others.
METRICS: tuple[Metric, ...] = (*TRAINING_METRICS, *GPU_EXPORTER_METRICS, *EXTERNAL_METRICS)

BY_NAME: dict[str, Metric] = {m.name: m for m in (*METRICS, *DCGM_METRICS)}


def known_series_names() -> frozenset[str]:
    """Every series name a rule or panel may read without recording it itself."""
    return frozenset(s for m in (*METRICS, *DCGM_METRICS) for s in m.series_names)
