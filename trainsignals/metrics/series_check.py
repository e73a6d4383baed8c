"""Which raw series a job's rules and panels read, with the matchers they read them with.

`selectors` collects the vector selectors of a job's rules and panels (as promql_reads.py
parses them: the one answer to what an expression reads), with the alerts each one feeds. Pure
text work: asking a live Prometheus why a selector matches nothing is readiness's
(trainsignals/ops/readiness/diagnose.py), above this layer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from trainsignals.metrics.optional_series import OPTIONAL_SERIES
from trainsignals.metrics.promql_reads import Matcher, names
from trainsignals.metrics.promql_reads import selectors as expr_selectors

# Series that exist only once something happened; absent on a healthy job is fine.
EVENT_ONLY = {
    "ALERTS": "only while an alert is pending or firing",
    "trainsignals_gpu_xid_errors_total": "appears with a GPU's first XID error",
    "trainsignals_gpu_exporter_nvml_errors_total": "appears with the first failed NVML call",
    "trainsignals_gpu_process_memory_used_bytes": "only while processes hold GPU memory",
    "trainsignals_gpu_fan_speed_ratio": "only on boards with fans",
    "DCGM_FI_DEV_XID_ERRORS": "appears with a GPU's first XID error",
    # Recorded by the fleet's node rules (alerts/nodes.rules.yaml), not the job's: a panel
    # reads it; it exists from a node's first hardware incident on.
    "node:trainsignals_hardware_incidents:count30d": (
        "recorded by alerts/nodes.rules.yaml from a node's first hardware incident on"
    ),
    "node:trainsignals_hardware_score:count30d": (
        "recorded by alerts/nodes.rules.yaml from a node's first hardware incident or ticket on"
    ),
    **OPTIONAL_SERIES,  # read where present, with a fallback (optional_series.py)
}
# Components a job may not run: fine to miss where only panels read them (they stay empty).
PANEL_ONLY_COMPONENTS = {"node_exporter (Prometheus project)"}
_TEMPLATE_RANGE = re.compile(r"\[\$\{?\w+\}?\]")
_TEMPLATE_VAR = re.compile(r"\$\{?\w+\}?")


@dataclass
class Selector:
    """One series selector and who reads it."""

    name: str
    matchers: tuple[Matcher, ...]
    readers: list[str] = field(default_factory=list)
    alerts: list[str] = field(default_factory=list)  # alerts that depend on it

    def text(self, matchers: Iterable[Matcher] | None = None) -> str:
        chosen = self.matchers if matchers is None else tuple(matchers)
        return f"{self.name}{{{','.join(str(m) for m in chosen)}}}"


def dashboard_expr(expr: str) -> str:
    """A panel query with Grafana's template variables replaced: any node, any GPU."""
    return _TEMPLATE_VAR.sub(".*", _TEMPLATE_RANGE.sub("[5m]", expr))


def _recorded_inputs(expr: str, records: Mapping[str, Sequence[str]]) -> set[str]:
    """Recorded names `expr` reads, directly or through other recording rules."""
    todo = [*names(expr)]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in records and name not in seen:
            seen.add(name)
            todo += [n for text in records[name] for n in names(text)]
    return seen


def selectors(
    records: Mapping[str, Sequence[str]],
    alerts: Mapping[str, Sequence[str]],
    panels: Iterable[tuple[str, str]],
) -> list[Selector]:
    """Raw-series selectors read by recording rules, alerts and panels ({reader: every
    expression of that name}: one name may be recorded by several rules, one per SLO).

    A name some rule records is skipped (its inputs are checked instead). Each selector
    lists the alerts that depend on it, directly or through recording rules: missing, it
    silences them; a selector no alert depends on only empties panels.
    """
    readers = [
        *(
            (name, expr)
            for rules in (records, alerts)
            for name, exprs in rules.items()
            for expr in exprs
        ),
        *panels,
    ]
    by_text: dict[str, Selector] = {}
    for reader, expr in readers:
        for name, matchers in expr_selectors(expr):
            if not name or name in records:
                continue
            selector = Selector(name, matchers)
            selector = by_text.setdefault(selector.text(), selector)
            if reader not in selector.readers:
                selector.readers.append(reader)
    for alert, exprs in sorted(alerts.items()):
        chain = {alert}.union(*(_recorded_inputs(expr, records) for expr in exprs))
        for selector in by_text.values():
            if chain & set(selector.readers):
                selector.alerts.append(alert)
    return sorted(by_text.values(), key=lambda s: s.text())
