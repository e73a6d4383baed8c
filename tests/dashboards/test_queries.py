"""The dashboard's queries: plain PromQL, reading only recorded or catalogued series."""

from __future__ import annotations

import re

from trainsignals.generator.dashboards.kit import iter_panels, panel_queries
from trainsignals.generator.nodes.files import nodes_document
from trainsignals.generator.signals.recording import recording_rules
from trainsignals.metrics import promql_reads
from trainsignals.metrics.catalog import known_series_names
from trainsignals.metrics.series_check import dashboard_expr

# --- queries -------------------------------------------------------------------------------------


# Grafana's variable query `label_values(<selector>, <label>)`: not PromQL, its selector is.
LABEL_VALUES = re.compile(r"label_values\((.+),\s*\w+\)")


def metric_names(expr: str) -> set[str]:
    """The series names a query's selectors read, by promql-parser (Grafana's variables set to
    any node, any GPU, a 5m range)."""
    variable_query = LABEL_VALUES.fullmatch(expr.strip())
    expr = variable_query.group(1) if variable_query else expr
    return set(promql_reads.names(dashboard_expr(expr)))


def test_metric_names_are_the_selectors() -> None:
    expr = (
        'avg_over_time(job:a:b{x="y z"}[$__rate_interval]) and on (training_job) sum by (node) '
        '(rate(c_total{d=~"$node"}[1m])) > 0 or up'
    )
    assert metric_names(expr) == {"job:a:b", "c_total", "up"}
    assert metric_names('label_values(up{training_job="j"}, node)') == {"up"}


def test_queries_read_only_recorded_or_catalogued_series(built: tuple) -> None:
    dashboard, _, ctx = built
    # The fleet-level records the job's dashboard shows (alerts/nodes.rules.yaml) too.
    fleet = {r.get("record") for g in nodes_document([], None)["groups"] for r in g["rules"]}
    allowed = {r["record"] for r in recording_rules(ctx)} | known_series_names() | fleet
    exprs = [e for _, e in panel_queries(dashboard)]
    exprs += [a["expr"] for a in dashboard["annotations"]["list"]]
    exprs += [v["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    for expr in exprs:
        names = metric_names(expr)
        assert names, f"no metric name found in {expr!r}"
        assert names <= allowed, f"{expr!r} reads {sorted(names - allowed)}"


def test_queries_are_plain_promql(built: tuple) -> None:
    # The end-to-end test substitutes $node and $gpu and runs every query on Prometheus.
    for panel_id, expr in panel_queries(built[0]):
        plain = expr.replace("$node", ".*").replace("$gpu", ".*").replace("$__range", "1h")
        assert "$" not in plain, (panel_id, expr)
        assert plain.count("(") == plain.count(")") and plain.count("{") == plain.count("}")


def test_panel_queries_cover_nested_rows() -> None:
    dashboard = {
        "panels": [
            {"type": "stat", "id": 1, "targets": [{"expr": "up", "refId": "A"}]},
            {
                "type": "row",
                "id": 100,
                "collapsed": True,
                "panels": [
                    {
                        "type": "timeseries",
                        "id": 2,
                        "targets": [{"expr": "a", "refId": "A"}, {"expr": "b", "refId": "B"}],
                    },
                ],
            },
        ]
    }
    assert panel_queries(dashboard) == [(1, "up"), (2, "a"), (2, "b")]


def test_every_panel_has_queries(built: tuple) -> None:
    dashboard, _, _ = built
    with_queries = {pid for pid, _ in panel_queries(dashboard)}
    for panel in iter_panels(dashboard):
        if panel["type"] != "row":
            assert panel["id"] in with_queries, panel["title"]
