"""What each alert of a rules document reads: the series its fault test must carry.

An alert's value at every evaluation is a function of the series its expression selects,
directly or through the recording rules it reads; no other series can change it. A fault
test asserts on one alert alone (its `ALERTS` series), so it needs only those: the rest of
the healthy job would be written, reviewed and evaluated for nothing (they were about half
of every test file). The healthy, restart and completion tests assert that *nothing* fires:
they keep every series.

Names are found as name-like tokens of the rule texts, a superset of the metric names read
(label names and functions come along, harmlessly): no parse, and nothing read is missed.
An expression that reads other alerts (`ALERTS`) or picks series by a pattern on their name
(`__name__`) may depend on any series: its test keeps them all.
"""

from __future__ import annotations

import re

# A series name as PromQL spells it: a maximal run of word characters and colons.
_NAME = re.compile(r"[\w:]+")
# Tokens that make what an expression reads unknowable from its names.
_OPEN_ENDED = frozenset({"ALERTS", "ALERTS_FOR_STATE", "__name__"})

Reads = frozenset[str] | None  # None: any series may count


def alert_reads(document: dict) -> dict[str, Reads]:
    """{alert name: the names its rules read} for a Prometheus rules document (the union
    over an alert's rules where several share its name)."""
    records: dict[str, list[str]] = {}
    alerts: dict[str, list[str]] = {}
    for group in document["groups"]:
        for rule in group["rules"]:
            if "record" in rule:
                records.setdefault(rule["record"], []).append(rule["expr"])
            else:
                alerts.setdefault(rule["alert"], []).append(rule["expr"])
    memo: dict[str, frozenset[str]] = {}
    reads: dict[str, Reads] = {}
    for alert, exprs in alerts.items():
        found = frozenset().union(*(_closure(expr, records, memo) for expr in exprs))
        reads[alert] = None if found & _OPEN_ENDED else found
    return reads


def _closure(expr: str, records: dict[str, list[str]], memo: dict[str, frozenset[str]]) -> set:
    """The tokens of `expr` and of every recording rule it reads, transitively."""
    found = set(_NAME.findall(expr))
    for name in found & records.keys():
        found |= _record_closure(name, records, memo)
    return found


def _record_closure(
    name: str, records: dict[str, list[str]], memo: dict[str, frozenset[str]]
) -> frozenset[str]:
    if name not in memo:
        memo[name] = frozenset()  # a cycle reads nothing more
        found: set[str] = set()
        for expr in records[name]:
            found |= _closure(expr, records, memo)
        memo[name] = frozenset(found)
    return memo[name]


def keeps(reads: Reads, series: str) -> bool:
    """Whether a test input (its selector text, `name{labels}`) is one `reads` needs."""
    return reads is None or series.partition("{")[0] in reads
