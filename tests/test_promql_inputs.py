"""promql_reads.firm_inputs parses templates (string literals as placeholders) and caches them
by template: it must read what a plain walk of each expression's own parse tree reads."""

from __future__ import annotations

from pathlib import Path

import promql_parser
import pytest

from trainsignals.generator.alerts.model import firing_expr
from trainsignals.generator.alerts.rules import alert_rules
from trainsignals.generator.loader import load_specs
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.signals.recording import recorded_exprs, recording_rules
from trainsignals.metrics import promql_reads
from trainsignals.metrics.promql_reads import firm_inputs, vector_selector

ROOT = Path(__file__).resolve().parent.parent


def reference(expr: str, records: dict[str, tuple[str, ...]]) -> frozenset:
    """The definition, on the expression's own parse tree: no template, no cache."""

    def of(node: object, seen: frozenset[str]) -> frozenset:
        if isinstance(node, promql_parser.VectorSelector):
            found: set = set()
            name, matchers = vector_selector(node)
            if name in records:
                for text in records[name] if name not in seen else ():
                    found |= of(promql_parser.parse(text), seen | {name})
            elif name:
                found.add((name, matchers))
            return frozenset(found)
        if isinstance(node, promql_parser.BinaryExpr):
            op = str(node.op).lower()
            if op == "or":
                return of(node.lhs, seen) & of(node.rhs, seen)
            if op == "unless":
                return of(node.lhs, seen)
            return of(node.lhs, seen) | of(node.rhs, seen)
        out: frozenset = frozenset()
        for attr in ("expr", "vector_selector", "param", "args"):
            child = getattr(node, attr, None)
            for item in child if isinstance(child, list) else [child]:
                if item is not None and not isinstance(item, (str, int, float)):
                    out |= of(item, seen)
        return out

    return of(promql_parser.parse(expr), frozenset())


def job_expressions(spec) -> tuple[list[str], dict[str, tuple[str, ...]]]:
    """The job's alert expressions and {record: every expression recording it}, from the rule
    groups as written (not recorded_exprs, which firm_inputs' callers use)."""
    ctx = RuleContext(spec, 1, 60)
    records: dict[str, tuple[str, ...]] = {}
    for rule in recording_rules(ctx):
        records[rule["record"]] = (*records.get(rule["record"], ()), rule["expr"])
    return [firing_expr(ctx, rule) for rule in alert_rules(ctx)], records


SPECS = load_specs(sorted((ROOT / "jobs").glob("*.yaml")))


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_every_alert_of_the_example_jobs_reads_what_its_parse_tree_reads(spec) -> None:
    exprs, records = job_expressions(spec)
    memo: dict = {}
    for expr in exprs:
        assert firm_inputs(expr, records, memo) == reference(expr, records), expr


def test_a_second_job_of_the_same_shape_is_not_parsed_again_and_keeps_its_own_labels() -> None:
    first = next(s for s in SPECS if not s.selector)  # training_job=<name>
    exprs, records = job_expressions(first)
    for expr in exprs:
        firm_inputs(expr, records)
    misses = promql_reads._compiled.cache_info().misses
    renamed = first.model_copy(update={"name": "other-job-7"})
    exprs, records = job_expressions(renamed)
    found = set()
    for expr in exprs:
        inputs = firm_inputs(expr, records)
        assert inputs == reference(expr, records), expr
        found |= inputs
    assert promql_reads._compiled.cache_info().misses == misses
    jobs = {m.value for _, matchers in found for m in matchers if m.label == "training_job"}
    assert jobs == {"other-job-7"}


RECORDS = {
    "job:a:sum": ('sum(raw_a{job="x"}) or vector(0)',),
    "job:b:max": ('max(raw_b{job="x", node!="node-3", node!=""})',),
    "job:c:loop": ("job:c:loop + raw_c",),  # a cycle reads nothing more
    # One name, two rules (one per SLO): a reader needs what each reads.
    "job:d:ratio": ('raw_d{slo="a"} / raw_e', 'raw_f{slo="b"} / raw_e'),
}
AWKWARD = [
    'raw_a{job="x"} or raw_b{job="y"}',
    'raw_a{job="x"} or raw_a{job="x"}',
    'sum by (node) (rate(raw_a{job="x", node=~"n-1|n-2"}[5m])) unless raw_b{job="q"}',
    '{__name__="raw_named", job="x"} > 0',
    '{__name__=~"raw_.*", job="x"}',
    'raw_a{job="a\\"quoted"} + raw_b{job=`back\\tick`} + raw_c{job=\'single\'}',
    'raw_a{gpu="1", gpu2="2", gpu!="3"} * on (gpu) group_left raw_b{gpu=""}',
    "job:a:sum > 0 and job:b:max",
    "job:a:sum or job:b:max",
    "job:c:loop",
    "job:d:ratio > 0.1",
    'label_replace(raw_a{job="x"}, "series", "raw_a", "", "") or absent(raw_b{job="x"})',
    'histogram_quantile(0.99, sum by (le) (rate(raw_h_bucket{job="x"}[5m])))',
    'max_over_time(raw_a{job="x"}[1h:5m]) - raw_b{job="x"} offset 1h',
    'count(topk(3, -raw_a{job="x"})) == bool 3',
]


@pytest.mark.parametrize("expr", AWKWARD)
def test_awkward_expressions_read_what_their_parse_tree_reads(expr: str) -> None:
    assert firm_inputs(expr, RECORDS) == reference(expr, RECORDS)


def test_a_name_recorded_by_two_rules_needs_what_both_read() -> None:
    names = {name for name, _ in firm_inputs("job:d:ratio > 0.1", RECORDS)}
    assert names == {"raw_d", "raw_e", "raw_f"}


def test_the_generator_passes_every_rule_recording_a_name() -> None:
    spec = next(s for s in SPECS if s.slos and len(s.slos) > 1)
    ctx = RuleContext(spec)
    recorded = recorded_exprs(ctx)
    written = recording_rules(ctx)
    assert sum(map(len, recorded.values())) == len(written)
    assert any(len(exprs) > 1 for exprs in recorded.values())
