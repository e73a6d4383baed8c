"""State that lasts (generator/signals/durable.py): carried rules on the real promtool, the fleet
replay's Python carry equal to what Prometheus records, and the long-horizon tests in the mode
the example specs do not use and with max_pause longer than restart_window (issue 26)."""

from __future__ import annotations

from pathlib import Path

from trainsignals.generator.alerts.rules import alert_rules
from trainsignals.generator.output.yaml import dump
from trainsignals.generator.pipeline import rules_document
from trainsignals.generator.rules.long_horizon import STEP, dead_job_test, long_suite
from trainsignals.generator.rules.unit_tests import promtool_suite
from trainsignals.generator.signals.durable import (
    CARRIED_BY_RECORD,
    CHECKPOINT_COVERS,
    LAST_STEP,
    carried_expr,
    carry,
)
from trainsignals.generator.signals.promql import RuleContext, matchers
from trainsignals.generator.spec.job import JobSpec
from trainsignals.generator.testkit.series_notation import encode

from .promtool_subsets import promtool_test

BASE = {
    "name": "durable",
    "team": "ml",
    "shape": {"gpu_model": "H100-SXM", "model_flops_per_token": 4.2e10},
    "routing": {"notify_nobody": ["page", "ticket"]},
}


def _ctx(**recovery: object) -> RuleContext:
    return RuleContext(JobSpec.model_validate({**BASE, "recovery": recovery}))


# Inputs of the two carried shapes, minute by minute (None: absent), over 40 minutes.
MINUTES = 40
NEW = [None] * 3 + [120.0, 180.0, None, None, 150.0] + [None] * 10 + [1200.0] + [None] * 22
FALLBACK = [None, 5.0, 7.0] + [9.0] * 38
STILL = [0.0] * 10 + [1.0] * 12 + [None] * 3 + [0.0, 1.0] * 6 + [1.0] * 4


def _seen(values: list) -> list:
    """What an instant query reads at each minute: the newest sample of the last 5 (promtool's
    lookback; the fleet replay's Prometheus reads only the sample of that instant)."""
    seen, last = [], None
    for minute, value in enumerate(values):
        if value is not None:
            last = (minute, value)
        seen.append(last[1] if last is not None and minute - last[0] < 5 else None)
    return seen


def test_python_carry_equals_what_promtool_records(tmp_path: Path) -> None:
    """durable.carry (the fleet replay) against carried_expr on Prometheus' own engine, for a
    high-water mark with a fallback and a state that drifts, over gaps of every input."""
    ctx = _ctx()
    r = ctx.recorded()
    rules = [
        {
            "record": name,
            "expr": carried_expr(ctx, CARRIED_BY_RECORD[name]),
            "labels": ctx.job_label,
        }
        for name in (LAST_STEP, CHECKPOINT_COVERS)
    ]
    (tmp_path / "carried.rules.yaml").write_text(
        dump({"groups": [{"name": "trainsignals-durable-recording", "rules": rules}]})
    )
    series = {}
    for name in (LAST_STEP, CHECKPOINT_COVERS):
        state = CARRIED_BY_RECORD[name]
        series[state.new] = NEW
        series[state.fallback] = FALLBACK
        if state.drift:
            series[state.drift] = STILL
    times = [60.0 * m for m in range(MINUTES + 1)]
    checks = []
    for name in (LAST_STEP, CHECKPOINT_COVERS):
        state = CARRIED_BY_RECORD[name]
        drift = _seen(STILL) if state.drift else None
        values, _ = carry(times, _seen(NEW), _seen(FALLBACK), drift)
        assert values[1] == 5.0 and values[4] == 180.0  # a fallback, then the high-water mark
        for minute, value in enumerate(values):
            checks.append(
                {
                    "expr": f"{name}{r}",
                    "eval_time": f"{minute}m",
                    "exp_samples": []
                    if value is None
                    else [{"labels": f"{name}{r}", "value": value}],
                }
            )
    assert carry(times, NEW, FALLBACK, STILL)[0][-1] != carry(times, NEW, FALLBACK)[0][-1]
    suite = promtool_suite(ctx, "carried.rules.yaml", [])
    suite["tests"] = [
        {
            "interval": "1m",
            "input_series": [
                {"series": name + matchers(ctx.job_label), "values": encode(values)}
                for name, values in series.items()
            ],
            "promql_expr_test": checks,
        }
    ]
    (tmp_path / "carried.test.yaml").write_text(dump(suite))
    result = promtool_test("carried.test.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def _document(ctx: RuleContext) -> dict:
    return rules_document(ctx, alert_rules(ctx))


def _write(folder: Path, document: dict, suite: dict) -> None:
    (folder / "job.rules.yaml").write_text(dump(document))
    (folder / "job.test.yaml").write_text(dump(suite))


def test_long_horizon_tests_pass_in_auto_restart_mode(tmp_path: Path) -> None:
    """The example specs' own files run the manual mode's (make check); here auto_restart's."""
    ctx = _ctx(mode="auto_restart")
    document = _document(ctx)
    _write(tmp_path, document, long_suite(ctx, "job.rules.yaml", document))
    result = promtool_test("job.test.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_max_pause_longer_than_restart_window_pages_a_dead_job_throughout(tmp_path: Path) -> None:
    """max_pause 2h, restart_window 1h: the no-progress page holds for 8 hours (issue 26: it
    flapped, 6 episodes in 6 h, when its memory was the window)."""
    ctx = RuleContext(
        JobSpec.model_validate(
            {
                **BASE,
                "objectives": {"max_pause": "2h"},
                "recovery": {"mode": "auto_restart", "restart_window": "1h"},
            }
        )
    )
    document = _document(ctx)
    suite = promtool_suite(ctx, "job.rules.yaml", [dead_job_test(ctx, document)])
    suite["evaluation_interval"] = f"{STEP}m"
    _write(tmp_path, document, suite)
    result = promtool_test("job.test.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
