"""On-call load (generator/oncall/): rules and their promtool tests, dashboard, runbook."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft7Validator

from trainsignals.generator.dashboards.kit import iter_panels, panel_queries
from trainsignals.generator.loader import load_specs, spec_files
from trainsignals.generator.oncall.dashboard import raw_dashboard
from trainsignals.generator.oncall.files import oncall_files
from trainsignals.generator.oncall.policy import ALERT, DASHBOARD_UID, PANEL_IDS, OncallPolicy
from trainsignals.generator.oncall.unit_tests import episodes
from trainsignals.generator.output.yaml import dump
from trainsignals.generator.pipeline import GENERATED_MARK, Options, generate_all
from trainsignals.generator.spec.job import JobSpec, Links, Shape
from trainsignals.ops.lint import lint_rules, metric_names

from .conftest import JOBS, run_tool
from .dashboards.helpers import load_schema, panel_schema_problems
from .promtool_subsets import promtool_test

RULES, TESTS = "alerts/oncall.rules.yaml", "alerts/oncall.test.yaml"
DASHBOARD, RUNBOOK = "dashboards/oncall.json", f"runbooks/{ALERT}.md"
STARTED = "team_alertname_severity:trainsignals_alerts_started:count"
CUSTOM_POLICY = OncallPolicy(shift_seconds=8 * 3600, max_pages_per_shift=4)


def example_specs() -> list[tuple[JobSpec, str]]:
    return [(s, f"jobs/{s.name}.yaml") for s in load_specs(spec_files(JOBS))]


@pytest.fixture(scope="module")
def files() -> dict[str, str]:
    return oncall_files(example_specs())


def write(folder: Path, files: dict[str, str]) -> tuple[Path, Path]:
    rules, tests = folder / "oncall.rules.yaml", folder / "oncall.test.yaml"
    rules.write_text(files[RULES])
    tests.write_text(files[TESTS])
    return rules, tests


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_tool("promtool", *args, cwd=cwd, timeout=120)


def rules_by_name(text: str) -> dict[str, dict]:
    return {
        rule.get("record") or rule["alert"]: rule
        for group in yaml.safe_load(text)["groups"]
        for rule in group["rules"]
    }


# --- wiring -----------------------------------------------------------------------------------


def test_generate_all_writes_the_oncall_files() -> None:
    generated = generate_all(example_specs())
    for path in (RULES, TESTS, DASHBOARD, RUNBOOK):
        assert path in generated
    assert generated[RULES] == oncall_files(example_specs())[RULES]


def test_time_scale_scales_the_shift_and_drops_the_tests() -> None:
    fast = oncall_files(example_specs(), Options(time_scale=60))
    assert TESTS not in fast
    rules = rules_by_name(fast[RULES])
    # The name keeps the nominal shift; the window, `for` and onset step are scaled.
    per_shift = rules["team_severity:trainsignals_alerts_started:sum12h"]
    assert "[12m]" in per_shift["expr"]
    assert "offset 1s" in rules[STARTED]["expr"]
    assert rules[ALERT]["for"] == "15s"
    assert yaml.safe_load(fast[RULES])["groups"][0]["interval"] == "1s"


def test_a_job_named_oncall_is_refused() -> None:
    spec = JobSpec(
        name="oncall",
        team="t",
        shape=Shape(gpu_model="H100-SXM", model_flops_per_token=4.2e10),
    )
    with pytest.raises(ValueError, match="may not be named 'oncall'"):
        oncall_files([(spec, "jobs/oncall.yaml")])


def test_files_say_they_are_generated(files: dict[str, str]) -> None:
    for path, text in files.items():
        head = json.loads(text)["description"] if path.endswith(".json") else text[:400]
        assert GENERATED_MARK in head and "jobs/minimal.yaml" in head, path
    assert oncall_files(example_specs()) == files  # deterministic


# --- rules ------------------------------------------------------------------------------------


def test_rules_are_lint_clean_alone_and_with_the_job_rules(files: dict[str, str]) -> None:
    documents = {RULES: yaml.safe_load(files[RULES])}
    assert lint_rules(documents) == []
    everything = {
        path: yaml.safe_load(text)
        for path, text in generate_all(example_specs()).items()
        if path.endswith(".rules.yaml")
    }
    assert lint_rules(everything) == []


def test_alert_labels_and_annotations(files: dict[str, str]) -> None:
    first = example_specs()[0][0]
    alert = rules_by_name(files[RULES])[ALERT]
    assert alert["labels"] == {"job": "oncall", "severity": "ticket", "team": "{{ $labels.team }}"}
    assert alert["expr"] == 'team_severity:trainsignals_alerts_started:sum12h{severity="page"} > 2'
    annotations = alert["annotations"]
    base = first.links.runbook_base_url.rstrip("/")
    assert annotations["runbook_url"] == f"{base}/{ALERT}.md"
    assert annotations["dashboard_url"] == (
        f"{first.links.grafana_base_url}/d/{DASHBOARD_UID}/oncall"
        f"?viewPanel={PANEL_IDS['pages_per_shift']}"
    )
    assert "{{ $value }}" in annotations["description"]
    # Long enough that one recount does not open a ticket.
    assert alert["for"] == "15m"


def test_page_onsets_are_counted_per_notification_group(files: dict[str, str]) -> None:
    expr = rules_by_name(files[RULES])[STARTED]["expr"]
    assert expr.count("by (team, severity, training_job, alertname)") == 2
    assert "unless" in expr and "offset 1m" in expr
    # The onset offset and the group interval are the same step, or onsets double count.
    assert yaml.safe_load(files[RULES])["groups"][0]["interval"] == "1m"


def test_policy_is_a_parameter() -> None:
    custom = oncall_files(example_specs(), policy=CUSTOM_POLICY)
    rules = rules_by_name(custom[RULES])
    assert rules[ALERT]["expr"].endswith('sum8h{severity="page"} > 4')
    assert "[8h]" in rules["team_severity:trainsignals_alerts_started:sum8h"]["expr"]
    names = [t["name"] for t in yaml.safe_load(custom[TESTS])["tests"]]
    assert f"{ALERT} fires when a team is paged 5 separate times in one 8h shift" in names
    with pytest.raises(ValueError, match="at least 1h"):
        OncallPolicy(shift_seconds=600)


def test_episodes_end_with_a_staleness_marker() -> None:
    assert episodes(9, [(2, 4), (6, 8)]) == "_x2 1x1 stale _ 1x1 stale _"
    assert episodes(3, [(0, 4)]) == "1x3"


# --- promtool ---------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", [None, CUSTOM_POLICY], ids=["default", "8h-shift-4-pages"])
def test_promtool_check_and_generated_tests_pass(
    policy: OncallPolicy | None, tmp_path: Path
) -> None:
    rules, tests = write(tmp_path, oncall_files(example_specs(), policy=policy))
    checked = promtool("check", "rules", rules.name, cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "5 rules found" in checked.stdout
    tested = promtool_test(tests.name, cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_generated_tests_cover_the_cases(files: dict[str, str]) -> None:
    names = [t["name"] for t in yaml.safe_load(files[TESTS])["tests"]]
    assert names == [
        f"{ALERT} fires when a team is paged 3 separate times in one 12h shift",
        f"one page episode firing for hours on eight GPUs is one page and no {ALERT}",
        f"tickets are counted but never count as pages for {ALERT}",
        "3 pages spread over more than one 12h shift stay within the budget",
        "a cause and the alert it explains (explains=) fire together: one notification",
    ]


def mutate(folder: Path, files: dict[str, str], name: str, expr: str) -> str:
    """Replace one rule's expr, run the generated tests that read it (no other group's outcome
    can change), return promtool's output (must fail)."""
    rules, tests = write(folder, files)
    # The same groups pass unbroken in test_promtool_check_and_generated_tests_pass[default]
    # (run again here, they were ~40% of these tests' CPU).
    document = yaml.safe_load(rules.read_text())
    for group in document["groups"]:
        for rule in group["rules"]:
            if (rule.get("record") or rule.get("alert")) == name:
                rule["expr"] = expr
    rules.write_text(dump(document))
    tested = promtool_test(tests.name, cwd=folder, reading={name})
    assert tested.returncode != 0, "the generated tests did not notice the broken rule"
    return tested.stdout + tested.stderr


