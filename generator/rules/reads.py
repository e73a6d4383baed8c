"""What each alert of a rules document reads: the series its fault test must carry.

An alert's value at every evaluation is a function of the series its expression selects,
directly or through the recording rules it reads; no other series can change it. A fault
test asserts on one alert alone (its `ALERTS` series), so it needs only those: the rest of
the healthy job would be written, reviewed and evaluated for nothing (44% of llama-8b's
test file). The healthy, restart, completion and node-outage tests assert that *nothing* fires:
they keep every series.

Names are found as name-like tokens of the rule texts, a superset of the metric names read
(label names and functions come along, harmlessly): no parse, and nothing read is missed.
An expression that reads other alerts (`ALERTS`) or picks series by a pattern on their name
(`__name__`) may depend on any series: its test keeps them all.
"""

from __future__ import annotations

from trainsignals.generator.signals.recording import name_tokens

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
    # Each record's tokens once (a record read by several alerts is tokenised once).
    tokens = {name: set().union(*map(name_tokens, exprs)) for name, exprs in records.items()}
    reads: dict[str, Reads] = {}
    for alert, exprs in alerts.items():
        found = _closure(set().union(*map(name_tokens, exprs)), tokens)
        reads[alert] = None if found & _OPEN_ENDED else frozenset(found)
    return reads


def _closure(found: set[str], tokens: dict[str, set[str]]) -> set[str]:
    """`found` and the tokens of every recording rule it names, transitively (a walk with its
    own visited set: a cycle of records ends, and reads them all)."""
    pending = [*found & tokens.keys()]
    seen: set[str] = set()
    while pending:
        name = pending.pop()
        if name not in seen:
            seen.add(name)
            found |= tokens[name]
            pending += tokens[name] & tokens.keys()
    return found


def keeps(reads: Reads, series: str) -> bool:
    """Whether a test input (its selector text, `name{labels}`) is one `reads` needs."""
    return reads is None or series.partition("{")[0] in reads
