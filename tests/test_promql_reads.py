"""trainsignals/metrics/promql_reads.py: what an expression reads, from its parse tree.

The generator once answered "which records does this rule read" with the rule text's name-like
tokens: a superset, where a label name, a function or a string equal to a record's name counted
as a read. These show the parser's answer where the tokens were wrong, and that a record read
only as a fallback (`or`) or an exception (`unless`) is still read.
"""

from __future__ import annotations

import pytest

from trainsignals.metrics import promql_reads
from trainsignals.metrics.promql_reads import (
    Matcher,
    PromQLError,
    firm_inputs,
    names,
    parse,
    reads_any_name,
    record_names,
    records_read,
    selector_names,
    selectors,
)

# Records named like a label, a function and a string of the readers below (a recording
# rule's name is any metric name: the `level:metric:operations` colons are a convention).
RULES = [
    {"record": "node", "expr": "sum(raw_node_total)"},
    {"record": "rate", "expr": "sum(raw_rate_total)"},
    {"record": "job:copied:sum", "expr": "sum(raw_copied_total)"},
    {"record": "job:fallback:sum", "expr": "sum(raw_fallback_total)"},
    {"record": "job:except:max", "expr": "max(raw_except_total)"},
    {"record": "job:outer:ratio", "expr": "job:except:max / 2"},
]


def _records_read(expr: str) -> set[str]:
    return records_read(set(names(expr)), record_names(RULES))


def test_a_label_function_or_string_equal_to_a_record_is_not_a_read() -> None:
    expr = 'label_replace(sum by (node) (rate(raw_x[5m])), "to", "job:copied:sum", "", "")'
    assert names(expr) == {"raw_x"}
    assert _records_read(expr) == set()  # the tokens read `node`, `rate` and `job:copied:sum`


def test_a_record_read_through_or_and_unless_is_read() -> None:
    assert _records_read("raw_x > 0 or job:fallback:sum") == {"job:fallback:sum"}
    assert _records_read("raw_x > 0 unless on () job:outer:ratio > 1") == {
        "job:outer:ratio",
        "job:except:max",  # through the record that reads it
    }
    # What it cannot do without leaves both out: each is normal to be absent.
    records = {r["record"]: (r["expr"],) for r in RULES}
    firm = firm_inputs("raw_x > 0 unless on () job:outer:ratio > 1", records)
    assert firm == {("raw_x", ())}


def test_selectors_with_their_matchers_and_the_names_a_literal_gives() -> None:
    expr = 'rate(a_total{job="j", node=~"n-1|n-2"}[5m]) / on (node) {__name__="b", job="j"}'
    assert selectors(expr) == (
        ("a_total", (Matcher("job", "=", "j"), Matcher("node", "=~", "n-1|n-2"))),
        ("b", (Matcher("job", "=", "j"),)),
    )
    # The same template with other literals: the other names, not the cached ones.
    assert names(expr.replace('"b"', '"c"')) == {"a_total", "c"}
    assert list(selector_names(parse(expr))) == ["a_total", "b"]


def test_a_pattern_on_the_name_reads_any_series() -> None:
    assert reads_any_name('count({__name__=~"gpu_.*"}) > 0')
    assert reads_any_name('{job="x"}')
    assert not reads_any_name('{__name__="gpu_x", job="x"} > 0')


@pytest.mark.parametrize(
    "expr",
    [
        "sum(raw_x",
        'raw_x{job=~"("}',  # the template parses a placeholder there: the pattern is checked
        "raw_x{job=~'a' + 1",
    ],
)
def test_an_expression_that_does_not_parse_is_named(expr: str) -> None:
    for question in (names, selectors, reads_any_name, parse):
        with pytest.raises(PromQLError, match="not PromQL") as raised:
            question(expr)
        assert expr in str(raised.value)
    assert issubclass(PromQLError, ValueError)


def test_jobs_that_differ_in_thresholds_and_windows_share_a_parse() -> None:
    first = 'max_over_time((sum(rate(t_total{job="a"}[5m])) < 2500)[15m:1m]) > bool 0'
    assert names(first) == {"t_total"}
    parses = promql_reads._summary.cache_info().misses
    other = 'max_over_time((sum(rate(t_total{job="b"}[7m])) < 2517.5)[16m:1m]) > bool 0'
    assert selectors(other) == (("t_total", (Matcher("job", "=", "b"),)),)
    assert promql_reads._summary.cache_info().misses == parses
    # A number or window inside a string is the string's: it is not normalised.
    assert selectors('x{a="(2 [5m]"}') == (("x", (Matcher("a", "=", "(2 [5m]"),)),)
    assert selectors('x{a="(2 [5m]\\\\"}') == (("x", (Matcher("a", "=", "(2 [5m]\\"),)),)
