"""Goodput rules, panels and command: what is generated for each spec, and the command's logic.

The rules' values are tested by promtool (the generated goodput tests in alerts/*.test.yaml)
and on real Prometheus against the simulator (tests/e2e/test_goodput.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tests.conftest import JOBS, ROOT
from trainsignals.cli.main import main
from trainsignals.generator.loader import load_specs
from trainsignals.generator.signals.goodput import CATEGORIES, badput_name, goodput_name
from trainsignals.generator.signals.slo import SHORT_ONLY, SLO_GOODPUT, SLO_STEPPING, WINDOWS
from trainsignals.ops.goodput import Breakdown, measure, table

SPECS = load_specs(sorted(JOBS.glob("*.yaml")))


def _rules(name: str) -> list[dict]:
    text = (ROOT / "alerts" / f"{name}.rules.yaml").read_text()
    return [r for g in yaml.safe_load(text)["groups"] for r in g["rules"] if "record" in r]


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_every_job_records_goodput_and_each_badput_category(spec) -> None:
    rules = _rules(spec.name)
    for window in ("1h", "1d"):
        assert [r for r in rules if r["record"] == goodput_name(window)], window
    categories = {r["labels"].get("category") for r in rules if r["record"] == badput_name("1h")}
    assert categories == set(CATEGORIES)
    # The 5m windows exist only for the goodput SLO, which reads them.
    has_slo = any(s.sli == "goodput" for s in spec.slos)
    assert bool([r for r in rules if r["record"] == goodput_name("5m")]) == has_slo
    slo_errors = {
        r["record"].rsplit("rate", 1)[1]: r["expr"]
        for r in rules
        if r["labels"].get("slo") == "goodput" and "errors" in r["record"]
    }
    assert set(slo_errors) == (set(WINDOWS) if has_slo else set())
    # Long windows count redone steps as burned; the short-only ones ask "still burning now?",
    # and redoing lost work after a restart is not (the fleet replay's extra page).
    for window, expr in slo_errors.items():
        reads = SLO_STEPPING if window in SHORT_ONLY else SLO_GOODPUT
        assert f"avg_over_time({reads}{{" in expr, window
    stepping = [r["expr"] for r in rules if r["record"] == SLO_STEPPING]
    assert bool(stepping) == has_slo
    for expr in stepping:
        assert SLO_GOODPUT in expr and badput_name("5m") in expr and "lost_progress" in expr


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_dashboard_has_the_goodput_row(spec) -> None:
    dashboard = json.loads((ROOT / "dashboards" / f"{spec.name}.json").read_text())
    titles = [p["title"] for p in dashboard["panels"]]
    row = titles.index("Goodput")
    assert titles[row + 1 : row + 3] == ["Goodput (ETTR)", "Where the time goes (1h)"]
    ettr, breakdown = dashboard["panels"][row + 1 : row + 3]
    exprs = [t["expr"] for t in ettr["targets"]]
    assert any("[$__range]" in e for e in exprs) and any(goodput_name("1d") in e for e in exprs)
    assert breakdown["fieldConfig"]["defaults"]["custom"]["stacking"]["mode"] == "normal"


class FakePrometheus:
    """Answers the command's instant queries from fixed values (the logic, not PromQL)."""

    def __init__(self, activity: dict[str, float], steps: float, progress: float, wall: float):
        self.answers = {
            "activity": [
                {"metric": {"activity": a}, "value": [0, str(v)]} for a, v in activity.items()
            ],
            "steps": [{"metric": {}, "value": [0, str(steps)]}],
            "progress": [{"metric": {}, "value": [0, str(progress)]}],
            "wall": [{"metric": {}, "value": [0, str(wall)]}] if wall else [],
        }

    def query(self, expr: str, at: float) -> list[dict]:
        if expr.startswith("sum by (activity)"):
            return self.answers["activity"]
        if expr.startswith("sum(increase(trainsignals_steps_total"):
            return self.answers["steps"]
        if expr.startswith("clamp_min("):
            return self.answers["progress"]
        return self.answers["wall"]


def test_redone_steps_are_lost_progress_and_missing_time_is_recovery() -> None:
    activity = {"startup": 100.0, "train": 2000.0, "data_wait": 100.0, "eval": 200.0}
    prom = FakePrometheus(activity, steps=1000, progress=750, wall=3600)
    b = measure(prom, SPECS[0], 0.0, 3600.0)
    assert b.seconds["goodput"] == pytest.approx(1500)
    assert b.seconds["lost_progress"] == pytest.approx(500)
    assert b.seconds["recovery"] == pytest.approx(3600 - 2400)
    assert sum(b.share(c) for c in b.seconds) == pytest.approx(1.0)
    text = table("minimal", b)
    assert "ETTR (effective training time ratio): 41.67%" in text
    assert "total" in text and "100.00%" in text


def test_no_data_is_a_clear_error() -> None:
    with pytest.raises(RuntimeError, match="no training targets or time accounting"):
        measure(FakePrometheus({}, 0, 0, 0), SPECS[0], 0.0, 60.0)
    assert Breakdown(0, 1, 0, dict.fromkeys(("goodput",), 0.0)).ettr == 0.0


def test_command_rejects_unknown_jobs_and_reversed_ranges(tmp_path: Path) -> None:
    runner = CliRunner()
    reversed_range = runner.invoke(
        main, ["goodput", "--job", "minimal", "--from", "200", "--to", "100"]
    )
    assert reversed_range.exit_code != 0 and "after --from" in reversed_range.output
    unknown = runner.invoke(
        main,
        ["goodput", "--job", "nope", "--from", "100", "--to", "200", "--jobs", str(JOBS)],
    )
    assert unknown.exit_code != 0 and "no spec named 'nope'" in unknown.output
    unreachable = runner.invoke(
        main,
        [
            "goodput",
            "--job",
            "minimal",
            "--from",
            "100",
            "--to",
            "200",
            "--jobs",
            str(JOBS),
            "--prometheus",
            "http://127.0.0.1:9",
            "--timeout",
            "2",
        ],
    )
    assert unreachable.exit_code != 0 and "cannot reach Prometheus" in unreachable.output
