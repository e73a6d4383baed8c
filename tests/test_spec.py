"""Spec validation: good specs load with defaults, every bad spec names file, field and fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from trainsignals.generator.loader import SpecError, load_specs, spec_files

from trainsignals.cli import main

MINIMAL = """\
name: demo
team: ml
shape:
  gpu_model: H100-SXM
  model_flops_per_token: 4.2e10
"""


def write(tmp_path: Path, text: str, name: str = "demo.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def problems(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(SpecError) as caught:
        load_specs([write(tmp_path, text)])
    return caught.value.problems


def test_example_specs_are_valid(repo_root: Path) -> None:
    specs = load_specs(spec_files(repo_root / "jobs"))
    assert {s.name for s in specs} >= {"minimal", "llama-8b-finetune", "gpt-70b-pretrain"}


def test_minimal_spec_takes_defaults(tmp_path: Path) -> None:
    spec = load_specs([write(tmp_path, MINIMAL)])[0]
    assert spec.selector_labels == {"training_job": "demo"}
    assert spec.shape.gpus == 8
    assert spec.objectives.stall_after == 600
    # Throughput floor derived from the MFU floor: half the tokens/s at 30% MFU.
    expected = 0.5 * 0.30 * 8 * 989.4e12 / 4.2e10
    assert spec.tokens_per_second_floor == pytest.approx(expected)


def test_minimal_example_is_about_ten_lines(repo_root: Path) -> None:
    lines = [
        line
        for line in (repo_root / "jobs/minimal.yaml").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert len(lines) <= 12


@pytest.mark.parametrize(
    ("text", "field", "hint"),
    [
        (MINIMAL + "objectivs: {}\n", "objectivs", "unknown key"),
        (MINIMAL + "objectives:\n  stall_afterr: 5m\n", "objectives.stall_afterr", "unknown key"),
        (MINIMAL.replace("4.2e10", "lots"), "shape.model_flops_per_token", "write a number"),
        (MINIMAL + "objectives:\n  mfu_min_ratio: -0.3\n", "objectives.mfu_min_ratio", "positive"),
        (MINIMAL + "objectives:\n  stall_after: soon\n", "objectives.stall_after", "10m"),
        (MINIMAL.replace("H100-SXM", "H1000"), "shape.gpu_model", "write one of"),
        (MINIMAL + "selector: {training_job: 'a\"b'}\n", "selector", "plain label value"),
        (MINIMAL + "selector: {training_job: 'a}b'}\n", "selector", "plain label value"),
        (MINIMAL + "team2: x\n", "team2", "remove it"),
        (MINIMAL + "alerts: {NonFiniteLos: page}\n", "alerts", "did you mean NonFiniteLoss"),
        (MINIMAL + "alerts: {NonFiniteLoss: sometimes}\n", "alerts.NonFiniteLoss", "'page'"),
        (MINIMAL.replace("name: demo", "name: Demo Job"), "name", "lower-case"),
        (MINIMAL.replace("team: ml\n", ""), "team", "add it"),
    ],
)
def test_bad_spec_names_file_field_and_fix(
    tmp_path: Path, text: str, field: str, hint: str
) -> None:
    found = problems(tmp_path, text)
    assert len(found) == 1, found
    assert found[0].startswith(f"{tmp_path / 'demo.yaml'}: {field}")
    assert hint in found[0]


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    text = MINIMAL.replace("H100-SXM", "H1000") + "objectivs: {}\nteam2: x\n"
    assert len(problems(tmp_path, text)) == 3


def test_yaml_off_means_off(tmp_path: Path) -> None:
    spec = load_specs([write(tmp_path, MINIMAL + "alerts: {LossPlateau: off}\n")])[0]
    assert spec.alerts == {"LossPlateau": "off"}


def test_duplicate_job_names_are_rejected(tmp_path: Path) -> None:
    first = write(tmp_path, MINIMAL, "a.yaml")
    second = write(tmp_path, MINIMAL, "b.yaml")
    with pytest.raises(SpecError) as caught:
        load_specs([first, second])
    assert caught.value.problems == [
        f"{second}: name: job name 'demo' is already used by {first}; give each job a unique name"
    ]


def test_invalid_yaml_names_the_line(tmp_path: Path) -> None:
    found = problems(tmp_path, MINIMAL + "objectives: [unclosed\n")
    assert found[0].startswith(f"{tmp_path / 'demo.yaml'}:")
    assert "not valid YAML" in found[0]


def test_cli_exits_non_zero_and_writes_nothing(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    write(jobs, MINIMAL, "good.yaml")
    write(jobs, MINIMAL.replace("name: demo", "name: other") + "objectivs: {}\n", "bad.yaml")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["generate", "--jobs", str(jobs), "--out", str(out)])
    assert result.exit_code == 1
    assert f"{jobs / 'bad.yaml'}: objectivs: unknown key" in result.output
    assert not out.exists()
