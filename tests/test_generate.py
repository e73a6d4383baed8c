"""Generation: deterministic, atomic, drift-checked, and reading only known metrics."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from trainsignals.cli.main import main
from trainsignals.generator.loader import load_specs, spec_files
from trainsignals.generator.pipeline import GENERATED_MARK, Options, generate_all
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.writer import drift, write_tree
from trainsignals.metrics.catalog import known_series_names
from trainsignals.ops.lint import metric_names


def specs_with_sources(repo_root: Path) -> list:
    return [(s, f"jobs/{s.name}.yaml") for s in load_specs(spec_files(repo_root / "jobs"))]


def test_generation_is_deterministic(repo_root: Path) -> None:
    specs = specs_with_sources(repo_root)
    assert generate_all(specs) == generate_all(specs)


def test_committed_output_matches_the_specs(repo_root: Path) -> None:
    """The drift check CI relies on: committed artifacts equal what the specs generate."""
    result = drift(repo_root, generate_all(specs_with_sources(repo_root)))
    assert not result, "\n".join(result.lines())


def test_every_generated_file_says_it_is_generated(repo_root: Path) -> None:
    for path, content in generate_all(specs_with_sources(repo_root)).items():
        if path.endswith(".schema.json"):  # a JSON Schema's own place for a note
            assert GENERATED_MARK in json.loads(content)["$comment"], path
        elif path.endswith(".json"):
            assert GENERATED_MARK in json.loads(content)["description"], path
        else:
            assert GENERATED_MARK in content.split("\n", 2)[0] + content[:400], path


def test_drift_reports_changed_missing_and_stale_files(tmp_path: Path, repo_root: Path) -> None:
    files = generate_all(specs_with_sources(repo_root))
    write_tree(tmp_path, files)
    assert not drift(tmp_path, files)
    (tmp_path / "alerts/minimal.rules.yaml").write_text("# edited by hand\n")
    (tmp_path / "dashboards/minimal.json").unlink()
    (tmp_path / "alerts/old-job.rules.yaml").write_text(f"# {GENERATED_MARK} 0.0.1\n")
    (tmp_path / "alerts/handwritten.yaml").write_text("groups: []\n")
    result = drift(tmp_path, files)
    assert result.differing == ["alerts/minimal.rules.yaml"]
    assert result.missing == ["dashboards/minimal.json"]
    assert result.stale == ["alerts/old-job.rules.yaml"]
    # Writing again repairs all three and leaves the hand-written file alone.
    write_tree(tmp_path, files)
    assert not drift(tmp_path, files)
    assert (tmp_path / "alerts/handwritten.yaml").exists()


def test_cli_check_fails_on_drift(tmp_path: Path, repo_root: Path) -> None:
    runner = CliRunner()
    jobs = repo_root / "jobs"
    assert (
        runner.invoke(main, ["generate", "--jobs", str(jobs), "--out", str(tmp_path)]).exit_code
        == 0
    )
    ok = runner.invoke(main, ["check", "--jobs", str(jobs), "--out", str(tmp_path)])
    assert ok.exit_code == 0, ok.output
    path = tmp_path / "alerts/llama-8b-finetune.rules.yaml"
    path.write_text(path.read_text().replace('le="2.5"', 'le="25"'))
    failed = runner.invoke(main, ["check", "--jobs", str(jobs), "--out", str(tmp_path)])
    assert failed.exit_code == 1
    assert "differs: alerts/llama-8b-finetune.rules.yaml" in failed.output


def test_failed_write_leaves_committed_files_untouched(
    tmp_path: Path, repo_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = generate_all(specs_with_sources(repo_root))
    write_tree(tmp_path, files)
    before = {p: (tmp_path / p).read_text() for p in files}
    changed = {p: c + "# change\n" for p, c in files.items()}

    def broken_replace(src: object, dst: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("trainsignals.generator.writer.os.replace", broken_replace)
    with pytest.raises(OSError):
        write_tree(tmp_path, changed)
    assert {p: (tmp_path / p).read_text() for p in files} == before
    assert not list(tmp_path.glob(".trainsignals-*")), "staging folder left behind"


def test_rules_read_only_recorded_or_catalogued_series(repo_root: Path) -> None:
    known = known_series_names()
    for spec, source in specs_with_sources(repo_root):
        files = generate_all([(spec, source)])
        groups = yaml.safe_load(files[f"alerts/{spec.name}.rules.yaml"])["groups"]
        recorded = {r["record"] for g in groups for r in g["rules"] if "record" in r}
        for group in groups:
            for rule in group["rules"]:
                unknown = metric_names(rule["expr"]) - recorded - known
                assert not unknown, f"{spec.name} {rule.get('record') or rule['alert']}: {unknown}"


def test_metric_name_scanner_finds_names() -> None:
    """The scanner above must see series names, or the previous test proves nothing."""
    expr = (
        'sum by (node) (rate(foo_total{a="b"}[5m])) / on (node) bar:baz:rate5m '
        'and time() - max(qux{x="y"}) > 3'
    )
    assert metric_names(expr) == {"foo_total", "bar:baz:rate5m", "qux"}


def test_time_scale_divides_windows_and_for(repo_root: Path) -> None:
    spec = load_specs([repo_root / "jobs/minimal.yaml"])[0]
    normal = RuleContext(spec)
    fast = RuleContext(spec, time_scale=60, min_range_seconds=4)
    assert (normal.range(300), fast.range(300)) == ("5m", "5s")
    assert (normal.duration(900), fast.duration(900)) == ("15m", "15s")
    assert fast.range(60) == "4s"  # never below what the scrape interval allows
    files = generate_all([(spec, "jobs/minimal.yaml")], Options(time_scale=60, min_range_seconds=4))
    rules = yaml.safe_load(files["alerts/minimal.rules.yaml"])["groups"][1]["rules"]
    stalled = next(r for r in rules if r["alert"] == "TrainingStalled")
    assert stalled["for"] == "1s"
    assert "> 10 and" in stalled["expr"]  # stall_after 10m / 60
    assert "alerts/minimal.test.yaml" not in files  # promtool tests are for production rules


def test_a_for_floor_lifts_short_fors_only(repo_root: Path) -> None:
    """Compressed `for`s below `min_for_seconds` rise to it (the scenario matrix: one late
    scrape must not page); longer ones and every window stay as scaled."""
    spec = load_specs([repo_root / "jobs/minimal.yaml"])[0]

    def fors(min_for: float) -> dict[str, str]:
        options = Options(time_scale=60, min_range_seconds=4, min_for_seconds=min_for)
        files = generate_all([(spec, "jobs/minimal.yaml")], options)
        groups = yaml.safe_load(files["alerts/minimal.rules.yaml"])["groups"]
        return {r["alert"]: r.get("for", "") for g in groups for r in g["rules"] if "alert" in r}

    plain, floored = fors(1), fors(4)
    assert (plain["TrainingStalled"], floored["TrainingStalled"]) == ("1s", "4s")  # 1m / 60
    assert (plain["TrainingTargetsDown"], floored["TrainingTargetsDown"]) == ("2s", "4s")
    assert plain["ThroughputBelowFloor"] == floored["ThroughputBelowFloor"] == "5s"  # 5m / 60
    assert plain["NodeUnreachableRecently"] == floored["NodeUnreachableRecently"] == ""


def test_severity_override_and_off(tmp_path: Path, repo_root: Path) -> None:
    spec_text = (repo_root / "jobs/minimal.yaml").read_text()
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "minimal.yaml").write_text(
        spec_text + "alerts:\n  LossPlateau: page\n  GpuTemperatureHigh: off\n"
    )
    files = generate_all([(s, "jobs/minimal.yaml") for s in load_specs([jobs / "minimal.yaml"])])
    alerts = {
        r["alert"]: r
        for r in yaml.safe_load(files["alerts/minimal.rules.yaml"])["groups"][1]["rules"]
    }
    assert alerts["LossPlateau"]["labels"]["severity"] == "page"
    assert "GpuTemperatureHigh" not in alerts


def test_generate_twice_in_a_copy_leaves_git_clean(tmp_path: Path, repo_root: Path) -> None:
    copy = tmp_path / "repo"
    shutil.copytree(repo_root / "jobs", copy / "jobs")
    runner = CliRunner()
    args = ["generate", "--jobs", str(copy / "jobs"), "--out", str(copy)]
    assert runner.invoke(main, args).exit_code == 0
    second = runner.invoke(main, args)
    assert second.exit_code == 0
    assert " 0 changed" in second.output


def test_check_agrees_with_generate_however_the_jobs_path_is_typed(
    tmp_path: Path, repo_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 18: generated from `/tmp/x/myjobs`, checked as `../myjobs`: nothing differs."""
    jobs, out, elsewhere = tmp_path / "x/myjobs", tmp_path / "out", tmp_path / "x/elsewhere"
    shutil.copytree(repo_root / "jobs", jobs)
    elsewhere.mkdir()
    runner = CliRunner()
    made = runner.invoke(main, ["generate", "--jobs", str(jobs.absolute()), "--out", str(out)])
    assert made.exit_code == 0, made.output
    first_line = (out / "alerts/minimal.rules.yaml").read_text().splitlines()[0]
    assert " from myjobs/minimal.yaml " in first_line
    assert str(tmp_path) not in first_line
    monkeypatch.chdir(elsewhere)
    for typed in ("../myjobs", "../myjobs/", "../elsewhere/../myjobs"):
        checked = runner.invoke(main, ["check", "--jobs", typed, "--out", "../../out"])
        assert checked.exit_code == 0, f"{typed}: {checked.output}"