def test_a_weaker_threshold_fails_the_generated_tests(
    files: dict[str, str], tmp_path: Path
) -> None:
    alert = rules_by_name(files[RULES])[ALERT]
    output = mutate(tmp_path, files, ALERT, alert["expr"].replace("> 2", "> 3"))
    assert 'alertname="OncallPageLoadHigh"' in output and "got: nil" in output


def test_a_stricter_threshold_fails_the_generated_tests(
    files: dict[str, str], tmp_path: Path
) -> None:
    alert = rules_by_name(files[RULES])[ALERT]
    output = mutate(tmp_path, files, ALERT, alert["expr"].replace("> 2", "> 1"))
    # Two pages are within the budget: the spread-out test must catch a limit of one.
    assert "count_over_time(ALERTS" in output


@pytest.mark.parametrize(
    "broken",
    [
        # Counts evaluations (minutes of firing), not episodes.
        'count by (team, alertname, severity) (ALERTS{alertstate="firing"})',
        # Counts onsets per series: eight GPUs in one notification are eight pages.
        'count by (team, alertname, severity) (ALERTS{alertstate="firing"} '
        'unless ALERTS{alertstate="firing"} offset 1m)',
    ],
    ids=["per-evaluation", "per-series"],
)
def test_a_wrong_page_count_fails_the_generated_tests(
    broken: str, files: dict[str, str], tmp_path: Path
) -> None:
    output = mutate(tmp_path, files, STARTED, broken)
    assert "sum12h" in output


