"""What a catalogue entry is (Metric, its Component and Kind) and the label sets entries share."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Component(StrEnum):
    TRAINING = "training instrumentation (trainsignals.exporters.training)"
    GPU_EXPORTER = "GPU exporter (trainsignals-gpu-exporter)"
    DCGM_EXPORTER = "dcgm-exporter (NVIDIA, when the spec sets gpu_metrics: dcgm)"
    NODE_EXPORTER = "node_exporter (Prometheus project)"
    PROMETHEUS = "Prometheus itself"
    ALERTMANAGER = "Alertmanager (/metrics)"


class Kind(StrEnum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"
    INFO = "info"


@dataclass(frozen=True)
class Metric:
    name: str
    kind: Kind
    component: Component
    labels: tuple[str, ...]
    help: str

    @property
    def series_names(self) -> tuple[str, ...]:
        """Names that appear in PromQL for this metric (histograms expand to three)."""
        if self.kind is Kind.HISTOGRAM:
            return (f"{self.name}_bucket", f"{self.name}_sum", f"{self.name}_count")
        return (self.name,)


JOB = ("node", "rank", "local_rank")
GPU = ("node", "gpu", "uuid", "model")
