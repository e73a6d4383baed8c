"""`trainsignals lint`: the committed rules are clean, and each problem kind is caught.

Broken inputs are generated documents mutated in place, so the tests follow the generator
instead of hand-written YAML that drifts from it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from trainsignals.cli.main import main
from trainsignals.generator.loader import load_specs, spec_files
from trainsignals.generator.pipeline import generate_all
from trainsignals.ops.lint import has_burn_rate_windows, lint_rules, load_documents, rule_files

FILE = "alerts/minimal.rules.yaml"


@pytest.fixture(scope="module")
def generated(repo_root: Path) -> dict[str, dict]:
    specs = [(s, f"jobs/{s.name}.yaml") for s in load_specs(spec_files(repo_root / "jobs"))]
    return {
        path: yaml.safe_load(content)
        for path, content in generate_all(specs).items()
        if path.endswith(".rules.yaml")
    }


@pytest.fixture
def docs(generated: dict[str, dict]) -> dict[str, dict]:
    return copy.deepcopy(generated)


def rules(docs: dict[str, dict], group: int) -> list[dict]:
    return docs[FILE]["groups"][group]["rules"]


def alert(docs: dict[str, dict], name: str) -> dict:
    return next(r for r in rules(docs, 1) if r["alert"] == name)


def record(docs: dict[str, dict], name: str) -> dict:
    return next(r for r in rules(docs, 0) if r["record"] == name)


def test_committed_rules_are_clean(repo_root: Path) -> None:
    files = rule_files([repo_root / "alerts"])
    assert len(files) == len(list((repo_root / "alerts").glob("*.rules.yaml"))) >= 3
    assert lint_rules(load_documents(files)) == []


def test_generated_rules_are_clean(docs: dict[str, dict]) -> None:
    assert lint_rules(docs) == []


def _drop(mapping: str, key: str, name: str = "NodeDown") -> Callable[[dict], None]:
    return lambda d: alert(d, name)[mapping].pop(key)


def _copy_alert(name: str, **changes: object) -> Callable[[dict], None]:
    return lambda d: rules(d, 1).append({**copy.deepcopy(alert(d, name)), **changes})


def _set(name: str, key: str, value: object) -> Callable[[dict], None]:
    return lambda d: alert(d, name).__setitem__(key, value)


def _rename_record(new: str) -> Callable[[dict], None]:
    def mutate(d: dict) -> None:
        for group in d[FILE]["groups"]:  # read by no alert: in the slow recording group
            for rule in group["rules"]:
                if rule.get("record") == "job:trainsignals_samples:rate5m":
                    rule["record"] = new

    return mutate


def _typo_in_expr(d: dict) -> None:
    rule = alert(d, "NonFiniteLoss")
    rule["expr"] = rule["expr"].replace("job:trainsignals_nonfinite_losses", "job:nonfinite")


def _unrecorded(d: dict) -> None:
    rules(d, 0).remove(record(d, "job:trainsignals_loss:avg"))


def _severity(value: str) -> Callable[[dict], None]:
    return lambda d: alert(d, "GpuXidError")["labels"].__setitem__("severity", value)


CASES: dict[str, tuple[Callable[[dict], None], list[str]]] = {
    "severity label": (_drop("labels", "severity"), ["NodeDown: label severity missing"]),
    "team label": (_drop("labels", "team"), ["NodeDown: label team missing; add labels.team"]),
    "job label": (_drop("labels", "job"), ["NodeDown: label job missing"]),
    "bad severity": (_severity("critical"), ["GpuXidError: severity 'critical' is not page"]),
    "summary": (_drop("annotations", "summary"), ["NodeDown: annotation summary missing"]),
    "description": (_drop("annotations", "description"), ["annotation description missing"]),
    "runbook": (_drop("annotations", "runbook_url"), ["NodeDown: annotation runbook_url"]),
    "dashboard": (_drop("annotations", "dashboard_url"), ["annotation dashboard_url missing"]),
    "page without for": (
        lambda d: alert(d, "TrainingStalled").pop("for"),
        ["TrainingStalled: page without `for`"],
    ),
    "page with for 0s": (_set("NodeDown", "for", "0s"), ["NodeDown: page without `for`"]),
    "unknown metric": (
        _typo_in_expr,
        ["NonFiniteLoss: reads job:nonfinite:increase5m, which nothing exports or records"],
    ),
    "identical alerts": (
        _copy_alert("GpuLost", alert="GpuLostAgain"),
        [f"GpuLostAgain: identical to {FILE}: GpuLost (same expr, for and labels)"],
    ),
    "duplicate name": (
        _copy_alert("GpuLost", expr="vector(1)"),
        ["GpuLost: alert name repeats in job minimal"],
    ),
    "record without colons": (
        _rename_record("trainsignals_samples_rate5m"),
        ["trainsignals_samples_rate5m: recording rule name is not level:metric:operations"],
    ),
    "record with one colon": (_rename_record("job:samples_rate5m"), ["job:samples_rate5m: record"]),
    "record with three colons": (_rename_record("job:a:b:c"), ["job:a:b:c: recording rule name"]),
}


@pytest.mark.parametrize("case", CASES)
def test_each_problem_is_caught(docs: dict[str, dict], case: str) -> None:
    mutate, expected = CASES[case]
    mutate(docs)
    problems = lint_rules(docs)
    assert len(problems) == len(expected), problems
    for line, want in zip(problems, expected, strict=True):
        assert line.startswith(f"{FILE}: "), line
        assert want in line, line
        assert "; " in line, f"no fix in {line!r}"


def test_a_series_no_file_of_the_lint_set_records_is_unknown(docs: dict[str, dict]) -> None:
    _unrecorded(docs)
    # Another job's file still records the name: the lint set as a whole reads no unknown.
    assert lint_rules(docs) == []
    problems = lint_rules({FILE: docs[FILE]})
    assert [p.split(";")[0] for p in problems] == [
        f"{FILE}: {name}: reads job:trainsignals_loss:avg, which nothing exports or records"
        # LossDiverging reads the 10m average recorded from it.
        for name in ("LossPlateau", "job:trainsignals_loss:avg10m")
    ]


def test_a_ticket_needs_no_for(docs: dict[str, dict]) -> None:
    alert(docs, "GpuXidError").pop("for")
    assert lint_rules(docs) == []


def test_burn_rate_windows_stand_in_for_for(docs: dict[str, dict]) -> None:
    page = alert(docs, "NonFiniteLoss")
    page.pop("for")
    page["expr"] = (
        "sum(rate(trainsignals_failed_steps_total[1h])) > 0.1 "
        "and sum(rate(trainsignals_failed_steps_total[5m])) > 0.1"
    )
    assert lint_rules(docs) == []
    page["expr"] = "sum(rate(trainsignals_failed_steps_total[1h])) > 0.1"
    assert len(lint_rules(docs)) == 1


def test_burn_rate_shape() -> None:
    assert has_burn_rate_windows("rate(a[1h]) > 1 and rate(a[5m]) > 1")
    assert not has_burn_rate_windows("rate(a[1h]) > 1 or rate(a[5m]) > 1")
    assert not has_burn_rate_windows("rate(a[1h]) > 1 and b > 1")


def test_cli_exits_1_with_the_problems(tmp_path: Path, docs: dict[str, dict]) -> None:
    runner = CliRunner()
    for path, document in docs.items():
        (tmp_path / Path(path).name).write_text(yaml.safe_dump(document))
    clean = runner.invoke(main, ["lint", str(tmp_path)])
    assert clean.exit_code == 0, clean.output
    assert f"{len(docs)} rule file(s) clean" in clean.output
    alert(docs, "NodeDown")["labels"].pop("team")
    broken = tmp_path / "minimal.rules.yaml"
    broken.write_text(yaml.safe_dump(docs[FILE]))
    failed = runner.invoke(main, ["lint", str(broken)])
    assert failed.exit_code == 1
    assert f"{broken.as_posix()}: NodeDown: label team missing; add labels.team" in failed.output
