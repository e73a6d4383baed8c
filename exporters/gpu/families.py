"""Builds the metric families of one scrape, with names, types and help from the catalog."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from trainsignals.metric_catalog import BY_NAME, Kind


class Families:
    """Samples of one scrape, grouped by family; constant labels go on every series."""

    def __init__(self, const_labels: dict[str, str]) -> None:
        self._const_keys = list(const_labels)
        self._const_values = list(const_labels.values())
        self._families: dict[str, Metric] = {}

    def add(self, name: str, labels: Sequence[str], value: float) -> None:
        family = self._families.get(name)
        if family is None:
            spec = BY_NAME[name]  # KeyError here means the catalog lacks a row
            kind = CounterMetricFamily if spec.kind is Kind.COUNTER else GaugeMetricFamily
            family = kind(name, spec.help, labels=[*spec.labels, *self._const_keys])
            self._families[name] = family
        family.add_metric([*labels, *self._const_values], value)

    def __iter__(self) -> Iterator[Metric]:
        return iter(self._families.values())
