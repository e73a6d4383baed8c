"""The dashboard's queries: plain PromQL, reading only recorded or catalogued series."""

from __future__ import annotations

import re

from trainsignals.generator.dashboards.kit import iter_panels, panel_queries
from trainsignals.generator.signals.recording import recording_rules

from trainsignals.metrics.catalog import known_series_names

# --- queries -------------------------------------------------------------------------------------

PROMQL_WORDS = frozenset(
    {
        "and",
        "or",
        "unless",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "by",
        "without",
        "bool",
        "offset",
        "atan2",
        "sum",
        "avg",
        "min",
        "max",
        "count",
        "stddev",
        "stdvar",
        "topk",
        "bottomk",
        "quantile",
        "count_values",
        "group",
        "inf",
        "nan",
        "label_values",
    }
)
# A name followed by a selector, a range, whitespace or the end; not part of a longer token.
METRIC_NAME = re.compile(r"(?<![\w:.$])([a-zA-Z_:][a-zA-Z0-9_:]*)(?=\s*[{\[]|\s|$)")
STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def metric_names(expr: str) -> set[str]:
    names = set(METRIC_NAME.findall(STRING.sub('""', expr)))
    return {n for n in names if n.lower() not in PROMQL_WORDS}


def test_metric_name_tokenizer() -> None:
    expr = (
        'avg_over_time(job:a:b{x="y z"}[5m]) and on (training_job) sum by (node) '
        '(rate(c_total{d=~"$node"}[1m])) > 0 or up'
    )
    assert metric_names(expr) == {"job:a:b", "c_total", "up"}


def test_queries_read_only_recorded_or_catalogued_series(built: tuple) -> None:
    dashboard, _, ctx = built
    allowed = {r["record"] for r in recording_rules(ctx)} | known_series_names()
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
