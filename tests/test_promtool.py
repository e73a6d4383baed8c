"""The generated rules and their generated tests, run through the real promtool."""

from __future__ import annotations

import math
import re
import subprocess
from functools import cache
from pathlib import Path

import pytest
import yaml

from trainsignals.generator.loader import load_specs, spec_files
from trainsignals.generator.output.yaml import dump
from trainsignals.generator.pipeline import generate_all
from trainsignals.generator.rules.unit_tests import job_series, promtool_suite
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.spec.durations import parse_duration
from trainsignals.generator.testkit.faults import FAULT_ONSET, JobTimeline
from trainsignals.generator.testkit.rule_subsets import cut, needs
from trainsignals.generator.testkit.series_notation import encode

from .conftest import JOBS, ROOT, run_tool
from .promtool_subsets import load_yaml, promtool_test

JOB_NAMES = [p.stem for p in spec_files(JOBS)]


@cache
def generated_text(job: str) -> tuple[str, str]:
    spec = load_specs([JOBS / f"{job}.yaml"])[0]
    files = generate_all([(spec, f"jobs/{job}.yaml")])
    return files[f"alerts/{job}.rules.yaml"], files[f"alerts/{job}.test.yaml"]


def generated(job: str, folder: Path) -> tuple[Path, Path]:
    rules_text, tests_text = generated_text(job)
    rules, tests = folder / f"{job}.rules.yaml", folder / f"{job}.test.yaml"
    rules.write_text(rules_text)
    tests.write_text(tests_text)
    return rules, tests


def keep_tests(tests: Path, first_word: str) -> None:
    """Keep only the generated test groups whose name starts with `first_word` (speed)."""
    suite = yaml.safe_load(tests.read_text())
    suite["tests"] = [t for t in suite["tests"] if t["name"].split()[0] == first_word]
    assert suite["tests"], first_word
    tests.write_text(dump(suite))


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_tool("promtool", *args, cwd=cwd, timeout=900)


@cache
def _generated_suite(job: str) -> dict:
    return load_yaml(generated_text(job)[1])


def eval_seconds(test: dict) -> int:
    """How far promtool evaluates a test group: its last eval_time. Every rule it loads is
    evaluated at every step up to it."""
    checks = [*test.get("alert_rule_test", []), *test.get("promql_expr_test", [])]
    return max(parse_duration(check["eval_time"]) for check in checks)


def group_costs(suite: dict, rules: dict) -> list[float]:
    """Each test group's promtool CPU, relative: its evaluated minutes times the characters of
    the rules it runs with (tests/promtool_subsets.py: the rules it reads; promtool parses each
    expression again at every evaluation, and with no data at all gpt-70b-pretrain's ~70,000
    characters cost ~25 ms a step)."""
    (rule_file,) = suite["rule_files"]
    costs = []
    for test, need in zip(suite["tests"], needs(suite, {rule_file: rules}), strict=True):
        kept = cut(rules, need)
        characters = sum(len(r["expr"]) for g in kept["groups"] for r in g["rules"])
        costs.append(eval_seconds(test) / 60 * characters / 1000)
    return costs


def part_count(costs: list[float]) -> int:
    """As many parts as the costliest test fits in the total: it then runs alone."""
    return max(1, math.ceil(sum(costs) / max(costs, default=1)))


def promtool_parts(costs: list[float], count: int) -> list[list[int]]:
    """The indices of the tests in `count` parts of about equal cost, costliest first.

    Filled costliest test first, each onto the part with the least so far; each part lists
    its tests in file order. A function of the costs alone: every xdist worker gets the same."""
    loads, parts = [0.0] * count, [[] for _ in range(count)]
    for index in sorted(range(len(costs)), key=lambda i: (-costs[i], i)):
        lightest = min(range(count), key=lambda k: (loads[k], k))
        loads[lightest] += costs[index]
        parts[lightest].append(index)
    order = sorted(range(count), key=lambda k: (-loads[k], k))
    return [sorted(parts[k]) for k in order]


