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

from trainsignals.generator.signals.recording import name_tokens, record_tokens, records_read

# Tokens that make what an expression reads unknowable from its names.
_OPEN_ENDED = frozenset({"ALERTS", "ALERTS_FOR_STATE", "__name__"})

Reads = frozenset[str] | None  # None: any series may count


# The last document analysed, its alert_reads and its record_tokens: a job's short and long
# test files ask for them seven times, and tokenising a document costs ~2 ms. (Kept by
# identity: the pipeline never changes a rules document once built.)
_analysed: tuple[dict, dict[str, Reads], dict[str, set[str]]] | None = None


def alert_reads(document: dict) -> dict[str, Reads]:
    """{alert name: the names its rules read} for a Prometheus rules document (the union
    over an alert's rules where several share its name). Not to be changed: it is shared."""
    return _analysis(document)[1]


def document_tokens(document: dict) -> dict[str, set[str]]:
    """record_tokens of the document's recording rules. Not to be changed: it is shared."""
    return _analysis(document)[2]


def _analysis(document: dict) -> tuple[dict, dict[str, Reads], dict[str, set[str]]]:
    global _analysed
    if _analysed is None or _analysed[0] is not document:
        _analysed = (document, *_analyse(document))
    return _analysed


def _analyse(document: dict) -> tuple[dict[str, Reads], dict[str, set[str]]]:
    groups = document["groups"]
    tokens = record_tokens(r for g in groups for r in g["rules"] if "record" in r)
    alerts: dict[str, set[str]] = {}  # an alert's tokens, over every rule of that name
    for group in groups:
        for rule in group["rules"]:
            if "alert" in rule:
                alerts.setdefault(rule["alert"], set()).update(name_tokens(rule["expr"]))
    reads: dict[str, Reads] = {}
    for alert, found in alerts.items():
        found = found.union(*(tokens[name] for name in records_read(found, tokens)))
        reads[alert] = None if found & _OPEN_ENDED else frozenset(found)
    return reads, tokens


def keeps(reads: Reads, series: str) -> bool:
    """Whether a test input (its selector text, `name{labels}`) is one `reads` needs."""
    return reads is None or series.partition("{")[0] in reads
