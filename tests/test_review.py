"""`trainsignals diff`: a Markdown review of what a spec change does to alerts and dashboards.

The git tests build a throwaway repository: the example specs' output committed on main, then
a branch that edits a spec and commits the regenerated files, as a pull request would.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from trainsignals.cli.main import main
from trainsignals.generator.loader import load_specs, spec_files
from trainsignals.generator.pipeline import generate_all
from trainsignals.generator.writer import write_tree
from trainsignals.ops.review import NO_ALERT_CHANGES, review

RULES = "alerts/minimal.rules.yaml"
DASHBOARD = "dashboards/minimal.json"


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        check=True,
        capture_output=True,
    )


def regenerate(repo: Path, message: str) -> None:
    specs = [(s, f"jobs/{s.name}.yaml") for s in load_specs(spec_files(repo / "jobs"))]
    write_tree(repo, generate_all(specs))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)


def edit_minimal(repo: Path, extra: str) -> None:
    spec = repo / "jobs/minimal.yaml"
    spec.write_text(spec.read_text() + extra)


@pytest.fixture
def repo(tmp_path: Path, repo_root: Path) -> Path:
    """main holds the example specs' output; HEAD is a fresh branch `change` off it."""
    shutil.copytree(repo_root / "jobs", tmp_path / "jobs")
    git(tmp_path, "init", "-q", "-b", "main")
    regenerate(tmp_path, "generated from the example specs")
    git(tmp_path, "checkout", "-q", "-b", "change")
    return tmp_path


def diff(repo: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["diff", "--repo", str(repo), *args])


def section(markdown: str, title: str) -> str:
    """Text under a `### title` heading, up to the next heading."""
    match = re.search(rf"^### {re.escape(title)}\n(.*?)(?=^##|\Z)", markdown, re.M | re.S)
    assert match, f"no section {title!r} in:\n{markdown}"
    return match.group(1)


def changed_alerts(markdown: str, job: str) -> set[str]:
    block = section(markdown, job).split("**Alerts changed:**", 1)[-1].split("\n\n**", 1)[0]
    return set(re.findall(r"^- `(\w+)`", block, re.M))


def test_objective_and_severity_change(repo: Path) -> None:
    edit_minimal(
        repo, "objectives:\n  gpu_temperature_max_celsius: 90\nalerts:\n  LossPlateau: page\n"
    )
    regenerate(repo, "minimal: hotter GPUs tolerated, plateau pages")
    result = diff(repo)
    assert result.exit_code == 0, result.output
    md = result.output
    assert md.startswith("## trainsignals review: `")
    assert "→ `work tree`" in md.splitlines()[0]
    # Pages first, and only the promotion: the temperature alert stays a ticket.
    assert md.index("### ⚠ Pages") < md.index("### minimal")
    pages = section(md, "⚠ Pages").strip().splitlines()
    assert pages == ["- **minimal** `LossPlateau`: promoted ticket → page"]
    # Exactly the two alerts, with old -> new values; no other job is touched.
    assert changed_alerts(md, "minimal") == {"GpuTemperatureHigh", "LossPlateau"}
    minimal = section(md, "minimal")
    assert "- threshold: `87` → `90`" in minimal
    assert "- severity: `ticket` → `page`" in minimal
    assert "- summary:" not in minimal  # the summary has no threshold in it
    assert "above 87 C, for 10 minutes." in minimal and "above 90 C, for 10 minutes." in minimal
    assert "Alerts added" not in md and "Alerts removed" not in md
    assert "Recording rules" not in md
    assert "GPU temperature (#" in minimal.split("**Dashboard:**")[1]
    assert re.findall(r"^### (.+)$", md, re.M) == ["⚠ Pages", "minimal"]
    assert NO_ALERT_CHANGES not in md
    assert diff(repo, "--fail-on-page-change").exit_code == 2


def test_no_change(repo: Path) -> None:
    regenerate(repo, "nothing changed")
    result = diff(repo, "--fail-on-page-change")
    assert result.exit_code == 0, result.output
    assert NO_ALERT_CHANGES in result.output
    assert "###" not in result.output
    # On main itself the default base is HEAD.
    git(repo, "checkout", "-q", "main")
    on_main = diff(repo)
    assert on_main.exit_code == 0 and NO_ALERT_CHANGES in on_main.output


