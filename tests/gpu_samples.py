"""Scrape a GPU exporter's registry into samples, and pick one: shared by the exporter tests."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from trainsignals.exporters.gpu.server import Exporter

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(exporter: Exporter) -> Samples:
    text = generate_latest(exporter.registry).decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    """The one sample of `name` whose labels include `labels`; None when absent."""
    found = [v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= ls]
    assert len(found) <= 1, f"{name} {labels} matches {len(found)} series"
    return found[0] if found else None
