"""PromQL building blocks bound to one spec: selectors, windows and the time scale."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.utils import floatToGoString

from trainsignals.generator.spec.durations import format_duration
from trainsignals.generator.spec.job import JobSpec


@dataclass(frozen=True)
class Op:
    """A label matcher other than equality: `Op("=~", "a|b")`."""

    operator: str
    value: str


def regex(value: str) -> Op:
    return Op("=~", value)


def not_regex(value: str) -> Op:
    return Op("!~", value)


def le_label(bound: float) -> str:
    """A histogram bucket's `le` exactly as prometheus_client writes it ("2.5", "2.0")."""
    return floatToGoString(bound)


def matchers(labels: dict[str, str | Op]) -> str:
    """`{a="1",b=~"2|3"}`, sorted so output is stable. Values were validated as safe by the spec."""
    # A spec asks for ~1,000 selectors, a quarter of them distinct (a test series recurs in
    # test after test): each text is built once, keyed on the labels as given (strings or Ops,
    # as typed: equal keys, equal texts).
    key = tuple(labels.items())
    text = _MATCHERS.get(key)
    if text is None:
        if len(_MATCHERS) >= _MATCHERS_MAX:
            _MATCHERS.clear()
        text = _MATCHERS[key] = _matchers(labels)
    return text


_MATCHERS: dict[tuple, str] = {}
_MATCHERS_MAX = 4096  # texts; emptied past it (a spec adds ~250)


def _matchers(labels: dict[str, str | Op]) -> str:
    # Equality written directly, without an Op per label: every test series is a selector.
    # (A plain loop, strings tested first: most values are; ~15% faster than a comprehension.)
    parts = []
    for name, value in sorted(labels.items()):
        if type(value) is not str and isinstance(value, Op):
            parts.append(f'{name}{value.operator}"{value.value}"')
        else:
            parts.append(f'{name}="{value}"')
    return "{" + ",".join(parts) + "}"


@dataclass(frozen=True)
class RuleContext:
    """Everything a rule builder needs to know besides the spec itself.

    `time_scale` divides every window and `for` duration, so end-to-end tests can run hours of
    simulated training in seconds. Production specs use 1. Range windows never go below
    `min_range_seconds` (a rate() needs a few scrapes in its window), and an alert's `for`
    never below `min_for_seconds`.
    """

    spec: JobSpec
    time_scale: float = 1.0
    min_range_seconds: int = 60
    min_for_seconds: float = 1

    @property
    def job(self) -> str:
        return self.spec.name

    def seconds(self, nominal: float) -> float:
        return nominal / self.time_scale

    def range(self, nominal_seconds: float) -> str:
        """A range-vector window such as `5m`, scaled and clamped."""
        return format_duration(max(self.seconds(nominal_seconds), self.min_range_seconds))

    def duration(self, nominal_seconds: float) -> str:
        """An offset, horizon or evaluation interval, scaled; at least one second."""
        return format_duration(max(self.seconds(nominal_seconds), 1))

    def for_duration(self, nominal_seconds: float) -> str:
        """An alert's `for`, scaled; at least `min_for_seconds`. Production `for`s are a
        minute or more; under compression a floor of a few scrapes keeps one late scrape
        (a second of real time) from paging."""
        return format_duration(max(self.seconds(nominal_seconds), self.min_for_seconds, 1))

    def raw(self, **extra: str | Op) -> str:
        """Selector for raw series of this job (selector labels plus `extra`)."""
        return matchers({**self.spec.selector_labels, **extra})

    def training_targets(self) -> str:
        return self.raw(job=self.spec.scrape_jobs.training)

    def gpu_targets(self) -> str:
        return self.raw(job=self.spec.scrape_jobs.gpu)

    def recorded(self, **extra: str | Op) -> str:
        """Selector for this job's recorded series (they carry training_job=<name>)."""
        return matchers({"training_job": self.job, **extra})

    @property
    def job_label(self) -> dict[str, str]:
        return {"training_job": self.job}
