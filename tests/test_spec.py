"""Spec validation: good specs load with defaults, every bad spec names file, field and fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from trainsignals.cli.main import main
from trainsignals.generator.loader import SpecError, load_specs, spec_files
from trainsignals.metrics.gpu_models import PEAK_DENSE_FLOPS
from trainsignals.simulator.profile import GPU_BOARDS

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
        (MINIMAL + "objectivs: {}\n", "objectivs", "did you mean `objectives`"),
        (MINIMAL + "objectives:\n  stall_afterr: 5m\n", "objectives.stall_afterr", "`stall_after`"),
        (MINIMAL.replace("4.2e10", "lots"), "shape.model_flops_per_token", "write a number"),
        (MINIMAL + "objectives:\n  mfu_min_ratio: -0.3\n", "objectives.mfu_min_ratio", "positive"),
        (MINIMAL + "objectives:\n  stall_after: soon\n", "objectives.stall_after", "10m"),
        (MINIMAL.replace("H100-SXM", "H1000"), "shape.gpu_model", "write one of"),
        (MINIMAL + "selector: {training_job: 'a\"b'}\n", "selector", "plain label value"),
        (MINIMAL + "selector: {training_job: 'a}b'}\n", "selector", "plain label value"),
        (MINIMAL + "team2: x\n", "team2", "did you mean `team`"),
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


# Board names as NVML reports them (the simulator's boards) and as
# nvidia-smi prints other variants; None: figures of their own, not guessed.
BOARD_NAMES = [
    *((name, model) for model, (name, *_) in GPU_BOARDS.items()),
    ("A100-SXM4-80GB", "A100"),
    ("NVIDIA A100-PCIE-40GB", "A100"),
    ("NVIDIA H100 NVL", None),
    ("NVIDIA GH200 480GB", None),
    ("Tesla V100-SXM2-32GB", None),
]


@pytest.mark.parametrize(("board", "model"), BOARD_NAMES)
def test_a_board_name_as_gpu_model_names_the_model_to_write(
    tmp_path: Path, board: str, model: str | None
) -> None:
    found = problems(tmp_path, MINIMAL.replace("H100-SXM", f"'{board}'"))
    assert len(found) == 1, found
    assert found[0].startswith(f"{tmp_path / 'demo.yaml'}: shape.gpu_model")
    if model is None:
        assert "that board's model" not in found[0]
    else:
        assert f"write {model} (that board's model here)" in found[0]
        assert model in PEAK_DENSE_FLOPS


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


@pytest.mark.parametrize(
    ("extra", "field", "closest"),
    [
        ("routing:\n  pager: {kind: email, target: a@b.c}\n", "routing.pager", "page"),
        ("recovery:\n  restart_budjet: 15m\n", "recovery.restart_budjet", "restart_budget"),
        ("slos: [{sli: goodput, objective: 0.9, windw: 3d}]\n", "slos[0].windw", "window"),
        (
            "deploy:\n  kubernetes:\n    gpu_exporter:\n      tolerations: [{keyy: a}]\n",
            "deploy.kubernetes.gpu_exporter.tolerations[0].keyy",
            "key",
        ),
        (
            "routing:\n  page: {kind: slack, secret: {fil: /run/slack}}\n",
            "routing.page.secret.fil",
            "file",
        ),
    ],
)
def test_unknown_key_at_any_depth_suggests_the_closest(
    tmp_path: Path, extra: str, field: str, closest: str
) -> None:
    (found,) = problems(tmp_path, MINIMAL + extra)
    assert found.startswith(f"{tmp_path / 'demo.yaml'}: {field}: unknown key")
    assert f"did you mean `{closest}`?" in found


def test_unknown_key_without_a_close_match_lists_the_valid_keys(tmp_path: Path) -> None:
    (found,) = problems(tmp_path, MINIMAL + "links:\n  wiki: https://wiki.example.com\n")
    assert found.startswith(f"{tmp_path / 'demo.yaml'}: links.wiki: unknown key")
    assert "did you mean" not in found
    assert "grafana_base_url" in found and "runbook_base_url" in found


@pytest.mark.parametrize(
    ("extra", "field", "fix"),
    [
        ("objectives:\n  stall_after: 10\n", "objectives.stall_after", "write `10s` or `10m`"),
        ("recovery:\n  restart_budget: 900\n", "recovery.restart_budget", "`900s` or `900m`"),
        ("slos: [{sli: goodput, objective: 0.9, window: 30}]\n", "slos[0].window", "`30s`"),
        ("objectives:\n  mfu_window: 1.5\n", "objectives.mfu_window", "e.g. 90s or 10m"),
        ("objectives:\n  checkpoint_max_age: yes\n", "objectives.checkpoint_max_age", "10m"),
    ],
)
def test_bare_number_duration_is_refused(tmp_path: Path, extra: str, field: str, fix: str) -> None:
    (found,) = problems(tmp_path, MINIMAL + extra)
    assert found.startswith(f"{tmp_path / 'demo.yaml'}: {field}: ")
    assert fix in found


def test_fields_named_in_seconds_take_a_bare_number(tmp_path: Path) -> None:
    text = MINIMAL + "objectives:\n  step_time_max_seconds: 2.5\n  stall_after: 10m\n"
    spec = load_specs([write(tmp_path, text)])[0]
    assert spec.objectives.step_time_max_seconds == 2.5
    assert spec.objectives.stall_after == 600
