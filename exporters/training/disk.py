"""Scrape-time collectors: checkpoint file-system free/size bytes, and a `_created` filter."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from trainsignals.metrics.training import help_text

# Catalogue names (trainsignals/metrics/training.py).
DISK_FREE = "trainsignals_checkpoint_disk_free_bytes"
DISK_SIZE = "trainsignals_checkpoint_disk_size_bytes"


class DiskUsage(NamedTuple):
    total: int
    free: int


# Signature of shutil.disk_usage reduced to what we read; the simulator swaps in its own.
DiskUsageFn = Callable[[str], DiskUsage]


def real_disk_usage(path: str) -> DiskUsage:
    usage = shutil.disk_usage(path)
    return DiskUsage(usage.total, usage.free)


class CheckpointDiskCollector(Collector):
    """Yields free/size of the file system holding `path`; nothing when it cannot be read.

    An absent series (rather than 0) lets alerts tell "no data" from "disk full".
    """

    def __init__(
        self,
        path: str,
        label_names: Sequence[str],
        label_values: Sequence[str],
        usage: DiskUsageFn = real_disk_usage,
    ) -> None:
        self._path = path
        self._names = [*label_names, "path"]
        self._values = [*label_values, path]
        self._usage = usage

    def collect(self) -> Iterable[Metric]:
        try:
            usage = self._usage(self._path)
        except OSError:
            return []
        free = GaugeMetricFamily(DISK_FREE, help_text(DISK_FREE), labels=self._names)
        free.add_metric(self._values, float(usage.free))
        size = GaugeMetricFamily(DISK_SIZE, help_text(DISK_SIZE), labels=self._names)
        size.add_metric(self._values, float(usage.total))
        return [free, size]

    def describe(self) -> Iterable[Metric]:
        # Describing without reading the disk keeps registration cheap and side-effect free.
        return [
            GaugeMetricFamily(DISK_FREE, "", labels=self._names),
            GaugeMetricFamily(DISK_SIZE, "", labels=self._names),
        ]


class WithoutCreated(Collector):
    """Re-exposes a registry without the `<counter>_created` samples prometheus_client adds.

    Done per registry rather than with the process-wide disable_created_metrics() switch,
    which would change every other registry in the process.
    """

    def __init__(self, inner: Collector) -> None:
        self._inner = inner

    def collect(self) -> Iterable[Metric]:
        for family in self._inner.collect():
            family.samples = [s for s in family.samples if not s.name.endswith("_created")]
            yield family

    def describe(self) -> Iterable[Metric]:
        return []
