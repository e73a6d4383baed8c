"""Which of the alerts that fired reached a receiver: Alertmanager's view, replayed.

Prometheus's `ALERTS` is written before Alertmanager: an alert an inhibition rule or a
silence suppressed fired in Prometheus but notified nobody. Alertmanager keeps no history of
what it sent, so the postmortem replays its rules over the ALERTS history: at each sample
time, an alert is suppressed while a firing source alert of an inhibition rule matches it
(with the rule's `equal` labels), or while a silence covers it. The rules and silences come
from the live Alertmanager (`/api/v2/status`, whose `config.original` is the loaded
configuration, and `/api/v2/silences`, which keeps expired silences for its retention), or
from a configuration file (no silences then).
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

import yaml

from trainsignals.ops.postmortem.timeline import AlertEvent

# Alertmanager's matcher syntax: name, operator, value (quoted or bare), e.g.
# alertname=~"GpuLost|GpuXidCritical", severity=page.
_MATCHER = re.compile(r'^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*(".*"|[^"]*?)\s*$')


@dataclass(frozen=True)
class LabelMatcher:
    name: str
    op: str  # = != =~ !~ (regexes are anchored, as Alertmanager's are)
    value: str

    def matches(self, labels: dict[str, str]) -> bool:
        have = labels.get(self.name, "")
        if self.op in ("=", "!="):
            return (have == self.value) == (self.op == "=")
        return (re.fullmatch(self.value, have) is not None) == (self.op == "=~")

    def __str__(self) -> str:
        return f"{self.name}{self.op}{json.dumps(self.value)}"


def parse_matcher(text: str) -> LabelMatcher:
    found = _MATCHER.match(text)
    if not found:
        raise ValueError(f"not an Alertmanager matcher: {text!r}")
    name, op, value = found.groups()
    if value.startswith('"'):
        value = json.loads(value)
    return LabelMatcher(name, op, value)


def _all(matchers: Iterable[LabelMatcher], labels: dict[str, str]) -> bool:
    return all(m.matches(labels) for m in matchers)


@dataclass(frozen=True)
class InhibitRule:
    source: tuple[LabelMatcher, ...]
    target: tuple[LabelMatcher, ...]
    equal: tuple[str, ...]

    @classmethod
    def from_config(cls, rule: dict) -> InhibitRule:
        """Both syntaxes: `*_matchers` and the older `*_match` / `*_match_re` maps."""

        def side(kind: str) -> tuple[LabelMatcher, ...]:
            found = [parse_matcher(m) for m in rule.get(f"{kind}_matchers") or []]
            found += [
                LabelMatcher(k, "=", str(v)) for k, v in (rule.get(f"{kind}_match") or {}).items()
            ]
            found += [
                LabelMatcher(k, "=~", str(v))
                for k, v in (rule.get(f"{kind}_match_re") or {}).items()
            ]
            return tuple(found)

        return cls(side("source"), side("target"), tuple(rule.get("equal") or ()))

    def inhibits(self, source: dict[str, str], target: dict[str, str]) -> bool:
        if not (_all(self.target, target) and _all(self.source, source)):
            return False
        if any(source.get(name, "") != target.get(name, "") for name in self.equal):
            return False
        # Alertmanager: an alert matching both sides is not inhibited by another that does.
        both = _all(self.source, target)
        return not (both and _all(self.target, source))

    def __str__(self) -> str:
        return ", ".join(str(m) for m in self.source)


@dataclass(frozen=True)
class Silence:
    matchers: tuple[LabelMatcher, ...]
    starts: float
    ends: float
    comment: str = ""

    def covers(self, labels: dict[str, str], at: float) -> bool:
        return self.starts <= at < self.ends and _all(self.matchers, labels)


@dataclass
class Suppression:
    """What Alertmanager suppresses: its inhibition rules and silences, and where they came
    from (for the draft)."""

    source: str
    rules: list[InhibitRule] = field(default_factory=list)
    silences: list[Silence] = field(default_factory=list)

    def reason(
        self, labels: dict[str, str], at: float, firing: Sequence[dict[str, str]]
    ) -> str | None:
        """Why an alert with `labels` was suppressed at `at` (`firing`: every alert firing
        then), or None when it was not."""
        for silence in self.silences:
            if silence.covers(labels, at):
                return f"silenced ({silence.comment or 'a silence'})"
        for rule in self.rules:
            for source in firing:
                if source is not labels and rule.inhibits(source, labels):
                    return f"inhibited by {source.get('alertname', '?')}"
        return None


def _time(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _get(url: str, timeout: float) -> object:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return json.load(resp)
    except OSError as exc:
        raise RuntimeError(f"cannot read {url}: {exc}") from None


def from_config(config: dict, source: str) -> Suppression:
    rules = [InhibitRule.from_config(r) for r in config.get("inhibit_rules") or []]
    return Suppression(source, rules)


def from_alertmanager(url: str, timeout: float = 10.0) -> Suppression:
    base = url.rstrip("/")
    status = _get(f"{base}/api/v2/status", timeout)
    original = status["config"]["original"] if isinstance(status, dict) else ""
    found = from_config(yaml.safe_load(original) or {}, f"Alertmanager at {base}")
    for item in _get(f"{base}/api/v2/silences", timeout) or []:
        matchers = tuple(
            LabelMatcher(
                m["name"],
                ("=" if m.get("isEqual", True) else "!=")
                if not m.get("isRegex")
                else ("=~" if m.get("isEqual", True) else "!~"),
                m["value"],
            )
            for m in item["matchers"]
        )
        found.silences.append(
            Silence(
                matchers, _time(item["startsAt"]), _time(item["endsAt"]), item.get("comment", "")
            )
        )
    return found


def load_suppression(
    alertmanager: str | None, config: Path | None, timeout: float
) -> Suppression | None:
    """The live Alertmanager's rules and silences, else a configuration file's rules, else
    None (the draft then says pages are page-severity alerts, unchecked)."""
    if alertmanager:
        return from_alertmanager(alertmanager, timeout)
    if config is not None and config.is_file():
        return from_config(yaml.safe_load(config.read_text(encoding="utf-8")) or {}, str(config))
    return None


def mark_delivery(
    events: list[AlertEvent], suppression: Suppression | None, extra: dict[str, str] | None = None
) -> list[AlertEvent]:
    """Each event with when it first fired unsuppressed (None: suppressed throughout).

    `extra` labels are those Alertmanager sees beside the alert's own (Prometheus's external
    labels); they matter only to matchers that read them.
    """
    if suppression is None:
        return events
    labels_of = {id(e): {**(extra or {}), **e.labels, "alertname": e.alertname} for e in events}
    firing_at: dict[float, list[dict[str, str]]] = {}
    for e in events:
        for t in e.firing_times:
            firing_at.setdefault(t, []).append(labels_of[id(e)])
    out = []
    for e in events:
        labels = labels_of[id(e)]
        first, why = None, ""
        for t in e.firing_times:
            reason = suppression.reason(labels, t, firing_at[t])
            if reason is None:
                first = t
                break
            why = why or reason
        out.append(replace(e, first_delivered=first, delivery_known=True, suppressed_by=why))
    return out
