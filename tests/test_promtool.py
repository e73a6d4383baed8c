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
from trainsignals.generator.testkit.series_notation import encode

from .conftest import JOBS, ROOT, run_tool

JOB_NAMES = [p.stem for p in spec_files(JOBS)]


@cache
def _generated_text(job: str) -> tuple[str, str]:
    spec = load_specs([JOBS / f"{job}.yaml"])[0]
    files = generate_all([(spec, f"jobs/{job}.yaml")])
    return files[f"alerts/{job}.rules.yaml"], files[f"alerts/{job}.test.yaml"]


def generated(job: str, folder: Path) -> tuple[Path, Path]:
    rules_text, tests_text = _generated_text(job)
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


def load_yaml(text: str) -> dict:
    """libyaml's parser: the 512-rank job's test file takes 2 s in pure Python, 0.2 s here."""
    return yaml.load(text, Loader=yaml.CSafeLoader)


@cache
def _generated_suite(job: str) -> dict:
    return load_yaml(_generated_text(job)[1])


def eval_seconds(test: dict) -> int:
    """How far promtool evaluates a test group: its last eval_time. Every rule is evaluated at
    every step up to it, so its CPU is about this times the length of the job's rule
    expressions: promtool's rules parse their expression again at every evaluation, and with
    no data at all gpt-70b-pretrain's 49,000 characters cost ~25 ms a step (its 600-minute
    tests ~15-30 s, most fault tests 2-5 s)."""
    checks = [*test.get("alert_rule_test", []), *test.get("promql_expr_test", [])]
    return max(parse_duration(check["eval_time"]) for check in checks)


def part_count(tests: list[dict]) -> int:
    """As many parts as the longest test fits in the total: it then runs alone."""
    cost = [eval_seconds(test) for test in tests]
    return max(1, math.ceil(sum(cost) / max(cost, default=1)))


def promtool_parts(tests: list[dict], count: int) -> list[list[int]]:
    """The indices of `tests` in `count` parts of about equal evaluation time, costliest first.

    Filled longest test first, each onto the part with the least so far; each part lists its
    tests in file order. A function of the tests alone: every xdist worker gets the same."""
    cost = [eval_seconds(test) for test in tests]
    loads, parts = [0] * count, [[] for _ in range(count)]
    for index in sorted(range(len(tests)), key=lambda i: (-cost[i], i)):
        lightest = min(range(count), key=lambda k: (loads[k], k))
        loads[lightest] += cost[index]
        parts[lightest].append(index)
    order = sorted(range(count), key=lambda k: (-loads[k], k))
    return [sorted(parts[k]) for k in order]


def scan_eval_seconds(text: str) -> list[int]:
    """eval_seconds of every test in a test file's text, without parsing its YAML (1.5 MB
    for gpt-70b: ~0.3 s with libyaml, at every worker's collection): the tests are the
    top-level list items after `tests:`. Checked against the parsed file below."""
    items = re.split(r"^- ", text.split("\ntests:\n", 1)[-1], flags=re.MULTILINE)[1:]
    times = [re.findall(r"^\s+eval_time: (\S+)$", item, flags=re.MULTILINE) for item in items]
    return [max(parse_duration(t) for t in found) for found in times if found]


@cache
def _planned_parts(job: str) -> tuple[float, ...]:
    """The relative CPU cost of each of a job's parts, planned at collection from the committed
    test file (generating the 512-rank job's there would cost each worker seconds). The test
    splits the file it generates into as many parts: a stale committed file only misjudges
    the costs. Cost: evaluated minutes times the characters of the job's rule expressions."""
    tests_file, rules_file = (ROOT / "alerts" / f"{job}.{kind}.yaml" for kind in ("test", "rules"))
    if not tests_file.exists() or not rules_file.exists():
        return (0.0,)
    cost = scan_eval_seconds(tests_file.read_text())
    expressions = re.findall(r"^\s*expr: (.*)$", rules_file.read_text(), re.MULTILINE)
    kilochars = sum(map(len, expressions)) / 1000
    tests = [{"alert_rule_test": [{"eval_time": f"{seconds}s"}]} for seconds in cost]
    parts = promtool_parts(tests, part_count(tests))
    return tuple(kilochars * sum(cost[i] for i in part) / 60 for part in parts)


# Each job's generated test file runs in parts of about equal promtool time (promtool_parts):
# the 512-rank job's file is ~5 minutes of CPU in 9 parts of ~35 s, the others' ~100 s in 7.
# `cpu_cost` (tests/conftest.py) starts the costliest first, so none is left for the end.
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
    kept = promtool_parts(suite["tests"], len(_planned_parts(job)))[part]
    tests.write_text(dump({**suite, "tests": [suite["tests"][i] for i in kept]}))
    tested = promtool("test", "rules", tests.name, cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr


@pytest.mark.parametrize("job", JOB_NAMES)
def test_promtool_parts_hold_every_generated_test_once(job: str) -> None:
    tests = _generated_suite(job)["tests"]
    for count in {len(_planned_parts(job)), part_count(tests), 1, len(tests)}:
        parts = promtool_parts(tests, count)
        assert sorted(i for part in parts for i in part) == list(range(len(tests))), count
        assert all(parts), count
    longest = max(range(len(tests)), key=lambda i: eval_seconds(tests[i]))
    assert [longest] in promtool_parts(tests, part_count(tests)), "the longest test runs alone"
    # The plan made at collection reads the same costs from the text.
    assert scan_eval_seconds(_generated_text(job)[1]) == [eval_seconds(t) for t in tests]
    assert len(_planned_parts(job)) == part_count(tests)


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
    keep_tests(tests, alert)
    assert promtool("test", "rules", tests.name, cwd=tmp_path).returncode == 0
    document = yaml.safe_load(rules.read_text())
    for rule in document["groups"][1]["rules"]:
        if rule["alert"] == alert:
            rule["expr"] = broken
    rules.write_text(dump(document))
    tested = promtool("test", "rules", tests.name, cwd=tmp_path)
    assert tested.returncode != 0
    assert alert in tested.stdout + tested.stderr


def test_a_healthy_test_catches_a_noisy_rule(tmp_path: Path) -> None:
    rules, tests = generated("minimal", tmp_path)
    keep_tests(tests, "healthy")
    assert promtool("test", "rules", tests.name, cwd=tmp_path).returncode == 0
    document = yaml.safe_load(rules.read_text())
    for rule in document["groups"][1]["rules"]:
        if rule["alert"] == "DataLoaderStarved":
            rule["expr"] = rule["expr"].replace("> 0.25", "> 0.01")
    rules.write_text(dump(document))
    tested = promtool("test", "rules", tests.name, cwd=tmp_path)
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
