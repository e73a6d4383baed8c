"""The direct YAML writer (generator/output/yaml.py) writes what libyaml does, or defers to it."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
import yaml
from yaml.resolver import Resolver

from trainsignals.generator.alerts.rules import alert_rules
from trainsignals.generator.loader import load_specs
from trainsignals.generator.output.yaml import MAX_WORD, NUMBER_FIRST, _block_yaml, _Dumper, dump
from trainsignals.generator.pipeline import rules_document
from trainsignals.generator.rules.unit_tests import rule_tests
from trainsignals.generator.signals.promql import RuleContext

ROOT = Path(__file__).resolve().parent.parent
AWKWARD = [
    *("", " ", "a", "-", "- a", "-a", "--", "---", "--- a", "...", "?", "? a", "?a", ":", ": a"),
    *(":a", "a:", "a: b", "a:b", "a #b", "a#b", "#a", "a ", " a", "a  b", "'", "a'b", "'a'"),
    *('"a"', 'a"b', "{}", "{a}", "[a]", "a,b", ",a", "&a", "*a", "!a", "|a", ">a", "%a", "@a"),
    *("`a", "\\a", "a\\b", "yes", "No", "on", "OFF", "true", "False", "null", "Null", "~"),
    *("1", "-1", "+1", "1.5", "1e3", "1.0e+3", ".5", ".inf", "-.inf", ".nan", "0x1F", "0o17"),
    *("017", "0b101", "1_000", "1:20", "190:20:30", "2001-12-14", "2001-12-14t21:59:43.10-05:00"),
    *("<<", "=", "a\tb", "a\nb", "a\n", "é", "\ue000", "x" * 8_000, "a " * 4_000, "(a)", "/a"),
    # Long enough to fold (at a single space past the 10,000 column width), or nearly.
    *("w " * 5_000 + "end", "x" * 9_990 + " y z", "0+1x5 " * 2_000 + "9", "ab  " * 2_600 + "c"),
    *(("a" * 9_985 + " b  c d" + " e" * 3), "a" * 9_990, "a " * 12_000 + "b"),
    *('up{job="x"}', "0+60x10 _x5 stale", "_x5", "1x600", '{node="node-0"}', "a- ", "- "),
]


def _libyaml(data: object) -> str:
    return yaml.dump(
        data,
        Dumper=_Dumper,
        sort_keys=False,
        width=10_000,
        allow_unicode=True,
        default_flow_style=False,
    )


KEYS = ["a", "name", "series", "values", "k-1", "x_y", "-a", "a:b", "(a)", "/a", "1m", "yes"]


def _key(rnd: random.Random) -> str:
    return rnd.choice(KEYS) if rnd.random() < 0.9 else rnd.choice(AWKWARD)


def _random_value(rnd: random.Random, depth: int) -> object:
    roll = rnd.random()
    if depth > 4 or roll < 0.55:
        return rnd.choice([*AWKWARD, 0, 1, -7, True, False, None, 2**70, 1.5])
    if roll < 0.8:
        return {
            rnd.choice(AWKWARD[:40]): _random_value(rnd, depth + 1)
            for _ in range(rnd.randint(0, 4))
        }
    return [_random_value(rnd, depth + 1) for _ in range(rnd.randint(0, 4))]


def test_same_text_as_libyaml_on_awkward_documents() -> None:
    rnd = random.Random(18)
    written = 0
    for _ in range(3_000):
        data = {_key(rnd): _random_value(rnd, 0) for _ in range(rnd.randint(1, 4))}
        direct = _block_yaml(data)
        written += direct is not None
        assert dump(data) == _libyaml(data)
        if direct is not None:
            assert direct == _libyaml(data), data
    assert written > 200  # the direct writer did write a good share of them


@pytest.mark.parametrize("job", ["minimal", "llama-8b-finetune", "gpt-70b-pretrain"])
def test_a_jobs_rules_and_tests_take_the_direct_writer(job: str) -> None:
    spec = load_specs([ROOT / f"jobs/{job}.yaml"])[0]
    ctx = RuleContext(spec)
    alerts = alert_rules(ctx)
    rules = rules_document(ctx, alerts)
    for document in (rules, rule_tests(ctx, alerts, "x.rules.yaml", rules)):
        direct = _block_yaml(document)
        assert direct is not None
        assert direct == _libyaml(document)


def test_implicit_types_past_a_numbers_first_characters_are_short_words() -> None:
    """What lets the writer skip the resolver for longer strings (yaml.MAX_WORD): every
    pattern for a first character outside NUMBER_FIRST is a choice of literal words."""
    literal = re.compile(r"(?:\\.|[^.^$*+?{}\[\]()|\\])*")
    for first, resolvers in Resolver.yaml_implicit_resolvers.items():
        if first in NUMBER_FIRST:
            continue
        for _tag, regexp in resolvers:
            choice = re.fullmatch(r"\^\(\?:(.*)\)\$", regexp.pattern, re.S)
            assert choice, regexp.pattern
            words = choice.group(1).split("|")
            if any(c.isspace() for c in choice.group(1)):
                assert regexp.flags & re.X  # (whitespace in the pattern is ignored)
                words = ["".join(w.split()) for w in words]
            for word in words:
                assert literal.fullmatch(word), (first, word)
                assert len(re.sub(r"\\(.)", r"\1", word)) <= MAX_WORD, (first, word)


@pytest.mark.parametrize(
    "text",
    ["trues", "true_", "nullable", "Nulls", "offset", "yes sir", "<<<<<<", "~~~~~~", "t{a}"],
)
def test_words_longer_than_an_implicit_type_are_plain_strings(text: str) -> None:
    data = {"a": [text, {text: text}]}
    assert _block_yaml(data) == _libyaml(data)
    assert yaml.safe_load(_libyaml(data)) == data