# --- dashboard --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dashboard(files: dict[str, str]) -> dict:
    return json.loads(files[DASHBOARD])


def test_dashboard_validates_against_grafana_schema(dashboard: dict) -> None:
    errors = list(Draft7Validator(load_schema("dashboard")).iter_errors(dashboard))
    assert errors == [], "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:20])
    # The normaliser is what makes it valid (the check can fail).
    raw = raw_dashboard(OncallPolicy(), Links(), "x")
    assert list(Draft7Validator(load_schema("dashboard")).iter_errors(raw))


def test_panels_validate_against_panel_schemas(dashboard: dict) -> None:
    assert panel_schema_problems(dashboard) == []
    types = {panel["type"] for panel in iter_panels(dashboard)} - {"row"}
    assert types == {"stat", "timeseries", "table"}


def test_dashboard_identity(dashboard: dict) -> None:
    assert dashboard["uid"] == DASHBOARD_UID
    assert dashboard["title"] == "On-call load"
    assert "trainsignals" in dashboard["tags"]
    assert [v["name"] for v in dashboard["templating"]["list"]] == ["datasource", "team"]


def test_every_panel_is_there_and_reads_recorded_series(
    dashboard: dict, files: dict[str, str]
) -> None:
    panels = {p["id"]: p for p in iter_panels(dashboard)}
    assert set(PANEL_IDS.values()) <= set(panels)
    recorded = set(rules_by_name(files[RULES])) - {ALERT}
    queries = panel_queries(dashboard)
    assert {pid for pid, _ in queries} == {p for p, v in panels.items() if v["type"] != "row"}
    for panel_id, expr in queries:
        names = metric_names(expr)
        assert names and names <= recorded, (panel_id, expr)
        assert 'team=~"$team"' in expr, (panel_id, expr)


def test_per_day_panels_are_one_bar_per_day(dashboard: dict) -> None:
    panels = {p["id"]: p for p in iter_panels(dashboard)}
    for key in ("pages_per_day", "tickets_per_day", "pages_per_day_by_alert"):
        panel = panels[PANEL_IDS[key]]
        (target,) = panel["targets"]
        assert target["interval"] == "1d" and "[1d]" in target["expr"]
        assert panel["fieldConfig"]["defaults"]["custom"]["drawStyle"] == "bars"
    top = panels[PANEL_IDS["top_pages"]]["targets"][0]
    assert top["instant"] and top["format"] == "table"
    assert re.fullmatch(
        r"topk\(10, sum by \(team, alertname\) \(sum_over_time\(.*\[7d\]\)\)\)", top["expr"]
    )
    assert 'severity="page"' in top["expr"]


@pytest.mark.parametrize("policy", [OncallPolicy(), CUSTOM_POLICY], ids=["default", "custom"])
def test_shift_panel_threshold_is_the_alert_limit(policy: OncallPolicy) -> None:
    dashboard = json.loads(oncall_files(example_specs(), policy=policy)[DASHBOARD])
    panels = {p["id"]: p for p in iter_panels(dashboard)}
    for key in ("pages_per_shift", "pages_this_shift"):
        steps = panels[PANEL_IDS[key]]["fieldConfig"]["defaults"]["thresholds"]["steps"]
        # Red strictly above the budget, as the alert's `>`.
        limit = policy.max_pages_per_shift
        assert steps == [
            {"color": "green", "value": None},
            {"color": "red", "value": limit + 0.001},
        ]
        assert f"sum{policy.shift}" in panels[PANEL_IDS[key]]["targets"][0]["expr"]


# --- runbook ----------------------------------------------------------------------------------


def test_runbook(files: dict[str, str], dashboard: dict) -> None:
    text = files[RUNBOOK]
    assert text.startswith(f"<!-- {GENERATED_MARK}") and text.endswith("\n")
    assert f"# {ALERT}" in text and "more than 2 times in any 12h window" in text
    assert "unless" in text  # the PromQL of the page count
    for spec, _ in example_specs():
        assert f"| {spec.team} |" in text and spec.name in text
    link = next(link for link in dashboard["links"] if link["title"] == f"Runbook: {ALERT}")
    assert link["url"].endswith(f"/{ALERT}.md")