@cache
def _committed_costs(job: str) -> tuple[float, ...]:
    """group_costs of the committed files, read at collection (generating the 512-rank job's
    there would cost each worker seconds). The test splits the file it generates into as many
    parts: a stale committed file only misjudges the costs."""
    tests_file, rules_file = (ROOT / "alerts" / f"{job}.{kind}.yaml" for kind in ("test", "rules"))
    if not tests_file.exists() or not rules_file.exists():
        return ()
    return tuple(group_costs(load_yaml(tests_file.read_text()), load_yaml(rules_file.read_text())))


@cache
def _planned_parts(job: str) -> tuple[float, ...]:
    """The cost of each of a job's parts (the `cpu_cost` xdist ordering reads it)."""
    costs = list(_committed_costs(job))
    if not costs:
        return (0.0,)
    return tuple(sum(costs[i] for i in part) for part in promtool_parts(costs, part_count(costs)))


# Each job's generated test file runs in parts of about equal promtool time (promtool_parts),
# each part as its rule subsets (tests/promtool_subsets.py). `cpu_cost` (tests/conftest.py)
# starts the costliest first, so none is left for the end.
PROMTOOL_PARTS = [
    pytest.param(job, part, marks=pytest.mark.cpu_cost(cost), id=f"{job}-{part}")
    for job in JOB_NAMES
    for part, cost in enumerate(_planned_parts(job))
]