def test_page_changes_between_two_revisions(repo: Path) -> None:
    edit_minimal(
        repo,
        "objectives:\n  stall_after: 15m\n"
        "alerts:\n  NodeDown: ticket\n  GpuTemperatureHigh: off\n  CheckpointTooOld: off\n",
    )
    regenerate(repo, "minimal: slower stall, fewer pages")
    git(repo, "checkout", "-q", "main")  # the work tree no longer matters: both are revisions
    result = diff(repo, "main", "change", "--fail-on-page-change")
    assert result.exit_code == 2, result.output
    md = result.output
    assert re.match(r"## trainsignals review: `main \(\w+\)` → `change \(\w+\)`", md)
    pages = section(md, "⚠ Pages").strip().splitlines()
    assert pages == [
        "- **minimal** `CheckpointTooOld`: page removed",
        "- **minimal** `TrainingStalled`: page changed; threshold: `600` → `900`",
        "- **minimal** `NodeDown`: demoted page → ticket",
    ]
    minimal = section(md, "minimal")
    assert "**Alerts removed:** `CheckpointTooOld` (page), `GpuTemperatureHigh` (ticket)" in minimal
    assert changed_alerts(md, "minimal") == {
        "TrainingStalled",
        "NodeDown",
        "DataLoaderStarved",  # its average leaves out hangs (no step for stall_after / 2)
        "AlertInputMissing",  # the inputs of the alerts turned off are no longer required
    }
    # The reversed diff reads as the opposite change.
    back = diff(repo, "change", "main").output
    assert "- **minimal** `CheckpointTooOld`: new page" in back
    assert "- **minimal** `NodeDown`: promoted ticket → page" in back


def test_unknown_revision_is_a_clear_error(repo: Path) -> None:
    result = diff(repo, "no-such-branch")
    assert result.exit_code == 1
    assert "no-such-branch" in result.output


@pytest.fixture(scope="module")
def generated(repo_root: Path) -> dict[str, str]:
    specs = [(s, f"jobs/{s.name}.yaml") for s in load_specs([repo_root / "jobs/minimal.yaml"])]
    return {p: c for p, c in generate_all(specs).items() if p in (RULES, DASHBOARD)}


def test_recording_rules_and_dashboard_panels(generated: dict[str, str]) -> None:
    rules = yaml.safe_load(generated[RULES])
    recording, alerting = rules["groups"][0]["rules"], rules["groups"][1]["rules"]
    recording[0]["expr"] = recording[0]["expr"].replace("[5m]", "[10m]")
    recording.append({"record": "job:trainsignals_new:sum", "expr": "sum(up)"})
    slow = rules["groups"][2]["rules"]  # dashboard-only rates run in the slow group
    slow.remove(next(r for r in slow if r["record"] == "job:trainsignals_samples:rate5m"))
    page = next(a for a in alerting if a["labels"]["severity"] == "page")
    alerting.append({**page, "alert": "BrandNewPage"})
    dashboard = json.loads(generated[DASHBOARD])
    dashboard["panels"][0]["title"] = "Step time p99"
    removed = dashboard["panels"].pop(1)
    head = {RULES: yaml.safe_dump(rules), DASHBOARD: json.dumps(dashboard)}

    result = review(generated, head, "base", "head")
    md = result.markdown
    assert result.page_changed
    assert section(md, "⚠ Pages").strip() == "- **minimal** `BrandNewPage`: new page"
    assert "**Alerts added:** `BrandNewPage` (page)" in md
    assert "- added `job:trainsignals_new:sum`: `sum(up)`" in md
    assert "- removed `job:trainsignals_samples:rate5m`" in md
    assert "- changed `job:trainsignals_tokens:rate5m`: window: `5m` → `10m`" in md
    panels = len(json.loads(generated[DASHBOARD])["panels"])
    dash_line = next(line for line in md.splitlines() if line.startswith("**Dashboard:**"))
    assert f"{panels} → {panels - 1} panels" in dash_line
    assert f"removed: {removed['title']} (#{removed['id']})" in dash_line
    assert "changed: Step time p99 (#1)" in dash_line


def test_whole_job_added_lists_its_pages(generated: dict[str, str]) -> None:
    result = review({}, generated, "base", "head")
    pages = section(result.markdown, "⚠ Pages").strip().splitlines()
    page_alerts = [
        r["alert"]
        for r in yaml.safe_load(generated[RULES])["groups"][1]["rules"]
        if r["labels"]["severity"] == "page"
    ]
    assert pages == [f"- **minimal** `{name}`: new page" for name in page_alerts]
    assert "**Dashboard:** added" in result.markdown


def test_expr_rewrite_shows_the_whole_expr(generated: dict[str, str]) -> None:
    rules = yaml.safe_load(generated[RULES])
    stalled = next(r for r in rules["groups"][1]["rules"] if r.get("alert") == "TrainingStalled")
    old = stalled["expr"]
    stalled["expr"] = "absent(trainsignals_last_step_timestamp_seconds)"
    md = review(generated, {**generated, RULES: yaml.safe_dump(rules)}, "a", "b").markdown
    assert (
        f"- **minimal** `TrainingStalled`: page changed; expr: `{old}` → `{stalled['expr']}`" in md
    )
