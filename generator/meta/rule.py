"""One meta-monitoring alert rule and the time scale of its windows (generator/meta/rules.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from trainsignals.generator.spec.durations import format_duration


@dataclass(frozen=True)
class Scale:
    """Windows and `for`s divided by `time_scale` (end-to-end tests only), as RuleContext."""

    time_scale: float = 1.0
    min_range_seconds: int = 60

    def range(self, seconds: float) -> str:
        return format_duration(max(seconds / self.time_scale, self.min_range_seconds))

    def duration(self, seconds: float) -> str:
        return format_duration(max(seconds / self.time_scale, 1))


@dataclass(frozen=True)
class MetaRule:
    """One alerting rule of the group (ScrapeTargetsVanished has one per scrape-job group)."""

    alert: str
    expr: str
    for_seconds: int
    severity: str
    job: str  # the `job` label: the component that is broken
    summary: str
    description: str
    dashboard_url: str
    extra_labels: dict[str, str] = field(default_factory=dict)


def escape(value: str) -> str:
    return re.escape(value).replace("\\-", "-")
