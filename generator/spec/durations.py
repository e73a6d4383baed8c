"""Prometheus-style durations ("90s", "10m", "6h", "1d") as whole seconds, and back."""

from __future__ import annotations

import re

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
# As the spec's JSON Schema writes it (generator/docs/spec_reference.py).
DURATION_PATTERN = r"^([0-9]+[smhdw])+$"
_PATTERN = re.compile(DURATION_PATTERN)
_PART = re.compile(r"(\d+)([smhdw])")


def parse_duration(text: str) -> int:
    """Seconds in a duration such as "1h30m"; ValueError with the accepted form otherwise."""
    text = text.strip()
    if not _PATTERN.match(text):
        raise ValueError(f"{text!r} is not a duration; write e.g. 90s, 10m, 6h or 1d")
    return sum(int(n) * _UNITS[u] for n, u in _PART.findall(text))


def format_duration(seconds: float) -> str:
    """The shortest Prometheus duration for a whole number of seconds (at least 1s)."""
    remaining = max(1, round(seconds))
    parts = []
    for unit in ("d", "h", "m", "s"):
        size = _UNITS[unit]
        count, remaining = divmod(remaining, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)
