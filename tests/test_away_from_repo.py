"""What a wheel user reads names no file of this repository (issue 27, item 5).

Generated headers, CLI help and errors are read by people who installed the wheel: `run make
dashboards` or `see generator/spec/monitoring.py` points at nothing they have. `trainsignals
diff` outside a git checkout says what to do, and the demo's Grafana provider points at the
dashboard it wrote. tests/test_wheel_install.py walks the same paths with the installed wheel.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from trainsignals.cli.main import main

from .conftest import ROOT

# A source folder of this repository followed by a file or folder, or a make target; not a
# URL's path (github.com/example/trainsignals/blob/...) nor a file_sd folder.
REPO_PATH = re.compile(
    r"(?<![\w/.-])(?:generator|trainsignals|exporters|simulator|tests|bench)/[\w.-]+"
    r"|`make [a-z]|\bmake (?:dashboards|setup|generate|check|test|demo|wheel|image)\b"
)
GENERATED = ("alerts", "dashboards", "runbooks", "docs", "deploy")


def repo_paths(text: str) -> list[str]:
    return REPO_PATH.findall(text)


def test_the_pattern_finds_what_issue_27_quoted() -> None:
    for quoted in (
        "run `make dashboards`",
        "generator/templates/runbook_*.md.j2",
        "see generator/spec/monitoring.py",
        "trainsignals/metrics/gpu_models.py lists them",
    ):
        assert repo_paths(quoted), quoted
    assert not repo_paths("https://github.com/example/trainsignals/blob/main/runbooks/X.md")
    assert not repo_paths("/etc/prometheus/file_sd/trainsignals/minimal/node*.json")


@pytest.mark.parametrize("folder", GENERATED)
def test_generated_files_name_no_repository_path(folder: str) -> None:
    found = {
        path.relative_to(ROOT).as_posix(): hits
        for path in sorted((ROOT / folder).rglob("*"))
        if path.is_file() and (hits := repo_paths(path.read_text(encoding="utf-8")))
    }
    assert not found


def _commands() -> list[list[str]]:
    return [[], *([name] for name in sorted(main.commands))]


@pytest.mark.parametrize("argv", _commands(), ids=lambda a: " ".join(a) or "trainsignals")
def test_help_names_no_repository_path(argv: list[str]) -> None:
    done = CliRunner().invoke(main, [*argv, "--help"], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    assert not repo_paths(done.output), done.output


def test_diff_outside_a_checkout_says_what_to_do(tmp_path: Path) -> None:
    assert subprocess.run(["git", "-C", str(tmp_path), "rev-parse"], capture_output=True).returncode
    done = CliRunner().invoke(main, ["diff", "--repo", str(tmp_path)])
    assert done.exit_code == 1
    assert "not inside a git checkout" in done.output
    assert "trainsignals diff OLD_DIR NEW_DIR" in done.output
    assert "rev-parse" not in done.output


def test_diff_of_two_output_folders_needs_no_git(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    for folder in (old, new):
        (folder / "alerts").mkdir(parents=True)
        (folder / "dashboards").mkdir()
    rules = (ROOT / "alerts" / "minimal.rules.yaml").read_text(encoding="utf-8")
    (old / "alerts" / "minimal.rules.yaml").write_text(rules)
    document = yaml.safe_load(rules)
    dropped = document["groups"][0]["rules"].pop(0)
    (new / "alerts" / "minimal.rules.yaml").write_text(yaml.safe_dump(document))
    done = CliRunner().invoke(main, ["diff", str(old), str(new)], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    assert f"`{old}` → `{new}`" in done.output
    assert dropped.get("alert", dropped.get("record")) in done.output


def test_demo_provider_points_at_the_dashboard_it_wrote(tmp_path: Path) -> None:
    from trainsignals.demo import write_grafana_provisioning

    dashboard = (ROOT / "dashboards" / "minimal.json").read_text(encoding="utf-8")
    written = write_grafana_provisioning(
        tmp_path / "grafana" / "provisioning", "http://127.0.0.1:9090", {"minimal.json": dashboard}
    )
    provider = yaml.safe_load(written[1].read_text(encoding="utf-8"))
    folder = Path(provider["providers"][0]["options"]["path"])
    assert folder.is_relative_to(tmp_path.resolve())
    assert json.loads((folder / "minimal.json").read_text())["uid"] == "ts-minimal"


@pytest.mark.parametrize("target", ["demo", "wheel"])
def test_demo_and_wheel_install_no_test_extras(target: str, tmp_path: Path) -> None:
    """`make demo` / `make wheel` from a clean clone: what they would install (`make -n`, a venv
    that does not exist yet) is the base package, never torch and the test extras (~1.5 GB)."""
    done = subprocess.run(
        ["make", "-n", "-C", str(ROOT), target, f"VENV={tmp_path / 'venv'}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "pip install -q -e ." in done.stdout, done.stdout  # the base package
    assert "torch" not in done.stdout and "[dev" not in done.stdout, done.stdout