@pytest.mark.parametrize(("job", "part"), PROMTOOL_PARTS)
def test_promtool_check_and_test_pass(job: str, part: int, tmp_path: Path) -> None:
    rules, tests = generated(job, tmp_path)
    if part == 0:
        checked = promtool("check", "rules", rules.name, cwd=tmp_path)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    suite = _generated_suite(job)
    costs = group_costs(suite, load_yaml(generated_text(job)[0]))
    kept = promtool_parts(costs, len(_planned_parts(job)))[part]
    tests.write_text(dump({**suite, "tests": [suite["tests"][i] for i in kept]}))
    tested = promtool_test(tests.name, cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr


@pytest.mark.parametrize("job", JOB_NAMES)
def test_promtool_parts_hold_every_generated_test_once(job: str) -> None:
    suite = _generated_suite(job)
    costs = group_costs(suite, load_yaml(generated_text(job)[0]))
    tests = suite["tests"]
    for count in {len(_planned_parts(job)), part_count(costs), 1, len(tests)}:
        parts = promtool_parts(costs, count)
        assert sorted(i for part in parts for i in part) == list(range(len(tests))), count
        assert all(parts), count
    costliest = max(range(len(tests)), key=lambda i: costs[i])
    assert [costliest] in promtool_parts(costs, part_count(costs)), "the costliest runs alone"
    # The plan made at collection from the committed files is the generated files' plan.
    assert list(_committed_costs(job)) == costs
    assert len(_planned_parts(job)) == part_count(costs)


def test_every_alert_has_a_firing_and_a_healthy_test(tmp_path: Path) -> None:
    rules, tests = generated("minimal", tmp_path)
    alerts = {
        r["alert"]
        for g in yaml.safe_load(rules.read_text())["groups"]
        for r in g["rules"]
        if "alert" in r
    }
    suite = yaml.safe_load(tests.read_text())["tests"]
    goodput = [t for t in suite if t["name"].startswith("goodput:")]  # recording rules' tests
    assert len(goodput) == 3
    silent = [t for t in suite if t["name"].startswith("healthy")]  # nothing may fire
    assert len(silent) == 2  # the healthy run and the completed job
    # Tests that one alert stays silent through an ordinary event end "... no <Alert>" (a slow
    # first step after an eval, one ordinary restart): one each.
    quiet = [t for t in suite if re.search(r"\bno [A-Z]\w+$", t["name"])]
    assert len(quiet) == 2
    fault_tests = {t["name"].split()[0] for t in suite if t not in goodput + silent + quiet}
    assert fault_tests == alerts
    assert suite[0]["name"].startswith("healthy")


@pytest.mark.parametrize(
    ("alert", "broken"),
    [
        (
            "NonFiniteLoss",
            'job:trainsignals_nonfinite_losses:increase5m{training_job="minimal"} > 1000',
        ),
        ("TrainingStalled", "vector(1) > 2"),
        # Without its exclusions it tickets an outage NodeDown already fired for.
        (
            "NodeUnreachableRecently",
            'max_over_time(node:trainsignals_targets_up:dropped1m{training_job="minimal"}[1h]) '
            "== 1",
        ),
    ],
)
def test_generated_tests_catch_a_broken_rule(alert: str, broken: str, tmp_path: Path) -> None:
    """Weaken one alert by hand: its generated promtool test must notice."""
    rules, tests = generated("minimal", tmp_path)
    keep_tests(tests, alert)  # unbroken, they pass in test_promtool_check_and_test_pass
    document = yaml.safe_load(rules.read_text())
    for rule in document["groups"][1]["rules"]:
        if rule["alert"] == alert:
            rule["expr"] = broken
    rules.write_text(dump(document))
    tested = promtool_test(tests.name, cwd=tmp_path, reading={alert})
    assert tested.returncode != 0
    assert alert in tested.stdout + tested.stderr


def test_a_healthy_test_catches_a_noisy_rule(tmp_path: Path) -> None:
    rules, tests = generated("minimal", tmp_path)
    keep_tests(tests, "healthy")  # unbroken, they pass in test_promtool_check_and_test_pass
    document = yaml.safe_load(rules.read_text())
    for rule in document["groups"][1]["rules"]:
        if rule["alert"] == "DataLoaderStarved":
            rule["expr"] = rule["expr"].replace("> 0.25", "> 0.01")
    rules.write_text(dump(document))
    tested = promtool_test(tests.name, cwd=tmp_path)
    assert tested.returncode != 0
    output = tested.stdout + tested.stderr
    # The healthy ten-hour run is what fails: the rule now fires on a normal data wait.
    assert "count_over_time(ALERTS" in output
    assert 'alertname="DataLoaderStarved", alertstate="firing"' in output


def test_frequent_pauses_do_not_hide_a_throughput_fault(tmp_path: Path) -> None:
    """A job that checkpoints every 10 minutes and trains at a fifth of its speed must page.

    With a `for` on an instantaneous phase gate, each pause would restart the `for` and the
    alert could never fire; the rule averages the samples taken while training instead.
    """
    spec = load_specs([JOBS / "minimal.yaml"])[0]
    ctx = RuleContext(spec)

    def slow_with_frequent_pauses(t: JobTimeline, minute: int) -> None:
        if minute < FAULT_ONSET:
            return
        pausing = minute % 10 < 3
        t.phase[minute] = "checkpoint" if pausing else "train"
        t.tokens_per_second[minute] = 0.0 if pausing else 0.2 * t.healthy_tokens
        t.steps_per_second[minute] = 0.0 if pausing else 0.2 * t.healthy_steps

    minutes = 120
    timeline = JobTimeline(ctx, minutes, slow_with_frequent_pauses).build()
    rules, _ = generated("minimal", tmp_path)
    query = 'ALERTS{alertname="ThroughputBelowFloor",alertstate="firing",training_job="minimal"}'
    expected = (
        'ALERTS{alertname="ThroughputBelowFloor",alertstate="firing",job="minimal",'
        'severity="page",team="ml-research",training_job="minimal"}'
    )
    group = {
        "interval": "1m",
        "input_series": [
            {"series": s.selector(), "values": encode(s.values)} for s in job_series(ctx, timeline)
        ],
        # 115m is inside a training stretch (the pauses are at minutes 110-112).
        "promql_expr_test": [
            {"expr": query, "eval_time": "115m", "exp_samples": [{"labels": expected, "value": 1}]}
        ],
    }
    suite = promtool_suite(ctx, rules.name, [group])
    (tmp_path / "pauses.test.yaml").write_text(dump(suite))
    tested = promtool("test", "rules", "pauses.test.yaml", cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr
