"""The rules each promtool test group needs, so a test file can run one rule subset per need.

promtool evaluates every rule of a test file's rule files at every step of every test group,
and the step's cost is mostly fixed per rule (the expression is parsed again at each
evaluation): a fault test that feeds two series into one alert still pays for the job's ~150
rules at each of its 550 minutes (6.4 s of CPU where the rules it needs take 0.1 s).

A group's checks are a function of the series their expressions select, directly, through the
recording rules they read, or through other alerts' `ALERTS` series; no other rule can change
them. So a group needs the closure of those, and nothing else: the rules it keeps are the
same text in the same groups and order, evaluated at the same times. Groups that need the same
rules share a subset. An expression that picks series by a pattern on their name reads
anything: its group keeps every rule.

An alert's annotations and labels are templates that may `query` series too: every record named
in such a template is kept with the alert (the queries build their text with printf, so the
names are found as tokens of the template, a superset), and a template naming `ALERTS` keeps
every rule.

An `ALERTS` selector keeps every alert it may match: its `alertname` matcher against the
rule's name, its other matchers against the rule's static labels where the rule sets them
(a label the rule does not set, or sets from a template, may come from its expression).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from trainsignals.metrics.promql_reads import Matcher, reads_any_name, selectors

# The series promtool derives from alert rules.
_ALERT_SERIES = frozenset({"ALERTS", "ALERTS_FOR_STATE"})
_QUERY = re.compile(r"\bquery\b")
_NAME_TOKEN = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")

Need = frozenset[str] | None  # the record and alert names a group needs; None: every rule


@dataclass
class _Rules:
    """The expressions behind each record and alert name of a set of rule documents."""

    records: dict[str, list[str]] = field(default_factory=dict)
    alerts: dict[str, list[dict]] = field(default_factory=dict)

    @classmethod
    def of(cls, documents: Iterable[dict]) -> _Rules:
        rules = cls()
        for document in documents:
            for group in document.get("groups") or []:
                for rule in group["rules"]:
                    if "record" in rule:
                        rules.records.setdefault(rule["record"], []).append(rule["expr"])
                    else:
                        rules.alerts.setdefault(rule["alert"], []).append(rule)
        return rules

    def alerts_matching(self, matchers: Sequence[Matcher]) -> list[str]:
        return [
            name
            for name, rules in self.alerts.items()
            if any(
                all(_may_match(m, name, rule.get("labels") or {}) for m in matchers)
                for rule in rules
            )
        ]


def _group_need(rules: _Rules, group: dict) -> Need:
    """The record and alert names a test group's checks read, transitively."""
    keep: set[str] = set()
    pending = [check["expr"] for check in group.get("promql_expr_test") or []]

    def add_record(name: str) -> None:
        if name in rules.records and name not in keep:
            keep.add(name)
            pending.extend(rules.records[name])

    def add_alert(alert: str) -> bool:
        """Keep `alert` and queue what it reads; False where that is every rule."""
        keep.add(alert)
        for rule in rules.alerts.get(alert, []):
            pending.append(rule["expr"])
            templated = _template_names(rule)
            if templated & _ALERT_SERIES:
                return False
            for name in templated:
                add_record(name)
        return True

    for check in group.get("alert_rule_test") or []:
        if check["alertname"] not in keep and not add_alert(check["alertname"]):
            return None
    while pending:
        expr = pending.pop()
        if reads_any_name(expr):
            return None
        for name, matchers in selectors(expr):
            if name not in _ALERT_SERIES:
                add_record(name)
                continue
            for alert in rules.alerts_matching(matchers):
                if alert not in keep and not add_alert(alert):
                    return None
    return frozenset(keep)


def _template_names(rule: dict) -> set[str]:
    """The name-like tokens of an alert's annotation and label templates that `query`."""
    texts = [*(rule.get("annotations") or {}).values(), *(rule.get("labels") or {}).values()]
    return {
        name
        for text in map(str, texts)
        if _QUERY.search(text)
        for name in _NAME_TOKEN.findall(text)
    }


@dataclass(frozen=True)
class Subset:
    """Test groups that need the same rules, and each rule file cut down to those rules."""

    tests: list[dict]
    rule_documents: dict[str, dict]  # rule file name (as the suite names it) -> its subset
    need: Need

    def reads_any(self, names: Collection[str]) -> bool:
        """Whether one of these records or alerts is among the rules the groups run."""
        return self.need is None or not self.need.isdisjoint(names)


def needs(suite: dict, rule_documents: Mapping[str, dict]) -> list[Need]:
    """What each of the suite's test groups needs, in order (`rule_documents`: every file of
    its `rule_files`, parsed)."""
    missing = [name for name in suite.get("rule_files") or [] if name not in rule_documents]
    if missing:
        raise ValueError(f"rule files not given: {missing}")
    rules = _Rules.of(rule_documents.values())
    return [_group_need(rules, group) for group in suite.get("tests") or []]


def split_suite(suite: dict, rule_documents: Mapping[str, dict]) -> list[Subset]:
    """The suite's test groups by the rules they need, in order of first appearance.
    `rule_documents`: every file of the suite's `rule_files`, parsed."""
    by_need: dict[Need, list[dict]] = {}
    for group, need in zip(suite.get("tests") or [], needs(suite, rule_documents), strict=True):
        by_need.setdefault(need, []).append(group)
    return [
        Subset(
            groups, {name: cut(document, need) for name, document in rule_documents.items()}, need
        )
        for need, groups in by_need.items()
    ]


def cut(document: dict, need: Need) -> dict:
    """`document` with only the rules `need` names, in their groups and order; groups left
    empty are dropped."""
    if need is None:
        return document
    groups = []
    for group in document.get("groups") or []:
        kept = [r for r in group["rules"] if r.get("record", r.get("alert")) in need]
        if kept:
            groups.append({**group, "rules": kept})
    return {**document, "groups": groups}


def _may_match(matcher: Matcher, alert: str, labels: Mapping[str, str]) -> bool:
    """Whether an alert named `alert` with static `labels` may have an ALERTS series that
    `matcher` selects (alertstate and labels from the expression: unknown, so yes)."""
    if matcher.label == "alertname":
        value = alert
    elif matcher.label in labels and "{{" not in str(labels[matcher.label]):
        value = str(labels[matcher.label])
    else:
        return True
    if matcher.op == "=":
        return value == matcher.value
    if matcher.op == "!=":
        return value != matcher.value
    try:  # Prometheus regexes are anchored at both ends
        found = re.fullmatch(matcher.value, value) is not None
    except re.error:
        return True
    return found if matcher.op == "=~" else not found
