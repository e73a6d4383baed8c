"""The rules a promtool test group needs (generator/testkit/rule_subsets.py), and proof that a
group run on its subset still fails where a rule it reads is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from trainsignals.generator.output.yaml import dump
from trainsignals.generator.testkit.rule_subsets import cut, needs, split_suite
from trainsignals.metrics.promql_reads import names

from .conftest import run_tool
from .promtool_subsets import load_yaml, promtool_test, write_subsets
from .test_promtool import JOB_NAMES, generated, generated_text, keep_tests

RULES = {
    "groups": [
        {
            "name": "recording",
            "rules": [
                {"record": "job:a", "expr": "sum(raw_a)"},
                {"record": "job:b", "expr": "job:a * 2"},
                {"record": "job:unread", "expr": "sum(raw_c)"},
                {"record": "job:templated", "expr": "sum(raw_d)"},
            ],
        },
        {
            "name": "alerts",
            "interval": "1m",
            "rules": [
                {"alert": "Hardware", "expr": "job:b > 1", "labels": {"fault_class": "hardware"}},
                {"alert": "Software", "expr": "raw_s > 1", "labels": {"fault_class": "software"}},
                {"alert": "Unlabelled", "expr": "raw_u > 1"},
                {
                    "alert": "Consequence",
                    "expr": 'raw_x > 1 unless on () ALERTS{alertname="Hardware"}',
                },
                {"alert": "AnyHardware", "expr": 'count(ALERTS{fault_class="hardware"}) > 0'},
                {
                    "alert": "Queries",
                    "expr": "raw_q > 1",
                    "annotations": {
                        "text": '{{ with printf "job:templated{n=%q}" $labels.n | query }}{{ end }}'
                    },
                },
                {
                    "alert": "ByPattern",
                    "expr": '{__name__=~"raw_.*"} > 1',
                    "labels": {"fault_class": "other"},
                },
            ],
        },
    ]
}


def need_of(group: dict) -> frozenset[str] | None:
    suite = {"rule_files": ["r.yaml"], "tests": [group]}
    return needs(suite, {"r.yaml": RULES})[0]


def test_an_alert_needs_the_records_it_reads_transitively() -> None:
    group = {"alert_rule_test": [{"alertname": "Hardware", "eval_time": "5m"}]}
    assert need_of(group) == {"Hardware", "job:b", "job:a"}


def test_alerts_series_keep_the_alerts_they_may_match() -> None:
    by_name = {"promql_expr_test": [{"expr": 'ALERTS{alertname="Consequence"}', "eval_time": "5m"}]}
    assert need_of(by_name) == {"Consequence", "Hardware", "job:b", "job:a"}
    # A static label that differs excludes an alert; one the rule does not set may come from
    # its expression, so that alert stays.
    by_label = {"alert_rule_test": [{"alertname": "AnyHardware", "eval_time": "5m"}]}
    needed = need_of(by_label)
    assert needed is not None and {"Hardware", "Unlabelled"} <= needed
    assert "Software" not in needed and "job:unread" not in needed


def test_a_querying_template_keeps_the_records_it_names() -> None:
    group = {"alert_rule_test": [{"alertname": "Queries", "eval_time": "5m"}]}
    assert need_of(group) == {"Queries", "job:templated"}


def test_a_name_pattern_keeps_every_rule() -> None:
    group = {"alert_rule_test": [{"alertname": "ByPattern", "eval_time": "5m"}]}
    assert need_of(group) is None
    assert cut(RULES, None) is RULES


def test_cut_keeps_groups_and_order_and_drops_empty_groups() -> None:
    kept = cut(RULES, frozenset({"job:b", "Hardware"}))
    assert [g["name"] for g in kept["groups"]] == ["recording", "alerts"]
    assert [r.get("record", r.get("alert")) for g in kept["groups"] for r in g["rules"]] == [
        "job:b",
        "Hardware",
    ]
    assert kept["groups"][1]["interval"] == "1m"
    assert cut(RULES, frozenset({"Software"}))["groups"][0]["name"] == "alerts"


@pytest.mark.parametrize("job", JOB_NAMES)
def test_every_subset_of_a_generated_suite_is_closed(job: str) -> None:
    """Each subset holds every record its rules read (names from the one PromQL reader, and
    from query templates), and every test group lands in exactly one subset."""
    rules_text, tests_text = generated_text(job)
    suite, rules = load_yaml(tests_text), load_yaml(rules_text)
    (rule_file,) = suite["rule_files"]
    subsets = split_suite(suite, {rule_file: rules})
    assert sorted(t["name"] for s in subsets for t in s.tests) == sorted(
        t["name"] for t in suite["tests"]
    )
    records = {r["record"] for g in rules["groups"] for r in g["rules"] if "record" in r}
    for subset in subsets:
        kept = [r for g in subset.rule_documents[rule_file]["groups"] for r in g["rules"]]
        kept_names = {r.get("record", r.get("alert")) for r in kept}
        for rule in kept:
            assert names(rule["expr"]) & records <= kept_names, rule.get(
                "alert", rule.get("record")
            )
    assert len(subsets) > 1, "no test group runs on fewer rules than the whole file"


def test_a_subset_without_a_record_its_alert_reads_fails(tmp_path: Path) -> None:
    """The subsets are what promtool runs: the DataLoaderStarved test passes on its subset, and
    fails once the records its alert reads are taken out of it."""
    _, tests = generated("minimal", tmp_path)
    keep_tests(tests, "DataLoaderStarved")
    assert promtool_test(tests.name, cwd=tmp_path).returncode == 0
    (written,) = write_subsets(tests)
    suite = yaml.safe_load((tmp_path / written).read_text())
    (rule_file,) = suite["rule_files"]
    document = yaml.safe_load((tmp_path / rule_file).read_text())
    records = [r for g in document["groups"] for r in g["rules"] if "record" in r]
    assert records, "the alert reads recorded series"
    for group in document["groups"]:
        group["rules"] = [r for r in group["rules"] if "record" not in r]
    (tmp_path / rule_file).write_text(dump(document))
    tested = run_tool("promtool", "test", "rules", written, cwd=tmp_path, timeout=300)
    assert tested.returncode != 0
    assert "DataLoaderStarved" in tested.stdout + tested.stderr


def test_a_selection_of_groups_by_the_rule_they_run(tmp_path: Path) -> None:
    """`reading` keeps the subsets that run a rule; none at all is an error, never a run of
    nothing (a mutation test would read promtool's failure as the mutation caught)."""
    _, tests = generated("minimal", tmp_path)
    every = write_subsets(tests)
    kept = write_subsets(tests, reading={"DataLoaderStarved"})
    assert 0 < len(kept) < len(every)
    with pytest.raises(AssertionError, match="NoSuchRule"):
        write_subsets(tests, reading={"NoSuchRule"})
