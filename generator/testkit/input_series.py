"""The unit of a promtool test's input: one series, its labels and its per-interval values."""

from __future__ import annotations

from dataclasses import dataclass

from trainsignals.generator.signals.promql import matchers


@dataclass(frozen=True)
class RawSeries:
    """One input series for a promtool test: name, labels and per-interval values."""

    name: str
    labels: dict[str, str]
    values: list[float | None]

    def selector(self) -> str:
        return self.name + matchers(self.labels)
