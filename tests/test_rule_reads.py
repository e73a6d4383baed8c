"""generator/rules/reads.py: a fault test keeps every series its alert can read.

The names come from promql_reads (templates, cached); here they are checked against a plain
walk of each rule's own parse tree, followed through the recording rules, and the fault tests
built with them against the full tests filtered afterwards.
"""

from __future__ import annotations

from pathlib import Path

import promql_parser
import pytest

from trainsignals.generator.alerts.rules import alert_rules
from trainsignals.generator.loader import load_specs
from trainsignals.generator.pipeline import rules_document
from trainsignals.generator.rules.reads import alert_reads, keeps
from trainsignals.generator.rules.unit_tests import HEALTHY_HORIZON, fault_test
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.testkit.series_notation import shared_encodings
from trainsignals.generator.testkit.test_inputs import TestInputs
from trainsignals.metrics.promql_reads import vector_selector

ROOT = Path(__file__).resolve().parent.parent
JOBS = ["minimal", "llama-8b-finetune", "gpt-70b-pretrain"]


def _ctx(job: str) -> RuleContext:
    return RuleContext(load_specs([ROOT / f"jobs/{job}.yaml"])[0])


def _parsed_closure(expr: str, records: dict[str, list[str]]) -> set[str]:
    """Metric names of every selector of `expr` and of the recording rules it reads."""
    found: set[str] = set()
    pending = [expr]

    def visit(node: object) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            name, _ = vector_selector(node)
            if name not in found:
                found.add(name)
                pending.extend(records.get(name, []))

    while pending:
        promql_parser.walk(promql_parser.parse(pending.pop()), visit)
    return found


@pytest.mark.parametrize("job", JOBS)
def test_every_selector_an_alert_reads_is_among_its_names(job: str) -> None:
    ctx = _ctx(job)
    document = rules_document(ctx, alert_rules(ctx))
    rules = [rule for group in document["groups"] for rule in group["rules"]]
    records: dict[str, list[str]] = {}
    for rule in rules:
        if "record" in rule:
            records.setdefault(rule["record"], []).append(rule["expr"])
    reads = alert_reads(document)
    pruned = 0
    for rule in rules:
        if "alert" not in rule:
            continue
        parsed = _parsed_closure(rule["expr"], records)
        if "ALERTS" in parsed:  # reads other alerts: every series may count
            assert reads[rule["alert"]] is None, rule["alert"]
            continue
        names = reads[rule["alert"]]
        assert names is not None, rule["alert"]
        assert parsed == names, (rule["alert"], parsed ^ names)
        pruned += 1
    assert pruned > len(rules) // 10  # most alerts read a few names: their tests are cut


def test_names_through_every_rule_recording_a_name_and_open_ended_reads() -> None:
    document = {
        "groups": [
            {
                "name": "g",
                "rules": [
                    {"record": "job:a:sum", "expr": "sum(x_total)"},
                    {"record": "job:a:sum", "expr": "sum(y_total) unless on () z"},
                    {"record": "loop:a", "expr": "loop:b + 1"},
                    {"record": "loop:b", "expr": "loop:a - w"},
                    {"alert": "A", "expr": "rate(job:a:sum[5m]) > 1 or vector(0)"},
                    {"alert": "B", "expr": 'count({__name__=~"gpu_.*"}) > 0'},
                    {"alert": "C", "expr": 'loop:a > 0 unless on () ALERTS{alertname="A"}'},
                    {"alert": "D", "expr": "loop:a > 0"},
                    {"alert": "E", "expr": "loop:b > 0"},  # after D: nothing half-done kept
                ],
            }
        ]
    }
    reads = alert_reads(document)
    assert reads["A"] == {"x_total", "y_total", "z", "job:a:sum"}
    assert reads["B"] is None and reads["C"] is None
    assert reads["D"] == {"loop:a", "loop:b", "w"}  # a cycle ends
    assert reads["E"] == {"loop:a", "loop:b", "w"}
    assert keeps(reads["A"], 'z{training_job="j"}')
    assert not keeps(reads["A"], 'w{training_job="j"}')
    assert keeps(None, 'w{training_job="j"}')


@pytest.mark.parametrize("job", ["llama-8b-finetune", "gpt-70b-pretrain"])
def test_a_fault_test_is_the_full_one_cut_to_the_names_its_alert_reads(job: str) -> None:
    ctx = _ctx(job)
    alerts = alert_rules(ctx)
    reads = alert_reads(rules_document(ctx, alerts))
    cut = 0
    with shared_encodings():
        inputs = TestInputs(ctx, HEALTHY_HORIZON)
        for alert in alerts:
            for case in alert.faults:
                full = fault_test(ctx, case, inputs)["input_series"]
                test = fault_test(ctx, case, inputs, reads[alert.name])
                assert test["input_series"] == [
                    s for s in full if keeps(reads[alert.name], s["series"])
                ], test["name"]
                assert test["input_series"], test["name"]
                cut += len(test["input_series"]) < len(full)
    assert cut > 10
