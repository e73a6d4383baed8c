"""What each alert of a rules document reads: the series its fault test must carry.

An alert's value at every evaluation is a function of the series its expression selects,
directly or through the recording rules it reads; no other series can change it. A fault
test asserts on one alert alone (its `ALERTS` series), so it needs only those: the rest of
the healthy job would be written, reviewed and evaluated for nothing (44% of llama-8b's
test file). The healthy, restart, completion and node-outage tests assert that *nothing* fires:
they keep every series.

Names are the metric names of the rules' selectors (trainsignals/metrics/promql_reads.py).
An expression that reads other alerts (`ALERTS`) or picks series by a pattern on their name
(`__name__=~`) may depend on any series: its test keeps them all.
"""

from __future__ import annotations

from trainsignals.metrics.promql_reads import names, reads_any_name, record_names, records_read

# Series that make what an expression reads depend on every other alert's inputs.
_OPEN_ENDED = frozenset({"ALERTS", "ALERTS_FOR_STATE"})

Reads = frozenset[str] | None  # None: any series may count


# The last document analysed, its alert_reads and its record_reads: a job's short and long
# test files ask for them seven times. (Kept by identity: the pipeline never changes a rules
# document once built.)
_analysed: tuple[dict, dict[str, Reads], dict[str, set[str]]] | None = None


def alert_reads(document: dict) -> dict[str, Reads]:
    """{alert name: the names its rules read} for a Prometheus rules document (the union
    over an alert's rules where several share its name). Not to be changed: it is shared."""
    return _analysis(document)[1]


def record_reads(document: dict) -> dict[str, set[str]]:
    """{record name: the names its rules read} of the document's recording rules
    (promql_reads.record_names). Not to be changed: it is shared."""
    return _analysis(document)[2]


def _analysis(document: dict) -> tuple[dict, dict[str, Reads], dict[str, set[str]]]:
    global _analysed
    if _analysed is None or _analysed[0] is not document:
        _analysed = (document, *_analyse(document))
    return _analysed


def _analyse(document: dict) -> tuple[dict[str, Reads], dict[str, set[str]]]:
    groups = document["groups"]
    records = [r for g in groups for r in g["rules"] if "record" in r]
    read = record_names(records)
    open_records = {r["record"] for r in records if reads_any_name(r["expr"])}
    alerts: dict[str, set[str]] = {}  # an alert's names, over every rule of that name
    open_alerts: set[str] = set()
    for group in groups:
        for rule in group["rules"]:
            if "alert" in rule:
                alerts.setdefault(rule["alert"], set()).update(names(rule["expr"]))
                if reads_any_name(rule["expr"]):
                    open_alerts.add(rule["alert"])
    reads: dict[str, Reads] = {}
    for alert, found in alerts.items():
        through = records_read(found, read)
        found = found.union(*(read[name] for name in through))
        open_ended = alert in open_alerts or through & open_records or found & _OPEN_ENDED
        reads[alert] = None if open_ended else frozenset(found)
    return reads, read


def keeps(reads: Reads, series: str) -> bool:
    """Whether a test input (its selector text, `name{labels}`) is one `reads` needs."""
    return reads is None or series.partition("{")[0] in reads
