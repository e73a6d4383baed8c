"""The unit of a promtool test's input: one series, its labels and its per-interval values."""

from __future__ import annotations

from typing import NamedTuple

from trainsignals.generator.signals.promql import matchers


class RawSeries(NamedTuple):
    """One input series for a promtool test: name, labels and per-interval values.

    A named tuple: a spec's tests build ~900 of them, and a frozen dataclass's __init__ (an
    object.__setattr__ per field) was 3% of generating a spec with its tests."""

    name: str
    labels: dict[str, str]
    values: list[float | None]

    def selector(self) -> str:
        return self.name + matchers(self.labels)
