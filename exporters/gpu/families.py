"""The samples of one scrape, grouped by family; names, types and help come from the catalog.

A scrape only appends `(label values, value)` pairs: no per-sample dicts or Sample objects.
Two consumers read the result: `metrics()` builds prometheus_client metric families (for
callers that use the registry, e.g. `generate_latest`), and `exposition.TextWriter` writes the
text format directly, which is what `/metrics` serves.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from trainsignals.metrics.catalog import BY_NAME
from trainsignals.metrics.model import Kind

# (values of the catalog labels of the family, in catalog order; the value)
Sample = tuple[tuple[str, ...], float]


@dataclass(frozen=True)
class FamilySpec:
    name: str  # catalog name; counters end in _total, which is also the sample name
    counter: bool
    help: str
    labels: tuple[str, ...]  # catalog labels, without the constant labels


@cache
def family_spec(name: str) -> FamilySpec:
    spec = BY_NAME[name]  # KeyError here means the catalog lacks a row
    return FamilySpec(name, spec.kind is Kind.COUNTER, spec.help, tuple(spec.labels))


class Families:
    """Samples of one scrape in insertion order; constant labels go on every series."""

    def __init__(self, const_labels: dict[str, str]) -> None:
        self.const_labels = const_labels
        self.samples: dict[str, list[Sample]] = {}

    def add(self, name: str, labels: tuple[str, ...], value: float) -> None:
        samples = self.samples.get(name)
        if samples is None:
            family_spec(name)  # fail at the first add of a name the catalog lacks
            samples = self.samples[name] = []
        samples.append((labels, value))

    def metrics(self) -> Iterator[Metric]:
        """prometheus_client metric families of these samples (what `collect()` yields)."""
        const_keys, const_values = list(self.const_labels), list(self.const_labels.values())
        for name, samples in self.samples.items():
            spec = family_spec(name)
            kind = CounterMetricFamily if spec.counter else GaugeMetricFamily
            family = kind(name, spec.help, labels=[*spec.labels, *const_keys])
            for labels, value in samples:
                family.add_metric([*labels, *const_values], value)
            yield family

    __iter__ = metrics
